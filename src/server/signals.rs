//! The signal forwarder of a cluster's partition: a signal a process throws
//! here reaches the receivers here in the throwing step, and every other
//! partition through this loop, which sends it to each of them with its id
//! (`POST /signals`) and forgets it only when all of them took it.
//!
//! Invariants: a thrown signal is kept (in the step that threw it) until every
//! other partition answered 2xx, so it reaches each at least once; each
//! applies it once (by id, [`crate::Postfach::signal_once`]); a partition that
//! is down delays the signal for everyone after it in the loop, never drops
//! it. A signal that reached no receiver on any partition is counted once,
//! here, when the last partition answered.

use super::gateway::client::Partitions;
use crate::Postfach;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use serde_json::{Value, json};
use std::time::Duration;

/// Signals taken from the table per round.
const ROUND: usize = 100;

/// Starts forwarding the signals thrown on partition `me` to the other
/// partitions at `urls` (every partition's, by number), with `token` as
/// bearer token. Runs until aborted.
pub(super) fn spawn(
    pf: Postfach,
    urls: Vec<String>,
    token: Option<String>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let me = pf.partition().index();
        let peers = Partitions::new(urls);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(t) = token
            .as_deref()
            .and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok())
        {
            headers.insert(header::AUTHORIZATION, t);
        }
        let mut backoff = Duration::from_millis(100);
        loop {
            match round(&pf, &peers, me, &headers).await {
                Ok(true) => backoff = Duration::from_millis(100),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "signals thrown here could not reach every partition yet");
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
            tokio::time::sleep(backoff).await;
        }
    })
}

/// One round: every kept signal to every other partition. `Ok(true)` when
/// everything kept went out, an error naming the first partition that did
/// not take one.
async fn round(
    pf: &Postfach,
    peers: &Partitions,
    me: u32,
    headers: &HeaderMap,
) -> Result<bool, String> {
    let out = pf
        .reader()
        .and_then(|r| r.signals_out(ROUND).map_err(Into::into))
        .map_err(|e| e.to_string())?;
    if out.is_empty() {
        return Ok(false);
    }
    let mut done = Vec::new();
    let mut failed = None;
    for s in &out {
        let body = Bytes::from(json!({"name": s.name, "id": s.id}).to_string());
        let mut reached = s.reached;
        let mut all = true;
        for i in (0..peers.count()).filter(|i| *i != me) {
            match peers
                .send(i, Method::POST, "/signals", headers, body.clone())
                .await
            {
                Ok(a) if a.status.is_success() => {
                    reached += a
                        .json()
                        .and_then(|v| v.get("reached").and_then(Value::as_u64))
                        .unwrap_or(0);
                }
                Ok(a) => {
                    failed.get_or_insert(format!(
                        "partition {i} answered {} to signal {}",
                        a.status, s.id
                    ));
                    all = false;
                    break;
                }
                Err(u) => {
                    failed.get_or_insert(u.to_string());
                    all = false;
                    break;
                }
            }
        }
        if all {
            done.push((s.seq, reached == 0));
        }
    }
    if !done.is_empty() {
        pf.signals_forwarded(done)
            .await
            .map_err(|e| e.to_string())?;
    }
    match failed {
        Some(f) => Err(f),
        None => Ok(true),
    }
}

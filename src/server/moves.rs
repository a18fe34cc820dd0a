//! A partition's side of slot moves over HTTP: the runner that drives the
//! moves leaving it, sending each step its target applies to the target's
//! `POST /slots/steps` (the step as the log encodes it, in base64), with
//! the partition's own token.
//!
//! Invariant: a step counts as taken at the target only on a 2xx answer;
//! anything else leaves the move where it is, to be driven again.

use crate::engine::MoveCommand;
use crate::runtime::MoveTarget;
use crate::server::client::Http;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use std::time::Duration;

/// How long the runner rests when no move leaves this partition.
const IDLE: Duration = Duration::from_millis(200);

/// The targets of moves, over HTTP.
pub(crate) struct HttpTargets {
    client: Http,
    token: Option<String>,
}

impl HttpTargets {
    pub(crate) fn new(token: Option<String>) -> Self {
        HttpTargets {
            client: Http::new(Duration::from_secs(2), Duration::from_secs(60)),
            token,
        }
    }
}

impl MoveTarget for HttpTargets {
    async fn send(&self, url: &str, step: &MoveCommand) -> Result<(), String> {
        let body =
            crate::server::http::requests::SlotStepBody::of(step).map_err(|e| e.to_string())?;
        let body = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(t) = &self.token
            && let Ok(v) = HeaderValue::from_str(&format!("Bearer {t}"))
        {
            headers.insert(header::AUTHORIZATION, v);
        }
        let full = format!("{}/slots/steps", url.trim_end_matches('/'));
        let a = self
            .client
            .send(Method::POST, &full, &headers, Bytes::from(body))
            .await
            .map_err(|e| e.to_string())?;
        if a.status.is_success() {
            return Ok(());
        }
        Err(format!(
            "{full} answered {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        ))
    }
}

/// Drives every move leaving `pf` until the server stops: a step after
/// another while one is in flight (resting as long as the step took, as
/// batches do), every [`IDLE`] otherwise.
pub(crate) fn spawn_runner(
    pf: crate::Postfach,
    token: Option<String>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let targets = HttpTargets::new(token);
        loop {
            let took = std::time::Instant::now();
            let rest = match pf.drive_moves(&targets).await {
                Ok(d) if d.stepped > 0 => took.elapsed(),
                Ok(_) => IDLE,
                Err(e) => {
                    tracing::warn!(error = %e, "a slot move did not take its step; it is tried again");
                    Duration::from_secs(1)
                }
            };
            tokio::time::sleep(rest).await;
        }
    })
}

//! The outbox of events about parked messages (`[notifications]
//! parked_topic`): publishes what the engine kept
//! ([`crate::ops::Reader::parked_events`]) to the topic, each with its stable
//! id as attribute `eventId`, and tells the engine which ones the broker
//! confirmed.
//!
//! Invariant: an event row is removed only after Pub/Sub confirmed its
//! publish; a failed or unconfirmed publish leaves it for the next round, and
//! a crash between confirmation and removal publishes it again under the same
//! `eventId` — at least once on the wire, exactly once for a receiver that
//! deduplicates by the id. Rounds back off while the broker fails.

use super::outbox::{MESSAGE_ID_ATTRIBUTE, PUBLISH_TIMEOUT};
use crate::Postfach;
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;
use std::time::Duration;

/// Events published per round.
const ROUND: usize = 256;

/// How often an idle publisher looks for new events.
const IDLE: Duration = Duration::from_millis(500);

/// Longest pause after failed rounds.
const BACKOFF_CAP: Duration = Duration::from_secs(60);

/// Attribute naming what happened (`parked`, `expired`, `requeued`, `discarded`).
pub const EVENT_ATTRIBUTE: &str = "postfachEvent";

/// Publishes events until the task is aborted (nothing is lost then: what
/// was not confirmed stays kept).
pub async fn run(pf: Postfach, publisher: Publisher, topic: String) {
    let mut pause = IDLE;
    loop {
        match round(&pf, &publisher).await {
            Ok(0) => pause = IDLE,
            Ok(_) => continue,
            Err(e) => {
                pause = (pause * 2).clamp(Duration::from_secs(1), BACKOFF_CAP);
                tracing::warn!(topic = %topic, error = %e, retry_in = ?pause, "events about parked messages could not be published; they stay kept");
            }
        }
        tokio::time::sleep(pause).await;
    }
}

/// One round: publishes up to [`ROUND`] kept events at once and forgets the
/// confirmed ones. Returns how many were confirmed; an error when none was
/// and some failed.
async fn round(pf: &Postfach, publisher: &Publisher) -> Result<usize, String> {
    let (events, _) = pf
        .reader()
        .and_then(|r| r.parked_events(ROUND).map_err(Into::into))
        .map_err(|e| e.to_string())?;
    if events.is_empty() {
        return Ok(0);
    }
    let mut sends = tokio::task::JoinSet::new();
    for e in events {
        let kind = serde_json::from_slice::<serde_json::Value>(&e.data)
            .ok()
            .and_then(|v| v["event"].as_str().map(str::to_string))
            .unwrap_or_default();
        let msg = Message::new().set_data(e.data).set_attributes([
            (MESSAGE_ID_ATTRIBUTE.to_string(), e.event_id.clone()),
            (EVENT_ATTRIBUTE.to_string(), kind),
        ]);
        let publisher = publisher.clone();
        sends.spawn(async move {
            match tokio::time::timeout(PUBLISH_TIMEOUT, publisher.publish(msg)).await {
                Ok(Ok(_)) => Ok(e.id),
                Ok(Err(err)) => Err(format!("{}: {err}", e.event_id)),
                Err(_) => Err(format!(
                    "{}: no confirmation within {} s",
                    e.event_id,
                    PUBLISH_TIMEOUT.as_secs()
                )),
            }
        });
    }
    let mut sent = Vec::new();
    let mut failed = Vec::new();
    while let Some(r) = sends.join_next().await {
        match r {
            Ok(Ok(id)) => sent.push(id),
            Ok(Err(e)) => failed.push(e),
            Err(e) => failed.push(format!("publish task: {e}")),
        }
    }
    let confirmed = sent.len();
    if !sent.is_empty() {
        pf.parked_events_sent(sent)
            .await
            .map_err(|e| e.to_string())?;
    }
    match failed.first() {
        Some(first) if confirmed == 0 => Err(format!(
            "{} event(s) not published, first {first}",
            failed.len()
        )),
        _ => Ok(confirmed),
    }
}

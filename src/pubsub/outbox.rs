//! The outbox of send tasks: a send task bound to a topic (`postfach:topic` in
//! the model, or `--send-topic ELEMENT=TOPIC` at deploy) becomes a job on
//! `pubsub:TOPIC`, written in the transaction that reaches the task. This handler
//! publishes the instance's variables as JSON with the job's idempotency key as
//! attribute `eventId`, and completes the task only after Pub/Sub confirmed.
//!
//! Invariant: the message id (`eventId`) is the same for every attempt and
//! every crash of one task activation, so a receiver that deduplicates by it sees
//! the order exactly once; a failed or timed-out publish is a failed attempt
//! (retried with the job backoff), never a completed task.

use super::{Connection, PubsubError};
use crate::jobs::{Handler, HandlerError, JobContext};
use crate::{Postfach, Vars};
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;
use std::time::Duration;

/// Job topics of outbox tasks start with this.
pub const JOB_TOPIC_PREFIX: &str = "pubsub:";

/// Attribute carrying the stable message id.
pub const MESSAGE_ID_ATTRIBUTE: &str = "eventId";

/// How long one publish may take before the attempt counts as failed.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// The job topic of a Pub/Sub topic.
pub fn job_topic(topic: &str) -> String {
    format!("{JOB_TOPIC_PREFIX}{topic}")
}

/// The handler that publishes outbox entries of `topic`.
pub fn handler(publisher: Publisher, topic: String) -> impl Handler {
    move |job: JobContext| {
        let publisher = publisher.clone();
        let topic = topic.clone();
        async move {
            let data = serde_json::to_vec(&job.variables)
                .map_err(|e| HandlerError::Failed(format!("encode order: {e}")))?;
            let msg = Message::new().set_data(data).set_attributes([
                (
                    MESSAGE_ID_ATTRIBUTE.to_string(),
                    job.idempotency_key.clone(),
                ),
                ("postfachInstance".to_string(), job.instance.to_string()),
                ("postfachElement".to_string(), job.element.clone()),
            ]);
            match tokio::time::timeout(PUBLISH_TIMEOUT, publisher.publish(msg)).await {
                Ok(Ok(id)) => {
                    tracing::debug!(topic = %topic, event_id = %job.idempotency_key, pubsub_message_id = %id, "outbox entry published");
                    Ok(Vars::new())
                }
                Ok(Err(e)) => Err(HandlerError::Failed(format!("publish to {topic}: {e}"))),
                Err(_) => Err(HandlerError::Failed(format!(
                    "publish to {topic}: no confirmation within {} s",
                    PUBLISH_TIMEOUT.as_secs()
                ))),
            }
        }
    }
}

/// Registers a publishing handler for every topic send tasks are bound to.
pub async fn register(
    pf: &Postfach,
    conn: &Connection,
    topics: impl IntoIterator<Item = String>,
) -> Result<(), PubsubError> {
    for topic in topics {
        let publisher = conn.publisher(&topic).await?;
        pf.register_handler(&job_topic(&topic), handler(publisher, topic));
    }
    Ok(())
}

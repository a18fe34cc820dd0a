//! The outbox of send tasks: a send task bound to a topic (`postfach:topic` in
//! the model, or `--send-topic ELEMENT=TOPIC` at deploy) becomes a job on
//! `pubsub:TOPIC`, written in the transaction that reaches the task. This handler
//! publishes the instance's variables as JSON with the job's idempotency key as
//! attribute `eventId`, and completes the task only after Pub/Sub confirmed.
//!
//! A payload larger than `[storage] claim_check_above` goes out as a claim
//! check: uploaded to `[storage] claim_check_bucket` as
//! `postfach/TOPIC/IDEMPOTENCY_KEY.json`, then published lean — the scalar
//! variables (the correlation key among them), `claimCheck` with the
//! `gs://` URI, and the object in Cloud Storage notification attributes
//! (`bucketId`, `objectId`, `objectGeneration`), so a receiving postfach with
//! `claim_check = "attributes"` or `"/claimCheck"` resolves it.
//!
//! Invariant: the message id (`eventId`) is the same for every attempt and
//! every crash of one task activation, so a receiver that deduplicates by it sees
//! the order exactly once; a failed or timed-out publish is a failed attempt
//! (retried with the job backoff), never a completed task. The object name is
//! derived from the same key, so a retry or a crash between upload and publish
//! rewrites the one object of the hand-over instead of adding another.

use super::{Connection, PubsubError};
use crate::jobs::{Handler, HandlerError, JobContext};
use crate::objects::{ObjectRef, ObjectStore};
use crate::{Postfach, Vars};
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// Where an outbox puts payloads too large to publish whole.
#[derive(Clone)]
pub struct ClaimCheckOut {
    /// The object store.
    pub store: Arc<dyn ObjectStore>,
    /// The bucket.
    pub bucket: String,
    /// Payload bytes above which the payload is uploaded.
    pub above: u64,
}

/// Variable of a lean message that carries the `gs://` URI.
pub const CLAIM_CHECK_VARIABLE: &str = "claimCheck";

/// Longest text variable a lean message keeps (longer ones are in the object only).
pub const LEAN_TEXT_MAX: usize = 1024;

/// The object name of a hand-over: one per idempotency key.
pub fn object_name(topic: &str, idempotency_key: &str) -> String {
    format!("postfach/{topic}/{idempotency_key}.json")
}

/// The lean message: scalar variables (texts up to [`LEAN_TEXT_MAX`] bytes),
/// and the reference as `claimCheck`.
pub fn lean(vars: &Vars, reference: &ObjectRef) -> Vars {
    let mut lean: Vars = vars
        .iter()
        .filter(|(_, v)| match v {
            Value::String(s) => s.len() <= LEAN_TEXT_MAX,
            Value::Number(_) | Value::Bool(_) | Value::Null => true,
            Value::Array(_) | Value::Object(_) => false,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    lean.insert(
        CLAIM_CHECK_VARIABLE.into(),
        Value::String(reference.to_uri()),
    );
    lean
}

/// `$POSTFACH_TEST_HOLD_AFTER_UPLOAD=1`: an outbox stops between upload and
/// publish (tests kill the process there). Fault injection exists only in
/// builds with debug assertions (the test builds), never in a release binary.
fn hold_after_upload() -> bool {
    cfg!(debug_assertions)
        && std::env::var("POSTFACH_TEST_HOLD_AFTER_UPLOAD").is_ok_and(|v| v == "1")
}

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

/// The handler that publishes outbox entries of `topic`, large ones as a
/// claim check when `claim_check` is given.
pub fn handler(
    publisher: Publisher,
    topic: String,
    claim_check: Option<ClaimCheckOut>,
) -> impl Handler {
    move |job: JobContext| {
        let publisher = publisher.clone();
        let topic = topic.clone();
        let claim_check = claim_check.clone();
        async move {
            let mut data = serde_json::to_vec(&job.variables)
                .map_err(|e| HandlerError::Failed(format!("encode order: {e}")))?;
            let mut attributes = vec![
                (
                    MESSAGE_ID_ATTRIBUTE.to_string(),
                    job.idempotency_key.clone(),
                ),
                ("postfachInstance".to_string(), job.instance.to_string()),
                ("postfachElement".to_string(), job.element.clone()),
            ];
            if let Some(cc) = claim_check.filter(|cc| data.len() as u64 > cc.above) {
                let name = object_name(&topic, &job.idempotency_key);
                let size = data.len();
                let r = cc.store.write(&cc.bucket, &name, data).await?;
                tracing::debug!(topic = %topic, event_id = %job.idempotency_key, object = %r, size, "claim check uploaded");
                if hold_after_upload() {
                    eprintln!("postfach: test hold after uploading {r}");
                    std::future::pending::<()>().await;
                }
                data = serde_json::to_vec(&lean(&job.variables, &r))
                    .map_err(|e| HandlerError::Failed(format!("encode order: {e}")))?;
                attributes.push(("bucketId".into(), r.bucket.clone()));
                attributes.push(("objectId".into(), r.object.clone()));
                if let Some(g) = r.generation {
                    attributes.push(("objectGeneration".into(), g.to_string()));
                }
            }
            // the order carries the trace on: the job's, which continues the
            // trace of the message or call that reached the send task
            let span = tracing::info_span!(
                target: crate::trace::TARGET,
                "pubsub.publish",
                otel.kind = "producer",
                topic = %topic,
                event_id = %job.idempotency_key,
            );
            attributes.extend(crate::trace::context_of(&span));
            let msg = Message::new().set_data(data).set_attributes(attributes);
            match tokio::time::timeout(PUBLISH_TIMEOUT, publisher.publish(msg))
                .instrument(span)
                .await
            {
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
    claim_check: Option<ClaimCheckOut>,
) -> Result<(), PubsubError> {
    for topic in topics {
        let publisher = conn.publisher(&topic).await?;
        pf.register_handler(
            &job_topic(&topic),
            handler(publisher, topic, claim_check.clone()),
        );
    }
    Ok(())
}

//! postfach: an embedded BPMN runtime whose messages wait durably in the engine.
//!
//! A completion message that overtakes its process waits in a TTL buffer; one
//! that arrives late, ambiguous or undecodable is parked with its reason; every
//! message ends in exactly one recorded outcome. Everything lives in one redb
//! file, and every call that changes state returns after a durable commit.
//!
//! ```no_run
//! use postfach::{Postfach, Publish, vars};
//! # async fn run() -> Result<(), postfach::Error> {
//! let pf = Postfach::open("orders.redb")?;
//! let xml = std::fs::read_to_string("bpmn/auftrag-ausfuehrung.bpmn").unwrap();
//! pf.deploy("auftrag-ausfuehrung.bpmn", &xml,
//!     [("AuftragAbgeschlossen".into(), "auftragId".into())].into()).await?;
//! pf.register_handler("rechnungStellen", |job: postfach::JobContext| async move {
//!     println!("invoice {}", job.idempotency_key);
//!     Ok(postfach::Vars::new())
//! });
//! let id = pf.start("auftrag-ausfuehrung", vars([("auftragId", "4711".into())]), None).await?;
//! // the completion may come before the instance waits: it is buffered
//! pf.publish(Publish { name: "AuftragAbgeschlossen".into(), key: "4711".into(),
//!     message_id: Some("evt-1".into()), ..Default::default() }).await?;
//! pf.work_until_idle().await?;
//! assert_eq!(pf.reader()?.instance(id)?.unwrap().state, "completed");
//! # Ok(()) }
//! ```

pub mod clock;
pub mod codec;
mod commit;
#[cfg(feature = "server")]
pub mod contract;
#[cfg(feature = "server")]
pub mod demo;
pub mod engine;
pub mod ingress;
pub mod jobs;
pub mod limits;
pub mod model;
pub mod ops;
#[cfg(feature = "pubsub")]
pub mod pubsub;
pub mod reference;
pub mod runtime;
#[cfg(feature = "server")]
pub mod server;
pub mod store;

pub use clock::{Clock, ManualClock, Millis, SystemClock};
pub use commit::wal::{LogState, Salvage as LogSalvage};
pub use engine::{
    Config, Delivery, Deployed, EngineError, JobRefusal, LockedJob, Malformed, Outcome, Publish,
    Repair,
};
pub use jobs::{HandlerError, JobContext};
pub use runtime::{Error, Options, Postfach, Recovery, WorkReport};
pub use store::{JobState, MessageState, Reason};

/// Process variables: a JSON object.
pub type Vars = serde_json::Map<String, serde_json::Value>;

/// Builds variables from pairs: `vars([("auftragId", "4711".into())])`.
pub fn vars<const N: usize>(pairs: [(&str, serde_json::Value); N]) -> Vars {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

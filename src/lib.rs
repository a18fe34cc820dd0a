//! postfach: an embedded BPMN runtime whose messages wait durably in the engine.
//!
//! A completion message that overtakes its process waits in a TTL buffer; one
//! that arrives late, ambiguous or undecodable is parked with its reason; every
//! message ends in exactly one recorded outcome. Everything lives in one redb
//! file, and every call that changes state returns after a durable commit.
//!
//! # The public face
//!
//! - [`Postfach`], opened with [`Options`], is the whole embedding API:
//!   deploy, start, publish and correlate, jobs and handlers, repair, readers.
//! - Its errors: [`Error`], with [`EngineError`] and [`StoreError`] inside.
//! - Messages and jobs: [`Publish`], [`Delivery`], [`Outcome`], [`Reason`],
//!   [`JobContext`], [`LockedJob`], [`HandlerError`]; [`clock`] for injected time.
//! - Claim checks (large payloads by reference): [`objects`] — the checked
//!   reference a job reads with `JobContext::claim_check`, and the `ObjectStore`
//!   trait (Cloud Storage in `pubsub::CloudStorage`).
//! - Readers and views for operators: [`ops`]; BPMN models: [`model`];
//!   documented ranges of every configurable value: [`limits`].
//!
//! # Cargo features
//!
//! - `server` (default): the HTTP API, `postfach.toml`, alarms and metrics
//!   (module `server`), the demo and the `postfach` binary.
//! - `pubsub` (default, implies `server`): the Pub/Sub ingress and outbox, and
//!   Cloud Storage for claim checks.
//!
//! `default-features = false` compiles the embeddable engine alone (tokio,
//! redb, serde, bincode, quick-xml, tracing, thiserror); see
//! `examples/embedded.rs`.
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

#![deny(missing_docs)]

#[cfg(feature = "server")]
pub mod alarms;
pub mod audit;
pub mod backup;
pub mod clock;
mod codec;
mod commit;
#[cfg(feature = "server")]
pub mod config;
#[cfg(feature = "server")]
pub mod contract;
#[cfg(feature = "server")]
pub mod demo;
mod disk;
mod engine;
mod error;
mod files;
mod handler;
mod histogram;
pub mod ingress;
pub mod jobs;
pub mod limits;
pub mod model;
pub mod objects;
pub mod ops;
mod options;
pub mod partition;
#[cfg(test)]
mod power_loss;
#[cfg(feature = "pubsub")]
pub mod pubsub;
pub mod reference;
mod runtime;
#[cfg(feature = "server")]
pub mod server;
pub mod slots;
mod store;
pub mod trace;

pub use clock::{Clock, ManualClock, Millis, SystemClock};
pub use codec::CodecError;
pub use commit::wal::{LogState, Salvage as LogSalvage};
pub use engine::{
    Carry, Config, Delivery, Deployed, EngineError, JobRefusal, LockedJob, Malformed, Migrated,
    MigrationPlan, MigrationReport, Outcome, ParkedEvent, Publish, Repair, TaskAction, TaskRefusal,
    TokenMove, Triggered, backoff,
};
pub use engine::{MAX_BATCH_ITEMS, MoveCommand};
pub use jobs::{HandlerError, JobContext};
pub use model::{Vars, vars};
pub use runtime::{
    Archive, BATCH_SLICE, CommitStats, Deployment, Driven, Error, MIGRATE_IN_CALL, MOVE_SLICE,
    MoveTarget, Options, Postfach, Recovery, Selection, WorkReport,
};
pub use store::batches::{BatchItem, BatchOp, BatchRecord, BatchState, BatchStatus, ItemOutcome};
pub use store::damage::install_hook as install_damage_hook;
pub use store::{FileCheck, JobState, MessageState, ParkedEvents, Reason, StoreError, TaskRecord};

/// The book's chapter on embedding (docs/src/embedding.md): its Rust
/// examples run as doctests, so the book shows code that compiles and works.
#[cfg(all(doctest, feature = "server"))]
#[doc = include_str!("../docs/src/embedding.md")]
mod book_embedding {}

//! Who changed what: the principal a caller's commands are done by, and the
//! audit trail of the changes a person or a service made.
//!
//! Invariant: a command that changes what runs or repairs it — a deploy, a
//! token added, moved or cancelled, a message requeued or discarded, a job
//! retried, a cleanup, a user task action, a wait state triggered, an
//! ad-hoc activity, a backup taken — submitted inside [`acting`] travels as one logged
//! command with its principal and is applied together with its audit entry,
//! in the same transaction: the change and the record of who made it are
//! durable together or not at all. The process's own traffic (publishes,
//! starts, a worker's jobs, the executor, the Pub/Sub ingress) is not
//! audited: the instance history tells it. Entries are removed by retention
//! like completed instances.

use crate::clock::Millis;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

tokio::task_local! {
    static ACTOR: Arc<str>;
}

/// Runs `f` with the audited commands it submits recorded as done by `who`
/// (the HTTP API's token layer wraps every request in it).
pub async fn acting<F: std::future::Future>(who: Arc<str>, f: F) -> F::Output {
    ACTOR.scope(who, f).await
}

/// The principal of the running task, if it acts as one.
pub(crate) fn actor() -> Option<Arc<str>> {
    ACTOR.try_with(Arc::clone).ok()
}

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Its place in the trail (ascending with time).
    pub seq: u64,
    /// When the change was applied.
    pub at: Millis,
    /// Who made it: a token's name, an identity's name.
    pub who: String,
    /// What was done (`deploy`, `move-token`, `discard`, …).
    pub operation: String,
    /// What it was done to (`instance 7 token 3 → versand`, `message m-1`).
    pub target: String,
}

/// Which entries to list: newest first, at most `limit`.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only entries at or after this instant.
    pub since: Option<Millis>,
    /// Only this principal's.
    pub who: Option<String>,
    /// At most this many (default [`AUDIT_PAGE`]).
    pub limit: Option<usize>,
}

/// The default and largest number of entries listed at once.
pub const AUDIT_PAGE: usize = 1000;

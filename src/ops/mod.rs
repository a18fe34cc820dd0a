//! Read views for operators: instances, who waits where and since when, buffered
//! and parked messages, jobs and incidents, counters.
//!
//! Invariant: this module only reads (a redb read snapshot); it never changes
//! state and never blocks the writer. Views serialise to the JSON shapes of the
//! command line contract.
//!
//! One module per view family: [`instances`], [`messages`], [`jobs`],
//! [`tasks`], [`processes`], [`batches`], [`slots`]; each adds its questions to the one [`Reader`].

mod batches;
mod decisions;
mod instances;
mod jobs;
mod messages;
mod processes;
mod slots;
mod tasks;

pub use batches::{REFUSED_SHOWN, batch_json};
pub use decisions::{Decision, DecisionView};
pub use instances::{
    CandidateView, HistoryView, InstanceDetail, InstanceFilter, InstancePage, InstancePaging,
    InstanceView, SubscriptionView, TokenView, WaitingView,
};
pub use jobs::{AttemptView, JobView};
pub use messages::{
    MessageCursorError, MessageFilter, MessagePage, MessageView, OutgoingSignal, PendingEvent,
};
pub use processes::{DeployedView, ElementStatistics, ProcessStatistics, VersionView};
pub use slots::{move_json, slots_json};
pub use tasks::{TaskFilter, TaskView};

use crate::clock::Millis;
use crate::engine::DefCache;
use crate::store::*;
use std::sync::Arc;

/// Records one page examines at most.
pub const PAGE_SCAN_BUDGET: usize = 5_000;

/// A consistent read snapshot.
pub struct Reader {
    snap: Snapshot,
    defs: Arc<DefCache>,
    now: Millis,
}

type RErr = StoreError;

impl Reader {
    pub(crate) fn new(snap: Snapshot, defs: Arc<DefCache>, now: Millis) -> Self {
        Self { snap, defs, now }
    }

    /// The instant this snapshot was taken at.
    pub fn now(&self) -> Millis {
        self.now
    }
}

pub use crate::histogram::Histogram;

//! Compensable work: what a completed activity leaves behind so that its
//! compensation handler can undo it later (`compensations` rows).
//!
//! Invariant: a row exists only for an activity that completed (never for
//! one that is running or was cancelled) in an instance that has not ended;
//! it is removed when its compensation starts, when the scope it belongs to
//! is cancelled, or when the instance ends.

use crate::clock::Millis;
use crate::codec::json_text;
use crate::model::Vars;
use serde::{Deserialize, Serialize};

/// One completion of an activity that can be compensated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compensable {
    /// The scope it completed in: the token holding that scope (0: the
    /// process). A throw compensates the rows of its own scope.
    pub scope: u64,
    /// The activity's id.
    pub element: String,
    /// When it completed.
    pub completed_at: Millis,
    /// The id of its compensation handler (the activity its compensation
    /// boundary event is associated with), if it has one.
    pub handler: Option<String>,
    /// A subprocess: the token that held its scope, whose id the rows of
    /// the activities completed inside it keep as their scope.
    pub inner: Option<u64>,
    /// The variables local to it when it completed (a multi-instance inner
    /// instance's item and counter): its handler sees them.
    #[serde(with = "json_text")]
    pub locals: Vars,
}

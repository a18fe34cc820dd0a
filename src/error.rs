//! The errors of the public API: what the engine, the store, a range check or
//! a handler's task refused or hit, each kept as its own kind.
//!
//! Invariant: exhaustive — each edge (the command line's hints, the HTTP
//! status) places every kind deliberately.

use crate::engine::EngineError;
use crate::store::StoreError;

/// Errors of the public API.
#[derive(Debug, thiserror::Error)]
// exhaustive on purpose: each edge (CLI hints, HTTP status) places every
// kind deliberately; a new kind is a breaking change and versioned as one
pub enum Error {
    /// The engine refused the command or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A value given was outside its documented range.
    #[error(transparent)]
    OutOfRange(#[from] crate::limits::OutOfRange),
    /// A background task of the runtime failed.
    #[error("a runtime task failed: {0}")]
    Task(String),
    #[error(
        "message '{name}' with key '{key}' cannot be correlated: {reason}{}",
        if candidates.is_empty() { String::new() } else { format!(" (candidate instances: {})", candidates.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")) }
    )]
    /// A synchronous correlation found no single waiting instance.
    Rejected {
        /// The message name.
        name: String,
        /// The correlation key.
        key: String,
        /// Why (a park reason's name).
        reason: &'static str,
        /// Instances that could have taken it.
        candidates: Vec<u64>,
    },
}

impl Error {
    /// True for business refusals (exit code 3 on the command line).
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            Error::Rejected { .. }
                | Error::Engine(
                    EngineError::RepairRefused { .. }
                        | EngineError::NoSingleScope { .. }
                        | EngineError::MigrationRefused { .. }
                )
        )
    }
}

//! Time as an injected dependency.
//!
//! Invariant: the engine never reads the wall clock. The writer asks a [`Clock`]
//! once per batch and hands the instant to the engine, so TTLs, dedup windows and
//! job due times are exact under a [`ManualClock`] in tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// The current time in milliseconds since the Unix epoch.
    fn now(&self) -> Millis;
}

/// The operating system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to; share it with `Arc` and advance it from tests.
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock standing at `start` milliseconds since the epoch.
    pub fn new(start: Millis) -> Arc<Self> {
        Arc::new(Self(AtomicU64::new(start)))
    }
    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
    /// Sets the clock to an instant.
    pub fn set(&self, at: Millis) {
        self.0.store(at, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// Formats an instant as RFC 3339 with milliseconds, in UTC.
pub fn rfc3339(at: Millis) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(at)).to_string()
}

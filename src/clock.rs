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

/// Formats an instant as RFC 3339 with milliseconds, in UTC
/// (`2026-12-03T09:33:34.123Z`).
///
/// Total over `u64`: an instant past 9999-12-31 (which no caller may hand in any
/// more, but an older database may hold) is written with the longer year of ISO
/// 8601's expanded form (`+10000-01-01T…`) instead of failing.
pub fn rfc3339(at: Millis) -> String {
    let days = at / 86_400_000;
    let in_day = at % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, ms) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let sign = if year > 9999 { "+" } else { "" };
    format!("{sign}{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// The proleptic Gregorian date of a day number since 1970-01-01 (H. Hinnant's
/// `civil_from_days`, for non-negative day numbers).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn instants_beyond_year_9999_still_render() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(crate::limits::MAX_INSTANT),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339(crate::limits::MAX_INSTANT + 1),
            "+10000-01-01T00:00:00.000Z"
        );
        assert!(rfc3339(u64::MAX).starts_with('+'));
    }

    proptest! {
        #[test]
        fn every_instant_renders_as_humantime_does_within_its_range(at in 0..=crate::limits::MAX_INSTANT) {
            let expected = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(at)).to_string();
            prop_assert_eq!(rfc3339(at), expected);
        }

        #[test]
        fn every_instant_renders(at in any::<u64>()) {
            let s = rfc3339(at);
            prop_assert!(s.ends_with('Z'));
        }
    }
}

//! The ranges of durations and instants that enter postfach from outside.
//!
//! Invariant: a duration or an instant that a caller hands in — through the
//! library, the command line, HTTP, the configuration file, Pub/Sub attributes or
//! a BPMN timer — is checked against its [`Limit`] before anything is stored, and
//! a value out of range is refused with an [`OutOfRange`] naming the field. Views
//! never rely on this: [`crate::clock::rfc3339`] formats every `u64`, so a value
//! written by an older version still renders.
//!
//! | field | range |
//! | --- | --- |
//! | message TTL (`ttl`, `--ttl`, `--message-ttl`, `[[subscriptions]] ttl`) | 0 … 366 days |
//! | job lease (`lease`, `--lease`, `lease_ms`) | 1 ms … 7 days |
//! | lease extension (`by`, `--by`, `by_ms`) | 1 ms … 7 days |
//! | retry delay (`retry_delay`, `--retry-delay`, `retry_delay_ms`) | 0 … 366 days |
//! | BPMN timer durations and cycle intervals | 0 … 100 years |
//! | BPMN timer dates, Pub/Sub publish times | 1970-01-01 … 9999-12-31 |
//! | configured windows and thresholds (dedup window, retention, TTLs, alarm ages) | 0 … 100 years |
//! | outgoing claim-check threshold (`[storage] claim_check_above`) | 1 KiB … 9 MiB |
//! | inner instances of one multi-instance activity (collection, loopCardinality) | 0 … 10,000 |
//! | jobs one acquire locks (`max`, `--max`) | 1 … 10,000 |
//! | names a caller gives: worker, variable, topic, correlation variable | 1 … 256 characters, not blank, no control characters |
//! | `--server` client timeouts (`--connect-timeout`, `--server-timeout`) | 1 ms … 1 day |

use crate::clock::Millis;

/// One day in milliseconds.
pub const DAY: Millis = 86_400_000;

/// The latest instant postfach accepts from a caller: 9999-12-31T23:59:59.999Z.
pub const MAX_INSTANT: Millis = 253_402_300_799_999;

/// The most inner instances one multi-instance activity runs by default
/// (`Config::multi_instance_items`): each inner instance is a row of its own,
/// so a step costs the same at this size as at ten, but starting a parallel
/// activity writes every item in one command. A collection or cardinality
/// above the configured limit stops the activity at an incident naming it.
pub const MULTI_INSTANCE_ITEMS: u32 = 100_000;

/// The range `Config::multi_instance_items` may be set to.
pub const MULTI_INSTANCE_ITEMS_RANGE: std::ops::RangeInclusive<u32> = 1..=1_000_000;

/// Payload bytes above which a send task goes out as a claim check, by default.
pub const CLAIM_CHECK_ABOVE_DEFAULT: u64 = 1024 * 1024;

/// The range of the claim-check threshold: at least 1 KiB, and below Pub/Sub's
/// 10 MB request limit with room for attributes and batching.
pub const CLAIM_CHECK_ABOVE: std::ops::RangeInclusive<u64> = 1024..=9 * 1024 * 1024;

/// The range of one duration field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The field as the library names it; edges name their own spelling with [`Limit::named`].
    pub field: &'static str,
    /// Smallest accepted value in milliseconds.
    pub min: Millis,
    /// Largest accepted value in milliseconds.
    pub max: Millis,
}

/// How long a message may wait in the buffer.
pub const MESSAGE_TTL: Limit = Limit {
    field: "ttl",
    min: 0,
    max: 366 * DAY,
};
/// How long an external worker's lease lasts.
pub const LEASE: Limit = Limit {
    field: "lease",
    min: 1,
    max: 7 * DAY,
};
/// How far a lease extension reaches from now.
pub const LEASE_EXTENSION: Limit = Limit {
    field: "by",
    min: 1,
    max: 7 * DAY,
};
/// The delay a worker asks for before the next attempt.
pub const RETRY_DELAY: Limit = Limit {
    field: "retry_delay",
    min: 0,
    max: 366 * DAY,
};
/// A BPMN timer duration or cycle interval.
pub const TIMER: Limit = Limit {
    field: "timer",
    min: 0,
    max: 100 * 365 * DAY,
};
/// A configured window, period or threshold (dedup window, retention, TTLs,
/// retry backoff, alarm ages, lease extensions).
pub const CONFIGURED: Limit = Limit {
    field: "duration",
    min: 0,
    max: 100 * 365 * DAY,
};

/// How long the `--server` client waits to connect, and for an answer.
pub const CLIENT_TIMEOUT: Limit = Limit {
    field: "timeout",
    min: 1,
    max: DAY,
};

/// How often a server takes a backup (`[backup] every`).
pub const BACKUP_EVERY: Limit = Limit {
    field: "backup.every",
    min: 1_000,
    max: 7 * DAY,
};

/// How often the log is closed for the archive (`[backup] archive_every`).
pub const ARCHIVE_EVERY: Limit = Limit {
    field: "backup.archive_every",
    min: 1_000,
    max: 3_600_000,
};

/// How many backups of its partition a server keeps (`[backup] keep`).
pub const BACKUPS_KEPT: std::ops::RangeInclusive<usize> = 1..=10_000;

/// How many jobs one acquire locks at most.
pub const LOCK_BATCH: std::ops::RangeInclusive<usize> = 1..=10_000;

/// The longest name (worker, variable, topic) a caller may give, in characters.
pub const NAME_CHARS: usize = 256;

/// A count handed in from outside, checked against its range.
pub fn check_count(
    field: &str,
    value: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, OutOfRange> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(OutOfRange {
            field: field.to_string(),
            value: value.to_string(),
            range: format!("{} … {}", range.start(), range.end()),
        })
    }
}

/// A name handed in from outside (a worker, a variable, a topic): 1 …
/// [`NAME_CHARS`] characters, not only white space, no control characters
/// (they cannot be shown, logged or sent in a header as given).
pub fn check_name<'a>(field: &str, value: &'a str) -> Result<&'a str, OutOfRange> {
    let refuse = || OutOfRange {
        field: field.to_string(),
        value: format!("{:?}", value.chars().take(64).collect::<String>()),
        range: format!(
            "a name of 1 … {NAME_CHARS} characters, not only blanks, without control characters"
        ),
    };
    if value.trim().is_empty()
        || value.chars().count() > NAME_CHARS
        || value.chars().any(char::is_control)
    {
        return Err(refuse());
    }
    Ok(value)
}

/// A value outside its documented range; nothing was stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} is {value}, outside its range {range}")]
pub struct OutOfRange {
    /// The field as the caller spelled it (`ttl`, `lease_ms`, `--retry-delay` …).
    pub field: String,
    /// The refused value, readable.
    pub value: String,
    /// The accepted range, readable.
    pub range: String,
}

impl Limit {
    /// The same range under the name an edge uses for it (`lease_ms`, `--lease`).
    pub const fn named(self, field: &'static str) -> Limit {
        Limit { field, ..self }
    }

    /// `ms` when it lies in the range, else the refusal naming the field.
    pub fn check(&self, ms: Millis) -> Result<Millis, OutOfRange> {
        if (self.min..=self.max).contains(&ms) {
            Ok(ms)
        } else {
            Err(OutOfRange {
                field: self.field.to_string(),
                value: human(ms),
                range: self.range(),
            })
        }
    }

    /// Parses a duration text (`30s`, `15m`, `24h`, `7d`) and checks its range.
    pub fn parse(&self, text: &str) -> Result<Millis, String> {
        let ms = parse_duration(text)?;
        self.check(ms).map_err(|e| e.to_string())
    }

    /// The range, readable: `0s … 366d`.
    pub fn range(&self) -> String {
        format!("{} … {}", human(self.min), human(self.max))
    }
}

/// Checks an instant handed in from outside (a timer date, a publish time).
pub fn check_instant(field: &str, at: Millis) -> Result<Millis, OutOfRange> {
    if at <= MAX_INSTANT {
        Ok(at)
    } else {
        Err(OutOfRange {
            field: field.to_string(),
            value: crate::clock::rfc3339(at),
            range: "1970-01-01T00:00:00Z … 9999-12-31T23:59:59.999Z".into(),
        })
    }
}

/// Parses `30s`, `15m`, `24h`, `7d` (humantime syntax) into milliseconds, without
/// a range; a value that does not fit into 64 bits of milliseconds is refused.
pub fn parse_duration(s: &str) -> Result<Millis, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("'{s}' is not a duration like 30s, 15m, 24h or 7d: {e}"))?;
    Millis::try_from(d.as_millis()).map_err(|_| format!("'{s}' is longer than any range"))
}

/// A duration in milliseconds in the units the command line reads (`366d`,
/// `1d 2h`, `0s`, `1500ms` as `1s 500ms`).
pub fn human(ms: Millis) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let units = [
        (DAY, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
        (1, "ms"),
    ];
    let mut rest = ms;
    let mut parts = Vec::new();
    for (size, unit) in units {
        if rest >= size {
            parts.push(format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_documented_ranges_hold() {
        assert_eq!(MESSAGE_TTL.parse("24h"), Ok(DAY));
        assert_eq!(MESSAGE_TTL.parse("0s"), Ok(0));
        let e = MESSAGE_TTL.parse("10000y").unwrap_err();
        assert!(e.starts_with("ttl is 3652500d"), "{e}");
        assert!(e.ends_with("0s … 366d"), "{e}");
        assert_eq!(human(DAY + 2 * 3_600_000 + 1500), "1d 2h 1s 500ms");
        assert!(
            LEASE.check(0).is_err(),
            "a lease of 0 ends before it starts"
        );
        let e = LEASE
            .named("lease_ms")
            .check(1_000_000_000_000_000)
            .unwrap_err();
        assert_eq!(e.field, "lease_ms");
        assert!(parse_duration("100000000000000y").is_err());
        assert!(check_instant("timeDate", MAX_INSTANT).is_ok());
        assert!(check_instant("timeDate", MAX_INSTANT + 1).is_err());
    }

    proptest! {
        #[test]
        fn any_text_is_a_checked_duration_or_a_refusal(s in "\\PC{0,12}|[0-9]{1,20}(ms|s|m|h|d|w|y|years)") {
            for limit in [MESSAGE_TTL, LEASE, LEASE_EXTENSION, RETRY_DELAY, TIMER, CONFIGURED] {
                if let Ok(ms) = limit.parse(&s) {
                    prop_assert!(ms >= limit.min && ms <= limit.max);
                }
            }
        }

        #[test]
        fn any_millis_is_checked_without_panicking(ms in any::<u64>()) {
            for limit in [MESSAGE_TTL, LEASE, LEASE_EXTENSION, RETRY_DELAY, TIMER, CONFIGURED] {
                prop_assert_eq!(limit.check(ms).is_ok(), ms >= limit.min && ms <= limit.max);
            }
        }
    }
}

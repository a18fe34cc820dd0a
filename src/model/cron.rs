//! Cron `timeCycle`s as Camunda 7 (Quartz: seconds first, `?`, `0/5`, weekdays
//! 1 = Sunday … 7 = Saturday) and Zeebe (Spring: seconds first, weekdays 0 or 7
//! = Sunday) write them, evaluated in UTC.
//!
//! Invariant: an expression this module accepted at deploy has a next due time
//! after the deploy instant; [`next_after`] is a pure function of the stored
//! expression and an instant, so a replayed command fires the same due times.

use crate::clock::Millis;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

/// Whether `text` is written as a cron expression rather than an ISO 8601
/// repeating interval (`R5/PT10S`): five to seven fields.
pub fn looks_like_cron(text: &str) -> bool {
    let fields = text.split_whitespace().count();
    (5..=7).contains(&fields) && !text.trim_start().starts_with('R')
}

fn parse(expression: &str, quartz_weekdays: bool) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Optional)
        .alternative_weekdays(quartz_weekdays)
        .sloppy_ranges(true)
        .build()
        .parse(expression)
        .map_err(|e| format!("'{expression}' is not a cron expression: {e}"))
}

/// Checks `expression` and that it has a due time after `now`.
pub fn check(expression: &str, quartz_weekdays: bool, now: Millis) -> Result<(), String> {
    parse(expression, quartz_weekdays)?;
    next_after(expression, quartz_weekdays, now)
        .map(|_| ())
        .ok_or_else(|| format!("cron expression '{expression}' never fires"))
}

/// The first due time strictly after `after` (UTC), or `None` when there is
/// none (the expression cannot be read, or its last date has passed).
pub fn next_after(expression: &str, quartz_weekdays: bool, after: Millis) -> Option<Millis> {
    let cron = parse(expression, quartz_weekdays).ok()?;
    let at = chrono::DateTime::from_timestamp_millis(i64::try_from(after).ok()?)?;
    let next = cron.find_next_occurrence(&at, false).ok()?;
    let ms = u64::try_from(next.timestamp_millis()).ok()?;
    crate::limits::check_instant("cron", ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-01T00:00:00Z, a Thursday.
    const T0: Millis = 1_767_225_600_000;
    const H: Millis = 3_600_000;

    #[test]
    fn quartz_and_spring_expressions_give_their_next_due_time() {
        // every five minutes, Quartz style
        assert_eq!(next_after("0 0/5 * * * ?", true, T0), Some(T0 + 300_000));
        // 09:00 on weekdays: Thursday 09:00, then Friday 09:00
        let thu9 = T0 + 9 * H;
        assert_eq!(next_after("0 0 9 ? * MON-FRI", true, T0), Some(thu9));
        assert_eq!(
            next_after("0 0 9 ? * MON-FRI", true, thu9),
            Some(thu9 + 24 * H)
        );
        // Saturday is 7 in Quartz and 6 in Spring: both 2026-01-03 09:00
        let sat9 = T0 + 2 * 24 * H + 9 * H;
        assert_eq!(next_after("0 0 9 ? * 7", true, T0), Some(sat9));
        assert_eq!(next_after("0 0 9 * * 6", false, T0), Some(sat9));
    }

    proptest::proptest! {
        /// Whatever a model's timeCycle says, reading it refuses or answers.
        #[test]
        fn any_five_to_seven_fields_are_refused_or_read_without_panicking(
            fields in proptest::collection::vec("[0-9*?/,LW#A-Z-]{1,6}", 5..=7),
            quartz in proptest::bool::ANY,
            at in 0u64..=crate::limits::MAX_INSTANT,
        ) {
            let text = fields.join(" ");
            if check(&text, quartz, 0).is_ok() {
                let _ = next_after(&text, quartz, at);
            }
        }
    }

    #[test]
    fn what_cannot_fire_is_refused_and_iso_cycles_are_not_cron() {
        assert!(check("0 0 0 30 2 ?", true, T0).is_err(), "February 30th");
        assert!(check("not a cron", true, T0).is_err());
        assert!(check("0 0 12 * * ?", true, T0).is_ok());
        assert!(looks_like_cron("0 0 12 * * ?"));
        assert!(!looks_like_cron("R5/PT10S"));
        assert!(!looks_like_cron("R/PT1H"));
    }
}

//! Timers as the model writes them: a duration, an instant, a cycle (ISO
//! 8601 or cron), or a value read from a variable or computed by a FEEL
//! expression when the timer starts.
//!
//! Invariant: a timer that runs is range-checked as the parser checks a
//! written one, whether its value was written, read or computed.

use super::{cron, feel, is_path, iso, path_value};
use serde::{Deserialize, Serialize};

/// When a timer fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerDef {
    /// `timeDuration`: this long after the timer starts.
    Duration(crate::clock::Millis),
    /// `timeDate`: at this instant (at once if it is past).
    Date(crate::clock::Millis),
    /// `timeCycle` `R[n]/duration`: every `every`, `repetitions` times (unbounded if `None`).
    Cycle {
        /// How often (unbounded when `None`).
        repetitions: Option<u32>,
        /// The period.
        every: crate::clock::Millis,
    },
    /// `timeCycle` as a cron expression (UTC), without end (see [`cron`]).
    Cron {
        /// The expression as the model writes it.
        expression: String,
        /// Weekdays count 1 = Sunday … 7 = Saturday (Quartz, Camunda 7 and
        /// Flowable) instead of 0/7 = Sunday (Spring, Zeebe).
        quartz_weekdays: bool,
    },
    /// `timeDuration` or `timeDate` read from a variable (or path) when the
    /// timer starts (`${name}`, `#{name}`, `=name` in the model), or
    /// computed by a FEEL expression (`=now() + duration("PT1H")`): ISO 8601
    /// text, as the model would write it. Appended last: definitions stored
    /// before it still decode. See [`TimerDef::resolve`].
    Variable {
        /// A duration or an instant.
        field: TimerField,
        /// The variable or path, or the FEEL expression (without `=`) when
        /// it is more than a path ([`is_path`]).
        path: String,
    },
}

/// What a variable timer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerField {
    /// `timeDuration`: an ISO 8601 duration (`PT5M`).
    Duration,
    /// `timeDate`: an instant (RFC 3339).
    Date,
    /// `timeCycle`: an ISO 8601 cycle (`R3/PT1H`) or a cron expression.
    Cycle {
        /// How the cron expression counts weekdays (see [`TimerDef::Cron`]).
        quartz_weekdays: bool,
    },
}

impl TimerDef {
    /// The timer as it runs for an instance with `vars`: a variable timer
    /// reads its duration or instant (range-checked as the parser checks a
    /// written one); every other timer is itself. `Err` says what the
    /// variable holds and why it is no timer value.
    pub fn resolve(
        &self,
        vars: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<TimerDef, String> {
        let TimerDef::Variable { field, path } = self else {
            return Ok(self.clone());
        };
        let computed;
        let (value, what_reads) = if is_path(path) {
            (path_value(path, vars), "variable")
        } else {
            computed = feel::eval_text(path, vars, now)?;
            (Some(&computed), "expression")
        };
        let what = match field {
            TimerField::Duration => "an ISO 8601 duration (PT5M)",
            TimerField::Date => "an RFC 3339 instant",
            TimerField::Cycle { .. } => "an ISO 8601 cycle (R3/PT1H) or a cron expression",
        };
        let text = match value {
            Some(serde_json::Value::String(text)) => text,
            None | Some(serde_json::Value::Null) => {
                return Err(format!("{what_reads} '{path}' is not set"));
            }
            Some(other) => return Err(format!("{what_reads} '{path}' is {other}, not {what}")),
        };
        match field {
            TimerField::Duration => iso::duration(text).map(TimerDef::Duration),
            TimerField::Date => iso::instant(text).map(TimerDef::Date),
            TimerField::Cycle { quartz_weekdays } => TimerDef::cycle(text, *quartz_weekdays),
        }
        .map_err(|e| format!("{what_reads} '{path}' is '{text}': {e}"))
    }

    /// A `timeCycle` as written: a cron expression (checked) or an ISO 8601
    /// repetition with a period that is not zero.
    pub fn cycle(text: &str, quartz_weekdays: bool) -> Result<TimerDef, String> {
        let expression = text.trim().to_string();
        if cron::looks_like_cron(&expression) {
            cron::check(&expression, quartz_weekdays, 0)?;
            return Ok(TimerDef::Cron {
                expression,
                quartz_weekdays,
            });
        }
        let (repetitions, every) = iso::cycle(&expression)?;
        if every == 0 {
            return Err("timeCycle with a zero interval would fire without end".into());
        }
        Ok(TimerDef::Cycle { repetitions, every })
    }

    /// The first due time of a timer started at `now`. A cron expression whose
    /// dates have all passed is due at the last representable instant: its job
    /// stays visible instead of firing.
    pub fn first_due(&self, now: crate::clock::Millis) -> crate::clock::Millis {
        match self {
            TimerDef::Duration(d) => now.saturating_add(*d),
            TimerDef::Date(t) => (*t).max(now),
            TimerDef::Cycle { every, .. } => now.saturating_add(*every),
            TimerDef::Cron {
                expression,
                quartz_weekdays,
            } => cron::next_after(expression, *quartz_weekdays, now)
                .unwrap_or(crate::limits::MAX_INSTANT),
            // resolved before it starts (`resolve`); unresolved it waits for
            // nothing it could name
            TimerDef::Variable { .. } => now,
        }
    }

    /// How often it fires in all (unbounded when `None`).
    pub fn repetitions(&self) -> Option<u32> {
        match self {
            TimerDef::Duration(_) | TimerDef::Date(_) | TimerDef::Variable { .. } => Some(1),
            TimerDef::Cycle { repetitions, .. } => *repetitions,
            TimerDef::Cron { .. } => None,
        }
    }

    /// After a fire that was due at `due` and happened at `now`: the next due
    /// time of a cycle, the first one still ahead of `now` (due times missed
    /// while nothing ran are not made up). `None` for a one-shot timer or a
    /// cron expression with no later date.
    pub fn next_due(
        &self,
        due: crate::clock::Millis,
        now: crate::clock::Millis,
    ) -> Option<crate::clock::Millis> {
        match self {
            TimerDef::Duration(_) | TimerDef::Date(_) | TimerDef::Variable { .. } => None,
            TimerDef::Cycle { every: 0, .. } => None,
            TimerDef::Cycle { every, .. } => {
                let mut next = due.saturating_add(*every);
                if next <= now {
                    let missed = (now - next) / every + 1;
                    next = next.saturating_add(missed.saturating_mul(*every));
                }
                Some(next)
            }
            TimerDef::Cron {
                expression,
                quartz_weekdays,
            } => cron::next_after(expression, *quartz_weekdays, due.max(now)),
        }
    }
}

//! Alarms from configuration: conditions over the operator views that must not
//! stay silent — the oldest wait at an element (the article's opening scene: an
//! order stuck at `warteAufAbschluss`), parked messages, incidents, the oldest
//! buffered message, open user tasks and the oldest of them, events about
//! parked messages that their topic has not taken yet, and the age of the
//! last good backup.
//!
//! Invariant: evaluation is a pure function of a read snapshot, its instant
//! and the server's [`Facts`];
//! an alarm logs one WARN line when it fires and one INFO line when it clears,
//! never one per evaluation.

use crate::ops::{MessageFilter, Reader, TaskFilter};
use crate::store::{Reason, StoreError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One alarm as configured (`[alarms.NAME]` in postfach.toml).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "when", rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// The oldest token resting at `element` is older than `older_than`.
    OldestWait {
        /// The element id.
        element: String,
        /// A duration (`2d`, `90min`).
        older_than: String,
    },
    /// More than `above` (default 0) parked messages, optionally of one reason.
    Parked {
        /// Only parked messages of this reason.
        reason: Option<String>,
        /// More than this many.
        #[serde(default)]
        above: u64,
    },
    /// More than `above` (default 0) incidents.
    Incidents {
        /// More than this many.
        #[serde(default)]
        above: u64,
    },
    /// The oldest buffered message is older than `older_than`.
    OldestBuffered {
        /// A duration (`2d`, `90min`).
        older_than: String,
    },
    /// More than `above` (default 0) open user tasks, optionally at one element.
    OpenTasks {
        /// Only tasks at this element.
        element: Option<String>,
        /// More than this many.
        #[serde(default)]
        above: u64,
    },
    /// The oldest open user task (optionally at one element) is older than `older_than`.
    OldestTask {
        /// Only tasks at this element.
        element: Option<String>,
        /// A duration (`2d`, `90min`).
        older_than: String,
    },
    /// More than `above` (default 0) events about parked messages wait for
    /// their topic (`[notifications] parked_topic` cannot be reached).
    ParkedEventsUnpublished {
        /// More than this many.
        #[serde(default)]
        above: u64,
    },
    /// The newest good backup in `[backup] to` was taken longer than
    /// `older_than` ago — or none was, and the server started longer ago.
    OldestBackup {
        /// A duration (`2h`, `1d`).
        older_than: String,
    },
}

/// What the server knows beside the store, for the conditions about it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// When the server started.
    pub started: crate::clock::Millis,
    /// When the newest good backup was taken, if one is known.
    pub last_backup: Option<crate::clock::Millis>,
}

impl Condition {
    pub(crate) fn check(&self) -> Result<(), String> {
        match self {
            Condition::OldestWait { older_than, .. }
            | Condition::OldestBuffered { older_than }
            | Condition::OldestTask { older_than, .. }
            | Condition::OldestBackup { older_than } => crate::limits::CONFIGURED
                .named("older_than")
                .parse(older_than)
                .map(|_| ()),
            Condition::Parked {
                reason: Some(r), ..
            } => Reason::parse_or_list(r).map(|_| ()),
            Condition::Parked { reason: None, .. }
            | Condition::Incidents { .. }
            | Condition::OpenTasks { .. }
            | Condition::ParkedEventsUnpublished { .. } => Ok(()),
        }
    }

    /// Whether the condition holds, with a line saying what was seen.
    fn holds(&self, r: &Reader, facts: &Facts) -> Result<(bool, String), StoreError> {
        let ms = |d: &str| crate::limits::CONFIGURED.parse(d).unwrap_or(u64::MAX);
        Ok(match self {
            Condition::OldestWait {
                element,
                older_than,
            } => {
                let oldest = r.waiting_at(element)?.first().map(|w| w.age_ms);
                let age = oldest.unwrap_or(0);
                (
                    oldest.is_some() && age > ms(older_than),
                    format!("oldest wait at {element}: {} s", age / 1000),
                )
            }
            Condition::Parked { reason, above } => {
                let n = r
                    .messages(&MessageFilter {
                        parked: true,
                        reason: reason.as_deref().and_then(Reason::parse),
                        ..Default::default()
                    })?
                    .len() as u64;
                (n > *above, format!("{n} parked message(s)"))
            }
            Condition::Incidents { above } => {
                let n = r.jobs(true)?.len() as u64;
                (n > *above, format!("{n} incident(s)"))
            }
            Condition::OldestBuffered { older_than } => {
                let age = r.oldest_buffered_age()?.unwrap_or(0);
                (
                    age > ms(older_than),
                    format!("oldest buffered message: {} s", age / 1000),
                )
            }
            Condition::OpenTasks { element, above } => {
                let n = r
                    .tasks(&TaskFilter {
                        element: element.clone(),
                        ..Default::default()
                    })?
                    .len() as u64;
                (n > *above, format!("{n} open user task(s)"))
            }
            Condition::OldestTask {
                element,
                older_than,
            } => {
                let oldest = r
                    .tasks(&TaskFilter {
                        element: element.clone(),
                        ..Default::default()
                    })?
                    .iter()
                    .map(|t| t.age_ms)
                    .max();
                let age = oldest.unwrap_or(0);
                (
                    oldest.is_some() && age > ms(older_than),
                    format!("oldest open user task: {} s", age / 1000),
                )
            }
            Condition::ParkedEventsUnpublished { above } => {
                let n = r.parked_events(0)?.1;
                (
                    n > *above,
                    format!("{n} event(s) about parked messages not yet published"),
                )
            }
            Condition::OldestBackup { older_than } => {
                let since = facts.last_backup.unwrap_or(facts.started);
                let age = r.now().saturating_sub(since);
                let detail = match facts.last_backup {
                    Some(_) => format!("newest good backup: {} s old", age / 1000),
                    None => format!(
                        "no good backup since the server started {} s ago",
                        age / 1000
                    ),
                };
                (age > ms(older_than), detail)
            }
        })
    }
}

/// A change of an alarm's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The alarm's condition started to hold.
    Fired {
        /// The alarm's name.
        name: String,
        /// What holds, in words.
        detail: String,
    },
    /// The condition no longer holds.
    Cleared {
        /// The alarm's name.
        name: String,
        /// What holds now, in words.
        detail: String,
    },
}

/// Configured alarms and which of them are active.
#[derive(Debug, Default)]
pub struct Alarms {
    conditions: BTreeMap<String, Condition>,
    active: Mutex<BTreeMap<String, bool>>,
}

impl Alarms {
    /// Alarms for these named conditions, none firing yet.
    pub fn new(conditions: BTreeMap<String, Condition>) -> Self {
        let active = conditions.keys().map(|k| (k.clone(), false)).collect();
        Self {
            conditions,
            active: Mutex::new(active),
        }
    }

    /// Evaluates every alarm on a snapshot (at the snapshot's instant) and
    /// the server's facts; logs and returns the changes.
    pub fn evaluate(&self, r: &Reader, facts: &Facts) -> Result<Vec<Change>, StoreError> {
        let mut changes = Vec::new();
        let mut active = self
            .active
            .lock()
            .map_err(|_| StoreError::Aborted("alarm state poisoned".into()))?;
        for (name, cond) in &self.conditions {
            let (holds, detail) = cond.holds(r, facts)?;
            let was = active.insert(name.clone(), holds).unwrap_or(false);
            if holds && !was {
                tracing::warn!(alarm = %name, condition = ?cond, %detail, "alarm fired");
                changes.push(Change::Fired {
                    name: name.clone(),
                    detail,
                });
            } else if !holds && was {
                tracing::info!(alarm = %name, %detail, "alarm cleared");
                changes.push(Change::Cleared {
                    name: name.clone(),
                    detail,
                });
            }
        }
        Ok(changes)
    }

    /// Every configured alarm and whether it is firing.
    pub fn active(&self) -> Vec<(String, bool)> {
        self.active
            .lock()
            .map(|a| a.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

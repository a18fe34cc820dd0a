//! Views of instances: one instance with its tokens, subscriptions and
//! history; lists by filter and cursor; who waits where and since when.
//!
//! Invariant: only reads; a page reads at most [`PAGE_SCAN_BUDGET`] records
//! and says where to go on.

use super::jobs::job_view;
use super::messages::message_view;
use super::*;
use crate::clock::{Millis, rfc3339};
use crate::model::Vars;
use crate::store::*;
use serde::Serialize;

/// One history line.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryView {
    /// The element (or process) it happened at.
    pub element: String,
    /// What happened (`waiting`, `message_correlated`, `job_created` …).
    pub event: String,
    /// When (RFC 3339).
    pub at: String,
}

/// An instance as operators see it.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceView {
    /// Instance id (a string: JSON numbers lose precision past 2^53).
    pub instance: String,
    /// Process id.
    pub process: String,
    /// Process version the instance runs.
    pub version: u32,
    /// `active`, `completed` or `cancelled`.
    pub state: &'static str,
    /// Business key, when started with one.
    pub business_key: Option<String>,
    /// Elements its tokens rest at.
    pub waiting_at: Vec<String>,
    /// Every token: id, element, what it waits for, since when.
    pub tokens: Vec<TokenView>,
    /// Errors of tokens that stopped at an incident.
    pub incidents: Vec<String>,
    /// Process variables.
    pub variables: Vars,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339), once ended.
    pub ended_at: Option<String>,
    /// What happened, oldest first.
    pub history: Vec<HistoryView>,
    /// The instance whose call activity started this one, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub called_by: Option<String>,
}

/// One instance with everything that waits on it: an operator's detail page.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceDetail {
    /// The instance as the list shows it.
    #[serde(flatten)]
    pub instance: InstanceView,
    /// The message and signal subscriptions its tokens hold open.
    pub subscriptions: Vec<SubscriptionView>,
    /// The jobs of its tokens (tasks, continuations, timers, boundary timers).
    pub jobs: Vec<JobView>,
    /// Messages correlated into it, and parked messages that name it as a
    /// candidate, in accept order.
    pub messages: Vec<MessageView>,
    /// Completed activities a compensation throw would still undo, in order
    /// of completion (what was compensated is in the history).
    pub compensable: Vec<CompensableView>,
    /// The ad-hoc subprocesses its tokens hold, with what can be activated.
    pub ad_hoc: Vec<AdHocView>,
}

/// An ad-hoc subprocess a token holds.
#[derive(Debug, Clone, Serialize)]
pub struct AdHocView {
    /// The token holding it.
    pub token: u64,
    /// The subprocess.
    pub element: String,
    /// Its activities a caller may activate now (none once its completion
    /// condition held: then it may only be completed).
    pub activatable: Vec<String>,
}

/// A completed activity that can still be compensated.
#[derive(Debug, Clone, Serialize)]
pub struct CompensableView {
    /// The activity.
    pub element: String,
    /// When it completed (RFC 3339).
    pub completed_at: String,
    /// Its compensation handler; none for a subprocess undone from inside.
    pub handler: Option<String>,
}

/// A subscription a token holds open.
#[derive(Debug, Clone, Serialize)]
pub struct SubscriptionView {
    /// The token.
    pub token: u64,
    /// The element it waits at (an event-based gateway for its branches).
    pub element: String,
    /// `message` or `signal`.
    pub kind: &'static str,
    /// Message or signal name.
    pub name: String,
    /// The correlation key of a message subscription.
    pub key: Option<String>,
}

/// A token of an instance.
#[derive(Debug, Clone, Serialize)]
pub struct TokenView {
    /// Token id within the instance.
    pub token: u64,
    /// Element it rests at.
    pub element: String,
    /// What it waits for, in words.
    pub waits_for: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// The token holding the subprocess scope it runs in (absent at the
    /// process level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<u64>,
    /// Variables local to this token and what runs inside it (a
    /// multi-instance inner instance's item and index); absent when there
    /// are none.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub locals: Vars,
}

/// A place an ambiguous message was open at.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateView {
    /// The instance.
    pub instance: String,
    /// The element of it that waited for the message.
    pub element: String,
}

/// A token waiting at an element, with its age.
#[derive(Debug, Clone, Serialize)]
pub struct WaitingView {
    /// Instance id.
    pub instance: String,
    /// Element it rests at.
    pub element: String,
    /// Since when (RFC 3339).
    pub since: String,
    /// How long it has waited, in milliseconds.
    pub age_ms: u64,
}

/// Which instances to list (all given conditions hold).
#[derive(Debug, Clone, Default)]
pub struct InstanceFilter {
    /// Only instances with a token at this element.
    pub waiting_at: Option<String>,
    /// Only instances in this state (`active`, `incident`, `completed`, `cancelled`).
    pub state: Option<String>,
    /// Only instances of this process.
    pub process: Option<String>,
    /// Only instances of this version of their process.
    pub version: Option<u32>,
    /// Only instances that wait for, expect or caught a message with this
    /// correlation key (found through the subscription indexes).
    pub key: Option<String>,
    /// Only instances whose variable (name, value) has this value: a string
    /// variable compares as is, any other as its JSON text.
    pub variable: Option<(String, String)>,
    /// Only instances started at or after this instant.
    pub started_from: Option<Millis>,
    /// Only instances started before this instant.
    pub started_before: Option<Millis>,
    /// Only instances with (`true`) or without (`false`) an incident: a token
    /// stopped by an engine error or a job out of attempts.
    pub has_incident: Option<bool>,
}

/// Where a page of instances starts and how long it is.
#[derive(Debug, Clone, Copy)]
pub struct InstancePaging {
    /// Continue after this instance id (the `next` of the previous page).
    pub after: Option<u64>,
    /// At most this many instances.
    pub limit: usize,
    /// Newest (highest id) first; else oldest first.
    pub newest_first: bool,
}

impl Default for InstancePaging {
    fn default() -> Self {
        InstancePaging {
            after: None,
            limit: 50,
            newest_first: true,
        }
    }
}

/// One page of instances.
#[derive(Debug, Clone, Serialize)]
pub struct InstancePage {
    /// The instances of this page, in the order asked for.
    pub instances: Vec<InstanceView>,
    /// The cursor of the next page (`after`), when more instances may match.
    pub next: Option<String>,
    /// How many instance records this page examined: a filter that matches
    /// few instances returns short pages with `next` rather than reading the
    /// whole table in one request.
    pub examined: usize,
}

impl Reader {
    /// The raw instance record.
    pub fn instance_record(&self, id: u64) -> Result<Option<InstanceRecord>, RErr> {
        self.snap.instance(id)
    }

    /// One instance.
    pub fn instance(&self, id: u64) -> Result<Option<InstanceView>, RErr> {
        self.instance_record(id)?.map(|r| self.view(&r)).transpose()
    }

    /// One instance with its open subscriptions, its jobs and its messages.
    pub fn instance_detail(&self, id: u64) -> Result<Option<InstanceDetail>, RErr> {
        let Some(rec) = self.instance_record(id)? else {
            return Ok(None);
        };
        let mut subscriptions = Vec::new();
        let mut job_ids = Vec::new();
        for t in &rec.tokens {
            let mut sub = |kind, name: &str, key: Option<&str>| {
                subscriptions.push(SubscriptionView {
                    token: t.id,
                    element: t.element.clone(),
                    kind,
                    name: name.to_string(),
                    key: key.map(String::from),
                })
            };
            for (name, key) in t.wait.messages() {
                sub("message", name, Some(key));
            }
            for name in t.wait.signals() {
                sub("signal", name, None);
            }
            job_ids.extend(t.wait.jobs());
            job_ids.extend(&t.timers);
        }
        // the message and signal boundary events of the activities its
        // tokens are in, with the keys they were opened with
        let model = self.process(&rec.process, rec.version)?;
        let boundary_of = |t: &Token, caught: &dyn Fn(&crate::model::Trigger) -> bool| {
            let m = model.as_ref()?;
            m.element(&t.element)?.boundaries.iter().find_map(|&b| {
                let boundary = m.at(b);
                matches!(&boundary.kind, crate::model::ElementKind::Boundary { trigger, .. } if caught(trigger))
                    .then(|| boundary.id.clone())
            })
        };
        for t in &rec.tokens {
            for (message, key) in &t.boundary_messages {
                let caught = |tr: &crate::model::Trigger| matches!(tr, crate::model::Trigger::Message { message: m } if m == message);
                subscriptions.push(SubscriptionView {
                    token: t.id,
                    element: boundary_of(t, &caught).unwrap_or_else(|| t.element.clone()),
                    kind: "message",
                    name: message.clone(),
                    key: Some(key.clone()),
                });
            }
            for signal in &t.boundary_signals {
                let caught = |tr: &crate::model::Trigger| matches!(tr, crate::model::Trigger::Signal { signal: s } if s == signal);
                subscriptions.push(SubscriptionView {
                    token: t.id,
                    element: boundary_of(t, &caught).unwrap_or_else(|| t.element.clone()),
                    kind: "signal",
                    name: signal.clone(),
                    key: None,
                });
            }
        }
        let mut jobs = Vec::new();
        for j in job_ids {
            if let Some(j) = self.snap.job(j)? {
                jobs.push(job_view(&j));
            }
        }
        Ok(Some(InstanceDetail {
            instance: self.view(&rec)?,
            subscriptions,
            jobs,
            messages: self
                .snap
                .messages_of_instance(id)?
                .iter()
                .map(message_view)
                .collect(),
            ad_hoc: rec
                .tokens
                .iter()
                .filter_map(|t| {
                    let Wait::AdHoc { completing } = t.wait else {
                        return None;
                    };
                    let m = model.as_ref()?;
                    let idx = m.index_of(&t.element)?;
                    let activatable = if completing {
                        Vec::new()
                    } else {
                        m.ad_hoc_enabled(idx)
                            .into_iter()
                            .map(|a| m.at(a).id.clone())
                            .collect()
                    };
                    Some(AdHocView {
                        token: t.id,
                        element: t.element.clone(),
                        activatable,
                    })
                })
                .collect(),
            compensable: self
                .snap
                .compensables(id)?
                .into_iter()
                .map(|c| CompensableView {
                    element: c.element,
                    completed_at: crate::clock::rfc3339(c.completed_at),
                    handler: c.handler,
                })
                .collect(),
        }))
    }

    /// Every instance that passes `filter`, by id (no paging: for the
    /// command line and tests; the HTTP API pages with [`Reader::instance_page`]).
    pub fn instances(&self, filter: &InstanceFilter) -> Result<Vec<InstanceView>, RErr> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self.instance_page(
                filter,
                InstancePaging {
                    after,
                    limit: PAGE_SCAN_BUDGET,
                    newest_first: false,
                },
            )?;
            out.extend(page.instances);
            match page.next {
                Some(n) => after = Some(n.parse().unwrap_or(u64::MAX)),
                None => return Ok(out),
            }
        }
    }

    /// One page of the instances that pass `filter`. Candidates come from an
    /// index where the filter names one (`waiting_at`: `tokens_at`; `key`: the
    /// subscription indexes), else from the instance table in id order; each
    /// page reads at most [`PAGE_SCAN_BUDGET`] records and says where to go on.
    pub fn instance_page(
        &self,
        filter: &InstanceFilter,
        paging: InstancePaging,
    ) -> Result<InstancePage, RErr> {
        let limit = paging.limit.max(1);
        let indexed: Option<Vec<u64>> = match (&filter.waiting_at, &filter.key) {
            (None, None) => None,
            (waiting_at, key) => {
                let mut ids: Option<std::collections::BTreeSet<u64>> = None;
                if let Some(el) = waiting_at {
                    ids = Some(self.snap.tokens_at(el)?.into_iter().map(|r| r.1).collect());
                }
                if let Some(k) = key {
                    let with_key = self.snap.instances_with_key(k)?;
                    ids = Some(match ids {
                        Some(ids) => ids.intersection(&with_key).copied().collect(),
                        None => with_key,
                    });
                }
                let ids = ids.unwrap_or_default();
                let mut ids: Vec<u64> = match paging.after {
                    Some(a) if paging.newest_first => ids.range(..a).copied().collect(),
                    Some(a) => ids.range(a.saturating_add(1)..).copied().collect(),
                    None => ids.into_iter().collect(),
                };
                if paging.newest_first {
                    ids.reverse();
                }
                Some(ids)
            }
        };
        let mut out = Vec::new();
        let mut examined = 0usize;
        let mut last = None;
        let mut more = false;
        match indexed {
            Some(ids) => {
                for id in &ids {
                    if out.len() == limit || examined == PAGE_SCAN_BUDGET {
                        more = true;
                        break;
                    }
                    examined += 1;
                    last = Some(*id);
                    if let Some(rec) = self.snap.instance(*id)?
                        && self.keeps(filter, &rec)?
                    {
                        out.push(self.view(&rec)?);
                    }
                }
            }
            None => {
                let mut cursor = paging.after;
                'scan: loop {
                    let batch = self
                        .snap
                        .instances_after(cursor, paging.newest_first, 256)?;
                    if batch.is_empty() {
                        break;
                    }
                    for rec in batch {
                        if out.len() == limit || examined == PAGE_SCAN_BUDGET {
                            more = true;
                            break 'scan;
                        }
                        examined += 1;
                        last = Some(rec.id);
                        cursor = Some(rec.id);
                        if self.keeps(filter, &rec)? {
                            out.push(self.view(&rec)?);
                        }
                    }
                }
            }
        }
        Ok(InstancePage {
            instances: out,
            next: last.filter(|_| more).map(|id| id.to_string()),
            examined,
        })
    }

    pub(super) fn keeps(&self, f: &InstanceFilter, rec: &InstanceRecord) -> Result<bool, RErr> {
        if f.process.as_ref().is_some_and(|p| &rec.process != p)
            || f.version.is_some_and(|v| rec.version != v)
            || f.started_from.is_some_and(|t| rec.started_at < t)
            || f.started_before.is_some_and(|t| rec.started_at >= t)
            || f.waiting_at
                .as_ref()
                .is_some_and(|e| !rec.tokens.iter().any(|t| &t.element == e))
        {
            return Ok(false);
        }
        if let Some((name, value)) = &f.variable {
            let matches = match rec.variables.get(name) {
                Some(serde_json::Value::String(s)) => s == value,
                Some(v) => &v.to_string() == value,
                None => false,
            };
            if !matches {
                return Ok(false);
            }
        }
        if f.has_incident.is_none() && f.state.is_none() {
            return Ok(true);
        }
        let incidents = self.incidents(rec)?;
        if f.has_incident
            .is_some_and(|want| want == incidents.is_empty())
        {
            return Ok(false);
        }
        Ok(f.state
            .as_ref()
            .is_none_or(|s| instance_state(rec, !incidents.is_empty()) == s))
    }

    /// The incidents of `rec`'s tokens, as `element: error`: a token stopped
    /// by an engine error, or a job of it out of attempts.
    pub(super) fn incidents(&self, rec: &InstanceRecord) -> Result<Vec<String>, RErr> {
        let mut out = Vec::new();
        for t in &rec.tokens {
            if let Wait::Incident { error } = &t.wait {
                out.push(format!("{}: {error}", t.element));
            }
            // a job or timer it waits for (an event-based gateway's timers too)
            for job in t.wait.jobs() {
                if let Some(j) = self.snap.job(job)?
                    && j.state == JobState::Incident
                {
                    let error = j.last_error.as_deref().unwrap_or("out of attempts");
                    out.push(format!("{}: job {}: {error}", t.element, j.id));
                }
            }
        }
        Ok(out)
    }

    /// The operator's view of `rec`.
    pub(super) fn view(&self, rec: &InstanceRecord) -> Result<InstanceView, RErr> {
        let model = self.process(&rec.process, rec.version)?;
        Ok(instance_view(
            rec,
            self.incidents(rec)?,
            &self.snap.history(rec, model.as_deref())?,
        ))
    }

    /// Tokens resting at `element`, oldest first, with their age.
    pub fn waiting_at(&self, element: &str) -> Result<Vec<WaitingView>, RErr> {
        Ok(self
            .snap
            .tokens_at(element)?
            .into_iter()
            .map(|(since, inst, _)| WaitingView {
                instance: inst.to_string(),
                element: element.to_string(),
                since: rfc3339(since),
                age_ms: self.now.saturating_sub(since),
            })
            .collect())
    }

    /// Per element: tokens resting there and since when the oldest waits.
    pub fn waiting_summary(&self) -> Result<Vec<(String, u64, Millis)>, RErr> {
        self.snap.resting_summary()
    }
}

/// `cancelled`, `completed`, `incident` (an active instance with an
/// incident) or `active`.
pub(super) fn instance_state(r: &InstanceRecord, incident: bool) -> &'static str {
    if r.cancelled {
        "cancelled"
    } else if r.ended_at.is_some() {
        "completed"
    } else if incident {
        "incident"
    } else {
        "active"
    }
}

pub(super) fn instance_view(
    r: &InstanceRecord,
    incidents: Vec<String>,
    history: &[crate::store::HistoryEntry],
) -> InstanceView {
    let state = instance_state(r, !incidents.is_empty());
    InstanceView {
        instance: r.id.to_string(),
        process: r.process.clone(),
        version: r.version,
        state,
        business_key: r.business_key.clone(),
        waiting_at: r.tokens.iter().map(|t| t.element.clone()).collect(),
        tokens: r
            .tokens
            .iter()
            .map(|t| TokenView {
                token: t.id,
                element: t.element.clone(),
                waits_for: match &t.wait {
                    // running: the tokens in its scope (an operator may have cancelled some)
                    Wait::Body {
                        count, completed, ..
                    } => format!(
                        "its inner instances: {completed} of {count} completed, {} running",
                        r.tokens.iter().filter(|i| i.scope == t.id).count()
                    ),
                    w => w.describe(),
                },
                since: rfc3339(t.since),
                scope: (t.scope != 0).then_some(t.scope),
                locals: t.locals.clone(),
            })
            .collect(),
        incidents,
        variables: (*r.variables).clone(),
        started_at: rfc3339(r.started_at),
        ended_at: r.ended_at.map(rfc3339),
        history: history
            .iter()
            .map(|h| HistoryView {
                element: h.element.clone(),
                event: h.event.clone(),
                at: rfc3339(h.at),
            })
            .collect(),
        called_by: r.called_by.map(|(i, _)| i.to_string()),
    }
}

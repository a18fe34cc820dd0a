//! Read views for operators: instances, who waits where and since when, buffered
//! and parked messages, jobs and incidents, counters.
//!
//! Invariant: this module only reads (a redb read snapshot); it never changes
//! state and never blocks the writer. Views serialise to the JSON shapes of the
//! command line contract.

use crate::Vars;
use crate::clock::{Millis, rfc3339};
use crate::engine::{DefCache, load_def};
use crate::store::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The figures of one element of a definition version, for diagram overlays
/// and dashboards — each from a gauge or the first row of an index, however
/// many instances and messages there are.
#[derive(Debug, Clone, Serialize)]
pub struct ElementStatistics {
    /// The BPMN id.
    pub element: String,
    /// The name in the diagram.
    pub name: Option<String>,
    /// The element kind (`receiveTask`, `serviceTask`, …).
    pub kind: &'static str,
    /// Tokens resting there.
    pub waiting: u64,
    /// Since when the longest-waiting of them rests there (RFC 3339).
    pub oldest_wait_since: Option<String>,
    /// How long that is, in milliseconds.
    pub oldest_wait_ms: Option<u64>,
    /// Jobs of the element waiting to run (due now or later).
    pub jobs_ready: u64,
    /// Jobs out of attempts and tokens stopped by an engine error.
    pub incidents: u64,
    /// The message the element waits for, if any.
    pub message: Option<String>,
    /// Buffered messages of that name (every key, every version).
    pub buffered: u64,
    /// Parked messages of that name, by reason.
    pub parked: BTreeMap<String, u64>,
}

/// The figures of every element of one definition version.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessStatistics {
    /// The process id.
    pub process: String,
    /// The version the figures are for.
    pub version: u32,
    /// The latest deployed version.
    pub latest_version: u32,
    /// Every element of the model, in document order.
    pub elements: Vec<ElementStatistics>,
}

/// A deployed process and its versions.
#[derive(Debug, Clone, Serialize)]
pub struct DeployedView {
    /// The process id.
    pub process: String,
    /// The latest version.
    pub latest_version: u32,
    /// Every version, oldest first.
    pub versions: Vec<VersionView>,
}

/// One deployed version.
#[derive(Debug, Clone, Serialize)]
pub struct VersionView {
    /// The version number.
    pub version: u32,
    /// When it was deployed (RFC 3339).
    pub deployed_at: String,
    /// The file it came from.
    pub file: String,
}

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

/// A message in the buffer or parked (or settled).
#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    /// Message id.
    pub message_id: String,
    /// Message name.
    pub name: String,
    /// Correlation key.
    pub key: String,
    /// `buffered`, `parked`, `correlated` or `discarded`.
    pub state: &'static str,
    /// Why it was parked.
    pub reason: Option<&'static str>,
    /// When it was accepted (RFC 3339).
    pub accepted_at: String,
    /// When a buffered message expires (RFC 3339).
    pub expires_at: Option<String>,
    /// Instances that could have taken it (ambiguous, late).
    pub candidates: Vec<String>,
    /// Of an ambiguous message: every place that waited for it.
    pub candidate_elements: Vec<CandidateView>,
    /// Instance it was correlated into.
    pub instance: Option<String>,
    /// Element that caught it.
    pub element: Option<String>,
    /// Decoding error, or why it was discarded.
    pub note: Option<String>,
    /// Transport attributes.
    pub attributes: BTreeMap<String, String>,
    /// Raw payload of a malformed message, as (lossy) text.
    pub raw: Option<String>,
    /// The same raw payload byte for byte, as lowercase hex.
    pub raw_hex: Option<String>,
    /// How often an operator requeued it.
    pub requeues: u32,
    /// When it was correlated or discarded.
    pub settled_at: Option<String>,
}

/// A job or incident.
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    /// Job id.
    pub job: String,
    /// Instance id; `None` for the schedule of a timer start event, which
    /// belongs to no instance (it starts them).
    pub instance: Option<String>,
    /// Element the job runs for.
    pub element: String,
    /// `continuation`, `task` or `timer`.
    pub kind: &'static str,
    /// Topic of a task job.
    pub topic: Option<String>,
    /// `ready`, `locked` or `incident`.
    pub state: &'static str,
    /// Failed attempts so far.
    pub attempts: u32,
    /// Error of the last failed attempt.
    pub error: Option<String>,
    /// When it is due (RFC 3339).
    pub due_at: String,
    /// `instance:element:activation`, the same for every attempt.
    pub idempotency_key: String,
    /// Failed attempts, oldest first.
    pub history: Vec<AttemptView>,
    /// Who holds its lease.
    pub lease_owner: Option<String>,
    /// Until when (RFC 3339).
    pub lease_until: Option<String>,
}

/// One failed attempt.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    /// When (RFC 3339).
    pub at: String,
    /// What the handler or worker reported.
    pub error: String,
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

/// Where a page of messages goes on: after a parked message (`p:SEQ`) or
/// after a buffered one (`b:ACCEPTED_AT:SEQ`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum MessageCursor {
    Parked(u64),
    Buffered(Millis, u64),
}

impl MessageCursor {
    fn parse(s: &str) -> Result<Self, MessageCursorError> {
        let bad = || MessageCursorError::Cursor(s.to_string());
        let mut parts = s.split(':');
        let c = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("p"), Some(seq), None, None) => {
                MessageCursor::Parked(seq.parse().map_err(|_| bad())?)
            }
            (Some("b"), Some(at), Some(seq), None) => MessageCursor::Buffered(
                at.parse().map_err(|_| bad())?,
                seq.parse().map_err(|_| bad())?,
            ),
            _ => return Err(bad()),
        };
        Ok(c)
    }
}

impl std::fmt::Display for MessageCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MessageCursor::Parked(s) => write!(f, "p:{s}"),
            MessageCursor::Buffered(a, s) => write!(f, "b:{a}:{s}"),
        }
    }
}

/// Why a page of messages could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MessageCursorError {
    /// The cursor is not one a page handed out.
    #[error("cursor {0:?} is not the `next` of a page of messages")]
    Cursor(String),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Records one page examines at most.
pub const PAGE_SCAN_BUDGET: usize = 5_000;

/// Which messages to list; both flags false lists buffered and parked.
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    /// List buffered messages.
    pub buffered: bool,
    /// List parked messages.
    pub parked: bool,
    /// Only parked messages with this reason.
    pub reason: Option<Reason>,
}

/// One page of buffered and parked messages: the parked ones by sequence,
/// then the buffered ones oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct MessagePage {
    /// The messages of this page.
    pub messages: Vec<MessageView>,
    /// The cursor of the next page, when more messages may follow.
    pub next: Option<String>,
}

/// An open user task in the task list.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    /// Task id.
    pub task: String,
    /// Instance id.
    pub instance: String,
    /// Process id.
    pub process: String,
    /// The user task's element id.
    pub element: String,
    /// Its name in the diagram.
    pub name: Option<String>,
    /// Who holds it.
    pub assignee: Option<String>,
    /// Who may claim it.
    pub candidate_users: Vec<String>,
    /// Groups whose members may claim it.
    pub candidate_groups: Vec<String>,
    /// Due date (ISO 8601, as the model gave it).
    pub due: Option<String>,
    /// Follow-up date (ISO 8601, as the model gave it).
    pub follow_up: Option<String>,
    /// Priority.
    pub priority: Option<String>,
    /// Form key.
    pub form_key: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// How long it has been open, in milliseconds.
    pub age_ms: u64,
}

/// Which user tasks to list (all given conditions hold).
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Held by this user.
    pub assignee: Option<String>,
    /// This user may claim it (a candidate user, or unassigned with no candidates).
    pub candidate_user: Option<String>,
    /// Members of this group may claim it.
    pub candidate_group: Option<String>,
    /// Of this process.
    pub process: Option<String>,
    /// At this element.
    pub element: Option<String>,
    /// Created before this instant.
    pub created_before: Option<Millis>,
    /// Due before this instant (tasks whose due date is not an instant never match).
    pub due_before: Option<Millis>,
}

impl TaskFilter {
    fn keeps(&self, t: &TaskRecord) -> bool {
        let due = t
            .due
            .as_deref()
            .and_then(|d| crate::model::iso::instant(d).ok());
        self.assignee
            .as_ref()
            .is_none_or(|a| t.assignee.as_ref() == Some(a))
            && self.candidate_user.as_ref().is_none_or(|u| {
                t.candidate_users.contains(u)
                    || (t.assignee.is_none()
                        && t.candidate_users.is_empty()
                        && t.candidate_groups.is_empty())
            })
            && self
                .candidate_group
                .as_ref()
                .is_none_or(|g| t.candidate_groups.contains(g))
            && self.process.as_ref().is_none_or(|p| &t.process == p)
            && self.element.as_ref().is_none_or(|e| &t.element == e)
            && self.created_before.is_none_or(|b| t.created_at < b)
            && self.due_before.is_none_or(|b| due.is_some_and(|d| d < b))
    }
}

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

    fn keeps(&self, f: &InstanceFilter, rec: &InstanceRecord) -> Result<bool, RErr> {
        if f.process.as_ref().is_some_and(|p| &rec.process != p)
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
    fn incidents(&self, rec: &InstanceRecord) -> Result<Vec<String>, RErr> {
        let mut out = Vec::new();
        for t in &rec.tokens {
            match &t.wait {
                Wait::Incident { error } => out.push(format!("{}: {error}", t.element)),
                Wait::Job { job } | Wait::Timer { job } => {
                    if let Some(j) = self.snap.job(*job)?
                        && j.state == JobState::Incident
                    {
                        let error = j.last_error.as_deref().unwrap_or("out of attempts");
                        out.push(format!("{}: job {}: {error}", t.element, j.id));
                    }
                }
                Wait::Message { .. }
                | Wait::Signal { .. }
                | Wait::Events { .. }
                | Wait::Join { .. }
                | Wait::Task { .. }
                | Wait::Scope
                | Wait::Child { .. }
                | Wait::Body { .. }
                | Wait::Condition
                | Wait::Trigger => {}
            }
        }
        Ok(out)
    }

    /// The operator's view of `rec`.
    fn view(&self, rec: &InstanceRecord) -> Result<InstanceView, RErr> {
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

    /// Messages in the buffer and/or parked.
    pub fn messages(&self, filter: &MessageFilter) -> Result<Vec<MessageView>, RErr> {
        let (buffered, parked) = if !filter.buffered && !filter.parked {
            (true, true)
        } else {
            (filter.buffered, filter.parked)
        };
        let mut recs: Vec<MessageRecord> = Vec::new();
        if buffered {
            recs.extend(self.snap.buffered()?);
        }
        if parked {
            recs.extend(self.snap.parked()?);
        }
        if let Some(r) = filter.reason {
            recs.retain(|m| m.reason == Some(r));
        }
        recs.sort_by_key(|m| m.seq);
        Ok(recs.iter().map(message_view).collect())
    }

    /// One page of the messages `filter` asks for, read from the `parked` and
    /// `buffer_age` indexes (never the whole table): parked ones first, by
    /// sequence, then buffered ones, oldest first. `after` is the `next` of
    /// the previous page; a page reads at most [`PAGE_SCAN_BUDGET`] records.
    pub fn message_page(
        &self,
        filter: &MessageFilter,
        after: Option<&str>,
        limit: usize,
    ) -> Result<MessagePage, MessageCursorError> {
        let (buffered, parked) = if !filter.buffered && !filter.parked {
            (true, true)
        } else {
            (filter.buffered, filter.parked)
        };
        let limit = limit.max(1);
        let mut cursor = match after {
            None => None,
            Some(c) => Some(MessageCursor::parse(c)?),
        };
        let mut out = Vec::new();
        let mut examined = 0usize;
        let full = |out: &Vec<MessageView>, examined: usize| {
            out.len() == limit || examined >= PAGE_SCAN_BUDGET
        };
        if parked && !matches!(cursor, Some(MessageCursor::Buffered(..))) {
            let mut from = match cursor {
                Some(MessageCursor::Parked(s)) => Some(s),
                _ => None,
            };
            loop {
                let batch = self.snap.parked_after(from, 256)?;
                if batch.is_empty() {
                    break;
                }
                for m in batch {
                    if full(&out, examined) {
                        return Ok(MessagePage {
                            messages: out,
                            next: from.map(|s| MessageCursor::Parked(s).to_string()),
                        });
                    }
                    examined += 1;
                    from = Some(m.seq);
                    if filter.reason.is_none_or(|r| m.reason == Some(r)) {
                        out.push(message_view(&m));
                    }
                }
            }
            cursor = None;
        }
        if buffered && filter.reason.is_none() {
            let mut from = match cursor {
                Some(MessageCursor::Buffered(at, seq)) => Some((at, seq)),
                _ => None,
            };
            loop {
                let batch = self.snap.buffered_after(from, 256)?;
                if batch.is_empty() {
                    break;
                }
                for m in batch {
                    if full(&out, examined) {
                        return Ok(MessagePage {
                            messages: out,
                            // before the first buffered one: the start of the buffer
                            next: Some(from.map_or(MessageCursor::Buffered(0, 0), |(a, s)| {
                                MessageCursor::Buffered(a, s)
                            }))
                            .map(|c| c.to_string()),
                        });
                    }
                    examined += 1;
                    from = Some((m.accepted_at, m.seq));
                    out.push(message_view(&m));
                }
            }
        }
        Ok(MessagePage {
            messages: out,
            next: None,
        })
    }

    /// Every message record with this id (any state).
    pub fn message(&self, id: &str) -> Result<Vec<MessageView>, RErr> {
        Ok(self
            .snap
            .messages_by_id(id)?
            .iter()
            .map(message_view)
            .collect())
    }

    /// Open user tasks that pass `filter`, oldest first.
    pub fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskView>, RErr> {
        Ok(self
            .snap
            .tasks()?
            .iter()
            .filter(|t| filter.keeps(t))
            .map(|t| TaskView {
                task: t.id.to_string(),
                instance: t.instance.to_string(),
                process: t.process.clone(),
                element: t.element.clone(),
                name: t.name.clone(),
                assignee: t.assignee.clone(),
                candidate_users: t.candidate_users.clone(),
                candidate_groups: t.candidate_groups.clone(),
                due: t.due.clone(),
                follow_up: t.follow_up.clone(),
                priority: t.priority.clone(),
                form_key: t.form_key.clone(),
                created_at: rfc3339(t.created_at),
                age_ms: self.now.saturating_sub(t.created_at),
            })
            .collect())
    }

    /// Open user tasks per element: how many, and since when the oldest is
    /// open (from a gauge and an index head per element, not the tasks).
    pub fn open_tasks_summary(&self) -> Result<Vec<(String, u64, Millis)>, RErr> {
        self.snap.open_tasks_summary()
    }

    /// One job, while it exists (a job that ran is gone).
    pub fn job(&self, id: u64) -> Result<Option<JobView>, RErr> {
        Ok(self.snap.job(id)?.as_ref().map(job_view))
    }

    /// Jobs, or only incidents.
    pub fn jobs(&self, incidents_only: bool) -> Result<Vec<JobView>, RErr> {
        let jobs = if incidents_only {
            self.snap.incident_jobs()?
        } else {
            self.snap.jobs()?
        };
        Ok(jobs.iter().map(job_view).collect())
    }

    /// One page of jobs (or only incidents) after job id `after`, by id, and
    /// the cursor of the next page when more may follow.
    pub fn job_page(
        &self,
        incidents_only: bool,
        after: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<JobView>, Option<String>), RErr> {
        let limit = limit.max(1);
        let mut jobs = self.snap.jobs_after(incidents_only, after, limit + 1)?;
        let more = jobs.len() > limit;
        jobs.truncate(limit);
        let next = more
            .then(|| jobs.last().map(|j| j.id.to_string()))
            .flatten();
        Ok((jobs.iter().map(job_view).collect(), next))
    }

    /// The claim-check reference in variable `variable` of job `id`'s
    /// instance: `Ok(None)` for an unknown job, an error naming the job and
    /// variable when it holds no reference.
    pub fn claim_check(
        &self,
        id: u64,
        variable: &str,
    ) -> Result<Option<Result<crate::objects::ObjectRef, crate::objects::ObjectError>>, RErr> {
        let Some(job) = self.snap.job(id)? else {
            return Ok(None);
        };
        let variables = self
            .snap
            .instance(job.instance)?
            .map(|i| i.variables)
            .unwrap_or_default();
        Ok(Some(crate::objects::reference_in(id, &variables, variable)))
    }

    /// Every deployed process with its versions.
    pub fn deployed(&self) -> Result<Vec<DeployedView>, RErr> {
        Ok(self
            .snap
            .deployed()?
            .into_iter()
            .map(|(process, versions)| DeployedView {
                process,
                latest_version: versions.last().map_or(0, |v| v.0),
                versions: versions
                    .into_iter()
                    .map(|(version, at, file)| VersionView {
                        version,
                        deployed_at: rfc3339(at),
                        file,
                    })
                    .collect(),
            })
            .collect())
    }

    /// The BPMN XML `process` at `version` (default: the latest) was deployed
    /// from; `None` for an unknown version or one deployed before sources were kept.
    pub fn source(&self, process: &str, version: Option<u32>) -> Result<Option<String>, RErr> {
        let Some(version) = version.or(self.snap.latest_version(process)?) else {
            return Ok(None);
        };
        self.snap.definition_source(process, version)
    }

    /// The figures of every element of `process` at `version` (default: the
    /// latest); `None` when no such version is deployed. Reads gauges and the
    /// first row of an index per element: no instance, job or message is scanned.
    pub fn statistics(
        &self,
        process: &str,
        version: Option<u32>,
    ) -> Result<Option<ProcessStatistics>, RErr> {
        let Some(latest) = self.snap.latest_version(process)? else {
            return Ok(None);
        };
        let version = version.unwrap_or(latest);
        let Some(model) = self.process(process, version)? else {
            return Ok(None);
        };
        let scope = format!("{process}:{version}:");
        let of = |prefix: &str| -> Result<BTreeMap<String, u64>, RErr> {
            self.snap.gauges(&format!("{prefix}{scope}"))
        };
        let (tokens, ready, incidents) = (of(STAT_TOKENS)?, of(STAT_READY)?, of(STAT_INCIDENTS)?);
        let parked_all = self.snap.gauges(PARKED_BY_NAME)?;
        let mut elements = Vec::with_capacity(model.elements.len());
        for e in &model.elements {
            let count = |m: &BTreeMap<String, u64>| m.get(&e.id).copied().unwrap_or(0);
            let oldest = self.snap.oldest_token(process, version, &e.id)?;
            let message = e.kind.waits_for_message().map(str::to_string);
            let (buffered, parked) = match &message {
                None => (0, BTreeMap::new()),
                Some(name) => {
                    let buffered = self.snap.cursor(&format!("{BUFFERED_BY_NAME}{name}"))?;
                    let mut parked = BTreeMap::new();
                    for (k, n) in &parked_all {
                        if let Some((reason, of_name)) = k.split_once(':')
                            && of_name == name
                        {
                            parked.insert(reason.to_string(), *n);
                        }
                    }
                    (buffered, parked)
                }
            };
            elements.push(ElementStatistics {
                element: e.id.clone(),
                name: e.name.clone(),
                kind: e.kind.label(),
                waiting: count(&tokens),
                oldest_wait_since: oldest.map(rfc3339),
                oldest_wait_ms: oldest.map(|t| self.now.saturating_sub(t)),
                jobs_ready: count(&ready),
                incidents: count(&incidents),
                message,
                buffered,
                parked,
            });
        }
        Ok(Some(ProcessStatistics {
            process: process.to_string(),
            version,
            latest_version: latest,
            elements,
        }))
    }

    /// Event counters (duplicates, parked by reason, signals that reached nobody, ...).
    pub fn counters(&self) -> Result<BTreeMap<String, u64>, RErr> {
        self.snap.counters()
    }

    /// Number of message records per state.
    pub fn message_counts(&self) -> Result<BTreeMap<&'static str, u64>, RErr> {
        let mut out = BTreeMap::new();
        for m in self.snap.messages()? {
            *out.entry(m.state.as_str()).or_default() += 1;
        }
        Ok(out)
    }

    /// Age of the oldest buffered message, if any (one index lookup).
    pub fn oldest_buffered_age(&self) -> Result<Option<u64>, RErr> {
        let oldest = self.snap.oldest_buffered_at()?;
        Ok(oldest.map(|o| self.now.saturating_sub(o)))
    }

    /// When the next job becomes due: the earliest async continuation, task job
    /// of one of `topics`, or lease expiry.
    pub fn next_due(&self, topics: &[String]) -> Result<Option<Millis>, RErr> {
        self.snap.next_due(topics)
    }

    /// The deployed process definition of an instance.
    pub fn process(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<Arc<crate::model::Process>>, RErr> {
        load_def(&self.defs, process, version, || {
            self.snap.definition(process, version)
        })
    }
}

/// `cancelled`, `completed`, `incident` (an active instance with an
/// incident) or `active`.
fn instance_state(r: &InstanceRecord, incident: bool) -> &'static str {
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

fn instance_view(
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

fn message_view(m: &MessageRecord) -> MessageView {
    MessageView {
        message_id: m.message_id.clone(),
        name: m.name.clone(),
        key: m.key.clone(),
        state: m.state.as_str(),
        reason: m.reason.map(Reason::as_str),
        accepted_at: rfc3339(m.accepted_at),
        expires_at: m
            .expires_at
            .filter(|_| m.state == MessageState::Buffered)
            .map(rfc3339),
        candidates: m.candidates.iter().map(u64::to_string).collect(),
        candidate_elements: m
            .candidate_elements
            .iter()
            .map(|(i, e)| CandidateView {
                instance: i.to_string(),
                element: e.clone(),
            })
            .collect(),
        instance: m.instance.map(|i| i.to_string()),
        element: m.element.clone(),
        note: m.note.clone(),
        attributes: m.attributes.iter().cloned().collect(),
        raw: m
            .raw
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        raw_hex: m.raw.as_ref().map(|b| {
            use std::fmt::Write;
            b.iter()
                .fold(String::with_capacity(b.len() * 2), |mut s, x| {
                    let _ = write!(s, "{x:02x}");
                    s
                })
        }),
        requeues: m.requeues,
        settled_at: m.settled_at.map(rfc3339),
    }
}

fn job_view(j: &JobRecord) -> JobView {
    JobView {
        job: j.id.to_string(),
        instance: (!matches!(j.kind, JobKind::StartTimer { .. })).then(|| j.instance.to_string()),
        element: j.element.clone(),
        kind: match j.kind {
            JobKind::Continue => "async_continuation",
            JobKind::ContinueAfter => "async_after",
            JobKind::Task { .. } => "task",
            JobKind::Timer { .. } => "timer",
            JobKind::StartTimer { .. } => "start_timer",
        },
        topic: match &j.kind {
            JobKind::Task { topic } => Some(topic.clone()),
            JobKind::Continue
            | JobKind::ContinueAfter
            | JobKind::Timer { .. }
            | JobKind::StartTimer { .. } => None,
        },
        state: match j.state {
            JobState::Ready => "ready",
            JobState::Locked => "locked",
            JobState::Incident => "incident",
        },
        attempts: j.attempts,
        error: j.last_error.clone(),
        due_at: rfc3339(j.due_at),
        idempotency_key: j.idempotency_key.clone(),
        history: j
            .history
            .iter()
            .map(|a| AttemptView {
                at: rfc3339(a.at),
                error: a.error.clone(),
            })
            .collect(),
        lease_owner: j.lease.as_ref().map(|l| l.owner.clone()),
        lease_until: j.lease.as_ref().map(|l| rfc3339(l.until)),
    }
}

impl Reader {
    /// Per element: tokens resting there and since when the oldest waits.
    pub fn waiting_summary(&self) -> Result<Vec<(String, u64, Millis)>, RErr> {
        self.snap.resting_summary()
    }

    /// How many messages wait in the buffer.
    pub fn buffered_count(&self) -> Result<u64, RErr> {
        self.snap.buffered_count()
    }

    /// Jobs due now and not taken yet, and incidents: from the due indexes
    /// and the incident gauge, without reading a job record.
    pub fn job_counts(&self) -> Result<(u64, u64), RErr> {
        Ok((self.snap.due_count(self.now)?, self.snap.incident_count()?))
    }

    /// The instant this snapshot was taken at.
    pub fn now(&self) -> Millis {
        self.now
    }

    /// Up to `limit` events about parked messages still to publish, oldest
    /// first, and how many wait in all (`[notifications] parked_topic`).
    pub fn parked_events(&self, limit: usize) -> Result<(Vec<PendingEvent>, u64), RErr> {
        let (rows, total) = self.snap.parked_events(limit)?;
        let events = rows
            .into_iter()
            .map(|(id, data)| PendingEvent {
                id,
                event_id: format!("{}{id}", crate::engine::EVENT_ID_PREFIX),
                data,
            })
            .collect();
        Ok((events, total))
    }

    /// Parked messages per reason.
    pub fn parked_by_reason(&self) -> Result<BTreeMap<&'static str, u64>, RErr> {
        let mut out = BTreeMap::new();
        for (reason, n) in self.snap.parked_gauges()? {
            let name = Reason::ALL
                .iter()
                .map(|r| r.as_str())
                .find(|r| *r == reason)
                .unwrap_or("unknown");
            *out.entry(name).or_default() += n;
        }
        Ok(out)
    }
}

/// An event about a parked message that waits to be published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// Its row: hand it to [`crate::Postfach::parked_events_sent`] once published.
    pub id: u64,
    /// The stable id a receiver deduplicates by (`eventId` in the JSON and
    /// as attribute).
    pub event_id: String,
    /// The event as JSON.
    pub data: Vec<u8>,
}

pub use crate::histogram::Histogram;

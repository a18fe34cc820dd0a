//! The instance record: its header, tokens and their waits, history
//! entries, and how a header is encoded — with the layouts read from older
//! formats (instances with tokens and history inline).
//!
//! Invariant: a header written by this build holds no tokens or variables
//! (they are rows); a record of an older layout is read, never rewritten
//! in place except by a migration.

use super::*;

/// Where a resting token waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Wait {
    Message {
        name: String,
        key: String,
    },
    Signal {
        name: String,
    },
    Job {
        job: u64,
    },
    /// An intermediate timer catch event; the job fires it.
    Timer {
        job: u64,
    },
    /// An event-based gateway: whichever of these happens first.
    Events {
        messages: Vec<(String, String)>,
        signals: Vec<String>,
        timers: Vec<u64>,
    },
    Join {
        flow: usize,
    },
    Incident {
        error: String,
    },
    /// A user task: the open task record `task` in the task list.
    /// (Stored in instance records: new variants go last.)
    Task {
        /// The task id.
        task: u64,
    },
    /// The token holds the scope of an embedded subprocess: tokens whose
    /// `scope` is its id run inside; it holds the subprocess's boundary events
    /// and leaves when the last of them has ended.
    Scope,
    /// A call activity: waits for the child instance it started.
    Child {
        /// The child instance's id.
        instance: u64,
    },
    /// The multi-instance body of an activity: its inner instances are the
    /// tokens at the same element whose scope is this token; the body holds
    /// the activity's boundary events and leaves when the last inner instance
    /// has completed (or the completion condition held).
    Body {
        /// The items, as JSON text, fixed when the body started (empty for
        /// `loopCardinality`: the inner instances have no item).
        items: Vec<String>,
        /// The output collection as JSON text, one entry per item (empty
        /// without one): kept here, not in a variable, so that no inner
        /// instance's result can overwrite it.
        outputs: Vec<String>,
        /// Inner instances in all.
        count: u32,
        /// Inner instances started so far (sequential: the next one's index).
        started: u32,
        /// Inner instances completed so far.
        completed: u32,
    },
    /// A conditional catch event, or the listener of a conditional event
    /// subprocess: nothing is registered; the engine asks the condition
    /// after every command that changed the instance's variables.
    Condition,
    /// A wait state (a receive task or catch event without an event
    /// definition): nothing is registered; a caller triggers it.
    Trigger,
    /// A compensation throw or cancel end event: the compensation handlers
    /// it started run as tokens in its scope (this token's id); it moves on
    /// when the last of them has ended. (Stored in token rows: new variants
    /// go last.)
    Compensating,
    /// The token holds the scope of an ad-hoc subprocess: tokens whose
    /// `scope` is its id run the activities a caller (or its active
    /// elements collection) activated; it may be empty. `completing`: its
    /// completion condition held while activities still ran, so it leaves
    /// when the last of them has ended.
    AdHoc {
        /// Its completion condition held.
        completing: bool,
    },
}

impl Wait {
    /// What the token waits for, in words (views, refusals). A body's count
    /// of running inner instances is the caller's to add.
    pub fn describe(&self) -> String {
        match self {
            Wait::Message { name, key } => format!("message {name} key {key}"),
            Wait::Signal { name } => format!("signal {name}"),
            Wait::Job { job } => format!("job {job}"),
            Wait::Timer { job } => format!("timer job {job}"),
            Wait::Events { .. } => "the first of its gateway's events".to_string(),
            Wait::Join { .. } => "the other branches of the join".to_string(),
            Wait::Incident { error } => format!("an operator: {error}"),
            Wait::Task { task } => format!("user task {task}"),
            Wait::Scope => "the tokens inside it to end".to_string(),
            Wait::Child { instance } => format!("called instance {instance} to end"),
            Wait::Condition => "its condition to hold".to_string(),
            Wait::Trigger => "to be triggered".to_string(),
            Wait::Compensating => "its compensation handlers to complete".to_string(),
            Wait::AdHoc { completing: false } => {
                "activities to be activated, or to be completed".to_string()
            }
            Wait::AdHoc { completing: true } => {
                "the activities still running inside it to end".to_string()
            }
            Wait::Body {
                count, completed, ..
            } => format!("its inner instances: {completed} of {count} completed"),
        }
    }

    /// What this wait holds open, in one place for every kind of wait: the
    /// jobs (a job or timer it waits for, the timers of an event-based
    /// gateway), the (message, key) subscriptions (a message catch, an
    /// event-based gateway's messages) and the signals (a signal catch, an
    /// event-based gateway's signals). Boundary timers and subscriptions are
    /// the token's own.
    pub fn held(&self) -> Held<'_> {
        match self {
            Wait::Job { job } | Wait::Timer { job } => Held {
                jobs: vec![*job],
                ..Held::default()
            },
            Wait::Message { name, key } => Held {
                messages: vec![(name.as_str(), key.as_str())],
                ..Held::default()
            },
            Wait::Signal { name } => Held {
                signals: vec![name.as_str()],
                ..Held::default()
            },
            Wait::Events {
                messages,
                signals,
                timers,
            } => Held {
                jobs: timers.clone(),
                messages: messages
                    .iter()
                    .map(|(n, k)| (n.as_str(), k.as_str()))
                    .collect(),
                signals: signals.iter().map(String::as_str).collect(),
            },
            Wait::Join { .. }
            | Wait::Incident { .. }
            | Wait::Task { .. }
            | Wait::Scope
            | Wait::Child { .. }
            | Wait::Body { .. }
            | Wait::Condition
            | Wait::Trigger
            | Wait::Compensating
            | Wait::AdHoc { .. } => Held::default(),
        }
    }

    /// The jobs this wait holds ([`Wait::held`]).
    pub fn jobs(&self) -> Vec<u64> {
        self.held().jobs
    }

    /// The (message, key) subscriptions this wait holds open ([`Wait::held`]).
    pub fn messages(&self) -> Vec<(&str, &str)> {
        self.held().messages
    }

    /// The signals this wait is subscribed to ([`Wait::held`]).
    pub fn signals(&self) -> Vec<&str> {
        self.held().signals
    }
}

/// What a wait holds open ([`Wait::held`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Held<'a> {
    /// Jobs and timers.
    pub jobs: Vec<u64>,
    /// (message, key) subscriptions.
    pub messages: Vec<(&'a str, &'a str)>,
    /// Signal subscriptions.
    pub signals: Vec<&'a str>,
}

/// A token at rest. Between transactions every live token rests somewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    pub id: u64,
    pub element: String,
    pub wait: Wait,
    pub since: Millis,
    /// Timer jobs of the boundary events of the activity this token is in.
    pub timers: Vec<u64>,
    /// The token holding the scope this token runs in ([`Wait::Scope`], at an
    /// embedded subprocess); 0 for the process itself. Stored after the
    /// record (see [`encode_instance`]), so records without scopes keep the
    /// layout of format version 1.
    #[serde(skip)]
    pub scope: u64,
    /// Variables local to this token and the tokens running inside it (a
    /// multi-instance inner instance's element variable and loop counter).
    /// Stored in the record's tail, like `scope`.
    #[serde(skip)]
    pub locals: Vars,
    /// The (message, key) subscriptions the message boundary events of the
    /// activity this token is in opened, with the key as it was then: closing
    /// removes exactly these, whatever the key variable says by then. Stored
    /// in the record's tail; empty in records written before it was kept
    /// (their boundaries close by the key they have now).
    #[serde(skip)]
    pub boundary_messages: Vec<(String, String)>,
    /// The signals the signal boundary events of the activity this token is
    /// in subscribed to: closing removes exactly these. Stored in the token
    /// row's tail.
    #[serde(skip)]
    pub boundary_signals: Vec<String>,
}

impl Token {
    /// Every (message, key) subscription this token holds open: its wait's
    /// and its activity's boundary events'. The store derives the
    /// `subscriptions` rows from exactly these.
    pub fn open_messages(&self) -> Vec<(&str, &str)> {
        let mut out = self.wait.messages();
        out.extend(
            self.boundary_messages
                .iter()
                .map(|(n, k)| (n.as_str(), k.as_str())),
        );
        out
    }

    /// Every signal subscription this token holds open: its wait's and its
    /// activity's boundary events'. The store derives the `signal_subs` rows
    /// from exactly these.
    pub fn open_signals(&self) -> Vec<&str> {
        let mut out = self.wait.signals();
        out.extend(self.boundary_signals.iter().map(String::as_str));
        out
    }
}

/// One line of an instance's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub element: String,
    pub event: String,
    pub at: Millis,
}

/// A process instance with its tokens and variables; its history lives in
/// the `history` rows. (Read and written through [`decode_instance`] and
/// [`encode_instance`], which keep the token scopes.)
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub id: u64,
    pub process: String,
    pub version: u32,
    pub business_key: Option<String>,
    /// Its variables: rows of their own (`variables`), read as they are
    /// asked for (see [`Variables`]).
    #[serde(skip)]
    pub variables: Variables,
    /// Its tokens: rows of their own (`tokens`), read as they are asked for
    /// (see [`Tokens`]).
    #[serde(skip)]
    pub tokens: Tokens,
    pub next_token: u64,
    pub activations: u64,
    /// History entries written as rows so far: the next entry's sequence.
    pub history_len: u64,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    /// Ended because an operator cancelled its last token.
    pub cancelled: bool,
    /// (message, key) pairs registered in `expect`.
    pub expects: Vec<(String, String)>,
    /// How many tokens run at the process level (scope 0), kept here by the
    /// store from the token rows (a scope inside has `scope_sizes` rows):
    /// "has the instance a token left" is answered from the header.
    pub top_level: u64,
    /// The instance and token of the call activity that started this one
    /// (stored in the record's tail, see [`encode_instance`]).
    #[serde(skip)]
    pub called_by: Option<(u64, u64)>,
    /// History entries of this transaction, not written yet: the store
    /// appends them as rows from `history_len` on when it writes the record.
    #[serde(skip)]
    pub new_history: Vec<HistoryEntry>,
}

/// The layout of an instance record before its history became rows (record
/// versions 1 and 2): read to migrate, never written.
#[derive(Deserialize)]
pub(super) struct LegacyInstanceRecord {
    id: u64,
    process: String,
    version: u32,
    business_key: Option<String>,
    #[serde(with = "json_text")]
    variables: Vars,
    tokens: Vec<Token>,
    next_token: u64,
    activations: u64,
    history: Vec<HistoryEntry>,
    started_at: Millis,
    ended_at: Option<Millis>,
    cancelled: bool,
    expects: Vec<(String, String)>,
}

/// The layout of an instance record whose history was rows but whose tokens
/// were inside (record version 3): read to migrate, never written.
#[derive(Deserialize)]
pub(super) struct InlineTokensRecord {
    id: u64,
    process: String,
    version: u32,
    business_key: Option<String>,
    #[serde(with = "json_text")]
    variables: Vars,
    tokens: Vec<Token>,
    next_token: u64,
    activations: u64,
    history_len: u64,
    started_at: Millis,
    ended_at: Option<Millis>,
    cancelled: bool,
    expects: Vec<(String, String)>,
}

impl InlineTokensRecord {
    /// The record with its tokens (their tail fields applied) as a complete set.
    fn into_record(self, tokens: Vec<Token>, new_history: Vec<HistoryEntry>) -> InstanceRecord {
        let top_level = tokens.iter().filter(|t| t.scope == 0).count() as u64;
        InstanceRecord {
            top_level,
            id: self.id,
            process: self.process,
            version: self.version,
            business_key: self.business_key,
            variables: Variables::complete(self.variables),
            tokens: Tokens::complete(tokens),
            next_token: self.next_token,
            activations: self.activations,
            history_len: self.history_len,
            started_at: self.started_at,
            ended_at: self.ended_at,
            cancelled: self.cancelled,
            expects: self.expects,
            called_by: None,
            new_history,
        }
    }
}

impl From<LegacyInstanceRecord> for (InlineTokensRecord, Vec<HistoryEntry>) {
    /// Its history becomes entries to append: rows from 0 on.
    fn from(l: LegacyInstanceRecord) -> Self {
        (
            InlineTokensRecord {
                id: l.id,
                process: l.process,
                version: l.version,
                business_key: l.business_key,
                variables: l.variables,
                tokens: l.tokens,
                next_token: l.next_token,
                activations: l.activations,
                history_len: 0,
                started_at: l.started_at,
                ended_at: l.ended_at,
                cancelled: l.cancelled,
                expects: l.expects,
            },
            l.history,
        )
    }
}

/// How deep scopes are followed outwards from a token: far beyond any
/// model's nesting, a bound only against damaged rows that form a cycle.
pub const MAX_NESTING: usize = 10_000;

/// The counters a multi-instance body shows its inner instances:
/// `nrOfInstances`, `nrOfCompletedInstances`, `nrOfActiveInstances`.
pub const COUNTERS: [&str; 3] = [
    "nrOfInstances",
    "nrOfCompletedInstances",
    "nrOfActiveInstances",
];

impl InstanceRecord {
    /// Appends a history entry (written as a row with the record).
    pub fn record(&mut self, element: &str, event: &str, at: Millis) {
        self.new_history.push(HistoryEntry {
            element: element.to_string(),
            event: event.to_string(),
            at,
        });
    }

    /// The variables named in `names` as token `token` sees them (see
    /// [`InstanceRecord::view`]), without copying the others: what a worker
    /// that asked for only these gets. A name no scope has is left out.
    pub fn view_of(&self, token: u64, names: &[String]) -> Vars {
        let chain = self.chain(token);
        let mut out = Vars::new();
        'names: for name in names {
            for t in &chain {
                if let Some(v) = t.locals.get(name) {
                    out.insert(name.clone(), v.clone());
                    continue 'names;
                }
                if let Wait::Body {
                    count, completed, ..
                } = t.wait
                    && let Some(i) = COUNTERS.iter().position(|c| c == name)
                {
                    let active = self.tokens.scope_size(t.id) as usize;
                    let n = [count as usize, completed as usize, active][i];
                    out.insert(name.clone(), n.into());
                    continue 'names;
                }
            }
            if let Some(v) = self.variables.lookup(name) {
                out.insert(name.clone(), v.clone());
            }
        }
        out
    }

    /// The variables token `token` sees: the instance's, overlaid by the
    /// local variables of each scope around the token (outermost first) and
    /// its own; a multi-instance body adds `nrOfInstances`,
    /// `nrOfCompletedInstances` and `nrOfActiveInstances`. Borrowed when
    /// nothing local applies (the common case).
    pub fn view(&self, token: u64) -> std::borrow::Cow<'_, Vars> {
        let chain = self.chain(token);
        if chain
            .iter()
            .all(|t| t.locals.is_empty() && !matches!(t.wait, Wait::Body { .. }))
        {
            return std::borrow::Cow::Borrowed(&*self.variables);
        }
        let mut vars: Vars = (*self.variables).clone();
        for t in chain.iter().rev() {
            if let Wait::Body {
                count, completed, ..
            } = t.wait
            {
                let active = self.tokens.scope_size(t.id) as usize;
                for (name, n) in COUNTERS
                    .iter()
                    .zip([count as usize, completed as usize, active])
                {
                    vars.insert(name.to_string(), n.into());
                }
            }
            vars.extend(t.locals.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        std::borrow::Cow::Owned(vars)
    }

    /// Sets variable `name` as token `token` writes it: in the innermost
    /// scope around the token (the token itself first) that has it as a
    /// local variable, else in the instance's variables.
    pub fn assign(&mut self, token: u64, name: &str, value: serde_json::Value) {
        let chain = self.chain(token);
        let counted = chain.iter().any(|t| matches!(t.wait, Wait::Body { .. }));
        if counted && COUNTERS.contains(&name) {
            return; // a body's counters are computed, not set
        }
        let owner = chain
            .iter()
            .find(|t| t.locals.contains_key(name))
            .map(|t| t.id);
        match owner.and_then(|id| self.tokens.get_mut(id)) {
            Some(t) => {
                t.locals.insert(name.to_string(), value);
            }
            None => self.variables.set(name, value),
        }
    }

    /// Token `token` and the tokens holding the scopes around it, innermost
    /// first (at most [`MAX_NESTING`], should the rows be damaged). Whoever
    /// asks has read them (`Tables::fill_chain`).
    fn chain(&self, token: u64) -> Vec<&Token> {
        let mut out: Vec<&Token> = Vec::new();
        let mut at = token;
        while at != 0 && out.len() <= MAX_NESTING {
            let Some(t) = self.tokens.get(at) else {
                break;
            };
            out.push(t);
            at = t.scope;
        }
        out
    }

    /// The multi-instance body token `token` is an inner instance of: its
    /// scope's holder, at the same element, holding [`Wait::Body`].
    pub fn body_of(&self, token: u64) -> Option<u64> {
        let t = self.tokens.get(token)?;
        if t.scope == 0 {
            return None;
        }
        let h = self.tokens.get(t.scope)?;
        (matches!(h.wait, Wait::Body { .. }) && h.element == t.element).then_some(h.id)
    }
}

/// One thing an instance record carries after its format-1 body (see
/// [`encode_instance`]). Variants are encoded by position: new ones go last,
/// and a build that does not know one refuses the record.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum TailField {
    /// The scope of each token, in token order.
    Scopes(Vec<u64>),
    /// The call activity that started this instance: (instance, token).
    CalledBy(u64, u64),
    /// The local variables of the tokens that have any: (token, JSON text).
    Locals(Vec<(u64, String)>),
    /// The boundary subscriptions of the tokens that hold any: (token,
    /// [(message, key)]).
    Subscribed(Vec<(u64, Vec<(String, String)>)>),
}

/// An instance header's bytes ([`codec::HEADER_VERSION`]): the record
/// without its tokens (rows of their own, [`encode_token`]) and without
/// `new_history` (rows, [`Tables::put_instance`]); the call activity that
/// started it in its tail.
pub(crate) fn encode_instance(rec: &InstanceRecord) -> Result<Vec<u8>, CodecError> {
    let mut tail = Vec::new();
    if let Some((i, t)) = rec.called_by {
        tail.push(TailField::CalledBy(i, t));
    }
    codec::encode_versioned(rec, &tail, codec::HEADER_VERSION)
}

/// Reads an instance record: a header ([`encode_instance`]; its tokens are
/// read on demand), or a record of the layouts before it (versions 1 to 3,
/// tokens inside: they come back as a complete set, and a history inside as
/// `new_history`, for the migration to write as rows).
pub(crate) fn decode_instance(bytes: &[u8]) -> Result<InstanceRecord, CodecError> {
    let version = codec::version_of(bytes)?;
    if version == codec::HEADER_VERSION {
        let (mut rec, tail): (InstanceRecord, Vec<TailField>) =
            codec::decode_versioned(bytes, codec::HEADER_VERSION)?;
        for field in tail {
            match field {
                TailField::CalledBy(i, t) => rec.called_by = Some((i, t)),
                TailField::Scopes(_) | TailField::Locals(_) | TailField::Subscribed(_) => {
                    return Err(CodecError::Decode(format!(
                        "instance {}: token fields in the tail of a header",
                        rec.id
                    )));
                }
            }
        }
        rec.tokens = Tokens::on_demand();
        rec.tokens.sized(0, rec.top_level);
        rec.variables = Variables::on_demand();
        return Ok(rec);
    }
    let (mut inline, history, tail): (InlineTokensRecord, Vec<HistoryEntry>, Vec<TailField>) =
        if version == codec::ROWS_VERSION {
            let (rec, tail) = codec::decode_versioned(bytes, codec::ROWS_VERSION)?;
            (rec, Vec::new(), tail)
        } else {
            let (legacy, tail): (LegacyInstanceRecord, Vec<TailField>) =
                codec::decode_tailed(bytes)?;
            let (rec, history) = legacy.into();
            (rec, history, tail)
        };
    let id = inline.id;
    let mut tokens = std::mem::take(&mut inline.tokens);
    let mut called_by = None;
    // token id → position: a tail names tokens by id (a linear search for
    // each would cost O(n²) in a large multi-instance activity)
    let at: std::collections::HashMap<u64, usize> =
        tokens.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    for field in tail {
        match field {
            TailField::Scopes(scopes) => {
                if scopes.len() != tokens.len() {
                    return Err(CodecError::Decode(format!(
                        "instance {id}: {} token scopes for {} tokens",
                        scopes.len(),
                        tokens.len()
                    )));
                }
                for (t, s) in tokens.iter_mut().zip(scopes) {
                    t.scope = s;
                }
            }
            TailField::CalledBy(i, t) => called_by = Some((i, t)),
            TailField::Subscribed(subs) => {
                for (token, pairs) in subs {
                    match at.get(&token).and_then(|&i| tokens.get_mut(i)) {
                        Some(t) => t.boundary_messages = pairs,
                        None => {
                            return Err(CodecError::Decode(format!(
                                "instance {id}: subscriptions of token {token}, which it does not have"
                            )));
                        }
                    }
                }
            }
            TailField::Locals(locals) => {
                for (token, json) in locals {
                    let vars: Vars = serde_json::from_str(&json).map_err(|e| {
                        CodecError::Decode(format!(
                            "instance {id}: local variables of token {token}: {e}"
                        ))
                    })?;
                    match at.get(&token).and_then(|&i| tokens.get_mut(i)) {
                        Some(t) => t.locals = vars,
                        None => {
                            return Err(CodecError::Decode(format!(
                                "instance {id}: local variables of token {token}, which it does not have"
                            )));
                        }
                    }
                }
            }
        }
    }
    let mut rec = inline.into_record(tokens, history);
    rec.called_by = called_by;
    Ok(rec)
}

/// Every token row of instance `inst`, in id order.
pub(crate) fn read_tokens(
    table: &impl ReadableTable<(u64, u64), &'static [u8]>,
    inst: u64,
) -> Result<Vec<Token>, StoreError> {
    let mut out = Vec::new();
    for row in table.range((inst, 0)..=(inst, u64::MAX))? {
        out.push(decode_token(row?.1.value())?);
    }
    Ok(out)
}

/// Every variable row of instance `inst`.
pub(crate) fn read_variables(
    table: &impl ReadableTable<(u64, &'static str), &'static [u8]>,
    inst: u64,
) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
    let mut out = Vec::new();
    for row in table.range((inst, "")..)? {
        let (k, v) = row?;
        let (i, name) = k.value();
        if i != inst {
            break;
        }
        let value = serde_json::from_slice(v.value()).map_err(|e| {
            CodecError::Decode(format!("variable '{name}' of instance {inst}: {e}"))
        })?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// An instance record from its header's bytes with every token and every
/// variable read from their rows (a record of a layout before the header
/// holds them already).
pub(crate) fn read_instance(
    bytes: &[u8],
    tokens: &impl ReadableTable<(u64, u64), &'static [u8]>,
    variables: &impl ReadableTable<(u64, &'static str), &'static [u8]>,
) -> Result<InstanceRecord, StoreError> {
    let mut rec = decode_instance(bytes)?;
    if !rec.tokens.is_complete() {
        rec.tokens = Tokens::complete(read_tokens(tokens, rec.id)?);
    }
    if !rec.variables.is_complete() {
        rec.variables =
            Variables::complete(read_variables(variables, rec.id)?.into_iter().collect());
    }
    Ok(rec)
}

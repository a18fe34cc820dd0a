//! The store's own consistency check: every index row recomputed from the
//! records and compared with what the index tables hold.
//!
//! Invariant: on a database written only through [`super::Tables`], [`verify`]
//! finds nothing. The engine-level tests run it after every step of random
//! command sequences (test builds only).

use super::*;
mod models;

use models::{check_against_models, check_calls, check_compensations};
use redb::{ReadTransaction, ReadableMultimapTable, ReadableTable};
use std::collections::BTreeSet;

/// Every disagreement between records and index rows, in words (empty when
/// the database is consistent). With `waits`, also the engine's ownership
/// rule: every job of an instance is held by a live token of it (what the
/// engine writes; the store's own tests write jobs without instances).
pub(crate) fn verify(r: &ReadTransaction, waits: bool) -> Result<Vec<String>, StoreError> {
    let mut problems = Vec::new();
    let mut want = Rows::default();
    want_from_messages(r, &mut want)?;
    let scopes = check_history(r, &mut problems)?;
    let task_jobs = want_from_jobs(r, &scopes, &mut want)?;
    want_from_tokens(r, &mut want, &mut problems)?;
    let owned_jobs = check_against_models(r, &task_jobs, &mut problems)?;
    check_calls(r, &mut problems)?;
    check_compensations(r, &mut problems)?;
    if waits {
        check_job_owners(r, &owned_jobs, &mut problems)?;
    }
    let mut have = stored_index_rows(r, &mut want)?;
    check_instance_rows(r, &want, &mut have, &mut problems)?;
    compare_all(&want, &have, &mut problems);
    Ok(problems)
}

/// The rows the messages imply: dedup, buffer, expiry, parked, gauges.
fn want_from_messages(r: &ReadTransaction, want: &mut Rows) -> Result<(), StoreError> {
    for row in r.open_table(MESSAGES)?.iter()? {
        let m = super::decode_message(row?.1.value())?;
        want.dedup
            .insert((m.message_id.clone(), m.name.clone(), m.seq, m.accepted_at));
        if m.state == MessageState::Buffered {
            *want
                .gauges
                .entry(format!("{BUFFERED_BY_NAME}{}", m.name))
                .or_default() += 1;
            want.buffer.insert((m.name.clone(), m.key.clone(), m.seq));
            want.buffer_age.insert((m.accepted_at, m.seq));
            if let Some(at) = m.expires_at {
                want.expiry.insert((at, m.seq));
            }
        }
        for inst in super::tables::message_instances(&m) {
            want.instance_messages.insert((inst, m.seq));
        }
        if m.state == MessageState::Parked {
            want.parked.insert(m.seq);
            let reason = m.reason.map_or("unknown", Reason::as_str);
            *want
                .gauges
                .entry(format!("{PARKED_GAUGE}{reason}"))
                .or_default() += 1;
            *want
                .gauges
                .entry(format!("{PARKED_BY_NAME}{reason}:{}", m.name))
                .or_default() += 1;
        }
    }
    Ok(())
}

/// Each instance's history rows are its entries 0 .. history_len, one after
/// the other, none of another; returns each instance's definition version.
fn check_history(
    r: &ReadTransaction,
    problems: &mut Vec<String>,
) -> Result<std::collections::HashMap<u64, (String, u32)>, StoreError> {
    let mut scopes: std::collections::HashMap<u64, (String, u32)> = Default::default();
    let mut history_len: std::collections::BTreeMap<u64, u64> = Default::default();
    for row in r.open_table(INSTANCES)?.iter()? {
        let i: InstanceRecord = super::read_instance(
            row?.1.value(),
            &r.open_table(TOKENS)?,
            &r.open_table(VARIABLES)?,
        )?;
        if !i.new_history.is_empty() {
            problems.push(format!(
                "instance {}: {} history entries inside its record, not in rows",
                i.id,
                i.new_history.len()
            ));
        }
        history_len.insert(i.id, i.history_len);
        scopes.insert(i.id, (i.process, i.version));
    }
    // history rows: entries 0 .. history_len of each instance, one after
    // the other, none of another
    let mut seen: std::collections::BTreeMap<u64, u64> = Default::default();
    for row in r.open_table(HISTORY)?.iter()? {
        let (k, v) = row?;
        let (inst, seq) = k.value();
        let n = super::history::len(v.value())? as u64;
        let next = seen.entry(inst).or_default();
        if seq != *next || n == 0 {
            problems.push(format!(
                "history: instance {inst} has a row of {n} entries at {seq} where {next} was due"
            ));
        }
        *next = seq + n;
    }
    for (inst, n) in &seen {
        match history_len.get(inst) {
            None => problems.push(format!(
                "history: {n} rows of instance {inst}, which does not exist"
            )),
            Some(len) if len != n => problems.push(format!(
                "history: instance {inst} counts {len} entries, {n} rows are stored"
            )),
            Some(_) => {}
        }
    }
    for (inst, len) in &history_len {
        if *len > 0 && !seen.contains_key(inst) {
            problems.push(format!(
                "history: instance {inst} counts {len} entries, none is stored"
            ));
        }
    }
    Ok(scopes)
}

/// The rows the jobs imply (due indexes, leases, incident rows, gauges);
/// returns the jobs of tasks at work.
fn want_from_jobs(
    r: &ReadTransaction,
    scopes: &std::collections::HashMap<u64, (String, u32)>,
    want: &mut Rows,
) -> Result<BTreeSet<u64>, StoreError> {
    // the jobs of tasks at work (not an asynchronous start or end)
    let mut task_jobs: BTreeSet<u64> = BTreeSet::new();
    for row in r.open_table(JOBS)?.iter()? {
        let j: JobRecord = codec::decode(row?.1.value())?;
        if matches!(j.kind, JobKind::Task { .. }) {
            task_jobs.insert(j.id);
        }
        if j.state == JobState::Incident {
            *want.gauges.entry(INCIDENTS_GAUGE.to_string()).or_default() += 1;
            want.incident_jobs.insert(j.id);
        }
        let stat = match j.state {
            JobState::Ready => Some(STAT_READY),
            JobState::Incident => Some(STAT_INCIDENTS),
            JobState::Locked => None,
        };
        if let (Some(kind), Some((p, v)), false) = (
            stat,
            scopes.get(&j.instance),
            matches!(j.kind, JobKind::StartTimer { .. }),
        ) {
            *want
                .gauges
                .entry(stat_key(kind, p, *v, &j.element))
                .or_default() += 1;
        }
        if j.state == JobState::Ready {
            match &j.kind {
                JobKind::Continue
                | JobKind::ContinueAfter
                | JobKind::Timer { .. }
                | JobKind::StartTimer { .. } => {
                    want.cont_due.insert((j.due_at, j.id));
                }
                JobKind::Task { topic } => {
                    want.topic_due.insert((topic.clone(), j.due_at, j.id));
                }
            }
        }
        if let Some(l) = &j.lease {
            want.leases.insert((l.until, j.id));
        }
        if let JobKind::StartTimer { process, .. } = &j.kind {
            want.start_timers.insert((process.clone(), j.id));
        }
    }
    Ok(task_jobs)
}

/// The rows the tokens imply: where they rest, their scopes, the
/// registrations they hold open, their tasks.
fn want_from_tokens(
    r: &ReadTransaction,
    want: &mut Rows,
    problems: &mut Vec<String>,
) -> Result<(), StoreError> {
    for row in r.open_table(INSTANCES)?.iter()? {
        let i: InstanceRecord = super::read_instance(
            row?.1.value(),
            &r.open_table(TOKENS)?,
            &r.open_table(VARIABLES)?,
        )?;
        let top = i.tokens.iter().filter(|t| t.scope == 0).count() as u64;
        if i.top_level != top {
            problems.push(format!(
                "instance {}: its header counts {} tokens at the process level, its rows {top}",
                i.id, i.top_level
            ));
        }
        for t in &i.tokens {
            if t.scope != 0 {
                want.token_scopes.insert((i.id, t.scope, t.id));
                *want.scope_sizes.entry((i.id, t.scope)).or_default() += 1;
            }
            if matches!(t.wait, Wait::Body { .. }) {
                want.bodies.insert((i.id, t.id));
            }
            want.tokens_at
                .insert((t.element.clone(), t.since, i.id, t.id));
            want.version_tokens.insert((
                i.process.clone(),
                i.version,
                t.element.clone(),
                t.since,
                i.id,
                t.id,
            ));
            *want
                .gauges
                .entry(stat_key(STAT_TOKENS, &i.process, i.version, &t.element))
                .or_default() += 1;
            if matches!(t.wait, Wait::Incident { .. }) {
                *want
                    .gauges
                    .entry(stat_key(STAT_INCIDENTS, &i.process, i.version, &t.element))
                    .or_default() += 1;
            }
        }
        for (m, k) in &i.expects {
            want.expect.insert((m.clone(), k.clone(), i.id));
        }
        for t in &i.tokens {
            let sub = |n: &str, k: &str| (n.to_string(), k.to_string(), i.id, t.id);
            // the subscriptions are exactly the registrations tokens hold open
            for (name, key) in t.open_messages() {
                want.subscriptions.insert(sub(name, key));
            }
            for name in t.open_signals() {
                want.signal_subs.insert(sub(name, ""));
            }
            if let Wait::Task { task } = t.wait {
                want.tasks.insert((task, i.id, t.id));
            }
        }
    }

    Ok(())
}

/// No wait outside a live token: every job of an instance is held by its
/// token (start timers belong to no instance).
fn check_job_owners(
    r: &ReadTransaction,
    owned_jobs: &BTreeSet<(u64, u64, u64)>,
    problems: &mut Vec<String>,
) -> Result<(), StoreError> {
    for row in r.open_table(JOBS)?.iter()? {
        let j: JobRecord = codec::decode(row?.1.value())?;
        if !matches!(j.kind, JobKind::StartTimer { .. })
            && !owned_jobs.contains(&(j.id, j.instance, j.token))
        {
            problems.push(format!(
                "jobs: job {} of instance {} at '{}' is held by no token (token {})",
                j.id, j.instance, j.element, j.token
            ));
        }
    }

    Ok(())
}

/// The index rows as stored (and, from the task records, the task rows
/// they imply).
fn stored_index_rows(r: &ReadTransaction, want: &mut Rows) -> Result<Rows, StoreError> {
    let mut have = Rows::default();
    for row in r.open_table(DEDUP)?.iter()? {
        let (k, v) = row?;
        let ((id, name), (seq, at)) = (k.value(), v.value());
        have.dedup.insert((id.into(), name.into(), seq, at));
    }
    for row in r.open_table(BUFFER)?.iter()? {
        let row = row?;
        let (n, k, s) = row.0.value();
        have.buffer.insert((n.into(), k.into(), s));
    }
    for row in r.open_table(EXPIRY)?.iter()? {
        have.expiry.insert(row?.0.value());
    }
    for row in r.open_table(BUFFER_AGE)?.iter()? {
        have.buffer_age.insert(row?.0.value());
    }
    for row in r.open_table(META)?.iter()? {
        let (k, v) = row?;
        let key = k.value();
        let gauge = [
            PARKED_GAUGE,
            PARKED_BY_NAME,
            BUFFERED_BY_NAME,
            "stat:",
            OPEN_TASKS,
        ]
        .iter()
        .any(|p| key.starts_with(p))
            || key == INCIDENTS_GAUGE;
        if gauge && v.value() > 0 {
            have.gauges.insert(key.to_string(), v.value());
        }
    }
    for row in r.open_table(PARKED)?.iter()? {
        have.parked.insert(row?.0.value());
    }
    for row in r.open_table(INCIDENT_JOBS)?.iter()? {
        have.incident_jobs.insert(row?.0.value());
    }
    for row in r.open_table(INSTANCE_MESSAGES)?.iter()? {
        have.instance_messages.insert(row?.0.value());
    }
    for row in r.open_table(CONT_DUE)?.iter()? {
        have.cont_due.insert(row?.0.value());
    }
    for row in r.open_table(TOPIC_DUE)?.iter()? {
        let row = row?;
        let (t, d, j) = row.0.value();
        have.topic_due.insert((t.into(), d, j));
    }
    for row in r.open_table(LEASES)?.iter()? {
        have.leases.insert(row?.0.value());
    }
    for row in r.open_table(TASKS)?.iter()? {
        let t: TaskRecord = codec::decode(row?.1.value())?;
        have.tasks.insert((t.id, t.instance, t.token));
        want.tasks_at
            .insert((t.element.clone(), t.created_at, t.id));
        *want
            .gauges
            .entry(format!("{OPEN_TASKS}{}", t.element))
            .or_default() += 1;
    }
    for row in r.open_table(TASKS_AT)?.iter()? {
        let row = row?;
        let (e, at, id) = row.0.value();
        have.tasks_at.insert((e.into(), at, id));
    }
    for row in r.open_table(START_TIMERS)?.iter()? {
        let row = row?;
        let (p, j) = row.0.value();
        have.start_timers.insert((p.into(), j));
    }
    for row in r.open_table(TOKENS_AT)?.iter()? {
        let row = row?;
        let (e, s, i, t) = row.0.value();
        have.tokens_at.insert((e.into(), s, i, t));
    }
    Ok(have)
}

/// Token, variable, scope and item rows belong to instances that exist and
/// hold what their keys say; the registration indexes as stored.
fn check_instance_rows(
    r: &ReadTransaction,
    want: &Rows,
    have: &mut Rows,
    problems: &mut Vec<String>,
) -> Result<(), StoreError> {
    // token rows of instances that do not exist, rows keyed by another id
    let instances = r.open_table(INSTANCES)?;
    for row in r.open_table(TOKENS)?.iter()? {
        let (k, v) = row?;
        let (i, t) = k.value();
        if instances.get(i)?.is_none() {
            problems.push(format!(
                "tokens: token {t} of instance {i}, which does not exist"
            ));
        }
        let tok = super::decode_token(v.value())?;
        if tok.id != t {
            problems.push(format!(
                "tokens: the row of token {t} of instance {i} holds token {}",
                tok.id
            ));
        }
        if let Wait::Body { items, outputs, .. } = &tok.wait
            && (!items.is_empty() || !outputs.is_empty())
        {
            problems.push(format!(
                "tokens: body {t} of instance {i} holds its items inside, not in body_items"
            ));
        }
    }
    for row in r.open_table(VARIABLES)?.iter()? {
        let (k, v) = row?;
        let (i, name) = k.value();
        if instances.get(i)?.is_none() {
            problems.push(format!(
                "variables: variable '{name}' of instance {i}, which does not exist"
            ));
        }
        if serde_json::from_slice::<serde_json::Value>(v.value()).is_err() {
            problems.push(format!(
                "variables: variable '{name}' of instance {i} is not JSON"
            ));
        }
    }
    for row in r.open_table(TOKEN_SCOPES)?.iter()? {
        have.token_scopes.insert(row?.0.value());
    }
    let mut sizes = std::collections::BTreeMap::new();
    for row in r.open_table(SCOPE_SIZES)?.iter()? {
        let (k, v) = row?;
        sizes.insert(k.value(), v.value());
    }
    if sizes != want.scope_sizes {
        problems.push(format!(
            "scope_sizes: {} rows where the tokens make {}: {:?}",
            sizes.len(),
            want.scope_sizes.len(),
            sizes
                .iter()
                .filter(|(k, v)| want.scope_sizes.get(k) != Some(v))
                .take(5)
                .collect::<Vec<_>>()
        ));
    }
    for row in r.open_table(BODY_ITEMS)?.iter()? {
        let (i, b, index) = row?.0.value();
        if !want.bodies.contains(&(i, b)) {
            problems.push(format!(
                "body_items: item {index} of token {b} of instance {i}, which holds no multi-instance body"
            ));
            break;
        }
    }
    for row in r.open_table(VERSION_TOKENS)?.iter()? {
        let row = row?;
        let (p, v, e, s, i, t) = row.0.value();
        have.version_tokens.insert((p.into(), v, e.into(), s, i, t));
    }
    for row in r.open_multimap_table(EXPECT)?.iter()? {
        let (k, vals) = row?;
        let (m, key) = k.value();
        for v in vals {
            have.expect.insert((m.into(), key.into(), v?.value()));
        }
    }

    for row in r.open_multimap_table(SUBSCRIPTIONS)?.iter()? {
        let (k, vals) = row?;
        let (m, key) = k.value();
        for v in vals {
            let (i, t) = v?.value();
            have.subscriptions.insert((m.into(), key.into(), i, t));
        }
    }
    for row in r.open_multimap_table(SIGNAL_SUBS)?.iter()? {
        let (k, vals) = row?;
        let name = k.value();
        for v in vals {
            let (i, t) = v?.value();
            have.signal_subs.insert((name.into(), String::new(), i, t));
        }
    }

    Ok(())
}

/// Every index: the rows the records imply against the rows stored; and per
/// (message, key) an open subscription xor a buffered message.
/// [`compare`] for each named field of [`Rows`], the field's name naming
/// the index.
macro_rules! compare_fields {
    ($want:expr, $have:expr, $problems:expr; $($field:ident),+ $(,)?) => {
        $(compare(stringify!($field), &$want.$field, &$have.$field, $problems);)+
    };
}

fn compare_all(want: &Rows, have: &Rows, problems: &mut Vec<String>) {
    compare_fields!(want, have, problems;
        dedup, buffer, expiry, buffer_age, parked, incident_jobs, instance_messages, cont_due,
        topic_due, leases, tokens_at, token_scopes, version_tokens, expect, tasks, tasks_at,
        start_timers, subscriptions, signal_subs,
    );
    let gauges = |m: &std::collections::BTreeMap<String, u64>| -> BTreeSet<(String, u64)> {
        m.iter().map(|(k, v)| (k.clone(), *v)).collect()
    };
    let (want_gauges, have_gauges) = (gauges(&want.gauges), gauges(&have.gauges));
    compare("gauges", &want_gauges, &have_gauges, problems);

    // per (message, key): an open subscription xor a buffered message
    for (name, key, _, _) in &have.subscriptions {
        if want.buffer.iter().any(|(n, k, _)| n == name && k == key) {
            problems.push(format!(
                "({name}, {key}) has a subscription and a buffered message"
            ));
        }
    }
}

#[derive(Default)]
struct Rows {
    dedup: BTreeSet<(String, String, u64, Millis)>,
    buffer: BTreeSet<(String, String, u64)>,
    expiry: BTreeSet<(Millis, u64)>,
    buffer_age: BTreeSet<(Millis, u64)>,
    /// the gauges the store keeps, as `meta` holds them (zero left out)
    gauges: std::collections::BTreeMap<String, u64>,
    parked: BTreeSet<u64>,
    instance_messages: BTreeSet<(u64, u64)>,
    incident_jobs: BTreeSet<u64>,
    tasks_at: BTreeSet<(String, Millis, u64)>,
    cont_due: BTreeSet<(Millis, u64)>,
    topic_due: BTreeSet<(String, Millis, u64)>,
    leases: BTreeSet<(Millis, u64)>,
    tokens_at: BTreeSet<(String, Millis, u64, u64)>,
    /// (instance, scope, token)
    token_scopes: BTreeSet<(u64, u64, u64)>,
    /// (instance, scope) → tokens in it
    scope_sizes: std::collections::BTreeMap<(u64, u64), u64>,
    /// (instance, token) of the tokens holding a multi-instance body
    bodies: BTreeSet<(u64, u64)>,
    version_tokens: BTreeSet<(String, u32, String, Millis, u64, u64)>,
    expect: BTreeSet<(String, String, u64)>,
    start_timers: BTreeSet<(String, u64)>,
    /// (task, instance, token): open user tasks and the tokens waiting for them
    tasks: BTreeSet<(u64, u64, u64)>,
    /// (message or signal, key or "", instance, token)
    subscriptions: BTreeSet<(String, String, u64, u64)>,
    signal_subs: BTreeSet<(String, String, u64, u64)>,
}

fn compare<T: Ord + std::fmt::Debug>(
    table: &str,
    want: &BTreeSet<T>,
    have: &BTreeSet<T>,
    problems: &mut Vec<String>,
) {
    for missing in want.difference(have) {
        problems.push(format!("{table}: row {missing:?} is missing"));
    }
    for extra in have.difference(want) {
        problems.push(format!("{table}: row {extra:?} belongs to no record"));
    }
}

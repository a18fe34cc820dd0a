//! The part of the consistency check that reads instances against their
//! models: the scope tree, boundary registrations, compensable completions
//! of live instances, and call activities and their children naming each
//! other.
//!
//! Invariant: like the index check, it only reads; on a database the engine
//! wrote it finds nothing.

use crate::store::*;
use redb::{ReadTransaction, ReadableTable};
use std::collections::BTreeSet;

/// Each instance against its model (scopes, boundary registrations);
/// returns (job, instance, token) of every job a live token holds.
pub(super) fn check_against_models(
    r: &ReadTransaction,
    task_jobs: &BTreeSet<u64>,
    problems: &mut Vec<String>,
) -> Result<BTreeSet<(u64, u64, u64)>, StoreError> {
    let mut models: std::collections::HashMap<(String, u32), Option<crate::model::Process>> =
        Default::default();
    let heads = r.open_table(DEFINITION_HEADS)?;
    let sources = r.open_table(DEFINITION_SOURCES)?;
    let pinned = r.open_table(DEFINITIONS)?;
    let pinned_extras = r.open_table(DEFINITION_EXTRAS)?;
    // (job, instance, token) of every job a live token holds
    let mut owned_jobs: BTreeSet<(u64, u64, u64)> = BTreeSet::new();
    for row in r.open_table(INSTANCES)?.iter()? {
        let i: InstanceRecord = crate::store::read_instance(
            row?.1.value(),
            &r.open_table(TOKENS)?,
            &r.open_table(VARIABLES)?,
        )?;
        let key = (i.process.clone(), i.version);
        if !models.contains_key(&key) {
            let stored = crate::store::tables::read_definition(
                Some(&heads),
                Some(&sources),
                Some(&pinned),
                Some(&pinned_extras),
                &i.process,
                i.version,
            )?;
            let process = match stored {
                Some(stored) => Some(stored.load(&i.process, i.version)?.process),
                None => None,
            };
            models.insert(key.clone(), process);
        }
        let Some(Some(p)) = models.get(&key) else {
            continue;
        };
        scope_problems(&i, p, problems);
        for t in &i.tokens {
            let mut jobs: Vec<u64> = t.timers.clone();
            jobs.extend(t.wait.jobs());
            owned_jobs.extend(jobs.into_iter().map(|j| (j, i.id, t.id)));
        }
        boundary_problems(&i, p, task_jobs, problems);
    }

    Ok(owned_jobs)
}

/// A compensable completion belongs to an instance that has not ended (an
/// ended instance compensates nothing any more).
pub(super) fn check_compensations(
    r: &ReadTransaction,
    problems: &mut Vec<String>,
) -> Result<(), StoreError> {
    let Some(rows) = present(r.open_table(COMPENSATIONS))? else {
        return Ok(());
    };
    let instances = r.open_table(INSTANCES)?;
    for row in rows.iter()? {
        let (k, v) = row?;
        let (inst, seq) = k.value();
        let c: crate::store::compensations::Compensable = codec::decode(v.value())?;
        let live = match instances.get(inst)? {
            Some(g) => crate::store::decode_instance(g.value())?.ended_at.is_none(),
            None => false,
        };
        if !live {
            problems.push(format!(
                "compensations: row {seq} ('{}') belongs to instance {inst}, which has ended or does not exist",
                c.element
            ));
        }
    }
    Ok(())
}

/// A waiting call activity and its active child name each other.
pub(super) fn check_calls(
    r: &ReadTransaction,
    problems: &mut Vec<String>,
) -> Result<(), StoreError> {
    let mut links: std::collections::HashMap<u64, InstanceRecord> = Default::default();
    for row in r.open_table(INSTANCES)?.iter()? {
        let i = crate::store::read_instance(
            row?.1.value(),
            &r.open_table(TOKENS)?,
            &r.open_table(VARIABLES)?,
        )?;
        links.insert(i.id, i);
    }
    for i in links.values() {
        if i.ended_at.is_none()
            && let Some((pi, pt)) = i.called_by
        {
            let waits = links.get(&pi).is_some_and(|p| {
                p.tokens
                    .iter()
                    .any(|t| t.id == pt && t.wait == (Wait::Child { instance: i.id }))
            });
            if !waits {
                problems.push(format!(
                    "calls: active instance {} was called by instance {pi} token {pt}, which does not wait for it",
                    i.id
                ));
            }
        }
        for t in &i.tokens {
            if let Wait::Child { instance } = t.wait {
                let ok = links
                    .get(&instance)
                    .is_some_and(|c| c.ended_at.is_none() && c.called_by == Some((i.id, t.id)));
                if !ok {
                    problems.push(format!(
                        "calls: instance {} token {} waits for instance {instance}, which is not its active child",
                        i.id, t.id
                    ));
                }
            }
        }
    }

    Ok(())
}

/// The scope tree of one instance: every token runs in the process, in an
/// active scope (a token of the same instance holding [`Wait::Scope`] at the
/// subprocess the token's element is directly inside), or is an inner
/// instance of a multi-instance body (a token holding [`Wait::Body`] at the
/// same element), or is a compensation handler started by a throw (a token
/// holding [`Wait::Compensating`]); every scope, body and throw holds at
/// least one token (an empty one has completed or been cancelled).
fn scope_problems(i: &InstanceRecord, p: &crate::model::Process, problems: &mut Vec<String>) {
    for t in &i.tokens {
        let parent = p.index_of(&t.element).and_then(|e| p.parent_of(e));
        let holder = (t.scope != 0)
            .then(|| i.tokens.iter().find(|h| h.id == t.scope))
            .flatten();
        match (parent, t.scope, holder) {
            (None, 0, _) => {}
            (Some(sp), s, Some(h))
                if s != 0 && h.wait == Wait::Scope && h.element == p.at(sp).id => {}
            (_, s, Some(h))
                if s != 0 && matches!(h.wait, Wait::Body { .. }) && h.element == t.element => {}
            // a compensation handler runs in the scope of the throw that started it
            (_, s, Some(h)) if s != 0 && h.wait == Wait::Compensating => {}
            (Some(sp), s, Some(h))
                if s != 0
                    && matches!(h.wait, Wait::AdHoc { .. })
                    && h.element == p.at(sp).id => {}
            _ => problems.push(format!(
                "scopes: instance {} token {} at '{}' runs in scope {} (element inside {:?}), which is not an active scope of its subprocess",
                i.id,
                t.id,
                t.element,
                t.scope,
                parent.map(|sp| p.at(sp).id.clone())
            )),
        }
        let holds = matches!(t.wait, Wait::Scope | Wait::Body { .. } | Wait::Compensating);
        if holds && !i.tokens.iter().any(|c| c.scope == t.id) {
            problems.push(format!(
                "scopes: instance {} token {} holds the scope of '{}' with no token inside",
                i.id, t.id, t.element
            ));
        }
    }
}

/// The registrations a token keeps for its activity's boundary events are
/// the ones the model implies: each names a message or signal boundary event
/// of the element it rests at, and a token that rests inside its activity
/// (a user task, a subprocess's scope, a call activity, a multi-instance
/// body, a receive task, a task whose worker's job is open) holds one for
/// every such boundary event. (A token waiting for an asynchronous
/// continuation has not entered yet or has left: only the first rule
/// applies to it.)
fn boundary_problems(
    i: &InstanceRecord,
    p: &crate::model::Process,
    task_jobs: &BTreeSet<u64>,
    problems: &mut Vec<String>,
) {
    use crate::model::{ElementKind, Trigger};
    for t in &i.tokens {
        let Some(host) = p.index_of(&t.element) else {
            continue;
        };
        let mut messages: Vec<&str> = Vec::new();
        let mut signals: Vec<&str> = Vec::new();
        for &b in &p.at(host).boundaries {
            match &p.at(b).kind {
                ElementKind::Boundary {
                    trigger: Trigger::Message { message },
                    ..
                } => messages.push(message),
                ElementKind::Boundary {
                    trigger: Trigger::Signal { signal },
                    ..
                } => signals.push(signal),
                _ => {}
            }
        }
        let mut kept_messages: Vec<&str> = t
            .boundary_messages
            .iter()
            .map(|(m, _)| m.as_str())
            .collect();
        let mut kept_signals: Vec<&str> = t.boundary_signals.iter().map(String::as_str).collect();
        for m in &kept_messages {
            if !messages.contains(m) {
                problems.push(format!(
                    "registrations: instance {} token {} at '{}' keeps a subscription to message '{m}', which no boundary event of it catches",
                    i.id, t.id, t.element
                ));
            }
        }
        for s in &kept_signals {
            if !signals.contains(s) {
                problems.push(format!(
                    "registrations: instance {} token {} at '{}' keeps a subscription to signal '{s}', which no boundary event of it catches",
                    i.id, t.id, t.element
                ));
            }
        }
        let inner = i.body_of(t.id).is_some();
        let inside = !inner
            && match &t.wait {
                Wait::Task { .. } | Wait::Scope | Wait::Child { .. } | Wait::Body { .. } => true,
                Wait::Message { .. } => matches!(
                    p.at(host).kind,
                    ElementKind::Activity(crate::model::ActivityKind::ReceiveTask { .. })
                ),
                // a wait state holds its activity's boundary events
                Wait::Trigger => true,
                Wait::Job { job } => task_jobs.contains(job),
                // a catch event, a gateway, a join or a throw: no activity
                Wait::Signal { .. } | Wait::Timer { .. } | Wait::Events { .. } => false,
                Wait::Join { .. } | Wait::Condition | Wait::Compensating => false,
                // stopped: its boundary events are closed
                Wait::Incident { .. } => false,
                // an ad-hoc subprocess holds its boundary events
                Wait::AdHoc { .. } => true,
            };
        if inside {
            messages.sort_unstable();
            signals.sort_unstable();
            kept_messages.sort_unstable();
            kept_signals.sort_unstable();
            if kept_messages != messages || kept_signals != signals {
                problems.push(format!(
                    "registrations: instance {} token {} inside '{}' keeps messages {kept_messages:?} and signals {kept_signals:?}, its boundary events catch {messages:?} and {signals:?}",
                    i.id, t.id, t.element
                ));
            }
        }
    }
}

//! The check of one instance's migration: what happens to each token, or
//! why the instance cannot move.
//!
//! Invariant: pure over the two versions, the plan's map and the instance's
//! tokens and jobs — it reads and writes nothing, so a refusal changes
//! nothing and a dry run says exactly what the migration would do.

use super::super::flow::is_listener;
use super::{Carry, listens, mapped};
use crate::model::{ActivityKind, Element, ElementKind, Process, ScopeKind};
use crate::store::compensations::Compensable;
use crate::store::{JobKind, JobRecord, Token, Tokens, Wait};
use std::collections::BTreeMap;

/// One token's step.
#[derive(Debug, Clone)]
pub(super) struct Step {
    pub token: u64,
    /// The target element (none: a listener that stops).
    pub target: Option<usize>,
    pub carry: Carry,
    pub boundaries_reopened: bool,
    /// A waiting join's flow in the target.
    pub join_flow: Option<usize>,
}

type Checked<T> = Result<T, String>;

/// Every token's step from `from` to `to`, or the first reason the instance
/// cannot move.
pub(super) fn plan_instance(
    from: &Process,
    to: &Process,
    map: &BTreeMap<String, String>,
    tokens: &Tokens,
    jobs: &[JobRecord],
) -> Checked<Vec<Step>> {
    let mut steps = Vec::new();
    for t in tokens.iter() {
        if is_listener(from, t) {
            steps.push(listener_step(from, to, map, t));
            continue;
        }
        steps.push(token_step(from, to, map, tokens, jobs, t)?);
    }
    Ok(steps)
}

/// A listener is kept where the target listens the same way, else it stops
/// (and the target's own listener, if any, opens).
fn listener_step(from: &Process, to: &Process, map: &BTreeMap<String, String>, t: &Token) -> Step {
    let esp = |p: &Process, id: &str| {
        p.index_of(id).and_then(|i| match &p.at(i).kind {
            ElementKind::Scope(ScopeKind::EventSubProcess {
                trigger,
                interrupting,
                ..
            }) => Some((i, trigger.clone(), *interrupting)),
            _ => None,
        })
    };
    let old = esp(from, &t.element);
    let new = esp(to, mapped(map, &t.element));
    let same = match (&old, &new) {
        (Some((fi, ft, fint)), Some((ti, tt, tint))) => {
            ft == tt
                && fint == tint
                && listens(tt)
                && parent_id(from, *fi).map(|p| mapped(map, p).to_string())
                    == parent_id(to, *ti).map(str::to_string)
        }
        _ => false,
    };
    match (same, new) {
        (true, Some((ti, ..))) => Step {
            token: t.id,
            target: Some(ti),
            carry: Carry::Kept,
            boundaries_reopened: false,
            join_flow: None,
        },
        _ => Step {
            token: t.id,
            target: None,
            carry: Carry::Closed,
            boundaries_reopened: false,
            join_flow: None,
        },
    }
}

fn parent_id(p: &Process, idx: usize) -> Option<&str> {
    p.parent_of(idx).map(|i| p.at(i).id.as_str())
}

/// A token's step: its target, whether its scope and loop agree, and what
/// its wait does there.
fn token_step(
    from: &Process,
    to: &Process,
    map: &BTreeMap<String, String>,
    tokens: &Tokens,
    jobs: &[JobRecord],
    t: &Token,
) -> Checked<Step> {
    let (id, el) = (t.id, t.element.as_str());
    let fi = from.index_of(el).ok_or_else(|| {
        format!("token {id} rests at '{el}', which its own version does not have")
    })?;
    let target = mapped(map, el);
    let ti = to
        .index_of(target)
        .ok_or_else(|| format!("token {id} at '{el}' has no counterpart in the new version"))?;
    let holder = (t.scope != 0).then(|| tokens.get(t.scope)).flatten();
    let inner =
        holder.is_some_and(|h| matches!(h.wait, Wait::Body { .. }) && h.element == t.element);
    if !inner {
        check_scope(to, map, t, ti, holder)?;
    }
    let body = matches!(t.wait, Wait::Body { .. });
    let (fm, tm) = (
        from.at(fi).extras.multi.is_some(),
        to.at(ti).extras.multi.is_some(),
    );
    if (body || inner) && !tm {
        return Err(format!(
            "token {id} at '{el}' runs a multi-instance activity; '{target}' in the new version is not multi-instance"
        ));
    }
    if !(body || inner) && tm && !fm {
        return Err(format!(
            "token {id} at '{el}' runs a plain activity; '{target}' in the new version is multi-instance"
        ));
    }
    let (fe, te) = (from.at(fi), to.at(ti));
    let mut join_flow = None;
    let carry = match &t.wait {
        Wait::Join { flow } => {
            join_flow = Some(join_counterpart(from, to, *flow, ti).ok_or_else(|| {
                let f = from.flows.get(*flow).map_or("?", |f| f.id.as_str());
                format!("token {id} waits at join '{el}' on flow '{f}', which does not lead to '{target}' in the new version")
            })?);
            Carry::Kept
        }
        Wait::Scope | Wait::AdHoc { .. } => {
            if !same_scope(&fe.kind, &te.kind) {
                return Err(format!(
                    "token {id} holds the running subprocess '{el}'; '{target}' in the new version is no subprocess of that kind"
                ));
            }
            Carry::Kept
        }
        Wait::Body { .. } | Wait::Incident { .. } => Carry::Kept,
        Wait::Child { .. } => {
            if !matches!(
                te.kind,
                ElementKind::Activity(ActivityKind::CallActivity { .. })
            ) {
                return Err(format!(
                    "token {id} at '{el}' waits for the instance it called; '{target}' in the new version is no call activity"
                ));
            }
            Carry::Kept
        }
        Wait::Compensating => {
            return Err(format!(
                "token {id} at '{el}' waits for compensation handlers: migrate it once they have ended"
            ));
        }
        Wait::Job { job } if continues_after(jobs, *job) => Carry::Kept,
        Wait::Events { .. } if !same_event_targets(from, fi, to, ti, map) => Carry::Reopened,
        Wait::Job { .. }
        | Wait::Timer { .. }
        | Wait::Message { .. }
        | Wait::Signal { .. }
        | Wait::Events { .. }
        | Wait::Task { .. }
        | Wait::Condition
        | Wait::Trigger => {
            if same_shape(from, fe, to, te) {
                Carry::Kept
            } else {
                Carry::Reopened
            }
        }
    };
    check_boundary_keys(from, to, t, el)?;
    let has_boundaries = !fe.boundaries.is_empty() || !te.boundaries.is_empty();
    let changed = carry == Carry::Reopened || !same_boundaries(from, to, map, fi, ti);
    let boundaries_reopened = !inner && has_boundaries && changed;
    Ok(Step {
        token: id,
        target: Some(ti),
        carry,
        boundaries_reopened,
        join_flow,
    })
}

/// The target lies in the scope the token runs in: at the process level
/// for a token there, inside the holder's counterpart for one inside.
fn check_scope(
    to: &Process,
    map: &BTreeMap<String, String>,
    t: &Token,
    ti: usize,
    holder: Option<&Token>,
) -> Checked<()> {
    let target = &to.at(ti).id;
    let parent = parent_id(to, ti);
    match holder {
        None if t.scope == 0 => match parent {
            None => Ok(()),
            Some(p) => Err(format!(
                "token {} at '{}' runs at the process level; '{target}' in the new version lies inside '{p}'",
                t.id, t.element
            )),
        },
        None => Err(format!(
            "token {} at '{}' runs in scope {}, which the instance does not hold",
            t.id, t.element, t.scope
        )),
        Some(h) => {
            let want = mapped(map, &h.element);
            if parent == Some(want) {
                Ok(())
            } else {
                Err(format!(
                    "token {} at '{}' runs inside '{}'; '{target}' in the new version is not inside '{want}'",
                    t.id, t.element, h.element
                ))
            }
        }
    }
}

/// A message boundary event's subscription stays under the key it was
/// opened with; a version that correlates that message by another
/// variable cannot take it over.
fn check_boundary_keys(from: &Process, to: &Process, t: &Token, el: &str) -> Checked<()> {
    for (message, _) in &t.boundary_messages {
        let (a, b) = (
            from.correlation_keys.get(message),
            to.correlation_keys.get(message),
        );
        if a != b {
            return Err(format!(
                "a boundary event of '{el}' (token {}) waits for message '{message}' by variable '{}'; the new version correlates it by '{}'",
                t.id,
                a.map_or("-", String::as_str),
                b.map_or("-", String::as_str)
            ));
        }
    }
    Ok(())
}

/// Whether job `job` runs after its element completed (asyncAfter): the
/// token goes on from the target as it would have from the old element.
fn continues_after(jobs: &[JobRecord], job: u64) -> bool {
    jobs.iter()
        .any(|j| j.id == job && matches!(j.kind, JobKind::ContinueAfter))
}

/// The target join's incoming flow of the same id as the old one.
fn join_counterpart(from: &Process, to: &Process, flow: usize, ti: usize) -> Option<usize> {
    let id = &from.flows.get(flow)?.id;
    to.flows.iter().position(|f| &f.id == id && f.target == ti)
}

/// Whether two elements make a token wait the same way: the same kind with
/// the same settings (what the kinds hold as indices compared by what they
/// are), the same async flag and loop, and a message caught by the same key
/// variable.
fn same_shape(from: &Process, a: &Element, to: &Process, b: &Element) -> bool {
    let kinds = match (&a.kind, &b.kind) {
        (ElementKind::Gateway(x), ElementKind::Gateway(y)) => {
            std::mem::discriminant(x) == std::mem::discriminant(y)
        }
        (ElementKind::Scope(x), ElementKind::Scope(y)) => same_scope_kind(x, y),
        (x, y) => x == y,
    };
    let caught = match &a.kind {
        ElementKind::Catch(crate::model::CatchKind::Message { message, .. })
        | ElementKind::Activity(ActivityKind::ReceiveTask { message }) => Some(message),
        _ => None,
    };
    let same_key =
        caught.is_none_or(|m| from.correlation_keys.get(m) == to.correlation_keys.get(m));
    kinds
        && same_key
        && a.async_before == b.async_before
        && a.extras.multi.is_some() == b.extras.multi.is_some()
}

/// Whether an event-based gateway's events are the same in both versions:
/// each old target maps to a target of the new gateway that waits alike.
fn same_event_targets(
    from: &Process,
    fi: usize,
    to: &Process,
    ti: usize,
    map: &BTreeMap<String, String>,
) -> bool {
    let targets = |p: &Process, i: usize| -> Vec<usize> {
        p.at(i)
            .outgoing
            .iter()
            .map(|&f| p.flows[f].target)
            .collect()
    };
    let (old, new) = (targets(from, fi), targets(to, ti));
    old.len() == new.len()
        && old.iter().all(|&o| {
            let want = mapped(map, &from.at(o).id);
            new.iter()
                .any(|&n| to.at(n).id == want && same_shape(from, from.at(o), to, to.at(n)))
        })
}

fn same_scope(a: &ElementKind, b: &ElementKind) -> bool {
    matches!((a, b), (ElementKind::Scope(x), ElementKind::Scope(y)) if same_scope_kind(x, y))
}

fn same_scope_kind(x: &ScopeKind, y: &ScopeKind) -> bool {
    std::mem::discriminant(x) == std::mem::discriminant(y)
}

/// The boundary event of target `host` that boundary `b` of the old
/// version becomes: the one of the mapped id (or same id) attached to the
/// target, interrupting or not alike, with the same trigger.
pub(super) fn boundary_counterpart(
    from: &Process,
    to: &Process,
    map: &BTreeMap<String, String>,
    b: usize,
    host: usize,
) -> Option<usize> {
    let old = from.at(b);
    let ElementKind::Boundary {
        cancel, trigger, ..
    } = &old.kind
    else {
        return None;
    };
    to.at(host).boundaries.iter().copied().find(|&tb| {
        matches!(&to.at(tb).kind, ElementKind::Boundary { cancel: c, trigger: t, .. } if c == cancel && t == trigger)
            && to.at(tb).id == mapped(map, &old.id)
    })
}

/// Whether the target has the old element's boundary events, each the same.
fn same_boundaries(
    from: &Process,
    to: &Process,
    map: &BTreeMap<String, String>,
    fi: usize,
    ti: usize,
) -> bool {
    let (a, b) = (&from.at(fi).boundaries, &to.at(ti).boundaries);
    a.len() == b.len()
        && a.iter()
            .all(|&x| boundary_counterpart(from, to, map, x, ti).is_some())
}

/// Every compensable completion's activity has a counterpart.
pub(super) fn check_compensables(
    to: &Process,
    map: &BTreeMap<String, String>,
    rows: &[(u64, Compensable)],
) -> Checked<()> {
    for (_, c) in rows {
        let target = mapped(map, &c.element);
        if to.index_of(target).is_none() {
            return Err(format!(
                "the completed activity '{}' may still be compensated and has no counterpart in the new version",
                c.element
            ));
        }
    }
    Ok(())
}

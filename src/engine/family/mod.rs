//! Element kinds by family, grouped the way Zeebe groups its element
//! processors: activities, start, catch and throw events, boundary events,
//! gateways and scopes (a multi-instance body wraps any activity or scope:
//! `multi_instance`). The flow core (`flow`) calls the phases here and knows
//! no kind by name: each phase is one match over the seven families, and each
//! family's file matches its own kinds — activation, the flows a leaving
//! token takes, the boundary events it holds, a timer that fires at it, and
//! what it subscribes behind an event-based gateway.
//!
//! Invariant: no wildcard arm over the families or over a family's kinds, so
//! a new kind compiles only once its family's file says what it does in each
//! phase; the mechanisms the kinds share (jobs, waits, timers, scopes,
//! throws) stay in their own files and know no family.

use super::*;

mod activity;
mod boundary;
mod catch_event;
mod gateway;
mod scope;
mod start;
mod throw_event;

/// Where a token is activated: its instance, the token, the element's index.
#[derive(Clone, Copy)]
struct At {
    inst: u64,
    token: u64,
    idx: usize,
}

impl Engine<'_, '_> {
    /// What the element does when a token reaches it (after its boundary
    /// events were opened): rest, run, or pass on.
    pub(super) fn activate(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let at = At { inst, token, idx };
        match &p.at(idx).kind {
            ElementKind::Activity(kind) => self.activate_activity(at, kind),
            ElementKind::Start(kind) => self.activate_start(at, kind),
            ElementKind::Catch(kind) => self.activate_catch(at, kind),
            ElementKind::Throw(kind) => self.activate_throw(at, kind),
            ElementKind::Gateway(kind) => self.activate_gateway(at, kind),
            ElementKind::Scope(kind) => self.activate_scope(at, kind),
            ElementKind::Boundary { .. } => {
                self.activate_boundary(inst, token, idx);
                Ok(())
            }
        }
    }

    /// A token arrives along `via`: a joining gateway may hold it. `false`:
    /// it was held (or merged); `true`: it goes on to be activated.
    pub(super) fn join(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        via: Option<usize>,
    ) -> R<bool> {
        let p = self.proc_of(inst);
        match &p.at(idx).kind {
            ElementKind::Gateway(kind) => self.join_gateway(inst, token, idx, via, kind),
            ElementKind::Activity(_)
            | ElementKind::Start(_)
            | ElementKind::Catch(_)
            | ElementKind::Throw(_)
            | ElementKind::Scope(_)
            | ElementKind::Boundary { .. } => Ok(true),
        }
    }

    /// The element has completed: `true` when its family took the token on
    /// another way than by the element's flows.
    pub(super) fn completed_elsewhere(&mut self, inst: u64, token: u64, idx: usize) -> R<bool> {
        let p = self.proc_of(inst);
        match &p.at(idx).kind {
            ElementKind::Throw(kind) => self.throw_completed(inst, token, kind),
            ElementKind::Activity(_)
            | ElementKind::Start(_)
            | ElementKind::Catch(_)
            | ElementKind::Gateway(_)
            | ElementKind::Scope(_)
            | ElementKind::Boundary { .. } => Ok(false),
        }
    }

    /// The outgoing flows a token leaving the element takes (an error names
    /// a condition that cannot be evaluated): a gateway decides; every other
    /// element leaves by all its flows whose condition holds.
    pub(super) fn choose_flows(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
    ) -> R<Result<Vec<usize>, String>> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        // only the variables the outgoing conditions name are read
        let names: Vec<&str> = el
            .outgoing
            .iter()
            .filter_map(|&f| p.flows[f].condition.as_ref())
            .flat_map(crate::store::names_of)
            .collect();
        let vars = self.vars_named(inst, token, names)?;
        let all = || gateway::holding(&p, el.outgoing.iter().copied(), &vars, false, self.now);
        Ok(match &el.kind {
            ElementKind::Gateway(kind) => gateway::choose(&p, el, kind, &vars, self.now),
            ElementKind::Activity(_)
            | ElementKind::Start(_)
            | ElementKind::Catch(_)
            | ElementKind::Throw(_)
            | ElementKind::Scope(_)
            | ElementKind::Boundary { .. } => all(),
        })
    }

    /// A due timer job at element `at` of a token that still exists: its
    /// family decides whether the timer is still awaited and what it does.
    pub(super) fn timer_due(&mut self, job: &JobRecord, tok: &Token, at: usize) -> R<()> {
        let p = self.proc_of(job.instance);
        match &p.at(at).kind {
            ElementKind::Boundary {
                host,
                cancel,
                trigger,
            } => self.boundary_timer_due(job, tok, at, *host, *cancel, trigger),
            ElementKind::Catch(kind) => self.catch_timer_due(job, tok, at, kind),
            ElementKind::Scope(kind) => self.scope_timer_due(job, tok, at, kind),
            // a timer job belongs to a timer catch, boundary or event
            // subprocess; at anything else (a model changed under a stored
            // job) it is stale
            ElementKind::Activity(_)
            | ElementKind::Start(_)
            | ElementKind::Throw(_)
            | ElementKind::Gateway(_) => Ok(()),
        }
    }
}

/// Whether a token at an element of `kind` holds the element's boundary
/// events while it rests there (activities that wait, and scopes).
pub(super) fn hosts_boundaries(kind: &ElementKind) -> bool {
    match kind {
        ElementKind::Activity(kind) => activity::hosts_boundaries(kind),
        ElementKind::Scope(kind) => scope::hosts_boundaries(kind),
        ElementKind::Start(_)
        | ElementKind::Catch(_)
        | ElementKind::Throw(_)
        | ElementKind::Gateway(_)
        | ElementKind::Boundary { .. } => false,
    }
}

/// What a target of an event-based gateway subscribes while the gateway
/// waits (the parser allows only catching elements there).
pub(super) enum Branch<'p> {
    /// A message, by name (its key is read when the gateway opens).
    Message(&'p str),
    /// A signal, by name.
    Signal(&'p str),
    /// A timer.
    Timer(&'p model::TimerDef),
    /// Nothing the gateway can wait for.
    None,
}

/// What the element at a target of an event-based gateway waits for.
pub(super) fn branch(kind: &ElementKind) -> Branch<'_> {
    match kind {
        ElementKind::Catch(kind) => catch_event::branch(kind),
        ElementKind::Activity(kind) => activity::branch(kind),
        ElementKind::Start(_)
        | ElementKind::Throw(_)
        | ElementKind::Gateway(_)
        | ElementKind::Scope(_)
        | ElementKind::Boundary { .. } => Branch::None,
    }
}

//! Gateways: which outgoing flows a token takes, and, as a join, when it
//! goes on — a parallel join when a token has come along every incoming
//! flow, an inclusive join when no other token can still reach it
//! (`flow::settle_inclusive_joins`); an event-based gateway waits for the
//! first of its target events (`waits::open_event_gateway`).
//!
//! Invariant: a joining gateway merges exactly one token per incoming flow
//! it waited for into one new token.

use super::*;

impl Engine<'_, '_> {
    /// A gateway passes the token on to choose its flows when it leaves; an
    /// event-based gateway waits for the first of its events.
    pub(super) fn activate_gateway(&mut self, at: At, kind: &GatewayKind) -> R<()> {
        let At { inst, token, idx } = at;
        match kind {
            GatewayKind::Event => self.open_event_gateway(inst, token, idx),
            GatewayKind::Exclusive { .. }
            | GatewayKind::Parallel
            | GatewayKind::Inclusive { .. } => self.pass_through(inst, token, idx),
        }
    }

    /// A token arrives along `via`: a parallel or inclusive gateway with
    /// more than one incoming flow holds it as a join.
    pub(super) fn join_gateway(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        via: Option<usize>,
        kind: &GatewayKind,
    ) -> R<bool> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        if el.incoming.len() < 2 {
            return Ok(true);
        }
        let flow = via.unwrap_or(usize::MAX);
        match kind {
            // waits until nothing else can reach it (settle_inclusive_joins)
            GatewayKind::Inclusive { .. } => {
                self.set_token(inst, token, &el.id, Wait::Join { flow });
                Ok(false)
            }
            GatewayKind::Parallel => {
                self.set_token(inst, token, &el.id, Wait::Join { flow });
                self.join_parallel(inst, token, idx)?;
                Ok(false)
            }
            GatewayKind::Exclusive { .. } | GatewayKind::Event => Ok(true),
        }
    }

    /// A parallel join: when a token waits along every incoming flow, they
    /// merge into one that leaves.
    fn join_parallel(&mut self, inst: u64, token: u64, idx: usize) -> R<()> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let scope = self.scope_of(inst, token);
        let members = self.members(inst, scope)?;
        let rec = self.inst(inst);
        let mut take: Vec<u64> = Vec::new();
        for f in &el.incoming {
            if let Some(t) = members.iter().filter_map(|&m| rec.tokens.get(m)).find(|t| {
                t.element == el.id && t.wait == Wait::Join { flow: *f } && !take.contains(&t.id)
            }) {
                take.push(t.id);
            }
        }
        if take.len() == el.incoming.len() {
            for t in &take {
                rec.tokens.remove(*t);
            }
            let merged = self.new_token(inst, &el.id, scope);
            self.history(inst, &el.id, "joined");
            self.queue_leave(inst, merged, idx);
        }
        Ok(())
    }
}

/// The flows a gateway's leaving token takes: the first whose condition
/// holds (exclusive) or all that hold (inclusive), else the default; every
/// flow (parallel, event-based: its targets decided which one happened).
pub(super) fn choose(
    p: &Process,
    el: &model::Element,
    kind: &GatewayKind,
    vars: &Vars,
    now: Millis,
) -> Result<Vec<usize>, String> {
    let not_default = |d: Option<usize>| el.outgoing.iter().copied().filter(move |f| Some(*f) != d);
    match kind {
        GatewayKind::Exclusive { default } => {
            holding(p, not_default(*default), vars, true, now).map(|c| or_default(c, default))
        }
        GatewayKind::Inclusive { default } => {
            holding(p, not_default(*default), vars, false, now).map(|c| or_default(c, default))
        }
        GatewayKind::Parallel => Ok(el.outgoing.clone()),
        GatewayKind::Event => holding(p, el.outgoing.iter().copied(), vars, false, now),
    }
}

/// The flows among `flows` whose condition holds (a flow without one always
/// does), in order; only the first with `first_only` (exclusive gateway). An
/// error names the flow whose condition cannot be evaluated.
pub(super) fn holding(
    p: &Process,
    flows: impl IntoIterator<Item = usize>,
    vars: &Vars,
    first_only: bool,
    now: Millis,
) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for f in flows {
        let holds = match &p.flows[f].condition {
            None => true,
            Some(c) => model::eval_bool(c, vars, now)
                .map_err(|e| format!("condition of flow '{}': {e}", p.flows[f].id))?,
        };
        if holds {
            out.push(f);
            if first_only {
                break;
            }
        }
    }
    Ok(out)
}

/// `chosen`, or the default flow when nothing was chosen.
fn or_default(mut chosen: Vec<usize>, default: &Option<usize>) -> Vec<usize> {
    if chosen.is_empty()
        && let Some(d) = default
    {
        chosen.push(*d);
    }
    chosen
}

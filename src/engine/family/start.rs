//! Start events: what starts an instance (a message, signal, timer or
//! condition) is decided before a token exists (`deploy`, `messages`,
//! `timers`, `conditions`); a token placed at a start event passes on.
//!
//! Invariant: a start event never rests a token.

use super::*;

impl Engine<'_, '_> {
    /// A start event has happened when its token is here: it passes on.
    pub(super) fn activate_start(&mut self, at: At, kind: &StartKind) -> R<()> {
        let At { inst, token, idx } = at;
        match kind {
            StartKind::Plain
            | StartKind::Message { .. }
            | StartKind::Timer { .. }
            | StartKind::Signal { .. }
            | StartKind::Conditional { .. } => self.pass_through(inst, token, idx),
        }
    }
}

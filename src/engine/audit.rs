//! The audit entry of a change a principal made ([`crate::audit`]).
//!
//! Invariant: written by the command that made the change, after it applied
//! and in its transaction; the engine never decides who acted — the
//! command says.

use super::*;

impl Engine<'_, '_> {
    /// Applies what follows as done by `who` (none: by nobody named).
    pub fn acting_as(&mut self, who: Option<&str>) {
        self.actor = who.map(str::to_string);
    }

    /// ` by NAME` when a principal acts, for a history entry; else empty.
    pub(super) fn by_actor(&self) -> String {
        self.actor
            .as_deref()
            .map(|a| format!(" by {a}"))
            .unwrap_or_default()
    }

    /// Records that `who` did `operation` to `target`, now.
    pub fn audit(&mut self, who: &str, operation: &str, target: &str) -> R<()> {
        self.t.put_audit(self.now, who, operation, target)?;
        Ok(())
    }
}

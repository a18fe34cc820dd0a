//! Retention: removes completed instances and settled messages past the
//! retention period, from cursors, a bounded number of records per batch.
//!
//! Invariant: never removes parked messages, incidents, active instances or
//! running batches, and never anything younger than the dedup window.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// Removes, in one small batch, completed instances and settled messages
    /// (correlated or discarded, with their dedup records) older than the
    /// retention. Never touches parked or buffered messages, incidents or active
    /// instances. Each call scans at most `limit` records per table from a cursor
    /// kept in `meta`, so records that stay (old parked messages, long-running
    /// instances) never stall it. Returns (instances, messages) removed and whether
    /// a pass over the tables is still under way.
    pub fn cleanup(&mut self, limit: usize) -> R<(usize, usize, bool)> {
        let keep = self.cfg.retention.max(self.cfg.dedup_window);
        let cutoff = self.now.saturating_sub(keep);
        let limit = limit.max(1);

        let from = self.t.cursor("retention_cursor_messages")?;
        let (scanned, mut next_msg) = self.t.messages_from(from, limit)?;
        let mut old_messages = Vec::new();
        for m in scanned {
            if m.accepted_at >= cutoff {
                next_msg = None; // younger from here on: this pass is done
                break;
            }
            let settled = matches!(m.state, MessageState::Correlated | MessageState::Discarded);
            if settled && m.settled_at.is_some_and(|t| t < cutoff) {
                old_messages.push(m);
            }
        }
        for m in &old_messages {
            self.t.remove_message(m)?;
        }
        let next_msg = next_msg.unwrap_or(0); // 0: this pass is done
        self.t.set_cursor("retention_cursor_messages", next_msg)?;

        let from = self.t.cursor("retention_cursor_instances")?;
        let (scanned, mut next_inst) = self.t.instances_from(from, limit)?;
        let mut old_instances = Vec::new();
        for i in scanned {
            if i.started_at >= cutoff {
                next_inst = None;
                break;
            }
            if i.ended_at.is_some_and(|t| t < cutoff) {
                old_instances.push(i);
            }
        }
        for i in &old_instances {
            let p = self.def(&i.process, i.version)?;
            for (m, k) in p.correlation_pairs(&i.variables) {
                self.t.set_passed(m, &k, i.id, false)?;
            }
            self.t.remove_instance(i)?;
        }
        let next_inst = next_inst.unwrap_or(0);
        self.t.set_cursor("retention_cursor_instances", next_inst)?;
        // the ids of signals applied here, once past the dedup window too
        self.t.forget_signals_before(cutoff, limit)?;
        // and ended batches with their items, as long as completed instances
        self.t
            .forget_batches_before(self.now.saturating_sub(self.cfg.retention), limit)?;
        // the audit trail is kept as long as completed instances
        self.t
            .forget_audit_before(self.now.saturating_sub(self.cfg.retention), limit)?;
        if !old_instances.is_empty() || !old_messages.is_empty() {
            self.t.bump(
                Counter::RetentionInstancesRemoved,
                old_instances.len() as u64,
            )?;
            self.t
                .bump(Counter::RetentionMessagesRemoved, old_messages.len() as u64)?;
        }
        Ok((
            old_instances.len(),
            old_messages.len(),
            next_msg != 0 || next_inst != 0,
        ))
    }
}

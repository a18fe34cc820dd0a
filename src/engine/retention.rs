//! Retention: removes completed instances and settled messages past the
//! retention period, from cursors, a bounded number of records per batch.
//!
//! Invariant: never removes parked messages, incidents or active instances, and
//! never anything younger than the dedup window.

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

        let from = self
            .t
            .meta
            .get("retention_cursor_messages")?
            .map(|g| g.value())
            .unwrap_or(0);
        let mut old_messages = Vec::new();
        let mut next_msg = 0; // 0: this pass is done
        for (n, row) in self.t.messages.range(from..)?.enumerate() {
            let (k, v) = row?;
            if n == limit {
                next_msg = k.value();
                break;
            }
            let m: MessageRecord = codec::decode(v.value())?;
            if m.accepted_at >= cutoff {
                break;
            }
            let settled = matches!(m.state, MessageState::Correlated | MessageState::Discarded);
            if settled && m.settled_at.is_some_and(|t| t < cutoff) {
                old_messages.push(m);
            }
        }
        for m in &old_messages {
            self.t.messages.remove(m.seq)?;
            self.t
                .dedup
                .remove((m.message_id.as_str(), m.name.as_str()))?;
        }
        self.t.meta.insert("retention_cursor_messages", next_msg)?;

        let from = self
            .t
            .meta
            .get("retention_cursor_instances")?
            .map(|g| g.value())
            .unwrap_or(0);
        let mut old_instances = Vec::new();
        let mut next_inst = 0;
        for (n, row) in self.t.instances.range(from..)?.enumerate() {
            let (k, v) = row?;
            if n == limit {
                next_inst = k.value();
                break;
            }
            let i: InstanceRecord = codec::decode(v.value())?;
            if i.started_at >= cutoff {
                break;
            }
            if i.ended_at.is_some_and(|t| t < cutoff) {
                old_instances.push(i);
            }
        }
        for i in &old_instances {
            let p = self.def(&i.process, i.version)?;
            for (m, var) in &p.correlation_keys {
                if let Some(k) = i.variables.get(var).and_then(key_string) {
                    self.t.passed.remove((m.as_str(), k.as_str()), i.id)?;
                }
            }
            self.t.instances.remove(i.id)?;
        }
        self.t
            .meta
            .insert("retention_cursor_instances", next_inst)?;
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

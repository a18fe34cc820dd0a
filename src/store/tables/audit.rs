//! The audit trail (`audit`): one row per audited change, keyed by a
//! sequence that grows with time.
//!
//! Invariant: an entry is written only in the transaction of the change it
//! records, and removed only by retention, oldest first.

use super::*;
use crate::audit::AuditEntry;

impl Tables<'_> {
    /// Appends an entry (its `seq` is handed out here).
    pub fn put_audit(
        &mut self,
        at: crate::clock::Millis,
        who: &str,
        operation: &str,
        target: &str,
    ) -> Result<(), StoreError> {
        let seq = self.next_seq("audit")?;
        let entry = AuditEntry {
            seq,
            at,
            who: who.to_string(),
            operation: operation.to_string(),
            target: target.to_string(),
        };
        self.audit
            .get_mut()?
            .insert(seq, codec::encode(&entry)?.as_slice())?;
        Ok(())
    }

    /// Removes up to `limit` of the oldest entries made before `cutoff`.
    pub fn forget_audit_before(
        &mut self,
        cutoff: crate::clock::Millis,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut old = Vec::new();
        for row in self.audit.get()?.iter()?.take(limit) {
            let (k, v) = row?;
            let entry: AuditEntry = codec::decode(v.value())?;
            if entry.at >= cutoff {
                break;
            }
            old.push(k.value());
        }
        for seq in &old {
            self.audit.get_mut()?.remove(*seq)?;
        }
        Ok(old.len())
    }
}

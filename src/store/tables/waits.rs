//! Registrations of waiting tokens as the engine asks for them: who waits
//! for a message and key (`subscriptions`) or a signal (`signal_subs`), who
//! will still catch one (`expect`), and who caught one already (`passed`).
//!
//! Invariant: `subscriptions` and `signal_subs` are written only by
//! [`Tables::put_instance`] from what tokens hold open; this module reads
//! them and keeps `expect` and `passed`.

use super::*;

impl Tables<'_> {
    /// Pairs (instance, token) subscribed to a (message, key), as written
    /// (rows derived from the tokens' open registrations when an instance is
    /// written: [`Tables::put_instance`]).
    pub fn subscribers(&self, name: &str, key: &str) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut out = Vec::new();
        for v in self.subscriptions.get()?.get((name, key))? {
            out.push(v?.value());
        }
        Ok(out)
    }

    /// Pairs (instance, token) waiting for signal `name`.
    pub fn signal_subscribers(&self, name: &str) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut out = Vec::new();
        for v in self.signal_subs.get()?.get(name)? {
            out.push(v?.value());
        }
        Ok(out)
    }

    /// Active instances that will still catch (message, key).
    pub fn expecting(&self, name: &str, key: &str) -> Result<Vec<u64>, StoreError> {
        multimap_u64(self.expect.get()?, name, key)
    }

    /// Instances that caught (message, key) or ended: a later one is late.
    pub fn passed(&self, name: &str, key: &str) -> Result<Vec<u64>, StoreError> {
        multimap_u64(self.passed.get()?, name, key)
    }

    /// Instance `inst` is past (message, key) (`on`), or forgotten by retention.
    pub fn set_passed(
        &mut self,
        name: &str,
        key: &str,
        inst: u64,
        on: bool,
    ) -> Result<(), StoreError> {
        self.touched.instance_written(inst);
        set_member(self.passed.get_mut()?, (name, key), inst, on)
    }
}

/// Adds instance `inst` to the rows of (message, key) `at` (`on`), or takes
/// it out.
pub(super) fn set_member(
    table: &mut MultimapTable<'_, (&'static str, &'static str), u64>,
    at: (&str, &str),
    inst: u64,
    on: bool,
) -> Result<(), StoreError> {
    if on {
        table.insert(at, inst)?;
    } else {
        table.remove(at, inst)?;
    }
    Ok(())
}

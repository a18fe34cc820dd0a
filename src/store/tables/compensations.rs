//! The `compensations` rows of an instance: written when a compensable
//! activity completes, read and removed by the throw that compensates it.
//!
//! Invariant: rows are keyed (instance, sequence), the sequence taken when
//! the activity completed, so an instance's rows come out in order of
//! completion.

use super::*;
use crate::store::compensations::Compensable;

impl Tables<'_> {
    /// Remembers a completion of a compensable activity of `inst`.
    pub fn put_compensable(&mut self, inst: u64, c: &Compensable) -> Result<u64, StoreError> {
        let seq = self.next_seq("compensation")?;
        self.compensations
            .get_mut()?
            .insert((inst, seq), codec::encode(c)?.as_slice())?;
        Ok(seq)
    }

    /// Every compensable completion of `inst`, in order of completion.
    pub fn compensables(&self, inst: u64) -> Result<Vec<(u64, Compensable)>, StoreError> {
        let mut out = Vec::new();
        for row in self
            .compensations
            .get()?
            .range((inst, 0)..=(inst, u64::MAX))?
        {
            let (k, v) = row?;
            out.push((k.value().1, codec::decode(v.value())?));
        }
        Ok(out)
    }

    /// Rewrites row `seq` of `inst` (its scope moved).
    pub fn update_compensable(
        &mut self,
        inst: u64,
        seq: u64,
        c: &Compensable,
    ) -> Result<(), StoreError> {
        self.compensations
            .get_mut()?
            .insert((inst, seq), codec::encode(c)?.as_slice())?;
        Ok(())
    }

    /// Forgets row `seq` of `inst`.
    pub fn remove_compensable(&mut self, inst: u64, seq: u64) -> Result<(), StoreError> {
        self.compensations.get_mut()?.remove((inst, seq))?;
        Ok(())
    }

    /// Forgets every row of `inst` (it has ended).
    pub fn clear_compensables(&mut self, inst: u64) -> Result<(), StoreError> {
        self.compensations
            .get_mut()?
            .retain_in((inst, 0)..=(inst, u64::MAX), |_, _| false)?;
        Ok(())
    }
}

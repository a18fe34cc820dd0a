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
        self.touched.instance_written(inst);
        let seq = self.next_seq("compensation")?;
        self.compensations
            .get_mut()?
            .insert((inst, seq), codec::encode(c)?.as_slice())?;
        Ok(seq)
    }

    /// Every compensable completion of `inst`, in order of completion.
    pub fn compensables(&self, inst: u64) -> Result<Vec<(u64, Compensable)>, StoreError> {
        read_compensables(self.compensations.get()?, inst)?
            .into_iter()
            .map(|(seq, c)| Ok((seq, c?)))
            .collect()
    }

    /// Rewrites row `seq` of `inst` (its scope moved).
    pub fn update_compensable(
        &mut self,
        inst: u64,
        seq: u64,
        c: &Compensable,
    ) -> Result<(), StoreError> {
        self.touched.instance_written(inst);
        self.compensations
            .get_mut()?
            .insert((inst, seq), codec::encode(c)?.as_slice())?;
        Ok(())
    }

    /// Forgets row `seq` of `inst`.
    pub fn remove_compensable(&mut self, inst: u64, seq: u64) -> Result<(), StoreError> {
        self.touched.instance_written(inst);
        self.compensations.get_mut()?.remove((inst, seq))?;
        Ok(())
    }

    /// Forgets every row of `inst` (it has ended).
    pub fn clear_compensables(&mut self, inst: u64) -> Result<(), StoreError> {
        self.touched.instance_written(inst);
        self.compensations
            .get_mut()?
            .retain_in((inst, 0)..=(inst, u64::MAX), |_, _| false)?;
        Ok(())
    }
}

/// A compensable completion as stored, or why it cannot be read.
pub(crate) type Readable = Result<Compensable, CodecError>;

/// The compensable completions of `inst` in `rows`, in order of completion,
/// each as stored or why it cannot be read: the one read of them, for the
/// write transaction (which refuses an unreadable row) and a read snapshot
/// (whose views show what they can).
pub(crate) fn read_compensables(
    rows: &impl ReadableTable<(u64, u64), &'static [u8]>,
    inst: u64,
) -> Result<Vec<(u64, Readable)>, StoreError> {
    let mut out = Vec::new();
    for row in rows.range((inst, 0)..=(inst, u64::MAX))? {
        let (k, v) = row?;
        out.push((k.value().1, codec::decode(v.value())));
    }
    Ok(out)
}

//! Batches as rows: the record (`batches`) and one row per item
//! (`batch_items`, keyed (batch, position)).
//!
//! Invariant: a batch's item rows are written once when it is created and
//! then only given their outcome, in the transaction that did the item;
//! they go with their batch, which retention removes once it ended longer
//! ago than the retention period.

use super::*;
use crate::store::batches::{BatchItem, BatchItemRow, BatchRecord, ItemOutcome};

impl Tables<'_> {
    /// Writes a new batch with its items (positions 0, 1, …).
    pub fn put_new_batch(
        &mut self,
        rec: &BatchRecord,
        items: &[BatchItem],
    ) -> Result<(), StoreError> {
        self.append_batch_items(rec.id, 0, items)?;
        self.put_batch(rec)
    }

    /// Writes `items` as the items of batch `id` from position `from` on,
    /// none reached yet (the caller counts them in its record).
    pub fn append_batch_items(
        &mut self,
        id: u64,
        from: u64,
        items: &[BatchItem],
    ) -> Result<(), StoreError> {
        for (pos, item) in (from..).zip(items) {
            let row = BatchItemRow {
                item: item.clone(),
                outcome: None,
            };
            self.batch_items
                .get_mut()?
                .insert((id, pos), codec::encode(&row)?.as_slice())?;
        }
        Ok(())
    }

    /// Writes a batch record.
    pub fn put_batch(&mut self, rec: &BatchRecord) -> Result<(), StoreError> {
        self.batches
            .get_mut()?
            .insert(rec.id, codec::encode(rec)?.as_slice())?;
        Ok(())
    }

    /// A batch record.
    pub fn batch(&self, id: u64) -> Result<Option<BatchRecord>, StoreError> {
        match self.batches.get()?.get(id)? {
            Some(v) => Ok(Some(codec::decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// The item at `pos` of batch `id`.
    pub fn batch_item(&self, id: u64, pos: u64) -> Result<Option<BatchItem>, StoreError> {
        match self.batch_items.get()?.get((id, pos))? {
            Some(v) => Ok(Some(codec::decode::<BatchItemRow>(v.value())?.item)),
            None => Ok(None),
        }
    }

    /// Records what became of the item at `pos` of batch `id`.
    pub fn set_item_outcome(
        &mut self,
        id: u64,
        pos: u64,
        item: BatchItem,
        outcome: ItemOutcome,
    ) -> Result<(), StoreError> {
        let row = BatchItemRow {
            item,
            outcome: Some(outcome),
        };
        self.batch_items
            .get_mut()?
            .insert((id, pos), codec::encode(&row)?.as_slice())?;
        Ok(())
    }

    /// Removes up to `limit` batches that ended before `cutoff`, with their
    /// item rows; running ones stay. Returns how many went.
    pub fn forget_batches_before(
        &mut self,
        cutoff: crate::clock::Millis,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let mut old = Vec::new();
        for row in self.batches.get()?.iter()? {
            let rec: BatchRecord = codec::decode(row?.1.value())?;
            if rec.finished_at.is_some_and(|t| t < cutoff) {
                old.push(rec.id);
                if old.len() >= limit {
                    break;
                }
            }
        }
        for id in &old {
            self.batch_items
                .get_mut()?
                .retain_in((*id, 0)..=(*id, u64::MAX), |_, _| false)?;
            self.batches.get_mut()?.remove(*id)?;
        }
        Ok(old.len())
    }
}

//! A table of a batch's write transaction, opened when the batch first uses
//! it: a batch that publishes one message does not open the tables of jobs,
//! tasks or decisions.
//!
//! Invariant: a table is opened at most once per batch, and only through
//! its [`Lazy`] (so two handles of one table never exist in a transaction,
//! which redb refuses).

use super::StoreError;
use redb::WriteTransaction;
use std::cell::OnceCell;

/// A table of a batch, opened on first use.
pub(super) type LazyTable<'t, K, V> = Lazy<'t, redb::Table<'t, K, V>>;
/// A multimap table of a batch, opened on first use.
pub(super) type LazyMultimap<'t, K, V> = Lazy<'t, redb::MultimapTable<'t, K, V>>;

/// How a table of a transaction is opened.
pub(super) type Open<'t, T> = fn(&'t WriteTransaction) -> Result<T, redb::TableError>;

/// A table of `tx`, opened on first use.
pub(super) struct Lazy<'t, T> {
    tx: &'t WriteTransaction,
    open: Open<'t, T>,
    table: OnceCell<T>,
}

impl<'t, T> Lazy<'t, T> {
    /// The table `open` gives, not opened yet.
    pub(super) fn new(tx: &'t WriteTransaction, open: Open<'t, T>) -> Self {
        Lazy {
            tx,
            open,
            table: OnceCell::new(),
        }
    }

    /// The table, to read (opened now if this batch has not yet).
    pub(super) fn get(&self) -> Result<&T, StoreError> {
        if let Some(t) = self.table.get() {
            return Ok(t);
        }
        let t = (self.open)(self.tx).map_err(redb::Error::from)?;
        Ok(self.table.get_or_init(|| t))
    }

    /// The table, to write (opened now if this batch has not yet).
    pub(super) fn get_mut(&mut self) -> Result<&mut T, StoreError> {
        if self.table.get().is_none() {
            self.table = OnceCell::from((self.open)(self.tx).map_err(redb::Error::from)?);
        }
        Ok(self
            .table
            .get_mut()
            .expect("the table was opened just above"))
    }

    /// Whether this batch has opened the table.
    #[cfg(test)]
    pub(super) fn is_open(&self) -> bool {
        self.table.get().is_some()
    }
}

//! A database copied table by table from a read snapshot (what a backup
//! writes), and the checks of a copied file (what a restore asks first).
//!
//! Invariant: the copy holds every table the snapshot has, by its
//! definition; a table the list does not know is named before anything is
//! copied, never left out.

use super::*;
use redb::{
    MultimapTableDefinition, MultimapTableHandle, ReadTransaction, ReadableMultimapTable,
    ReadableTable, TableHandle, WriteTransaction,
};
use std::path::Path;

/// The tables of `r` the copy does not know (empty: it copies them all).
pub(crate) fn unknown_tables(r: &ReadTransaction) -> Result<Vec<String>, StoreError> {
    let mut known = Names::default();
    every_table(&mut known)?;
    let known = known.0;
    let names: Vec<String> = r
        .list_tables()
        .map_err(redb::Error::from)?
        .map(|t| t.name().to_string())
        .chain(
            r.list_multimap_tables()
                .map_err(redb::Error::from)?
                .map(|t| t.name().to_string()),
        )
        .collect();
    Ok(names
        .into_iter()
        .filter(|n| !known.contains(n.as_str()))
        .collect())
}

/// Collects the name of each table of the schema.
#[derive(Default)]
struct Names(std::collections::BTreeSet<String>);

impl TableVisitor for Names {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        def: TableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        self.0.insert(def.name().to_string());
        Ok(())
    }

    fn multimap<K: redb::Key + 'static, V: redb::Key + 'static>(
        &mut self,
        def: MultimapTableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        self.0.insert(def.name().to_string());
        Ok(())
    }
}

/// Writes every table of `r` into a new database at `to`, durably, with
/// `wal_batch` = `batch` (the copy needs no log).
pub(crate) fn copy_snapshot(r: &ReadTransaction, to: &Path, batch: u64) -> Result<(), StoreError> {
    let db = redb::Database::create(to).map_err(|e| StoreError::Open {
        path: to.display().to_string(),
        source: e,
    })?;
    copy_into(r, &db, batch)
}

/// [`copy_snapshot`] into a file `name` of the simulated disk.
#[cfg(test)]
pub(crate) fn copy_snapshot_sim(
    r: &ReadTransaction,
    disk: &crate::disk::sim::Disk,
    name: &str,
    batch: u64,
) -> Result<(), StoreError> {
    let backend = super::sim::Backend {
        disk: disk.clone(),
        name: name.to_string(),
    };
    let db = redb::Database::builder()
        .create_with_backend(backend)
        .map_err(|e| StoreError::Open {
            path: name.to_string(),
            source: e,
        })?;
    copy_into(r, &db, batch)
}

fn copy_into(r: &ReadTransaction, db: &redb::Database, batch: u64) -> Result<(), StoreError> {
    let mut w = db.begin_write()?;
    w.set_durability(redb::Durability::Immediate)
        .map_err(redb::Error::from)?;
    copy_tables(r, &w)?;
    {
        let mut meta = w.open_table(META)?;
        meta.insert(WAL_BATCH, batch)?;
    }
    w.commit()?;
    Ok(())
}

fn copy_tables(r: &ReadTransaction, w: &WriteTransaction) -> Result<(), StoreError> {
    every_table(&mut Copier { r, w })
}

/// Copies each table of a read transaction into a write transaction.
struct Copier<'a> {
    r: &'a ReadTransaction,
    w: &'a WriteTransaction,
}

impl TableVisitor for Copier<'_> {
    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &mut self,
        def: TableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        copy_table(self.r, self.w, def)
    }

    fn multimap<K: redb::Key + 'static, V: redb::Key + 'static>(
        &mut self,
        def: MultimapTableDefinition<K, V>,
    ) -> Result<(), StoreError> {
        copy_multimap(self.r, self.w, def)
    }
}

fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    r: &ReadTransaction,
    w: &WriteTransaction,
    def: TableDefinition<K, V>,
) -> Result<(), StoreError> {
    let Some(from) = super::present(r.open_table(def))? else {
        return Ok(());
    };
    let mut to = w.open_table(def)?;
    for (n, row) in from.iter()?.enumerate() {
        let (k, v) = row?;
        to.insert(k.value(), v.value())?;
        pace(n);
    }
    Ok(())
}

fn copy_multimap<K: redb::Key + 'static, V: redb::Key + 'static>(
    r: &ReadTransaction,
    w: &WriteTransaction,
    def: MultimapTableDefinition<K, V>,
) -> Result<(), StoreError> {
    let Some(from) = super::present(r.open_multimap_table(def))? else {
        return Ok(());
    };
    let mut to = w.open_multimap_table(def)?;
    for (n, row) in from.iter()?.enumerate() {
        let (k, values) = row?;
        for v in values {
            to.insert(k.value(), v?.value())?;
        }
        pace(n);
    }
    Ok(())
}

/// Gives way to the writer and its callers every 1,000 rows (the copy is
/// paced: it takes what they leave of the cores and the memory bus).
fn pace(n: usize) {
    if n % 1000 == 999 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// What a copied database file is found to be.
pub(crate) struct FileCheck {
    /// redb's integrity check found nothing to repair.
    pub intact: bool,
    /// Its format stamp.
    pub format: Option<u64>,
    /// The last batch it holds.
    pub batch: Option<u64>,
    /// What the store's own check finds.
    pub problems: Vec<String>,
}

/// Opens the file at `path` (it must not be in use), runs redb's integrity
/// check and the store's own check, and reads its stamps.
pub(crate) fn check_file(path: &Path) -> Result<FileCheck, StoreError> {
    let mut db = redb::Database::open(path).map_err(|e| StoreError::Open {
        path: path.display().to_string(),
        source: e,
    })?;
    let intact = db.check_integrity().map_err(redb::Error::from)?;
    let r = db.begin_read()?;
    let meta = r.open_table(META).map_err(redb::Error::from)?;
    let get = |k: &str| -> Result<Option<u64>, StoreError> { Ok(meta.get(k)?.map(|g| g.value())) };
    Ok(FileCheck {
        intact,
        format: get(FORMAT_KEY)?,
        batch: get(WAL_BATCH)?,
        problems: verify::verify(&r, false)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new database has every table of the schema, each of which the
    /// copy knows; a table the schema does not name is found.
    #[test]
    fn the_copy_knows_every_table_a_new_database_has() {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        init(&db, "memory", None).unwrap();
        let r = db.begin_read().unwrap();
        assert_eq!(unknown_tables(&r).unwrap(), Vec::<String>::new());
        let created = r.list_tables().unwrap().count() + r.list_multimap_tables().unwrap().count();
        let mut names = Names::default();
        every_table(&mut names).unwrap();
        assert_eq!(created, names.0.len());
        assert!(names.0.len() > 40, "every table is named: {:?}", names.0);
        drop(r);
        let tx = db.begin_write().unwrap();
        let stray: TableDefinition<u64, u64> = TableDefinition::new("stray");
        tx.open_table(stray).unwrap();
        tx.commit().unwrap();
        let r = db.begin_read().unwrap();
        assert_eq!(unknown_tables(&r).unwrap(), vec!["stray".to_string()]);
    }
}

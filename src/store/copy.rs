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
    let known: std::collections::BTreeSet<&str> = TABLES
        .iter()
        .copied()
        .chain(MULTIMAPS.iter().copied())
        .collect();
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

/// The names of the tables the copy knows.
const TABLES: &[&str] = &[
    "meta",
    "audit",
    "version_tokens",
    "definitions",
    "definition_extras",
    "definition_latest",
    "definition_sources",
    "definition_heads",
    "message_catalog",
    "instances",
    "history",
    "tokens",
    "token_scopes",
    "scope_sizes",
    "variables",
    "body_items",
    "tokens_at",
    "messages",
    "dedup",
    "buffer",
    "expiry",
    "buffer_age",
    "parked",
    "instance_messages",
    "tasks_at",
    "incident_jobs",
    "jobs",
    "cont_due",
    "topic_due",
    "leases",
    "start_timers",
    "tasks",
    "parked_events",
    "signals_seen",
    "signals_seen_at",
    "signals_out",
    "compensations",
    "decisions",
    "decision_latest",
];
const MULTIMAPS: &[&str] = &["subscriptions", "signal_subs", "expect", "passed"];

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
    macro_rules! tables {
        ($($t:expr),* $(,)?) => { $( copy_table(r, w, $t)?; )* };
    }
    tables!(
        META,
        VERSION_TOKENS,
        DEFINITIONS,
        DEFINITION_EXTRAS,
        LATEST,
        DEFINITION_SOURCES,
        DEFINITION_HEADS,
        CATALOG,
        INSTANCES,
        HISTORY,
        TOKENS,
        TOKEN_SCOPES,
        SCOPE_SIZES,
        VARIABLES,
        BODY_ITEMS,
        TOKENS_AT,
        MESSAGES,
        DEDUP,
        BUFFER,
        EXPIRY,
        BUFFER_AGE,
        PARKED,
        INSTANCE_MESSAGES,
        TASKS_AT,
        INCIDENT_JOBS,
        JOBS,
        CONT_DUE,
        TOPIC_DUE,
        LEASES,
        START_TIMERS,
        TASKS,
        PARKED_EVENTS,
        SIGNALS_SEEN,
        SIGNALS_SEEN_AT,
        SIGNALS_OUT,
        COMPENSATIONS,
        DECISIONS,
        DECISION_LATEST,
        AUDIT,
    );
    copy_multimap(r, w, SUBSCRIPTIONS)?;
    copy_multimap(r, w, EXPECT)?;
    copy_multimap(r, w, PASSED)?;
    copy_multimap(r, w, SIGNAL_SUBS)?;
    Ok(())
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

    /// The list of names and the tables the store defines are one: a new
    /// table must be copied.
    #[test]
    fn the_copy_knows_every_table_the_store_defines() {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        let tx = db.begin_write().unwrap();
        Tables::open(&tx).unwrap();
        tx.commit().unwrap();
        let r = db.begin_read().unwrap();
        assert_eq!(unknown_tables(&r).unwrap(), Vec::<String>::new());
        let created = r.list_tables().unwrap().count() + r.list_multimap_tables().unwrap().count();
        assert_eq!(created, TABLES.len() + MULTIMAPS.len());
    }
}

//! Opening the database file: creating its tables, stamping and checking
//! its format and partition, read-only opens over an overlay, and the page
//! check and repair of `recover`.
//!
//! Invariant: a file of a newer format or of another partition is refused
//! in a read transaction, before anything is written.

use super::*;
use crate::partition::Partition;
use std::path::Path;

/// An opened database file and the partition it is.
type Opened = Result<(redb::Database, Partition), StoreError>;

/// Creates every table so that read transactions find them, stamps the
/// format version and the partition (`path` names the file in a refusal).
/// Returns the partition the database is: the one stamped, or `given` for a
/// new database (unpartitioned when none is given).
pub(crate) fn init(
    db: &redb::Database,
    path: &str,
    given: Option<crate::partition::Partition>,
) -> Result<crate::partition::Partition, StoreError> {
    // a newer format is refused before anything is written
    {
        let r = db.begin_read()?;
        let found = match present(r.open_table(META))? {
            Some(meta) => meta.get(FORMAT_KEY)?.map(|g| g.value()),
            None => None,
        };
        if let Some(found) = found.filter(|&v| v > DB_FORMAT) {
            return Err(StoreError::NewerFormat {
                path: path.to_string(),
                found,
                reads: DB_FORMAT,
            });
        }
    }
    let tx = db.begin_write()?;
    // a batch opens the tables it uses, readers count on every one existing
    every_table(&mut Creator(&tx))?;
    let partition = {
        let mut t = Tables::open(&tx)?;
        let new = t.is_new()?;
        let partition = t.stamp_partition(path, given, new)?;
        t.adopt_slots()?;
        t.stamp_format(path)?;
        t.upgrade_indexes()?;
        partition
    };
    tx.commit()?;
    Ok(partition)
}

/// Opens (or creates) the database file, mapping a held lock to a clear
/// error; as partition `given` (refused when the file is another one), or as
/// whatever partition it is. Returns the partition it is.
pub(crate) fn open_db(path: &Path, given: Option<Partition>) -> Opened {
    damage::contain(path, || open_db_unchecked(path, given))
}

pub(super) fn open_db_unchecked(path: &Path, given: Option<Partition>) -> Opened {
    let shown = path.display().to_string();
    // a database whose name is not durable is lost with everything in it
    let db = crate::disk::create_durably(&crate::disk::FileSystem, path, || {
        redb::Database::builder()
            .set_cache_size(256 * 1024 * 1024)
            .create(path)
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
                    path: shown.clone(),
                },
                other => StoreError::Open {
                    path: shown.clone(),
                    source: other,
                },
            })
    })?;
    let partition = init(&db, &shown, given)?;
    Ok((db, partition))
}

/// Opens (or creates) the database `path` on the simulated disk of the
/// power-loss tests, as [`open_db`] does on a file.
#[cfg(test)]
pub(crate) fn open_db_sim(
    disk: &crate::disk::sim::Disk,
    path: &Path,
    given: Option<Partition>,
) -> Opened {
    let name = path.to_string_lossy().to_string();
    let db = crate::disk::create_durably(disk, path, || {
        disk.create(&name)?;
        redb::Database::builder()
            .create_with_backend(sim::Backend {
                disk: disk.clone(),
                name: name.clone(),
            })
            .map_err(|e| StoreError::Open {
                path: name.clone(),
                source: e,
            })
    })?;
    let partition = init(&db, &name, given)?;
    Ok((db, partition))
}

/// Opens the database file for looking only: nothing is ever written to it.
/// redb's own recovery after a crash, and the replay of the write-ahead log,
/// happen in a copy-on-write overlay in memory ([`overlay::Overlay`]), so this works on a
/// full disk and on a read-only file system. Refused while another process
/// holds the file as its writer.
pub(crate) fn open_db_read_only(path: &Path, given: Option<Partition>) -> Opened {
    damage::contain(path, || open_db_read_only_unchecked(path, given))
}

pub(super) fn open_db_read_only_unchecked(path: &Path, given: Option<Partition>) -> Opened {
    let shown = path.display().to_string();
    // a running writer holds the file: redb's read-only open says so
    if let Err(redb::DatabaseError::DatabaseAlreadyOpen) =
        redb::Database::builder().open_read_only(path)
    {
        return Err(StoreError::Locked { path: shown });
    }
    let file = std::fs::File::open(path).map_err(StoreError::Io)?;
    let db = redb::Database::builder()
        .set_cache_size(64 * 1024 * 1024)
        .create_with_backend(overlay::Overlay::new(file)?)
        .map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?;
    let partition = init(&db, &shown, given)?;
    Ok((db, partition))
}

/// What [`check_file`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCheck {
    /// Every page's checksum holds.
    Intact,
    /// Damaged, and redb can repair it by going back to the last commit
    /// whose pages are intact (what came after it is lost).
    Repairable(String),
    /// Damaged beyond what redb can repair.
    Damaged(String),
}

/// Checks every page of the database file at `path` without changing it:
/// redb's integrity check runs over an in-memory overlay of the file.
pub(crate) fn check_file(path: &std::path::Path) -> Result<FileCheck, StoreError> {
    let file = std::fs::File::open(path).map_err(StoreError::Io)?;
    let checked = damage::contain(path, || {
        let mut db = redb::Database::builder()
            .create_with_backend(overlay::Overlay::new(file)?)
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source,
            })?;
        Ok(db.check_integrity())
    });
    Ok(match checked {
        Ok(Ok(true)) => FileCheck::Intact,
        Ok(Ok(false)) => FileCheck::Repairable("redb found pages whose checksums fail".into()),
        Ok(Err(e)) => FileCheck::Damaged(e.to_string()),
        Err(StoreError::Damaged { detail, .. }) => FileCheck::Damaged(detail),
        Err(StoreError::Open { source, .. }) => FileCheck::Damaged(source.to_string()),
        Err(e) => return Err(e),
    })
}

/// Repairs the database file at `path` in place with redb's integrity check
/// (the caller holds no handle to it); returns what the check found.
pub(crate) fn repair_file(path: &std::path::Path) -> Result<FileCheck, StoreError> {
    damage::contain(path, || {
        let mut db = redb::Database::builder()
            .create(path)
            .map_err(|source| match source {
                redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
                    path: path.display().to_string(),
                },
                source => StoreError::Open {
                    path: path.display().to_string(),
                    source,
                },
            })?;
        Ok(match db.check_integrity() {
            Ok(true) => FileCheck::Intact,
            Ok(false) => FileCheck::Repairable("repaired".into()),
            Err(e) => FileCheck::Damaged(e.to_string()),
        })
    })
}

/// A read-only snapshot.
pub(crate) fn begin_read(db: &redb::Database) -> Result<Snapshot, StoreError> {
    Ok(Snapshot::new(db.begin_read()?))
}

//! The log archive, for a restore to a point in time: the log's closed
//! segments (`LOG.closed-LAST`, which a checkpoint leaves when
//! [`crate::Options::archive`] is set) shipped into a directory as
//! `pI-FIRST-LAST.wal`, and the batches a restore replays from them after a
//! base backup up to an instant — the way PostgreSQL's WAL archiving works.
//!
//! Invariants:
//! - A segment is removed beside the log only once its copy in the archive
//!   is durable (written as `.partial-NAME`, synced, renamed, the directory
//!   synced); a copy that exists with other bytes is never overwritten.
//! - A restore replays batches in order from the one after the backup's,
//!   without a gap: a missing batch refuses the restore naming it, before
//!   anything is written; it stops at the first batch later than the
//!   instant asked for.

use super::BackupError;
use crate::clock::Millis;
use crate::commit::wal::{self, Record, Wal};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The log of the database at `db`, whose closed segments lie beside it.
pub fn log_of(db: &Path) -> PathBuf {
    Wal::path_for(db)
}

/// The archive's name for partition `partition`'s segment of batches
/// `first` to `last`.
pub fn segment_name(partition: u32, first: u64, last: u64) -> String {
    format!("p{partition}-{first:020}-{last:020}.wal")
}

/// Whether the archive name `name` is partition `partition`'s segment
/// holding a batch after `after`.
pub fn wanted(name: &str, partition: u32, after: u64) -> bool {
    parse_name(name).is_some_and(|(p, _, last)| p == partition && last > after)
}

/// The first and last batch of the closed segment at `path` (`None`: it
/// holds no records); a segment that is not whole records is damage.
pub fn segment_range(path: &Path) -> Result<Option<(u64, u64)>, BackupError> {
    let scan = Wal::scan(path)?;
    if scan.damaged || scan.intact_until < scan.size {
        return Err(BackupError::Damaged {
            path: path.display().to_string(),
            reason: format!(
                "a closed log segment with {} byte(s) that are not whole records from offset {}",
                scan.size - scan.intact_until,
                scan.intact_until
            ),
        });
    }
    Ok(scan
        .records
        .first()
        .zip(scan.records.last())
        .map(|(f, l)| (f.batch, l.batch)))
}

/// The partition and batches an archive name says, if it is a segment's.
fn parse_name(name: &str) -> Option<(u32, u64, u64)> {
    let rest = name.strip_prefix('p')?.strip_suffix(".wal")?;
    let mut parts = rest.split('-');
    let p = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    let last = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((p, first, last))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Ships the closed segments beside the log `log` into `to` (created when
/// missing) as partition `partition`'s, oldest first, each removed beside
/// the log once its copy is durable; a segment without records is removed.
/// Returns the names shipped.
pub fn ship(log: &Path, to: &Path, partition: u32) -> Result<Vec<String>, BackupError> {
    let closed = wal::closed_segments(log).map_err(io(log))?;
    if closed.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(to).map_err(io(to))?;
    let mut shipped = Vec::new();
    for segment in closed {
        let Some((first, last)) = segment_range(&segment)? else {
            std::fs::remove_file(&segment).map_err(io(&segment))?;
            continue;
        };
        let bytes = std::fs::read(&segment).map_err(io(&segment))?;
        let name = segment_name(partition, first, last);
        let dest = to.join(&name);
        match std::fs::read(&dest) {
            Ok(there) if there == bytes => {} // shipped before the removal was
            Ok(_) => {
                return Err(BackupError::Damaged {
                    path: dest.display().to_string(),
                    reason: format!(
                        "the archive holds other batches under this name than {}: archive a restored database to a place of its own",
                        segment.display()
                    ),
                });
            }
            Err(_) => write_durably(to, &format!(".partial-{name}"), &name, &bytes)?,
        }
        std::fs::remove_file(&segment).map_err(io(&segment))?;
        shipped.push(name);
    }
    Ok(shipped)
}

/// Writes `bytes` as `dir/name` through `dir/staging`, synced and renamed,
/// the directory synced.
fn write_durably(dir: &Path, staging: &str, name: &str, bytes: &[u8]) -> Result<(), BackupError> {
    let partial = dir.join(staging);
    let mut f = std::fs::File::create(&partial).map_err(io(&partial))?;
    f.write_all(bytes).map_err(io(&partial))?;
    f.sync_all().map_err(io(&partial))?;
    let dest = dir.join(name);
    std::fs::rename(&partial, &dest).map_err(io(&dest))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// The batches a restore replays after a base backup.
#[derive(Debug)]
pub(crate) struct Replay {
    /// The batches, in order, from the one after the backup's.
    pub records: Vec<Record>,
    /// Whether the archive holds a batch later than the instant (so the
    /// replay reached it, rather than the archive's end).
    pub reached: bool,
}

/// The archived batches of `partition` after batch `after`, in order and
/// without a gap, up to the last one at or before `until`.
pub(crate) fn replay(
    archive: &Path,
    partition: u32,
    after: u64,
    until: Millis,
) -> Result<Replay, BackupError> {
    let mut segments: Vec<(u64, u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(archive).map_err(io(archive))? {
        let entry = entry.map_err(io(archive))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some((p, first, last)) = parse_name(&name)
            && p == partition
            && last > after
        {
            segments.push((first, last, entry.path()));
        }
    }
    segments.sort();
    let mut records: Vec<Record> = Vec::new();
    let mut next = after + 1;
    for (_, _, path) in segments {
        let scan = Wal::scan(&path)?;
        if scan.damaged || scan.intact_until < scan.size {
            return Err(BackupError::Damaged {
                path: path.display().to_string(),
                reason: format!(
                    "an archived log segment damaged at offset {}",
                    scan.intact_until
                ),
            });
        }
        for r in scan.records {
            if r.batch < next {
                continue; // before the backup's, or in an earlier segment
            }
            if r.batch > next {
                return Err(BackupError::ArchiveGap {
                    archive: archive.display().to_string(),
                    missing: next,
                    found: r.batch,
                });
            }
            if r.now > until {
                return Ok(Replay {
                    records,
                    reached: true,
                });
            }
            next = r.batch + 1;
            records.push(r);
        }
    }
    Ok(Replay {
        records,
        reached: false,
    })
}

/// Writes `records` as the log `log` (through `LOG.restoring`, synced and
/// renamed), for the next opening to replay.
pub(crate) fn write_log(log: &Path, records: &[Record]) -> Result<(), BackupError> {
    let mut bytes = wal::HEADER.to_vec();
    for r in records {
        bytes.extend(wal::frame(r.batch, r.now, &r.commands)?);
    }
    let dir = match log.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = log
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    write_durably(dir, &format!("{name}.restoring"), &name, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_name_says_its_partition_and_batches() {
        let n = segment_name(3, 17, 4711);
        assert_eq!(n, "p3-00000000000000000017-00000000000000004711.wal");
        assert_eq!(parse_name(&n), Some((3, 17, 4711)));
        for other in [
            "p3-1-2.wal.tmp",
            ".partial-p3-1-2.wal",
            "p3-1.wal",
            "px-1-2.wal",
            "p3-1-2-3.wal",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }
}

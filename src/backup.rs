//! Backups: a copy of the database at one batch of the log, written from a
//! read snapshot the writer hands over between two batches (so writers wait
//! for no copy), with a manifest of what it holds; the list of the backups
//! in a directory; and the checks a restore makes before it writes anything.
//!
//! Invariants:
//! - A backup is a directory `ID/` with `postfach.redb` and `manifest.json`;
//!   the manifest is written last, after every file it names is durable, and
//!   the directory gets its name only then — an interrupted backup is a
//!   `.partial-ID/` directory, never listed and never restored.
//! - Every table of the database is copied; a table the copy does not know
//!   stops the backup instead of being left out.
//! - A restore writes its target only after the checksums, redb's integrity
//!   check, the format, the partition and the store's own check passed, and
//!   never replaces a database (or its log) without being told to — then it
//!   keeps both beside it.

pub mod archive;

use crate::store::{self, StoreError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The manifest's file name in a backup directory.
pub const MANIFEST: &str = "manifest.json";
/// The database copy's file name in a backup directory.
pub const DATABASE: &str = "postfach.redb";

/// What a backup holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The backup's id, its directory's name: its set's id and its
    /// partition (`SET-pI`; the set by default the instant,
    /// `YYYYMMDDTHHMMSSmmmZ`).
    pub id: String,
    /// The partition of its cluster the database is (0 of 1 unpartitioned).
    pub partition: u32,
    /// How many partitions its cluster has.
    pub partitions: u32,
    /// The database format of the copy.
    pub db_format: u64,
    /// The last batch of the log the copy holds: every call answered before
    /// the backup began is in it.
    pub batch: u64,
    /// When the snapshot was taken (RFC 3339).
    pub taken_at: String,
    /// The postfach release that wrote it.
    pub postfach: String,
    /// Every file of the backup with its size and SHA-256.
    pub files: Vec<FileSum>,
}

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    /// Its name in the backup directory.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
}

/// Why a backup could not be written, listed or restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The database could not be read or the copy written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The database holds a table the copy does not know.
    #[error(
        "the database holds table '{0}', which a backup does not copy: this release cannot back it up"
    )]
    UnknownTable(String),
    /// A directory without a manifest: an interrupted backup.
    #[error(
        "{0}: a partial backup (it has no {MANIFEST}): it was interrupted and cannot be restored"
    )]
    Partial(String),
    /// A manifest that cannot be read.
    #[error("{path}: {reason}")]
    Manifest {
        /// The manifest file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file of the backup differs from its manifest, or the copy fails a
    /// check.
    #[error("{path}: {reason}")]
    Damaged {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The backup is of another partition than the one asked for.
    #[error("backup {id} is partition {found} of {partitions}, not partition {wanted}")]
    WrongPartition {
        /// The backup.
        id: String,
        /// Its partition.
        found: u32,
        /// Its cluster's partitions.
        partitions: u32,
        /// The partition asked for.
        wanted: u32,
    },
    /// The backup's database format is newer than this release reads.
    #[error("backup {id} has database format {found}; this release reads format {reads} and older")]
    NewerFormat {
        /// The backup.
        id: String,
        /// Its format.
        found: u64,
        /// The newest this release reads.
        reads: u64,
    },
    /// Cloud Storage could not be reached or refused a call.
    #[error("{place}: {reason}")]
    Remote {
        /// The bucket, prefix or object.
        place: String,
        /// What went wrong.
        reason: String,
    },
    /// A backup set id that cannot name a directory.
    #[error(
        "backup id '{0}' is not 1 to 64 letters, digits, '-' and '_' beginning with a letter or digit"
    )]
    BadId(String),
    /// A backup of this set and partition exists already.
    #[error("{0} exists: a backup set id is taken once per partition")]
    Taken(String),
    /// The archive misses a batch between the backup and the instant.
    #[error(
        "{archive}: the archived log has no batch {missing} (the next it holds is {found}); a point-in-time restore cannot pass a gap"
    )]
    ArchiveGap {
        /// The archive.
        archive: String,
        /// The first batch missing.
        missing: u64,
        /// The batch the archive holds next.
        found: u64,
    },
    /// The instant asked for is before the backup.
    #[error(
        "backup {id} was taken at {taken_at}, after {until}: restore an older backup to reach that instant"
    )]
    AfterInstant {
        /// The backup.
        id: String,
        /// When it was taken.
        taken_at: String,
        /// The instant asked for.
        until: String,
    },
    /// The target exists and was not to be replaced.
    #[error("{0} exists: a restore does not overwrite a database")]
    Exists(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Where backups or the log archive go: a directory, or a prefix in a
/// Cloud Storage bucket (`gs://BUCKET/PREFIX`, through a staging directory
/// beside the database; with the `pubsub` feature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A directory.
    Dir(PathBuf),
    /// A bucket and a prefix (no leading or trailing `/`; empty: the top).
    Gcs {
        /// The bucket.
        bucket: String,
        /// The prefix the names are under.
        prefix: String,
    },
}

impl Place {
    /// A directory, or `gs://BUCKET[/PREFIX]` (a bucket name of 3 … 63
    /// lower-case letters, digits, `-`, `_`, `.`).
    pub fn parse(s: &str) -> Result<Place, String> {
        let Some(rest) = s.strip_prefix("gs://") else {
            if s.contains("://") {
                return Err(format!(
                    "'{s}' is neither a directory nor gs://BUCKET/PREFIX"
                ));
            }
            if s.is_empty() {
                return Err("empty; name a directory or gs://BUCKET/PREFIX".into());
            }
            return Ok(Place::Dir(PathBuf::from(s)));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let ok = (3..=63).contains(&bucket.len())
            && bucket.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.')
            });
        if !ok {
            return Err(format!(
                "'{bucket}' in '{s}' is not a bucket name (3 to 63 lower-case letters, digits, '-', '_', '.')"
            ));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == "." || p == "..") || prefix.contains("//") {
            return Err(format!("'{s}': the prefix has an empty, '.' or '..' part"));
        }
        Ok(Place::Gcs {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The place as given.
    pub fn describe(&self) -> String {
        match self {
            Place::Dir(d) => d.display().to_string(),
            Place::Gcs { bucket, prefix } if prefix.is_empty() => format!("gs://{bucket}"),
            Place::Gcs { bucket, prefix } => format!("gs://{bucket}/{prefix}"),
        }
    }

    /// The object name of `name` under the prefix.
    pub fn object(prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        }
    }
}

/// A backup set's id made from an instant (`YYYYMMDDTHHMMSSmmmZ`): the
/// default when a backup is taken without one.
pub fn set_id(taken_at: crate::clock::Millis) -> String {
    crate::clock::rfc3339(taken_at)
        .replace(['-', ':'], "")
        .replace('.', "")
}

/// A backup's id: its set's and its partition (`SET-pI`).
pub fn backup_id(set: &str, partition: u32) -> String {
    format!("{set}-p{partition}")
}

/// Refuses a set id that is not 1 … 64 letters, digits, `-` and `_`,
/// beginning with a letter or digit: it names directories and objects.
pub fn check_set_id(id: &str) -> Result<(), BackupError> {
    let ok = (1..=64).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(BackupError::BadId(id.chars().take(80).collect()))
    }
}

/// The backup `id` names in `dir` for `partition`: the directory `id` when
/// it is a backup's (`SET-pI`, a path), else the set `id`'s backup of the
/// partition (`id-pI`).
pub fn resolve(id: &Path, partition: Option<u32>) -> PathBuf {
    match partition {
        Some(i) if !id.exists() => {
            let name = id.file_name().map(|n| n.to_string_lossy().into_owned());
            let set = format!("{}-p{i}", name.unwrap_or_default());
            id.with_file_name(set)
        }
        _ => id.to_path_buf(),
    }
}

/// Where a backup's files are written: the file system, or the simulated
/// disk of the power-loss tests. The steps of [`write`] are the same on both.
/// What a step on the files answers: done, or why not.
type Step = Result<(), BackupError>;

pub(crate) trait Files: Send {
    /// Whether `path` (a file or directory) exists.
    fn exists(&self, path: &Path) -> bool;
    /// Creates the directory `path` and its parents.
    fn make_dir(&self, path: &Path) -> Step;
    /// Removes the directory `path` with everything in it.
    fn remove_dir(&self, path: &Path) -> Step;
    /// Writes the snapshot as a new database `path`, durably.
    fn copy_database(&self, r: &store::RawSnapshot, path: &Path, batch: u64) -> Step;
    /// Writes `bytes` as the file `path`.
    fn write_file(&self, path: &Path, bytes: &[u8]) -> Step;
    /// The size and SHA-256 of `path`, as `name` in a manifest.
    fn sum(&self, path: &Path, name: &str) -> Result<FileSum, BackupError>;
    /// Makes a file's content durable.
    fn sync_file(&self, path: &Path) -> Step;
    /// Makes the entries of the directory `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Step;
    /// Renames the directory `from` to `to`.
    fn rename(&self, from: &Path, to: &Path) -> Step;
}

/// The file system.
pub(crate) struct FileSystem;

impl Files for FileSystem {
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn make_dir(&self, path: &Path) -> Step {
        std::fs::create_dir_all(path).map_err(io(path))
    }
    fn remove_dir(&self, path: &Path) -> Step {
        std::fs::remove_dir_all(path).map_err(io(path))
    }
    fn copy_database(&self, r: &store::RawSnapshot, path: &Path, batch: u64) -> Step {
        Ok(store::copy::copy_snapshot(r, path, batch)?)
    }
    fn write_file(&self, path: &Path, bytes: &[u8]) -> Step {
        std::fs::write(path, bytes).map_err(io(path))
    }
    fn sum(&self, path: &Path, name: &str) -> Result<FileSum, BackupError> {
        file_sum(path, name)
    }
    fn sync_file(&self, path: &Path) -> Step {
        sync_file(path).map_err(io(path))
    }
    fn sync_dir(&self, dir: &Path) -> Step {
        sync_dir(dir).map_err(io(dir))
    }
    fn rename(&self, from: &Path, to: &Path) -> Step {
        std::fs::rename(from, to).map_err(io(to))
    }
}

/// Writes a backup of the snapshot `r` (the state after batch `batch`) as
/// `dir/SET-pI/`, `dir` created when missing; `set` given (a cluster's
/// backup set) it must be new for the partition, else the instant names it.
pub(crate) fn write(
    on: &dyn Files,
    r: &store::RawSnapshot,
    batch: u64,
    partition: crate::partition::Partition,
    taken_at: crate::clock::Millis,
    dir: &Path,
    set: Option<&str>,
) -> Result<Manifest, BackupError> {
    on.make_dir(dir)?;
    let p = partition.index();
    let id = match set {
        Some(set) => {
            check_set_id(set)?;
            let id = backup_id(set, p);
            if on.exists(&dir.join(&id)) {
                return Err(BackupError::Taken(dir.join(&id).display().to_string()));
            }
            id
        }
        // two backups in one millisecond get ids of their own
        None => {
            let first = set_id(taken_at);
            (1..)
                .map(|n| match n {
                    1 => backup_id(&first, p),
                    n => backup_id(&format!("{first}-{n}"), p),
                })
                .find(|id| !on.exists(&dir.join(id)))
                .unwrap_or_else(|| backup_id(&first, p))
        }
    };
    let partial = dir.join(format!(".partial-{id}"));
    if on.exists(&partial) {
        on.remove_dir(&partial)?;
    }
    on.make_dir(&partial)?;
    let copy = partial.join(DATABASE);
    let unknown = store::copy::unknown_tables(r)?;
    if let Some(name) = unknown.into_iter().next() {
        let _ = on.remove_dir(&partial);
        return Err(BackupError::UnknownTable(name));
    }
    // the copy holds everything up to `batch`: nothing to replay
    on.copy_database(r, &copy, batch)?;
    let sum = on.sum(&copy, DATABASE)?;
    let manifest = Manifest {
        id: id.clone(),
        partition: partition.index(),
        partitions: partition.count(),
        db_format: store::DB_FORMAT,
        batch,
        taken_at: crate::clock::rfc3339(taken_at),
        postfach: env!("CARGO_PKG_VERSION").to_string(),
        files: vec![sum],
    };
    on.sync_file(&copy)?;
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    let path = partial.join(MANIFEST);
    on.write_file(&path, text.as_bytes())?;
    on.sync_file(&path)?;
    on.sync_dir(&partial)?;
    let done = dir.join(&id);
    on.rename(&partial, &done)?;
    on.sync_dir(dir)?;
    Ok(manifest)
}

/// A backup's files on the simulated disk of the power-loss tests: paths
/// are the disk's file names.
#[cfg(test)]
pub(crate) struct SimFiles(pub crate::disk::sim::Disk);

#[cfg(test)]
impl Files for SimFiles {
    fn exists(&self, path: &Path) -> bool {
        self.0.has(&path.to_string_lossy())
    }
    fn make_dir(&self, _: &Path) -> Step {
        Ok(()) // the disk's names have no directories of their own
    }
    fn remove_dir(&self, path: &Path) -> Step {
        self.0.remove_dir(&path.to_string_lossy()).map_err(io(path))
    }
    fn copy_database(&self, r: &store::RawSnapshot, path: &Path, batch: u64) -> Step {
        let name = path.to_string_lossy();
        self.0.create(&name).map_err(io(path))?;
        Ok(store::copy::copy_snapshot_sim(r, &self.0, &name, batch)?)
    }
    fn write_file(&self, path: &Path, bytes: &[u8]) -> Step {
        let name = path.to_string_lossy();
        self.0.create(&name).map_err(io(path))?;
        self.0.write_at(&name, 0, bytes).map_err(io(path))
    }
    fn sum(&self, path: &Path, name: &str) -> Result<FileSum, BackupError> {
        let bytes = self.0.read(&path.to_string_lossy()).unwrap_or_default();
        Ok(FileSum {
            name: name.to_string(),
            bytes: bytes.len() as u64,
            sha256: hex(&Sha256::digest(&bytes)),
        })
    }
    fn sync_file(&self, path: &Path) -> Step {
        self.0.sync_file(&path.to_string_lossy()).map_err(io(path))
    }
    fn sync_dir(&self, dir: &Path) -> Step {
        self.0.sync_dir().map_err(io(dir))
    }
    fn rename(&self, from: &Path, to: &Path) -> Step {
        self.0
            .rename_dir(&from.to_string_lossy(), &to.to_string_lossy())
            .map_err(io(to))
    }
}

/// The size and SHA-256 of `path`, as `name` in a manifest.
fn file_sum(path: &Path, name: &str) -> Result<FileSum, BackupError> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(FileSum {
        name: name.to_string(),
        bytes,
        sha256: hex(&hash.finalize()),
    })
}

/// Makes a file's content durable.
fn sync_file(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// Makes a directory's entries durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The manifest of the backup in `dir`, read and checked against its files
/// (sizes and SHA-256): a directory without one is a partial backup.
pub fn check(dir: &Path) -> Result<Manifest, BackupError> {
    let path = dir.join(MANIFEST);
    let interrupted = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(".partial-"));
    if interrupted || !path.exists() {
        return Err(BackupError::Partial(dir.display().to_string()));
    }
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| BackupError::Manifest {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    if !manifest.files.iter().any(|f| f.name == DATABASE) {
        return Err(BackupError::Manifest {
            path: path.display().to_string(),
            reason: format!("it names no {DATABASE}"),
        });
    }
    for f in &manifest.files {
        if f.name.contains(['/', '\\']) || f.name.starts_with('.') {
            return Err(BackupError::Manifest {
                path: path.display().to_string(),
                reason: format!("file name {:?} is not a name in the backup", f.name),
            });
        }
        let file = dir.join(&f.name);
        if !file.exists() {
            return Err(BackupError::Damaged {
                path: file.display().to_string(),
                reason: "missing".into(),
            });
        }
        let found = file_sum(&file, &f.name)?;
        if found.bytes != f.bytes {
            return Err(BackupError::Damaged {
                path: file.display().to_string(),
                reason: format!(
                    "{} bytes, the manifest says {} (truncated or appended to)",
                    found.bytes, f.bytes
                ),
            });
        }
        if found.sha256 != f.sha256 {
            return Err(BackupError::Damaged {
                path: file.display().to_string(),
                reason: "its SHA-256 differs from the manifest's (damaged)".into(),
            });
        }
    }
    Ok(manifest)
}

/// A directory of a backup directory, and what [`check`] says of it.
pub type Listed = (String, Result<Manifest, BackupError>);

/// The backups in `dir`, oldest first: each directory with what [`check`]
/// says of it (partial ones included, as errors).
pub fn list(dir: &Path) -> Result<Vec<Listed>, BackupError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        if !entry.file_type().map_err(io(dir))?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((name, check(&entry.path())));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Removes the good backups of `partition` in `dir` beyond the newest
/// `keep`, and the interrupted ones (`.partial-…`) of it older than the
/// newest good one; backups of other partitions, damaged ones and anything
/// newer are left. Returns the directories removed.
pub fn prune(dir: &Path, partition: u32, keep: usize) -> Result<Vec<String>, BackupError> {
    let suffix = format!("-p{partition}");
    let listed = list(dir)?;
    let good: Vec<&String> = listed
        .iter()
        .filter(|(_, m)| m.as_ref().is_ok_and(|m| m.partition == partition))
        .map(|(name, _)| name)
        .collect();
    let newest = good.last().map(|n| n.as_str()).unwrap_or_default();
    let mut removed = Vec::new();
    let surplus = good.len().saturating_sub(keep);
    let stale = listed.iter().filter_map(|(name, _)| {
        let id = name.strip_prefix(".partial-")?;
        (id.ends_with(&suffix) && id < newest).then_some(name)
    });
    for name in good[..surplus].iter().copied().chain(stale) {
        let path = dir.join(name);
        std::fs::remove_dir_all(&path).map_err(io(&path))?;
        removed.push(name.clone());
    }
    if !removed.is_empty() {
        sync_dir(dir).map_err(io(dir))?;
    }
    Ok(removed)
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The backup restored.
    pub manifest: Manifest,
    /// Where the replaced database and its log were kept, when one was.
    pub kept: Vec<PathBuf>,
    /// With an archive: the batches written as the log, which the next
    /// opening replays.
    pub replay: Option<Replayed>,
}

/// The archived batches a point-in-time restore put into the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// How many batches.
    pub batches: usize,
    /// The last of them, and its instant (the backup's batch when none).
    pub last_batch: u64,
    /// The last one's instant (RFC 3339), when there is one.
    pub last_at: Option<String>,
    /// Whether the archive holds a later batch than the instant — `false`:
    /// the replay ends where the archive ends, before the instant.
    pub reached: bool,
}

/// [`restore`] to the instant `until`: the backup (taken at or before it)
/// and, written as the target's log for the next opening to replay, the
/// batches archived in `archive` after the backup's up to the last one at
/// or before `until` — checked for gaps before anything is written.
pub fn restore_until(
    dir: &Path,
    target: &Path,
    partition: Option<u32>,
    replace: bool,
    archive: &Path,
    until: crate::clock::Millis,
) -> Result<Restored, BackupError> {
    let manifest = check(dir)?;
    let taken = crate::model::iso::instant(&manifest.taken_at).unwrap_or(0);
    if taken > until {
        return Err(BackupError::AfterInstant {
            id: manifest.id,
            taken_at: manifest.taken_at,
            until: crate::clock::rfc3339(until),
        });
    }
    let replay = archive::replay(archive, manifest.partition, manifest.batch, until)?;
    let mut restored = restore(dir, target, partition, replace)?;
    let log = crate::commit::wal::Wal::path_for(target);
    archive::write_log(&log, &replay.records)?;
    let last = replay.records.last();
    restored.replay = Some(Replayed {
        batches: replay.records.len(),
        last_batch: last.map_or(manifest.batch, |r| r.batch),
        last_at: last.map(|r| crate::clock::rfc3339(r.now)),
        reached: replay.reached,
    });
    Ok(restored)
}

/// Restores the backup in `dir` to the database `target` (with no log: the
/// copy holds every batch up to the manifest's): checked first, written to
/// `TARGET.restoring` and renamed into place. `partition`: the partition it
/// must be, when one is asked for; `replace`: keep an existing database and
/// its log aside (`….replaced-MILLIS`) instead of refusing.
pub fn restore(
    dir: &Path,
    target: &Path,
    partition: Option<u32>,
    replace: bool,
) -> Result<Restored, BackupError> {
    let manifest = check(dir)?;
    if let Some(wanted) = partition.filter(|&p| p != manifest.partition) {
        return Err(BackupError::WrongPartition {
            id: manifest.id,
            found: manifest.partition,
            partitions: manifest.partitions,
            wanted,
        });
    }
    if manifest.db_format > store::DB_FORMAT {
        return Err(BackupError::NewerFormat {
            id: manifest.id,
            found: manifest.db_format,
            reads: store::DB_FORMAT,
        });
    }
    let log = crate::commit::wal::Wal::path_for(target);
    if !replace && (target.exists() || log.exists()) {
        return Err(BackupError::Exists(target.display().to_string()));
    }
    let staging = target.with_extension("restoring");
    let source = dir.join(DATABASE);
    std::fs::copy(&source, &staging).map_err(io(&staging))?;
    if let Err(e) = check_copy(&staging, &manifest) {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    sync_file(&staging).map_err(io(&staging))?;
    let mut kept = Vec::new();
    let stamp = crate::clock::Clock::now(&crate::clock::SystemClock);
    for old in [target, log.as_path()] {
        if old.exists() {
            let aside = PathBuf::from(format!("{}.replaced-{stamp}", old.display()));
            std::fs::rename(old, &aside).map_err(io(old))?;
            kept.push(aside);
        }
    }
    std::fs::rename(&staging, target).map_err(io(target))?;
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent).map_err(io(parent))?;
    }
    Ok(Restored {
        manifest,
        kept,
        replay: None,
    })
}

/// redb's integrity check, the format and batch stamps, and the store's own
/// check, on the staged copy.
fn check_copy(staging: &Path, manifest: &Manifest) -> Result<(), BackupError> {
    let damaged = |reason: String| BackupError::Damaged {
        path: staging.display().to_string(),
        reason,
    };
    let found = store::copy::check_file(staging).map_err(|e| damaged(e.to_string()))?;
    if !found.intact {
        return Err(damaged(
            "redb repaired it while checking: it was not intact".into(),
        ));
    }
    if found.format != Some(manifest.db_format) {
        return Err(damaged(format!(
            "its format stamp is not the manifest's {}",
            manifest.db_format
        )));
    }
    if found.batch != Some(manifest.batch) {
        return Err(damaged(format!(
            "it does not hold batch {} as the manifest says",
            manifest.batch
        )));
    }
    if let Some(first) = found.problems.first() {
        return Err(damaged(format!(
            "the store's check finds {} problem(s), first: {first}",
            found.problems.len()
        )));
    }
    Ok(())
}

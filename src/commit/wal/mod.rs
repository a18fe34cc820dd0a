//! The write-ahead log: command batches made durable with one append + fsync.
//!
//! redb commits every batch without fsync (`Durability::None`); the batch's
//! commands and its instant are appended here and synced before any caller is
//! answered. A checkpoint (a durable redb commit) makes the log redundant, and it
//! is emptied. On open, batches newer than the last durable batch id are replayed
//! through the same deterministic engine.
//!
//! Format (version 2): the file starts with [`HEADER`]; each record is a frame
//! `[magic u32 LE][len u32 LE][crc32 of len and body u32 LE][body]`, the body the
//! codec bytes of a [`Record`]. A log without the header is of version 1
//! (`[len][crc32 of body][body]`, no magic); it is read the same way and replaced
//! by a version-2 log at the checkpoint that follows its replay.
//!
//! A batch's frame is written before the batch is applied. When it fails to
//! apply, an abort record follows it: the same batch number and no commands
//! ([`abort_frame`]); the next batch takes that number again. Reading drops
//! an aborted batch with its abort record, so the records read have every
//! batch number once, in order. (A build before abort records replays an
//! aborted batch: a log is not meant to be opened by an older build.)
//!
//! Invariants:
//! - No caller is answered before its batch's record is synced.
//! - Reading never opens with less than was acknowledged, except what a crash can
//!   tear: a tail is cut only when no intact record follows it and it looks like an
//!   interrupted append (zeros, a frame whose first sector is zeros — write-back
//!   keeps an unsynced append's sectors in any order —, a header prefix, or a
//!   frame with a plausible header). Anything else — a record failing its checksum with intact records
//!   after it, an impossible length, foreign bytes — is damage: the log is left
//!   untouched and opening fails with [`StoreError::LogDamaged`] naming the file,
//!   the offset and how many intact records follow. Only [`salvage`], an explicit
//!   operator step, keeps a copy and drops what is damaged.
//! - Replay applies records in batch order and skips those already durable in
//!   redb and those aborted.

use super::Command;
use crate::clock::Millis;
use crate::codec;
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The smallest unit a disk writes whole: a write-back may keep any of an
/// unsynced append's sectors and lose the others.
const SECTOR: usize = 512;

/// One committed batch.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    pub batch: u64,
    pub now: Millis,
    pub commands: Vec<Command>,
}

impl Record {
    /// Whether this record aborts `previous` (the record before it).
    fn aborts(&self, previous: Option<&Record>) -> bool {
        self.commands.is_empty() && previous.is_some_and(|p| p.batch == self.batch)
    }
}

/// The first bytes of a version-2 log.
pub(crate) const HEADER: &[u8; 8] = b"PFWAL02\n";
/// The first bytes of every version-2 frame.
const MAGIC: [u8; 4] = *b"PFR2";
/// Bytes before a frame's body: magic, length, checksum.
const FRAME_HEAD: usize = 12;
/// Largest record accepted when reading (a larger length is damage).
const MAX_RECORD: u32 = 1 << 30;

/// How a log file is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No header; `[len][crc32 of body][body]`.
    V1,
    /// [`HEADER`], then `[magic][len][crc32 of len and body][body]`.
    V2,
}

impl Framing {
    fn head(self) -> usize {
        match self {
            Framing::V1 => 8,
            Framing::V2 => FRAME_HEAD,
        }
    }

    /// The record of an intact frame at `pos` and where it ends.
    fn frame_at(self, bytes: &[u8], pos: usize) -> Option<(Record, usize)> {
        let head = bytes.get(pos..pos + self.head())?;
        let u32_at =
            |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (len, crc, body_at) = match self {
            Framing::V1 => (u32_at(0), u32_at(4), pos + 8),
            Framing::V2 => {
                if head[..4] != MAGIC {
                    return None;
                }
                (u32_at(4), u32_at(8), pos + FRAME_HEAD)
            }
        };
        if len > MAX_RECORD {
            return None;
        }
        let end = body_at.checked_add(len as usize)?;
        let body = bytes.get(body_at..end)?;
        let sum = match self {
            Framing::V1 => crc32fast::hash(body),
            Framing::V2 => {
                let mut h = crc32fast::Hasher::new();
                h.update(&len.to_le_bytes());
                h.update(body);
                h.finalize()
            }
        };
        if sum != crc {
            return None;
        }
        codec::decode::<Record>(body).ok().map(|r| (r, end))
    }

    /// Whether the bytes from a bad frame at `pos` to the end of the file
    /// look like an append that a crash interrupted (nothing intact follows
    /// them): zeros; the frame's first sector never written (a disk's
    /// write-back may keep later sectors of an unsynced append without the
    /// first); or the start of a frame with a plausible header.
    fn looks_torn(self, rest: &[u8], pos: usize) -> bool {
        if rest.iter().all(|b| *b == 0) {
            return true;
        }
        let first_sector = (SECTOR - pos % SECTOR).min(rest.len());
        if rest[..first_sector].iter().all(|b| *b == 0) {
            return true;
        }
        match self {
            Framing::V1 => {
                rest.len() < 8
                    || u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) <= MAX_RECORD
            }
            Framing::V2 => {
                let n = rest.len().min(4);
                rest[..n] == MAGIC[..n]
                    && (rest.len() < 8
                        || u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) <= MAX_RECORD)
            }
        }
    }
}

/// What reading a log found.
#[derive(Debug)]
pub(crate) struct Scan {
    framing: Framing,
    /// Intact records before the first bad byte, in file order.
    pub records: Vec<Record>,
    /// Where the intact prefix ends.
    pub intact_until: u64,
    /// The file's length.
    pub size: u64,
    /// Intact records found after the first bad byte (damage when non-zero).
    pub after: Vec<Record>,
    /// Whether the bytes after the intact prefix are damage rather than a torn tail.
    pub damaged: bool,
    /// Whether the bytes after the intact prefix are all zeros: written
    /// ahead of the appends ([`Wal::reserve`]), or an append of which no
    /// byte reached the disk — neither is a torn record.
    pub zero_tail: bool,
}

impl Scan {
    /// Fails with [`StoreError::LogDamaged`] when the scan found damage.
    pub fn refuse_damaged(&self, path: &Path) -> Result<(), StoreError> {
        if !self.damaged {
            return Ok(());
        }
        Err(StoreError::LogDamaged {
            path: path.display().to_string(),
            offset: self.intact_until,
            size: self.size,
            intact_before: self.records.len(),
            intact_after: self.after.len(),
        })
    }

    /// Bytes after the intact records that are a torn record (cut at the
    /// next open for writing); a tail of zeros is none.
    pub fn torn_tail(&self) -> u64 {
        if self.zero_tail {
            0
        } else {
            self.size - self.intact_until
        }
    }

    pub(crate) fn read(bytes: &[u8]) -> Scan {
        let (framing, start) = if bytes.starts_with(HEADER) {
            (Framing::V2, HEADER.len())
        } else if HEADER.starts_with(bytes) {
            // empty, or a header whose write was interrupted
            (Framing::V2, bytes.len())
        } else {
            (Framing::V1, 0)
        };
        let mut records: Vec<Record> = Vec::new();
        let mut pos = start;
        while let Some((r, end)) = framing.frame_at(bytes, pos) {
            if r.aborts(records.last()) {
                records.pop();
            } else {
                records.push(r);
            }
            pos = end;
        }
        let mut after = Vec::new();
        if pos < bytes.len() {
            let mut q = pos + 1;
            while q < bytes.len() {
                match framing.frame_at(bytes, q) {
                    Some((r, end)) => {
                        after.push(r);
                        q = end;
                    }
                    None => q += 1,
                }
            }
        }
        let damaged =
            pos < bytes.len() && (!after.is_empty() || !framing.looks_torn(&bytes[pos..], pos));
        let zero_tail = pos < bytes.len() && !damaged && bytes[pos..].iter().all(|b| *b == 0);
        Scan {
            framing,
            records,
            intact_until: pos as u64,
            size: bytes.len() as u64,
            after,
            damaged,
            zero_tail,
        }
    }
}

/// An open log file positioned at its end.
pub(crate) struct Wal {
    file: Box<dyn crate::disk::LogFile>,
    size: u64,
    /// A version-1 log: readable, but appended to only after a [`Wal::reset`].
    legacy: bool,
    /// The file's path on the file system (`None` on the simulated disk,
    /// where a log is never rolled).
    path: Option<PathBuf>,
    /// Where the zeros written ahead of the appends end ([`Wal::reserve`]).
    zeroed_until: u64,
}

/// The most zeros written ahead of the log's appends at a time.
const RESERVE_MAX: u64 = 4 << 20;
/// The fewest (a file system block).
const RESERVE_MIN: u64 = 4096;

/// What a checkpoint does to the log once redb holds its batches durably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Empty it: no archive needs its records.
    Empty,
    /// Keep it growing: the segment the archive gets is not closed yet
    /// (replay at open skips what redb holds).
    Keep,
    /// Close it as a segment for the archive, named after the last batch it
    /// holds, and begin an empty log.
    Roll(u64),
}

/// The name a log closed after batch `last` has beside the log, until the
/// archive has it: `LOG.closed-LAST` (20 digits, so names sort by batch).
pub fn closed_segment(log: &Path, last: u64) -> PathBuf {
    let mut p = log.as_os_str().to_owned();
    p.push(format!(".closed-{last:020}"));
    PathBuf::from(p)
}

/// The closed segments beside `log` that the archive does not have yet,
/// oldest first.
pub fn closed_segments(log: &Path) -> std::io::Result<Vec<PathBuf>> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name()) else {
        return Ok(Vec::new());
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{}.closed-", name.to_string_lossy());
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|n| n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

impl Wal {
    /// The log that belongs to a database file.
    pub fn path_for(db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(".wal");
        PathBuf::from(p)
    }

    /// Reads a log without changing it (a missing file reads as empty).
    pub fn scan(path: &Path) -> Result<Scan, StoreError> {
        Ok(Scan::read(
            &crate::files::read_regular(path)?.unwrap_or_default(),
        ))
    }

    /// Opens (or creates) the log and returns its intact records. A torn tail is
    /// cut; damage refuses to open and leaves the file as it is.
    #[cfg(test)]
    pub fn open(path: &Path) -> Result<(Wal, Vec<Record>), StoreError> {
        Wal::open_scanned(path, None)
    }

    /// [`Wal::open`] reusing a scan read before the database was locked, as
    /// long as the file still has the length it had then (the log is read once
    /// at open, not twice).
    pub fn open_scanned(
        path: &Path,
        earlier: Option<Scan>,
    ) -> Result<(Wal, Vec<Record>), StoreError> {
        crate::files::regular(path)?;
        // a log whose name is not durable is lost with everything in it
        let file = crate::disk::create_durably(&crate::disk::FileSystem, path, || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| crate::files::named(path, e))
        })?;
        let len = file.metadata()?.len();
        let scan = match earlier {
            Some(scan) if scan.size == len => scan,
            _ => Scan::read(&crate::files::read_open(path, file.try_clone()?)?),
        };
        let (mut wal, records) = Wal::from_scan(Box::new(file), scan, path)?;
        wal.path = Some(path.to_path_buf());
        Ok((wal, records))
    }

    /// [`Wal::open`] on the simulated disk of the power-loss tests.
    #[cfg(test)]
    pub(crate) fn open_sim(
        disk: &crate::disk::sim::Disk,
        path: &Path,
    ) -> Result<(Wal, Vec<Record>), StoreError> {
        let name = path.to_string_lossy().to_string();
        crate::disk::create_durably(disk, path, || disk.create(&name))?;
        let bytes = disk.read(&name).unwrap_or_default();
        Wal::from_scan(Box::new(disk.log(&name)), Scan::read(&bytes), path)
    }

    /// The log in `file`, whose bytes `scan` read: a torn tail is cut, a log
    /// without its header gets one, damage refuses.
    pub(crate) fn from_scan(
        mut file: Box<dyn crate::disk::LogFile>,
        scan: Scan,
        path: &Path,
    ) -> Result<(Wal, Vec<Record>), StoreError> {
        scan.refuse_damaged(path)?;
        let mut pos = scan.intact_until;
        // a tail of zeros is kept: appends overwrite it
        let mut zeroed_until = if scan.zero_tail { scan.size } else { pos };
        if pos < scan.size && !scan.zero_tail {
            tracing::warn!(
                log = %path.display(),
                offset = pos,
                bytes = scan.size - pos,
                "cutting a torn record at the end of the write-ahead log: {} byte(s) from offset {pos}",
                scan.size - pos
            );
            file.set_len(pos)?;
            file.sync()?;
        }
        if scan.framing == Framing::V2 && pos < HEADER.len() as u64 {
            file.set_len(0)?;
            file.write_at(0, HEADER)?;
            file.sync()?;
            pos = HEADER.len() as u64;
            zeroed_until = pos;
        }
        Ok((
            Wal {
                file,
                size: pos,
                legacy: scan.framing == Framing::V1,
                path: None,
                zeroed_until,
            },
            scan.records,
        ))
    }

    /// Appends a record and syncs it to disk.
    #[cfg(test)]
    pub fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        self.append_with(record, &record.commands)
    }

    /// Appends frames made by [`frame`] and syncs them with one fsync.
    pub fn append_frames<'a>(
        &mut self,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), StoreError> {
        if self.legacy {
            return Err(StoreError::Aborted(
                "the write-ahead log of an older format was not checkpointed yet".into(),
            ));
        }
        let mut n = 0;
        for f in frames {
            self.reserve(self.size + n + f.len() as u64)?;
            self.file.write_at(self.size + n, f)?;
            n += f.len() as u64;
        }
        self.file.sync()?;
        self.size += n;
        Ok(())
    }

    /// Appends `record` carrying `commands` (borrowed, not copied) and syncs it.
    #[cfg(test)]
    pub fn append_with(&mut self, record: &Record, commands: &[Command]) -> Result<(), StoreError> {
        let f = frame(record.batch, record.now, commands)?;
        self.append_frames([f.as_slice()])
    }

    /// Writes zeros ahead of the appends when one would end past them, as many
    /// as the log holds already (at least [`RESERVE_MIN`], at most
    /// [`RESERVE_MAX`]): an append that overwrites blocks the file has is
    /// made durable by `fdatasync` without a change of the file's length or
    /// blocks to journal, so the file grows once per doubling instead of at
    /// every append. The zeros are synced with the frame that follows them;
    /// a tail of zeros reads as the end of the log.
    fn reserve(&mut self, end: u64) -> Result<(), StoreError> {
        if end <= self.zeroed_until {
            return Ok(());
        }
        let ahead = end.clamp(RESERVE_MIN, RESERVE_MAX);
        let until = (end + ahead).next_multiple_of(RESERVE_MIN);
        let zeros = vec![0; (until - self.zeroed_until) as usize];
        self.file.write_at(self.zeroed_until, &zeros)?;
        self.zeroed_until = until;
        Ok(())
    }

    /// What a checkpoint does to the log (see [`Fold`]); a rolled log's
    /// closed segment is returned. A version-1 log is emptied even when kept,
    /// so that it can be appended to.
    pub fn fold(&mut self, fold: Fold) -> Result<Option<PathBuf>, StoreError> {
        match fold {
            Fold::Empty => self.reset().map(|()| None),
            Fold::Keep if self.legacy => self.reset().map(|()| None),
            Fold::Keep => Ok(None),
            Fold::Roll(_) if self.size <= HEADER.len() as u64 && !self.legacy => Ok(None),
            Fold::Roll(last) => self.roll(last).map(Some),
        }
    }

    /// Closes the log as `LOG.closed-LAST` and begins an empty one: the new
    /// log is written and synced as `LOG.next` first, so that the name `LOG`
    /// is always either the old log or the new one; a crash between the two
    /// renames leaves no log, which opens as empty — every record of the
    /// closed one is durable in redb by then.
    fn roll(&mut self, last: u64) -> Result<PathBuf, StoreError> {
        let path = self.path.clone().ok_or_else(|| {
            StoreError::Aborted("a log on the simulated disk is not rolled".into())
        })?;
        let closed = closed_segment(&path, last);
        let mut next = path.as_os_str().to_owned();
        next.push(".next");
        let next = PathBuf::from(next);
        let named = |p: &Path| {
            let p = p.to_path_buf();
            move |e| StoreError::from(crate::files::named(&p, e))
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&next)
            .map_err(named(&next))?;
        file.write_all(HEADER).map_err(named(&next))?;
        file.sync_data().map_err(named(&next))?;
        // a closed segment is whole records: the zeros ahead are cut first
        self.file.set_len(self.size)?;
        self.zeroed_until = self.size;
        self.file.sync()?;
        std::fs::rename(&path, &closed).map_err(named(&closed))?;
        if let Err(e) = std::fs::rename(&next, &path) {
            // put the old log back: appends must not go to a closed segment
            std::fs::rename(&closed, &path).map_err(named(&path))?;
            return Err(named(&path)(e));
        }
        crate::disk::sync_dir(&path)?;
        self.file = Box::new(file);
        self.size = HEADER.len() as u64;
        self.zeroed_until = self.size;
        self.legacy = false;
        Ok(closed)
    }

    /// Empties the log after a checkpoint made its records redundant.
    pub fn reset(&mut self) -> Result<(), StoreError> {
        self.file.set_len(0)?;
        self.file.write_at(0, HEADER)?;
        self.file.sync()?;
        self.size = HEADER.len() as u64;
        self.zeroed_until = self.size;
        self.legacy = false;
        Ok(())
    }

    #[cfg(test)]
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// Encodes a batch as one log frame: `[magic][len][crc32 of len and body][body]`.
pub(crate) fn frame(batch: u64, now: Millis, commands: &[Command]) -> Result<Vec<u8>, StoreError> {
    frame_of_parts(batch, now, commands, &vec![None; commands.len()])
}

/// The frame of the abort record of batch `batch` (see the module's doc):
/// it follows that batch's frame when the batch failed to apply.
pub(crate) fn abort_frame(batch: u64, now: Millis) -> Result<Vec<u8>, StoreError> {
    frame(batch, now, &[])
}

/// A command's bytes inside a frame ([`frame_of_parts`]): callers encode
/// their command before they hand it to the writer, so the writer thread
/// only copies it.
pub(crate) fn encode_command(command: &Command) -> Result<Vec<u8>, StoreError> {
    Ok(codec::encode_part(command)?)
}

/// [`frame`] of `commands`, each already encoded by [`encode_command`] where
/// `encoded` has it (the rest are encoded here): the same bytes.
pub(crate) fn frame_of_parts(
    batch: u64,
    now: Millis,
    commands: &[Command],
    encoded: &[Option<Vec<u8>>],
) -> Result<Vec<u8>, StoreError> {
    let mut parts = Vec::with_capacity(commands.len());
    for (i, command) in commands.iter().enumerate() {
        parts.push(match encoded.get(i) {
            Some(Some(part)) => std::borrow::Cow::Borrowed(part.as_slice()),
            _ => std::borrow::Cow::Owned(encode_command(command)?),
        });
    }
    // the fields of `Record` before its commands
    let body = codec::encode_with_parts(&(batch, now), &parts)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|l| *l <= MAX_RECORD)
        .ok_or_else(|| {
            StoreError::Aborted(format!(
                "a batch of {} bytes is too large for the log",
                body.len()
            ))
        })?;
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&body);
    let mut frame = Vec::with_capacity(body.len() + FRAME_HEAD);
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&h.finalize().to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// What the write-ahead log holds, read without changing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    /// The log file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub size: u64,
    /// Intact records before the first bad byte.
    pub intact_records: usize,
    /// Where the intact records end; bytes after it are zeros written ahead
    /// of the appends (`reserved`), a torn tail (cut at the next open) or,
    /// when `damaged`, damage.
    pub intact_until: u64,
    /// Zeros after the intact records, written ahead of the appends (a log
    /// grows once per doubling, not at every append): no torn record.
    pub reserved: u64,
    /// Whether opening refuses: bytes that are not a torn tail.
    pub damaged: bool,
    /// Intact records found after the damage.
    pub intact_after: usize,
}

/// What salvaging a damaged log (`Postfach::recover_damaged_log`) kept and dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvage {
    /// The untouched copy of the damaged log.
    pub backup: PathBuf,
    /// Intact records kept (they are replayed at the next open).
    pub kept: usize,
    /// Where the damage began (byte offset in the log).
    pub damaged_at: u64,
    /// Batch numbers missing between the kept records: their commands are lost.
    pub missing_batches: Vec<u64>,
}

/// The operator's explicit repair of a damaged log: copies it to
/// `LOG.damaged-<millis>`, then rewrites it with every intact record (before and
/// after the damage) so that the next open replays them. Returns `None` when the
/// log is not damaged (nothing is changed then).
pub(crate) fn salvage(path: &Path, now: Millis) -> Result<Option<Salvage>, StoreError> {
    let scan = Wal::scan(path)?;
    if !scan.damaged {
        return Ok(None);
    }
    let mut backup = path.as_os_str().to_owned();
    backup.push(format!(".damaged-{now}"));
    let backup = PathBuf::from(backup);
    std::fs::copy(path, &backup)?;
    File::open(&backup)?.sync_all()?;
    let mut records: Vec<Record> = scan.records.into_iter().chain(scan.after).collect();
    records.sort_by_key(|r| r.batch);
    records.dedup_by_key(|r| r.batch);
    let mut out = HEADER.to_vec();
    for r in &records {
        let f = frame(r.batch, r.now, &r.commands)?;
        out.extend_from_slice(&f);
    }
    let missing_batches = records
        .windows(2)
        .flat_map(|w| (w[0].batch + 1)..w[1].batch)
        .collect();
    let tmp = path.with_extension("wal.salvage");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(&out)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    // the rename and the backup's name are durable only with their directory
    crate::disk::sync_dir(path)?;
    tracing::warn!(log = %path.display(), backup = %backup.display(), kept = records.len(), "salvaged a damaged write-ahead log");
    Ok(Some(Salvage {
        backup,
        kept: records.len(),
        damaged_at: scan.intact_until,
        missing_batches,
    }))
}

#[cfg(test)]
mod tests;

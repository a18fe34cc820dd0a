//! The write-ahead log: command batches made durable with one append + fsync.
//!
//! redb commits every batch without fsync (`Durability::None`); the batch's
//! commands and its instant are appended here and synced before any caller is
//! answered. A checkpoint (a durable redb commit) makes the log redundant, and it
//! is emptied. On open, batches newer than the last durable batch id are replayed
//! through the same deterministic engine.
//!
//! Invariants:
//! - No caller is answered before its batch's record is synced.
//! - A record is `[len u32 LE][crc32 u32 LE][codec bytes]`; reading stops at the
//!   first short or corrupt record (a torn tail from a crash), which is cut off.
//! - Replay applies records in batch order and skips those already durable in redb.

use crate::clock::Millis;
use crate::codec;
use crate::runtime::Command;
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// One committed batch.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Record {
    pub batch: u64,
    pub now: Millis,
    pub commands: Vec<Command>,
}

/// The borrowed form of [`Record`], serialised identically.
#[derive(Serialize)]
struct RecordRef<'a> {
    batch: u64,
    now: Millis,
    commands: &'a [Command],
}

/// An open log file positioned at its end.
pub(crate) struct Wal {
    file: File,
    size: u64,
}

/// Largest record accepted when reading (guards against a corrupt length).
const MAX_RECORD: u32 = 1 << 30;

impl Wal {
    /// The log that belongs to a database file.
    pub fn path_for(db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(".wal");
        PathBuf::from(p)
    }

    /// Opens (or creates) the log and returns its intact records.
    pub fn open(path: &Path) -> Result<(Wal, Vec<Record>), StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut records = Vec::new();
        let mut pos = 0usize;
        while bytes.len() - pos >= 8 {
            let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap_or_default());
            let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap_or_default());
            let end = pos + 8 + len as usize;
            if len > MAX_RECORD || end > bytes.len() || crc32fast::hash(&bytes[pos + 8..end]) != crc
            {
                break;
            }
            match codec::decode::<Record>(&bytes[pos + 8..end]) {
                Ok(r) => records.push(r),
                Err(_) => break,
            }
            pos = end;
        }
        if pos < bytes.len() {
            tracing::warn!(path = %path.display(), cut = bytes.len() - pos, "cutting a torn write-ahead log tail");
            file.set_len(pos as u64)?;
            file.sync_data()?;
        }
        file.seek(SeekFrom::Start(pos as u64))?;
        Ok((
            Wal {
                file,
                size: pos as u64,
            },
            records,
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
        let mut n = 0;
        for f in frames {
            self.file.write_all(f)?;
            n += f.len() as u64;
        }
        self.file.sync_data()?;
        self.size += n;
        Ok(())
    }

    /// Appends `record` carrying `commands` (borrowed, not copied) and syncs it.
    #[cfg(test)]
    pub fn append_with(&mut self, record: &Record, commands: &[Command]) -> Result<(), StoreError> {
        let f = frame(record.batch, record.now, commands)?;
        self.append_frames([f.as_slice()])
    }

    /// Empties the log after a checkpoint made its records redundant.
    pub fn reset(&mut self) -> Result<(), StoreError> {
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.sync_all()?;
        self.size = 0;
        Ok(())
    }

    #[cfg(test)]
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// Encodes a batch as one log frame: `[len][crc32][record]`.
pub(crate) fn frame(batch: u64, now: Millis, commands: &[Command]) -> Result<Vec<u8>, StoreError> {
    let body = codec::encode(&RecordRef {
        batch,
        now,
        commands,
    })?;
    let mut frame = Vec::with_capacity(body.len() + 8);
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_tail_is_cut_and_intact_records_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.wal");
        {
            let (mut w, recs) = Wal::open(&path).unwrap();
            assert!(recs.is_empty());
            for b in 1..=3 {
                w.append(&Record {
                    batch: b,
                    now: 10 * b,
                    commands: vec![Command::Tick],
                })
                .unwrap();
            }
        }
        // a crash in the middle of the fourth append
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[200, 0, 0, 0, 1, 2, 3, 4, 9, 9]).unwrap();
        drop(f);
        let (mut w, recs) = Wal::open(&path).unwrap();
        assert_eq!(
            recs.iter().map(|r| (r.batch, r.now)).collect::<Vec<_>>(),
            vec![(1, 10), (2, 20), (3, 30)]
        );
        w.append(&Record {
            batch: 4,
            now: 40,
            commands: vec![],
        })
        .unwrap();
        drop(w);
        let (mut w, recs) = Wal::open(&path).unwrap();
        assert_eq!(recs.len(), 4, "appends after a cut tail are readable");
        w.reset().unwrap();
        assert_eq!(w.size(), 0);
        drop(w);
        assert!(Wal::open(&path).unwrap().1.is_empty());
    }

    #[test]
    fn a_flipped_bit_ends_the_log_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("y.wal");
        {
            let (mut w, _) = Wal::open(&path).unwrap();
            w.append(&Record {
                batch: 1,
                now: 1,
                commands: vec![Command::Tick],
            })
            .unwrap();
            w.append(&Record {
                batch: 2,
                now: 2,
                commands: vec![Command::Tick],
            })
            .unwrap();
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let (_, recs) = Wal::open(&path).unwrap();
        assert_eq!(recs.len(), 1);
    }
}

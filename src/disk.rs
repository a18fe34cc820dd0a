//! Where the database file and its write-ahead log are kept, and what makes
//! them durable: the file system here, and in the power-loss tests a
//! simulated disk that keeps only what was synced ([`sim`]).
//!
//! Invariant: the commit path reaches the log only through [`LogFile`], and a
//! file it creates (the log, the database) gets its directory entry synced
//! ([`sync_dir`]) before anything in it is relied upon — a synced file whose
//! name was never made durable is lost with the power just the same.

use std::io;
use std::path::Path;

/// The write-ahead log's file as the log writes it.
pub(crate) trait LogFile: Send {
    /// Writes `bytes` at `offset`.
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// Cuts or extends the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// Makes what was written durable (data and the length that reads it).
    fn sync(&mut self) -> io::Result<()>;
}

impl LogFile for std::fs::File {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, bytes, offset)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        std::fs::File::set_len(self, len)
    }

    fn sync(&mut self) -> io::Result<()> {
        // fdatasync writes the length too when it changed, which the log needs
        self.sync_data()
    }
}

/// What the files live on: whether one exists, and how its directory entry
/// is made durable.
pub(crate) trait Storage {
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Makes the directory entry of `path` durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
}

/// The file system.
pub(crate) struct FileSystem;

impl Storage for FileSystem {
    fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(crate::files::regular(path)?.is_some())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        sync_dir(path)
    }
}

/// Opens `path` with `open`, which creates it when missing; a file it
/// created gets its directory entry synced before it is handed out.
pub(crate) fn create_durably<T, E: From<io::Error>>(
    on: &dyn Storage,
    path: &Path,
    open: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let existed = on.exists(path)?;
    let opened = open()?;
    if !existed {
        on.sync_dir(path)?;
    }
    Ok(opened)
}

/// Lowers the calling thread to the lowest CPU priority (nice 19, Linux:
/// per thread) for work that may take only what others leave; elsewhere,
/// or when refused, it runs as it is.
pub(crate) fn lowest_cpu_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid has no preconditions; setpriority on the own thread id
    // changes only this thread's nice value, and a refusal is harmless
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

/// Makes the directory entry of `file` durable: after the file was created
/// or renamed, a crash could otherwise lose its name with everything in it.
pub(crate) fn sync_dir(file: &Path) -> io::Result<()> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| crate::files::named(dir, e))
}

/// A simulated disk for power-loss tests, in the manner of SQLite's crash-test
/// VFS: every file remembers what was synced; a power cut at a chosen write
/// or sync makes every later operation fail, and [`sim::Disk::after_power_cut`]
/// gives the files as they would be found afterwards — what was synced, plus
/// optionally a prefix of the unsynced writes with the last one torn at a
/// sector boundary. A file whose directory entry was never synced is gone.
#[cfg(test)]
pub(crate) mod sim {
    use std::collections::BTreeMap;
    use std::io;
    use std::sync::{Arc, Mutex};

    /// Sector size a torn write is cut at.
    pub const SECTOR: usize = 512;

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, Vec<u8>),
        SetLen(u64),
    }

    #[derive(Debug, Clone, Default)]
    struct File {
        /// What reads see now.
        now: Vec<u8>,
        /// What survives a power cut.
        synced: Vec<u8>,
        /// Writes since the last sync, in order.
        pending: Vec<Op>,
        /// Whether the file's name survives a power cut.
        entry_synced: bool,
    }

    fn apply(bytes: &mut Vec<u8>, op: &Op) {
        match op {
            Op::Write(at, data) => {
                let end = *at as usize + data.len();
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[*at as usize..end].copy_from_slice(data);
            }
            Op::SetLen(len) => bytes.resize(*len as usize, 0),
        }
    }

    #[derive(Debug, Default)]
    struct State {
        files: BTreeMap<String, File>,
        /// Operations (writes, length changes, syncs) done so far.
        ops: u64,
        /// The operation at which the power goes.
        cut_at: Option<u64>,
        /// Syncs of a file that were skipped on purpose (a test that shows
        /// what a missing sync would cost): file name → how many to skip.
        skip_syncs: BTreeMap<String, u64>,
        /// Whether directory syncs are skipped on purpose.
        skip_dir_syncs: bool,
    }

    /// The simulated disk; clones share it.
    #[derive(Debug, Clone, Default)]
    pub struct Disk {
        state: Arc<Mutex<State>>,
    }

    fn cut() -> io::Error {
        io::Error::other("power cut (simulated)")
    }

    impl Disk {
        /// A disk whose power goes at operation `at` (never when `None`).
        pub fn new(cut_at: Option<u64>) -> Self {
            let d = Disk::default();
            d.state.lock().unwrap().cut_at = cut_at;
            d
        }

        /// A disk holding `files` as found after a power cut (all synced).
        pub fn from_files(files: BTreeMap<String, Vec<u8>>, cut_at: Option<u64>) -> Self {
            let d = Disk::new(cut_at);
            let mut st = d.state.lock().unwrap();
            for (name, bytes) in files {
                st.files.insert(
                    name,
                    File {
                        now: bytes.clone(),
                        synced: bytes,
                        pending: Vec::new(),
                        entry_synced: true,
                    },
                );
            }
            drop(st);
            d
        }

        /// Operations done so far.
        pub fn ops(&self) -> u64 {
            self.state.lock().unwrap().ops
        }

        /// Skips the syncs of `file` from now on (to show what one costs).
        pub fn skip_syncs_of(&self, file: &str) {
            self.state
                .lock()
                .unwrap()
                .skip_syncs
                .insert(file.to_string(), u64::MAX);
        }

        /// Skips every directory sync from now on.
        pub fn skip_dir_syncs(&self) {
            self.state.lock().unwrap().skip_dir_syncs = true;
        }

        /// Counts one operation; fails once the power is gone.
        fn tick(st: &mut State) -> io::Result<()> {
            if st.cut_at.is_some_and(|c| st.ops >= c) {
                return Err(cut());
            }
            st.ops += 1;
            Ok(())
        }

        fn with<T>(&self, name: &str, f: impl FnOnce(&mut File) -> T) -> io::Result<T> {
            let mut st = self.state.lock().unwrap();
            Self::tick(&mut st)?;
            let file = st.files.entry(name.to_string()).or_default();
            Ok(f(file))
        }

        fn write(&self, name: &str, op: Op) -> io::Result<()> {
            self.with(name, |f| {
                apply(&mut f.now, &op);
                f.pending.push(op);
            })
        }

        fn sync(&self, name: &str) -> io::Result<()> {
            let mut st = self.state.lock().unwrap();
            Self::tick(&mut st)?;
            if let Some(n) = st.skip_syncs.get_mut(name)
                && *n > 0
            {
                *n -= 1;
                return Ok(());
            }
            let file = st.files.entry(name.to_string()).or_default();
            file.synced = file.now.clone();
            file.pending.clear();
            Ok(())
        }

        /// Makes every file's name durable (a directory sync).
        pub fn sync_dir(&self) -> io::Result<()> {
            let mut st = self.state.lock().unwrap();
            Self::tick(&mut st)?;
            if st.skip_dir_syncs {
                return Ok(());
            }
            for f in st.files.values_mut() {
                f.entry_synced = true;
            }
            Ok(())
        }

        /// Whether `name` exists now, and its bytes.
        pub fn read(&self, name: &str) -> Option<Vec<u8>> {
            self.state
                .lock()
                .unwrap()
                .files
                .get(name)
                .map(|f| f.now.clone())
        }

        /// Renames every file under `from/` to the same name under `to/`:
        /// the new names survive a power cut only after a directory sync,
        /// and the old ones are gone at once (stricter than a file system,
        /// where one of the two names survives).
        pub fn rename_dir(&self, from: &str, to: &str) -> io::Result<()> {
            let mut st = self.state.lock().unwrap();
            Self::tick(&mut st)?;
            let (from, to) = (format!("{from}/"), format!("{to}/"));
            let moved: Vec<String> = st
                .files
                .keys()
                .filter(|n| n.starts_with(&from))
                .cloned()
                .collect();
            for name in moved {
                if let Some(mut f) = st.files.remove(&name) {
                    f.entry_synced = false;
                    st.files.insert(format!("{to}{}", &name[from.len()..]), f);
                }
            }
            Ok(())
        }

        /// Removes every file under `dir/`.
        pub fn remove_dir(&self, dir: &str) -> io::Result<()> {
            let mut st = self.state.lock().unwrap();
            Self::tick(&mut st)?;
            let prefix = format!("{dir}/");
            st.files.retain(|n, _| !n.starts_with(&prefix));
            Ok(())
        }

        /// Whether a file named `name` or under `name/` exists now.
        pub fn has(&self, name: &str) -> bool {
            let st = self.state.lock().unwrap();
            let prefix = format!("{name}/");
            st.files.contains_key(name) || st.files.keys().any(|n| n.starts_with(&prefix))
        }

        /// Creates `name` (empty) unless it exists; says whether it did.
        pub fn create(&self, name: &str) -> io::Result<bool> {
            let mut st = self.state.lock().unwrap();
            if st.files.contains_key(name) {
                return Ok(false);
            }
            Self::tick(&mut st)?;
            st.files.insert(name.to_string(), File::default());
            Ok(true)
        }

        /// The files as found after the power cut: each file whose name was
        /// synced, with what was synced and — with `keep` — the first
        /// `keep[name]` unsynced writes of it, the last of them torn after
        /// `torn_sectors` sectors.
        pub fn after_power_cut(
            &self,
            keep: &BTreeMap<String, (usize, usize)>,
        ) -> BTreeMap<String, Vec<u8>> {
            let st = self.state.lock().unwrap();
            let mut out = BTreeMap::new();
            for (name, f) in &st.files {
                if !f.entry_synced {
                    continue;
                }
                let mut bytes = f.synced.clone();
                let (n, torn_sectors) = keep.get(name).copied().unwrap_or((0, 0));
                let n = n.min(f.pending.len());
                for (i, op) in f.pending.iter().take(n).enumerate() {
                    match op {
                        Op::Write(at, data) if i + 1 == n => {
                            let cut = (torn_sectors * SECTOR).min(data.len());
                            apply(&mut bytes, &Op::Write(*at, data[..cut].to_vec()));
                        }
                        other => apply(&mut bytes, other),
                    }
                }
                out.insert(name.clone(), bytes);
            }
            out
        }

        /// The files as found after a power cut where the disk wrote back
        /// what was not synced in any order: each file whose name was
        /// synced, with what was synced and, of every unsynced write, each
        /// of its sectors kept or lost at random (`seed` draws which; a
        /// length change is kept or lost whole) — a later write may
        /// survive where an earlier one did not.
        pub fn after_power_cut_scattered(&self, seed: u64) -> BTreeMap<String, Vec<u8>> {
            let st = self.state.lock().unwrap();
            let mut x = seed | 1;
            let mut coin = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x & 1 == 1
            };
            let mut out = BTreeMap::new();
            for (name, f) in &st.files {
                if !f.entry_synced {
                    continue;
                }
                let mut bytes = f.synced.clone();
                for op in &f.pending {
                    match op {
                        Op::Write(at, data) => {
                            // sector boundaries are absolute offsets
                            let mut from = 0usize;
                            while from < data.len() {
                                let abs = *at as usize + from;
                                let to = (from + SECTOR - abs % SECTOR).min(data.len());
                                if coin() {
                                    apply(
                                        &mut bytes,
                                        &Op::Write(abs as u64, data[from..to].to_vec()),
                                    );
                                }
                                from = to;
                            }
                        }
                        Op::SetLen(_) => {
                            if coin() {
                                apply(&mut bytes, op);
                            }
                        }
                    }
                }
                out.insert(name.clone(), bytes);
            }
            out
        }

        /// How many unsynced writes each file has.
        pub fn pending(&self) -> BTreeMap<String, usize> {
            self.state
                .lock()
                .unwrap()
                .files
                .iter()
                .map(|(n, f)| (n.clone(), f.pending.len()))
                .collect()
        }

        /// The log file `name` on this disk.
        pub fn log(&self, name: &str) -> LogOn {
            LogOn {
                disk: self.clone(),
                name: name.to_string(),
            }
        }

        /// Writes `bytes` at `offset` of `name` (unsynced until [`Disk::sync_file`]).
        pub fn write_at(&self, name: &str, offset: u64, bytes: &[u8]) -> io::Result<()> {
            self.write(name, Op::Write(offset, bytes.to_vec()))
        }

        /// Cuts or extends `name` to `len` bytes (unsynced).
        pub fn set_len(&self, name: &str, len: u64) -> io::Result<()> {
            self.write(name, Op::SetLen(len))
        }

        /// Makes what was written to `name` durable.
        pub fn sync_file(&self, name: &str) -> io::Result<()> {
            self.sync(name)
        }

        /// Reads `out.len()` bytes of `name` at `offset`.
        pub fn read_at(&self, name: &str, offset: u64, out: &mut [u8]) -> io::Result<()> {
            let st = self.state.lock().unwrap();
            let now = st.files.get(name).map_or(&[][..], |f| &f.now[..]);
            let end = offset as usize + out.len();
            if end > now.len() {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
            }
            out.copy_from_slice(&now[offset as usize..end]);
            Ok(())
        }

        /// The length of `name` now.
        pub fn len_of(&self, name: &str) -> u64 {
            self.read(name).map_or(0, |b| b.len() as u64)
        }
    }

    impl super::Storage for Disk {
        fn exists(&self, path: &std::path::Path) -> io::Result<bool> {
            Ok(self.read(&path.to_string_lossy()).is_some())
        }

        fn sync_dir(&self, _path: &std::path::Path) -> io::Result<()> {
            Disk::sync_dir(self)
        }
    }

    /// A log file on the simulated disk.
    pub struct LogOn {
        disk: Disk,
        name: String,
    }

    impl super::LogFile for LogOn {
        fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
            self.disk
                .write(&self.name, Op::Write(offset, bytes.to_vec()))
        }

        fn set_len(&mut self, len: u64) -> io::Result<()> {
            self.disk.write(&self.name, Op::SetLen(len))
        }

        fn sync(&mut self) -> io::Result<()> {
            self.disk.sync(&self.name)
        }
    }
}

//! The server's backups: taken when asked (`POST /backups`) and on a
//! schedule (`[backup] every`), each into `[backup] to`, the partition's
//! oldest beyond `[backup] keep` removed after a new one; the log's closed
//! segments shipped into `[backup] archive`; and when the last good backup
//! was taken, for `/metrics`.
//!
//! Invariant: the server writes backups only into its configured directory;
//! a failed backup is counted and logged, never retried in a loop, and
//! removes nothing.

use crate::backup::{BackupError, Manifest};
use crate::config::BackupConfig;
use crate::runtime::Postfach;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where backups go, how many are kept, and how the last ones went.
#[derive(Debug, Default)]
pub struct Backups {
    dir: Option<PathBuf>,
    keep: Option<usize>,
    /// When the newest good backup of this partition was taken (Unix
    /// seconds), from the directory at start and from each one taken.
    last_good: Mutex<Option<f64>>,
    failed: AtomicU64,
}

impl Backups {
    /// The server's backups as configured; the newest good backup of
    /// `partition` already in the directory counts as the last one.
    pub fn new(config: &BackupConfig, partition: u32) -> Self {
        let last = config.to.as_ref().and_then(|dir| {
            let listed = crate::backup::list(dir).ok()?;
            listed
                .into_iter()
                .filter_map(|(_, m)| m.ok())
                .filter(|m| m.partition == partition)
                .filter_map(|m| taken_secs(&m))
                .reduce(f64::max)
        });
        Backups {
            dir: config.to.clone(),
            keep: config.keep,
            last_good: Mutex::new(last),
            failed: AtomicU64::new(0),
        }
    }

    /// Where backups are written, if anywhere.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// Takes a backup into the directory (as the partition's member of the
    /// backup set `set`, when one is given) and removes what `keep` no
    /// longer keeps; `None` without a directory.
    pub async fn take(
        &self,
        pf: &Postfach,
        set: Option<String>,
    ) -> Option<Result<Manifest, BackupError>> {
        let dir = self.dir.as_ref()?;
        let taken = pf.backup_in_set(dir, set).await;
        match &taken {
            Ok(m) => {
                if let (Ok(mut last), Some(at)) = (self.last_good.lock(), taken_secs(m)) {
                    *last = Some(last.map_or(at, |l| l.max(at)));
                }
                if let Some(keep) = self.keep {
                    match crate::backup::prune(dir, m.partition, keep) {
                        Ok(removed) if !removed.is_empty() => {
                            tracing::info!(?removed, keep, "older backups removed")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "older backups could not be removed"),
                    }
                }
                tracing::info!(id = %m.id, batch = m.batch, "backup taken");
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, dir = %dir.display(), "backup failed");
            }
        }
        Some(taken)
    }

    /// When the newest good backup was taken (Unix seconds), if one is known.
    pub fn last_good(&self) -> Option<f64> {
        self.last_good.lock().ok().and_then(|l| *l)
    }

    /// When the newest good backup was taken (Unix milliseconds), if one is
    /// known.
    pub fn last_good_ms(&self) -> Option<crate::clock::Millis> {
        self.last_good()
            .map(|s| (s * 1000.0).round() as crate::clock::Millis)
    }

    /// Backups that failed since the server started.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// A manifest's instant as Unix seconds.
fn taken_secs(m: &Manifest) -> Option<f64> {
    crate::model::iso::instant(&m.taken_at)
        .ok()
        .map(|ms| ms as f64 / 1000.0)
}

/// Ships the log's closed segments into the archive at start and every 5 s
/// until the server stops; a failure is counted and logged, and the
/// segments stay beside the log for the next attempt.
pub fn spawn_archiver(
    backups: std::sync::Arc<Backups>,
    log: PathBuf,
    archive: PathBuf,
    partition: u32,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            let (log, archive) = (log.clone(), archive.clone());
            let shipped = tokio::task::spawn_blocking(move || {
                crate::backup::archive::ship(&log, &archive, partition)
            })
            .await;
            match shipped {
                Ok(Ok(names)) => {
                    if !names.is_empty() {
                        tracing::debug!(segments = ?names, "log segments archived");
                    }
                    failing = false;
                }
                Ok(Err(e)) => {
                    backups.failed.fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        tracing::error!(error = %e, "archiving the log failed; its segments wait beside it");
                    }
                    failing = true;
                }
                Err(e) => tracing::error!(error = %e, "the archiver stopped"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    })
}

/// Takes a backup every `every_ms` until the server stops (the task is
/// aborted with it).
pub fn spawn_schedule(
    backups: std::sync::Arc<Backups>,
    pf: Postfach,
    every_ms: u64,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = std::time::Duration::from_millis(every_ms);
        loop {
            tokio::time::sleep(every).await;
            let _ = backups.take(&pf, None).await;
        }
    })
}

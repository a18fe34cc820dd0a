//! The server's backups: taken when asked (`POST /backups`) and on a
//! schedule (`[backup] every`), each into `[backup] to`, the partition's
//! oldest beyond `[backup] keep` removed after a new one; the log's closed
//! segments shipped into `[backup] archive`; and when the last good backup
//! was taken, for `/metrics`.
//!
//! Invariant: the server writes backups only where it is configured to;
//! a failed backup is counted and logged, never retried in a loop, and
//! removes nothing.

use super::shelf::Shelf;
use crate::backup::{BackupError, Manifest, Place};
use crate::config::{BackupConfig, StorageConfig};
use crate::runtime::Postfach;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where backups go, how many are kept, and how the last ones went.
#[derive(Debug, Default)]
pub struct Backups {
    shelf: Option<Shelf>,
    archive: Option<std::sync::Arc<Shelf>>,
    keep: Option<usize>,
    /// When the newest good backup of this partition was taken (Unix
    /// seconds), from the directory at start and from each one taken.
    last_good: Mutex<Option<f64>>,
    failed: AtomicU64,
}

/// A place of the configuration (checked when it was read).
fn place(p: &std::path::Path) -> Option<Place> {
    Place::parse(&p.to_string_lossy()).ok()
}

impl Backups {
    /// The server's backups as configured; the newest good backup of
    /// `partition` already in the directory counts as the last one (a
    /// bucket is not listed at start).
    pub fn new(config: &BackupConfig, storage: &StorageConfig, partition: u32) -> Self {
        let last = match config.to.as_deref().and_then(place) {
            Some(Place::Dir(dir)) => crate::backup::list(&dir).ok().and_then(|listed| {
                listed
                    .into_iter()
                    .filter_map(|(_, m)| m.ok())
                    .filter(|m| m.partition == partition)
                    .filter_map(|m| taken_secs(&m))
                    .reduce(f64::max)
            }),
            _ => None,
        };
        let shelf = |p: &std::path::Path| Some(Shelf::new(place(p)?, storage.clone()));
        Backups {
            shelf: config.to.as_deref().and_then(shelf),
            archive: config
                .archive
                .as_deref()
                .and_then(shelf)
                .map(std::sync::Arc::new),
            keep: config.keep,
            last_good: Mutex::new(last),
            failed: AtomicU64::new(0),
        }
    }

    /// The log archive, if one is configured.
    pub fn archive(&self) -> Option<std::sync::Arc<Shelf>> {
        self.archive.clone()
    }

    /// Takes a backup into the place (as the partition's member of the
    /// backup set `set`, when one is given) and removes what `keep` no
    /// longer keeps; returns its manifest and where it is; `None` without a
    /// place.
    pub async fn take(
        &self,
        pf: &Postfach,
        set: Option<String>,
    ) -> Option<Result<(Manifest, String), BackupError>> {
        let shelf = self.shelf.as_ref()?;
        let taken = shelf.take(pf, set).await;
        match &taken {
            Ok((m, at)) => {
                if let (Ok(mut last), Some(at)) = (self.last_good.lock(), taken_secs(m)) {
                    *last = Some(last.map_or(at, |l| l.max(at)));
                }
                if let Some(keep) = self.keep {
                    match shelf.prune(m.partition, keep).await {
                        Ok(removed) if !removed.is_empty() => {
                            tracing::info!(?removed, keep, "older backups removed")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "older backups could not be removed"),
                    }
                }
                tracing::info!(id = %m.id, batch = m.batch, at = %at, "backup taken");
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, to = %shelf.place().describe(), "backup failed");
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
    partition: u32,
) -> Option<tokio::task::JoinHandle<()>> {
    let archive = backups.archive()?;
    Some(tokio::spawn(async move {
        let mut failing = false;
        loop {
            match archive.ship(&log, partition).await {
                Ok(names) => {
                    if !names.is_empty() {
                        tracing::debug!(segments = ?names, "log segments archived");
                    }
                    failing = false;
                }
                Err(e) => {
                    backups.failed.fetch_add(1, Ordering::Relaxed);
                    if !failing {
                        tracing::error!(error = %e, "archiving the log failed; its segments wait beside it");
                    }
                    failing = true;
                }
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }))
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

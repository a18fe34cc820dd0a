//! Where backups and the log archive are kept, for the server and the
//! command line alike: a directory, or Cloud Storage (`gs://BUCKET/PREFIX`,
//! with the `pubsub` feature) through a staging directory beside the
//! database — a backup is written there and uploaded, a restore downloads
//! there and restores with every check of a local one.
//!
//! Invariant: a staging directory is removed after its upload or restore,
//! whether it succeeded or not; a build without Cloud Storage refuses a
//! `gs://` place naming the feature, never writes it as a directory name.

use crate::backup::{self, BackupError, Listed, Manifest, Place, Restored};
use crate::clock::Millis;
use crate::config::StorageConfig;
use crate::runtime::Postfach;
use std::path::{Path, PathBuf};

/// A place and, for Cloud Storage, its client (connected on first use).
#[derive(Debug)]
pub struct Shelf {
    place: Place,
    #[cfg_attr(not(feature = "pubsub"), allow(dead_code))]
    storage: StorageConfig,
    #[cfg(feature = "pubsub")]
    bucket: tokio::sync::OnceCell<crate::pubsub::backups::Bucket>,
}

/// The staging directory beside `file` for `what`, removed when dropped.
struct Staging(PathBuf);

impl Staging {
    fn beside(file: &Path, what: &str) -> Result<Staging, BackupError> {
        let dir = PathBuf::from(format!("{}.{what}-staging", file.display()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|source| BackupError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(not(feature = "pubsub"))]
fn no_gcs(place: &Place) -> BackupError {
    BackupError::Remote {
        place: place.describe(),
        reason: "this postfach is built without Cloud Storage (the `pubsub` feature)".into(),
    }
}

impl Shelf {
    /// The place, with the `[storage]` settings for Cloud Storage.
    pub fn new(place: Place, storage: StorageConfig) -> Self {
        Self {
            place,
            storage,
            #[cfg(feature = "pubsub")]
            bucket: tokio::sync::OnceCell::new(),
        }
    }

    /// The place as given.
    pub fn place(&self) -> &Place {
        &self.place
    }

    #[cfg(feature = "pubsub")]
    async fn bucket(&self) -> Result<&crate::pubsub::backups::Bucket, BackupError> {
        self.bucket
            .get_or_try_init(|| crate::pubsub::backups::Bucket::connect(&self.storage))
            .await
    }

    /// Takes a backup of `pf` (as the partition's member of set `set`)
    /// into the place; returns its manifest and where it is.
    pub async fn take(
        &self,
        pf: &Postfach,
        set: Option<String>,
    ) -> Result<(Manifest, String), BackupError> {
        match &self.place {
            Place::Dir(dir) => {
                let m = pf.backup_in_set(dir, set).await?;
                let at = dir.join(&m.id).display().to_string();
                Ok((m, at))
            }
            #[cfg(feature = "pubsub")]
            Place::Gcs { bucket, prefix } => {
                let staging = Staging::beside(pf.path(), "backup")?;
                let m = pf.backup_in_set(&staging.0, set).await?;
                self.bucket()
                    .await?
                    .push(&staging.0.join(&m.id), &m, bucket, prefix)
                    .await?;
                let at = format!("gs://{bucket}/{}", Place::object(prefix, &m.id));
                Ok((m, at))
            }
            #[cfg(not(feature = "pubsub"))]
            p @ Place::Gcs { .. } => Err(no_gcs(p)),
        }
    }

    /// The backups in the place, oldest first, each checked.
    pub async fn list(&self) -> Result<Vec<Listed>, BackupError> {
        match &self.place {
            Place::Dir(dir) => backup::list(dir),
            #[cfg(feature = "pubsub")]
            Place::Gcs { bucket, prefix } => self.bucket().await?.backups(bucket, prefix).await,
            #[cfg(not(feature = "pubsub"))]
            p @ Place::Gcs { .. } => Err(no_gcs(p)),
        }
    }

    /// Removes `partition`'s good backups beyond the newest `keep`.
    pub async fn prune(&self, partition: u32, keep: usize) -> Result<Vec<String>, BackupError> {
        match &self.place {
            Place::Dir(dir) => backup::prune(dir, partition, keep),
            #[cfg(feature = "pubsub")]
            Place::Gcs { bucket, prefix } => {
                self.bucket()
                    .await?
                    .prune(bucket, prefix, partition, keep)
                    .await
            }
            #[cfg(not(feature = "pubsub"))]
            p @ Place::Gcs { .. } => Err(no_gcs(p)),
        }
    }

    /// Ships the closed segments beside `log` into the place (the archive).
    pub async fn ship(&self, log: &Path, partition: u32) -> Result<Vec<String>, BackupError> {
        match &self.place {
            Place::Dir(dir) => {
                let (log, dir) = (log.to_path_buf(), dir.clone());
                tokio::task::spawn_blocking(move || backup::archive::ship(&log, &dir, partition))
                    .await
                    .map_err(|e| BackupError::Remote {
                        place: self.place.describe(),
                        reason: e.to_string(),
                    })?
            }
            #[cfg(feature = "pubsub")]
            Place::Gcs { bucket, prefix } => {
                self.bucket()
                    .await?
                    .ship(log, bucket, prefix, partition)
                    .await
            }
            #[cfg(not(feature = "pubsub"))]
            p @ Place::Gcs { .. } => Err(no_gcs(p)),
        }
    }
}

/// Restores the backup `id` of the place `from` (its directory, or the
/// set `id` with `partition`) as `target`; with `until`, to that instant
/// from the archive `shelf`.
pub async fn restore(
    from: &Shelf,
    id: &str,
    target: &Path,
    partition: Option<u32>,
    replace: bool,
    until: Option<(Millis, &Shelf)>,
) -> Result<Restored, BackupError> {
    #[cfg_attr(not(feature = "pubsub"), allow(unused_variables))]
    let staging = Staging::beside(target, "restore")?;
    let dir = match &from.place {
        Place::Dir(dir) => backup::resolve(&dir.join(id), partition),
        #[cfg(feature = "pubsub")]
        Place::Gcs { bucket, prefix } => {
            let b = from.bucket().await?;
            let mut name = id.to_string();
            if let Some(i) = partition {
                let set = backup::backup_id(id, i);
                let has_set = b
                    .backups(bucket, prefix)
                    .await?
                    .iter()
                    .any(|(d, _)| *d == set);
                if has_set {
                    name = set;
                }
            }
            b.fetch(bucket, prefix, &name, &staging.0).await?
        }
        #[cfg(not(feature = "pubsub"))]
        p @ Place::Gcs { .. } => return Err(no_gcs(p)),
    };
    let Some((t, archive)) = until else {
        return backup::restore(&dir, target, partition, replace);
    };
    let segments = match &archive.place {
        Place::Dir(d) => d.clone(),
        #[cfg(feature = "pubsub")]
        Place::Gcs { bucket, prefix } => {
            let m = backup::check(&dir)?;
            let into = staging.0.join("archive");
            archive
                .bucket()
                .await?
                .fetch_archive(bucket, prefix, m.partition, m.batch, &into)
                .await?;
            into
        }
        #[cfg(not(feature = "pubsub"))]
        p @ Place::Gcs { .. } => return Err(no_gcs(p)),
    };
    backup::restore_until(&dir, target, partition, replace, &segments, t)
}

//! Online backups of a running database: the writer hands over a read
//! snapshot between two batches, and the copy is written off the async
//! runtime at the lowest CPU priority.
//!
//! Invariant: every call answered before a backup was asked for is in it;
//! the writer never waits for the copy; a backup a principal takes is
//! recorded in the audit trail after it is written.

use super::Postfach;
use crate::commit::{Command, Job};
use crate::store::StoreError;
use std::path::Path;
use tokio::sync::oneshot;

impl Postfach {
    /// Writes a backup of the database as it is after the last batch the
    /// writer applied, into `dir/ID/` (see [`crate::backup`]): the writer
    /// hands over a read snapshot between two batches and goes on; the copy
    /// is written from the snapshot off the async runtime. Every call
    /// answered before this one was made is in it.
    pub async fn backup(
        &self,
        dir: impl AsRef<Path>,
    ) -> Result<crate::backup::Manifest, crate::backup::BackupError> {
        self.backup_in_set(dir, None).await
    }

    /// [`Postfach::backup`] as the partition's member of a backup set
    /// (`dir/SET-pI/`), the id a cluster's partitions share; `None`: the
    /// instant names it. A set id is checked and taken once.
    pub async fn backup_in_set(
        &self,
        dir: impl AsRef<Path>,
        set: Option<String>,
    ) -> Result<crate::backup::Manifest, crate::backup::BackupError> {
        self.backup_on(Box::new(crate::backup::FileSystem), dir.as_ref(), set)
            .await
    }

    /// [`Postfach::backup_in_set`] onto `files` (the power-loss tests'
    /// simulated disk).
    pub(crate) async fn backup_on(
        &self,
        files: Box<dyn crate::backup::Files>,
        dir: &Path,
        set: Option<String>,
    ) -> Result<crate::backup::Manifest, crate::backup::BackupError> {
        if let Some(id) = &set {
            crate::backup::check_set_id(id)?;
        }
        let (asked, answer) = oneshot::channel();
        {
            let guard = self.inner.tx.lock().map_err(|_| StoreError::Closed)?;
            if self.inner.read_only {
                return Err(StoreError::ReadOnly.into());
            }
            let tx = guard.as_ref().ok_or(StoreError::Closed)?;
            tx.send(Job::Snapshot(asked))
                .map_err(|_| StoreError::Closed)?;
        }
        let (batch, snapshot) = answer.await.map_err(|_| StoreError::Closed)??;
        let dir = dir.to_path_buf();
        let partition = self.partition();
        let taken_at = self.inner.clock.now();
        // its own thread at the lowest CPU priority: the copy takes what the
        // writer and the callers leave
        let (done, written) = oneshot::channel();
        std::thread::Builder::new()
            .name("postfach-backup".into())
            .spawn(move || {
                crate::disk::lowest_cpu_priority();
                let _ = done.send(crate::backup::write(
                    files.as_ref(),
                    &snapshot,
                    batch,
                    partition,
                    taken_at,
                    &dir,
                    set.as_deref(),
                ));
            })
            .map_err(StoreError::Io)?;
        let manifest = written.await.map_err(|_| {
            StoreError::Aborted("the backup thread ended without an answer".into())
        })??;
        // a principal's backup is in the audit trail; the schedule's is not
        if crate::audit::actor().is_some()
            && let Err(e) = self
                .submit(Command::BackupTaken {
                    id: manifest.id.clone(),
                })
                .await
        {
            tracing::warn!(id = %manifest.id, error = %e, "backup taken, but not recorded in the audit trail");
        }
        Ok(manifest)
    }
}

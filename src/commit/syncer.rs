//! The syncer: makes the log frames of applied batches durable, then answers
//! their callers.
//!
//! Invariants:
//! - Frames reach the log in batch order: the writer hands them over in
//!   order, and syncs one itself only when nothing it handed over is still
//!   unsynced ([`Syncer::hand_over`]).
//! - No caller is answered before its batch's frame is fsynced; a failed write
//!   poisons the writer and every later batch is refused.

use super::wal::{self, Wal};
use super::{CommitStats, ReplyTo};
use crate::engine::EngineError;
use crate::error::Error;
use crate::store::StoreError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the writer hands the syncer thread.
pub(super) enum SyncMsg {
    /// A batch applied to redb: sync its log frame, then answer its callers.
    Batch(PendingBatch),
    /// Fold the log (after a durable checkpoint), then say so.
    Fold(
        wal::Fold,
        mpsc::Sender<Result<Option<std::path::PathBuf>, StoreError>>,
    ),
}

/// A batch applied to redb whose frame is not durable yet.
pub(super) struct PendingBatch {
    pub frame: Vec<u8>,
    pub answers: Vec<(ReplyTo, Result<super::Reply, EngineError>)>,
    /// Whether it created work for the job executor.
    pub wake: bool,
    pub started: std::time::Instant,
}

/// What the syncer and the writer share.
struct Shared {
    wal: Mutex<Wal>,
    /// Batches handed to the syncer thread and not answered yet.
    in_flight: AtomicUsize,
    poisoned: Arc<Mutex<Option<String>>>,
    committed: Arc<tokio::sync::Notify>,
    stats: Arc<CommitStats>,
}

/// The syncer thread and the writer's side of it.
pub(super) struct Syncer {
    tx: mpsc::Sender<SyncMsg>,
    handle: JoinHandle<()>,
    shared: Arc<Shared>,
}

impl Syncer {
    pub(super) fn start(
        wal: Wal,
        poisoned: Arc<Mutex<Option<String>>>,
        committed: Arc<tokio::sync::Notify>,
        stats: Arc<CommitStats>,
    ) -> Result<Syncer, StoreError> {
        let shared = Arc::new(Shared {
            wal: Mutex::new(wal),
            in_flight: AtomicUsize::new(0),
            poisoned,
            committed,
            stats,
        });
        let (tx, rx) = mpsc::channel::<SyncMsg>();
        let theirs = shared.clone();
        let handle = std::thread::Builder::new()
            .name("postfach-syncer".into())
            .spawn(move || syncer_loop(&theirs, rx))
            .map_err(StoreError::Io)?;
        Ok(Syncer { tx, handle, shared })
    }

    /// Makes `batch` durable and answers its callers: on the writer's own
    /// thread when no other command waits (`queued` false) and the syncer
    /// has nothing unsynced — one thread's wake less for a lone caller —,
    /// else on the syncer thread, while the writer applies the next batch.
    pub(super) fn hand_over(&self, batch: PendingBatch, queued: bool) {
        if !queued && self.shared.in_flight.load(Ordering::Acquire) == 0 {
            return sync_group(&self.shared, vec![batch]);
        }
        self.shared.in_flight.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::SendError(SyncMsg::Batch(b))) = self.tx.send(SyncMsg::Batch(batch)) {
            self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
            for (reply, _) in b.answers {
                let _ = reply.send(Err(Error::Store(StoreError::Aborted(
                    "the log syncer stopped; reopen the database".into(),
                ))));
            }
        }
    }

    /// Folds the log after the frames handed over before this.
    pub(super) fn fold(&self, fold: wal::Fold) -> Result<Option<std::path::PathBuf>, StoreError> {
        let (done, wait) = mpsc::channel();
        self.tx
            .send(SyncMsg::Fold(fold, done))
            .map_err(|_| StoreError::Aborted("the log syncer stopped".into()))?;
        wait.recv()
            .map_err(|_| StoreError::Aborted("the log syncer stopped".into()))?
    }

    /// Syncs what was handed over, then ends the thread.
    pub(super) fn stop(self) {
        drop(self.tx);
        let _ = self.handle.join();
    }
}

/// Syncs queued log frames — all that queued up since the last fsync with one
/// fsync — then answers their callers.
fn syncer_loop(shared: &Shared, rx: mpsc::Receiver<SyncMsg>) {
    let mut held: Option<SyncMsg> = None;
    loop {
        let msg = match held.take() {
            Some(m) => m,
            None => match rx.recv() {
                Ok(m) => m,
                Err(_) => return,
            },
        };
        let first = match msg {
            SyncMsg::Fold(fold, done) => {
                let folded = lock(&shared.wal).fold(fold);
                if let (Err(e), wal::Fold::Roll(_)) = (&folded, fold)
                    && let Ok(mut p) = shared.poisoned.lock()
                {
                    // which file the next frames would reach is unsure now
                    *p = Some(format!("the log could not be closed as a segment: {e}"));
                }
                let _ = done.send(folded);
                continue;
            }
            SyncMsg::Batch(b) => b,
        };
        let mut group = vec![first];
        loop {
            match rx.try_recv() {
                Ok(SyncMsg::Batch(b)) => group.push(b),
                Ok(other) => {
                    held = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        let n = group.len();
        sync_group(shared, group);
        shared.in_flight.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Appends the frames of `group` with one fsync, then answers its callers
/// (every one of them gets the error when the write failed).
fn sync_group(shared: &Shared, group: Vec<PendingBatch>) {
    let earlier = shared.poisoned.lock().ok().and_then(|p| p.clone());
    let synced = match earlier {
        Some(why) => Err(format!(
            "the write-ahead log failed earlier ({why}); reopen the database"
        )),
        None => lock(&shared.wal)
            .append_frames(group.iter().map(|b| b.frame.as_slice()))
            .map_err(|e| {
                if let Ok(mut p) = shared.poisoned.lock() {
                    *p = Some(e.to_string());
                }
                format!("write-ahead log: {e}; reopen the database")
            }),
    };
    let mut wake = false;
    for b in group {
        match &synced {
            Ok(()) => {
                shared
                    .stats
                    .latency_seconds
                    .observe(b.started.elapsed().as_secs_f64());
                wake |= b.wake;
                for (reply, result) in b.answers {
                    let _ = reply.send(result.map_err(Error::from));
                }
            }
            Err(text) => {
                for (reply, _) in b.answers {
                    let _ = reply.send(Err(Error::Store(StoreError::Aborted(text.clone()))));
                }
            }
        }
    }
    // wakes the job executor: new jobs are picked up at once
    if wake {
        shared.committed.notify_one();
    }
}

/// The log, also when a thread panicked while holding it (its state is
/// the file's, which the next append or the next open checks).
fn lock(wal: &Mutex<Wal>) -> std::sync::MutexGuard<'_, Wal> {
    wal.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn pending(
        frame: Vec<u8>,
    ) -> (
        PendingBatch,
        oneshot::Receiver<Result<super::super::Reply, Error>>,
    ) {
        let (tx, rx) = oneshot::channel();
        let batch = PendingBatch {
            frame,
            answers: vec![(tx, Ok(super::super::Reply::Count(1)))],
            wake: false,
            started: std::time::Instant::now(),
        };
        (batch, rx)
    }

    #[test]
    fn a_lone_batch_is_synced_by_the_writer_and_a_queued_one_by_the_syncer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.wal");
        let (wal, _) = Wal::open(&path).unwrap();
        let s = Syncer::start(wal, Arc::default(), Arc::default(), Arc::default()).unwrap();
        let f1 = wal::frame(1, 10, &[]).unwrap();
        let f2 = wal::frame(2, 20, &[]).unwrap();
        // nothing waits and nothing is in flight: answered before hand_over returns
        let (b1, mut r1) = pending(f1);
        s.hand_over(b1, false);
        assert!(
            matches!(r1.try_recv(), Ok(Ok(_))),
            "synced on the writer's thread"
        );
        // another command waits: the syncer thread answers it
        let (b2, r2) = pending(f2);
        s.hand_over(b2, true);
        assert!(matches!(r2.blocking_recv(), Ok(Ok(_))));
        s.stop();
        let (_, recs) = Wal::open(&path).unwrap();
        assert_eq!(recs.iter().map(|r| r.batch).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn after_a_failed_write_every_batch_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(&dir.path().join("p.wal")).unwrap();
        let poisoned: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(Some("disk gone".into())));
        let s = Syncer::start(wal, poisoned, Arc::default(), Arc::default()).unwrap();
        for queued in [false, true] {
            let (b, r) = pending(wal::frame(1, 10, &[]).unwrap());
            s.hand_over(b, queued);
            let answer = r.blocking_recv().unwrap().err().map(|e| e.to_string());
            assert!(
                answer.as_deref().is_some_and(|e| e.contains("disk gone")),
                "{answer:?}"
            );
        }
        s.stop();
    }
}

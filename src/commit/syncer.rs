//! The syncer: makes the log frames of batches durable while the writer
//! applies them, then answers their callers.
//!
//! Invariants:
//! - Frames reach the log in the order the writer hands them over
//!   ([`Syncer::log`]), each one before its batch is applied, so that its
//!   fsync runs while the writer works (a lone caller waits for the longer
//!   of the two, not for their sum).
//! - No caller is answered before its batch was applied and its frame
//!   fsynced: whichever of the writer ([`Syncer::answer`]) and the syncer
//!   thread finishes last answers. A failed write poisons the writer; the
//!   batches whose frames did not become durable, and every later one, are
//!   refused.

use super::wal::{self, Wal};
use super::{CommitStats, ReplyTo};
use crate::error::Error;
use crate::store::StoreError;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the writer hands the syncer thread.
pub(super) enum SyncMsg {
    /// A batch's log frame, handed over before the batch is applied.
    Frame(Vec<u8>),
    /// Fold the log (after a durable checkpoint), then say so.
    Fold(
        wal::Fold,
        mpsc::Sender<Result<Option<std::path::PathBuf>, StoreError>>,
    ),
}

/// The answers of an applied batch, waiting for its frame.
pub(super) struct PendingBatch {
    /// Its frame's place among the frames handed over ([`Syncer::log`]).
    pub ticket: u64,
    pub answers: Vec<(ReplyTo, Result<super::Reply, Error>)>,
    /// Whether it created work for the job executor.
    pub wake: bool,
    pub started: std::time::Instant,
}

/// How far the log is durable, and the answers that wait for it.
#[derive(Default)]
struct Progress {
    /// Frames durable, counted in the order they were handed over.
    synced: u64,
    /// Why a frame could not be written: no later frame becomes durable.
    failed: Option<String>,
    /// Applied batches whose frames are not durable yet, in ticket order.
    waiting: Vec<PendingBatch>,
}

/// What the syncer and the writer share.
struct Shared {
    wal: Mutex<Wal>,
    progress: Mutex<Progress>,
    poisoned: Arc<Mutex<Option<String>>>,
    committed: Arc<tokio::sync::Notify>,
    stats: Arc<CommitStats>,
}

/// The syncer thread and the writer's side of it.
pub(super) struct Syncer {
    tx: mpsc::Sender<SyncMsg>,
    handle: JoinHandle<()>,
    shared: Arc<Shared>,
    /// Frames handed over so far (the last ticket given).
    handed: u64,
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
            progress: Mutex::default(),
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
        Ok(Syncer {
            tx,
            handle,
            shared,
            handed: 0,
        })
    }

    /// Hands a frame to the syncer thread, which appends and fsyncs it (with
    /// whatever else queued up); returns its ticket for [`Syncer::answer`].
    pub(super) fn log(&mut self, frame: Vec<u8>) -> u64 {
        self.handed += 1;
        if self.tx.send(SyncMsg::Frame(frame)).is_err() {
            lock(&self.shared.progress)
                .failed
                .get_or_insert_with(|| "the log syncer stopped; reopen the database".into());
        }
        self.handed
    }

    /// Answers an applied batch once its frame is durable: at once when it
    /// is already, else from the syncer thread when it is (or with the
    /// error, when the log failed before it).
    pub(super) fn answer(&self, batch: PendingBatch) {
        let mut p = lock(&self.shared.progress);
        if p.synced >= batch.ticket {
            drop(p);
            answer(&self.shared, vec![batch]);
        } else if let Some(why) = p.failed.clone() {
            drop(p);
            refuse(vec![batch], &why);
        } else {
            p.waiting.push(batch);
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

    /// Syncs what was handed over, then ends the thread (every batch handed
    /// to [`Syncer::answer`] is answered by then).
    pub(super) fn stop(self) {
        drop(self.tx);
        let _ = self.handle.join();
    }
}

/// Appends the frames that queued up since the last fsync with one fsync,
/// then answers the batches that waited for them.
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
            SyncMsg::Frame(f) => f,
        };
        let mut group = vec![first];
        loop {
            match rx.try_recv() {
                Ok(SyncMsg::Frame(f)) => group.push(f),
                Ok(other) => {
                    held = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        sync_group(shared, &group);
    }
}

/// Appends `frames` with one fsync, then answers the batches that waited
/// for them (with the error, every one waiting, when the write failed).
fn sync_group(shared: &Shared, frames: &[Vec<u8>]) {
    let earlier = shared.poisoned.lock().ok().and_then(|p| p.clone());
    let synced = match earlier {
        Some(why) => Err(format!(
            "the write-ahead log failed earlier ({why}); reopen the database"
        )),
        None => lock(&shared.wal)
            .append_frames(frames.iter().map(Vec::as_slice))
            .map_err(|e| {
                if let Ok(mut p) = shared.poisoned.lock() {
                    *p = Some(e.to_string());
                }
                format!("write-ahead log: {e}; reopen the database")
            }),
    };
    let mut p = lock(&shared.progress);
    match synced {
        Ok(()) => {
            p.synced += frames.len() as u64;
            let upto = p.synced;
            let n = p.waiting.partition_point(|b| b.ticket <= upto);
            let ready: Vec<PendingBatch> = p.waiting.drain(..n).collect();
            drop(p);
            answer(shared, ready);
        }
        Err(why) => {
            let waiting = std::mem::take(&mut p.waiting);
            p.failed.get_or_insert(why.clone());
            drop(p);
            refuse(waiting, &why);
        }
    }
}

/// Answers batches whose frames are durable.
fn answer(shared: &Shared, batches: Vec<PendingBatch>) {
    let mut wake = false;
    for b in batches {
        shared
            .stats
            .latency_seconds
            .observe(b.started.elapsed().as_secs_f64());
        wake |= b.wake;
        for (reply, result) in b.answers {
            let _ = reply.send(result);
        }
    }
    // wakes the job executor: new jobs are picked up at once
    if wake {
        shared.committed.notify_one();
    }
}

/// Answers batches whose frames will never be durable with the error.
fn refuse(batches: Vec<PendingBatch>, why: &str) {
    for b in batches {
        for (reply, _) in b.answers {
            let _ = reply.send(Err(Error::Store(StoreError::Aborted(why.to_string()))));
        }
    }
}

/// The log or the progress, also when a thread panicked while holding it
/// (the log's state is the file's, which the next append or the next open
/// checks).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn pending(
        ticket: u64,
    ) -> (
        PendingBatch,
        oneshot::Receiver<Result<super::super::Reply, Error>>,
    ) {
        let (tx, rx) = oneshot::channel();
        let batch = PendingBatch {
            ticket,
            answers: vec![(tx, Ok(super::super::Reply::Count(1)))],
            wake: false,
            started: std::time::Instant::now(),
        };
        (batch, rx)
    }

    #[test]
    fn a_batch_is_answered_once_it_is_applied_and_its_frame_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.wal");
        let (wal, _) = Wal::open(&path).unwrap();
        let mut s = Syncer::start(wal, Arc::default(), Arc::default(), Arc::default()).unwrap();
        // the log is held: the frame cannot be written, so the applied batch waits
        let shared = s.shared.clone();
        let held = lock(&shared.wal);
        let t1 = s.log(wal::frame(1, 10, &[]).unwrap());
        let (b1, mut r1) = pending(t1);
        s.answer(b1);
        assert!(
            r1.try_recv().is_err(),
            "not answered before its frame is durable"
        );
        drop(held);
        assert!(
            matches!(r1.blocking_recv(), Ok(Ok(_))),
            "answered by the syncer thread"
        );
        // the frame is durable before the batch is applied: the writer answers at once
        let t2 = s.log(wal::frame(2, 20, &[]).unwrap());
        s.fold(wal::Fold::Keep).unwrap();
        let (b2, mut r2) = pending(t2);
        s.answer(b2);
        assert!(
            matches!(r2.try_recv(), Ok(Ok(_))),
            "answered on the writer's thread"
        );
        s.stop();
        let (_, recs) = Wal::open(&path).unwrap();
        assert_eq!(recs.iter().map(|r| r.batch).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn after_a_failed_write_every_batch_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(&dir.path().join("p.wal")).unwrap();
        let poisoned: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(Some("disk gone".into())));
        let mut s = Syncer::start(wal, poisoned, Arc::default(), Arc::default()).unwrap();
        for batch in 1..=2 {
            let (b, r) = pending(s.log(wal::frame(batch, 10, &[]).unwrap()));
            s.answer(b);
            let answer = r.blocking_recv().unwrap().err().map(|e| e.to_string());
            assert!(
                answer.as_deref().is_some_and(|e| e.contains("disk gone")),
                "{answer:?}"
            );
        }
        s.stop();
    }
}

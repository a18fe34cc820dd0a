//! Engine-level tests of a slot move between two partitions: the source
//! fences the slots and refuses their writes, the target writes what they
//! hold slice by slice (a slice said twice writes nothing twice) and refuses
//! their writes until it takes them, the map flips, the source forgets —
//! and every order, buffered completion and dedup record is on exactly one
//! partition at every step, each store whole after every step.

use super::*;
use crate::engine::moves::MoveCommand;
use crate::slots::{MovePhase, SlotMap, SlotMove};
use crate::store::Moved;
use crate::store::batches::{BatchRecord, BatchState};

/// Keys of the form `K-i` that partition 0 of 2 owns, the first `n`.
fn keys_of_0(n: usize) -> Vec<String> {
    let map = SlotMap::new(2).unwrap();
    (0..)
        .map(|i| format!("K-{i}"))
        .filter(|k| map.partition_of_key(k) == 0)
        .take(n)
        .collect()
}

impl Harness {
    fn mv(&mut self, cmd: MoveCommand) -> R<Option<BatchRecord>> {
        let r = self.step(|e| e.slot_move(&cmd));
        self.check_invariants();
        r
    }

    fn slot_move(&self, id: u64) -> SlotMove {
        let s = self.db.snapshot().slot_state().unwrap().unwrap();
        s.moves.into_iter().find(|m| m.id == id).unwrap()
    }

    /// The (message, key) pairs an instance of `process` version `version`
    /// correlates by, per this side's models.
    fn pairs(&self, process: &str, version: u32, vars: &Vars) -> Vec<(String, String)> {
        self.defs
            .get(process, version)
            .map(|m| {
                m.correlation_pairs(vars)
                    .map(|(a, b)| (a.to_string(), b))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Items `from ..` (at most `limit`) of move `batch`, as the source sends them.
    fn export(&self, batch: u64, from: u64, limit: usize) -> Vec<Moved> {
        let pairs = |p: &str, v: u32, vars: &Vars| self.pairs(p, v, vars);
        self.db
            .snapshot()
            .export_items(batch, from, limit, &pairs)
            .unwrap()
    }

    /// Instance `id` or message record `seq` as this side would send it.
    fn export_one(&self, id: Option<u64>, seq: Option<u64>) -> Moved {
        let snap = self.db.snapshot();
        let pairs = |p: &str, v: u32, vars: &Vars| self.pairs(p, v, vars);
        match (id, seq) {
            (Some(id), _) => match snap.export_instance(id, &pairs).unwrap() {
                Some(i) => Moved::Instance(Box::new(i)),
                None => Moved::InstanceGone(id),
            },
            (None, Some(seq)) => match snap.export_message(seq).unwrap() {
                Some(bytes) => Moved::Message(seq, bytes),
                None => Moved::MessageGone(seq),
            },
            (None, None) => Moved::Gone,
        }
    }

    fn counters(&mut self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        self.db.write(|t| {
            for k in crate::store::ID_COUNTERS {
                out.push((k.to_string(), t.counter_at(k).unwrap()));
            }
        });
        out
    }

    fn publish_result(&mut self, key: &str, id: &str) -> R<Delivery> {
        let msg = Publish {
            name: MSG.into(),
            key: key.into(),
            message_id: Some(id.into()),
            ..Default::default()
        };
        self.step(|e| e.publish(&msg))
    }
}

/// What a test does while a move runs, and when the move fences.
struct During<'f> {
    /// Called while the slots are copied and take writes: after the first
    /// slice, and after each round that leaves them copying.
    copying: &'f mut dyn FnMut(&mut Harness, &mut Harness),
    /// Called once the slots are fenced.
    fenced: &'f mut dyn FnMut(&mut Harness, &mut Harness),
    /// The largest delta sent under the fence.
    fence_at: u64,
}

fn nothing(_: &mut Harness, _: &mut Harness) {}

/// Moves the slots of partition 0 in `first ..= last` to partition 1, two
/// items a slice, each slice sent twice, as the source's driver does; before
/// the slots change hands, checks that the target holds every moved record
/// exactly as the source does. Returns the move's batch and the copying
/// rounds it took after the first copy.
fn move_slots(
    src: &mut Harness,
    dst: &mut Harness,
    (first, last): (u32, u32),
    during: During<'_>,
) -> (BatchRecord, u32) {
    let version = src
        .db
        .snapshot()
        .slot_state()
        .unwrap()
        .unwrap()
        .map
        .version()
        + 1;
    let b = src
        .mv(MoveCommand::Begin {
            first,
            last,
            to: 1,
            to_url: "http://target".into(),
            version,
        })
        .unwrap()
        .unwrap();
    let (mut at, mut rounds, mut fenced) = (0, 0, false);
    loop {
        let items = src
            .db
            .snapshot()
            .batch(b.id, 0)
            .unwrap()
            .unwrap()
            .record
            .items;
        if at < items {
            send_slice(src, dst, b.id, at);
            if at == 0 && !fenced {
                (during.copying)(src, dst);
            }
            at = (at + 2).min(items);
            continue;
        }
        let r = src
            .mv(MoveCommand::CatchUp {
                batch: b.id,
                fence_at: during.fence_at,
            })
            .unwrap()
            .unwrap();
        match src.slot_move(b.id).phase {
            MovePhase::Copying { round } => {
                rounds = round;
                (during.copying)(src, dst);
            }
            MovePhase::Exporting if !fenced => {
                fenced = true;
                (during.fenced)(src, dst);
            }
            MovePhase::Exporting if r.next == r.items => break,
            phase => assert_eq!(phase, MovePhase::Exporting),
        }
    }
    same_records(src, dst, b.id);
    let sm = src.slot_move(b.id);
    for _ in 0..2 {
        dst.mv(MoveCommand::Adopt {
            slot_move: sm.clone(),
        })
        .unwrap();
    }
    src.mv(MoveCommand::Flip { batch: b.id }).unwrap();
    loop {
        let r = src
            .mv(MoveCommand::Forget {
                batch: b.id,
                limit: 3,
            })
            .unwrap()
            .unwrap();
        if r.state == BatchState::Done {
            return (r, rounds);
        }
    }
}

/// Sends the slice of move `batch` from item `at` (two items) twice, and
/// marks it sent.
fn send_slice(src: &mut Harness, dst: &mut Harness, batch: u64, at: u64) {
    let sm = src.slot_move(batch);
    let counters = src.counters();
    let records = src.export(batch, at, 2);
    let upto = at + records.len() as u64;
    for _ in 0..2 {
        dst.mv(MoveCommand::Import {
            slot_move: sm.clone(),
            upto,
            counters: counters.clone(),
            records: records.clone(),
        })
        .unwrap();
    }
    src.mv(MoveCommand::Exported { batch, upto }).unwrap();
}

/// Every item of move `batch` reads the same, row for row, on both sides.
fn same_records(src: &Harness, dst: &Harness, batch: u64) {
    let items = src
        .db
        .snapshot()
        .batch(batch, 0)
        .unwrap()
        .unwrap()
        .record
        .items;
    let sent = src.export(batch, 0, items as usize);
    for (pos, theirs) in sent.into_iter().enumerate() {
        let ours = match &theirs {
            Moved::Instance(i) => dst.export_one(Some(i.id), None),
            Moved::Message(seq, _) => dst.export_one(None, Some(*seq)),
            Moved::InstanceGone(id) => dst.export_one(Some(*id), None),
            Moved::MessageGone(seq) => dst.export_one(None, Some(*seq)),
            Moved::Gone => Moved::Gone,
        };
        assert_eq!(ours, theirs, "item {pos} of move {batch}");
    }
}

#[test]
fn orders_buffered_completions_and_dedup_records_move_to_the_new_owner() {
    let mut src = Harness::partition(0, 2);
    let mut dst = Harness::partition(1, 2);
    let map = SlotMap::new(2).unwrap();
    let keys = keys_of_0(24);
    // orders waiting at their catch, one completed, one early completion
    let orders: Vec<u64> = keys[..6].iter().map(|k| src.start(k)).collect();
    src.work();
    let done = src.publish(&keys[0], "done-0");
    assert_eq!(done.outcome, Outcome::Correlated);
    let early = src.publish(&keys[7], "early-7");
    assert_eq!(early.outcome, Outcome::Buffered);
    // two more orders wait for their hand-over job, one that moves, one
    // that stays
    let in_move = |k: &String| map.slot_of_key(k) <= 2047;
    let job_keys: Vec<String> = [true, false]
        .iter()
        .map(|m| keys[8..].iter().find(|k| in_move(k) == *m).unwrap().clone())
        .collect();
    let at_job: Vec<u64> = job_keys.iter().map(|k| src.start(k)).collect();
    src.step(|e| e.run_continuations(100)).unwrap();
    // the slots of keys 0 … 7 move, the rest stay
    let slots: Vec<u32> = keys[..8].iter().map(|k| map.slot_of_key(k)).collect();
    let (first, last) = (0, 2047);
    let moved = |k: &String| (first..=last).contains(&map.slot_of_key(k));
    assert!(slots.iter().any(|s| *s <= last), "{slots:?}");
    let mut fenced = |src: &mut Harness, dst: &mut Harness| {
        // fenced: the source refuses, the target refuses naming the source
        for k in keys.iter().filter(|k| moved(k)) {
            let e = src.publish_result(k, "during").unwrap_err();
            assert!(matches!(e, EngineError::SlotMoving { to: 1, .. }), "{e:?}");
            let e = dst.publish_result(k, "during").unwrap_err();
            assert!(
                matches!(e, EngineError::OtherPartition { owner: 0, .. }),
                "{e:?}"
            );
        }
    };
    let during = During {
        copying: &mut nothing,
        fenced: &mut fenced,
        fence_at: 512,
    };
    let (b, _) = move_slots(&mut src, &mut dst, (first, last), during);
    assert!(b.items > 0);
    // the map: both agree the moved slots are partition 1's, at version 2
    for h in [&src, &dst] {
        let s = h.db.snapshot().slot_state().unwrap().unwrap();
        assert_eq!(s.map.version(), 2);
        assert!(s.moves.is_empty(), "{:?}", s.moves);
        for k in &keys {
            assert_eq!(
                s.map.partition_of_key(k),
                if moved(k) { 1 } else { 0 },
                "{k}"
            );
        }
    }
    // every order is on exactly one partition: the one the map names
    for (k, id) in keys.iter().zip(&orders) {
        let on_src = src.db.snapshot().instance(*id).unwrap().is_some();
        let on_dst = dst.db.snapshot().instance(*id).unwrap().is_some();
        assert_eq!((on_src, on_dst), (!moved(k), moved(k)), "{k} order {id}");
    }
    // every message record too, with its dedup entry
    for m in ["done-0", "early-7"] {
        let on = |h: &Harness| h.messages().iter().any(|r| r.message_id == m);
        let k = if m == "done-0" { &keys[0] } else { &keys[7] };
        assert_eq!((on(&src), on(&dst)), (!moved(k), moved(k)), "{m}");
    }
    // the jobs of the orders that wait for them are worked where they are
    work_where_they_are(&mut src, &mut dst, &at_job, &job_keys, &moved);
    // the moved orders complete on the target; a redelivery of the
    // completion that correlated before the move is a duplicate there
    for (k, id) in keys[1..6].iter().zip(&orders[1..]) {
        let owner = if moved(k) { &mut dst } else { &mut src };
        let d = owner.publish(k, &format!("done-{id}"));
        assert_eq!(d.outcome, Outcome::Correlated, "{k}");
        assert_eq!(d.instance, Some(*id));
    }
    if moved(&keys[0]) {
        assert_eq!(dst.publish(&keys[0], "done-0").outcome, Outcome::Duplicate);
    }
    // the early completion waited in the buffer and takes its order there
    let owner = if moved(&keys[7]) { &mut dst } else { &mut src };
    let late_order = owner.start(&keys[7]);
    assert_eq!(map.slot_of_id(late_order), map.slot_of_key(&keys[7]));
    owner.work();
    let m = owner
        .messages()
        .into_iter()
        .find(|m| m.message_id == "early-7")
        .unwrap();
    assert_eq!(m.instance, Some(late_order), "{m:?}");
    assert!(
        !orders.contains(&late_order),
        "ids go on above the source's: {late_order} {orders:?}"
    );
    // the source names the new owner for a moved key
    if let Some(k) = keys.iter().find(|k| moved(k)) {
        let e = src.publish_result(k, "after").unwrap_err();
        assert!(
            matches!(
                e,
                EngineError::OtherPartition {
                    owner: 1,
                    version: 2,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

/// Completes the hand-over jobs of `at_job` (started with `job_keys`) on
/// whichever partition has them, checking it is the one that owns the key.
fn work_where_they_are(
    src: &mut Harness,
    dst: &mut Harness,
    at_job: &[u64],
    job_keys: &[String],
    moved: &dyn Fn(&String) -> bool,
) {
    let mut worked = 0;
    for h in [src, dst] {
        let jobs = h
            .step(|e| e.lock_jobs("auftragUebergeben", 100, "w", 30_000, false, None))
            .unwrap();
        for j in &jobs {
            let i = at_job.iter().position(|o| *o == j.task.instance).unwrap();
            let owner = if moved(&job_keys[i]) { 1 } else { 0 };
            assert_eq!(
                h.cfg.partition.index(),
                owner,
                "job {} of order {}",
                j.task.job,
                j.task.instance
            );
            h.step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new()))
                .unwrap();
            worked += 1;
        }
        h.check_invariants();
    }
    assert_eq!(worked, 2, "each hand-over job is on one partition");
}

#[test]
fn a_move_of_slots_the_source_does_not_own_or_already_moving_is_refused() {
    let mut src = Harness::partition(0, 2);
    let e = src
        .mv(MoveCommand::Begin {
            first: 1,
            last: 1,
            to: 1,
            to_url: String::new(),
            version: 2,
        })
        .unwrap_err();
    assert!(e.to_string().contains("owns none of slots 1-1"), "{e}");
    let e = src
        .mv(MoveCommand::Begin {
            first: 0,
            last: 9,
            to: 1,
            to_url: String::new(),
            version: 1,
        })
        .unwrap_err();
    assert!(e.to_string().contains("holds version 1"), "{e}");
    src.mv(MoveCommand::Begin {
        first: 0,
        last: 9,
        to: 1,
        to_url: String::new(),
        version: 2,
    })
    .unwrap();
    let e = src
        .mv(MoveCommand::Begin {
            first: 8,
            last: 20,
            to: 1,
            to_url: String::new(),
            version: 3,
        })
        .unwrap_err();
    assert!(e.to_string().contains("in flight"), "{e}");
    let s = src.db.snapshot().slot_state().unwrap().unwrap();
    assert_eq!(s.moves.len(), 1);
    assert_eq!(
        s.moves[0].slots,
        vec![(0, 0), (2, 2), (4, 4), (6, 6), (8, 8)]
    );
    assert_eq!(s.moves[0].phase, MovePhase::Copying { round: 0 });
}

/// Keys of partition 0 of 2 whose slots are in 0 … 2047, the first `n`.
fn moving_keys(n: usize) -> Vec<String> {
    let map = SlotMap::new(2).unwrap();
    keys_of_0(8 * n)
        .into_iter()
        .filter(|k| map.slot_of_key(k) <= 2047)
        .take(n)
        .collect()
}

/// Moves slots 0 … 2047 of four waiting orders with `fence_at`; while they
/// are copied, round after round, `writes` rounds write: the order of that
/// round takes its completion (and its next steps run), and the first round
/// also starts an order and buffers an early completion. Returns the rounds
/// and the two harnesses.
fn copy_under_writes(fence_at: u64, writes: usize) -> (u32, Harness, Harness, Vec<String>) {
    let mut src = Harness::partition(0, 2);
    let mut dst = Harness::partition(1, 2);
    let keys = moving_keys(6);
    for k in &keys[..4] {
        src.start(k);
    }
    src.work();
    let mut round = 0;
    let mut copying = |src: &mut Harness, dst: &mut Harness| {
        if round >= writes {
            return;
        }
        let k = &keys[round];
        // the source takes the write; the target refuses it, naming the source
        let e = dst.publish_result(k, "early").unwrap_err();
        assert!(
            matches!(e, EngineError::OtherPartition { owner: 0, .. }),
            "{e:?}"
        );
        let d = src.publish(k, &format!("done-{k}"));
        assert_eq!(d.outcome, Outcome::Correlated, "{k}");
        if round == 0 {
            src.start(&keys[4]);
            let d = src.publish(&keys[5], "early-5");
            assert_eq!(d.outcome, Outcome::Buffered);
        }
        src.work();
        round += 1;
    };
    let mut fenced = |src: &mut Harness, _: &mut Harness| {
        let e = src.publish_result(&keys[0], "fenced").unwrap_err();
        assert!(matches!(e, EngineError::SlotMoving { to: 1, .. }), "{e:?}");
    };
    let during = During {
        copying: &mut copying,
        fenced: &mut fenced,
        fence_at,
    };
    let (b, rounds) = move_slots(&mut src, &mut dst, (0, 2047), during);
    assert_eq!(b.state, BatchState::Done);
    (rounds, src, dst, keys)
}

#[test]
fn writes_taken_while_slots_are_copied_follow_them_to_the_new_owner() {
    let (rounds, src, mut dst, keys) = copy_under_writes(512, 1);
    assert_eq!(rounds, 0, "a small delta is sent under the fence at once");
    // nothing of the moved slots is left on the source
    assert!(src.messages().is_empty(), "{:?}", src.messages());
    assert!(
        src.db
            .snapshot()
            .instances_after(None, false, 100)
            .unwrap()
            .is_empty()
    );
    // the completion taken while copying is there: a redelivery is a
    // duplicate, and the order went on past its catch
    let d = dst.publish(&keys[0], &format!("done-{}", keys[0]));
    assert_eq!(d.outcome, Outcome::Duplicate);
    // the others still wait for theirs
    for k in &keys[1..4] {
        let d = dst.publish(k, &format!("done-{k}"));
        assert_eq!(d.outcome, Outcome::Correlated, "{k}");
    }
    // the order started while copying is there, and the early completion
    // buffered then takes the order that starts for it now
    assert_eq!(
        dst.db
            .snapshot()
            .instances_after(None, false, 100)
            .unwrap()
            .len(),
        5
    );
    let late = dst.start(&keys[5]);
    dst.work();
    let m = dst
        .messages()
        .into_iter()
        .find(|m| m.message_id == "early-5")
        .unwrap();
    assert_eq!(m.instance, Some(late), "{m:?}");
}

#[test]
fn a_large_delta_is_copied_again_before_the_fence_and_the_rounds_end() {
    // one round of writes: copied again, then fenced with nothing left
    let (rounds, ..) = copy_under_writes(0, 1);
    assert_eq!(rounds, 1);
    // writes in every round: the fence comes after the last round anyway,
    // and what the rounds wrote is on the target
    let (rounds, _, mut dst, keys) = copy_under_writes(0, 4);
    assert_eq!(rounds, crate::engine::moves::COPY_ROUNDS - 1);
    for k in &keys[..4] {
        let d = dst.publish(k, &format!("done-{k}"));
        assert_eq!(d.outcome, Outcome::Duplicate, "{k}");
    }
}

#[test]
fn a_job_the_sources_own_handler_holds_is_ready_at_the_target() {
    let mut src = Harness::partition(0, 2);
    let mut dst = Harness::partition(1, 2);
    let keys = moving_keys(1);
    let order = src.start(&keys[0]);
    src.step(|e| e.run_continuations(100)).unwrap();
    let held = src
        .step(|e| e.lock_jobs("auftragUebergeben", 10, "pid-0", 300_000, true, None))
        .unwrap();
    assert_eq!(held.len(), 1);
    let during = During {
        copying: &mut nothing,
        fenced: &mut nothing,
        fence_at: 512,
    };
    move_slots(&mut src, &mut dst, (0, 2047), during);
    // the source's handler finishes late: refused, naming the owner
    let j = &held[0];
    let e = src
        .step(|e| e.complete_job(j.task.job, Some(j.lease_token), &Vars::new()))
        .unwrap_err();
    assert!(
        matches!(e, EngineError::OtherPartition { owner: 1, .. }),
        "{e:?}"
    );
    // at the target the job is ready at once, not held for the lease's
    // five minutes, and its order goes on
    let jobs = dst
        .step(|e| e.lock_jobs("auftragUebergeben", 10, "pid-1", 30_000, true, None))
        .unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.task.instance).collect::<Vec<_>>(),
        [order]
    );
    dst.step(|e| e.complete_job(jobs[0].task.job, Some(jobs[0].lease_token), &Vars::new()))
        .unwrap();
    dst.check_invariants();
}

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

    /// Items `from ..` (at most `limit`) of move `batch`, as the source sends them.
    fn export(&self, batch: u64, from: u64, limit: usize) -> Vec<Moved> {
        let defs = &self.defs;
        let pairs = |p: &str, v: u32, vars: &Vars| -> Vec<(String, String)> {
            defs.get(p, v)
                .map(|m| {
                    m.correlation_pairs(vars)
                        .map(|(a, b)| (a.to_string(), b))
                        .collect()
                })
                .unwrap_or_default()
        };
        self.db
            .snapshot()
            .export_items(batch, from, limit, &pairs)
            .unwrap()
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

/// Moves the slots of partition 0 in `first ..= last` to partition 1, two
/// items a slice, each slice sent twice; `during` runs while the slots are
/// fenced. Returns the move's batch.
fn move_slots(
    src: &mut Harness,
    dst: &mut Harness,
    (first, last): (u32, u32),
    during: impl FnOnce(&mut Harness, &mut Harness),
) -> BatchRecord {
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
    during(src, dst);
    let sm = src.slot_move(b.id);
    let counters = src.counters();
    let mut at = 0;
    while at < b.items {
        let records = src.export(b.id, at, 2);
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
        src.mv(MoveCommand::Exported { batch: b.id, upto }).unwrap();
        at = upto;
    }
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
            return r;
        }
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
    let b = move_slots(&mut src, &mut dst, (first, last), |src, dst| {
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
    });
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
    assert_eq!(s.moves[0].phase, MovePhase::Exporting);
}

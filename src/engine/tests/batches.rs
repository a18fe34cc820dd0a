//! Engine-level tests of durable batches: slices that do each item once,
//! refusals recorded per item with nothing changed, a stop that leaves the
//! rest untouched, and batches over parked messages.

use super::*;
use crate::store::batches::{BatchItem, BatchOp, BatchRecord, BatchState};

impl Harness {
    fn batch(&mut self, op: BatchOp, items: Vec<BatchItem>) -> BatchRecord {
        self.step(|e| e.create_batch(&op, &items)).unwrap()
    }

    fn slice(&mut self, id: u64, limit: usize) -> BatchRecord {
        let r = self.step(|e| e.run_batch(id, limit)).unwrap();
        self.check_invariants();
        r
    }

    fn events_of(&self, id: u64, event: &str) -> usize {
        let snap = self.db.snapshot();
        let rec = snap.instance(id).unwrap().unwrap();
        let model = self.defs.get(&rec.process, rec.version);
        snap.history(&rec, model.as_deref())
            .unwrap()
            .iter()
            .filter(|h| h.event.starts_with(event))
            .count()
    }
}

fn instances(ids: &[u64]) -> Vec<BatchItem> {
    ids.iter().map(|&i| BatchItem::Instance(i)).collect()
}

#[test]
fn a_cancel_batch_works_in_slices_and_does_each_instance_once() {
    let mut h = Harness::reference();
    let orders: Vec<u64> = (0..5).map(|k| h.start(&k.to_string())).collect();
    h.work();
    let mut items = instances(&orders);
    items.insert(2, BatchItem::Instance(999_999));
    let b = h.batch(BatchOp::Cancel, items);
    assert_eq!((b.state, b.items, b.next), (BatchState::Running, 6, 0));
    let mut seen = Vec::new();
    loop {
        let r = h.slice(b.id, 2);
        seen.push(r.next);
        if r.state != BatchState::Running {
            assert_eq!((r.state, r.done, r.refused), (BatchState::Done, 5, 1));
            break;
        }
    }
    assert_eq!(seen, vec![2, 4, 6]);
    for &o in &orders {
        assert_eq!(h.events_of(o, "instance_cancelled"), 1);
    }
    // a done batch runs no more
    assert_eq!(h.slice(b.id, 10).next, 6);
    let status = h.db.snapshot().batch(b.id, 10).unwrap().unwrap();
    assert_eq!(status.refused.len(), 1);
    assert_eq!(status.refused[0].1, BatchItem::Instance(999_999));
    assert!(status.refused[0].2.contains("does not exist"), "{status:?}");
}

#[test]
fn a_stopped_batch_leaves_the_items_it_did_not_reach() {
    let mut h = Harness::reference();
    let orders: Vec<u64> = (0..4).map(|k| h.start(&k.to_string())).collect();
    h.work();
    let b = h.batch(BatchOp::Cancel, instances(&orders));
    h.slice(b.id, 1);
    let stopped = h.step(|e| e.stop_batch(b.id)).unwrap();
    assert_eq!((stopped.state, stopped.next), (BatchState::Cancelled, 1));
    assert_eq!(
        h.slice(b.id, 10).next,
        1,
        "a stopped batch does nothing more"
    );
    assert_eq!(h.events_of(orders[1], "instance_cancelled"), 0);
    assert!(matches!(
        h.step(|e| e.stop_batch(b.id)),
        Err(EngineError::BatchRefused { .. })
    ));
}

#[test]
fn move_token_and_migrate_batches_record_refusals_and_change_nothing_of_them() {
    let mut h = Harness::reference();
    let waiting: Vec<u64> = (0..3).map(|k| h.start(&k.to_string())).collect();
    h.work();
    let early = h.start("early"); // still at the hand-over
    let b = h.batch(
        BatchOp::MoveToken {
            from: "warteAufAbschluss".into(),
            to: "rechnungStellen".into(),
        },
        instances(&[waiting[0], early]),
    );
    let r = h.slice(b.id, 10);
    assert_eq!((r.done, r.refused), (1, 1));
    let status = h.db.snapshot().batch(b.id, 10).unwrap().unwrap();
    assert!(
        status.refused[0]
            .2
            .contains("0 tokens at 'warteAufAbschluss'"),
        "{status:?}"
    );
    assert_eq!(h.events_of(waiting[0], "token_moved_to"), 1);
    // a migration batch moves the others to a version with a new step
    let v2 = REFERENCE.replace("Rechnung stellen", "Rechnung schreiben");
    let keys = [(MSG.to_string(), "auftragId".to_string())].into();
    h.step(|e| e.deploy("ref.bpmn", &v2, &keys, None)).unwrap();
    let plan = crate::engine::MigrationPlan {
        process: "auftrag-ausfuehrung".into(),
        from: 1,
        to: 2,
        map: Default::default(),
    };
    let b = h.batch(BatchOp::Migrate(plan), instances(&waiting[1..]));
    let r = h.slice(b.id, 10);
    assert_eq!((r.state, r.done, r.refused), (BatchState::Done, 2, 0));
    assert_eq!(
        h.db.snapshot()
            .instance(waiting[1])
            .unwrap()
            .unwrap()
            .version,
        2
    );
    // an item of the wrong kind is refused when the batch is created
    let wrong = h.step(|e| e.create_batch(&BatchOp::Requeue, &instances(&[waiting[1]])));
    assert!(
        matches!(wrong, Err(EngineError::BatchRefused { .. })),
        "{wrong:?}"
    );
}

#[test]
fn parked_messages_are_requeued_or_discarded_by_a_batch() {
    let mut h = Harness::reference();
    h.start("1");
    h.work();
    h.publish("1", "first");
    let late: Vec<String> = (0..3)
        .map(|n| {
            let id = format!("late-{n}");
            assert_eq!(h.publish("1", &id).outcome, Outcome::Parked);
            format!("{MSG}/{id}")
        })
        .collect();
    let items: Vec<BatchItem> = late.iter().cloned().map(BatchItem::Message).collect();
    let b = h.batch(
        BatchOp::Discard {
            by: "ops".into(),
            why: "late".into(),
        },
        items[..2].to_vec(),
    );
    let r = h.slice(b.id, 10);
    assert_eq!((r.done, r.refused), (2, 0));
    let states: Vec<MessageState> = h.messages().iter().map(|m| m.state).collect();
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == MessageState::Discarded)
            .count(),
        2
    );
    // requeued, the last one is late again: parked, but done as an item
    let b = h.batch(BatchOp::Requeue, items[2..].to_vec());
    assert_eq!(h.slice(b.id, 10).done, 1);
    let status = h.db.snapshot().batch(b.id, 10).unwrap().unwrap();
    assert!(status.refused.is_empty());
}

#[test]
fn a_delete_batch_removes_ended_instances_and_refuses_running_ones() {
    let mut h = Harness::reference();
    let (ended, running) = (h.start("1"), h.start("2"));
    h.step(|e| e.cancel_instance(ended)).unwrap();
    let b = h.batch(BatchOp::Delete, instances(&[ended, running]));
    let r = h.slice(b.id, 10);
    assert_eq!((r.done, r.refused), (1, 1));
    let snap = h.db.snapshot();
    assert!(snap.instance(ended).unwrap().is_none());
    assert!(snap.instance(running).unwrap().is_some());
    let status = snap.batch(b.id, 10).unwrap().unwrap();
    assert!(status.refused[0].2.contains("still running"), "{status:?}");
}

#[test]
fn retention_removes_ended_batches_with_their_items_and_keeps_running_ones() {
    let mut h = Harness::reference();
    let orders: Vec<u64> = (0..3).map(|k| h.start(&k.to_string())).collect();
    let ended = h.batch(BatchOp::Cancel, instances(&orders[..1]));
    h.slice(ended.id, 10);
    let running = h.batch(BatchOp::Cancel, instances(&orders[1..]));
    h.now += h.cfg.retention + 1;
    h.step(|e| e.cleanup(100)).unwrap();
    h.check_invariants();
    let snap = h.db.snapshot();
    assert!(snap.batch(ended.id, 10).unwrap().is_none());
    assert!(snap.batch_items(ended.id).unwrap().is_empty());
    let kept = snap.batch(running.id, 10).unwrap().unwrap();
    assert_eq!(kept.record.state, BatchState::Running);
    assert_eq!(snap.batch_items(running.id).unwrap().len(), 2);
}

//! Engine-level tests: commands applied to an in-memory redb, one transaction
//! per step, no threads, no log, no fsync — fast enough for many cases. Each
//! step is what one writer batch does (TTL sweep, lease release, the command).

use super::*;
use crate::store::{self, BUFFER, MESSAGES, SUBSCRIPTIONS};
use proptest::prelude::*;
use redb::ReadableDatabase;

const REFERENCE: &str = include_str!("../../bpmn/auftrag-ausfuehrung.bpmn");
const MSG: &str = "AuftragAbgeschlossen";
/// 2026-01-01T00:00:00Z
const T0: Millis = 1_767_225_600_000;

struct Harness {
    db: redb::Database,
    defs: DefCache,
    cfg: Config,
    now: Millis,
}

impl Harness {
    /// An empty in-memory database with the reference model deployed.
    fn reference() -> Self {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        store::init(&db).unwrap();
        let mut h = Harness {
            db,
            defs: DefCache::default(),
            cfg: Config::default(),
            now: T0,
        };
        let keys = [(MSG.to_string(), "auftragId".to_string())].into();
        h.step(|e| e.deploy("ref.bpmn", REFERENCE, &keys, None))
            .unwrap();
        h
    }

    /// One batch: the TTL sweep and lease release every batch does, then `f`.
    fn step<T>(&mut self, f: impl FnOnce(&mut Engine<'_, '_>) -> R<T>) -> R<T> {
        let mut tx = self.db.begin_write().unwrap();
        tx.set_durability(redb::Durability::None).unwrap();
        let out = {
            let mut tables = Tables::open(&tx).unwrap();
            let mut e = Engine::new(&mut tables, &self.defs, &self.cfg, self.now);
            e.expire(10_000).unwrap();
            e.release_expired_leases().unwrap();
            let mut e = Engine::new(&mut tables, &self.defs, &self.cfg, self.now);
            let out = f(&mut e);
            tables.finish().unwrap();
            out
        };
        tx.commit().unwrap();
        out
    }

    fn start(&mut self, key: &str) -> u64 {
        self.step(|e| {
            e.start(
                "auftrag-ausfuehrung",
                crate::vars([("auftragId", key.into())]),
                None,
            )
        })
        .unwrap()
    }

    /// Runs async continuations (the hand-over), so started orders wait.
    fn work(&mut self) {
        self.step(|e| e.run_continuations(1000)).unwrap();
    }

    fn publish(&mut self, key: &str, id: &str) -> Delivery {
        let msg = Publish {
            name: MSG.into(),
            key: key.into(),
            message_id: Some(id.into()),
            ..Default::default()
        };
        self.step(|e| e.publish(&msg)).unwrap()
    }

    /// Every message record, by sequence.
    fn messages(&self) -> Vec<MessageRecord> {
        let r = self.db.begin_read().unwrap();
        let t = r.open_table(MESSAGES).unwrap();
        t.iter()
            .unwrap()
            .map(|row| codec::decode(row.unwrap().1.value()).unwrap())
            .collect()
    }

    /// The invariants every step must keep, read back from the tables.
    fn check_invariants(&self) {
        let r = self.db.begin_read().unwrap();
        let buffer = r.open_table(BUFFER).unwrap();
        let subs = r.open_multimap_table(SUBSCRIPTIONS).unwrap();
        let messages = self.messages();
        // per (message, key): an open subscription xor a buffered message
        for row in subs.iter().unwrap() {
            let (k, _) = row.unwrap();
            let (name, key) = k.value();
            let waiting = buffer
                .range((name, key, 0)..=(name, key, u64::MAX))
                .unwrap()
                .count();
            assert_eq!(
                waiting, 0,
                "({name}, {key}) has a subscription and a buffered message"
            );
        }
        // the buffer index holds exactly the buffered messages
        let mut buffered: Vec<u64> = messages
            .iter()
            .filter(|m| m.state == MessageState::Buffered)
            .map(|m| m.seq)
            .collect();
        let mut indexed: Vec<u64> = buffer
            .iter()
            .unwrap()
            .map(|row| row.unwrap().0.value().2)
            .collect();
        buffered.sort_unstable();
        indexed.sort_unstable();
        assert_eq!(
            buffered, indexed,
            "buffer index and buffered records differ"
        );
        // a correlated message names its instance
        for m in &messages {
            if m.state == MessageState::Correlated {
                assert!(m.instance.is_some(), "{m:?}");
            }
        }
    }
}

#[test]
fn an_early_completion_waits_then_correlates_when_the_order_reaches_its_catch() {
    let mut h = Harness::reference();
    let order = h.start("4711");
    let early = h.publish("4711", "evt-1");
    assert_eq!(early.outcome, Outcome::Buffered);
    h.work();
    let m = &h.messages()[0];
    assert_eq!(m.state, MessageState::Correlated);
    assert_eq!(m.instance, Some(order));
    h.check_invariants();
}

#[test]
fn a_completion_for_an_order_past_its_catch_is_parked_late() {
    let mut h = Harness::reference();
    h.start("1");
    h.work();
    assert_eq!(h.publish("1", "first").outcome, Outcome::Correlated);
    let again = h.publish("1", "second");
    assert_eq!(
        (again.outcome, again.reason),
        (Outcome::Parked, Some(Reason::Late))
    );
}

#[test]
fn two_orders_with_one_key_make_the_completion_ambiguous() {
    let mut h = Harness::reference();
    let (a, b) = (h.start("7"), h.start("7"));
    h.work();
    let d = h.publish("7", "evt");
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Ambiguous))
    );
    let mut both = vec![a, b];
    both.sort_unstable();
    assert_eq!(d.candidates, both);
    h.check_invariants();
}

#[test]
fn a_redelivery_is_a_duplicate_and_a_buffered_message_expires_into_the_parked_list() {
    let mut h = Harness::reference();
    assert_eq!(h.publish("9", "evt").outcome, Outcome::Buffered);
    assert_eq!(h.publish("9", "evt").outcome, Outcome::Duplicate);
    assert_eq!(h.messages().len(), 1);
    h.now += h.cfg.default_ttl + 1;
    h.step(|_| Ok(())).unwrap();
    let m = &h.messages()[0];
    assert_eq!(
        (m.state, m.reason),
        (MessageState::Parked, Some(Reason::Expired))
    );
    h.check_invariants();
}

/// One step of the random walk.
#[derive(Debug, Clone)]
enum Op {
    Start(u8),
    Work,
    Publish(u8, u8),
    Advance(u32),
    Requeue(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..4u8).prop_map(Op::Start),
        Just(Op::Work),
        (0..4u8, 0..6u8).prop_map(|(k, id)| Op::Publish(k, id)),
        (0..172_800u32).prop_map(Op::Advance),
        (0..6u8).prop_map(Op::Requeue),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// After every step of any sequence: one subscription xor a buffered message
    /// per (message, key), the buffer index equals the buffered records, and every
    /// message id has exactly one record.
    #[test]
    fn every_step_keeps_the_engine_invariants(ops in proptest::collection::vec(op(), 1..40)) {
        let mut h = Harness::reference();
        let mut ids = std::collections::BTreeSet::new();
        for op in ops {
            match op {
                Op::Start(k) => { h.start(&k.to_string()); }
                Op::Work => h.work(),
                Op::Publish(k, id) => {
                    let id = format!("evt-{id}");
                    h.publish(&k.to_string(), &id);
                    ids.insert(id);
                }
                Op::Advance(s) => {
                    h.now += u64::from(s) * 1000;
                    h.step(|_| Ok(())).unwrap();
                }
                Op::Requeue(id) => {
                    let _ = h.step(|e| e.requeue(&format!("evt-{id}")));
                }
            }
            h.check_invariants();
        }
        let recorded: Vec<String> = h.messages().into_iter().map(|m| m.message_id).collect();
        prop_assert_eq!(recorded.len(), ids.len(), "one record per message id");
    }
}

//! Model-based test: random sequences of start / publish / advance clock / work /
//! reopen run against postfach and against a small reference interpreter of the
//! reference process. After every step each accepted message has exactly one
//! recorded outcome equal to the model's, and every instance has exactly the
//! tokens the model says: none lost, none duplicated, no invoice twice.
use crate::common;
use common::*;
use postfach::{Config, JobContext, Outcome, Reason};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TTL: u64 = 3_600_000;

#[derive(Debug, Clone)]
enum Op {
    /// Deploys the reference model again; `true` changes its source, so a new version.
    Deploy(bool),
    Start(u8),
    Publish(u8, u8),
    Advance(u64),
    Work,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => any::<bool>().prop_map(Op::Deploy),
        3 => (0u8..3).prop_map(Op::Start),
        4 => (0u8..3, 0u8..10).prop_map(|(k, id)| Op::Publish(k, id)),
        1 => prop_oneof![Just(0u64), Just(600_000), Just(3_540_000), Just(3_660_000), Just(10_800_000)].prop_map(Op::Advance),
        2 => Just(Op::Work),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    BeforeCatch,
    AtCatch,
    AfterCatch,
    Done,
}

#[derive(Debug, Clone, PartialEq)]
enum MState {
    Buffered(u64),
    Correlated(u64),
    Parked(Reason),
}

#[derive(Default)]
struct Model {
    now: u64,
    insts: Vec<(u64, u8, Stage)>, // (engine id, key, stage), creation order
    msgs: BTreeMap<String, (u8, MState)>, // message id → (key, state), accept order by seq kept below
    order: Vec<String>,
}

impl Model {
    fn expire(&mut self) {
        for (_, st) in self.msgs.values_mut() {
            if let MState::Buffered(exp) = st
                && *exp <= self.now
            {
                *st = MState::Parked(Reason::Expired);
            }
        }
    }

    fn publish(&mut self, key: u8, id: &str) -> (Outcome, Option<Reason>) {
        if self.msgs.contains_key(id) {
            return (Outcome::Duplicate, None);
        }
        let at: Vec<usize> = self
            .insts
            .iter()
            .enumerate()
            .filter(|(_, i)| i.1 == key && i.2 == Stage::AtCatch)
            .map(|(n, _)| n)
            .collect();
        let state = if at.len() == 1 {
            self.insts[at[0]].2 = Stage::AfterCatch;
            MState::Correlated(self.insts[at[0]].0)
        } else if at.len() > 1 {
            MState::Parked(Reason::Ambiguous)
        } else if self
            .insts
            .iter()
            .any(|i| i.1 == key && i.2 == Stage::BeforeCatch)
        {
            MState::Buffered(self.now + TTL)
        } else if self.insts.iter().any(|i| i.1 == key) {
            MState::Parked(Reason::Late)
        } else {
            MState::Buffered(self.now + TTL)
        };
        let r = match &state {
            MState::Buffered(_) => (Outcome::Buffered, None),
            MState::Correlated(_) => (Outcome::Correlated, None),
            MState::Parked(r) => (Outcome::Parked, Some(*r)),
        };
        self.msgs.insert(id.to_string(), (key, state));
        self.order.push(id.to_string());
        r
    }

    fn work(&mut self) {
        for n in 0..self.insts.len() {
            let (inst, key, stage) = self.insts[n];
            match stage {
                Stage::BeforeCatch => {
                    let oldest = self.order.iter().find(|id| {
                        let (k, st) = &self.msgs[*id];
                        *k == key && matches!(st, MState::Buffered(_))
                    });
                    if let Some(id) = oldest.cloned() {
                        self.msgs.get_mut(&id).unwrap().1 = MState::Correlated(inst);
                        self.insts[n].2 = Stage::AfterCatch;
                    } else {
                        self.insts[n].2 = Stage::AtCatch;
                    }
                }
                Stage::AtCatch | Stage::Done => {}
                Stage::AfterCatch => {}
            }
        }
        for i in self.insts.iter_mut() {
            if i.2 == Stage::AfterCatch {
                i.2 = Stage::Done;
            }
        }
    }
}

fn check(env: &Env, model: &Model, invoices: &HashMap<u64, u32>) -> Result<(), TestCaseError> {
    let r = env.pf.reader().unwrap();
    for (inst, _, stage) in &model.insts {
        let v = r.instance(*inst).unwrap().unwrap();
        let expected: Vec<&str> = match stage {
            Stage::BeforeCatch => vec!["auftragUebergeben"],
            Stage::AtCatch => vec!["warteAufAbschluss"],
            Stage::AfterCatch => vec!["rechnungStellen"],
            Stage::Done => vec![],
        };
        prop_assert_eq!(&v.waiting_at, &expected, "instance {} tokens", inst);
        prop_assert_eq!(v.state == "completed", *stage == Stage::Done);
        let n = invoices.get(inst).copied().unwrap_or(0);
        prop_assert_eq!(n, u32::from(*stage == Stage::Done), "invoices of {}", inst);
    }
    for (id, (_, st)) in &model.msgs {
        let recs = r.message(id).unwrap();
        prop_assert_eq!(recs.len(), 1, "exactly one record for {}", id);
        let m = &recs[0];
        match st {
            MState::Buffered(exp) => {
                prop_assert_eq!(m.state, "buffered");
                prop_assert_eq!(m.expires_at.clone(), Some(postfach::clock::rfc3339(*exp)));
            }
            MState::Correlated(i) => {
                prop_assert_eq!(m.state, "correlated", "message {}", id);
                prop_assert_eq!(m.instance.clone(), Some(i.to_string()), "message {}", id);
            }
            MState::Parked(reason) => {
                prop_assert_eq!(m.state, "parked", "message {}", id);
                prop_assert_eq!(m.reason, Some(reason.as_str()), "message {}", id);
            }
        }
    }
    let listed = r.messages(&Default::default()).unwrap().len();
    let open = model
        .msgs
        .values()
        .filter(|(_, s)| !matches!(s, MState::Correlated(_)))
        .count();
    prop_assert_eq!(listed, open, "buffered + parked in the engine");
    Ok(())
}

fn register(env: &Env, invoices: &Arc<Mutex<HashMap<u64, u32>>>) {
    // the hand-over: the unbound send task is a job for the provider's worker
    env.pf
        .register_handler(HAND_OVER, |_job: JobContext| async move {
            Ok(postfach::Vars::new())
        });
    let inv = invoices.clone();
    env.pf
        .register_handler("rechnungStellen", move |job: JobContext| {
            let inv = inv.clone();
            async move {
                *inv.lock().unwrap().entry(job.instance).or_default() += 1;
                Ok(postfach::Vars::new())
            }
        });
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let mut env = Env::with_config(Config {
            default_ttl: TTL,
            ..Config::default()
        });
        env.deploy_reference().await;
        let invoices: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
        register(&env, &invoices);
        let mut model = Model {
            now: T0,
            ..Model::default()
        };
        let mut deploys = 0u32;
        for op in ops {
            match op {
                Op::Deploy(changed) => {
                    model.expire();
                    deploys += u32::from(changed);
                    // a comment changes the source, not the behaviour: a new version
                    let xml = match deploys {
                        0 => REFERENCE.to_string(),
                        n => format!("{REFERENCE}<!-- revision {n} -->"),
                    };
                    let keys = [(MESSAGE.to_string(), "auftragId".to_string())].into();
                    let d = env
                        .pf
                        .deploy("auftrag-ausfuehrung.bpmn", &xml, keys)
                        .await
                        .unwrap();
                    prop_assert_eq!(d[0].version, deploys + 1);
                }
                Op::Start(k) => {
                    model.expire();
                    let id = env.start_order(&format!("A{k}")).await;
                    model.insts.push((id, k, Stage::BeforeCatch));
                }
                Op::Publish(k, id) => {
                    model.expire();
                    let mid = format!("m{id}");
                    let expected = model.publish(k, &mid);
                    let d = env
                        .pf
                        .publish(completion(&format!("A{k}"), &mid))
                        .await
                        .unwrap();
                    prop_assert_eq!(
                        (d.outcome, d.reason),
                        expected,
                        "publish {} for key {}",
                        mid,
                        k
                    );
                }
                Op::Advance(ms) => {
                    env.advance(Duration::from_millis(ms));
                    model.now += ms;
                }
                Op::Work => {
                    model.expire();
                    env.pf.work_until_idle().await.unwrap();
                    model.work();
                }
                Op::Reopen => {
                    env.reopen();
                    register(&env, &invoices);
                    model.expire(); // opening commits a batch, which sweeps expiry
                }
            }
            let inv = invoices.lock().unwrap().clone();
            check(&env, &model, &inv)?;
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn every_accepted_message_ends_in_exactly_the_models_outcome(ops in proptest::collection::vec(op(), 1..28)) {
        run(ops)?;
    }
}

//! A cluster created before key slots (tests/fixtures/cluster-before-slots-
//! p0/p1.redb, made by `cargo run --example
//! write_fixture_cluster_before_slots` on that release: 2 partitions, a key
//! on FNV-1a modulo 2, ids `n · 2 + partition`, no slot map) opens with
//! today's release as it is: each partition adopts the slot map that keeps
//! every key where it was (slot s on s mod 2, 4,096 slots, version 1), the
//! ids it handed out keep working, the ids it hands out now carry their slot
//! and lie above every old one, and every order runs to its end.
use postfach::partition::Partition;
use postfach::slots::SlotMap;
use postfach::{ManualClock, Options, Postfach, Publish, vars};

/// The `n`-th key `A-i` partition `index` of 2 owns (as the fixture's
/// writer chose them).
fn owned(index: u32, n: usize) -> String {
    let p = Partition::new(0, 2).unwrap();
    (0..)
        .map(|i| format!("A-{i}"))
        .filter(|k| p.of_key(k) == index)
        .nth(n)
        .unwrap()
}

fn open(dir: &std::path::Path, index: u32) -> Postfach {
    let src = format!(
        "{}/tests/fixtures/cluster-before-slots-p{index}.redb",
        env!("CARGO_MANIFEST_DIR")
    );
    let path = dir.join(format!("p{index}.redb"));
    std::fs::copy(src, &path).unwrap();
    Postfach::open_with(
        &path,
        Options {
            partition: Some(Partition::new(u64::from(index), 2).unwrap()),
            // a minute after the fixture was written: its early message is
            // still within its time to live
            clock: ManualClock::new(1_767_225_660_000),
            ..Options::default()
        },
    )
    .unwrap()
}

async fn complete(pf: &Postfach, key: String, id: &str) -> postfach::Delivery {
    pf.publish(Publish {
        name: "Fertig".into(),
        key,
        message_id: Some(id.into()),
        ..Default::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_cluster_of_two_from_before_slots_runs_on_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let map = SlotMap::new(2).unwrap();
    for index in 0..2u32 {
        let pf = open(dir.path(), index);
        let state = pf.reader().unwrap().slot_state().unwrap().unwrap();
        assert_eq!(state.me, index);
        assert_eq!(state.map, map, "the map that keeps every key where it was");
        assert!(state.moves.is_empty());

        // what the old release handed out: ids n·2 + index
        let old: Vec<u64> = pf
            .reader()
            .unwrap()
            .instances(&Default::default())
            .unwrap()
            .iter()
            .map(|i| i.instance.parse().unwrap())
            .collect();
        assert_eq!(old.len(), if index == 0 { 4 } else { 3 }, "{old:?}");
        // their ids name no slot of their key: no slot moves while they run
        let e = pf
            .begin_slot_move(0, 4095, 1 - index, "http://127.0.0.1:1", None)
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("dates from before this cluster had slots"),
            "{e}"
        );
        assert!(
            old.iter().all(|id| id % 2 == u64::from(index) && *id < 64),
            "{old:?}"
        );
        // their jobs, by the ids the old release gave them
        let jobs = pf.lock_jobs("arbeit", 10, "w", 60_000).await.unwrap();
        assert_eq!(jobs.len(), 3);
        for j in &jobs {
            assert!(
                j.task.job < 64 && j.task.job % 2 == u64::from(index),
                "{}",
                j.task.job
            );
            pf.complete_job(j.task.job, Some(j.lease_token), Default::default())
                .await
                .unwrap();
        }
        // the order whose completion came early starts now: a new id with
        // its key's slot, above every old one; the buffered message takes it
        let late = owned(index, 3);
        let new = pf
            .start("auftrag", vars([("auftragId", late.clone().into())]), None)
            .await
            .unwrap();
        assert_eq!(map.slot_of_id(new), map.slot_of_key(&late));
        assert_eq!(map.partition_of_id(new), index);
        assert!(old.iter().all(|o| new > *o), "{new} above {old:?}");
        let jobs = pf.lock_jobs("arbeit", 10, "w", 60_000).await.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(
            map.slot_of_id(jobs[0].task.job),
            map.slot_of_id(new),
            "a job carries its instance's slot"
        );
        assert!(jobs.iter().all(|j| j.task.job > 64));
        pf.complete_job(
            jobs[0].task.job,
            Some(jobs[0].lease_token),
            Default::default(),
        )
        .await
        .unwrap();
        let v = pf.reader().unwrap().instance(new).unwrap().unwrap();
        assert_eq!(v.state, "completed", "the early completion correlated");

        // every waiting order completes; every key stays on its partition
        let keys: Vec<String> = (0..if index == 0 { 5 } else { 3 })
            .filter(|n| *n != 3)
            .map(|n| owned(index, n))
            .collect();
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(map.partition_of_key(key), index);
            let d = complete(&pf, key.clone(), &format!("done-{index}-{n}")).await;
            assert_eq!(d.outcome.as_str(), "correlated", "{key}");
            // the message record is new: it carries the key's slot
            let seq: u64 = d.message_id.trim_start_matches("pf-").parse().unwrap_or(0);
            assert!(seq == 0 || map.slot_of_id(seq) == map.slot_of_key(key));
        }
        let r = pf.reader().unwrap();
        let all = r.instances(&Default::default()).unwrap();
        assert!(
            all.iter().all(|i| i.state == "completed"),
            "{:?}",
            all.iter()
                .map(|i| (&i.instance, i.state))
                .collect::<Vec<_>>()
        );
        // once every order from before slots has ended, slots move
        let b = pf
            .begin_slot_move(0, 4095, 1 - index, "http://127.0.0.1:1", None)
            .await
            .unwrap();
        assert_eq!(b.op.name(), "move-slots");
        // a key of the other partition is refused, naming it
        let e = pf
            .start(
                "auftrag",
                vars([("auftragId", owned(1 - index, 0).into())]),
                None,
            )
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains(&format!(
                "belongs to partition {} (slot map version 1)",
                1 - index
            )),
            "{e}"
        );
        pf.close();
    }
}

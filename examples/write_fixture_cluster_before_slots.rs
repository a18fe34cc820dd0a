//! Writes tests/fixtures/cluster-before-slots-p0.redb and -p1.redb: the two
//! partitions of a cluster of 2 as the release before key slots made them —
//! a key on FNV-1a modulo 2, every id `n · 2 + partition`, no slot map in
//! the database. On each, three orders wait at their service task (jobs
//! open) and a completion for a fourth key sits in the buffer; on partition
//! 0 a fifth order already waits at its message.
//! tests/a_cluster_from_before_slots_adopts_them.rs opens them with today's
//! release and runs them to the end, so the migration path stays tested.
//! Kept as the generator of those fixtures: `cargo run --example
//! write_fixture_cluster_before_slots` reproduces them only on a release
//! before slots.
use postfach::partition::Partition;
use postfach::{ManualClock, Options, Postfach, Publish, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="fixture">
  <message id="m" name="Fertig" postfach:correlationKey="auftragId"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="arbeit"/>
    <serviceTask id="arbeit"/>
    <sequenceFlow id="f2" sourceRef="arbeit" targetRef="warten"/>
    <receiveTask id="warten" messageRef="m"/>
    <sequenceFlow id="f3" sourceRef="warten" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

/// The `n`-th key `A-i` partition `index` of 2 owns.
fn owned(index: u32, n: usize) -> String {
    let p = Partition::new(0, 2).unwrap();
    (0..)
        .map(|i| format!("A-{i}"))
        .filter(|k| p.of_key(k) == index)
        .nth(n)
        .unwrap()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    for index in 0..2u32 {
        let path = format!("tests/fixtures/cluster-before-slots-p{index}.redb");
        let _ = std::fs::remove_file(&path);
        let clock = ManualClock::new(1_767_225_600_000);
        let pf = Postfach::open_with(
            &path,
            Options {
                clock: clock.clone(),
                partition: Some(Partition::new(u64::from(index), 2).unwrap()),
                ..Options::default()
            },
        )
        .unwrap();
        pf.deploy("auftrag.bpmn", MODEL, Default::default())
            .await
            .unwrap();
        for n in 0..3 {
            pf.start(
                "auftrag",
                vars([("auftragId", owned(index, n).into())]),
                None,
            )
            .await
            .unwrap();
        }
        // early: its order starts after the upgrade
        pf.publish(Publish {
            name: "Fertig".into(),
            key: owned(index, 3),
            message_id: Some(format!("early-{index}")),
            ttl: Some(30 * 86_400_000),
            ..Publish::default()
        })
        .await
        .unwrap();
        if index == 0 {
            pf.start("auftrag", vars([("auftragId", owned(0, 4).into())]), None)
                .await
                .unwrap();
            let jobs = pf.lock_jobs("arbeit", 10, "fixture", 60_000).await.unwrap();
            let last = jobs.iter().max_by_key(|j| j.task.instance).unwrap();
            pf.complete_job(last.task.job, Some(last.lease_token), Default::default())
                .await
                .unwrap();
        }
        pf.close();
    }
}

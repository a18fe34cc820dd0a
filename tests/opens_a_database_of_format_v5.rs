//! A database written by the release whose definitions are stored as the
//! encoded model (tests/fixtures/format-v5-definitions.redb, made by `cargo
//! run --example write_fixture_v5` on that release: database format 4,
//! partition 1 of 2) opens and runs to the end: the decision it holds still
//! decides, the ad-hoc subprocess completes on its open job, a booking is
//! compensated, and the message that waited in the buffer correlates.
#![cfg(feature = "feel")]
use postfach::partition::Partition;
use postfach::{ManualClock, Options, Postfach, Publish, Vars, vars};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/format-v5-definitions.redb"
);

/// The `n`-th key of the form `PREFIX-i` that partition 1 of 2 owns (as the
/// fixture's writer chose them).
fn owned(prefix: &str, n: usize) -> String {
    let p = Partition::new(1, 2).unwrap();
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| p.of_key(k) == 1)
        .nth(n)
        .unwrap()
}

fn state(pf: &Postfach, id: u64) -> (&'static str, Vec<String>) {
    let v = pf.reader().unwrap().instance(id).unwrap().unwrap();
    let mut at = v.waiting_at.clone();
    at.sort();
    (v.state, at)
}

fn events(pf: &Postfach, id: u64) -> Vec<String> {
    let v = pf.reader().unwrap().instance(id).unwrap().unwrap();
    v.history
        .iter()
        .map(|h| format!("{} {}", h.element, h.event))
        .collect()
}

async fn complete(pf: &Postfach, topic: &str, instance: u64, with: Vars) {
    let jobs = pf.lock_jobs(topic, 10, "test", 60_000).await.unwrap();
    let job = jobs
        .iter()
        .find(|j| j.task.instance == instance)
        .unwrap_or_else(|| panic!("no {topic} job of {instance}: {jobs:?}"));
    pf.complete_job(job.task.job, Some(job.lease_token), with)
        .await
        .unwrap();
}

async fn confirm(pf: &Postfach, key: String, id: &str) {
    pf.publish(Publish {
        name: "Bestaetigt".into(),
        key,
        message_id: Some(id.into()),
        ..Default::default()
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_format_v5_fixture_opens_and_runs_its_instances_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.redb");
    std::fs::copy(FIXTURE, &path).unwrap();

    // looking first: the read-only open changes no byte
    let bytes = std::fs::read(&path).unwrap();
    let ro = Postfach::open_read_only(&path, Options::default()).unwrap();
    assert_eq!(
        state(&ro, 3),
        ("active", vec!["klaeren".into(), "pruefen".into()])
    );
    ro.close();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "read-only changed nothing"
    );

    let pf = Postfach::open_with(
        &path,
        Options {
            clock: ManualClock::new(1_767_225_600_000 + 60_000),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        pf.partition(),
        Partition::new(1, 2).unwrap(),
        "still partition 1 of 2"
    );
    assert_eq!(state(&pf, 5), ("active", vec!["warten".into()]));
    // the deployed decision decides, as evaluated on its own
    let d = pf
        .decide("credit-check", &vars([("amount", 200.into())]))
        .unwrap();
    assert_eq!(d.value, true, "{d:?}");

    // the ad-hoc subprocess completes on the job it had open; the message
    // then correlates and the decision approves
    complete(&pf, "pruefen", 3, vars([("fertig", true.into())])).await;
    assert_eq!(state(&pf, 3), ("active", vec!["warten".into()]));
    confirm(&pf, owned("V", 0), "ok-1").await;
    assert_eq!(state(&pf, 3).0, "completed", "{:#?}", events(&pf, 3));
    assert!(events(&pf, 3).iter().any(|e| e.starts_with("fertig ")));

    // refused credit: the booking made before the upgrade is compensated
    confirm(&pf, owned("V", 1), "ok-2").await;
    assert!(
        events(&pf, 5)
            .iter()
            .any(|e| e.contains("compensating by stornieren")),
        "{:#?}",
        events(&pf, 5)
    );
    complete(&pf, "stornieren", 5, Vars::new()).await;
    assert_eq!(state(&pf, 5).0, "completed", "{:#?}", events(&pf, 5));
    assert!(events(&pf, 5).iter().any(|e| e.starts_with("abgelehnt ")));

    // the early message waited in the buffer: an order for its key takes it
    // once it reaches the wait
    let early = owned("W", 0);
    let id = pf
        .start(
            "fixture-v5",
            vars([("auftragId", early.as_str().into()), ("amount", 100.into())]),
            None,
        )
        .await
        .unwrap();
    let holder = pf.reader().unwrap().instance(id).unwrap().unwrap().tokens[0].token;
    pf.ad_hoc(id, holder, Some("pruefen")).await.unwrap();
    complete(&pf, "pruefen", id, vars([("fertig", true.into())])).await;
    let v = pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.state, "completed", "{:#?}", v.history);
    assert_eq!(v.variables["quelle"], "fixture");
    assert_eq!(pf.reader().unwrap().buffered_count().unwrap(), 0);
    pf.close();
}

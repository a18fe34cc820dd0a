//! A database written by the release before an instance's tokens became rows
//! (tests/fixtures/format-v3-tokens.redb, made by `cargo run --example
//! write_fixture_v3` on that release: tokens, their scopes, locals and
//! boundary subscriptions inside the instance record, a multi-instance body's
//! items and outputs inside its token) opens, its tokens and items move into
//! rows, and its instances run on to the end: the inner instances left get
//! their items, the output collection keeps the result written before the
//! upgrade, and the boundary subscription opened before it still catches.
use postfach::{ManualClock, Options, Outcome, Postfach, Publish, Vars, vars};

fn open(path: &std::path::Path) -> Postfach {
    Postfach::open_with(
        path,
        Options {
            // two hours on: the leases the writer took have run out
            clock: ManualClock::new(1_767_225_600_000 + 7_200_000),
            ..Options::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn the_format_v3_fixture_moves_its_tokens_into_rows_and_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.redb");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/format-v3-tokens.redb"
        ),
        &path,
    )
    .unwrap();

    // looking first: the read-only open migrates in memory and changes no byte
    let bytes = std::fs::read(&path).unwrap();
    let ro = Postfach::open_read_only(&path, Options::default()).unwrap();
    let one = ro.reader().unwrap().instance(1).unwrap().unwrap();
    assert_eq!(one.state, "active");
    ro.close();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "read-only changed nothing"
    );

    let pf = open(&path);
    let r = pf.reader().unwrap();
    let one = r.instance(1).unwrap().unwrap();
    let mut at: Vec<&str> = one.tokens.iter().map(|t| t.element.as_str()).collect();
    at.sort();
    assert_eq!(
        at,
        ["arbeit", "pruefen", "pruefen", "pruefen"],
        "body, two inner instances, arbeit"
    );
    assert_eq!(r.instance(3).unwrap().unwrap().state, "completed");
    drop(r);

    // instance 1: the two checks left get their items from the migrated rows
    let jobs = pf.lock_jobs("pruefen", 100, "test", 60_000).await.unwrap();
    let mut mine: Vec<String> = jobs
        .iter()
        .filter(|j| j.task.instance == 1)
        .map(|j| j.task.variables["position"].as_str().unwrap().to_string())
        .collect();
    mine.sort();
    assert_eq!(mine, ["anna", "carla"]);
    for j in jobs.iter().filter(|j| j.task.instance == 1) {
        let position = j.task.variables["position"].as_str().unwrap();
        pf.complete_job(
            j.task.job,
            Some(j.lease_token),
            vars([("ergebnis", format!("ok {position}").into())]),
        )
        .await
        .unwrap();
    }
    for j in pf.lock_jobs("arbeit", 100, "test", 60_000).await.unwrap() {
        if j.task.instance == 1 {
            pf.complete_job(j.task.job, Some(j.lease_token), Vars::new())
                .await
                .unwrap();
        }
    }
    let task = pf
        .reader()
        .unwrap()
        .tasks(&Default::default())
        .unwrap()
        .into_iter()
        .find(|t| t.instance == "1")
        .expect("the release task of instance 1");
    pf.complete_task(task.task.parse().unwrap(), "test", Vars::new())
        .await
        .unwrap();
    let v = pf.reader().unwrap().instance(1).unwrap().unwrap();
    assert_eq!(v.state, "completed");
    assert_eq!(
        v.variables["ergebnisse"],
        serde_json::json!(["ok anna", "ok ben", "ok carla"]),
        "ben's result was written before the upgrade"
    );

    // instance 2: the boundary subscription opened before the upgrade catches
    let d = pf
        .publish(Publish {
            name: "Storno".into(),
            key: "F-2".into(),
            message_id: Some("storno-2".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (d.outcome, d.instance),
        (Outcome::Correlated, Some(2)),
        "{d:?}"
    );
    let two = pf.reader().unwrap().instance(2).unwrap().unwrap();
    let at: Vec<&str> = two.tokens.iter().map(|t| t.element.as_str()).collect();
    assert!(
        !at.contains(&"arbeit"),
        "the boundary interrupted arbeit: {at:?}"
    );
    assert_eq!(at.iter().filter(|e| **e == "pruefen").count(), 4);
    pf.close();

    // after the migration the file reads the same when opened again
    let pf = open(&path);
    let again = pf.reader().unwrap().instance(1).unwrap().unwrap();
    assert_eq!(again.history.len(), v.history.len());
    assert_eq!(again.variables["ergebnisse"], v.variables["ergebnisse"]);
    pf.close();
}

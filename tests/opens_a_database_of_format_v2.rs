//! A database written by the release before instances became rows
//! (tests/fixtures/format-v2-scopes.redb, made by `cargo run --example
//! write_fixture_v2` on that release: history inside each instance record,
//! token scopes and local variables in the record's tail) opens, its history
//! moves into rows, and its instances — a subprocess waiting for a message
//! under a boundary timer, a parallel multi-instance user task part done —
//! run on to the end.
use postfach::{ManualClock, Options, Postfach, Publish, Vars};

fn open(path: &std::path::Path) -> Postfach {
    Postfach::open_with(
        path,
        Options {
            clock: ManualClock::new(1_767_225_600_000 + 60_000),
            ..Options::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn the_format_v2_fixture_migrates_its_history_to_rows_and_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.redb");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/format-v2-scopes.redb"
        ),
        &path,
    )
    .unwrap();
    // what the release that wrote it showed (its `postfach instance --json`)
    let before = [
        (1, 21, "inner_completed 1"),
        (2, 19, "waiting"),
        (3, 36, "instance_completed"),
    ];

    // looking first: the read-only open migrates in memory and changes no byte
    let bytes = std::fs::read(&path).unwrap();
    let ro = Postfach::open_read_only(&path, Options::default()).unwrap();
    for (id, n, last) in before {
        let v = ro.reader().unwrap().instance(id).unwrap().unwrap();
        assert_eq!(v.history.len(), n, "instance {id}");
        assert_eq!(v.history.last().unwrap().event, last, "instance {id}");
    }
    ro.close();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "read-only changed nothing"
    );

    let pf = open(&path);
    let r = pf.reader().unwrap();
    for (id, n, last) in before {
        let v = r.instance(id).unwrap().unwrap();
        assert_eq!(v.history.len(), n, "instance {id}");
        assert_eq!(v.history.last().unwrap().event, last, "instance {id}");
        assert_eq!(v.history[0].event, "instance_started");
    }
    let one = r.instance(1).unwrap().unwrap();
    assert_eq!(one.state, "active");
    assert_eq!(one.variables["ok_ben"], true);
    let scoped: Vec<(String, Option<u64>)> = one
        .tokens
        .iter()
        .map(|t| (t.element.clone(), t.scope))
        .collect();
    assert!(
        scoped.contains(&("warten".to_string(), Some(2))),
        "{scoped:?}"
    );
    assert_eq!(
        one.tokens
            .iter()
            .filter(|t| t.element == "pruefen" && !t.locals.is_empty())
            .count(),
        2,
        "two inner instances left, each with its item"
    );
    let open_tasks = r.tasks(&Default::default()).unwrap();
    assert_eq!(open_tasks.len(), 5);
    drop(r);

    // instance 1 runs on: the two reviews left and its delivery
    for t in open_tasks.iter().filter(|t| t.instance == "1") {
        let user = t.assignee.clone().unwrap();
        pf.complete_task(t.task.parse().unwrap(), &user, Vars::new())
            .await
            .unwrap();
    }
    let d = pf
        .publish(Publish {
            name: "Geliefert".into(),
            key: "F-1".into(),
            message_id: Some("geliefert-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(d.instance, Some(1), "{d:?}");
    let v = pf.reader().unwrap().instance(1).unwrap().unwrap();
    assert_eq!(v.state, "completed");
    let events: Vec<&str> = v.history.iter().map(|h| h.event.as_str()).collect();
    assert_eq!(events[..21].len(), 21);
    assert_eq!(
        events[20], "inner_completed 1",
        "the old entries keep their place"
    );
    assert!(events[21..].contains(&"message_correlated"), "{events:?}");
    assert_eq!(*events.last().unwrap(), "instance_completed");
    pf.close();

    // after the migration the file reads the same when opened again
    let pf = open(&path);
    let again = pf.reader().unwrap().instance(1).unwrap().unwrap();
    assert_eq!(again.history.len(), v.history.len());
    pf.close();
}

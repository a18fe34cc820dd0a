//! `postfach compact` gives the space that retention freed back to the file
//! system, offline, and keeps every record that was still there: an active
//! instance with its tokens and variables, a buffered message, the history.
//! Against a running writer it refuses to start, naming the lock.
#![cfg(feature = "server")]
use crate::common;
use common::*;
use postfach::{ManualClock, Options, Postfach, Publish, Vars, vars};
use std::time::Duration;

const DONE: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <process id="kurz" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn compact_shrinks_the_file_after_cleanup_and_keeps_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.redb");
    let clock = ManualClock::new(1_767_225_600_000);
    let open = || {
        Postfach::open_with(
            &db,
            Options {
                clock: clock.clone(),
                ..Options::default()
            },
        )
        .unwrap()
    };
    let pf = open();
    pf.deploy("kurz.bpmn", DONE, Default::default())
        .await
        .unwrap();
    pf.deploy(
        "auftrag.bpmn",
        postfach::demo::REFERENCE_BPMN,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    // 3,000 instances that complete at once, each with a large variable
    let filler = "x".repeat(2_000);
    for _ in 0..3_000 {
        pf.start("kurz", vars([("notiz", filler.clone().into())]), None)
            .await
            .unwrap();
    }
    pf.close();
    clock.advance(Duration::from_secs(32 * 86_400));
    let pf = open();
    // what stays: an order waiting for its hand-over, a buffered message
    let active = pf
        .start(
            "auftrag-ausfuehrung",
            vars([("auftragId", "4711".into())]),
            None,
        )
        .await
        .unwrap();
    pf.publish(Publish {
        name: "AuftragAbgeschlossen".into(),
        key: "9999".into(),
        message_id: Some("frueh-9999".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    loop {
        let (_, _, more) = pf.cleanup(1_000).await.unwrap();
        if !more {
            break;
        }
    }
    // a running writer holds the file: compact refuses, naming it
    let o = cli(&db, &["compact"]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&db.display().to_string()), "{err}");
    pf.close();

    let o = cli(&db, &["--json", "compact"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let after = std::fs::metadata(&db).unwrap().len();
    // "before" is the file once opened and closed cleanly (the log folded in)
    let before = report["bytes_before"].as_u64().unwrap();
    assert_eq!(report["bytes_after"], after);
    assert!(
        after * 2 < before,
        "compact gave the freed pages back: {before} → {after} bytes"
    );

    let pf = open();
    let r = pf.reader().unwrap();
    let v = r
        .instance(active)
        .unwrap()
        .expect("the active order is kept");
    assert_eq!(v.state, "active");
    assert_eq!(v.variables["auftragId"], "4711");
    assert!(!v.tokens.is_empty());
    assert!(!v.history.is_empty());
    let buffered = r.messages(&Default::default()).unwrap();
    assert!(
        buffered.iter().any(|m| m.message_id == "frueh-9999"),
        "the buffered message is kept"
    );
    drop(r);
    // and it runs on: its async continuation, then the hand-over job
    pf.run_continuations(100).await.unwrap();
    let jobs = pf.lock_jobs(HAND_OVER, 10, "w", 60_000).await.unwrap();
    assert_eq!(jobs.len(), 1);
    pf.complete_job(jobs[0].task.job, Some(jobs[0].lease_token), Vars::new())
        .await
        .unwrap();
    pf.close();
}

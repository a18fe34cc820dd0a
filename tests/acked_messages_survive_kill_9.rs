//! Every acknowledged message survives a kill -9: batches are acknowledged after
//! their write-ahead log record is synced, and the log is replayed at open.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use postfach::Postfach;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn messages_acknowledged_before_a_kill_9_are_all_there_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.redb");
    let xml = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    {
        let pf = Postfach::open(&db).unwrap();
        rt.block_on(pf.deploy(
            "a.bpmn",
            xml,
            [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
        ))
        .unwrap();
        pf.close();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(&db)
        .args(["import", "--concurrency", "64"])
        // no checkpoint during the run: everything acknowledged lives in the log
        .env("POSTFACH_CHECKPOINT_MS", "600000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..200_000 {
            let line = format!(
                "{{\"name\":\"AuftragAbgeschlossen\",\"key\":\"K{}\",\"id\":\"evt-{i}\"}}\n",
                i % 5000
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                break; // the child is gone
            }
        }
    });
    let mut acked = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        assert_eq!(v["outcome"], "buffered", "{v}");
        acked.push(v["message_id"].as_str().unwrap().to_string());
        if acked.len() == 3000 {
            child.kill().unwrap(); // SIGKILL
            break;
        }
    }
    child.wait().unwrap();
    let _ = writer.join();
    assert_eq!(acked.len(), 3000);

    let pf = Postfach::open(&db).unwrap();
    assert!(
        pf.recovery().replayed_batches > 0,
        "the acknowledged batches came back from the log"
    );
    let r = pf.reader().unwrap();
    let missing: Vec<&String> = acked
        .iter()
        .filter(|id| r.message(id).unwrap().len() != 1)
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged messages lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    drop(r);
    // the replay left the database consistent: a redelivery of an acknowledged message is a duplicate
    let d = rt
        .block_on(pf.publish(postfach::Publish {
            name: "AuftragAbgeschlossen".into(),
            key: "K7".into(),
            message_id: Some(acked[7].clone()),
            ..Default::default()
        }))
        .unwrap();
    assert_eq!(d.outcome, postfach::Outcome::Duplicate);
    pf.close();
    // and a clean reopen has nothing left to replay
    assert_eq!(Postfach::open(&db).unwrap().recovery().replayed_batches, 0);
}

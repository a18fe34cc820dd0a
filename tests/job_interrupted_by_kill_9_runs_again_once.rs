//! A job interrupted by kill -9 runs again as soon as the engine is restarted
//! (its lease is released at open, not after it expires), and the invoice it had
//! already issued is not issued twice: the ledger is keyed by the job's
//! idempotency key.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use postfach::reference::InvoiceLedger;
use postfach::{Postfach, Publish, vars};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn cli(db: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_postfach"));
    c.arg("--db")
        .arg(db)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn invoice_interrupted_by_kill_9_is_resumed_at_restart_and_issued_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.redb");
    let ledger = dir.path().join("invoices.tsv");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let instance = {
        let pf = Postfach::open(&db).unwrap();
        let xml = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
        rt.block_on(pf.deploy(
            "a.bpmn",
            xml,
            [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
        ))
        .unwrap();
        let id = rt
            .block_on(pf.start(
                "auftrag-ausfuehrung",
                vars([("auftragId", "4711".into())]),
                None,
            ))
            .unwrap();
        let msg = Publish {
            name: "AuftragAbgeschlossen".into(),
            key: "4711".into(),
            message_id: Some("evt-1".into()),
            ..Default::default()
        };
        rt.block_on(pf.publish(msg)).unwrap();
        // the provider's worker takes the hand-over (an unbound send task's job)
        rt.block_on(pf.run_continuations(10)).unwrap();
        for j in rt
            .block_on(pf.lock_jobs("auftragUebergeben", 1, "provider", 60_000))
            .unwrap()
        {
            rt.block_on(pf.complete_job(j.task.job, Some(j.lease_token), Default::default()))
                .unwrap();
        }
        pf.close();
        id
    };

    // the executor issues the invoice, then the invoice system hangs: kill -9 mid-job
    let mut child = cli(&db)
        .args(["work", "--invoice-ledger"])
        .arg(&ledger)
        .args(["--invoice-delay", "10m"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while InvoiceLedger::entries(&ledger).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the invoice was never issued");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    {
        let pf = Postfach::open(&db).unwrap();
        assert_eq!(
            pf.recovery().released_leases,
            1,
            "the dead worker's lease is released at open, not after it expires"
        );
        let jobs = pf.reader().unwrap().jobs(false).unwrap();
        assert_eq!(
            (jobs.len(), jobs[0].state),
            (1, "ready"),
            "the interrupted job is runnable at once"
        );
        pf.close();
    }

    let out = cli(&db)
        .args(["--json", "work", "--until-idle", "--invoice-ledger"])
        .arg(&ledger)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["tasks_completed"], 1,
        "the job ran again after the restart"
    );

    let entries = InvoiceLedger::entries(&ledger).unwrap();
    assert_eq!(entries.len(), 1, "invoiced exactly once: {entries:?}");
    assert_eq!(entries[0].1, "4711");
    let pf = Postfach::open(&db).unwrap();
    assert_eq!(
        pf.reader()
            .unwrap()
            .instance(instance)
            .unwrap()
            .unwrap()
            .state,
        "completed"
    );
}

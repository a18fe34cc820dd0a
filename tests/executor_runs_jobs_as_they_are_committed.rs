//! The executor picks up new jobs when they are committed (no polling interval),
//! wakes at the due time of a retry, survives panicking handlers and, when
//! stopped, lets running handlers finish.
use postfach::jobs::ExecutorConfig;
use postfach::{Config, JobContext, Options, Postfach, Publish, Vars, vars};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");

async fn open(dir: &tempfile::TempDir, config: Config) -> Postfach {
    let pf = Postfach::open_with(
        dir.path().join("x.redb"),
        Options {
            config,
            ..Options::default()
        },
    )
    .unwrap();
    pf.deploy(
        "a.bpmn",
        REFERENCE,
        [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into(),
    )
    .await
    .unwrap();
    pf
}

/// Waits (bounded, as a safety net only) until `done` reaches `n`.
async fn until(done: &AtomicU32, n: u32) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while done.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the executor finished the work");
}

fn completion(key: &str) -> Publish {
    Publish {
        name: "AuftragAbgeschlossen".into(),
        key: key.into(),
        message_id: Some(format!("e-{key}")),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_flow_through_without_anyone_calling_work() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open(&dir, Config::default()).await;
    let invoiced = Arc::new(AtomicU32::new(0));
    let i = invoiced.clone();
    pf.register_handler("rechnungStellen", move |_job: JobContext| {
        let i = i.clone();
        async move {
            i.fetch_add(1, Ordering::SeqCst);
            Ok(Vars::new())
        }
    });
    let exec = pf.start_executor(ExecutorConfig::default());
    for k in 0..40 {
        let key = format!("A{k}");
        pf.start(
            "auftrag-ausfuehrung",
            vars([("auftragId", key.clone().into())]),
            None,
        )
        .await
        .unwrap();
        pf.publish(completion(&key)).await.unwrap();
    }
    until(&invoiced, 40).await;
    let report = exec.stop().await.unwrap();
    assert_eq!(report.tasks_completed, 40);
    assert_eq!(
        report.continuations, 80,
        "hand-over and invoice continuations"
    );
    let done = pf
        .reader()
        .unwrap()
        .instances(&postfach::ops::InstanceFilter {
            state: Some("completed".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(done.len(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_retries_at_its_due_time_and_a_panic_is_only_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open(
        &dir,
        Config {
            retry_base: 50,
            ..Config::default()
        },
    )
    .await;
    let attempts = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let (a, d) = (attempts.clone(), done.clone());
    pf.register_handler("rechnungStellen", move |job: JobContext| {
        let (a, d) = (a.clone(), d.clone());
        async move {
            a.fetch_add(1, Ordering::SeqCst);
            match job.attempt {
                1 => Err("invoice system down".into()),
                2 => panic!("invoice system exploded"),
                _ => {
                    d.fetch_add(1, Ordering::SeqCst);
                    Ok(Vars::new())
                }
            }
        }
    });
    let exec = pf.start_executor(ExecutorConfig::default());
    pf.start(
        "auftrag-ausfuehrung",
        vars([("auftragId", "1".into())]),
        None,
    )
    .await
    .unwrap();
    pf.publish(completion("1")).await.unwrap();
    until(&done, 1).await;
    let report = exec.stop().await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!((report.tasks_failed, report.tasks_completed), (2, 1));
    assert!(pf.reader().unwrap().jobs(false).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_lets_running_handlers_finish() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open(&dir, Config::default()).await;
    let started = Arc::new(AtomicU32::new(0));
    let s = started.clone();
    pf.register_handler("rechnungStellen", move |_job: JobContext| {
        let s = s.clone();
        async move {
            s.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(Vars::new())
        }
    });
    let exec = pf.start_executor(ExecutorConfig {
        concurrency: 4,
        ..Default::default()
    });
    pf.start(
        "auftrag-ausfuehrung",
        vars([("auftragId", "1".into())]),
        None,
    )
    .await
    .unwrap();
    pf.publish(completion("1")).await.unwrap();
    until(&started, 1).await;
    let report = exec.stop().await.unwrap();
    assert_eq!(
        report.tasks_completed, 1,
        "the running handler was waited for and recorded"
    );
    assert!(pf.reader().unwrap().jobs(false).unwrap().is_empty());
}

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
    // the hand-over: the unbound send task is a job for the provider's worker
    pf.register_handler("auftragUebergeben", |_job: JobContext| async move {
        Ok(Vars::new())
    });
    pf
}

/// Registers an invoice handler that counts its calls, then takes `delay`.
fn count_calls(pf: &Postfach, delay: Duration) -> Arc<AtomicU32> {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    pf.register_handler("rechnungStellen", move |_job: JobContext| {
        let c = c.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            Ok(Vars::new())
        }
    });
    calls
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
    let invoiced = count_calls(&pf, Duration::ZERO);
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
    assert_eq!(report.tasks_completed, 80, "40 hand-overs and 40 invoices");
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
    assert_eq!(
        (report.tasks_failed, report.tasks_completed),
        (2, 2),
        "two failed invoice attempts; the hand-over and the third attempt completed"
    );
    assert!(pf.reader().unwrap().jobs(false).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_lets_running_handlers_finish() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open(&dir, Config::default()).await;
    let started = count_calls(&pf, Duration::from_millis(200));
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
        report.tasks_completed, 2,
        "the hand-over, and the running invoice handler was waited for and recorded"
    );
    assert!(pf.reader().unwrap().jobs(false).unwrap().is_empty());
}

const REJECTING: &str = bpmn!(
    r#"
  <error id="e" errorCode="ABGELEHNT"/>
  <process id="pruefung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="pruefen"/>
    <serviceTask id="pruefen"/>
    <boundaryEvent id="abgelehnt" attachedToRef="pruefen"><errorEventDefinition errorRef="e"/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="ok"/>
    <sequenceFlow id="f3" sourceRef="abgelehnt" targetRef="nachbessern"/>
    <serviceTask id="nachbessern"/>
    <sequenceFlow id="f4" sourceRef="nachbessern" targetRef="ende"/>
    <endEvent id="ok"/>
    <endEvent id="ende"/>
  </process>
"#
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_returns_a_bpmn_error_and_the_error_boundary_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let pf = open(&dir, Config::default()).await;
    pf.deploy("p.bpmn", REJECTING, Default::default())
        .await
        .unwrap();
    pf.register_handler("pruefen", |_job: JobContext| async move {
        Err::<Vars, _>(postfach::HandlerError::bpmn("ABGELEHNT", "Kunde gesperrt"))
    });
    let id = pf.start("pruefung", Vars::new(), None).await.unwrap();
    let report = pf.work_until_idle().await.unwrap();
    assert_eq!(
        report.tasks_completed, 1,
        "a caught BPMN error completes the task's job"
    );
    let view = pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.waiting_at, vec!["nachbessern"]);
}

/// Two topics due at once, one of them in parallel with the other.
const TWO_TOPICS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:camunda="http://camunda.org/schema/1.0/bpmn" targetNamespace="t">
  <process id="zwei" isExecutable="true">
    <startEvent id="s" />
    <sequenceFlow id="f0" sourceRef="s" targetRef="split" />
    <parallelGateway id="split" />
    <sequenceFlow id="f1" sourceRef="split" targetRef="langsam" />
    <sequenceFlow id="f2" sourceRef="split" targetRef="schnell" />
    <serviceTask id="langsam" camunda:type="external" camunda:topic="langsam" />
    <serviceTask id="schnell" camunda:type="external" camunda:topic="schnell" />
    <sequenceFlow id="f3" sourceRef="langsam" targetRef="e1" />
    <sequenceFlow id="f4" sourceRef="schnell" targetRef="e2" />
    <endEvent id="e1" />
    <endEvent id="e2" />
  </process>
</definitions>
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_whose_handlers_hang_does_not_starve_another() {
    let dir = tempfile::tempdir().unwrap();
    let pf = Postfach::open(dir.path().join("x.redb")).unwrap();
    pf.deploy("zwei.bpmn", TWO_TOPICS, Default::default())
        .await
        .unwrap();
    // every handler hangs until the test lets it go, counting that it began:
    // whichever topic is asked first has enough jobs to fill every slot
    let release = Arc::new(tokio::sync::Notify::new());
    let begun: Vec<Arc<AtomicU32>> = (0..2).map(|_| Arc::new(AtomicU32::new(0))).collect();
    for (topic, count) in ["langsam", "schnell"].into_iter().zip(&begun) {
        let (r, c) = (release.clone(), count.clone());
        pf.register_handler(topic, move |_job: JobContext| {
            let (r, c) = (r.clone(), c.clone());
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                r.notified().await;
                Ok(Vars::new())
            }
        });
    }
    for _ in 0..10 {
        pf.start("zwei", Vars::new(), None).await.unwrap();
    }
    let exec = pf.start_executor(ExecutorConfig {
        concurrency: 4,
        ..ExecutorConfig::default()
    });
    for count in &begun {
        until(count, 1).await;
    }
    release.notify_waiters();
    drop(exec);
}

//! A service task without a handler waits as a visible job; a registered handler
//! runs it with a stable idempotency key; failures retry and end as incidents,
//! panics included, never as a silent dead end.
use crate::common;
use common::*;
use postfach::{HandlerError, JobContext, JobState, Vars};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[tokio::test]
async fn handler_gets_variables_and_idempotency_key_and_completes_the_order() {
    let env = Env::reference().await;
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let s = seen.clone();
    env.pf
        .register_handler("rechnungStellen", move |job: JobContext| {
            let s = s.clone();
            async move {
                let auftrag = job.variables["auftragId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                s.lock().unwrap().push((auftrag, job.idempotency_key));
                Ok(postfach::vars([("rechnungNr", "R-1".into())]))
            }
        });
    let id = env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    let report = env.pf.work_until_idle().await.unwrap();
    assert_eq!(
        (report.continuations, report.tasks_completed),
        (1, 1),
        "the async before the invoice, and the invoice (the order was handed over)"
    );
    assert_eq!(env.state(id), "completed");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("4711".to_string(), format!("{id}:rechnungStellen:4"))]
    );
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .instance(id)
            .unwrap()
            .unwrap()
            .variables["rechnungNr"],
        "R-1"
    );
}

#[tokio::test]
async fn without_a_handler_the_task_waits_visibly_until_completed_by_hand() {
    let env = Env::reference().await;
    let id = env.waiting_order("1").await;
    env.pf.publish(completion("1", "e")).await.unwrap();
    env.pf.work_until_idle().await.unwrap();
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (
            jobs[0].element.as_str(),
            jobs[0].state,
            jobs[0].topic.as_deref()
        ),
        ("rechnungStellen", "ready", Some("rechnungStellen"))
    );
    env.pf
        .complete_job(jobs[0].job.parse().unwrap(), None, Vars::new())
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn failures_retry_with_backoff_then_become_an_incident_that_can_be_retried() {
    let env = Env::with_config(postfach::Config {
        max_attempts: 3,
        ..Default::default()
    });
    env.deploy_reference().await;
    let calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let c = calls.clone();
    env.pf
        .register_handler("rechnungStellen", move |job: JobContext| {
            let c = c.clone();
            async move {
                c.lock().unwrap().push(job.idempotency_key.clone());
                if job.attempt == 2 {
                    panic!("invoice system exploded");
                }
                Err::<Vars, _>(HandlerError::from("invoice system down"))
            }
        });
    let id = env.waiting_order("1").await;
    env.pf.publish(completion("1", "e")).await.unwrap();
    let r = env.pf.work_until_idle().await.unwrap();
    assert_eq!(r.tasks_failed, 1);
    // the retry is due after 1 s: not before
    assert_eq!(env.pf.work_until_idle().await.unwrap().tasks_failed, 0);
    env.advance(Duration::from_millis(1100)); // 1 s ± 10 % jitter
    assert_eq!(
        env.pf.work_until_idle().await.unwrap().tasks_failed,
        1,
        "a panic is a failed attempt"
    );
    env.advance(Duration::from_millis(2200)); // 2 s ± 10 %
    assert_eq!(env.pf.work_until_idle().await.unwrap().tasks_failed, 1);
    let incidents = env.pf.reader().unwrap().jobs(true).unwrap();
    assert_eq!(incidents.len(), 1);
    assert_eq!(incidents[0].attempts, 3);
    assert_eq!(incidents[0].error.as_deref(), Some("invoice system down"));
    let keys = calls.lock().unwrap().clone();
    assert_eq!(keys.len(), 3);
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "the idempotency key is stable across retries"
    );
    assert_eq!(env.state(id), "incident");

    let job: u64 = incidents[0].job.parse().unwrap();
    env.pf.retry_job(job).await.unwrap();
    assert!(env.pf.reader().unwrap().jobs(true).unwrap().is_empty());
    assert_eq!(env.state(id), "active");
    assert_eq!(
        env.pf.fail_job(job, None, "still down").await.unwrap(),
        JobState::Ready
    );
}

//! A retry is not done when it is accepted: the operator wants to know what
//! the job did next. Where an executor runs, the retry waits (bounded) for it
//! and says `ran`, `incident` again with the error, or who holds it; a job for
//! an external worker says it waits for a worker on its topic.
#![cfg(feature = "server")]
use crate::common;
use common::*;
use postfach::jobs::ExecutorConfig;
use postfach::{Config, JobContext, Vars};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" targetNamespace="t">
  <process id="rechnung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="rechnungStellen"/>
    <serviceTask id="rechnungStellen"/>
    <sequenceFlow id="f2" sourceRef="rechnungStellen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

async fn until<F: Fn() -> bool>(what: F) {
    for _ in 0..400 {
        if what() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_incident_reports_that_it_ran_or_failed_again() {
    let env = Env::with_config(Config {
        max_attempts: 1,
        ..Config::default()
    });
    env.deploy(MODEL).await;
    // the invoice system is down for the first two attempts
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    env.pf
        .register_handler("rechnungStellen", move |_job: JobContext| {
            let c = c.clone();
            async move {
                match c.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => Err("invoice system down".into()),
                    _ => Ok(Vars::new()),
                }
            }
        });
    let exec = env.pf.start_executor(ExecutorConfig::default());
    let id = env.pf.start("rechnung", Vars::new(), None).await.unwrap();
    let incidents = || env.pf.reader().unwrap().jobs(true).unwrap();
    until(|| incidents().len() == 1).await;
    let job: u64 = incidents()[0].job.parse().unwrap();

    let wait = Duration::from_secs(5);
    let r = postfach::contract::retried(&env.pf, job, wait)
        .await
        .unwrap();
    assert_eq!(r["state"], "incident", "{r}");
    assert_eq!(r["next"], "it failed again: invoice system down", "{r}");

    let r = postfach::contract::retried(&env.pf, job, wait)
        .await
        .unwrap();
    assert_eq!(r["state"], "ran", "{r}");
    assert_eq!(env.state(id), "completed");
    exec.stop().await.unwrap();
}

#[tokio::test]
async fn without_an_executor_it_says_what_the_job_waits_for() {
    let env = Env::with_config(Config {
        max_attempts: 1,
        ..Config::default()
    });
    env.deploy(MODEL).await;
    env.pf.start("rechnung", Vars::new(), None).await.unwrap();
    let j = env.lock("rechnungStellen", 1, "w", 60_000).await.remove(0);
    env.pf
        .fail_job(j.task.job, Some(j.lease_token), "down")
        .await
        .unwrap();
    let r = postfach::contract::retried(&env.pf, j.task.job, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(r["state"], "ready", "{r}");
    assert_eq!(
        r["next"], "it waits for a worker on topic rechnungStellen",
        "{r}"
    );
}

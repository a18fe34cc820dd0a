//! Task jobs are handed out under leases. A lease runs out and the job is free
//! again; a worker whose lease was lost cannot complete it; a lease can be
//! extended; failures retry on a schedule and end as incidents, never silently.
use crate::common;
use common::*;
use postfach::{Config, EngineError, backoff};
use postfach::{Error, JobState, Vars};
use std::time::Duration;

async fn invoice_job_ready(env: &Env, key: &str) -> u64 {
    env.waiting_order(key).await;
    env.pf
        .publish(completion(key, &format!("evt-{key}")))
        .await
        .unwrap();
    env.pf.run_continuations(10).await.unwrap();
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    jobs.iter()
        .find(|j| j.kind == "task")
        .expect("invoice job")
        .job
        .parse()
        .unwrap()
}

#[tokio::test]
async fn an_expired_lease_frees_the_job_and_the_late_worker_is_refused() {
    let env = Env::reference().await;
    let job = invoice_job_ready(&env, "1").await;
    let slow = env.lock("rechnungStellen", 10, "worker-a", 30_000).await;
    assert_eq!(slow.len(), 1);
    assert!(
        env.lock("rechnungStellen", 10, "worker-b", 30_000)
            .await
            .is_empty(),
        "locked jobs are not handed out twice"
    );

    env.advance(Duration::from_secs(31));
    let fresh = env.lock("rechnungStellen", 10, "worker-b", 30_000).await;
    assert_eq!(
        fresh.len(),
        1,
        "the expired lease made the job available again"
    );
    assert_eq!(
        fresh[0].task.idempotency_key, slow[0].task.idempotency_key,
        "same key for the second attempt"
    );

    let late = env
        .pf
        .complete_job(job, Some(slow[0].lease_token), Vars::new())
        .await
        .unwrap_err();
    assert!(
        matches!(late, Error::Engine(EngineError::StaleLease(j)) if j == job),
        "{late}"
    );
    env.pf
        .complete_job(job, Some(fresh[0].lease_token), Vars::new())
        .await
        .unwrap();
    assert!(env.pf.reader().unwrap().jobs(false).unwrap().is_empty());
}

#[tokio::test]
async fn an_extended_lease_keeps_the_job() {
    let env = Env::reference().await;
    let job = invoice_job_ready(&env, "1").await;
    let held = env.lock("rechnungStellen", 1, "w", 30_000).await.remove(0);
    env.advance(Duration::from_secs(20));
    let until = env
        .pf
        .extend_lease(job, held.lease_token, 30_000)
        .await
        .unwrap();
    assert_eq!(until, T0 + 50_000);
    env.advance(Duration::from_secs(20)); // 40 s after the lock
    assert!(
        env.lock("rechnungStellen", 1, "other", 30_000)
            .await
            .is_empty()
    );
    let view = &env.pf.reader().unwrap().jobs(false).unwrap()[0];
    assert_eq!(
        (view.state, view.lease_owner.as_deref()),
        ("locked", Some("w"))
    );
    env.pf
        .complete_job(job, Some(held.lease_token), Vars::new())
        .await
        .unwrap();
    // a lease that already ran out cannot be extended
    let job2 = invoice_job_ready(&env, "2").await;
    let h2 = env.lock("rechnungStellen", 1, "w", 1_000).await.remove(0);
    env.advance(Duration::from_secs(2));
    env.pf.tick().await.unwrap();
    assert!(matches!(
        env.pf.extend_lease(job2, h2.lease_token, 5_000).await,
        Err(Error::Engine(EngineError::StaleLease(_)))
    ));
}

#[test]
fn backoff_doubles_from_one_second_to_a_ten_minute_cap_with_bounded_jitter() {
    let cfg = Config::default();
    assert_eq!(cfg.max_attempts, 10);
    for attempt in 1..=20u32 {
        let nominal = (1000u64 << (attempt - 1).min(30)).min(600_000) as f64;
        for job in [1u64, 7, 12345] {
            let d = backoff(&cfg, job, attempt) as f64;
            assert!(
                d >= nominal * 0.9 && d <= nominal * 1.1,
                "attempt {attempt}: {d} vs {nominal}"
            );
            assert_eq!(
                backoff(&cfg, job, attempt),
                d as u64,
                "deterministic, so replay agrees"
            );
        }
    }
    let spread: std::collections::HashSet<u64> = (0..50).map(|j| backoff(&cfg, j, 3)).collect();
    assert!(
        spread.len() > 10,
        "jitter spreads retries of different jobs"
    );
}

#[tokio::test]
async fn the_schedule_is_kept_under_an_injected_clock_until_the_incident() {
    let env = Env::with_config(Config {
        max_attempts: 4,
        ..Default::default()
    });
    env.deploy_reference().await;
    let job = invoice_job_ready(&env, "1").await;
    let mut due_after_fail = Vec::new();
    for attempt in 1..=4u32 {
        let l = env.lock("rechnungStellen", 1, "w", 60_000).await;
        assert_eq!(l.len(), 1, "attempt {attempt} is due");
        assert_eq!(l[0].task.attempt, attempt);
        let state = env
            .pf
            .fail_job(job, Some(l[0].lease_token), &format!("down {attempt}"))
            .await
            .unwrap();
        if attempt < 4 {
            assert_eq!(state, JobState::Ready);
            let delay = backoff(&Config::default(), job, attempt);
            env.advance(Duration::from_millis(delay - 1));
            assert!(
                env.lock("rechnungStellen", 1, "w", 60_000).await.is_empty(),
                "not before its time"
            );
            env.advance(Duration::from_millis(1));
            due_after_fail.push(delay);
        } else {
            assert_eq!(state, JobState::Incident);
        }
    }
    let incident = &env.pf.reader().unwrap().jobs(true).unwrap()[0];
    assert_eq!(incident.attempts, 4);
    assert_eq!(
        incident
            .history
            .iter()
            .map(|a| a.error.as_str())
            .collect::<Vec<_>>(),
        vec!["down 1", "down 2", "down 3", "down 4"]
    );
    assert_eq!(
        env.state(1),
        "incident",
        "the instance waits visibly at the incident"
    );
    env.pf.retry_job(job).await.unwrap();
    assert_eq!(env.state(1), "active", "retried: no incident left");
    assert_eq!(env.lock("rechnungStellen", 1, "w", 60_000).await.len(), 1);
}

#[tokio::test]
async fn a_worker_decides_retries_left_and_delay() {
    let env = Env::reference().await;
    let job = invoice_job_ready(&env, "1").await;
    let l = env.lock("rechnungStellen", 1, "w", 60_000).await.remove(0);
    let s = env
        .pf
        .fail_job_with(job, Some(l.lease_token), "try later", Some(1), Some(5_000))
        .await
        .unwrap();
    assert_eq!(s, JobState::Ready);
    env.advance(Duration::from_millis(4_999));
    assert!(env.lock("rechnungStellen", 1, "w", 60_000).await.is_empty());
    env.advance(Duration::from_millis(1));
    let l = env.lock("rechnungStellen", 1, "w", 60_000).await.remove(0);
    let s = env
        .pf
        .fail_job_with(job, Some(l.lease_token), "gave up", Some(0), None)
        .await
        .unwrap();
    assert_eq!(s, JobState::Incident);
}

const RETRY_MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn">
  <process id="r" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="call"/>
    <serviceTask id="call">
      <extensionElements><flowable:failedJobRetryTimeCycle>R2/PT10S</flowable:failedJobRetryTimeCycle></extensionElements>
    </serviceTask>
    <sequenceFlow id="f2" sourceRef="call" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn flowable_retry_time_cycle_sets_attempts_and_fixed_delay() {
    let env = Env::new();
    env.deploy(RETRY_MODEL).await;
    env.pf.start("r", Vars::new(), None).await.unwrap();
    let mut states = Vec::new();
    for _ in 0..3 {
        let l = env.lock("call", 1, "w", 60_000).await.remove(0);
        states.push(
            env.pf
                .fail_job(l.task.job, Some(l.lease_token), "no")
                .await
                .unwrap(),
        );
        env.advance(Duration::from_secs(10));
    }
    // R2: two retries after the first attempt, 10 s apart, then an incident
    assert_eq!(
        states,
        vec![JobState::Ready, JobState::Ready, JobState::Incident]
    );
}

#[tokio::test]
async fn an_external_workers_lease_survives_an_engine_restart() {
    let mut env = Env::reference().await;
    let job = invoice_job_ready(&env, "1").await;
    let held = env
        .lock("rechnungStellen", 1, "python-worker", 600_000)
        .await
        .remove(0);
    env.reopen();
    assert_eq!(
        env.pf.recovery().released_leases,
        0,
        "the worker lives in its own process: its lease stands"
    );
    assert!(
        env.lock("rechnungStellen", 1, "other", 60_000)
            .await
            .is_empty()
    );
    env.pf
        .complete_job(job, Some(held.lease_token), Vars::new())
        .await
        .unwrap();
}

/// Zeebe's `taskDefinition retries` is the number of attempts; an
/// expression there is refused naming it.
#[tokio::test]
async fn zeebe_task_definition_retries_sets_the_attempts() {
    let model = |retries: &str| {
        format!(
            r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <process id="z" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="call"/>
    <serviceTask id="call">
      <extensionElements><zeebe:taskDefinition type="drucken" retries="{retries}"/></extensionElements>
    </serviceTask>
    <sequenceFlow id="f2" sourceRef="call" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#
        )
    };
    let env = Env::new();
    env.deploy(&model("2")).await;
    env.pf.start("z", Vars::new(), None).await.unwrap();
    let mut states = Vec::new();
    for _ in 0..2 {
        let l = env.lock("drucken", 1, "w", 60_000).await.remove(0);
        states.push(
            env.pf
                .fail_job(l.task.job, Some(l.lease_token), "no")
                .await
                .unwrap(),
        );
        env.advance(Duration::from_secs(600));
    }
    assert_eq!(states, vec![JobState::Ready, JobState::Incident]);
    let refused = env.refusal(&model("=anzahl")).await;
    assert!(refused.contains("retries=\"=anzahl\""), "{refused}");
}

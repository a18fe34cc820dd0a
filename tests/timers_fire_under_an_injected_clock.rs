//! Timers are durable jobs, exact under an injected clock: 'no completion within
//! 7 days → escalate' instead of waiting silently forever. Boundary timers
//! (interrupting and not), intermediate timers, the event-based gateway, and BPMN
//! errors caught by error boundary events.
use crate::common;
use common::*;
use postfach::{Outcome, Reason, Vars, vars};
use std::time::Duration;

const DAY: u64 = 24 * 3600 * 1000;

const FRIST: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn">
  <message id="m" name="AuftragAbgeschlossen" postfach:correlationKey="auftragId"/>
  <error id="err" errorCode="POSITIONEN_FEHLEN"/>
  <process id="frist" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="warte"/>
    <receiveTask id="warte" messageRef="m"/>
    <boundaryEvent id="siebenTage" attachedToRef="warte"><timerEventDefinition><timeDuration>P7D</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="warte" targetRef="rechnung"/>
    <sequenceFlow id="f3" sourceRef="siebenTage" targetRef="eskalieren"/>
    <serviceTask id="eskalieren"/>
    <sequenceFlow id="f4" sourceRef="eskalieren" targetRef="e1"/>
    <endEvent id="e1"/>
    <serviceTask id="rechnung"/>
    <boundaryEvent id="erinnerung" attachedToRef="rechnung" cancelActivity="false"><timerEventDefinition><timeCycle>R2/PT1H</timeCycle></timerEventDefinition></boundaryEvent>
    <boundaryEvent id="fehlt" attachedToRef="rechnung"><errorEventDefinition errorRef="err"/></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="rechnung" targetRef="e2"/>
    <sequenceFlow id="f6" sourceRef="erinnerung" targetRef="erinnert"/>
    <intermediateThrowEvent id="erinnert"/>
    <sequenceFlow id="f7" sourceRef="erinnert" targetRef="e3"/>
    <sequenceFlow id="f8" sourceRef="fehlt" targetRef="klaeren"/>
    <serviceTask id="klaeren"/>
    <sequenceFlow id="f9" sourceRef="klaeren" targetRef="e4"/>
    <endEvent id="e2"/>
    <endEvent id="e3"/>
    <endEvent id="e4"/>
  </process>
  <process id="pause" isExecutable="true">
    <startEvent id="ps"/>
    <sequenceFlow id="p1" sourceRef="ps" targetRef="bis"/>
    <intermediateCatchEvent id="bis"><timerEventDefinition><timeDate>2026-01-03T00:00:00Z</timeDate></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="p2" sourceRef="bis" targetRef="pe"/>
    <endEvent id="pe"/>
  </process>
  <process id="weiche" isExecutable="true">
    <startEvent id="ws"/>
    <sequenceFlow id="w1" sourceRef="ws" targetRef="gw"/>
    <eventBasedGateway id="gw"/>
    <sequenceFlow id="w2" sourceRef="gw" targetRef="meldung"/>
    <sequenceFlow id="w3" sourceRef="gw" targetRef="frist3"/>
    <intermediateCatchEvent id="meldung"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
    <intermediateCatchEvent id="frist3"><timerEventDefinition><timeDuration>P3D</timeDuration></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="w4" sourceRef="meldung" targetRef="abrechnen"/>
    <sequenceFlow id="w5" sourceRef="frist3" targetRef="mahnen"/>
    <serviceTask id="abrechnen"/>
    <serviceTask id="mahnen"/>
    <sequenceFlow id="w6" sourceRef="abrechnen" targetRef="we1"/>
    <sequenceFlow id="w7" sourceRef="mahnen" targetRef="we2"/>
    <endEvent id="we1"/>
    <endEvent id="we2"/>
  </process>
</definitions>"#;

async fn env() -> Env {
    let env = Env::new();
    env.deploy(FRIST).await;
    env
}

fn timer_jobs(env: &Env) -> usize {
    env.pf
        .reader()
        .unwrap()
        .jobs(false)
        .unwrap()
        .iter()
        .filter(|j| j.kind == "timer")
        .count()
}

async fn complete(env: &Env, instance: u64, element: &str) {
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    let j = jobs
        .iter()
        .find(|j| j.instance == Some(instance.to_string()) && j.element == element)
        .expect("task job");
    env.pf
        .complete_job(j.job.parse().unwrap(), None, Vars::new())
        .await
        .unwrap();
}

#[tokio::test]
async fn no_completion_within_seven_days_escalates_and_a_later_completion_is_late() {
    let env = env().await;
    let id = env.start_keyed("frist", "4711").await;
    assert_eq!(env.waiting_at(id), vec!["warte"]);
    env.advance(Duration::from_millis(7 * DAY - 1));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), vec!["warte"], "not a millisecond early");
    env.advance(Duration::from_millis(1));
    assert_eq!(env.pf.run_continuations(10).await.unwrap(), 1);
    assert_eq!(
        env.waiting_at(id),
        vec!["eskalieren"],
        "interrupting: the wait is over"
    );
    let d = env.pf.publish(completion("4711", "spaet")).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Late)),
        "the instance is past its catch point"
    );
}

#[tokio::test]
async fn a_completion_in_time_cancels_the_deadline() {
    let env = env().await;
    let id = env.start_keyed("frist", "4711").await;
    assert_eq!(timer_jobs(&env), 1);
    assert_eq!(
        env.pf
            .publish(completion("4711", "ok"))
            .await
            .unwrap()
            .outcome,
        Outcome::Correlated
    );
    // at the invoice task: only its own reminder cycle is armed
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    assert!(
        jobs.iter().all(|j| j.element != "siebenTage"),
        "the 7-day timer is gone: {jobs:?}"
    );
    env.advance(Duration::from_millis(8 * DAY));
    env.pf.run_continuations(10).await.unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert!(
        !view
            .history
            .iter()
            .any(|h| h.element == "siebenTage" && h.event == "timer_fired")
    );
}

#[tokio::test]
async fn a_non_interrupting_cycle_reminds_twice_while_the_task_keeps_waiting() {
    let env = env().await;
    let id = env.start_keyed("frist", "1").await;
    env.pf.publish(completion("1", "ok")).await.unwrap();
    for hour in 1..=3 {
        env.advance(Duration::from_secs(3600));
        env.pf.run_continuations(10).await.unwrap();
        assert_eq!(
            env.waiting_at(id),
            vec!["rechnung"],
            "hour {hour}: the task is not interrupted"
        );
    }
    let fired = env
        .pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .history
        .iter()
        .filter(|h| h.element == "erinnerung" && h.event == "timer_fired")
        .count();
    assert_eq!(fired, 2, "R2: two reminders, then none");
    assert_eq!(timer_jobs(&env), 0);
    complete(&env, id, "rechnung").await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn completing_the_task_cancels_its_pending_reminders() {
    let env = env().await;
    let id = env.start_keyed("frist", "1").await;
    env.pf.publish(completion("1", "ok")).await.unwrap();
    assert_eq!(timer_jobs(&env), 1);
    complete(&env, id, "rechnung").await;
    assert_eq!(timer_jobs(&env), 0);
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_timer_date_waits_until_that_instant() {
    let env = env().await; // the clock stands at 2026-01-01T00:00:00Z
    let id = env.pf.start("pause", Vars::new(), None).await.unwrap();
    env.advance(Duration::from_millis(2 * DAY - 1));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), vec!["bis"]);
    env.advance(Duration::from_millis(1));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn event_gateway_message_first_cancels_the_timer() {
    let env = env().await;
    let id = env.start_keyed("weiche", "7").await;
    assert_eq!(env.waiting_at(id), vec!["gw"]);
    let d = env.pf.publish(completion("7", "m1")).await.unwrap();
    assert_eq!(
        (d.outcome, d.element.as_deref()),
        (Outcome::Correlated, Some("meldung"))
    );
    assert_eq!(env.waiting_at(id), vec!["abrechnen"]);
    assert_eq!(timer_jobs(&env), 0, "the losing timer is gone");
}

#[tokio::test]
async fn event_gateway_timer_first_unsubscribes_the_message() {
    let env = env().await;
    let id = env.start_keyed("weiche", "7").await;
    env.advance(Duration::from_millis(3 * DAY));
    env.pf.run_continuations(10).await.unwrap();
    assert_eq!(env.waiting_at(id), vec!["mahnen"]);
    let d = env.pf.publish(completion("7", "m1")).await.unwrap();
    assert_eq!((d.outcome, d.reason), (Outcome::Parked, Some(Reason::Late)));
}

#[tokio::test]
async fn event_gateway_takes_a_buffered_message_at_once() {
    let env = env().await;
    env.pf.publish(completion("8", "frueh")).await.unwrap();
    let id = env.start_keyed("weiche", "8").await;
    assert_eq!(env.waiting_at(id), vec!["abrechnen"]);
    assert_eq!(timer_jobs(&env), 0);
}

#[tokio::test]
async fn a_bpmn_error_takes_the_error_boundary_and_an_uncaught_one_is_an_incident() {
    let env = env().await;
    let id = env.start_keyed("frist", "1").await;
    env.pf.publish(completion("1", "ok")).await.unwrap();
    let job = env.lock("rechnung", 1, "w", 60_000).await.remove(0);
    let caught = env
        .pf
        .throw_error(
            job.task.job,
            Some(job.lease_token),
            "POSITIONEN_FEHLEN",
            "3 Positionen fehlen",
            vars([("fehlend", 3.into())]),
        )
        .await
        .unwrap();
    assert!(caught);
    assert_eq!(env.waiting_at(id), vec!["klaeren"]);
    assert_eq!(
        timer_jobs(&env),
        0,
        "the reminder of the interrupted task is gone"
    );
    assert_eq!(
        env.pf
            .reader()
            .unwrap()
            .instance(id)
            .unwrap()
            .unwrap()
            .variables["fehlend"],
        3
    );

    let other = env.start_keyed("frist", "2").await;
    env.pf.publish(completion("2", "ok2")).await.unwrap();
    let job = env.lock("rechnung", 1, "w", 60_000).await.remove(0);
    let caught = env
        .pf
        .throw_error(
            job.task.job,
            Some(job.lease_token),
            "UNBEKANNT",
            "?",
            Vars::new(),
        )
        .await
        .unwrap();
    assert!(!caught);
    let incidents = env.pf.reader().unwrap().jobs(true).unwrap();
    assert_eq!(incidents.len(), 1);
    assert!(incidents[0].error.as_deref().unwrap().contains("UNBEKANNT"));
    assert_eq!(env.waiting_at(other), vec!["rechnung"]);
}

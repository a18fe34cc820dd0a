//! A signal boundary event on an activity is subscribed while a token is in
//! the activity and only then: an interrupting one ends the activity (its job
//! is gone) and leaves through the boundary; a non-interrupting one leaves a
//! new token each time and keeps the activity open; an activity that completes
//! takes its boundary subscriptions with it.
use crate::common;
use common::*;
use postfach::{Vars, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <signal id="sStorno" name="Storno"/>
  <signal id="sErinnerung" name="Erinnerung"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="pruefen"/>
    <serviceTask id="pruefen" camunda:type="external" camunda:topic="pruefen"/>
    <boundaryEvent id="storniert" attachedToRef="pruefen">
      <signalEventDefinition signalRef="sStorno"/>
    </boundaryEvent>
    <sequenceFlow id="f2" sourceRef="pruefen" targetRef="freigeben"/>
    <sequenceFlow id="f3" sourceRef="storniert" targetRef="abgebrochen"/>
    <endEvent id="abgebrochen"/>
    <userTask id="freigeben" camunda:assignee="anna"/>
    <boundaryEvent id="erinnert" attachedToRef="freigeben" cancelActivity="false">
      <signalEventDefinition signalRef="sErinnerung"/>
    </boundaryEvent>
    <sequenceFlow id="f4" sourceRef="erinnert" targetRef="nachfassen"/>
    <userTask id="nachfassen" camunda:assignee="ben"/>
    <sequenceFlow id="f5" sourceRef="nachfassen" targetRef="erledigt"/>
    <endEvent id="erledigt"/>
    <sequenceFlow id="f6" sourceRef="freigeben" targetRef="fertig"/>
    <endEvent id="fertig"/>
  </process>
</definitions>"#;

fn job_elements(env: &Env) -> Vec<String> {
    env.jobs().into_iter().map(|j| j.element).collect()
}

fn open_tasks(env: &Env) -> Vec<(String, u64)> {
    env.pf
        .reader()
        .unwrap()
        .tasks(&Default::default())
        .unwrap()
        .into_iter()
        .map(|t| (t.element.clone(), t.task.parse().unwrap()))
        .collect()
}

/// The worker finishes 'pruefen': the instance moves on to 'freigeben'.
async fn check_done(env: &Env) {
    let job = env.jobs()[0].job.parse().unwrap();
    env.pf.complete_job(job, None, Vars::new()).await.unwrap();
}

#[tokio::test]
async fn an_interrupting_signal_boundary_ends_the_task_and_its_job() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env.pf.start("auftrag", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(id), ["pruefen"]);
    assert_eq!(job_elements(&env), ["pruefen"]);

    let reached = env
        .pf
        .signal("Storno", vars([("grund", "Kunde".into())]))
        .await
        .unwrap();
    assert_eq!(reached, 1);
    assert_eq!(env.state(id), "completed");
    assert!(job_elements(&env).is_empty(), "the task's job went with it");
    let inst = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(inst.variables["grund"], "Kunde");
    assert!(
        inst.history
            .iter()
            .any(|h| h.element == "storniert" && h.event == "signal_received"),
        "{:?}",
        inst.history
    );
    // the subscription left with the activity
    assert_eq!(env.pf.signal("Storno", no_vars()).await.unwrap(), 0);
}

#[tokio::test]
async fn a_completed_task_takes_its_signal_boundary_with_it() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env.pf.start("auftrag", no_vars(), None).await.unwrap();
    check_done(&env).await;
    assert_eq!(env.waiting_at(id), ["freigeben"]);
    assert_eq!(
        env.pf.signal("Storno", no_vars()).await.unwrap(),
        0,
        "the instance is past 'pruefen'"
    );
    assert_eq!(env.waiting_at(id), ["freigeben"]);
}

#[tokio::test]
async fn a_non_interrupting_signal_boundary_branches_each_time_and_the_task_stays() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env.pf.start("auftrag", no_vars(), None).await.unwrap();
    check_done(&env).await;

    for round in 1..=2 {
        assert_eq!(env.pf.signal("Erinnerung", no_vars()).await.unwrap(), 1);
        let mut at = env.waiting_at(id);
        at.sort();
        let mut want = vec!["freigeben".to_string()];
        want.extend(std::iter::repeat_n("nachfassen".to_string(), round));
        assert_eq!(at, want, "round {round}");
    }
    let tasks = open_tasks(&env);
    let freigeben = tasks.iter().find(|(e, _)| e == "freigeben").unwrap().1;
    env.pf
        .complete_task(freigeben, "anna", vars([]))
        .await
        .unwrap();
    // the activity is done: its boundary no longer listens
    assert_eq!(env.pf.signal("Erinnerung", no_vars()).await.unwrap(), 0);
    for (_, task) in open_tasks(&env) {
        env.pf.complete_task(task, "ben", vars([])).await.unwrap();
    }
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn two_boundary_events_for_one_signal_on_one_activity_are_refused() {
    let env = Env::new();
    let twice = MODEL.replace(
        r#"<sequenceFlow id="f2""#,
        r#"<boundaryEvent id="nochmal" attachedToRef="pruefen"><signalEventDefinition signalRef="sStorno"/></boundaryEvent>
    <sequenceFlow id="f7" sourceRef="nochmal" targetRef="abgebrochen"/>
    <sequenceFlow id="f2""#,
    );
    let err = env.refusal(&twice).await;
    assert!(
        err.contains("nochmal") && err.contains("second boundary event for signal 'Storno'"),
        "{err}"
    );
    let unnamed = MODEL.replace(
        r#"<signalEventDefinition signalRef="sStorno"/>"#,
        "<signalEventDefinition/>",
    );
    let err = env.refusal(&unnamed).await;
    assert!(
        err.contains("storniert") && err.contains("names no signal"),
        "{err}"
    );
}

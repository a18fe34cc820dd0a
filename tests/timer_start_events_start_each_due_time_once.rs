//! A timer start event starts instances on its schedule, under the injected
//! clock: once per due time, durable across a restart, a due time missed while
//! the database was closed fires once at start-up and the schedule continues
//! where it would have been, and a new version replaces the old schedule.
use crate::common;
use common::*;
use std::time::Duration;

fn model(cycle: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <process id="nightly" isExecutable="true">
    <startEvent id="tick"><timerEventDefinition><timeCycle>{cycle}</timeCycle></timerEventDefinition></startEvent>
    <sequenceFlow id="f0" sourceRef="tick" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#
    )
}

fn started(env: &Env) -> usize {
    env.pf
        .reader()
        .unwrap()
        .instances(&Default::default())
        .unwrap()
        .iter()
        .filter(|i| i.process == "nightly")
        .count()
}

fn schedules(env: &Env) -> Vec<postfach::ops::JobView> {
    env.jobs()
        .into_iter()
        .filter(|j| j.kind == "start_timer")
        .collect()
}

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn each_due_time_starts_one_instance_and_a_missed_one_fires_once() {
    let mut env = Env::new();
    env.deploy(&model("R/PT1H")).await;
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 0, "nothing is due at deploy");
    assert_eq!(schedules(&env).len(), 1);
    // the schedule belongs to no instance: the views say so, not "instance 0"
    assert_eq!(schedules(&env)[0].instance, None);
    let shown = serde_json::to_value(&schedules(&env)[0]).unwrap();
    assert!(shown["instance"].is_null(), "{shown}");

    env.advance(HOUR);
    env.pf.work_until_idle().await.unwrap();
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 1, "one instance for one due time");

    // closed for three and a half hours: three due times pass unseen
    env.reopen();
    env.advance(HOUR * 7 / 2);
    env.reopen();
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(
        started(&env),
        2,
        "the missed due times fire once, not three times"
    );
    // the schedule continues on its hour: the next one is half an hour away
    env.advance(HOUR / 2 - Duration::from_secs(1));
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 2);
    env.advance(Duration::from_secs(1));
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 3);
    let views = env
        .pf
        .reader()
        .unwrap()
        .instances(&Default::default())
        .unwrap();
    assert!(views.iter().all(|v| v.state == "completed"));
}

#[tokio::test]
async fn a_bounded_cycle_stops_and_a_new_version_replaces_the_schedule() {
    let env = Env::new();
    env.deploy(&model("R2/PT1H")).await;
    for _ in 0..4 {
        env.advance(HOUR);
        env.pf.work_until_idle().await.unwrap();
    }
    assert_eq!(started(&env), 2, "R2 fires twice");
    assert!(schedules(&env).is_empty(), "an exhausted schedule is gone");

    env.deploy(&model("R/PT2H")).await;
    env.deploy(&model("R/PT3H")).await;
    assert_eq!(
        schedules(&env).len(),
        1,
        "only the latest version keeps a schedule"
    );
    env.advance(HOUR * 2);
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(
        started(&env),
        2,
        "the replaced two-hour schedule does not fire"
    );
    env.advance(HOUR);
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 3);
    // an identical redeploy keeps the version and its schedule
    env.deploy(&model("R/PT3H")).await;
    assert_eq!(schedules(&env).len(), 1);
}

#[tokio::test]
async fn a_date_in_the_past_fires_once() {
    let env = Env::new();
    let xml = bpmn!(
        r#"
  <process id="nightly" isExecutable="true">
    <startEvent id="once"><timerEventDefinition><timeDate>2025-01-01T00:00:00Z</timeDate></timerEventDefinition></startEvent>
    <sequenceFlow id="f0" sourceRef="once" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    env.deploy(xml).await;
    env.pf.work_until_idle().await.unwrap();
    env.advance(HOUR);
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 1);
    assert!(schedules(&env).is_empty());
}

/// Cron as Camunda 7 writes it (Quartz: seconds first, `?`, weekdays by name);
/// the clock starts on Thursday 2026-01-01 00:00 UTC.
#[tokio::test]
async fn a_cron_cycle_fires_on_its_weekdays_once_each_across_a_restart() {
    let mut env = Env::new();
    env.deploy(&model("0 0 9 ? * MON-FRI")).await;
    let due = |env: &Env| schedules(env)[0].due_at.clone();
    assert_eq!(due(&env), "2026-01-01T09:00:00.000Z");
    env.advance(HOUR * 9);
    env.pf.work_until_idle().await.unwrap();
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 1, "Thursday 09:00");
    assert_eq!(due(&env), "2026-01-02T09:00:00.000Z", "then Friday");
    env.advance(HOUR * 24);
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 2, "Friday 09:00");
    assert_eq!(
        due(&env),
        "2026-01-05T09:00:00.000Z",
        "the weekend is skipped"
    );
    // closed over Monday and Tuesday: the missed due times fire once at start-up
    env.reopen();
    env.advance(HOUR * 24 * 4 + HOUR);
    env.reopen();
    env.pf.work_until_idle().await.unwrap();
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(started(&env), 3, "one instance for the missed due times");
    assert_eq!(
        due(&env),
        "2026-01-07T09:00:00.000Z",
        "and Wednesday is next"
    );
}

#[tokio::test]
async fn a_cron_expression_that_never_fires_is_refused_naming_the_element() {
    let env = Env::new();
    let err = env
        .pf
        .deploy("feb30.bpmn", &model("0 0 0 30 2 ?"), Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("tick") && err.contains("never fires"), "{err}");
}

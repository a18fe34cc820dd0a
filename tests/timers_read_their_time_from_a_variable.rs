//! A timer may read its duration or date from the instance's variables when
//! it starts (`${name}`, `#{order.due}`, Zeebe `=name`), as Camunda 7,
//! Flowable and Zeebe models write it: intermediate timers, boundary timers
//! and the timers behind an event-based gateway. A variable that names no
//! time stops the token at an incident naming the timer and the variable;
//! expressions postfach cannot read are refused at deploy.
use crate::common;
use common::*;
use postfach::{Vars, vars};
use std::time::Duration;

const MINUTE: u64 = 60 * 1000;

const MODEL: &str = bpmn!(
    r#"
  <process id="warten" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="w"/>
    <intermediateCatchEvent id="w"><timerEventDefinition><timeDuration>${wartezeit}</timeDuration></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="f2" sourceRef="w" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <process id="termin" isExecutable="true">
    <startEvent id="ts"/>
    <sequenceFlow id="t1" sourceRef="ts" targetRef="bis"/>
    <intermediateCatchEvent id="bis"><timerEventDefinition><timeDate>#{auftrag.termin}</timeDate></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="t2" sourceRef="bis" targetRef="te"/>
    <endEvent id="te"/>
  </process>
  <process id="frist" isExecutable="true">
    <startEvent id="fs"/>
    <sequenceFlow id="g1" sourceRef="fs" targetRef="bearbeiten"/>
    <serviceTask id="bearbeiten"/>
    <boundaryEvent id="zuSpaet" attachedToRef="bearbeiten"><timerEventDefinition><timeDuration>=frist</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="g2" sourceRef="bearbeiten" targetRef="fe"/>
    <sequenceFlow id="g3" sourceRef="zuSpaet" targetRef="eskalieren"/>
    <serviceTask id="eskalieren"/>
    <sequenceFlow id="g4" sourceRef="eskalieren" targetRef="fe2"/>
    <endEvent id="fe"/>
    <endEvent id="fe2"/>
  </process>
  <process id="weiche" isExecutable="true">
    <startEvent id="ws"/>
    <sequenceFlow id="w1" sourceRef="ws" targetRef="gw"/>
    <eventBasedGateway id="gw"/>
    <sequenceFlow id="w2" sourceRef="gw" targetRef="kurz"/>
    <sequenceFlow id="w3" sourceRef="gw" targetRef="lang"/>
    <intermediateCatchEvent id="kurz"><timerEventDefinition><timeDuration>${wartezeit}</timeDuration></timerEventDefinition></intermediateCatchEvent>
    <intermediateCatchEvent id="lang"><timerEventDefinition><timeDuration>P1D</timeDuration></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="w4" sourceRef="kurz" targetRef="we1"/>
    <sequenceFlow id="w5" sourceRef="lang" targetRef="we2"/>
    <endEvent id="we1"/>
    <endEvent id="we2"/>
  </process>
  <process id="mahnen" isExecutable="true">
    <startEvent id="ns"/>
    <sequenceFlow id="n1" sourceRef="ns" targetRef="zahlen"/>
    <serviceTask id="zahlen"/>
    <boundaryEvent id="mahnung" attachedToRef="zahlen" cancelActivity="false"><timerEventDefinition><timeCycle>${zyklus}</timeCycle></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="n2" sourceRef="zahlen" targetRef="ne"/>
    <sequenceFlow id="n3" sourceRef="mahnung" targetRef="gemahnt"/>
    <intermediateThrowEvent id="gemahnt"/>
    <sequenceFlow id="n4" sourceRef="gemahnt" targetRef="ne2"/>
    <endEvent id="ne"/>
    <endEvent id="ne2"/>
  </process>
  <process id="mitZyklus" isExecutable="true">
    <startEvent id="zs"/>
    <sequenceFlow id="z1" sourceRef="zs" targetRef="erst"/>
    <serviceTask id="erst"/>
    <sequenceFlow id="z2" sourceRef="erst" targetRef="dann"/>
    <serviceTask id="dann"/>
    <sequenceFlow id="z3" sourceRef="dann" targetRef="ze"/>
    <endEvent id="ze"/>
    <subProcess id="nachfragen" triggeredByEvent="true">
      <startEvent id="zes" isInterrupting="false"><timerEventDefinition><timeCycle>=zyklus</timeCycle></timerEventDefinition></startEvent>
      <sequenceFlow id="z4" sourceRef="zes" targetRef="zee"/>
      <endEvent id="zee"/>
    </subProcess>
  </process>
  <process id="mitErinnerung" isExecutable="true">
    <startEvent id="ms"/>
    <sequenceFlow id="m1" sourceRef="ms" targetRef="arbeit"/>
    <serviceTask id="arbeit"/>
    <sequenceFlow id="m2" sourceRef="arbeit" targetRef="me"/>
    <endEvent id="me"/>
    <subProcess id="erinnerungen" triggeredByEvent="true">
      <startEvent id="es" isInterrupting="false"><timerEventDefinition><timeDuration>=erinnerung</timeDuration></timerEventDefinition></startEvent>
      <sequenceFlow id="m3" sourceRef="es" targetRef="erinnern"/>
      <serviceTask id="erinnern"/>
      <sequenceFlow id="m4" sourceRef="erinnern" targetRef="ee"/>
      <endEvent id="ee"/>
    </subProcess>
  </process>
"#
);

async fn env() -> Env {
    let env = Env::new();
    env.deploy(MODEL).await;
    env
}

fn timer_jobs(env: &Env) -> usize {
    env.jobs().iter().filter(|j| j.kind == "timer").count()
}

fn incidents(env: &Env, id: u64) -> Vec<String> {
    env.pf
        .reader()
        .unwrap()
        .instance(id)
        .unwrap()
        .unwrap()
        .incidents
}

async fn tick(env: &Env, ms: u64) {
    env.advance(Duration::from_millis(ms));
    env.pf.run_continuations(10).await.unwrap();
}

#[tokio::test]
async fn a_timer_waits_as_long_as_its_variable_says() {
    let env = env().await;
    let id = env
        .pf
        .start("warten", vars([("wartezeit", "PT10M".into())]), None)
        .await
        .unwrap();
    tick(&env, 10 * MINUTE - 1).await;
    assert_eq!(env.waiting_at(id), vec!["w"]);
    tick(&env, 1).await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_timer_date_is_read_from_a_path_of_a_variable() {
    let env = env().await; // the clock stands at 2026-01-01T00:00:00Z
    let auftrag = serde_json::json!({"termin": "2026-01-01T02:00:00Z"});
    let id = env
        .pf
        .start("termin", vars([("auftrag", auftrag)]), None)
        .await
        .unwrap();
    tick(&env, 120 * MINUTE - 1).await;
    assert_eq!(env.waiting_at(id), vec!["bis"]);
    tick(&env, 1).await;
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_boundary_timer_reads_its_deadline_when_the_task_starts() {
    let env = env().await;
    let id = env
        .pf
        .start("frist", vars([("frist", "PT1H".into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["bearbeiten"]);
    tick(&env, 60 * MINUTE).await;
    assert_eq!(env.waiting_at(id), vec!["eskalieren"]);
}

#[tokio::test]
async fn a_variable_that_names_no_time_is_an_incident_naming_timer_and_variable() {
    let env = env().await;
    for (start, says) in [
        (
            Vars::new(),
            "timer 'w' reads its time from a variable, and variable 'wartezeit' is not set",
        ),
        (
            vars([("wartezeit", "zehn Minuten".into())]),
            "variable 'wartezeit' is 'zehn Minuten'",
        ),
        (
            vars([("wartezeit", 10.into())]),
            "variable 'wartezeit' is 10, not an ISO 8601 duration",
        ),
    ] {
        let id = env.pf.start("warten", start, None).await.unwrap();
        assert_eq!(env.state(id), "incident", "{says}");
        assert!(
            incidents(&env, id).iter().any(|i| i.contains(says)),
            "{says}: {:?}",
            incidents(&env, id)
        );
    }
    assert_eq!(timer_jobs(&env), 0, "no timer starts without its time");

    // a boundary timer: the task does not start without its deadline
    let id = env.pf.start("frist", Vars::new(), None).await.unwrap();
    assert_eq!(env.state(id), "incident");
    assert!(
        incidents(&env, id)
            .iter()
            .any(|i| i.contains("timer 'zuSpaet'") && i.contains("variable 'frist' is not set")),
        "{:?}",
        incidents(&env, id)
    );
    // an event-based gateway: nothing is registered, not even the other timer
    let id = env.pf.start("weiche", Vars::new(), None).await.unwrap();
    assert_eq!(env.state(id), "incident");
    assert!(
        incidents(&env, id)
            .iter()
            .any(|i| i.contains("timer 'kurz'") && i.contains("variable 'wartezeit' is not set")),
        "{:?}",
        incidents(&env, id)
    );
    assert_eq!(timer_jobs(&env), 0);
    assert!(env.jobs().is_empty(), "{:?}", env.jobs());
}

#[tokio::test]
async fn behind_an_event_gateway_the_variable_timer_races_the_written_one() {
    let env = env().await;
    let id = env
        .pf
        .start("weiche", vars([("wartezeit", "PT5M".into())]), None)
        .await
        .unwrap();
    assert_eq!(timer_jobs(&env), 2);
    tick(&env, 5 * MINUTE).await;
    assert_eq!(env.state(id), "completed");
    assert!(env.history(id).iter().any(|(e, _)| e == "we1"));
    assert_eq!(timer_jobs(&env), 0, "the losing timer is gone");
}

#[tokio::test]
async fn timer_expressions_postfach_cannot_read_are_refused_at_deploy() {
    let env = Env::new();
    let one = |timer: &str| {
        format!(
            r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="t"/>
    <intermediateCatchEvent id="t"><timerEventDefinition>{timer}</timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="f2" sourceRef="t" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#
        )
    };
    let err = env
        .refusal(&one("<timeCycle>${zyklen.get(0)}</timeCycle>"))
        .await;
    assert!(
        err.contains("'t'")
            && err.contains("timer value given by the expression '${zyklen.get(0)}'"),
        "{err}"
    );
    // values a model writes with Zeebe's `=` stay values
    for value in [
        "<timeCycle>=R3/PT1H</timeCycle>",
        "<timeDate>=2026-01-02T00:00:00Z</timeDate>",
        "<timeDuration>=PT5M</timeDuration>",
    ] {
        env.deploy(&one(value)).await;
    }
    let err = env
        .refusal(&one("<timeDuration>${minuten * 60}</timeDuration>"))
        .await;
    assert!(
        err.contains("'t'")
            && err.contains("timer value given by the expression '${minuten * 60}'"),
        "{err}"
    );
    let start = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <process id="nacht" isExecutable="true">
    <startEvent id="jede"><timerEventDefinition><timeDate>${wann}</timeDate></timerEventDefinition></startEvent>
    <sequenceFlow id="f1" sourceRef="jede" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;
    let err = env.refusal(start).await;
    assert!(
        err.contains("'jede'") && err.contains("no instance exists yet"),
        "{err}"
    );
}

#[tokio::test]
async fn an_event_subprocess_timer_reads_its_variable_when_its_scope_begins() {
    let env = env().await;
    let id = env
        .pf
        .start(
            "mitErinnerung",
            vars([("erinnerung", "PT30M".into())]),
            None,
        )
        .await
        .unwrap();
    tick(&env, 30 * MINUTE - 1).await;
    assert_eq!(env.waiting_at(id), vec!["arbeit", "erinnerungen"]);
    tick(&env, 1).await;
    // the occurrence's scope and its task; the one-shot listener is done
    assert_eq!(
        env.waiting_at(id),
        vec!["arbeit", "erinnerungen", "erinnern"]
    );
    assert_eq!(timer_jobs(&env), 0);

    let id = env
        .pf
        .start("mitErinnerung", Vars::new(), None)
        .await
        .unwrap();
    assert!(
        incidents(&env, id)
            .iter()
            .any(|i| i.contains("timer 'erinnerungen'")
                && i.contains("variable 'erinnerung' is not set")),
        "{:?}",
        incidents(&env, id)
    );
}

#[tokio::test]
async fn a_cycle_read_from_a_variable_repeats_as_often_as_it_says() {
    let env = env().await;
    let id = env
        .pf
        .start("mahnen", vars([("zyklus", "R2/PT1H".into())]), None)
        .await
        .unwrap();
    let reminders = |env: &Env| {
        env.history(id)
            .iter()
            .filter(|(e, ev)| e == "mahnung" && ev == "timer_fired")
            .count()
    };
    tick(&env, 60 * MINUTE).await;
    assert_eq!(reminders(&env), 1);
    tick(&env, 60 * MINUTE).await;
    assert_eq!(reminders(&env), 2);
    tick(&env, 60 * MINUTE).await;
    assert_eq!(reminders(&env), 2, "R2: two reminders, then none");
    assert_eq!(env.waiting_at(id), vec!["zahlen"]);
    assert_eq!(timer_jobs(&env), 0);

    // a cycle variable that names no cycle is an incident like any timer's
    let id = env
        .pf
        .start("mahnen", vars([("zyklus", "jede Stunde".into())]), None)
        .await
        .unwrap();
    assert!(
        incidents(&env, id)
            .iter()
            .any(|i| i.contains("timer 'mahnung'")
                && i.contains("variable 'zyklus' is 'jede Stunde'")),
        "{:?}",
        incidents(&env, id)
    );
}

#[tokio::test]
async fn a_cycle_whose_variable_stops_naming_one_stops_and_the_history_says_why() {
    let env = env().await;
    let id = env
        .pf
        .start("mitZyklus", vars([("zyklus", "R5/PT1H".into())]), None)
        .await
        .unwrap();
    let fired = |env: &Env| {
        env.history(id)
            .iter()
            .filter(|(e, ev)| e == "nachfragen" && ev == "timer_fired")
            .count()
    };
    tick(&env, 60 * MINUTE).await;
    assert_eq!(fired(&env), 1);
    // the cycle is read again each time it fires: a worker clears it
    env.complete_jobs("erst", vars([("zyklus", serde_json::Value::Null)]))
        .await;
    tick(&env, 60 * MINUTE).await;
    assert_eq!(fired(&env), 2, "the time already scheduled still fires");
    let h = env.history(id);
    assert!(
        h.iter().any(|(e, ev)| e == "nachfragen"
            && ev.starts_with("timer_stopped")
            && ev.contains("variable 'zyklus' is not set")),
        "{h:?}"
    );
    tick(&env, 60 * MINUTE).await;
    assert_eq!(fired(&env), 2, "then it stops");
    assert_eq!(env.waiting_at(id), vec!["dann"]);
}

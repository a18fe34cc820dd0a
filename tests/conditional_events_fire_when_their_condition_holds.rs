//! Conditional events: an intermediate conditional catch event waits until
//! its condition holds, a conditional boundary event fires on its activity
//! when its condition comes to hold (interrupting it, or beside it each time
//! a change finds it true), and a conditional event subprocess starts in its
//! scope. Conditions are asked when the wait begins and after every command
//! that changed the instance's variables; one that cannot be evaluated yet
//! does not hold.
use crate::common;
use common::*;
use postfach::vars;

/// `s → fork → [setzen (job) → e1] and [{branch} → danach (job) → e2]`.
fn model(branch: &str, extra: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <process id="bedingt" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="setzen"/>
    <serviceTask id="setzen"/>
    <sequenceFlow id="f2" sourceRef="setzen" targetRef="e1"/>
    <endEvent id="e1"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="warten"/>
    {branch}
    <sequenceFlow id="f4" sourceRef="warten" targetRef="danach"/>
    <serviceTask id="danach"/>
    <sequenceFlow id="f5" sourceRef="danach" targetRef="e2"/>
    <endEvent id="e2"/>
    {extra}
  </process>
</definitions>"#
    )
}

const CATCH: &str = r#"<intermediateCatchEvent id="warten"><conditionalEventDefinition><condition>${freigabe == true}</condition></conditionalEventDefinition></intermediateCatchEvent>"#;

fn jobs_at(env: &Env, element: &str) -> usize {
    env.jobs().iter().filter(|j| j.element == element).count()
}

#[tokio::test]
async fn a_conditional_catch_waits_until_a_result_makes_its_condition_hold() {
    let env = Env::new();
    env.deploy(&model(CATCH, "")).await;
    let id = env.pf.start("bedingt", no_vars(), None).await.unwrap();
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["setzen", "warten"],
        "freigabe is not set yet: the condition does not hold"
    );
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert!(
        v.tokens
            .iter()
            .any(|t| t.element == "warten" && t.waits_for == "its condition to hold")
    );
    env.complete_jobs("setzen", vars([("freigabe", false.into())]))
        .await;
    assert_eq!(env.waiting_at(id), ["warten"], "false does not let it pass");
    // a second run of the worker, whose result changes the variable
    env.pf
        .add_token(id, "setzen", false)
        .await
        .expect("a second worker run");
    env.complete_jobs("setzen", vars([("freigabe", true.into())]))
        .await;
    assert_eq!(env.waiting_at(id), ["danach"], "the condition holds now");
    assert!(has(&env.history(id), "warten", "condition_met"));
}

#[tokio::test]
async fn a_condition_that_already_holds_lets_the_token_pass_at_once() {
    let env = Env::new();
    env.deploy(&model(CATCH, "")).await;
    let id = env
        .pf
        .start("bedingt", vars([("freigabe", true.into())]), None)
        .await
        .unwrap();
    assert_eq!(sorted(env.waiting_at(id)), ["danach", "setzen"]);
}

#[tokio::test]
async fn an_interrupting_conditional_boundary_ends_its_activity_when_a_change_makes_it_hold() {
    let env = Env::new();
    let branch = r#"<serviceTask id="warten"/>
    <boundaryEvent id="storno" attachedToRef="warten"><conditionalEventDefinition><condition>${storniert}</condition></conditionalEventDefinition></boundaryEvent>
    <sequenceFlow id="f6" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>"#;
    env.deploy(&model(branch, "")).await;
    let id = env.pf.start("bedingt", no_vars(), None).await.unwrap();
    assert_eq!(jobs_at(&env, "warten"), 1);
    env.complete_jobs("setzen", vars([("storniert", true.into())]))
        .await;
    assert_eq!(env.state(id), "completed", "the activity was interrupted");
    assert_eq!(jobs_at(&env, "warten"), 0, "its job went with it");
    assert!(has(&env.history(id), "storno", "condition_met"));
}

#[tokio::test]
async fn a_non_interrupting_conditional_boundary_fires_beside_its_activity_on_each_change_it_holds_for()
 {
    let env = Env::new();
    let branch = r#"<userTask id="warten"/>
    <boundaryEvent id="mahnung" attachedToRef="warten" cancelActivity="false"><conditionalEventDefinition><condition>${stufe > 1}</condition></conditionalEventDefinition></boundaryEvent>
    <sequenceFlow id="f6" sourceRef="mahnung" targetRef="mahnen"/>
    <serviceTask id="mahnen"/>"#;
    env.deploy(&model(branch, "")).await;
    let id = env
        .pf
        .start("bedingt", vars([("stufe", 1.into())]), None)
        .await
        .unwrap();
    assert_eq!(jobs_at(&env, "mahnen"), 0, "1 is not above 1");
    env.complete_jobs("setzen", vars([("stufe", 2.into())]))
        .await;
    assert_eq!(jobs_at(&env, "mahnen"), 1);
    env.pf.add_token(id, "setzen", false).await.unwrap();
    env.complete_jobs("setzen", vars([("stufe", 3.into())]))
        .await;
    assert_eq!(jobs_at(&env, "mahnen"), 2, "a second change it holds for");
    assert!(
        env.waiting_at(id).contains(&"warten".to_string()),
        "the user task stays open"
    );
}

#[tokio::test]
async fn a_conditional_boundary_is_not_asked_before_its_activity_starts() {
    let env = Env::new();
    let branch = r#"<serviceTask id="warten" camunda:asyncBefore="true"/>
    <boundaryEvent id="storno" attachedToRef="warten"><conditionalEventDefinition><condition>${storniert}</condition></conditionalEventDefinition></boundaryEvent>
    <sequenceFlow id="f6" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>"#;
    env.deploy(&model(branch, "")).await;
    let id = env
        .pf
        .start("bedingt", vars([("storniert", true.into())]), None)
        .await
        .unwrap();
    assert!(
        env.waiting_at(id).contains(&"warten".to_string()),
        "waiting for its asyncBefore job, the activity has not begun"
    );
    env.pf.run_continuations(10).await.unwrap();
    assert!(
        has(&env.history(id), "storno", "condition_met"),
        "once it begins, the condition is asked: {:?}",
        env.history(id)
    );
    assert_eq!(jobs_at(&env, "warten"), 0);
}

#[tokio::test]
async fn a_conditional_event_subprocess_interrupts_its_scope_when_its_condition_holds() {
    let env = Env::new();
    let esp = r#"<subProcess id="abbruch" triggeredByEvent="true">
      <startEvent id="as"><conditionalEventDefinition camunda:variableName="abbrechen"><condition>${abbrechen}</condition></conditionalEventDefinition></startEvent>
      <sequenceFlow id="a0" sourceRef="as" targetRef="aufraeumen"/>
      <serviceTask id="aufraeumen"/>
    </subProcess>"#;
    let deployed = env
        .pf
        .deploy_checked(
            "bedingt.bpmn",
            &model(CATCH, esp),
            Default::default(),
            false,
        )
        .await
        .unwrap();
    assert!(
        deployed.warnings.iter().any(|w| w.id == "as"
            && w.message
                .contains("variableName 'abbrechen' is not applied")),
        "{:?}",
        deployed.warnings
    );
    let id = env.pf.start("bedingt", no_vars(), None).await.unwrap();
    env.complete_jobs("setzen", vars([("abbrechen", true.into())]))
        .await;
    assert_eq!(
        env.waiting_at(id),
        ["abbruch", "aufraeumen"],
        "the rest of the process was withdrawn: {:?}",
        env.history(id)
    );
    assert!(has(&env.history(id), "abbruch", "condition_met"));
}

#[tokio::test]
async fn conditions_without_a_condition_or_that_do_not_parse_are_refused_by_name() {
    let env = Env::new();
    let refused = env
        .refusal(&model(
            r#"<intermediateCatchEvent id="warten"><conditionalEventDefinition/></intermediateCatchEvent>"#,
            "",
        ))
        .await;
    assert!(
        refused.contains("'warten': conditionalEventDefinition has no <condition>"),
        "{refused}"
    );
    let refused = env
        .refusal(&model(
            r#"<intermediateCatchEvent id="warten"><conditionalEventDefinition><condition>${a ==}</condition></conditionalEventDefinition></intermediateCatchEvent>"#,
            "",
        ))
        .await;
    assert!(
        refused.contains("'warten': condition '${a ==}'"),
        "{refused}"
    );
    let refused = env
        .refusal(&model(
            CATCH,
            r#"<startEvent id="sb"><conditionalEventDefinition/></startEvent>"#,
        ))
        .await;
    assert!(
        refused.contains("'sb': conditionalEventDefinition has no <condition>"),
        "{refused}"
    );
}

/// A conditional boundary whose own path leads back into its activity,
/// whose condition still holds, would fire forever (each round reopens the
/// boundary, each opening asks it again): after the engine's last round of
/// conditions in one command the next occurrence stops at the boundary event
/// as an incident naming it — the command ends, the instance shows it, and
/// the activity stays open.
#[tokio::test]
async fn conditions_that_keep_firing_each_other_end_in_an_incident_not_in_silence() {
    let env = Env::new();
    let model = bpmn!(
        r#"
  <process id="schleife" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="warten"/>
    <userTask id="warten"/>
    <sequenceFlow id="f1" sourceRef="warten" targetRef="e1"/>
    <endEvent id="e1"/>
    <boundaryEvent id="immerWieder" attachedToRef="warten"><conditionalEventDefinition><condition>${n >= 0}</condition></conditionalEventDefinition></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="immerWieder" targetRef="warten"/>
  </process>
"#
    );
    env.deploy(model).await;
    let id = env
        .pf
        .start("schleife", vars([("n", 0.into())]), None)
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.state, "incident", "{:?}", v.tokens);
    assert!(
        v.tokens.iter().any(|t| t.element == "immerWieder"),
        "the next occurrence waits at the boundary event: {:?}",
        v.tokens
    );
    assert!(
        v.incidents
            .iter()
            .any(|e| e.contains("'immerWieder'") && e.contains("1000 rounds")),
        "{:?}",
        v.incidents
    );
    assert!(
        v.tokens.iter().any(|t| t.element == "warten"),
        "the user task stays open"
    );
    let fired = v
        .history
        .iter()
        .filter(|h| h.element == "immerWieder" && h.event == "condition_met")
        .count();
    assert_eq!(fired, 1000, "one occurrence per round");
}

//! A call activity starts a child instance of the called process (the latest
//! version, or the one its binding names) with the parent's variables or the
//! mapped ones, waits for it, and moves on with the child's variables. A BPMN
//! error or escalation the child does not catch reaches the call activity's
//! boundary events; cancelling the call activity cancels the child with every
//! wait it holds. The instance views link parent and child.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, Reason};

/// The called process: `s → pruefen (job) → e`, or with `inner` instead of
/// the job.
fn child(inner: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <error id="er" errorCode="DEFEKT"/>
  <escalation id="ec" escalationCode="SPAET"/>
  <message id="ml" name="Lieferung"/>
  <process id="kind" isExecutable="true">
    <startEvent id="ks"/>
    <sequenceFlow id="k0" sourceRef="ks" targetRef="pruefen"/>
    {inner}
    <sequenceFlow id="k1" sourceRef="pruefen" targetRef="ke"/>
    <endEvent id="ke"/>
  </process>
</definitions>"#
    )
}

const JOB: &str = r#"<serviceTask id="pruefen"/>"#;

/// The calling process: `s → aufruf (call activity kind, `attrs`, `ext`) →
/// danach (job) → e`, with an error boundary (every code) and a non-interrupting
/// escalation boundary on the call activity.
fn parent(attrs: &str, ext: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn">
  <message id="ms" name="Storno"/>
  <process id="eltern" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="aufruf"/>
    <callActivity id="aufruf" calledElement="kind" {attrs}>{ext}</callActivity>
    <sequenceFlow id="f1" sourceRef="aufruf" targetRef="danach"/>
    <serviceTask id="danach"/>
    <sequenceFlow id="f2" sourceRef="danach" targetRef="e"/>
    <endEvent id="e"/>
    <boundaryEvent id="fehler" attachedToRef="aufruf"><errorEventDefinition/></boundaryEvent>
    <sequenceFlow id="f3" sourceRef="fehler" targetRef="gescheitert"/>
    <endEvent id="gescheitert"/>
    <boundaryEvent id="meldung" attachedToRef="aufruf" cancelActivity="false"><escalationEventDefinition/></boundaryEvent>
    <sequenceFlow id="f4" sourceRef="meldung" targetRef="gemeldet"/>
    <endEvent id="gemeldet"/>
    <boundaryEvent id="storno" attachedToRef="aufruf"><messageEventDefinition messageRef="ms"/></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>
  </process>
</definitions>"#
    )
}

async fn deploy(env: &Env, name: &str, xml: &str) {
    let keys = [
        ("Storno".to_string(), "auftragId".to_string()),
        ("Lieferung".to_string(), "auftragId".to_string()),
    ]
    .into();
    env.pf.deploy(name, xml, keys).await.expect("deploys");
}

async fn start(env: &Env, key: &str) -> u64 {
    env.pf
        .start(
            "eltern",
            postfach::vars([("auftragId", key.into()), ("betrag", 120.into())]),
            None,
        )
        .await
        .unwrap()
}

fn view(env: &Env, id: u64) -> postfach::ops::InstanceView {
    env.pf.reader().unwrap().instance(id).unwrap().unwrap()
}

/// The child instance the call activity's token waits for.
fn child_of(env: &Env, parent: u64) -> u64 {
    let v = view(env, parent);
    let t = v
        .tokens
        .iter()
        .find(|t| t.element == "aufruf")
        .expect("the call activity waits");
    t.waits_for
        .strip_prefix("called instance ")
        .and_then(|r| r.strip_suffix(" to end"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", t.waits_for))
}

#[tokio::test]
async fn a_call_activity_runs_the_child_with_every_variable_and_takes_its_variables_back() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-1").await;
    let kid = child_of(&env, id);
    let k = view(&env, kid);
    assert_eq!(k.process, "kind");
    assert_eq!(k.called_by.as_deref(), Some(id.to_string().as_str()));
    assert_eq!(
        k.variables["betrag"], 120,
        "every variable goes in by default"
    );
    assert_eq!(k.waiting_at, ["pruefen"]);

    env.complete_jobs("pruefen", postfach::vars([("ergebnis", "ok".into())]))
        .await;
    assert_eq!(env.state(kid), "completed");
    assert_eq!(view(&env, id).waiting_at, ["danach"]);
    assert_eq!(
        view(&env, id).variables["ergebnis"],
        "ok",
        "every variable comes back by default"
    );
    assert!(has(
        &env.history(id),
        "aufruf",
        &format!("child_completed {kid}")
    ));
}

#[tokio::test]
async fn camunda_in_and_out_mappings_choose_what_crosses() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    let ext = r#"<extensionElements>
        <camunda:in source="betrag" target="summe"/>
        <camunda:out source="ergebnis" target="pruefung"/>
      </extensionElements>"#;
    deploy(&env, "eltern.bpmn", &parent("", ext)).await;
    let id = start(&env, "A-2").await;
    let kid = child_of(&env, id);
    let k = view(&env, kid);
    assert_eq!(k.variables["summe"], 120);
    assert!(
        !k.variables.contains_key("auftragId"),
        "only the mapped variable goes in"
    );
    env.complete_jobs(
        "pruefen",
        postfach::vars([("ergebnis", "ok".into()), ("intern", 1.into())]),
    )
    .await;
    let p = view(&env, id);
    assert_eq!(p.variables["pruefung"], "ok");
    assert!(!p.variables.contains_key("intern"));
    assert!(!p.variables.contains_key("ergebnis"));
}

#[tokio::test]
async fn a_childs_uncaught_bpmn_error_reaches_the_call_activitys_boundary() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-3").await;
    let kid = child_of(&env, id);
    let job = env.lock("pruefen", 1, "w", 60_000).await.remove(0);
    let caught = env
        .pf
        .throw_error(
            job.task.job,
            Some(job.lease_token),
            "DEFEKT",
            "kaputt",
            no_vars(),
        )
        .await
        .unwrap();
    assert!(
        caught,
        "the parent's call activity catches what the child throws"
    );
    assert_eq!(env.state(id), "completed");
    assert!(has(&env.history(id), "fehler", "error_caught"));
    assert_eq!(
        env.state(kid),
        "cancelled",
        "the child went with the call activity"
    );
    assert!(env.jobs().is_empty());
}

#[tokio::test]
async fn an_error_end_event_in_the_child_reaches_the_parent_too() {
    let env = Env::new();
    let boom = r#"<endEvent id="pruefen"><errorEventDefinition errorRef="er"/></endEvent>"#;
    // `pruefen` is the error end itself; the flow from it to `ke` is never taken
    deploy(
        &env,
        "kind.bpmn",
        &child(boom).replace(
            r#"<sequenceFlow id="k1" sourceRef="pruefen" targetRef="ke"/>"#,
            "",
        ),
    )
    .await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-4").await;
    assert_eq!(env.state(id), "completed");
    assert!(has(&env.history(id), "fehler", "error_caught"));
}

#[tokio::test]
async fn a_non_interrupting_escalation_from_the_child_branches_in_the_parent() {
    let env = Env::new();
    let esc = r#"<intermediateThrowEvent id="hoch"><escalationEventDefinition escalationRef="ec"/></intermediateThrowEvent>
    <sequenceFlow id="kx" sourceRef="hoch" targetRef="pruefen"/>
    <serviceTask id="pruefen"/>"#;
    let xml = child(esc).replace(
        r#"<sequenceFlow id="k0" sourceRef="ks" targetRef="pruefen"/>"#,
        r#"<sequenceFlow id="k0" sourceRef="ks" targetRef="hoch"/>"#,
    );
    deploy(&env, "kind.bpmn", &xml).await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-5").await;
    assert!(has(&env.history(id), "meldung", "escalation_caught"));
    let kid = child_of(&env, id);
    assert_eq!(view(&env, kid).waiting_at, ["pruefen"], "the child goes on");
}

#[tokio::test]
async fn cancelling_the_call_activity_cancels_the_child_and_its_subscription() {
    let env = Env::new();
    let receive = r#"<receiveTask id="pruefen" messageRef="ml"/>"#;
    deploy(&env, "kind.bpmn", &child(receive)).await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-6").await;
    let kid = child_of(&env, id);
    assert_eq!(view(&env, kid).waiting_at, ["pruefen"]);
    let d = env
        .pf
        .publish(Publish {
            name: "Storno".into(),
            key: "A-6".into(),
            message_id: Some("s-6".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(d.element.as_deref(), Some("storno"));
    assert_eq!(env.state(kid), "cancelled");
    assert!(has(&env.history(kid), "kind", "cancelled_by_parent"));
    let late = env
        .pf
        .publish(Publish {
            name: "Lieferung".into(),
            key: "A-6".into(),
            message_id: Some("l-6".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (late.outcome, late.reason),
        (Outcome::Parked, Some(Reason::Late)),
        "the child's receive task was withdrawn with it"
    );
}

#[tokio::test]
async fn the_same_message_awaited_by_parent_and_child_is_parked_ambiguous() {
    let env = Env::new();
    // the child waits for Storno too, under the same key
    let receive = r#"<receiveTask id="pruefen" messageRef="ms2"/>"#;
    let xml = child(receive).replace(
        r#"<message id="ml" name="Lieferung"/>"#,
        r#"<message id="ms2" name="Storno"/>"#,
    );
    deploy(&env, "kind.bpmn", &xml).await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-7").await;
    let kid = child_of(&env, id);
    let d = env
        .pf
        .publish(Publish {
            name: "Storno".into(),
            key: "A-7".into(),
            message_id: Some("s-7".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut both = vec![id, kid];
    both.sort_unstable();
    assert_eq!(
        (d.outcome, d.reason, d.candidates.clone()),
        (Outcome::Parked, Some(Reason::Ambiguous), both)
    );
    assert_eq!(
        d.candidate_elements,
        vec![(id, "storno".to_string()), (kid, "pruefen".to_string())]
    );
}

#[tokio::test]
async fn a_version_binding_calls_that_version_and_a_missing_process_is_an_incident() {
    let env = Env::new();
    deploy(
        &env,
        "eltern.bpmn",
        &parent(
            r#"camunda:calledElementBinding="version" camunda:calledElementVersion="1""#,
            "",
        ),
    )
    .await;
    let early = start(&env, "A-8").await;
    assert_eq!(env.state(early), "incident");
    assert!(
        view(&env, early)
            .incidents
            .iter()
            .any(|i| i.contains("'kind'") && i.contains("not deployed")),
        "{:?}",
        view(&env, early).incidents
    );
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    deploy(&env, "kind.bpmn", &child(r#"<userTask id="pruefen"/>"#)).await;
    let id = start(&env, "A-9").await;
    let kid = child_of(&env, id);
    assert_eq!(view(&env, kid).version, 1, "version 1, not the latest (2)");
    assert_eq!(view(&env, kid).waiting_at, ["pruefen"]);
    assert_eq!(
        env.jobs().iter().filter(|j| j.element == "pruefen").count(),
        1
    );
}

#[tokio::test]
async fn zeebe_propagate_all_child_variables_false_keeps_the_childs_variables_in_the_child() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    let zeebe = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <process id="eltern" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="aufruf"/>
    <callActivity id="aufruf">
      <extensionElements><zeebe:calledElement processId="kind" propagateAllChildVariables="false"/></extensionElements>
    </callActivity>
    <sequenceFlow id="f1" sourceRef="aufruf" targetRef="danach"/>
    <serviceTask id="danach"/>
  </process>
</definitions>"#;
    deploy(&env, "eltern.bpmn", zeebe).await;
    let id = start(&env, "Z-1").await;
    env.complete_jobs("pruefen", postfach::vars([("ergebnis", "ok".into())]))
        .await;
    let p = view(&env, id);
    assert_eq!(p.waiting_at, ["danach"]);
    assert!(!p.variables.contains_key("ergebnis"));
}

#[tokio::test]
async fn a_call_activity_without_a_process_or_with_an_expression_it_cannot_read_is_refused() {
    let env = Env::new();
    let err = env
        .refusal(&parent("", "").replace(r#"calledElement="kind""#, ""))
        .await;
    assert!(
        err.contains("aufruf") && err.contains("names no process"),
        "{err}"
    );
    let err = env
        .refusal(
            &parent("", "").replace(r#"calledElement="kind""#, r#"camunda:caseRef="pruefFall""#),
        )
        .await;
    assert!(
        err.contains("aufruf") && err.contains("CMMN case 'pruefFall'"),
        "{err}"
    );
    let err = env
        .refusal(&parent("", "").replace(
            r#"calledElement="kind""#,
            r#"calledElement="${prozesse.get(0)}""#,
        ))
        .await;
    assert!(
        err.contains("aufruf")
            && err.contains("expression '${prozesse.get(0)}'")
            && err.contains("variable or path"),
        "{err}"
    );
}

/// Starts the parent with `vars` besides its correlation key.
async fn start_with(env: &Env, key: &str, vars: &[(&str, serde_json::Value)]) -> u64 {
    let mut all = postfach::vars([("auftragId", key.into())]);
    all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    env.pf.start("eltern", all, None).await.unwrap()
}

#[tokio::test]
async fn a_call_activity_calls_the_process_its_variable_names_when_it_starts() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    for (called, vars) in [
        (
            r#"calledElement="${welcher}""#,
            serde_json::json!({"welcher": "kind"}),
        ),
        (
            r#"calledElement="=welcher""#,
            serde_json::json!({"welcher": "kind"}),
        ),
        (
            r##"calledElement="#{auftrag.prozess}""##,
            serde_json::json!({"auftrag": {"prozess": "kind"}}),
        ),
    ] {
        let xml = parent("", "").replace(r#"calledElement="kind""#, called);
        deploy(&env, "eltern.bpmn", &xml).await;
        let vars: Vec<(&str, serde_json::Value)> = vars
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let id = start_with(&env, "V-1", &vars).await;
        let kid = child_of(&env, id);
        assert_eq!(view(&env, kid).process, "kind", "{called}");
        env.complete_jobs("pruefen", common::no_vars()).await;
        assert_eq!(view(&env, id).waiting_at, ["danach"], "{called}");
    }
}

#[tokio::test]
async fn a_called_process_variable_that_names_nothing_deployed_is_an_incident_naming_it() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    let xml = parent("", "").replace(r#"calledElement="kind""#, r#"calledElement="${welcher}""#);
    deploy(&env, "eltern.bpmn", &xml).await;
    for (vars, says) in [
        (vec![], "variable 'welcher' is not set"),
        (
            vec![("welcher", 42.into())],
            "variable 'welcher' is 42, not the id of a process",
        ),
        (
            vec![("welcher", "unbekannt".into())],
            "called process 'unbekannt' (any version) is not deployed",
        ),
    ] {
        let id = start_with(&env, "V-2", &vars).await;
        assert_eq!(env.state(id), "incident", "{says}");
        let v = view(&env, id);
        assert_eq!(v.waiting_at, ["aufruf"]);
        assert!(
            v.incidents.iter().any(|i| i.contains(says)),
            "{says}: {:?}",
            v.incidents
        );
    }
}

#[tokio::test]
async fn a_child_an_operator_cancels_stops_its_call_activity_at_an_incident() {
    let env = Env::new();
    deploy(&env, "kind.bpmn", &child(JOB)).await;
    deploy(&env, "eltern.bpmn", &parent("", "")).await;
    let id = start(&env, "A-10").await;
    let kid = child_of(&env, id);
    let token = view(&env, kid).tokens[0].token;
    env.pf.cancel_token(kid, token).await.unwrap();
    assert_eq!(env.state(kid), "cancelled");
    assert_eq!(env.state(id), "incident");
    assert!(
        view(&env, id)
            .incidents
            .iter()
            .any(|i| i.contains(&format!("called instance {kid} was cancelled"))),
        "{:?}",
        view(&env, id).incidents
    );
}

#[tokio::test]
async fn a_deployment_binding_calls_the_latest_version_and_says_so_at_deploy() {
    let env = Env::new();
    let report = env
        .pf
        .deploy_checked(
            "eltern.bpmn",
            &parent(r#"camunda:calledElementBinding="deployment""#, ""),
            [("Storno".to_string(), "auftragId".to_string())].into(),
            false,
        )
        .await
        .unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.id == "aufruf" && w.message.contains("latest deployed version of 'kind'")),
        "{:?}",
        report.warnings
    );
}

#[tokio::test]
async fn call_activity_parts_that_are_not_run_as_written_are_deploy_warnings() {
    let env = Env::new();
    let ext = r#"<extensionElements>
        <camunda:in businessKey="${auftrag.nummer}"/>
        <camunda:in variables="all" local="true"/>
      </extensionElements>"#;
    let report = env
        .pf
        .deploy_checked(
            "eltern.bpmn",
            &parent(r#"camunda:variableMappingClass="de.example.Mapping""#, ext),
            [("Storno".to_string(), "auftragId".to_string())].into(),
            false,
        )
        .await
        .unwrap();
    let said: Vec<&str> = report
        .warnings
        .iter()
        .filter(|w| w.id == "aufruf")
        .map(|w| w.message.as_str())
        .collect();
    assert!(
        said.iter().any(|m| m.contains("variableMappingClass")),
        "{said:?}"
    );
    assert!(
        said.iter().any(|m| m.contains("local=\"true\"")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|m| m.contains("businessKey '${auftrag.nummer}'")),
        "{said:?}"
    );
    // --strict refuses the model instead
    let strict = env
        .pf
        .deploy_checked(
            "eltern.bpmn",
            &parent(r#"camunda:variableMappingClass="de.example.Mapping""#, ext),
            [("Storno".to_string(), "auftragId".to_string())].into(),
            true,
        )
        .await;
    assert!(strict.is_err());
}

//! A multi-instance activity (task, subprocess, call activity) runs once per
//! item of a collection, or `loopCardinality` times, in parallel or one
//! after the other. Each inner instance sees its item and index in variables
//! local to it — so a receive task keyed by the element variable correlates
//! each inner instance with its own message — and outputs are collected in
//! item order. A completion condition ends the remaining inner instances; a
//! boundary event on the activity ends them all.
use crate::common;
use common::*;
use postfach::{Outcome, Publish, Reason};
use serde_json::json;

/// `s → {activity} → danach (job) → e`, with an interrupting timer boundary
/// (PT1H) and an error boundary on the activity; messages Lieferung and
/// Storno.
fn model(activity: &str) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <message id="ml" name="Lieferung"/>
  <message id="mp" name="Paket"/>
  <process id="mi" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="akt"/>
    {activity}
    <sequenceFlow id="f1" sourceRef="akt" targetRef="danach"/>
    <serviceTask id="danach"/>
    <sequenceFlow id="f2" sourceRef="danach" targetRef="e"/>
    <endEvent id="e"/>
    <boundaryEvent id="frist" attachedToRef="akt"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f3" sourceRef="frist" targetRef="verspaetet"/>
    <endEvent id="verspaetet"/>
    <boundaryEvent id="fehler" attachedToRef="akt"><errorEventDefinition/></boundaryEvent>
    <sequenceFlow id="f4" sourceRef="fehler" targetRef="gescheitert"/>
    <endEvent id="gescheitert"/>
  </process>
</definitions>"#
    )
}

/// Flowable's form: parallel (or sequential) over `positionen`, item in `position`.
fn flowable(sequential: bool, extra: &str) -> String {
    format!(
        r#"<multiInstanceLoopCharacteristics isSequential="{sequential}" flowable:collection="${{positionen}}" flowable:elementVariable="position">{extra}</multiInstanceLoopCharacteristics>"#
    )
}

/// Zeebe's form, collecting each inner instance's `ergebnis` into `ergebnisse`.
fn zeebe(sequential: bool) -> String {
    format!(
        r#"<multiInstanceLoopCharacteristics isSequential="{sequential}"><extensionElements>
        <zeebe:loopCharacteristics inputCollection="= positionen" inputElement="position" outputCollection="ergebnisse" outputElement="= ergebnis"/>
      </extensionElements></multiInstanceLoopCharacteristics>"#
    )
}

/// A service task `akt` with loop characteristics `mi`.
fn service(mi: &str) -> String {
    format!(r#"<serviceTask id="akt">{mi}</serviceTask>"#)
}

/// A receive task `akt` for Lieferung with loop characteristics `mi`.
fn receive(mi: &str) -> String {
    format!(r#"<receiveTask id="akt" messageRef="ml">{mi}</receiveTask>"#)
}

async fn deploy(env: &Env, xml: &str) {
    let keys = [
        ("Lieferung".to_string(), "position".to_string()),
        ("Paket".to_string(), "position".to_string()),
    ]
    .into();
    env.pf.deploy("mi.bpmn", xml, keys).await.expect("deploys");
}

async fn start(env: &Env, positionen: serde_json::Value) -> u64 {
    env.pf
        .start(
            "mi",
            postfach::vars([("auftragId", "A-1".into()), ("positionen", positionen)]),
            None,
        )
        .await
        .expect("starts")
}

fn lieferung(position: &str, id: &str) -> Publish {
    Publish {
        name: "Lieferung".into(),
        key: position.into(),
        message_id: Some(id.into()),
        variables: postfach::vars([("menge", 5.into())]),
        ..Default::default()
    }
}

fn view(env: &Env, id: u64) -> postfach::ops::InstanceView {
    env.pf.reader().unwrap().instance(id).unwrap().unwrap()
}

/// Locks every due job of `topic` and completes each with what `vars_for`
/// gives for the job's variables, in the order `order` sorts them.
async fn complete_each(
    env: &Env,
    topic: &str,
    vars_for: impl Fn(&postfach::Vars) -> postfach::Vars,
) -> usize {
    let jobs = env.lock(topic, 100, "w", 60_000).await;
    for j in &jobs {
        env.pf
            .complete_job(j.task.job, Some(j.lease_token), vars_for(&j.task.variables))
            .await
            .expect("job completes");
    }
    jobs.len()
}

#[tokio::test]
async fn a_parallel_multi_instance_receive_task_with_the_element_variable_as_key_correlates_each_inner_instance_with_its_own_message()
 {
    let env = Env::new();
    deploy(&env, &model(&receive(&flowable(false, "")))).await;
    // a message for one item arrives before the instance reaches the activity
    let early = env.pf.publish(lieferung("P3", "m-3")).await.unwrap();
    assert_eq!(early.outcome, Outcome::Buffered);

    let id = start(&env, json!(["P1", "P2", "P3"])).await;
    let v = view(&env, id);
    let inner: Vec<_> = v.tokens.iter().filter(|t| t.scope.is_some()).collect();
    assert_eq!(
        inner.len(),
        2,
        "P3's inner instance took its buffered message"
    );
    assert!(
        v.tokens
            .iter()
            .any(|t| t.waits_for.starts_with("message Lieferung key P1"))
    );
    assert!(
        v.tokens
            .iter()
            .any(|t| t.waits_for.starts_with("message Lieferung key P2"))
    );
    assert!(
        inner.iter().all(|t| t.locals.contains_key("position")),
        "each inner instance has its item as a local variable: {inner:?}"
    );
    assert!(
        !v.variables.contains_key("position"),
        "the element variable is local to the inner instances"
    );

    let d = env.pf.publish(lieferung("P2", "m-2")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!((d.instance, d.element.as_deref()), (Some(id), Some("akt")));
    assert_eq!(
        view(&env, id).waiting_at.len(),
        2,
        "body and P1's inner instance"
    );

    let d = env.pf.publish(lieferung("P1", "m-1")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!(env.waiting_at(id), ["danach"], "every item arrived");
    assert_eq!(view(&env, id).variables["menge"], 5);

    // the activity is done: another message for an item is late, not buffered
    let late = env.pf.publish(lieferung("P2", "m-2b")).await.unwrap();
    assert_eq!(
        (late.outcome, late.reason),
        (Outcome::Parked, Some(Reason::Late))
    );
    let h = env.history(id);
    for i in 0..3 {
        assert!(has(&h, "akt", &format!("inner_completed {i}")), "{h:?}");
    }
    assert!(has(&h, "akt", "multi_instance_started 3"));
}

#[tokio::test]
async fn two_inner_instances_waiting_for_one_key_make_its_message_ambiguous() {
    let env = Env::new();
    deploy(&env, &model(&receive(&flowable(false, "")))).await;
    let id = start(&env, json!(["P1", "P1"])).await;
    let d = env.pf.publish(lieferung("P1", "m-1")).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Ambiguous))
    );
    assert_eq!(d.candidates, [id]);
    assert_eq!(
        d.candidate_elements,
        [(id, "akt".to_string())],
        "the place both inner instances wait at"
    );
    let v = view(&env, id);
    assert_eq!(
        v.tokens
            .iter()
            .filter(|t| t.waits_for.starts_with("message Lieferung key P1"))
            .count(),
        2,
        "nothing was correlated: both inner instances still wait"
    );
}

#[tokio::test]
async fn a_sequential_multi_instance_task_runs_one_item_after_the_other_and_collects_outputs_in_order()
 {
    let env = Env::new();
    deploy(&env, &model(&service(&zeebe(true)))).await;
    let id = start(&env, json!(["a", "b", "c"])).await;
    let mut seen = Vec::new();
    for round in 0..3 {
        let jobs = env.lock("akt", 10, "w", 60_000).await;
        assert_eq!(
            jobs.len(),
            1,
            "one inner instance at a time (round {round})"
        );
        let vars = &jobs[0].task.variables;
        assert_eq!(vars["loopCounter"], round, "the index counts from 0");
        assert_eq!(vars["nrOfInstances"], 3);
        assert_eq!(vars["nrOfCompletedInstances"], round);
        let item = vars["position"].as_str().unwrap().to_string();
        seen.push(item.clone());
        env.pf
            .complete_job(
                jobs[0].task.job,
                Some(jobs[0].lease_token),
                postfach::vars([("ergebnis", format!("{item}!").into())]),
            )
            .await
            .unwrap();
    }
    assert_eq!(seen, ["a", "b", "c"]);
    let v = view(&env, id);
    assert_eq!(v.waiting_at, ["danach"]);
    assert_eq!(v.variables["ergebnisse"], json!(["a!", "b!", "c!"]));
    assert!(!v.variables.contains_key("loopCounter"));
}

#[tokio::test]
async fn parallel_outputs_are_collected_in_item_order_whatever_order_the_inner_instances_complete_in()
 {
    let env = Env::new();
    deploy(&env, &model(&service(&zeebe(false)))).await;
    let id = start(&env, json!([1, 2, 3, 4])).await;
    let mut jobs = env.lock("akt", 10, "w", 60_000).await;
    assert_eq!(jobs.len(), 4, "every inner instance runs at once");
    jobs.reverse();
    for j in &jobs {
        let n = j.task.variables["position"].as_i64().unwrap();
        env.pf
            .complete_job(
                j.task.job,
                Some(j.lease_token),
                postfach::vars([("ergebnis", (n * 10).into())]),
            )
            .await
            .unwrap();
    }
    assert_eq!(
        view(&env, id).variables["ergebnisse"],
        json!([10, 20, 30, 40])
    );
}

#[tokio::test]
async fn loop_cardinality_runs_the_activity_that_many_times_and_zero_times_skips_it() {
    let env = Env::new();
    let task = r#"<serviceTask id="akt"><multiInstanceLoopCharacteristics><loopCardinality>${anzahl * 2}</loopCardinality></multiInstanceLoopCharacteristics></serviceTask>"#;
    deploy(&env, &model(task)).await;
    let id = env
        .pf
        .start("mi", postfach::vars([("anzahl", 2.into())]), None)
        .await
        .unwrap();
    let jobs = env.lock("akt", 10, "w", 60_000).await;
    let mut counters: Vec<i64> = jobs
        .iter()
        .map(|j| j.task.variables["loopCounter"].as_i64().unwrap())
        .collect();
    counters.sort();
    assert_eq!(counters, [0, 1, 2, 3]);
    for j in jobs {
        env.pf
            .complete_job(j.task.job, Some(j.lease_token), no_vars())
            .await
            .unwrap();
    }
    assert_eq!(env.waiting_at(id), ["danach"]);

    let none = env
        .pf
        .start("mi", postfach::vars([("anzahl", 0.into())]), None)
        .await
        .unwrap();
    assert_eq!(env.waiting_at(none), ["danach"], "nothing to do: skipped");
    assert!(has(&env.history(none), "akt", "multi_instance_started 0"));
}

#[tokio::test]
async fn a_completion_condition_cancels_the_remaining_inner_instances() {
    let env = Env::new();
    deploy(&env, &model(&service(&flowable(
            false,
            "<completionCondition>${nrOfCompletedInstances/nrOfInstances >= 0.5 || abgelehnt}</completionCondition>"
        )))).await;
    let id = start(&env, json!(["a", "b", "c", "d"])).await;
    let jobs = env.lock("akt", 10, "w", 60_000).await;
    assert_eq!(jobs.len(), 4);
    let done = |j: &postfach::LockedJob| {
        env.pf.complete_job(
            j.task.job,
            Some(j.lease_token),
            postfach::vars([("abgelehnt", false.into())]),
        )
    };
    done(&jobs[0]).await.unwrap();
    assert_eq!(view(&env, id).waiting_at.len(), 4, "1 of 4 is not half");
    done(&jobs[1]).await.unwrap();
    assert_eq!(env.waiting_at(id), ["danach"], "2 of 4 is half: done");
    assert!(has(&env.history(id), "akt", "completion_condition_met"));
    assert_eq!(
        env.jobs().iter().filter(|j| j.element == "akt").count(),
        0,
        "the remaining inner instances' jobs are gone"
    );
    let stale = env
        .pf
        .complete_job(jobs[2].task.job, Some(jobs[2].lease_token), no_vars())
        .await;
    assert!(
        stale.is_err(),
        "a cancelled inner instance's job is refused"
    );

    // a variable the result sets ends it too
    let other = start(&env, json!(["a", "b", "c", "d"])).await;
    let jobs = env.lock("akt", 10, "w", 60_000).await;
    env.pf
        .complete_job(
            jobs[0].task.job,
            Some(jobs[0].lease_token),
            postfach::vars([("abgelehnt", true.into())]),
        )
        .await
        .unwrap();
    assert_eq!(env.waiting_at(other), ["danach"]);
}

#[tokio::test]
async fn an_interrupting_boundary_timer_cancels_the_body_with_every_inner_instance() {
    let env = Env::new();
    deploy(&env, &model(&service(&flowable(false, "")))).await;
    let id = start(&env, json!(["a", "b", "c"])).await;
    assert_eq!(
        env.jobs().iter().filter(|j| j.element == "akt").count(),
        3,
        "three inner jobs"
    );
    assert_eq!(
        env.jobs().iter().filter(|j| j.element == "frist").count(),
        1,
        "one boundary timer, held by the body, not one per inner instance"
    );
    env.advance(std::time::Duration::from_secs(3600));
    env.pf.run_continuations(100).await.unwrap();
    assert_eq!(env.state(id), "completed", "left by the boundary timer");
    assert!(env.jobs().is_empty(), "no inner job is left behind");
    assert!(has(&env.history(id), "verspaetet", "completed"));
}

#[tokio::test]
async fn a_bpmn_error_of_one_inner_instance_is_caught_by_the_boundary_on_the_activity() {
    let env = Env::new();
    deploy(&env, &model(&service(&flowable(false, "")))).await;
    let id = start(&env, json!(["a", "b"])).await;
    let jobs = env.lock("akt", 10, "w", 60_000).await;
    let caught = env
        .pf
        .throw_error(
            jobs[0].task.job,
            Some(jobs[0].lease_token),
            "DEFEKT",
            "kaputt",
            no_vars(),
        )
        .await
        .unwrap();
    assert!(caught);
    assert_eq!(env.state(id), "completed");
    assert!(has(&env.history(id), "fehler", "error_caught"));
    assert!(env.jobs().is_empty(), "the other inner instance went too");
}

#[tokio::test]
async fn a_multi_instance_subprocess_runs_one_scope_per_item_each_waiting_for_its_own_message() {
    let env = Env::new();
    let sub = format!(
        r#"<subProcess id="akt">
      {}
      <startEvent id="us"/>
      <sequenceFlow id="u0" sourceRef="us" targetRef="paket"/>
      <receiveTask id="paket" messageRef="mp"/>
      <sequenceFlow id="u1" sourceRef="paket" targetRef="buchen"/>
      <serviceTask id="buchen"/>
      <sequenceFlow id="u2" sourceRef="buchen" targetRef="ue"/>
      <endEvent id="ue"/>
    </subProcess>"#,
        zeebe(false)
    );
    deploy(&env, &model(&sub)).await;
    let id = start(&env, json!(["X", "Y"])).await;
    let paket = |key: &str| Publish {
        name: "Paket".into(),
        key: key.into(),
        message_id: Some(format!("p-{key}")),
        ..Default::default()
    };
    let d = env.pf.publish(paket("Y")).await.unwrap();
    assert_eq!(
        (d.outcome, d.element.as_deref()),
        (Outcome::Correlated, Some("paket"))
    );
    // only Y's scope moved on; its job sees Y
    let jobs = env.lock("buchen", 10, "w", 60_000).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].task.variables["position"], "Y");
    env.pf
        .complete_job(
            jobs[0].task.job,
            Some(jobs[0].lease_token),
            postfach::vars([("ergebnis", "gebucht Y".into())]),
        )
        .await
        .unwrap();
    assert!(env.waiting_at(id).contains(&"paket".to_string()));
    env.pf.publish(paket("X")).await.unwrap();
    env.complete_jobs("buchen", postfach::vars([("ergebnis", "gebucht X".into())]))
        .await;
    let v = view(&env, id);
    assert_eq!(v.waiting_at, ["danach"]);
    assert_eq!(v.variables["ergebnisse"], json!(["gebucht X", "gebucht Y"]));
}

#[tokio::test]
async fn a_multi_instance_call_activity_starts_one_child_per_item_with_its_item() {
    let env = Env::new();
    let child = bpmn!(
        r#"
  <process id="kind" isExecutable="true">
    <startEvent id="ks"/>
    <sequenceFlow id="k0" sourceRef="ks" targetRef="pruefen"/>
    <serviceTask id="pruefen"/>
    <sequenceFlow id="k1" sourceRef="pruefen" targetRef="ke"/>
    <endEvent id="ke"/>
  </process>
"#
    );
    env.pf
        .deploy("kind.bpmn", child, Default::default())
        .await
        .unwrap();
    let call = format!(
        r#"<callActivity id="akt" calledElement="kind">{}</callActivity>"#,
        zeebe(false)
    );
    deploy(&env, &model(&call)).await;
    let id = start(&env, json!(["a", "b"])).await;
    let n = complete_each(&env, "pruefen", |vars| {
        let item = vars["position"].as_str().unwrap_or("?").to_string();
        postfach::vars([("ergebnis", format!("ok {item}").into())])
    })
    .await;
    assert_eq!(n, 2, "one child per item, each with its item");
    let v = view(&env, id);
    assert_eq!(v.waiting_at, ["danach"]);
    assert_eq!(v.variables["ergebnisse"], json!(["ok a", "ok b"]));
    for local in ["position", "loopCounter", "nrOfInstances"] {
        assert!(
            !v.variables.contains_key(local),
            "'{local}' stays local though every variable came back: {:?}",
            v.variables
        );
    }
}

#[tokio::test]
async fn multi_instance_user_tasks_take_their_assignee_from_the_element_variable() {
    let env = Env::new();
    let task = r#"<userTask id="akt" flowable:assignee="${pruefer}">
      <multiInstanceLoopCharacteristics isSequential="false" flowable:collection="pruefende" flowable:elementVariable="pruefer"/>
    </userTask>"#;
    deploy(&env, &model(task)).await;
    let id = env
        .pf
        .start(
            "mi",
            postfach::vars([("pruefende", json!(["anna", "ben"]))]),
            None,
        )
        .await
        .unwrap();
    let tasks = env.pf.reader().unwrap().tasks(&Default::default()).unwrap();
    let mut assignees: Vec<_> = tasks.iter().filter_map(|t| t.assignee.clone()).collect();
    assignees.sort();
    assert_eq!(assignees, ["anna", "ben"]);
    for t in &tasks {
        let who = t.assignee.clone().unwrap();
        env.pf
            .complete_task(t.task.parse().unwrap(), &who, no_vars())
            .await
            .unwrap();
    }
    assert_eq!(env.waiting_at(id), ["danach"]);
}

#[tokio::test]
async fn a_collection_that_is_no_list_or_too_long_stops_the_activity_at_an_incident() {
    let env = Env::new();
    deploy(&env, &model(&service(&flowable(false, "")))).await;
    let id = start(&env, json!("P1")).await;
    let v = view(&env, id);
    assert_eq!(v.state, "incident");
    assert!(
        v.incidents[0].contains("collection is \"P1\", not a list"),
        "{:?}",
        v.incidents
    );
    // the limit is the engine setting: above it, an incident that names it
    let env = Env::with_config(postfach::Config {
        multi_instance_items: 3,
        ..Default::default()
    });
    deploy(&env, &model(&service(&flowable(false, "")))).await;
    let id = start(&env, json!(["a", "b", "c", "d"])).await;
    let v = view(&env, id);
    assert!(
        v.incidents[0].contains("asks for 4 inner instances, more than the 3")
            && v.incidents[0].contains("multi_instance_items"),
        "{:?}",
        v.incidents
    );
    assert!(
        env.jobs().iter().all(|j| j.element != "akt"),
        "no inner instance started"
    );
    let id = start(&env, json!(["a", "b", "c"])).await;
    assert_eq!(view(&env, id).state, "active", "three are within the limit");
}

#[tokio::test]
async fn the_default_limit_runs_a_hundred_thousand_items_and_refuses_more() {
    assert_eq!(postfach::limits::MULTI_INSTANCE_ITEMS, 100_000);
    let env = Env::new();
    deploy(&env, &model(&service(&flowable(false, "")))).await;
    let long: Vec<u32> = (0..=postfach::limits::MULTI_INSTANCE_ITEMS).collect();
    let id = start(&env, json!(long)).await;
    let v = view(&env, id);
    assert!(
        v.incidents[0].contains("more than the 100000"),
        "{:?}",
        v.incidents
    );
    // and a configured limit outside 1 … 1,000,000 is refused when opening
    let dir = tempfile::tempdir().unwrap();
    let refused = postfach::Postfach::open_with(
        dir.path().join("x.redb"),
        postfach::Options {
            config: postfach::Config {
                multi_instance_items: 0,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let err = refused.err().expect("0 is refused").to_string();
    assert!(err.contains("multi_instance_items"), "{err}");
}

#[tokio::test]
async fn inner_instances_and_their_local_variables_survive_a_restart() {
    let mut env = Env::new();
    deploy(&env, &model(&receive(&flowable(true, "")))).await;
    let id = start(&env, json!(["P1", "P2"])).await;
    env.pf.publish(lieferung("P1", "m-1")).await.unwrap();
    env.reopen();
    let v = view(&env, id);
    let inner = v.tokens.iter().find(|t| t.scope.is_some()).unwrap();
    assert_eq!(inner.locals["position"], "P2");
    assert_eq!(inner.locals["loopCounter"], 1);
    let d = env.pf.publish(lieferung("P2", "m-2")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!(env.waiting_at(id), ["danach"]);
}

#[tokio::test]
async fn what_a_multi_instance_cannot_run_is_refused_naming_the_element() {
    let env = Env::new();
    let refused = env
        .refusal(&model(
            r#"<serviceTask id="akt"><multiInstanceLoopCharacteristics flowable:collection="${lieferant.positionen()}"/></serviceTask>"#,
        ))
        .await;
    assert!(
        refused.contains("line 8: 'akt': serviceTask: multi-instance collection"),
        "id, line and type are named: {refused}"
    );
    assert!(
        !refused.contains("attachedToRef"),
        "nothing else is refused for its sake: {refused}"
    );
    let refused = env
        .refusal(&model(
            r#"<serviceTask id="akt"><multiInstanceLoopCharacteristics/></serviceTask>"#,
        ))
        .await;
    assert!(refused.contains("neither a collection"), "{refused}");
    let refused = env
        .refusal(&model(
            r#"<serviceTask id="akt"><standardLoopCharacteristics/></serviceTask>"#,
        ))
        .await;
    assert!(refused.contains("standardLoopCharacteristics"), "{refused}");
    let warned = env
        .pf
        .deploy_checked(
            "mi.bpmn",
            &model(
                r#"<serviceTask id="akt"><multiInstanceLoopCharacteristics flowable:collection="xs" flowable:async="true"/></serviceTask>"#,
            ),
            Default::default(),
            false,
        )
        .await
        .unwrap();
    assert!(
        warned
            .warnings
            .iter()
            .any(|w| w.id == "akt" && w.message.contains("async is not applied")),
        "{:?}",
        warned.warnings
    );
}

#[tokio::test]
async fn an_inner_instance_stopped_at_an_incident_runs_again_for_its_item_when_moved_to_its_element()
 {
    let env = Env::new();
    deploy(
        &env,
        &model(&service(&flowable(
            true,
            "<completionCondition>${fertig}</completionCondition>",
        ))),
    )
    .await;
    let id = start(&env, json!(["a", "b"])).await;
    env.complete_jobs("akt", no_vars()).await;
    let v = view(&env, id);
    assert_eq!(v.state, "incident");
    assert!(
        v.incidents[0].contains("completionCondition") && v.incidents[0].contains("fertig"),
        "{:?}",
        v.incidents
    );
    let inner = v.tokens.iter().find(|t| t.scope.is_some()).unwrap().token;
    env.pf.move_token(id, inner, "akt", false).await.unwrap();
    let jobs = env.lock("akt", 10, "w", 60_000).await;
    assert_eq!(jobs.len(), 1, "the same inner instance, not a second body");
    assert_eq!(jobs[0].task.variables["position"], "a");
    assert_eq!(jobs[0].task.variables["loopCounter"], 0);
    env.pf
        .complete_job(
            jobs[0].task.job,
            Some(jobs[0].lease_token),
            postfach::vars([("fertig", true.into())]),
        )
        .await
        .unwrap();
    assert_eq!(
        env.waiting_at(id),
        ["danach"],
        "the condition held: done early"
    );
}

#[tokio::test]
async fn cancelling_the_last_inner_instance_cancels_the_activity_and_the_rest_goes_on_without_it() {
    let env = Env::new();
    deploy(&env, &model(&service(&flowable(false, "")))).await;
    let id = start(&env, json!(["a", "b"])).await;
    let inner: Vec<u64> = view(&env, id)
        .tokens
        .iter()
        .filter(|t| t.scope.is_some())
        .map(|t| t.token)
        .collect();
    env.pf.cancel_token(id, inner[0]).await.unwrap();
    assert_eq!(
        view(&env, id).waiting_at.len(),
        2,
        "body and one inner instance"
    );
    assert!(
        view(&env, id)
            .tokens
            .iter()
            .any(|t| t.waits_for == "its inner instances: 0 of 2 completed, 1 running"),
        "the body counts what still runs, not what was started"
    );
    env.complete_jobs("akt", no_vars()).await;
    assert_eq!(
        env.waiting_at(id),
        ["danach"],
        "the remaining one completed the activity"
    );

    let other = start(&env, json!(["a"])).await;
    let inner = view(&env, other)
        .tokens
        .iter()
        .find(|t| t.scope.is_some())
        .unwrap()
        .token;
    env.pf.cancel_token(other, inner).await.unwrap();
    assert_eq!(
        env.state(other),
        "cancelled",
        "nothing left in the instance"
    );
    assert!(has(&env.history(other), "akt", "scope_cancelled"));
}

#[tokio::test]
async fn the_standard_loop_data_input_and_an_index_variable_of_ones_own_name_are_read() {
    let env = Env::new();
    let task = r#"<serviceTask id="akt">
      <multiInstanceLoopCharacteristics isSequential="true" flowable:elementIndexVariable="nr">
        <loopDataInputRef>positionen</loopDataInputRef>
        <inputDataItem name="position"/>
      </multiInstanceLoopCharacteristics>
    </serviceTask>"#;
    deploy(&env, &model(task)).await;
    let id = start(&env, json!([{"sku": "x"}, {"sku": "y"}])).await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let jobs = env.lock("akt", 10, "w", 60_000).await;
        assert_eq!(jobs.len(), 1);
        let v = &jobs[0].task.variables;
        seen.push((v["nr"].clone(), v["position"]["sku"].clone()));
        assert!(
            !v.contains_key("loopCounter"),
            "the index has the model's name"
        );
        env.pf
            .complete_job(jobs[0].task.job, Some(jobs[0].lease_token), no_vars())
            .await
            .unwrap();
    }
    assert_eq!(seen, [(json!(0), json!("x")), (json!(1), json!("y"))]);
    assert_eq!(env.waiting_at(id), ["danach"]);
}

#[test]
#[cfg(feature = "server")]
fn the_command_line_lists_each_token_with_its_scope_and_local_variables() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let id = rt.block_on(async {
        deploy(&env, &model(&receive(&flowable(false, "")))).await;
        start(&env, json!(["P1", "P2"])).await
    });
    env.pf.close();
    let out = cli(
        &env.dir.path().join("test.redb"),
        &["instance", &id.to_string()],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("tokens (for add-token, move-token, cancel-token):"),
        "{text}"
    );
    assert!(
        text.contains(r#"waits for message Lieferung key P1  (in scope 1; local {"loopCounter":0,"position":"P1"})"#),
        "{text}"
    );
    assert!(
        text.contains("waits for its inner instances: 0 of 2 completed, 2 running"),
        "{text}"
    );
}

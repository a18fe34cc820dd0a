//! Ad-hoc subprocesses as Flowable's `AdhocSubProcessTest` and Zeebe's
//! ad-hoc subprocess drive them: the activities without incoming flows run
//! when a caller activates them (through the library or the command line),
//! or those Zeebe's `activeElementsCollection` names when it starts; the
//! completion condition is asked after each activity, and when it holds
//! the others are cancelled (unless `cancelRemainingInstances="false"`) and
//! the subprocess completes; a caller may complete it when nothing runs in
//! it. What cannot be activated is refused, naming what can.
use crate::common;
use common::*;
use postfach::{EngineError, Error, vars};

fn model(ordering: &str, cancel_remaining: bool) -> String {
    bpmn!(
        r#"
  <process id="klaerung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="klaeren"/>
    <adHocSubProcess id="klaeren" ordering="ORDERING" cancelRemainingInstances="CANCEL">
      <userTask id="rueckfrage"/>
      <serviceTask id="pruefen"/>
      <task id="notiz"/>
      <sequenceFlow id="g1" sourceRef="notiz" targetRef="warten"/>
      <receiveTask id="warten"/>
      <completionCondition>${fertig == true}</completionCondition>
    </adHocSubProcess>
    <sequenceFlow id="f2" sourceRef="klaeren" targetRef="nachher"/>
    <receiveTask id="nachher"/>
    <sequenceFlow id="f3" sourceRef="nachher" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    )
    .replace("ORDERING", ordering)
    .replace("CANCEL", if cancel_remaining { "true" } else { "false" })
}

fn refused(e: Error) -> String {
    match e {
        Error::Engine(EngineError::AdHocRefused { why, .. }) => why,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn activities_run_when_activated_and_the_condition_completes_it() {
    let env = Env::new();
    env.deploy(&model("Parallel", true)).await;
    let id = env.pf.start("klaerung", no_vars(), None).await.unwrap();
    assert_eq!(env.waiting_at(id), ["klaeren"]);
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(
        v.tokens[0].waits_for,
        "activities to be activated, or to be completed"
    );
    let holder = env.token_at(id, "klaeren");
    // only the activities without incoming flows can be activated
    let why = refused(env.pf.ad_hoc(id, holder, Some("warten")).await.unwrap_err());
    assert!(
        why.contains("'warten' is not one of its activities"),
        "{why}"
    );
    assert!(why.contains("rueckfrage, pruefen, notiz"), "{why}");

    env.pf.ad_hoc(id, holder, Some("pruefen")).await.unwrap();
    let t = env.pf.ad_hoc(id, holder, Some("notiz")).await.unwrap();
    assert_eq!(t.element, "notiz");
    assert_eq!(sorted(t.waiting_at), ["klaeren", "pruefen", "warten"]);
    // completing it while activities run is refused
    let why = refused(env.pf.ad_hoc(id, holder, None).await.unwrap_err());
    assert!(why.contains("2 activities still run in it"), "{why}");

    // the condition does not hold yet: it stays open
    env.complete_jobs("pruefen", vars([("fertig", false.into())]))
        .await;
    assert_eq!(sorted(env.waiting_at(id)), ["klaeren", "warten"]);
    let w = env.token_at(id, "warten");
    env.pf
        .trigger(id, w, vars([("fertig", true.into())]))
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["nachher"]);
    let h = env.history(id);
    assert!(has(&h, "klaeren", "completion_condition_met"), "{h:#?}");
    assert!(has(&h, "klaeren", "activated pruefen"), "{h:#?}");
}

#[tokio::test]
async fn the_condition_cancels_what_still_runs_unless_told_to_keep_it() {
    for cancel_remaining in [true, false] {
        let env = Env::new();
        env.deploy(&model("Parallel", cancel_remaining)).await;
        let id = env.pf.start("klaerung", no_vars(), None).await.unwrap();
        let holder = env.token_at(id, "klaeren");
        env.pf.ad_hoc(id, holder, Some("rueckfrage")).await.unwrap();
        env.pf.ad_hoc(id, holder, Some("pruefen")).await.unwrap();
        env.complete_jobs("pruefen", vars([("fertig", true.into())]))
            .await;
        if cancel_remaining {
            // the open user task went with it
            assert_eq!(env.waiting_at(id), ["nachher"]);
            assert!(
                env.pf
                    .reader()
                    .unwrap()
                    .tasks(&postfach::ops::TaskFilter::default())
                    .unwrap()
                    .is_empty()
            );
        } else {
            // it waits for the user task, then completes
            assert_eq!(sorted(env.waiting_at(id)), ["klaeren", "rueckfrage"]);
            let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
            let k = v.tokens.iter().find(|t| t.element == "klaeren").unwrap();
            assert_eq!(k.waits_for, "the activities still running inside it to end");
            let why = refused(
                env.pf
                    .ad_hoc(id, holder, Some("pruefen"))
                    .await
                    .unwrap_err(),
            );
            assert!(why.contains("holds no ad-hoc subprocess open"), "{why}");
            let task = env
                .pf
                .reader()
                .unwrap()
                .tasks(&postfach::ops::TaskFilter::default())
                .unwrap()[0]
                .task
                .clone();
            let task: u64 = task.parse().unwrap();
            env.pf
                .complete_task(task, "kermit", no_vars())
                .await
                .unwrap();
            assert_eq!(env.waiting_at(id), ["nachher"]);
        }
    }
}

#[tokio::test]
async fn a_sequential_one_runs_one_activity_at_a_time_and_a_caller_completes_it() {
    let env = Env::new();
    env.deploy(&model("Sequential", true)).await;
    let id = env.pf.start("klaerung", no_vars(), None).await.unwrap();
    let holder = env.token_at(id, "klaeren");
    env.pf.ad_hoc(id, holder, Some("pruefen")).await.unwrap();
    let why = refused(env.pf.ad_hoc(id, holder, Some("notiz")).await.unwrap_err());
    assert!(why.contains("ordering is Sequential"), "{why}");
    env.complete_jobs("pruefen", no_vars()).await;
    // `fertig` is not set: the condition is not evaluated, said in the history
    let h = env.history(id);
    assert!(
        h.iter()
            .any(|(el, ev)| el == "klaeren" && ev.starts_with("completion_condition_not_evaluated")),
        "{h:#?}"
    );
    assert_eq!(env.waiting_at(id), ["klaeren"]);
    // the command line activates by the subprocess's element and completes it
    #[cfg(feature = "server")]
    {
        env.pf.close();
        let db = env.dir.path().join("test.redb");
        let id = id.to_string();
        let out = cli(&db, &["ad-hoc", &id, "klaeren", "--activate", "notiz"]);
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("activated notiz"),
            "{out:?}"
        );
        // the activity waits: completing it now is refused
        let out = cli(&db, &["ad-hoc", &id, "klaeren", "--complete"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("still run in it"),
            "{out:?}"
        );
        let out = cli(&db, &["trigger", &id, "warten"]);
        assert!(out.status.success(), "{out:?}");
        let out = cli(&db, &["ad-hoc", &id, "klaeren", "--complete"]);
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("now waits at nachher"),
            "{out:?}"
        );
    }
}

const ZEEBE: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <process id="zeebe-adhoc" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="auswahl"/>
    <adHocSubProcess id="auswahl">
      <extensionElements><zeebe:adHoc activeElementsCollection="=elemente"/></extensionElements>
      <serviceTask id="a"/>
      <task id="b"/>
      <task id="c"/>
    </adHocSubProcess>
    <sequenceFlow id="f2" sourceRef="auswahl" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn an_active_elements_collection_runs_what_it_names_and_completes_with_them() {
    let env = Env::new();
    env.deploy(ZEEBE).await;
    let id = env
        .pf
        .start(
            "zeebe-adhoc",
            vars([("elemente", serde_json::json!(["a", "b"]))]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(sorted(env.waiting_at(id)), ["a", "auswahl"]);
    let h = env.history(id);
    assert!(has(&h, "b", "completed"), "{h:#?}");
    assert!(!h.iter().any(|(el, _)| el == "c"), "{h:#?}");
    env.complete_jobs("a", no_vars()).await;
    assert_eq!(env.state(id), "completed");

    // an id it does not have stops the subprocess at an incident naming it
    let id = env
        .pf
        .start(
            "zeebe-adhoc",
            vars([("elemente", serde_json::json!(["x"]))]),
            None,
        )
        .await
        .unwrap();
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(v.incidents.len(), 1, "{v:?}");
    assert!(
        v.incidents[0].contains("'x' is not one of its activities"),
        "{:?}",
        v.incidents
    );
}

#[tokio::test]
async fn repairs_place_tokens_in_the_open_ad_hoc_subprocess_and_leave_it_open() {
    let env = Env::new();
    env.deploy(&model("Parallel", false)).await;
    let id = env.pf.start("klaerung", no_vars(), None).await.unwrap();
    let holder = env.token_at(id, "klaeren");
    // an operator adds a token at an activity inside: it runs in the ad-hoc scope
    env.pf.add_token(id, "warten", false).await.unwrap();
    assert_eq!(sorted(env.waiting_at(id)), ["klaeren", "warten"]);
    let v = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let w = v.tokens.iter().find(|t| t.element == "warten").unwrap();
    assert_eq!(w.scope, Some(holder));
    // cancelling the last activity leaves the subprocess open for activations
    env.pf.cancel_token(id, w.token).await.unwrap();
    assert_eq!(env.waiting_at(id), ["klaeren"]);
    env.pf.ad_hoc(id, holder, Some("rueckfrage")).await.unwrap();
    env.pf.ad_hoc(id, holder, Some("pruefen")).await.unwrap();
    // the condition holds while the user task still runs (not cancelled here):
    // an operator cancels the task, and a caller completes what is left
    env.complete_jobs("pruefen", vars([("fertig", true.into())]))
        .await;
    assert_eq!(sorted(env.waiting_at(id)), ["klaeren", "rueckfrage"]);
    env.pf
        .cancel_token(id, env.token_at(id, "rueckfrage"))
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), ["klaeren"]);
    let why = refused(env.pf.ad_hoc(id, holder, Some("notiz")).await.unwrap_err());
    assert!(why.contains("holds no ad-hoc subprocess open"), "{why}");
    let t = env.pf.ad_hoc(id, holder, None).await.unwrap();
    assert_eq!(t.waiting_at, ["nachher"]);
}

const ANTWORT: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn">
  <message id="m" name="Antwort" postfach:correlationKey="fall"/>
  <process id="nachfrage" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="klaeren"/>
    <adHocSubProcess id="klaeren">
      <receiveTask id="antwort" messageRef="m"/>
      <completionCondition>${true}</completionCondition>
    </adHocSubProcess>
    <sequenceFlow id="f2" sourceRef="klaeren" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::test]
async fn a_message_for_an_activity_not_activated_yet_waits_in_the_buffer() {
    let env = Env::new();
    env.deploy(ANTWORT).await;
    let id = env
        .pf
        .start("nachfrage", vars([("fall", "F-1".into())]), None)
        .await
        .unwrap();
    let early = env
        .pf
        .publish(postfach::Publish {
            name: "Antwort".into(),
            key: "F-1".into(),
            message_id: Some("a-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(early.outcome, postfach::Outcome::Buffered, "{early:?}");
    let holder = env.token_at(id, "klaeren");
    env.pf.ad_hoc(id, holder, Some("antwort")).await.unwrap();
    // the activated receive task took the buffered message at once
    assert_eq!(env.state(id), "completed");
}

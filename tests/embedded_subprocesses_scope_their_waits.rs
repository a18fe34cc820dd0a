//! An embedded subprocess is a scope: the token that enters it rests at the
//! subprocess (holding its boundary events) while tokens run inside from its
//! start event; it moves on when the last of them has ended. Cancelling the
//! scope (an interrupting boundary event, a BPMN error from inside, an
//! operator) removes every wait inside it in the same transaction. Messages
//! for catch points inside are expected from before the subprocess is
//! entered, so an early one waits in the buffer instead of being parked late.
use crate::common;
use common::*;
use postfach::{EngineError, Error, Outcome, Publish, Reason};
use std::time::Duration;

/// `s → vorbereiten (job) → lieferung (subprocess: start → fork →
/// [wareneingang (receive Lieferung) | pruefen (job)] → join → ende) → fertig`,
/// with boundary events on the subprocess: `storno` (message Storno,
/// interrupting or not), `frist` (timer PT2H, interrupting) and `fehler`
/// (every BPMN error).
fn model(storno_cancels: bool) -> String {
    format!(
        r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn">
  <message id="ml" name="Lieferung"/>
  <message id="ms" name="Storno"/>
  <process id="auftrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="vorbereiten"/>
    <serviceTask id="vorbereiten"/>
    <sequenceFlow id="f1" sourceRef="vorbereiten" targetRef="lieferung"/>
    <subProcess id="lieferung">
      <startEvent id="ls"/>
      <sequenceFlow id="l0" sourceRef="ls" targetRef="fork"/>
      <parallelGateway id="fork"/>
      <sequenceFlow id="l1" sourceRef="fork" targetRef="wareneingang"/>
      <sequenceFlow id="l2" sourceRef="fork" targetRef="pruefen"/>
      <receiveTask id="wareneingang" messageRef="ml"/>
      <serviceTask id="pruefen"/>
      <sequenceFlow id="l3" sourceRef="wareneingang" targetRef="join"/>
      <sequenceFlow id="l4" sourceRef="pruefen" targetRef="join"/>
      <parallelGateway id="join"/>
      <sequenceFlow id="l5" sourceRef="join" targetRef="ende"/>
      <endEvent id="ende"/>
    </subProcess>
    <sequenceFlow id="f2" sourceRef="lieferung" targetRef="fertig"/>
    <endEvent id="fertig"/>
    <boundaryEvent id="storno" attachedToRef="lieferung" cancelActivity="{storno_cancels}">
      <messageEventDefinition messageRef="ms"/>
    </boundaryEvent>
    <sequenceFlow id="f3" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>
    <boundaryEvent id="frist" attachedToRef="lieferung">
      <timerEventDefinition><timeDuration>PT2H</timeDuration></timerEventDefinition>
    </boundaryEvent>
    <sequenceFlow id="f4" sourceRef="frist" targetRef="verspaetet"/>
    <endEvent id="verspaetet"/>
    <boundaryEvent id="fehler" attachedToRef="lieferung">
      <errorEventDefinition/>
    </boundaryEvent>
    <sequenceFlow id="f5" sourceRef="fehler" targetRef="gescheitert"/>
    <endEvent id="gescheitert"/>
  </process>
</definitions>"#
    )
}

async fn deploy(env: &Env, storno_cancels: bool) {
    let keys = [
        ("Lieferung".to_string(), "auftragId".to_string()),
        ("Storno".to_string(), "auftragId".to_string()),
    ]
    .into();
    env.pf
        .deploy("auftrag.bpmn", &model(storno_cancels), keys)
        .await
        .expect("a model with an embedded subprocess deploys");
}

fn message(name: &str, key: &str, id: &str) -> Publish {
    Publish {
        name: name.into(),
        key: key.into(),
        message_id: Some(id.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_subprocess_runs_inside_its_scope_and_moves_on_when_its_last_token_ends() {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "A-1").await;
    assert_eq!(env.complete_jobs("vorbereiten", no_vars()).await, 1);
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["lieferung", "pruefen", "wareneingang"],
        "the subprocess holds its scope while two tokens run inside"
    );
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let holder = view
        .tokens
        .iter()
        .find(|t| t.element == "lieferung")
        .expect("the scope token");
    assert_eq!(holder.scope, None);
    for inner in view.tokens.iter().filter(|t| t.element != "lieferung") {
        assert_eq!(
            inner.scope,
            Some(holder.token),
            "{} runs inside",
            inner.element
        );
    }

    assert_eq!(env.complete_jobs("pruefen", no_vars()).await, 1);
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["join", "lieferung", "wareneingang"]
    );
    let d = env
        .pf
        .publish(message("Lieferung", "A-1", "l-1"))
        .await
        .unwrap();
    assert_eq!(
        (d.outcome, d.element.as_deref()),
        (Outcome::Correlated, Some("wareneingang"))
    );
    assert_eq!(env.state(id), "completed");
    let h = env.history(id);
    let pos = |e: &str, ev: &str| {
        h.iter()
            .position(|(a, b)| a == e && b == ev)
            .unwrap_or_else(|| panic!("{e} {ev} in {h:?}"))
    };
    assert!(pos("ende", "completed") < pos("lieferung", "completed"));
    assert!(pos("lieferung", "completed") < pos("fertig", "completed"));
    assert!(
        env.jobs().is_empty(),
        "the frist timer ended with the subprocess"
    );

    let late = env
        .pf
        .publish(message("Storno", "A-1", "s-1"))
        .await
        .unwrap();
    assert_eq!(
        (late.outcome, late.reason),
        (Outcome::Parked, Some(Reason::Late)),
        "the subprocess is left: its boundary's message is late"
    );
}

#[tokio::test]
async fn a_message_for_a_catch_point_two_steps_ahead_inside_a_subprocess_is_buffered_not_parked() {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "A-2").await;
    assert_eq!(env.waiting_at(id), ["vorbereiten"]);
    let early = env
        .pf
        .publish(message("Lieferung", "A-2", "l-2"))
        .await
        .unwrap();
    assert_eq!(
        early.outcome,
        Outcome::Buffered,
        "the instance can still reach the receive task inside the subprocess"
    );
    assert_eq!(env.complete_jobs("vorbereiten", no_vars()).await, 1);
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["join", "lieferung", "pruefen"],
        "the buffered message was taken when the receive task opened"
    );
    let m = env.pf.reader().unwrap().message("l-2").unwrap().remove(0);
    assert_eq!(m.element.as_deref(), Some("wareneingang"));
}

#[tokio::test]
async fn an_interrupting_message_boundary_cancels_the_subprocess_with_its_inner_timer_and_jobs() {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "A-3").await;
    env.complete_jobs("vorbereiten", no_vars()).await;
    let jobs: Vec<String> = env.jobs().into_iter().map(|j| j.element).collect();
    assert_eq!(sorted(jobs), ["frist", "pruefen"]);

    let d = env
        .pf
        .publish(message("Storno", "A-3", "s-3"))
        .await
        .unwrap();
    assert_eq!(
        (d.outcome, d.element.as_deref()),
        (Outcome::Correlated, Some("storno"))
    );
    assert_eq!(env.state(id), "completed");
    assert!(
        env.jobs().is_empty(),
        "the inner job and the subprocess's timer went with the scope"
    );
    assert!(
        env.history(id)
            .contains(&("lieferung".into(), "scope_cancelled".into()))
    );
    // the receive task inside is no longer subscribed: its message is late now
    let late = env
        .pf
        .publish(message("Lieferung", "A-3", "l-3"))
        .await
        .unwrap();
    assert_eq!(
        (late.outcome, late.reason),
        (Outcome::Parked, Some(Reason::Late))
    );
    env.advance(Duration::from_secs(3 * 3600));
    assert_eq!(env.pf.run_continuations(100).await.unwrap(), 0);
}

#[tokio::test]
async fn a_non_interrupting_message_boundary_branches_and_the_subprocess_runs_on() {
    let env = Env::new();
    deploy(&env, false).await;
    let id = env.start_keyed("auftrag", "A-4").await;
    env.complete_jobs("vorbereiten", no_vars()).await;
    for n in 1..=2 {
        let d = env
            .pf
            .publish(message("Storno", "A-4", &format!("s-4-{n}")))
            .await
            .unwrap();
        assert_eq!(d.element.as_deref(), Some("storno"), "message {n}");
    }
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["lieferung", "pruefen", "wareneingang"],
        "both branches ended at storniert; the scope is untouched"
    );
    env.complete_jobs("pruefen", no_vars()).await;
    env.pf
        .publish(message("Lieferung", "A-4", "l-4"))
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_timer_boundary_on_the_subprocess_cancels_everything_inside() {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "A-5").await;
    env.complete_jobs("vorbereiten", no_vars()).await;
    env.advance(Duration::from_secs(2 * 3600 + 1));
    env.pf.run_continuations(100).await.unwrap();
    assert_eq!(env.state(id), "completed");
    assert!(
        env.history(id)
            .contains(&("verspaetet".into(), "completed".into()))
    );
    assert!(env.jobs().is_empty());
}

#[tokio::test]
async fn a_bpmn_error_from_a_task_inside_reaches_the_subprocess_boundary() {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "A-6").await;
    env.complete_jobs("vorbereiten", no_vars()).await;
    let job = env.lock("pruefen", 1, "w", 60_000).await.remove(0);
    let caught = env
        .pf
        .throw_error(
            job.task.job,
            Some(job.lease_token),
            "DEFEKT",
            "Ware defekt",
            no_vars(),
        )
        .await
        .unwrap();
    assert!(
        caught,
        "the subprocess's error boundary catches what its task throws"
    );
    assert_eq!(env.state(id), "completed");
    assert!(
        env.history(id)
            .contains(&("gescheitert".into(), "completed".into()))
    );
    assert!(env.jobs().is_empty());
    let late = env
        .pf
        .publish(message("Lieferung", "A-6", "l-6"))
        .await
        .unwrap();
    assert_eq!(late.reason, Some(Reason::Late));
}

#[tokio::test]
async fn the_same_message_open_at_a_boundary_and_at_an_inner_catch_is_parked_ambiguous() {
    let xml = bpmn!(
        r#"
  <message id="ms" name="Storno"/>
  <process id="doppelt" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="innen"/>
      <intermediateCatchEvent id="innen"><messageEventDefinition messageRef="ms"/></intermediateCatchEvent>
      <sequenceFlow id="i1" sourceRef="innen" targetRef="ie"/>
      <endEvent id="ie"/>
    </subProcess>
    <sequenceFlow id="f1" sourceRef="sub" targetRef="e"/>
    <endEvent id="e"/>
    <boundaryEvent id="aussen" attachedToRef="sub"><messageEventDefinition messageRef="ms"/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="aussen" targetRef="e2"/>
    <endEvent id="e2"/>
  </process>
"#
    );
    let env = Env::new();
    env.pf
        .deploy(
            "doppelt.bpmn",
            xml,
            [("Storno".to_string(), "auftragId".to_string())].into(),
        )
        .await
        .unwrap();
    let id = env.start_keyed("doppelt", "D-1").await;
    let d = env
        .pf
        .publish(message("Storno", "D-1", "s-d"))
        .await
        .unwrap();
    assert_eq!(
        (d.outcome, d.reason, d.candidates.clone()),
        (Outcome::Parked, Some(Reason::Ambiguous), vec![id]),
        "two places of one instance wait for it: nothing is correlated"
    );
    assert_eq!(
        d.candidate_elements,
        vec![(id, "aussen".to_string()), (id, "innen".to_string())],
        "the parked message names both places"
    );
    let parked = env.pf.reader().unwrap().message("s-d").unwrap().remove(0);
    let places: Vec<(String, String)> = parked
        .candidate_elements
        .iter()
        .map(|c| (c.instance.clone(), c.element.clone()))
        .collect();
    assert_eq!(
        places,
        [
            (id.to_string(), "aussen".into()),
            (id.to_string(), "innen".into())
        ],
        "and keeps naming them"
    );
    assert_eq!(sorted(env.waiting_at(id)), ["innen", "sub"]);
}

#[tokio::test]
async fn terminate_inside_a_subprocess_ends_that_scope_and_the_subprocess_moves_on() {
    let xml = bpmn!(
        r#"
  <process id="abbruch" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="sub"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="daneben"/>
    <serviceTask id="daneben"/>
    <sequenceFlow id="f3" sourceRef="daneben" targetRef="e1"/>
    <endEvent id="e1"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="ifork"/>
      <parallelGateway id="ifork"/>
      <sequenceFlow id="i1" sourceRef="ifork" targetRef="langsam"/>
      <sequenceFlow id="i2" sourceRef="ifork" targetRef="schnell"/>
      <serviceTask id="langsam"/>
      <serviceTask id="schnell"/>
      <sequenceFlow id="i3" sourceRef="langsam" targetRef="ie"/>
      <sequenceFlow id="i4" sourceRef="schnell" targetRef="stop"/>
      <endEvent id="ie"/>
      <endEvent id="stop"><terminateEventDefinition/></endEvent>
    </subProcess>
    <sequenceFlow id="f4" sourceRef="sub" targetRef="danach"/>
    <serviceTask id="danach"/>
    <sequenceFlow id="f5" sourceRef="danach" targetRef="e2"/>
    <endEvent id="e2"/>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("abbruch", "T-1").await;
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["daneben", "langsam", "schnell", "sub"]
    );
    assert_eq!(env.complete_jobs("schnell", no_vars()).await, 1);
    assert_eq!(
        sorted(env.waiting_at(id)),
        ["danach", "daneben"],
        "terminate withdrew 'langsam' and ended only the subprocess"
    );
    let topics: Vec<String> = env.jobs().into_iter().map(|j| j.element).collect();
    assert_eq!(sorted(topics), ["danach", "daneben"]);
    assert_eq!(env.state(id), "active");
}

#[tokio::test]
async fn nested_subprocesses_complete_inside_out() {
    let xml = bpmn!(
        r#"
  <process id="tief" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="aussen"/>
    <subProcess id="aussen">
      <startEvent id="as"/>
      <sequenceFlow id="a0" sourceRef="as" targetRef="innen"/>
      <subProcess id="innen">
        <startEvent id="is"/>
        <sequenceFlow id="i0" sourceRef="is" targetRef="arbeit"/>
        <serviceTask id="arbeit"/>
      </subProcess>
    </subProcess>
    <sequenceFlow id="f1" sourceRef="aussen" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("tief", "N-1").await;
    assert_eq!(sorted(env.waiting_at(id)), ["arbeit", "aussen", "innen"]);
    env.complete_jobs("arbeit", no_vars()).await;
    assert_eq!(env.state(id), "completed");
    let h = env.history(id);
    let at = |e: &str| {
        h.iter()
            .rposition(|(a, b)| a == e && b == "completed")
            .unwrap()
    };
    assert!(
        at("innen") < at("aussen") && at("aussen") < at("e"),
        "{h:?}"
    );
}

#[tokio::test]
async fn repair_places_a_token_inside_the_active_scope_and_the_guard_still_holds() {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "R-1").await;
    let refused = env.pf.add_token(id, "pruefen", false).await.unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Engine(EngineError::NoSingleScope { active: 0, .. })
        ),
        "no scope of 'lieferung' is active yet: {refused}"
    );
    env.complete_jobs("vorbereiten", no_vars()).await;
    let again = env
        .pf
        .add_token(id, "wareneingang", false)
        .await
        .unwrap_err();
    assert!(
        matches!(again, Error::Engine(EngineError::RepairRefused { .. })),
        "a second token for (Lieferung, R-1) would make it ambiguous: {again}"
    );
    let added = env.pf.add_token(id, "pruefen", false).await.unwrap();
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let holder = view
        .tokens
        .iter()
        .find(|t| t.element == "lieferung")
        .unwrap();
    let placed = view.tokens.iter().find(|t| t.token == added.token).unwrap();
    assert_eq!(placed.scope, Some(holder.token));

    // cancelling every token inside withdraws the scope, and with it the instance
    let inside: Vec<u64> = view
        .tokens
        .iter()
        .filter(|t| t.scope == Some(holder.token))
        .map(|t| t.token)
        .collect();
    assert_eq!(inside.len(), 3);
    for t in inside {
        env.pf.cancel_token(id, t).await.unwrap();
    }
    assert_eq!(env.state(id), "cancelled");
    assert!(env.jobs().is_empty(), "the subprocess's timer went with it");
    assert!(
        env.history(id)
            .contains(&("lieferung".into(), "scope_cancelled".into()))
    );
}

#[tokio::test]
async fn a_database_with_subprocess_tokens_reopens_with_its_scopes() {
    let mut env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "O-1").await;
    env.complete_jobs("vorbereiten", no_vars()).await;
    env.reopen();
    env.complete_jobs("pruefen", no_vars()).await;
    env.pf
        .publish(message("Lieferung", "O-1", "l-o"))
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
}

#[tokio::test]
async fn a_subprocess_model_that_cannot_run_is_refused_with_ids_and_lines() {
    let env = Env::new();
    let cross = bpmn!(
        r#"
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="hinaus" sourceRef="is" targetRef="e"/>
    </subProcess>
    <subProcess id="leer"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let err = env.refusal(cross).await;
    assert!(
        err.contains("hinaus") && err.contains("crosses a scope boundary"),
        "{err}"
    );
    assert!(
        err.contains("leer") && err.contains("has no start event"),
        "{err}"
    );
}

#[tokio::test]
async fn a_signal_boundary_on_a_subprocess_withdraws_the_user_task_inside() {
    let xml = bpmn!(
        r#"
  <signal id="sg" name="Rueckruf"/>
  <process id="pruefung" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
    <subProcess id="sub">
      <startEvent id="is"/>
      <sequenceFlow id="i0" sourceRef="is" targetRef="freigabe"/>
      <userTask id="freigabe"/>
      <sequenceFlow id="i1" sourceRef="freigabe" targetRef="ie"/>
      <endEvent id="ie"/>
    </subProcess>
    <sequenceFlow id="f1" sourceRef="sub" targetRef="e"/>
    <endEvent id="e"/>
    <boundaryEvent id="rueckruf" attachedToRef="sub"><signalEventDefinition signalRef="sg"/></boundaryEvent>
    <sequenceFlow id="f2" sourceRef="rueckruf" targetRef="zurueck"/>
    <endEvent id="zurueck"/>
  </process>
"#
    );
    let env = Env::new();
    env.deploy(xml).await;
    let id = env.start_keyed("pruefung", "S-1").await;
    let tasks = || {
        env.pf
            .reader()
            .unwrap()
            .tasks(&Default::default())
            .unwrap()
            .len()
    };
    assert_eq!(tasks(), 1);
    assert_eq!(env.pf.signal("Rueckruf", no_vars()).await.unwrap(), 1);
    assert_eq!(env.state(id), "completed");
    assert_eq!(tasks(), 0, "the user task went with its scope");
    assert!(
        env.history(id)
            .contains(&("zurueck".into(), "completed".into()))
    );
}

#[tokio::test]
#[cfg(feature = "server")]
async fn the_command_line_refuses_a_token_inside_a_subprocess_that_is_not_active_and_says_what_to_do()
 {
    let env = Env::new();
    deploy(&env, true).await;
    let id = env.start_keyed("auftrag", "C-1").await;
    env.pf.close();
    let db = env.dir.path().join("test.redb");
    let o = cli(&db, &["add-token", &id.to_string(), "pruefen"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("inside subprocess 'lieferung'")
            && err.contains(&format!("postfach add-token {id} lieferung")),
        "{err}"
    );
}

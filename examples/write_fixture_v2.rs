//! Writes tests/fixtures/format-v2-scopes.redb: a database in the record
//! format of the release before instances became rows (instance records with
//! their history inside, token scopes and local variables in the record's
//! tail), with an embedded subprocess waiting for a message under a boundary
//! timer, a parallel multi-instance user task part done, open user tasks and a
//! completed instance. tests/opens_a_database_of_format_v2.rs opens it, so the
//! migration to rows stays tested. Kept as the generator of that fixture:
//! `cargo run --example write_fixture_v2` reproduces it only on that release.
use postfach::{ManualClock, Options, Postfach, Publish, Vars, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:flowable="http://flowable.org/bpmn" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="fixture">
  <message id="m" name="Geliefert" postfach:correlationKey="auftragId"/>
  <process id="fixture-v2" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="pruefen"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="lieferung"/>
    <userTask id="pruefen" flowable:assignee="${position}">
      <multiInstanceLoopCharacteristics isSequential="false" flowable:collection="positionen" flowable:elementVariable="position"/>
    </userTask>
    <sequenceFlow id="f4" sourceRef="pruefen" targetRef="join"/>
    <subProcess id="lieferung">
      <startEvent id="ls"/>
      <sequenceFlow id="l1" sourceRef="ls" targetRef="warten"/>
      <intermediateCatchEvent id="warten"><messageEventDefinition messageRef="m"/></intermediateCatchEvent>
      <sequenceFlow id="l2" sourceRef="warten" targetRef="le"/>
      <endEvent id="le"/>
    </subProcess>
    <boundaryEvent id="frist" attachedToRef="lieferung"><timerEventDefinition><timeDuration>P7D</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="lieferung" targetRef="join"/>
    <sequenceFlow id="f6" sourceRef="frist" targetRef="verspaetet"/>
    <endEvent id="verspaetet"/>
    <parallelGateway id="join"/>
    <sequenceFlow id="f7" sourceRef="join" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::path::Path::new("tests/fixtures/format-v2-scopes.redb");
    let _ = std::fs::remove_file(path);
    let clock = ManualClock::new(1_767_225_600_000);
    let pf = Postfach::open_with(
        path,
        Options {
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    pf.deploy("fixture-v2.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    let start = |key: &str| {
        let vars = vars([
            ("auftragId", key.into()),
            ("positionen", serde_json::json!(["anna", "ben", "carla"])),
        ]);
        pf.start("fixture-v2", vars, None)
    };
    // 1: one of three reviews done, waits for its delivery inside the subprocess
    // 2: nothing done yet; 3: completed
    for key in ["F-1", "F-2", "F-3"] {
        start(key).await.unwrap();
    }
    let open = pf.reader().unwrap().tasks(&Default::default()).unwrap();
    let task_of = |inst: &str, user: &str| {
        open.iter()
            .find(|t| t.instance == inst && t.assignee.as_deref() == Some(user))
            .map(|t| t.task.parse::<u64>().unwrap())
            .unwrap()
    };
    pf.complete_task(task_of("1", "ben"), "ben", vars([("ok_ben", true.into())]))
        .await
        .unwrap();
    for user in ["anna", "ben", "carla"] {
        pf.complete_task(task_of("3", user), user, Vars::new())
            .await
            .unwrap();
    }
    pf.publish(Publish {
        name: "Geliefert".into(),
        key: "F-3".into(),
        message_id: Some("geliefert-3".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    pf.close();
    let _ = std::fs::remove_file(path.with_extension("redb.wal"));
    println!(
        "wrote {} ({} bytes)",
        path.display(),
        std::fs::metadata(path).unwrap().len()
    );
}

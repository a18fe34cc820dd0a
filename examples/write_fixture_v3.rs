//! Writes tests/fixtures/format-v3-tokens.redb: a database in the format of
//! the release before an instance's tokens became rows (database format 2:
//! history in rows, tokens, their scopes, locals and boundary subscriptions
//! inside the instance record, a multi-instance body's items and outputs
//! inside its token). It holds a parallel multi-instance service task over a
//! collection with an output collection, one of three inner instances done;
//! beside it a service task under a message boundary event (subscribed with
//! its key); after both a user task; and a completed instance.
//! tests/opens_a_database_of_format_v3.rs opens it, so the migration to token
//! rows stays tested. Kept as the generator of that fixture: `cargo run
//! --example write_fixture_v3` reproduces it only on that release.
use postfach::{ManualClock, Options, Postfach, Vars, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="fixture">
  <message id="m" name="Storno" postfach:correlationKey="auftragId"/>
  <process id="fixture-v3" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="pruefen"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="arbeit"/>
    <serviceTask id="pruefen">
      <multiInstanceLoopCharacteristics isSequential="false"><extensionElements>
        <zeebe:loopCharacteristics inputCollection="= positionen" inputElement="position" outputCollection="ergebnisse" outputElement="= ergebnis"/>
      </extensionElements></multiInstanceLoopCharacteristics>
    </serviceTask>
    <sequenceFlow id="f4" sourceRef="pruefen" targetRef="join"/>
    <serviceTask id="arbeit"/>
    <boundaryEvent id="storno" attachedToRef="arbeit"><messageEventDefinition messageRef="m"/></boundaryEvent>
    <sequenceFlow id="f5" sourceRef="storno" targetRef="storniert"/>
    <endEvent id="storniert"/>
    <sequenceFlow id="f6" sourceRef="arbeit" targetRef="join"/>
    <parallelGateway id="join"/>
    <sequenceFlow id="f7" sourceRef="join" targetRef="freigeben"/>
    <userTask id="freigeben"/>
    <sequenceFlow id="f8" sourceRef="freigeben" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::path::Path::new("tests/fixtures/format-v3-tokens.redb");
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
    pf.deploy("fixture-v3.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    // 1: one of three checks done, `arbeit` waits under its boundary
    // 2: nothing done yet; 3: completed
    for key in ["F-1", "F-2", "F-3"] {
        let vars = vars([
            ("auftragId", key.into()),
            ("positionen", serde_json::json!(["anna", "ben", "carla"])),
        ]);
        pf.start("fixture-v3", vars, None).await.unwrap();
    }
    let jobs = pf
        .lock_jobs("pruefen", 100, "fixture", 3_600_000)
        .await
        .unwrap();
    for j in &jobs {
        let position = j.task.variables["position"].as_str().unwrap().to_string();
        let done = match j.task.instance {
            1 => position == "ben",
            3 => true,
            _ => false,
        };
        if done {
            let result = vars([("ergebnis", format!("ok {position}").into())]);
            pf.complete_job(j.task.job, Some(j.lease_token), result)
                .await
                .unwrap();
        }
    }
    for j in pf
        .lock_jobs("arbeit", 100, "fixture", 3_600_000)
        .await
        .unwrap()
    {
        if j.task.instance == 3 {
            pf.complete_job(j.task.job, Some(j.lease_token), Vars::new())
                .await
                .unwrap();
        }
    }
    let open = pf.reader().unwrap().tasks(&Default::default()).unwrap();
    for t in open.iter().filter(|t| t.instance == "3") {
        pf.complete_task(t.task.parse().unwrap(), "fixture", Vars::new())
            .await
            .unwrap();
    }
    pf.close();
    let _ = std::fs::remove_file(path.with_extension("redb.wal"));
    println!(
        "wrote {} ({} bytes)",
        path.display(),
        std::fs::metadata(path).unwrap().len()
    );
}

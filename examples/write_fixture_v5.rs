//! Writes tests/fixtures/format-v5-definitions.redb: a database in the
//! format of the release whose deployed definitions are stored as the
//! encoded model (database format 4: `Process` and its decisions as bytes,
//! `Extras` in a side table), before definitions are stored as the XML they
//! came from. Partition 1 of 2, holding a DMN decision and one process with
//! a compensation boundary, an ad-hoc subprocess, a message wait and a
//! business rule task: one instance waits in the ad-hoc subprocess with an
//! activity's job open, one at the message after its hotel was booked (a
//! completion compensation will undo), and a message for a key nobody
//! waits for sits in the buffer.
//! tests/opens_a_database_of_format_v5.rs opens it and runs it to the end,
//! so the migration away from this format stays tested. Kept as the
//! generator of that fixture: `cargo run --example write_fixture_v5`
//! reproduces it only on a release of that format.
use postfach::partition::Partition;
use postfach::{ManualClock, Options, Postfach, Publish, vars};

const CREDIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/fixture" name="credit" id="credit">
  <decision name="Credit" id="credit-check">
    <decisionTable id="dt" hitPolicy="FIRST">
      <input id="i1"><inputExpression typeRef="number"><text>amount</text></inputExpression></input>
      <output id="o1" name="approved" typeRef="boolean"/>
      <rule id="small"><inputEntry id="a1"><text>&lt;= 1000</text></inputEntry><outputEntry id="a2"><text>true</text></outputEntry></rule>
      <rule id="rest"><inputEntry id="b1"><text>-</text></inputEntry><outputEntry id="b2"><text>false</text></outputEntry></rule>
    </decisionTable>
  </decision>
</definitions>"#;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" targetNamespace="fixture">
  <message id="m" name="Bestaetigt" postfach:correlationKey="auftragId"/>
  <process id="fixture-v5" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="buchen"/>
    <task id="buchen"/>
    <boundaryEvent id="bBuchen" attachedToRef="buchen"><compensateEventDefinition/></boundaryEvent>
    <serviceTask id="stornieren" isForCompensation="true"/>
    <association id="a1" sourceRef="bBuchen" targetRef="stornieren"/>
    <sequenceFlow id="f2" sourceRef="buchen" targetRef="klaeren"/>
    <adHocSubProcess id="klaeren" ordering="Parallel" cancelRemainingInstances="true">
      <userTask id="rueckfrage"/>
      <serviceTask id="pruefen"/>
      <completionCondition>${fertig == true}</completionCondition>
    </adHocSubProcess>
    <sequenceFlow id="f3" sourceRef="klaeren" targetRef="warten"/>
    <receiveTask id="warten" messageRef="m"/>
    <sequenceFlow id="f4" sourceRef="warten" targetRef="entscheiden"/>
    <businessRuleTask id="entscheiden">
      <extensionElements><zeebe:calledDecision decisionId="credit-check" resultVariable="credit"/></extensionElements>
    </businessRuleTask>
    <sequenceFlow id="f5" sourceRef="entscheiden" targetRef="ok"/>
    <exclusiveGateway id="ok" default="nein"/>
    <sequenceFlow id="ja" sourceRef="ok" targetRef="fertig"><conditionExpression>${credit == true}</conditionExpression></sequenceFlow>
    <sequenceFlow id="nein" sourceRef="ok" targetRef="rueckgaengig"/>
    <intermediateThrowEvent id="rueckgaengig"><compensateEventDefinition/></intermediateThrowEvent>
    <sequenceFlow id="f6" sourceRef="rueckgaengig" targetRef="abgelehnt"/>
    <endEvent id="fertig"/>
    <endEvent id="abgelehnt"/>
  </process>
</definitions>"#;

/// The `n`-th key of the form `PREFIX-i` that partition 1 of 2 owns.
fn owned(prefix: &str, n: usize) -> String {
    let p = Partition::new(1, 2).unwrap();
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| p.of_key(k) == 1)
        .nth(n)
        .unwrap()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::path::Path::new("tests/fixtures/format-v5-definitions.redb");
    let _ = std::fs::remove_file(path);
    let clock = ManualClock::new(1_767_225_600_000);
    let pf = Postfach::open_with(
        path,
        Options {
            clock: clock.clone(),
            partition: Some(Partition::new(1, 2).unwrap()),
            ..Options::default()
        },
    )
    .unwrap();
    pf.deploy("credit.dmn", CREDIT, Default::default())
        .await
        .unwrap();
    pf.deploy("fixture-v5.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    // waits in the ad-hoc subprocess, `pruefen` activated: its job is open
    let (first, second) = (owned("V", 0), owned("V", 1));
    let a = pf
        .start(
            "fixture-v5",
            vars([("auftragId", first.as_str().into()), ("amount", 500.into())]),
            None,
        )
        .await
        .unwrap();
    let holder = pf.reader().unwrap().instance(a).unwrap().unwrap().tokens[0].token;
    pf.ad_hoc(a, holder, Some("pruefen")).await.unwrap();
    // past the ad-hoc subprocess, waiting for its message; it will be
    // refused credit and compensate its booking
    let b = pf
        .start(
            "fixture-v5",
            vars([
                ("auftragId", second.as_str().into()),
                ("amount", 5000.into()),
            ]),
            None,
        )
        .await
        .unwrap();
    let holder = pf.reader().unwrap().instance(b).unwrap().unwrap().tokens[0].token;
    pf.ad_hoc(b, holder, Some("pruefen")).await.unwrap();
    let jobs = pf
        .lock_jobs("pruefen", 10, "fixture", 60_000)
        .await
        .unwrap();
    let job = jobs.iter().find(|j| j.task.instance == b).unwrap();
    pf.complete_job(
        job.task.job,
        Some(job.lease_token),
        vars([("fertig", true.into())]),
    )
    .await
    .unwrap();
    // early: nobody waits for this key yet
    let early = owned("W", 0);
    pf.publish(Publish {
        name: "Bestaetigt".into(),
        key: early,
        message_id: Some("early-1".into()),
        variables: vars([("quelle", "fixture".into())]),
        ttl: Some(86_400_000),
        ..Publish::default()
    })
    .await
    .unwrap();
    pf.close();
    let _ = std::fs::remove_file(path.with_extension("redb.wal"));
    println!(
        "wrote {} ({} bytes): instances {a} and {b}",
        path.display(),
        std::fs::metadata(path).unwrap().len()
    );
}

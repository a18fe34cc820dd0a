//! Writes tests/fixtures/format-v4-registrations.redb: a database in the
//! format of the release before every boundary subscription was kept with its
//! token (database format 3: token rows keep the keys of their message
//! boundaries, the signal boundaries' subscriptions are rows of
//! `signal_subs` only). Two instances of one process, each waiting in three
//! branches: a user task under an interrupting signal boundary and a message
//! boundary (keyed by `auftragId`); a subprocess under a non-interrupting
//! signal boundary whose inside waits at a signal catch; an event-based
//! gateway between a signal and a timer.
//! tests/opens_a_database_of_format_v4.rs opens it, so the migration stays
//! tested. Kept as the generator of that fixture: `cargo run --example
//! write_fixture_v4` reproduces it only on that release.
use postfach::{ManualClock, Options, Postfach, vars};

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:postfach="https://postfach.dev/bpmn" targetNamespace="fixture">
  <message id="m" name="Storno" postfach:correlationKey="auftragId"/>
  <signal id="stopp" name="Stopp"/>
  <signal id="weiter" name="Weiter"/>
  <signal id="hinweis" name="Hinweis"/>
  <process id="fixture-v4" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="freigabe"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="teil"/>
    <sequenceFlow id="f3" sourceRef="fork" targetRef="wahl"/>
    <userTask id="freigabe"/>
    <boundaryEvent id="gestoppt" attachedToRef="freigabe"><signalEventDefinition signalRef="stopp"/></boundaryEvent>
    <boundaryEvent id="storniert" attachedToRef="freigabe"><messageEventDefinition messageRef="m"/></boundaryEvent>
    <sequenceFlow id="f4" sourceRef="freigabe" targetRef="e1"/>
    <sequenceFlow id="f5" sourceRef="gestoppt" targetRef="e2"/>
    <sequenceFlow id="f6" sourceRef="storniert" targetRef="e3"/>
    <endEvent id="e1"/>
    <endEvent id="e2"/>
    <endEvent id="e3"/>
    <subProcess id="teil">
      <startEvent id="ts"/>
      <sequenceFlow id="t1" sourceRef="ts" targetRef="innen"/>
      <intermediateCatchEvent id="innen"><signalEventDefinition signalRef="weiter"/></intermediateCatchEvent>
      <sequenceFlow id="t2" sourceRef="innen" targetRef="te"/>
      <endEvent id="te"/>
    </subProcess>
    <boundaryEvent id="notiz" attachedToRef="teil" cancelActivity="false"><signalEventDefinition signalRef="hinweis"/></boundaryEvent>
    <sequenceFlow id="f7" sourceRef="teil" targetRef="e4"/>
    <sequenceFlow id="f8" sourceRef="notiz" targetRef="e5"/>
    <endEvent id="e4"/>
    <endEvent id="e5"/>
    <eventBasedGateway id="wahl"/>
    <sequenceFlow id="f9" sourceRef="wahl" targetRef="aufSignal"/>
    <sequenceFlow id="f10" sourceRef="wahl" targetRef="aufZeit"/>
    <intermediateCatchEvent id="aufSignal"><signalEventDefinition signalRef="weiter"/></intermediateCatchEvent>
    <intermediateCatchEvent id="aufZeit"><timerEventDefinition><timeDuration>P1D</timeDuration></timerEventDefinition></intermediateCatchEvent>
    <sequenceFlow id="f11" sourceRef="aufSignal" targetRef="e6"/>
    <sequenceFlow id="f12" sourceRef="aufZeit" targetRef="e7"/>
    <endEvent id="e6"/>
    <endEvent id="e7"/>
  </process>
</definitions>"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let path = std::path::Path::new("tests/fixtures/format-v4-registrations.redb");
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
    pf.deploy("fixture-v4.bpmn", MODEL, Default::default())
        .await
        .unwrap();
    for key in ["G-1", "G-2"] {
        pf.start("fixture-v4", vars([("auftragId", key.into())]), None)
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

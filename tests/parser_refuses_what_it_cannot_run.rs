//! The parser accepts what modelling tools write, ignores what does not execute,
//! and refuses in one error every element the engine cannot run, each with id,
//! type and line. Malformed XML names line and column. Nothing makes it panic.
use postfach::model::{ParseError, parse};
use proptest::prelude::*;
use std::collections::BTreeMap;

const REFERENCE: &str = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");

fn keys() -> BTreeMap<String, String> {
    [("AuftragAbgeschlossen".to_string(), "auftragId".to_string())].into()
}

#[test]
fn the_reference_model_loads_unchanged_with_a_deploy_time_key() {
    let p = parse("auftrag-ausfuehrung.bpmn", REFERENCE, &keys()).unwrap();
    assert_eq!(p.len(), 1);
    let p = &p[0];
    assert_eq!(p.id, "auftrag-ausfuehrung");
    assert!(p.element("auftragUebergeben").unwrap().async_before);
    assert!(p.element("rechnungStellen").unwrap().async_before);
    assert_eq!(p.correlation_keys["AuftragAbgeschlossen"], "auftragId");
    assert_eq!(p.flows.len(), 4);
}

#[test]
fn sequence_flows_without_ids_get_generated_ids() {
    // the article writes its flows without ids
    let xml = bpmn!(
        r#"
      <process id="p" isExecutable="true">
        <startEvent id="s"/>
        <sequenceFlow sourceRef="s" targetRef="t"/>
        <task id="t"/>
        <sequenceFlow sourceRef="t" targetRef="e"/>
        <endEvent id="e"/>
      </process>"#
    );
    let p = parse("ohne-ids.bpmn", xml, &BTreeMap::new()).unwrap();
    let ids: Vec<&str> = p[0].flows.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids.iter().all(|id| !id.is_empty()) && ids[0] != ids[1],
        "{ids:?}"
    );
}

#[test]
fn a_catch_without_key_says_how_to_add_one() {
    let err = parse("auftrag-ausfuehrung.bpmn", REFERENCE, &BTreeMap::new()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("warteAufAbschluss"), "{text}");
    assert!(text.contains("postfach:correlationKey"), "{text}");
    // the library names the message; each edge says how its deploy gives a key
    assert_eq!(err.missing_keys(), vec!["AuftragAbgeschlossen"]);
    assert!(
        !text.contains("--"),
        "a library error names no flag: {text}"
    );
}

#[test]
#[cfg(feature = "server")]
fn the_command_line_says_which_flag_gives_the_missing_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(dir.path().join("db.redb"))
        .args(["deploy", "bpmn/auftrag-ausfuehrung.bpmn"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--correlation-key AuftragAbgeschlossen=VARIABLE"),
        "{stderr}"
    );
}

const MODELER: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL"
  xmlns:bpmndi="http://www.omg.org/spec/BPMN/20100524/DI" xmlns:dc="http://www.omg.org/spec/DD/20100524/DC"
  xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" xmlns:camunda="http://camunda.org/schema/1.0/bpmn"
  xmlns:signavio="http://www.signavio.com" id="Definitions_1">
  <bpmn:collaboration id="Collab">
    <bpmn:participant id="P1" name="Auftrag" processRef="auftrag" />
    <bpmn:participant id="P2" name="Dienstleister" />
    <bpmn:messageFlow id="MF1" sourceRef="P2" targetRef="catch" />
  </bpmn:collaboration>
  <bpmn:message id="Msg" name="AuftragAbgeschlossen">
    <bpmn:extensionElements><zeebe:subscription correlationKey="=auftragId" /></bpmn:extensionElements>
  </bpmn:message>
  <bpmn:process id="auftrag" isExecutable="true">
    <bpmn:documentation>Beschreibung &amp; Notizen</bpmn:documentation>
    <bpmn:extensionElements><signavio:signavioMetaData metaKey="x" metaValue="y" /></bpmn:extensionElements>
    <bpmn:laneSet id="ls"><bpmn:lane id="l1" name="Betrieb"><bpmn:flowNodeRef>start</bpmn:flowNodeRef></bpmn:lane></bpmn:laneSet>
    <bpmn:startEvent id="start"><bpmn:outgoing>f1</bpmn:outgoing></bpmn:startEvent>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="gw" />
    <bpmn:exclusiveGateway id="gw" default="f3" />
    <bpmn:sequenceFlow id="f2" sourceRef="gw" targetRef="catch">
      <bpmn:conditionExpression xsi:type="bpmn:tFormalExpression" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">${betrag &gt; 100}</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="f3" sourceRef="gw" targetRef="invoice" />
    <bpmn:intermediateCatchEvent id="catch"><bpmn:messageEventDefinition messageRef="Msg" /></bpmn:intermediateCatchEvent>
    <bpmn:sequenceFlow id="f4" sourceRef="catch" targetRef="invoice" />
    <bpmn:serviceTask id="invoice" camunda:asyncBefore="true">
      <bpmn:extensionElements><zeebe:taskDefinition type="rechnung" /></bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f5" sourceRef="invoice" targetRef="end" />
    <bpmn:endEvent id="end" />
    <bpmn:textAnnotation id="ta"><bpmn:text>Hinweis</bpmn:text></bpmn:textAnnotation>
    <bpmn:association id="as" sourceRef="ta" targetRef="catch" />
    <bpmn:dataObjectReference id="dor" dataObjectRef="do" />
    <bpmn:dataObject id="do" />
    <bpmn:group id="grp" />
  </bpmn:process>
  <bpmndi:BPMNDiagram id="d"><bpmndi:BPMNPlane id="pl" bpmnElement="Collab">
    <bpmndi:BPMNShape id="s1" bpmnElement="start"><dc:Bounds x="1" y="2" width="3" height="4" /></bpmndi:BPMNShape>
  </bpmndi:BPMNPlane></bpmndi:BPMNDiagram>
</bpmn:definitions>"#;

#[test]
fn modeler_files_deploy_and_non_executable_parts_are_ignored() {
    let p = parse("modeler.bpmn", MODELER, &BTreeMap::new()).unwrap();
    let p = &p[0];
    assert_eq!(
        p.correlation_keys["AuftragAbgeschlossen"], "auftragId",
        "zeebe:subscription key"
    );
    assert!(
        p.element("invoice").unwrap().async_before,
        "camunda:asyncBefore"
    );
    assert_eq!(
        p.element("invoice").unwrap().kind,
        postfach::model::ElementKind::Activity(postfach::model::ActivityKind::ServiceTask {
            topic: "rechnung".into()
        })
    );
    assert_eq!(p.elements.len(), 5);
    let f2 = p.flows.iter().find(|f| f.id == "f2").unwrap();
    let vars = postfach::vars([("betrag", 150.into())]);
    assert!(
        postfach::model::eval_bool(f2.condition.as_ref().unwrap(), &vars, 0).unwrap(),
        "&gt; is decoded"
    );
}

#[test]
fn every_unsupported_element_is_listed_with_id_type_and_line() {
    let xml = bpmn!(
        r#"
<process id="p">
<startEvent id="s"/>
<complexGateway id="approve"/>
<intermediateCatchEvent id="b1"><compensateEventDefinition/></intermediateCatchEvent>
<startEvent id="wait"><escalationEventDefinition/></startEvent>
<choreographyTask id="sub"/>
<serviceTask id="loop"><standardLoopCharacteristics/></serviceTask>
<endEvent id="e"><linkEventDefinition name="x"/></endEvent>
</process>"#
    );
    let err = parse("x.bpmn", xml, &BTreeMap::new()).unwrap_err();
    let ParseError::Unsupported { file, items } = &err else {
        panic!("{err}")
    };
    assert_eq!(file, "x.bpmn");
    let got: Vec<(&str, &str, u32)> = items
        .iter()
        .map(|u| (u.id.as_str(), u.kind.as_str(), u.line))
        .collect();
    assert_eq!(
        got,
        vec![
            ("approve", "complexGateway", 4),
            (
                "b1",
                "intermediateCatchEvent with compensateEventDefinition",
                5
            ),
            ("wait", "startEvent with escalationEventDefinition", 6),
            ("sub", "choreographyTask", 7),
            ("loop", "serviceTask with standardLoopCharacteristics", 8),
            ("e", "endEvent with linkEventDefinition", 9),
        ]
    );
    assert!(
        err.to_string()
            .contains("complexGateway 'approve' (line 4)")
    );
}

#[test]
fn malformed_xml_names_line_and_column() {
    let xml = "<definitions xmlns=\"http://www.omg.org/spec/BPMN/20100524/MODEL\">\n<process id=\"p\">\n  <startEvent id=\"s\">\n</process></definitions>";
    let err = parse("broken.bpmn", xml, &BTreeMap::new()).unwrap_err();
    let ParseError::Xml {
        file, line, column, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(file, "broken.bpmn");
    assert_eq!(*line, 4, "{err}");
    assert!(*column >= 1);
    assert!(err.to_string().starts_with("broken.bpmn:4:"), "{err}");
}

#[test]
fn a_non_executable_process_is_refused_with_that_reason() {
    let xml = r#"<definitions><process id="p" isExecutable="false"><startEvent id="s"/></process></definitions>"#;
    let err = parse("ne.bpmn", xml, &BTreeMap::new()).unwrap_err();
    assert!(matches!(err, ParseError::NotExecutable { .. }));
    assert!(err.to_string().contains("isExecutable=\"false\""));
}

#[test]
fn dangling_flows_and_bad_conditions_are_named() {
    let xml = r#"<definitions><process id="p"><startEvent id="s"/>
<sequenceFlow id="f1" sourceRef="s" targetRef="nowhere"/>
<exclusiveGateway id="g" default="zzz"/>
<sequenceFlow id="f2" sourceRef="s" targetRef="g"><conditionExpression>${a &gt;}</conditionExpression></sequenceFlow>
</process></definitions>"#;
    let ParseError::Invalid { issues, .. } = parse("d.bpmn", xml, &BTreeMap::new()).unwrap_err()
    else {
        panic!()
    };
    let ids: Vec<&str> = issues.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids, vec!["f1", "f2", "g"]);
    assert!(issues[0].message.contains("nowhere"));
}

#[test]
fn deep_nesting_and_huge_input_are_refused() {
    let deep = format!(
        "<definitions>{}{}</definitions>",
        "<a>".repeat(500),
        "</a>".repeat(500)
    );
    assert!(matches!(
        parse("deep.bpmn", &deep, &BTreeMap::new()),
        Err(ParseError::TooDeep { .. })
    ));
    let huge = " ".repeat(postfach::model::MAX_SIZE + 1);
    assert!(matches!(
        parse("huge.bpmn", &huge, &BTreeMap::new()),
        Err(ParseError::TooLarge { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse("fuzz.bpmn", &text, &BTreeMap::new());
    }

    #[test]
    fn mutated_reference_models_never_panic(cut in 0usize..REFERENCE.len(), len in 0usize..40, insert in "[<>/=\"a-z &;#x0-9]{0,12}") {
        let mut s: String = REFERENCE.chars().take(cut).collect();
        s.push_str(&insert);
        s.extend(REFERENCE.chars().skip(cut + len));
        let _ = parse("fuzz.bpmn", &s, &keys());
    }
}

#[test]
fn an_event_without_its_message_or_signal_is_named_and_xml_errors_stay_on_one_line() {
    let xml = bpmn!(
        r#"
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="r"/>
    <intermediateCatchEvent id="r"><messageEventDefinition/></intermediateCatchEvent>
    <sequenceFlow id="f1" sourceRef="r" targetRef="c"/>
    <intermediateCatchEvent id="c"><signalEventDefinition/></intermediateCatchEvent>
    <sequenceFlow id="f2" sourceRef="c" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let err = parse("p.bpmn", xml, &BTreeMap::new()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("'r': names no message: set messageRef"),
        "{text}"
    );
    assert!(
        text.contains("'c': names no signal: set signalRef"),
        "{text}"
    );
    assert!(err.missing_keys().is_empty(), "no key is missing: {text}");

    let broken = "<definitions xmlns=\"http://www.omg.org/spec/BPMN/20100524/MODEL\">\n<process id=\"p\">\n</proc\ness>";
    let text = parse("b.bpmn", broken, &BTreeMap::new())
        .unwrap_err()
        .to_string();
    assert!(!text.contains('\n'), "one line: {text:?}");
    assert!(text.starts_with("b.bpmn:"), "{text}");
}

#[test]
fn plain_and_manual_tasks_are_executed_as_pass_through() {
    let xml = bpmn!(
        r#"
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="t"/>
    <task id="t"/>
    <sequenceFlow id="f1" sourceRef="t" targetRef="m"/>
    <manualTask id="m"/>
    <sequenceFlow id="f2" sourceRef="m" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
    );
    let p = &parse("p.bpmn", xml, &BTreeMap::new()).unwrap()[0];
    assert_eq!(p.element("t").unwrap().kind.label(), "task");
    assert_eq!(p.element("m").unwrap().kind.label(), "manualTask");
}

/// An end event ends its token, so a sequence flow out of one would never be
/// taken — or, at a signal end event that broadcasts, would be taken
/// against the drawing. Refused naming the flow and the end event.
#[test]
fn a_flow_out_of_an_end_event_is_refused() {
    let xml = bpmn!(
        r#"
  <signal id="sg" name="X"/>
  <process id="p" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="x"/>
    <endEvent id="x"><signalEventDefinition signalRef="sg"/></endEvent>
    <sequenceFlow id="f2" sourceRef="x" targetRef="t"/>
    <userTask id="t"/>
  </process>
"#
    );
    let text = parse("p.bpmn", xml, &BTreeMap::new())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("line 7: 'f2': sequence flow leaves end event 'x'"),
        "{text}"
    );
}

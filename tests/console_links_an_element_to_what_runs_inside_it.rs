//! In an instance's diagram, an element with tokens carries how many run at
//! it and inside it — a subprocess with everything in it, a multi-instance
//! body with its inner instances — and links to exactly those token rows; a
//! click on the element does the same, and the token table links a body or a
//! subprocess to what runs inside it (headless chromium over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:camunda="http://camunda.org/schema/1.0/bpmn"
    xmlns:bpmndi="http://www.omg.org/spec/BPMN/20100524/DI"
    xmlns:dc="http://www.omg.org/spec/DD/20100524/DC"
    xmlns:di="http://www.omg.org/spec/DD/20100524/DI">
  <message id="ml" name="Lieferung"/>
  <process id="lieferungen" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="fork"/>
    <parallelGateway id="fork"/>
    <sequenceFlow id="f1" sourceRef="fork" targetRef="pruefen"/>
    <sequenceFlow id="f2" sourceRef="fork" targetRef="lieferung"/>
    <userTask id="pruefen" name="Prüfen"/>
    <subProcess id="lieferung" name="Lieferung">
      <startEvent id="ls"/>
      <sequenceFlow id="g0" sourceRef="ls" targetRef="warten"/>
      <receiveTask id="warten" name="Warten" messageRef="ml">
        <multiInstanceLoopCharacteristics camunda:collection="${positionen}" camunda:elementVariable="position"/>
      </receiveTask>
      <sequenceFlow id="g1" sourceRef="warten" targetRef="le"/>
      <endEvent id="le"/>
    </subProcess>
    <sequenceFlow id="f3" sourceRef="pruefen" targetRef="join"/>
    <sequenceFlow id="f4" sourceRef="lieferung" targetRef="join"/>
    <parallelGateway id="join"/>
    <sequenceFlow id="f5" sourceRef="join" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <bpmndi:BPMNDiagram id="d">
    <bpmndi:BPMNPlane id="p" bpmnElement="lieferungen">
      <bpmndi:BPMNShape id="s_di" bpmnElement="s"><dc:Bounds x="100" y="257" width="36" height="36"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="fork_di" bpmnElement="fork"><dc:Bounds x="180" y="250" width="50" height="50"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="pruefen_di" bpmnElement="pruefen"><dc:Bounds x="300" y="80" width="100" height="80"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="lieferung_di" bpmnElement="lieferung" isExpanded="true"><dc:Bounds x="280" y="200" width="360" height="150"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="ls_di" bpmnElement="ls"><dc:Bounds x="310" y="257" width="36" height="36"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="warten_di" bpmnElement="warten"><dc:Bounds x="410" y="235" width="100" height="80"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="le_di" bpmnElement="le"><dc:Bounds x="570" y="257" width="36" height="36"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="join_di" bpmnElement="join"><dc:Bounds x="700" y="250" width="50" height="50"/></bpmndi:BPMNShape>
      <bpmndi:BPMNShape id="e_di" bpmnElement="e"><dc:Bounds x="800" y="257" width="36" height="36"/></bpmndi:BPMNShape>
      <bpmndi:BPMNEdge id="f0_di" bpmnElement="f0"><di:waypoint x="136" y="275"/><di:waypoint x="180" y="275"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="f1_di" bpmnElement="f1"><di:waypoint x="205" y="250"/><di:waypoint x="205" y="120"/><di:waypoint x="300" y="120"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="f2_di" bpmnElement="f2"><di:waypoint x="230" y="275"/><di:waypoint x="280" y="275"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="g0_di" bpmnElement="g0"><di:waypoint x="346" y="275"/><di:waypoint x="410" y="275"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="g1_di" bpmnElement="g1"><di:waypoint x="510" y="275"/><di:waypoint x="570" y="275"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="f3_di" bpmnElement="f3"><di:waypoint x="400" y="120"/><di:waypoint x="725" y="120"/><di:waypoint x="725" y="250"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="f4_di" bpmnElement="f4"><di:waypoint x="640" y="275"/><di:waypoint x="700" y="275"/></bpmndi:BPMNEdge>
      <bpmndi:BPMNEdge id="f5_di" bpmnElement="f5"><di:waypoint x="750" y="275"/><di:waypoint x="800" y="275"/></bpmndi:BPMNEdge>
    </bpmndi:BPMNPlane>
  </bpmndi:BPMNDiagram>
</definitions>"#;

/// The elements of the token rows shown, in order.
fn rows(b: &Driver) -> Vec<String> {
    let v = b.execute(
        "return [...document.querySelectorAll('#tokens tbody tr')].map((r) => r.dataset.element);",
    );
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn wait_rows(b: &Driver, want: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let got = rows(b);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "token rows {got:?}, wanted {want:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subprocess_and_a_body_link_to_what_runs_inside_them() {
    let dir = tempfile::tempdir().unwrap();
    let pf = postfach::Postfach::open(dir.path().join("run.redb")).unwrap();
    let keys = [("Lieferung".to_string(), "position".to_string())].into();
    pf.deploy("lieferungen.bpmn", MODEL, keys).await.unwrap();
    let id = pf
        .start(
            "lieferungen",
            postfach::vars([("positionen", serde_json::json!(["P1", "P2", "P3"]))]),
            None,
        )
        .await
        .unwrap();
    let done = pf
        .publish(postfach::Publish {
            name: "Lieferung".into(),
            key: "P1".into(),
            message_id: Some("m-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(done.outcome, postfach::Outcome::Correlated);
    pf.close();

    let srv = Server::launch(dir.path(), &[], &[]);
    let b = Driver::start();
    b.open(&format!("http://{}/#view=instance&id={id}", srv.addr));
    b.wait_for_text("#instance-title", &format!("Instance {id} "));
    let all = ["lieferung", "pruefen", "warten", "warten", "warten"];
    wait_rows(&b, &all);

    // the body's badge: the body and its two running inner instances
    let badge = r#"a.pf-tokens[data-element="warten"]"#;
    assert_eq!(b.text(badge), "3 ⟶");
    assert_eq!(
        b.text(r#"a.pf-tokens[data-element="lieferung"]"#),
        "4 ⟶",
        "the subprocess: itself, the body and the inner instances"
    );
    b.click(badge);
    wait_rows(&b, &["warten", "warten", "warten"]);
    b.wait_for_text("#token-focus", "Tokens at warten and inside it: 3 of 5");
    b.click("#token-focus a.all-tokens");
    wait_rows(&b, &all);

    // the token table links the subprocess to what runs inside it
    b.click(r#"a.inner-link[data-element="lieferung"]"#);
    wait_rows(&b, &["lieferung", "warten", "warten", "warten"]);
    b.click("#token-focus a.all-tokens");
    wait_rows(&b, &all);

    // a click on the drawn element narrows the same way
    b.click(r#"#instance-diagram .djs-element[data-element-id="pruefen"] .djs-hit"#);
    wait_rows(&b, &["pruefen"]);
    b.screenshot("instance-narrowed-to-an-element");
    let errors = b.errors();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());
}

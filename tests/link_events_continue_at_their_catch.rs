//! A link throw event continues at the link catch event of the same name in
//! the same process or subprocess, as an off-page connector does; a throw
//! without its catch, two catches of one name, a throw with an outgoing flow
//! and a link without a name are refused, each named.
use crate::common;
use common::*;

/// `s → a (job) → nach_b (link throw "B")`, `B (link catch) → b (job) → e`,
/// and the same inside subprocess `sp` (link "B" there is its own).
const MODEL: &str = bpmn!(
    r#"
  <process id="links" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="a"/>
    <serviceTask id="a"/>
    <sequenceFlow id="f1" sourceRef="a" targetRef="nach_b"/>
    <intermediateThrowEvent id="nach_b"><linkEventDefinition name="B"/></intermediateThrowEvent>
    <intermediateCatchEvent id="von_a"><linkEventDefinition name="B"/></intermediateCatchEvent>
    <sequenceFlow id="f2" sourceRef="von_a" targetRef="sp"/>
    <subProcess id="sp">
      <startEvent id="ss"/>
      <sequenceFlow id="g0" sourceRef="ss" targetRef="innen"/>
      <intermediateThrowEvent id="innen"><linkEventDefinition name="B"/></intermediateThrowEvent>
      <intermediateCatchEvent id="innen_weiter"><linkEventDefinition name="B"/></intermediateCatchEvent>
      <sequenceFlow id="g1" sourceRef="innen_weiter" targetRef="c"/>
      <serviceTask id="c"/>
    </subProcess>
    <sequenceFlow id="f3" sourceRef="sp" targetRef="b"/>
    <serviceTask id="b"/>
    <sequenceFlow id="f4" sourceRef="b" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn a_token_thrown_at_a_link_continues_at_its_catch_in_the_same_scope() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = env.pf.start("links", no_vars(), None).await.unwrap();
    assert_eq!(env.complete_jobs("a", no_vars()).await, 1);
    assert_eq!(
        env.waiting_at(id),
        ["sp", "c"],
        "through the link into the subprocess, and through its own link"
    );
    env.complete_jobs("c", no_vars()).await;
    env.complete_jobs("b", no_vars()).await;
    assert_eq!(env.state(id), "completed");
    let h = env.history(id);
    for (element, event) in [
        ("nach_b", "completed"),
        ("von_a", "completed"),
        ("innen_weiter", "completed"),
    ] {
        assert!(has(&h, element, event), "{element} {event}: {h:?}");
    }
}

#[tokio::test]
async fn links_that_lead_nowhere_or_to_two_places_are_refused_naming_them() {
    let env = Env::new();
    let model = |body: &str| {
        format!(
            r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <process id="kaputt" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="wurf"/>
    {body}
  </process>
</definitions>"#
        )
    };
    let refused = env
        .refusal(&model(
            r#"<intermediateThrowEvent id="wurf"><linkEventDefinition name="X"/></intermediateThrowEvent>"#,
        ))
        .await;
    assert!(
        refused.contains("'wurf': no link catch event named 'X' in this scope"),
        "{refused}"
    );
    let refused = env
        .refusal(&model(
            r#"<intermediateThrowEvent id="wurf"><linkEventDefinition name="X"/></intermediateThrowEvent>
    <intermediateCatchEvent id="fang1"><linkEventDefinition name="X"/></intermediateCatchEvent>
    <intermediateCatchEvent id="fang2"><linkEventDefinition name="X"/></intermediateCatchEvent>"#,
        ))
        .await;
    assert!(
        refused.contains("'fang2': a second link catch event named 'X'"),
        "{refused}"
    );
    let refused = env
        .refusal(&model(
            r#"<intermediateThrowEvent id="wurf"><linkEventDefinition name="X"/></intermediateThrowEvent>
    <sequenceFlow id="f1" sourceRef="wurf" targetRef="e"/>
    <endEvent id="e"/>
    <intermediateCatchEvent id="fang"><linkEventDefinition name="X"/></intermediateCatchEvent>"#,
        ))
        .await;
    assert!(
        refused.contains("'wurf': a link throw event has no outgoing sequence flow"),
        "{refused}"
    );
    let refused = env
        .refusal(&model(
            r#"<intermediateThrowEvent id="wurf"><linkEventDefinition/></intermediateThrowEvent>"#,
        ))
        .await;
    assert!(
        refused.contains("'wurf': linkEventDefinition has no name"),
        "{refused}"
    );
}

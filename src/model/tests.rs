//! Tests of the model: what the parser builds and what a process derives.

use super::*;

#[test]
fn user_task_attributes_read_variables_paths_and_composite_text() {
    let vars = crate::model::vars([
        ("pruefer", "anna".into()),
        ("loopCounter", 2.into()),
        ("gruppen", serde_json::json!(["a", "b"])),
        ("auftrag", serde_json::json!({"bearbeiter": "ben"})),
    ]);
    let r = |raw: &str| UserTaskSpec::resolve(Some(raw), &vars, 0).unwrap();
    assert_eq!(r("${pruefer}").as_deref(), Some("anna"));
    assert_eq!(r("=auftrag.bearbeiter").as_deref(), Some("ben"));
    assert_eq!(r("#{gruppen}").as_deref(), Some("a,b"));
    assert_eq!(r("kermit_${loopCounter}").as_deref(), Some("kermit_2"));
    assert_eq!(
        r("${pruefer}-#{auftrag.bearbeiter}!").as_deref(),
        Some("anna-ben!")
    );
    assert_eq!(r("sales").as_deref(), Some("sales"));
    assert_eq!(r("kermit_${fehlt}"), None, "a variable it reads is not set");
    assert_eq!(r("${fehlt}"), None);
    assert_eq!(r("offen_${"), None, "an open expression is no value");
}
use proptest::prelude::*;

/// A process over `n` elements (every third one a message catch) and `edges`.
fn graph(n: usize, edges: &[(usize, usize)]) -> Process {
    let mut elements: Vec<Element> = (0..n)
        .map(|i| Element {
            id: format!("e{i}"),
            name: None,
            kind: if i % 3 == 0 {
                ElementKind::Catch(CatchKind::Message {
                    message: format!("m{}", i % 7),
                })
            } else {
                ElementKind::Throw(ThrowKind::Plain)
            },
            incoming: Vec::new(),
            outgoing: Vec::new(),
            async_before: false,
            line: 0,
            retry: None,
            boundaries: Vec::new(),
            extras: Extras::default(),
        })
        .collect();
    let flows: Vec<Flow> = edges
        .iter()
        .enumerate()
        .map(|(i, &(s, t))| {
            elements[s].outgoing.push(i);
            elements[t].incoming.push(i);
            Flow {
                id: format!("f{i}"),
                source: s,
                target: t,
                condition: None,
            }
        })
        .collect();
    Process::new("p".into(), None, elements, flows, BTreeMap::new())
}

/// The definition: every message waited for on some path from `from`.
fn walk(p: &Process, from: usize) -> Vec<String> {
    let mut seen = vec![false; p.elements.len()];
    let mut stack = vec![from];
    let mut out = Vec::new();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        out.extend(p.elements[i].kind.waits_for_message().map(str::to_string));
        stack.extend(p.elements[i].outgoing.iter().map(|&f| p.flows[f].target));
        stack.extend(p.elements[i].boundaries.iter().copied());
    }
    out.sort();
    out.dedup();
    out
}

proptest! {
    #[test]
    fn reachable_messages_match_a_walk_of_the_graph(
        (n, edges) in (1usize..40).prop_flat_map(|n| (Just(n), proptest::collection::vec((0..n, 0..n), 0..80)))
    ) {
        let p = graph(n, &edges);
        for i in 0..n {
            prop_assert_eq!(p.messages_reachable_from(i).to_vec(), walk(&p, i), "from e{}", i);
        }
    }
}

#[test]
fn reach_enters_a_subprocess_at_its_start_and_leaves_it_after_its_ends() {
    let xml = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL">
  <message id="a" name="A"/><message id="b" name="B"/><message id="c" name="C"/>
  <process id="p">
<startEvent id="s"/>
<sequenceFlow id="f0" sourceRef="s" targetRef="sub"/>
<subProcess id="sub">
  <startEvent id="is"/>
  <sequenceFlow id="i0" sourceRef="is" targetRef="innen"/>
  <receiveTask id="innen" messageRef="a"/>
  <sequenceFlow id="i1" sourceRef="innen" targetRef="nested"/>
  <subProcess id="nested">
    <startEvent id="ns"/>
    <sequenceFlow id="n0" sourceRef="ns" targetRef="tief"/>
    <serviceTask id="tief"/>
  </subProcess>
</subProcess>
<sequenceFlow id="f1" sourceRef="sub" targetRef="danach"/>
<receiveTask id="danach" messageRef="b"/>
<boundaryEvent id="rand" attachedToRef="sub"><messageEventDefinition messageRef="c"/></boundaryEvent>
  </process>
</definitions>"#;
    let keys: BTreeMap<String, String> = ["A", "B", "C"]
        .map(|m| (m.to_string(), "k".to_string()))
        .into();
    let p = parse::parse("r.bpmn", xml, &keys).unwrap().remove(0);
    let at = |id: &str| p.index_of(id).unwrap();
    let reach = |id: &str| p.messages_reachable_from(at(id)).to_vec();
    assert_eq!(reach("s"), ["A", "B", "C"]);
    // the service task in the nested subprocess has no outgoing flow: after
    // it, both scopes complete and the token goes on after `sub`
    assert_eq!(reach("tief"), ["B"]);
    assert_eq!(reach("innen"), ["A", "B"]);
    // the token holding `sub` speaks for its boundary event only
    assert_eq!(p.messages_reachable_from_scope(at("sub")), ["C"]);
    assert_eq!(p.parent_of(at("tief")), Some(at("nested")));
    assert_eq!(p.parent_of(at("nested")), Some(at("sub")));
    assert_eq!(p.parent_of(at("sub")), None);
    assert_eq!(p.none_start().map(|e| e.id.as_str()), Some("s"));
    assert!(p.can_reach(at("tief"), at("danach")));
    assert!(!p.can_reach(at("danach"), at("tief")));
}

#[test]
fn a_chain_of_a_hundred_thousand_elements_is_indexed_without_recursion() {
    let n = 100_000;
    let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
    let p = graph(n, &edges);
    assert_eq!(
        p.messages_reachable_from(n - 1),
        [format!("m{}", (n - 1) % 7)]
    );
    assert_eq!(p.messages_reachable_from(0).len(), 7);
}

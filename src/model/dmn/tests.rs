//! Decisions as the engine evaluates them: value and matched rules, the
//! injected instant, no match, Camunda 7's DMN 1.1 dialect, refusals.

use super::parse;
use serde_json::json;

/// 2026-12-05T12:00:00Z, a Saturday.
const NOON: crate::clock::Millis = 1_796_472_000_000;

fn vars(v: serde_json::Value) -> crate::Vars {
    v.as_object().unwrap().clone()
}

/// A DMN 1.3 decision table of `rules` rules over `amount`: rule i matches
/// [i·100 .. (i+1)·100) and answers "tier i" (hit policy UNIQUE).
pub(crate) fn tiers(rules: u32) -> String {
    let mut rows = String::new();
    for i in 0..rules {
        rows.push_str(&format!(
            r#"<rule id="r{i}"><inputEntry id="i{i}"><text>[{lo}..{hi})</text></inputEntry><outputEntry id="o{i}"><text>"tier {i}"</text></outputEntry></rule>"#,
            lo = i * 100,
            hi = (i + 1) * 100
        ));
    }
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/tiers" name="tiers" id="tiers">
  <decision name="Tier" id="tier">
    <decisionTable id="dt" hitPolicy="UNIQUE">
      <input id="in"><inputExpression typeRef="number"><text>amount</text></inputExpression></input>
      <output id="out" typeRef="string"/>
      {rows}
    </decisionTable>
  </decision>
</definitions>"#
    )
}

#[test]
fn a_decision_table_answers_with_its_value_and_the_rules_that_matched() {
    let m = parse("tiers.dmn", &tiers(100)).unwrap();
    let d = m
        .decide("tier", &vars(json!({"amount": 9950})), NOON)
        .unwrap();
    assert_eq!(d.value, json!("tier 99"));
    assert_eq!(d.rules, ["r99"]);
    let d = m
        .decide("tier", &vars(json!({"amount": 150})), NOON)
        .unwrap();
    assert_eq!(
        (d.value, d.rules),
        (json!("tier 1"), vec!["r1".to_string()])
    );
    // no rule matches: no value, no rule
    let d = m
        .decide("tier", &vars(json!({"amount": -5})), NOON)
        .unwrap();
    assert_eq!((d.value, d.rules), (json!(null), Vec::<String>::new()));
    assert!(
        m.decide("nope", &vars(json!({})), NOON)
            .unwrap_err()
            .contains("nope")
    );
}

const DISCOUNT: &str = r##"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/discount" name="discount" id="discount">
  <decision name="Customer Level" id="level">
    <decisionTable id="lt" hitPolicy="FIRST">
      <input id="li"><inputExpression typeRef="number"><text>orders</text></inputExpression></input>
      <output id="lo" typeRef="string"/>
      <rule id="gold"><inputEntry id="g1"><text>&gt;= 10</text></inputEntry><outputEntry id="g2"><text>"gold"</text></outputEntry></rule>
      <rule id="basic"><inputEntry id="b1"><text>-</text></inputEntry><outputEntry id="b2"><text>"basic"</text></outputEntry></rule>
    </decisionTable>
  </decision>
  <decision name="Discount" id="discount">
    <informationRequirement id="req"><requiredDecision href="#level"/></informationRequirement>
    <decisionTable id="dt" hitPolicy="COLLECT">
      <input id="i1"><inputExpression typeRef="string"><text>Customer Level</text></inputExpression></input>
      <input id="i2"><inputExpression typeRef="string"><text>day of week(today())</text></inputExpression></input>
      <output id="o1" name="percent" typeRef="number"/>
      <rule id="gold-rule"><inputEntry id="x1"><text>"gold"</text></inputEntry><inputEntry id="x2"><text>-</text></inputEntry><outputEntry id="x3"><text>10</text></outputEntry></rule>
      <rule id="weekend"><inputEntry id="y1"><text>-</text></inputEntry><inputEntry id="y2"><text>"Saturday","Sunday"</text></inputEntry><outputEntry id="y3"><text>5</text></outputEntry></rule>
    </decisionTable>
  </decision>
  <decision name="Stamp" id="stamp">
    <literalExpression id="le"><text>string(now())</text></literalExpression>
  </decision>
</definitions>"##;

#[test]
fn required_decisions_and_the_clock_are_those_of_the_evaluation() {
    let m = parse("discount.dmn", DISCOUNT).unwrap();
    // a Saturday: both rules
    let d = m
        .decide("discount", &vars(json!({"orders": 12})), NOON)
        .unwrap();
    assert_eq!(d.value, json!([10, 5]));
    assert_eq!(d.rules, ["gold-rule", "weekend"]);
    // a Monday, a basic customer: none
    let monday = NOON + 2 * 86_400_000;
    let d = m
        .decide("discount", &vars(json!({"orders": 1})), monday)
        .unwrap();
    assert_eq!((d.value, d.rules), (json!(null), Vec::<String>::new()));
    let d = m.decide("stamp", &vars(json!({})), NOON).unwrap();
    assert_eq!(d.value, json!("2026-12-05T12:00:00Z"));
    assert!(d.rules.is_empty());
}

/// As Camunda 7's tests write decisions: DMN 1.1, a namespace that is no
/// URI, JUEL-style input expressions.
const CAMUNDA_11: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="http://www.omg.org/spec/DMN/20151101/dmn.xsd" id="definitions" name="camunda" namespace="http://camunda.org/schema/1.0/dmn">
  <decision id="decision" name="Decision">
    <decisionTable id="table">
      <input id="input1" label="Input"><inputExpression id="ie" typeRef="string" expressionLanguage="juel"><text>${status}</text></inputExpression></input>
      <output id="output1" name="result" typeRef="string"/>
      <rule id="ok"><inputEntry id="e1"><text>"bronze"</text></inputEntry><outputEntry id="e2"><text>"notok"</text></outputEntry></rule>
      <rule id="fine"><inputEntry id="e3"><text>"gold"</text></inputEntry><outputEntry id="e4"><text>"ok"</text></outputEntry></rule>
    </decisionTable>
  </decision>
</definitions>"#;

#[test]
fn camunda_7_dmn_1_1_files_decide() {
    let m = parse("camunda.dmn", CAMUNDA_11).unwrap();
    let d = m
        .decide("decision", &vars(json!({"status": "gold"})), NOON)
        .unwrap();
    assert_eq!((d.value, d.rules), (json!("ok"), vec!["fine".to_string()]));
    let m = parse(
        "ns.dmn",
        &CAMUNDA_11.replace("http://camunda.org/schema/1.0/dmn", "test-drg"),
    )
    .unwrap();
    assert_eq!(m.outline.namespace, "urn:test-drg");
}

#[test]
fn what_does_not_parse_is_refused_naming_element_and_line() {
    let bad = tiers(3).replace("[200..300)", "[200..");
    let e = parse("tiers.dmn", &bad).unwrap_err().to_string();
    assert!(e.contains("tiers.dmn"), "{e}");
    assert!(e.contains("'i2'"), "{e}");
    assert!(e.contains("line 7"), "{e}");
    let e = parse(
        "x.dmn",
        "<definitions xmlns=\"http://www.omg.org/spec/BPMN/20100524/MODEL\"/>",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("DMN"), "{e}");
    let e = parse("x.dmn", "<definitions").unwrap_err().to_string();
    assert!(e.contains("x.dmn"), "{e}");
}

//! Decisions as the engine evaluates them: value and matched rules, the
//! injected instant, no match, Camunda 7's DMN 1.1 dialect, refusals.

use super::parse;
use serde_json::json;

/// 2026-12-05T12:00:00Z, a Saturday.
const NOON: crate::clock::Millis = 1_796_472_000_000;

fn vars(v: serde_json::Value) -> crate::model::Vars {
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

/// Input data with declared types, a decision without an id, a result
/// coerced to its declared type, and a decision service.
const TYPED: &str = r##"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/typed" name="typed" id="typed">
  <itemDefinition name="tOrder">
    <itemComponent name="placed"><typeRef>date</typeRef></itemComponent>
    <itemComponent name="allowed"><typeRef>days and time duration</typeRef></itemComponent>
  </itemDefinition>
  <itemDefinition name="tDates" isCollection="true"><typeRef>date</typeRef></itemDefinition>
  <inputData id="o" name="order"><variable name="order" typeRef="tOrder"/></inputData>
  <inputData id="h" name="holidays"><variable name="holidays" typeRef="tDates"/></inputData>
  <inputData id="t" name="shipped at"><variable name="shipped at" typeRef="dateTime"/></inputData>
  <decision name="Due">
    <variable name="Due" typeRef="date"/>
    <informationRequirement><requiredInput href="#o"/></informationRequirement>
    <literalExpression><text>order.placed + order.allowed</text></literalExpression>
  </decision>
  <decision name="Holiday" id="holiday">
    <variable name="Holiday" typeRef="boolean"/>
    <informationRequirement><requiredInput href="#h"/></informationRequirement>
    <informationRequirement><requiredInput href="#t"/></informationRequirement>
    <literalExpression><text>list contains(holidays, date(shipped at))</text></literalExpression>
  </decision>
  <decision name="Label" id="label">
    <variable name="Label" typeRef="string"/>
    <literalExpression><text>1 + 1</text></literalExpression>
  </decision>
  <decisionService name="Shipping" id="shipping">
    <variable name="Shipping"/>
    <outputDecision href="#holiday"/>
    <inputData href="#h"/>
    <inputData href="#t"/>
  </decisionService>
</definitions>"##;

#[test]
fn inputs_take_their_declared_types_and_results_are_coerced_to_theirs() {
    let m = parse("typed.dmn", TYPED).unwrap();
    // a decision without an id gets one, and a warning says which
    let due = &m.outline.decisions[0];
    assert_eq!((due.id.as_str(), due.name.as_str()), ("decision-1", "Due"));
    assert_eq!(m.outline.warnings.len(), 1);
    assert!(m.outline.warnings[0].message.contains("'Due' has no id"));
    // ISO 8601 text becomes a date and a duration where the type says so
    let order = vars(json!({"order": {"placed": "2026-02-26", "allowed": "P3D"}}));
    let d = m.decide("decision-1", &order, NOON).unwrap();
    assert_eq!(d.value, json!("2026-03-01"));
    let shipped = vars(
        json!({"holidays": ["2026-12-24", "2026-12-25"], "shipped at": "2026-12-25T09:30:00Z"}),
    );
    assert_eq!(
        m.decide("holiday", &shipped, NOON).unwrap().value,
        json!(true)
    );
    // a value of another type than declared is null, as DMN says
    assert_eq!(
        m.decide("label", &vars(json!({})), NOON).unwrap().value,
        json!(null)
    );
    // a decision service is invoked as a decision is
    let s = m
        .outline
        .decisions
        .iter()
        .find(|d| d.id == "shipping")
        .unwrap();
    assert!(s.service);
    assert_eq!(
        m.decide("shipping", &shipped, NOON).unwrap().value,
        json!(true)
    );
}

#[test]
fn a_decision_reads_process_variables_it_does_not_declare() {
    // Camunda's and Zeebe's decisions read every variable of the process:
    // paths, operators and names that are also built-in functions' names
    let xml = r##"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/undeclared" name="undeclared" id="undeclared">
  <decision name="Total" id="total">
    <literalExpression><text>order.amount*order.rate + count(items) + string length(string: label)</text></literalExpression>
  </decision>
</definitions>"##;
    let m = parse("undeclared.dmn", xml).unwrap();
    let v = vars(json!({"order": {"amount": 10, "rate": 0.5}, "items": [1, 2], "label": "abc"}));
    assert_eq!(m.decide("total", &v, NOON).unwrap().value, json!(10));
}

#[test]
fn a_file_that_imports_another_is_refused_saying_so() {
    let xml = r##"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/i" name="i" id="i">
  <import namespace="https://postfach.dev/other" name="other" importType="https://www.omg.org/spec/DMN/20191111/MODEL/"/>
  <decision name="D" id="d"><literalExpression><text>other.x</text></literalExpression></decision>
</definitions>"##;
    let e = parse("i.dmn", xml).unwrap_err().to_string();
    assert!(
        e.contains("i.dmn") && e.contains("imports 'https://postfach.dev/other'"),
        "{e}"
    );
}

//! DecisionToolkit (dsntk 0.3.0) measured as postfach's FEEL and DMN engine
//! (issue: FEEL and DMN), on this machine, against limits the issue sets:
//!
//! 1. a gateway condition in FEEL against postfach's own evaluator on the
//!    same condition (limit 3×), with and without turning the instance's
//!    JSON variables into a FEEL context first;
//! 2. a 100-rule decision table (limit 50 µs per evaluation);
//! 3. whether `now()` reads the system clock (the engine's state must be a
//!    function of its log: it must read the batch's instant).
//!
//!     cargo run --release --manifest-path benches/feel_eval/Cargo.toml
use dsntk_feel::context::FeelContext;
use dsntk_feel::values::Value;
use dsntk_feel::{FeelNumber, FeelScope, Name};
use std::hint::black_box;
use std::time::Instant;

/// Nanoseconds per call of `f`: the median of 7 rounds of `n` calls.
fn ns_per_call(n: u32, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[3]
}

/// The instance's variables as a FEEL context (numbers through their text,
/// as FEEL numbers are decimal).
fn context_of(vars: &serde_json::Map<String, serde_json::Value>) -> FeelContext {
    let mut ctx = FeelContext::default();
    for (k, v) in vars {
        let value = match v {
            serde_json::Value::Bool(b) => Value::Boolean(*b),
            // whole numbers directly, others through their text (FEEL
            // numbers are decimal)
            serde_json::Value::Number(n) => Value::Number(match n.as_i64() {
                Some(i) => FeelNumber::from(i),
                None => n
                    .to_string()
                    .parse::<FeelNumber>()
                    .expect("a JSON number is a FEEL number"),
            }),
            serde_json::Value::String(s) => Value::String(s.clone()),
            _ => Value::Null(None),
        };
        ctx.set_entry(&Name::from(k.as_str()), value);
    }
    ctx
}

fn condition() -> (f64, f64, f64) {
    let json = serde_json::json!({"amount": 1500, "approved": true, "region": "nord"});
    let vars: postfach::Vars = serde_json::from_value(json.clone()).unwrap();
    let own = postfach::model::parse_condition("${amount > 1000 && approved}").unwrap();
    assert!(postfach::model::eval_bool(&own, &vars, 0).unwrap());
    let postfach_ns = ns_per_call(200_000, || {
        black_box(postfach::model::eval_bool(black_box(&own), black_box(&vars), 0).unwrap());
    });

    let map = json.as_object().unwrap().clone();
    let scope = FeelScope::from(context_of(&map));
    let ast = dsntk_feel_parser::parse_expression(&scope, "amount > 1000 and approved", false)
        .expect("FEEL parses");
    let evaluator = dsntk_feel_evaluator::prepare(&ast);
    assert_eq!(evaluator(&scope), Value::Boolean(true));
    let feel_ns = ns_per_call(200_000, || {
        black_box(evaluator(black_box(&scope)));
    });
    // what an engine step pays: the variables the condition names (the
    // engine reads only those) become a FEEL scope first
    let named: serde_json::Map<String, serde_json::Value> = map
        .iter()
        .filter(|(k, _)| *k == "amount" || *k == "approved")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let feel_with_scope_ns = ns_per_call(200_000, || {
        let scope = FeelScope::from(context_of(black_box(&named)));
        black_box(evaluator(&scope));
    });
    (postfach_ns, feel_ns, feel_with_scope_ns)
}

/// A DMN 1.3 decision table of `rules` rules over `amount`: rule i matches
/// [i·100 .. (i+1)·100) and answers "tier i" (hit policy UNIQUE).
fn decision_table(rules: u32) -> String {
    let mut rows = String::new();
    for i in 0..rules {
        rows.push_str(&format!(
            r#"<rule id="r{i}"><inputEntry id="i{i}"><text>[{lo}..{hi})</text></inputEntry><outputEntry id="o{i}"><text>"tier {i}"</text></outputEntry></rule>"#,
            lo = i * 100,
            hi = (i + 1) * 100
        ));
    }
    format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/feel-eval" name="tiers" id="tiers">
  <decision name="Tier" id="tier">
    <variable typeRef="string" name="Tier"/>
    <informationRequirement id="ir"><requiredInput href="#amount"/></informationRequirement>
    <decisionTable id="dt" hitPolicy="UNIQUE">
      <input id="in"><inputExpression typeRef="number"><text>Amount</text></inputExpression></input>
      <output id="out" typeRef="string"/>
      {rows}
    </decisionTable>
  </decision>
  <inputData name="Amount" id="amount"><variable typeRef="number" name="Amount"/></inputData>
</definitions>"##
    )
}

fn decision() -> f64 {
    let definitions = dsntk_model::parse(&decision_table(100)).expect("DMN parses");
    let evaluator = dsntk_model_evaluator::ModelEvaluator::new(&[definitions]).expect("DMN builds");
    let mut input = FeelContext::default();
    input.set_entry(
        &Name::from("Amount"),
        Value::Number("9950".parse::<FeelNumber>().unwrap()),
    );
    let ns = "https://postfach.dev/feel-eval";
    let out = evaluator.evaluate_invocable(ns, "tiers", "Tier", &input);
    assert_eq!(out, Value::String("tier 99".into()), "{out:?}");
    ns_per_call(20_000, || {
        black_box(evaluator.evaluate_invocable(ns, "tiers", "Tier", black_box(&input)));
    })
}

fn now_reads_the_system_clock() -> bool {
    let scope = FeelScope::default();
    let ast = dsntk_feel_parser::parse_expression(&scope, "now()", false).unwrap();
    let evaluator = dsntk_feel_evaluator::prepare(&ast);
    let first = evaluator(&scope);
    // its resolution may be a second
    std::thread::sleep(std::time::Duration::from_millis(1100));
    first != evaluator(&scope)
}

fn main() {
    let (own, feel, feel_scope) = condition();
    println!(
        "gateway condition: postfach {own:.0} ns; FEEL {feel:.0} ns ({:.1}×); FEEL with the scope built from the two variables it names {feel_scope:.0} ns ({:.1}×); limit 3×",
        feel / own,
        feel_scope / own
    );
    let d = decision();
    println!(
        "100-rule decision table (UNIQUE, last rule matches): {:.1} µs per evaluation; limit 50 µs",
        d / 1000.0
    );
    println!(
        "now() reads the system clock: {}",
        if now_reads_the_system_clock() {
            "yes (two evaluations 1.1 s apart differ)"
        } else {
            "no"
        }
    );
}

//! What an expression costs the engine: a gateway condition written in FEEL
//! (`=amount > 1000 and approved`) against the same condition for
//! postfach's own evaluator (`${amount > 1000 && approved}`), over the same
//! variables, as a step evaluates it. The target (issue "FEEL and DMN"):
//! FEEL at most 3× the native evaluator. And a 100-rule DMN decision table
//! (hit policy UNIQUE, the last rule matches) as a business rule task
//! evaluates it, matched rules included: at most 50 µs.
//!
//!     cargo bench --bench expressions
use criterion::{Criterion, criterion_group, criterion_main};

/// As the binary allocates (see `benches/support`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use postfach::model::{eval_bool, parse_condition};
use std::hint::black_box;

fn gateway_condition(c: &mut Criterion) {
    let vars = postfach::vars([
        ("amount", 1500.into()),
        ("approved", true.into()),
        ("region", "nord".into()),
    ]);
    let native = parse_condition("${amount > 1000 && approved}").unwrap();
    let feel = parse_condition("=amount > 1000 and approved").unwrap();
    assert!(matches!(feel, postfach::model::Expr::Feel(_)));
    assert!(eval_bool(&native, &vars, 0).unwrap());
    assert!(eval_bool(&feel, &vars, 0).unwrap());
    let mut g = c.benchmark_group("gateway_condition");
    g.bench_function("native", |b| {
        b.iter(|| eval_bool(black_box(&native), black_box(&vars), 0).unwrap())
    });
    g.bench_function("feel", |b| {
        b.iter(|| eval_bool(black_box(&feel), black_box(&vars), 0).unwrap())
    });
    g.finish();
}

/// A DMN 1.3 decision table of `rules` rules over `amount`: rule i matches
/// [i·100 .. (i+1)·100) and answers "tier i".
fn tiers(rules: u32) -> String {
    let rows: String = (0..rules)
        .map(|i| {
            format!(
                r#"<rule id="r{i}"><inputEntry id="i{i}"><text>[{lo}..{hi})</text></inputEntry><outputEntry id="o{i}"><text>"tier {i}"</text></outputEntry></rule>"#,
                lo = i * 100,
                hi = (i + 1) * 100
            )
        })
        .collect();
    format!(
        r#"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/tiers" name="tiers" id="tiers">
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

fn decision_table(c: &mut Criterion) {
    let model = postfach::model::dmn::parse("tiers.dmn", &tiers(100)).unwrap();
    let vars = postfach::vars([("amount", 9950.into()), ("region", "nord".into())]);
    let d = model.decide("tier", &vars, 0).unwrap();
    assert_eq!(
        (d.value, d.rules),
        ("tier 99".into(), vec!["r99".to_string()])
    );
    c.bench_function("decision_table/100_rules_unique", |b| {
        b.iter(|| model.decide("tier", black_box(&vars), 0).unwrap())
    });
}

criterion_group!(benches, gateway_condition, decision_table);
criterion_main!(benches);

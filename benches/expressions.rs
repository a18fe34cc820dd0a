//! What an expression costs the engine: a gateway condition written in FEEL
//! (`=amount > 1000 and approved`) against the same condition for
//! postfach's own evaluator (`${amount > 1000 && approved}`), over the same
//! variables, as a step evaluates it. The target (issue "FEEL and DMN"):
//! FEEL at most 3× the native evaluator.
//!
//!     cargo bench --bench expressions
use criterion::{Criterion, criterion_group, criterion_main};
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

criterion_group!(benches, gateway_condition);
criterion_main!(benches);

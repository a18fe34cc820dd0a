//! FEEL as the engine evaluates it: values in and out, the injected
//! instant, the extension functions, and refusals.

use super::Feel;
use serde_json::json;

fn eval(src: &str, vars: serde_json::Value) -> Result<serde_json::Value, String> {
    let f = Feel::parse(src)?;
    f.eval(vars.as_object().unwrap(), NOON)
}

/// 2026-12-05T12:00:00Z, a Saturday.
const NOON: crate::clock::Millis = 1_796_472_000_000;

#[test]
fn feel_computes_what_zeebe_models_write() {
    assert_eq!(eval("[1,2,3]", json!({})), Ok(json!([1, 2, 3])));
    assert_eq!(
        eval(
            r#"if amount > 1000 then "manual" else "auto""#,
            json!({"amount": 1500})
        ),
        Ok(json!("manual"))
    );
    assert_eq!(
        eval(
            "order.items[price > 10].name",
            json!({"order": {"items": [{"name": "a", "price": 5}, {"name": "b", "price": 12.5}]}})
        ),
        Ok(json!(["b"]))
    );
    assert_eq!(eval("count(items)", json!({"items": [1, 2]})), Ok(json!(2)));
    assert_eq!(eval("amount * 1.5", json!({"amount": 3})), Ok(json!(4.5)));
    assert_eq!(
        eval(r#"{a: 1, b: "x"}"#, json!({})),
        Ok(json!({"a": 1, "b": "x"}))
    );
    assert_eq!(eval("missing", json!({})), Ok(json!(null)));
    assert_eq!(
        eval("string length(s) + 1", json!({"s": "ab"})),
        Ok(json!(3))
    );
    assert_eq!(
        eval(
            r#"value + get value({value: 1}, "value")"#,
            json!({"value": 3})
        ),
        Ok(json!(4))
    );
    assert_eq!(
        eval("some i in l satisfies i > 2", json!({"l": [1, 3]})),
        Ok(json!(true))
    );
    assert_eq!(
        eval("for i in l return i * 2", json!({"l": [1, 3]})),
        Ok(json!([2, 6]))
    );
    assert_eq!(eval("x in [1..3]", json!({"x": 2})), Ok(json!(true)));
}

#[test]
fn now_and_today_read_the_instant_given() {
    assert_eq!(eval("today()", json!({})), Ok(json!("2026-12-05")));
    assert_eq!(
        eval(r#"day of week(today())"#, json!({})),
        Ok(json!("Saturday"))
    );
    assert_eq!(
        eval(
            r#"now() = date and time("2026-12-05T12:00:00Z")"#,
            json!({})
        ),
        Ok(json!(true))
    );
    let f = Feel::parse("string(now())").unwrap();
    let vars = serde_json::Map::new();
    assert_ne!(f.eval(&vars, NOON), f.eval(&vars, NOON + 86_400_000));
}

#[test]
fn the_camunda_extension_functions_work() {
    assert_eq!(eval("is defined(x)", json!({"x": null})), Ok(json!(true)));
    assert_eq!(eval("is defined(y)", json!({})), Ok(json!(false)));
    assert_eq!(eval("get or else(y, 7)", json!({})), Ok(json!(7)));
    assert_eq!(eval("get or else(x, 7)", json!({"x": 1})), Ok(json!(1)));
    assert_eq!(eval("assert(x, x > 0)", json!({"x": 1})), Ok(json!(1)));
    assert!(
        eval("assert(x, x > 0)", json!({"x": -1}))
            .unwrap_err()
            .contains("assertion failed")
    );
    let e = eval(
        r#"assert(x, x > 0, "x must be positive")"#,
        json!({"x": -1}),
    )
    .unwrap_err();
    assert!(e.contains("x must be positive"), "{e}");
    assert_eq!(
        eval(r#"assert(x, x > 0, "x must be positive")"#, json!({"x": 2})),
        Ok(json!(2))
    );
    assert_eq!(eval("is empty(l)", json!({"l": []})), Ok(json!(true)));
    assert_eq!(eval(r#"is blank("  ")"#, json!({})), Ok(json!(true)));
    assert_eq!(eval(r#"trim("  a ")"#, json!({})), Ok(json!("a")));
    assert_eq!(
        eval("partition([1,2,3], 2)", json!({})),
        Ok(json!([[1, 2], [3]]))
    );
    assert_eq!(
        eval("duplicate values([1,2,1,3,2,1])", json!({})),
        Ok(json!([1, 2]))
    );
    assert_eq!(
        eval(r#"extract("a1b22c333", "[0-9]+")"#, json!({})),
        Ok(json!(["1", "22", "333"]))
    );
    assert_eq!(
        eval(r#"from json("{\"a\": [1, true]}")"#, json!({})),
        Ok(json!({"a": [1, true]}))
    );
    assert_eq!(
        eval("to json(x)", json!({"x": {"b": 2}})),
        Ok(json!(r#"{"b":2}"#))
    );
    assert_eq!(
        eval(r#"last day of month(date("2028-02-10"))"#, json!({})),
        Ok(json!("2028-02-29"))
    );
}

#[test]
fn what_feel_cannot_compute_is_an_error_with_its_reason() {
    let e = eval(r#"amount * 2"#, json!({"amount": "abc"})).unwrap_err();
    assert!(e.contains("amount * 2"), "{e}");
    let f = Feel::parse("amount > 10").unwrap();
    let e = f
        .eval_bool(json!({}).as_object().unwrap(), NOON)
        .unwrap_err();
    assert!(e.contains("null"), "{e}");
    let e = Feel::parse(r#"amount + 1"#)
        .unwrap()
        .eval_bool(json!({"amount": 1}).as_object().unwrap(), NOON)
        .unwrap_err();
    assert!(e.contains("not to true or false"), "{e}");
}

#[test]
fn unrepeatable_and_unparsable_expressions_are_refused() {
    assert!(Feel::parse("uuid()").unwrap_err().contains("uuid"));
    assert!(
        Feel::parse("random number()")
            .unwrap_err()
            .contains("random number")
    );
    assert!(
        Feel::parse(r#"function(a) external {java: {class: "x", method signature: "y"}}"#)
            .unwrap_err()
            .contains("external")
    );
    assert!(Feel::parse("a +").is_err());
    assert!(Feel::parse(r#""open"#).is_err());
    assert!(Feel::parse("").is_err());
}

#[test]
fn an_expression_round_trips_through_its_stored_form() {
    let f = Feel::parse("a + 1").unwrap();
    let bytes = serde_json::to_string(&f).unwrap();
    let back: Feel = serde_json::from_str(&bytes).unwrap();
    assert_eq!(back, f);
    assert_eq!(
        back.eval(json!({"a": 1}).as_object().unwrap(), NOON),
        Ok(json!(2))
    );
}

mod same_as_the_native_evaluator {
    use super::*;
    use proptest::prelude::*;

    /// An arithmetic or comparison expression over `a`, `b`, `c` and small
    /// whole numbers, written with every operation in parentheses.
    fn number() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            (-20i32..20).prop_map(|n| if n < 0 {
                format!("({n})")
            } else {
                n.to_string()
            }),
            prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(str::to_string),
        ];
        leaf.prop_recursive(4, 24, 2, |inner| {
            (
                inner.clone(),
                prop_oneof![Just("+"), Just("-"), Just("*"), Just("/")],
                inner,
            )
                .prop_map(|(l, op, r)| format!("({l} {op} {r})"))
        })
    }

    /// A condition and the operands of each comparison in it.
    fn condition() -> impl Strategy<Value = (String, Vec<(String, String)>)> {
        let cmp = (
            number(),
            prop_oneof![
                Just("<"),
                Just("<="),
                Just(">"),
                Just(">="),
                Just("="),
                Just("!=")
            ],
            number(),
        )
            .prop_map(|(l, op, r)| (format!("{l} {op} {r}"), vec![(l, r)]));
        cmp.prop_recursive(2, 8, 2, |inner| {
            (inner.clone(), prop_oneof![Just("and"), Just("or")], inner).prop_map(
                |((l, mut lc), op, (r, rc))| {
                    lc.extend(rc);
                    (format!("({l}) {op} ({r})"), lc)
                },
            )
        })
    }

    /// Whether a comparison's operands differ by no more than rounding: a
    /// quotient FEEL keeps in decimal and the native evaluator in binary
    /// may then compare either way (3 / (3 / -21) is -21 in one and
    /// -21.000000000000004 in the other). Such a case says nothing about
    /// the two evaluators' logic.
    fn at_rounding_distance(
        l: &str,
        r: &str,
        vars: &serde_json::Map<String, serde_json::Value>,
    ) -> bool {
        let value = |src: &str| {
            let e = crate::model::expr::parse_native(&format!("={src}")).ok()?;
            crate::model::eval_value(&e, vars, NOON).ok()?.as_f64()
        };
        match (value(l), value(r)) {
            (Some(x), Some(y)) => {
                (l.contains('/') || r.contains('/'))
                    && (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
            }
            _ => false,
        }
    }

    fn same(native: &serde_json::Value, feel: &serde_json::Value) -> bool {
        match (native.as_f64(), feel.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
            _ => native == feel,
        }
    }

    proptest! {
        #[test]
        fn arithmetic_evaluates_the_same_in_both(
            src in number(),
            a in -50i64..50, b in -50i64..50, c in -50i64..50,
        ) {
            let vars = json!({"a": a, "b": b, "c": c});
            let vars = vars.as_object().unwrap();
            let native = crate::model::expr::parse_native(&format!("={src}")).unwrap();
            let feel = Feel::parse(&src).unwrap();
            match (crate::model::eval_value(&native, vars, NOON), feel.eval(vars, NOON)) {
                (Ok(n), Ok(f)) => prop_assert!(same(&n, &f), "{src}: native {n}, FEEL {f}"),
                // only a division by zero may fail, in both
                (n, f) => prop_assert!(src.contains('/') && n.is_err() && f.is_err(), "{src}: {n:?} / {f:?}"),
            }
        }

        #[test]
        fn conditions_evaluate_the_same_in_both(
            (src, comparisons) in condition(),
            a in -50i64..50, b in -50i64..50, c in -50i64..50,
        ) {
            let vars = json!({"a": a, "b": b, "c": c});
            let vars = vars.as_object().unwrap();
            prop_assume!(!comparisons.iter().any(|(l, r)| at_rounding_distance(l, r, vars)));
            let native = crate::model::expr::parse_native(&format!("={src}")).unwrap();
            let feel = Feel::parse(&src).unwrap();
            match (crate::model::eval_bool(&native, vars, NOON), feel.eval_bool(vars, NOON)) {
                (Ok(n), Ok(f)) => prop_assert_eq!(n, f, "{}", src),
                // a division by zero fails the native evaluator; FEEL's
                // three-valued logic may still answer (`null and false` is false)
                (n, f) => prop_assert!(src.contains('/') && n.is_err(), "{src}: {n:?} / {f:?}"),
            }
        }
    }
}

/// Built-in names where they meet other words are read as FEEL reads them:
/// a function called, a named argument, a type after `instance of`.
#[test]
fn built_in_names_are_never_taken_for_variables() {
    assert_eq!(
        eval(r#"date("2018-12-08") instance of date and time"#, json!({})),
        Ok(json!(false))
    );
    assert_eq!(
        eval(r#"@"2019-03-31" instance of date"#, json!({})),
        Ok(json!(true))
    );
    assert_eq!(
        eval(r#"string length(string: "xyz")"#, json!({})),
        Ok(json!(3))
    );
    assert_eq!(
        eval(r#"context put(context: {}, key: "a", value: 1)"#, json!({})),
        Ok(json!({"a": 1}))
    );
    assert_eq!(
        eval(r#"date(date and time("2017-08-14T14:25:00"))"#, json!({})),
        Ok(json!("2017-08-14"))
    );
    assert_eq!(
        eval("string length(string(n)) + 1", json!({"n": 123})),
        Ok(json!(4))
    );
    // a variable named like a built-in is still a variable where it is one
    assert_eq!(eval("date + 1", json!({"date": 2})), Ok(json!(3)));
    assert_eq!(
        eval(
            "order.total*order.rate",
            json!({"order": {"total": 10, "rate": 0.5}})
        ),
        Ok(json!(5))
    );
}

/// A list computes each element or fails naming why: no element is a
/// silent null.
#[test]
fn a_list_element_that_cannot_be_computed_is_an_error() {
    assert_eq!(
        eval(
            "[date(d), date and time(t)]",
            json!({"d": "2024-02-28", "t": "2024-02-28T12:00:00Z"})
        ),
        Ok(json!(["2024-02-28", "2024-02-28T12:00:00Z"]))
    );
    let e = eval(
        "[date(d), date and time(t)]",
        json!({"d": "2024-02-28", "t": "2024-02-28 12:00"}),
    )
    .unwrap_err();
    assert!(
        e.contains("invalid date or date and time '2024-02-28 12:00'"),
        "{e}"
    );
    let e = eval(r#"[1, date("x")]"#, json!({})).unwrap_err();
    assert!(e.contains("invalid date string 'x'"), "{e}");
}

//! The DMN TCK's decision-table (compliance level 2) and FEEL (compliance
//! level 3) test cases, run through postfach's decision evaluation: each
//! model is read as `postfach deploy` reads it, each test case's inputs
//! become the variables, and each expected decision result is compared with
//! what postfach computes. Prints the pass rate; fails when it drops below
//! what was measured when these cases were vendored.
//!
//! The cases are the TCK repository's own files, unchanged
//! (tests/fixtures/dmn-tck, Apache-2.0, see its README); variables are JSON,
//! so a TCK input typed as a date, time or duration reaches FEEL as a
//! string, as a process variable would.
#![cfg(feature = "feel")]
use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// An XML element: local name, attributes by local name, children, text.
#[derive(Debug, Default)]
struct El {
    name: String,
    attrs: Vec<(String, String)>,
    children: Vec<El>,
    text: String,
}

impl El {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a El> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    fn child(&self, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.name == name)
    }
}

fn local(q: &str) -> String {
    q.rsplit(':').next().unwrap_or_default().to_string()
}

fn element(e: &quick_xml::events::BytesStart<'_>) -> El {
    El {
        name: local(e.name().as_ref()),
        attrs: e
            .attributes()
            .flatten()
            .map(|a| {
                #[allow(deprecated)]
                let v = a
                    .unescape_value()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                (local(a.key.as_ref()), v)
            })
            .collect(),
        ..El::default()
    }
}

fn tree(xml: &str) -> El {
    let mut r = Reader::from_str(xml);
    let mut stack: Vec<El> = vec![El::default()];
    loop {
        match r.read_event().expect("TCK test files are well-formed") {
            Event::Start(e) => stack.push(element(&e)),
            Event::Empty(e) => {
                let el = element(&e);
                stack.last_mut().unwrap().children.push(el);
            }
            Event::End(_) => {
                let el = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(el);
            }
            Event::Text(t) => {
                stack.last_mut().unwrap().text.push_str(&t.xml10_content());
            }
            Event::GeneralRef(g) => {
                let text = match &*g {
                    "lt" => "<".to_string(),
                    "gt" => ">".to_string(),
                    "amp" => "&".to_string(),
                    "quot" => "\"".to_string(),
                    "apos" => "'".to_string(),
                    _ => g
                        .resolve_char_ref()
                        .ok()
                        .flatten()
                        .map(String::from)
                        .unwrap_or_default(),
                };
                stack.last_mut().unwrap().text.push_str(&text);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    stack.pop().unwrap().children.pop().expect("a root element")
}

/// A TCK value element (`value`, `list`, `component`s) as JSON.
fn value_of(holder: &El) -> Value {
    if let Some(v) = holder.child("value") {
        if v.attr("nil") == Some("true") {
            return Value::Null;
        }
        let text = v.text.trim();
        return match v.attr("type").unwrap_or("xsd:string") {
            // whole numbers as whole JSON numbers, as a process variable holds them
            "xsd:decimal" | "xsd:double" | "xsd:int" | "xsd:integer" | "xsd:long" => {
                match text.parse::<i64>() {
                    Ok(i) => Value::from(i),
                    Err(_) => text
                        .parse::<f64>()
                        .ok()
                        .and_then(serde_json::Number::from_f64)
                        .map_or_else(|| Value::String(text.into()), Value::Number),
                }
            }
            "xsd:boolean" => Value::Bool(text == "true"),
            _ => Value::String(v.text.clone()),
        };
    }
    if let Some(list) = holder.child("list") {
        return Value::Array(list.all("item").map(value_of).collect());
    }
    let components: Map<String, Value> = holder
        .all("component")
        .map(|c| (c.attr("name").unwrap_or_default().to_string(), value_of(c)))
        .collect();
    if components.is_empty() {
        Value::Null
    } else {
        Value::Object(components)
    }
}

/// What the TCK expects of a result node: a value with its XML schema type.
#[derive(Debug)]
enum Expected {
    Null,
    /// A number, as the decimal text the TCK writes.
    Number(String),
    /// A date, time, date and time or duration, as its ISO 8601 text.
    Temporal(String),
    Boolean(bool),
    Text(String),
    List(Vec<Expected>),
    Context(Vec<(String, Expected)>),
}

/// The TCK's expected value below `holder`, with its type.
fn expected_of(holder: &El) -> Expected {
    if let Some(v) = holder.child("value") {
        if v.attr("nil") == Some("true") {
            return Expected::Null;
        }
        let text = v.text.trim().to_string();
        return match v.attr("type").unwrap_or("xsd:string") {
            "xsd:decimal" | "xsd:double" | "xsd:int" | "xsd:integer" | "xsd:long" => {
                Expected::Number(text)
            }
            "xsd:boolean" => Expected::Boolean(text == "true"),
            "xsd:date" | "xsd:time" | "xsd:dateTime" | "xsd:duration" => Expected::Temporal(text),
            _ => Expected::Text(v.text.clone()),
        };
    }
    if let Some(list) = holder.child("list") {
        return Expected::List(list.all("item").map(expected_of).collect());
    }
    let components: Vec<(String, Expected)> = holder
        .all("component")
        .map(|c| {
            (
                c.attr("name").unwrap_or_default().to_string(),
                expected_of(c),
            )
        })
        .collect();
    if components.is_empty() {
        Expected::Null
    } else {
        Expected::Context(components)
    }
}

/// Whether two numbers are the same decimal, as the TCK's runners compare
/// them: computed in FEEL's decimal arithmetic, an absolute difference
/// below 0.00000001 (Drools' TCK runner's `NUMBER_COMPARISON_PRECISION`).
fn same_number(e: &str, a: &str) -> bool {
    feel_true(&format!("abs(({e}) - ({a})) < 0.00000001"))
}

/// Whether FEEL text `text` is true.
fn feel_true(text: &str) -> bool {
    postfach::model::feel::Feel::parse(text)
        .and_then(|x| x.eval(&postfach::Vars::new(), 0))
        .is_ok_and(|v| v == Value::Bool(true))
}

/// Whether two dates, times, dates and times or durations written as ISO
/// 8601 text are the same value (FEEL compares them, however written).
fn same_temporal(e: &str, a: &str) -> bool {
    let f = if e.starts_with('P') || e.starts_with("-P") {
        "duration"
    } else if e.contains('T') {
        "date and time"
    } else if e.len() > 2 && e.as_bytes()[2] == b':' {
        "time"
    } else {
        "date"
    };
    feel_true(&format!("{f}({e:?}) = {f}({a:?})"))
}

/// Whether postfach's value is the expected one: numbers as decimals
/// (text as the API answers them: a JSON number),
/// temporal values by value, lists and contexts structurally.
fn same(expected: &Expected, actual: &Value) -> bool {
    match (expected, actual) {
        (Expected::Null, Value::Null) => true,
        (Expected::Number(e), Value::Number(a)) => same_number(e, &a.to_string()),
        (Expected::Temporal(e), Value::String(a)) => e == a || same_temporal(e, a),
        (Expected::Boolean(e), Value::Bool(a)) => e == a,
        (Expected::Text(e), Value::String(a)) => e == a,
        (Expected::List(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(x, y)| same(x, y))
        }
        (Expected::Context(e), Value::Object(a)) => {
            e.len() == a.len() && e.iter().all(|(k, v)| a.get(k).is_some_and(|w| same(v, w)))
        }
        _ => false,
    }
}

#[derive(Default)]
struct Tally {
    /// Results whose expected value is a value: as expected, and not.
    values: (usize, usize),
    /// Results where the TCK expects an error: as expected, and not.
    errors: (usize, usize),
}

impl Tally {
    fn passed(&self) -> usize {
        self.values.0 + self.errors.0
    }
    fn total(&self) -> usize {
        self.values.0 + self.values.1 + self.errors.0 + self.errors.1
    }
}

fn run_case(dir: &Path, tally: &mut Tally, failures: &mut Vec<String>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for test in files
        .iter()
        .filter(|f| f.to_string_lossy().ends_with(".xml"))
    {
        let cases = tree(&std::fs::read_to_string(test).unwrap());
        let model_file = cases.child("modelName").map(|m| m.text.trim().to_string());
        let model_file = model_file.unwrap_or_default();
        let xml = std::fs::read_to_string(dir.join(&model_file)).unwrap_or_default();
        let model = postfach::model::dmn::parse(&model_file, &xml);
        for case in cases.all("testCase") {
            // a decision service's case names the service; its result
            // nodes name the decisions it answers with
            let service = case
                .attr("type")
                .filter(|t| *t == "decisionService")
                .and_then(|_| case.attr("invocableName"));
            let vars: postfach::Vars = case
                .all("inputNode")
                .map(|i| (i.attr("name").unwrap_or_default().to_string(), value_of(i)))
                .collect();
            for result in case.all("resultNode") {
                let name = result.attr("name").unwrap_or_default();
                let expected = result
                    .child("expected")
                    .map(expected_of)
                    .unwrap_or(Expected::Null);
                let error_expected = result.attr("errorResult") == Some("true");
                let invoked = service.unwrap_or(name);
                let got = match &model {
                    Err(e) => Err(format!("model refused: {e}")),
                    Ok(m) => match m.outline.decisions.iter().find(|d| d.name == invoked) {
                        None => Err(format!("no decision or service named '{invoked}'")),
                        // the TCK's clock is irrelevant to its expected values
                        Some(d) => m
                            .decide(&d.id, &vars, 1_700_000_000_000)
                            .map(|v| match v.value {
                                // a service of several decisions answers a
                                // context of their values
                                Value::Object(mut o) if d.service && d.outputs.len() > 1 => {
                                    o.remove(name).unwrap_or(Value::Null)
                                }
                                v => v,
                            })
                            .map_err(|e| format!("evaluation: {e}")),
                    },
                };
                // where the TCK expects an error, DMN's answer is null, or
                // the evaluation's own error: a model that is refused or a
                // decision that is not found is no such error
                let ok = match &got {
                    Ok(v) => same(&expected, v) || (error_expected && v.is_null()),
                    Err(e) => error_expected && e.starts_with("evaluation: "),
                };
                let kind = if error_expected {
                    &mut tally.errors
                } else {
                    &mut tally.values
                };
                if ok {
                    kind.0 += 1;
                } else {
                    kind.1 += 1;
                    failures.push(format!(
                        "{}/{} {name}: expected {expected:?}, got {}",
                        dir.file_name().unwrap().to_string_lossy(),
                        case.attr("id").unwrap_or_default(),
                        match got {
                            Ok(v) => v.to_string(),
                            Err(e) => e.chars().take(160).collect(),
                        }
                    ));
                }
            }
        }
    }
}

fn level(name: &str) -> (Tally, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dmn-tck")
        .join(name);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let (mut tally, mut failures) = (Tally::default(), Vec::new());
    for d in dirs {
        run_case(&d, &mut tally, &mut failures);
    }
    (tally, failures)
}

fn report(name: &str, t: &Tally, failures: &[String]) -> f64 {
    let rate = 100.0 * t.passed() as f64 / t.total().max(1) as f64;
    println!(
        "DMN TCK {name}: {} of {} results as expected ({rate:.1} %): values {} of {}, expected errors {} of {}",
        t.passed(),
        t.total(),
        t.values.0,
        t.values.0 + t.values.1,
        t.errors.0,
        t.errors.0 + t.errors.1,
    );
    let all = std::env::var_os("POSTFACH_TCK_ALL").is_some();
    for f in failures.iter().take(if all { usize::MAX } else { 15 }) {
        println!("  {f}");
    }
    rate
}

/// The counts `bench-results/dmn-tck.json` records for `level` (the
/// README's and the book's figures): the run must come to exactly them, so
/// the figures are what the cases give. `POSTFACH_RECORD_TCK=1` writes the
/// run's counts into the file instead.
fn recorded(level: &str, t: &Tally) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/bench-results/dmn-tck.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let now = serde_json::json!({
        "values": [t.values.0, t.values.0 + t.values.1],
        "errors": [t.errors.0, t.errors.0 + t.errors.1],
    });
    if std::env::var_os("POSTFACH_RECORD_TCK").is_some() {
        doc["levels"][level] = now;
        let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
        return;
    }
    assert_eq!(
        doc["levels"][level], now,
        "{level}: the run differs from bench-results/dmn-tck.json (run with POSTFACH_RECORD_TCK=1 to record it, then render the figures again)"
    );
}

#[test]
fn decision_tables_of_compliance_level_2() {
    let (t, failures) = level("compliance-level-2");
    let rate = report("compliance level 2 (decision tables)", &t, &failures);
    assert!(t.total() > 100, "the cases ran");
    assert!(
        rate >= MIN_LEVEL_2,
        "pass rate {rate:.1} % fell below {MIN_LEVEL_2} %"
    );
    recorded("compliance-level-2", &t);
}

#[test]
fn feel_of_compliance_level_3() {
    let (t, failures) = level("compliance-level-3");
    let rate = report(
        "compliance level 3 (FEEL, boxed expressions)",
        &t,
        &failures,
    );
    assert!(t.total() > 3000, "the cases ran");
    assert!(
        rate >= MIN_LEVEL_3,
        "pass rate {rate:.1} % fell below {MIN_LEVEL_3} %"
    );
    recorded("compliance-level-3", &t);
}

/// The pass rates the issue asks for, at the least.
const MIN_LEVEL_2: f64 = 100.0;
const MIN_LEVEL_3: f64 = 98.0;

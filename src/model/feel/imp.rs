//! The FEEL engine behind [`super::Feel`]: DecisionToolkit's parser and
//! evaluator, the conversion between JSON variables and FEEL values, the
//! batch's instant as `now()`/`today()`, and the Camunda extension functions
//! Zeebe models use.

use dsntk_feel::closure::Closure;
use dsntk_feel::context::FeelContext;
use dsntk_feel::values::Value;
use dsntk_feel::{Evaluator, FeelNumber, FeelScope, FeelType, FunctionBody, Name};
use std::sync::Arc;

/// A prepared expression and what it reads.
pub(super) struct Compiled {
    evaluator: Evaluator,
    /// Words of the expression that may name a variable (each with its
    /// FEEL name): only these are converted into its scope.
    words: Vec<(String, Name)>,
    /// Whether it calls `now()` or `today()`.
    clock: bool,
    /// The extension functions it calls, ready to bind.
    extensions: FeelContext,
}

/// The Camunda extension functions postfach provides (their FEEL names),
/// beside DecisionToolkit's built-in ones.
pub(crate) const EXTENSIONS: &[&str] = &[
    "is defined",
    "get or else",
    "assert",
    "is empty",
    "is blank",
    "trim",
    "partition",
    "duplicate values",
    "extract",
    "from json",
    "to json",
    "last day of month",
];

/// FEEL's keywords: never variable names.
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "if",
    "then",
    "else",
    "for",
    "in",
    "return",
    "some",
    "every",
    "satisfies",
    "between",
    "instance",
    "of",
    "function",
    "external",
    "null",
    "true",
    "false",
    "not",
];

/// The built-in functions whose names are several words (DecisionToolkit's
/// and [`EXTENSIONS`]).
const MULTI_WORD: &[&str] = &[
    "context merge",
    "context put",
    "date and time",
    "day of week",
    "day of year",
    "distinct values",
    "ends with",
    "finished by",
    "get entries",
    "get value",
    "index of",
    "insert before",
    "list contains",
    "list replace",
    "lower case",
    "met by",
    "month of year",
    "overlaps after",
    "overlaps before",
    "round down",
    "round half down",
    "round half up",
    "round up",
    "started by",
    "starts with",
    "string join",
    "string length",
    "substring after",
    "substring before",
    "upper case",
    "week of year",
    "years and months duration",
    "days and time duration",
    "is defined",
    "get or else",
    "is empty",
    "is blank",
    "duplicate values",
    "random number",
    "from json",
    "to json",
    "last day of month",
];

/// FEEL's built-in type names (what may follow `instance of`).
const TYPE_NAMES: &[&str] = &[
    "Any", "Null", "boolean", "number", "string", "date", "time", "context", "list", "range",
    "function",
];

/// The words of an expression that may name a variable: FEEL's lexer must
/// be told them (`a + 1` is one name unless `a` is known). A word is no
/// variable where FEEL's grammar gives it another role: a keyword, part of
/// a built-in name of several words (`date and time`), a function called
/// (`date(…)`), a context key or named argument (`string: …`), or a type
/// (after `instance of`, a parameter's `a: number`, `list<string>`). (A
/// path member is declared: `a.b*c` reads as one name unless `b` is
/// known.) Declaring one of
/// those would change how the text reads (`date` declared makes `date(…)`
/// a call of a variable).
fn variable_words(words: &[Word]) -> Vec<String> {
    let mut covered = vec![false; words.len()];
    for name in MULTI_WORD {
        let parts: Vec<&str> = name.split(' ').collect();
        for start in 0..words.len().saturating_sub(parts.len() - 1) {
            if words[start..start + parts.len()]
                .iter()
                .zip(&parts)
                .all(|(a, b)| a.text == *b)
            {
                covered[start..start + parts.len()].fill(true);
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for (i, (w, covered)) in words.iter().zip(covered).enumerate() {
        // a type: after `instance of`, or a built-in type's name in a
        // parameter's type (`a: number`) or a generic (`list<string>`)
        let typed = (i >= 2 && words[i - 1].text == "of" && words[i - 2].text == "instance")
            || (TYPE_NAMES.contains(&w.text.as_str())
                && (matches!(w.before, ':' | '<') || matches!(w.after, '<' | '>')));
        let role = w.after == '(' || w.after == ':' || typed;
        if !covered && !role && !KEYWORDS.contains(&w.text.as_str()) && !out.contains(&w.text) {
            out.push(w.text.clone());
        }
    }
    out
}

/// Functions whose value is not a function of their arguments: refused.
const UNREPEATABLE: &[&str] = &["uuid", "random number", "external"];

pub(super) fn compile(source: &str) -> Result<Compiled, String> {
    let source = source.trim();
    if source.is_empty() {
        return Err("empty FEEL expression".into());
    }
    let words = words(source)?;
    for w in UNREPEATABLE {
        if mentions(source, &words, w) {
            return Err(format!(
                "'{w}' is not allowed: the engine's state must be a function of its log (the same expression evaluates the same on replay, and nothing leaves the process)"
            ));
        }
    }
    let mut extensions = FeelContext::default();
    for name in EXTENSIONS {
        if mentions(source, &words, name) {
            let f = if *name == "assert" && arguments_of(source, "assert") == Some(3) {
                assert_with_cause()
            } else {
                extension(name)
            };
            extensions.set_entry(&Name::from(*name), f);
        }
    }
    let clock = words.iter().any(|w| w.text == "now" || w.text == "today");
    // FEEL's lexer needs to know which words are names: `a + 1` is a sum
    // when `a` is known and one name `a + 1` otherwise. The words that can
    // be variables are declared.
    let variables = variable_words(&words);
    let mut parse_ctx = extensions.clone();
    for w in &variables {
        parse_ctx.set_entry(&Name::from(w.as_str()), Value::Null(None));
    }
    let ast = dsntk_feel_parser::parse_expression(&FeelScope::from(parse_ctx), source, false)
        .map_err(|e| format!("does not parse as FEEL: {e}"))?;
    let evaluator = dsntk_feel_evaluator::prepare(&ast);
    let words = variables
        .into_iter()
        .map(|w| {
            let name = Name::from(w.as_str());
            (w, name)
        })
        .collect();
    Ok(Compiled {
        evaluator,
        words,
        clock,
        extensions,
    })
}

impl Compiled {
    pub(super) fn words(&self) -> impl Iterator<Item = &str> {
        self.words.iter().map(|(w, _)| w.as_str())
    }

    /// Whether it calls `now()` or `today()`.
    pub(super) fn reads_clock(&self) -> bool {
        self.clock
    }
}

/// How many arguments the first call of function `name` in `source` has
/// (FEEL functions of postfach's have one arity each; `assert` has two).
fn arguments_of(source: &str, name: &str) -> Option<usize> {
    let at = source.find(&format!("{name}("))? + name.len() + 1;
    let (mut depth, mut commas, mut in_string, mut empty) = (0usize, 0usize, false, true);
    let mut chars = source[at..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            _ if in_string => {}
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return Some(if empty { 0 } else { commas + 1 }),
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => commas += 1,
            c if c.is_whitespace() => continue,
            _ => {}
        }
        empty = false;
    }
    None
}

/// `assert(value, condition, cause)`: the failure carries `cause`.
fn assert_with_cause() -> Value {
    function(&["value", "condition", "cause"], |a| match &a[1] {
        Value::Boolean(true) => a[0].clone(),
        other => null(format!(
            "assertion failed: {} (the condition is {other})",
            match &a[2] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            }
        )),
    })
}

/// Whether `name` (one word or several) occurs in `source` as a name.
fn mentions(source: &str, words: &[Word], name: &str) -> bool {
    if !name.contains(' ') {
        return words.iter().any(|w| w.text == name);
    }
    let parts: Vec<&str> = name.split(' ').collect();
    words
        .windows(parts.len())
        .any(|win| win.iter().zip(&parts).all(|(a, b)| a.text == *b))
        && source.contains(parts[0])
}

/// A word of FEEL text and what stands beside it.
pub(crate) struct Word {
    pub(crate) text: String,
    /// The nearest character before it that is no white space (`' '` at
    /// the start).
    before: char,
    /// The nearest character after it that is no white space (`' '` at
    /// the end).
    after: char,
}

/// The names in `source`, in order, outside string literals and comments.
pub(crate) fn words(source: &str) -> Result<Vec<Word>, String> {
    let mut out = Vec::new();
    let mut chars = source.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let mut closed = false;
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            closed = true;
                            break;
                        }
                        _ => {}
                    }
                }
                if !closed {
                    return Err(format!("string opened at character {i} is not closed"));
                }
            }
            '/' if matches!(chars.peek(), Some((_, '/'))) => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if matches!(chars.peek(), Some((_, '*'))) => {
                chars.next();
                let mut last = ' ';
                for (_, c) in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            c if c.is_alphabetic() || c == '_' || c == '?' => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '?' {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let before = source[..i].trim_end().chars().next_back().unwrap_or(' ');
                let after = source[end..].trim_start().chars().next().unwrap_or(' ');
                out.push(Word {
                    text: source[i..end].to_string(),
                    before,
                    after,
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The words of `text` that may name a variable, and the functions of
/// postfach's own it calls (`now`, `today`, [`EXTENSIONS`]).
pub(crate) fn outside_names(text: &str) -> (Vec<String>, Vec<String>) {
    let Ok(words) = words(text) else {
        return (Vec::new(), Vec::new());
    };
    let functions = ["now", "today"]
        .iter()
        .chain(EXTENSIONS)
        .filter(|f| mentions(text, &words, f))
        .map(|f| f.to_string())
        .collect();
    (variable_words(&words), functions)
}

/// Whether `text` parses (unary tests or an expression), knowing the names
/// a DMN file declares and the words of the text that may be variables.
pub(super) fn check_text(text: &str, unary: bool, declared: &[String]) -> Result<(), String> {
    let scope = parse_scope(text, declared)?;
    let parsed = if unary {
        dsntk_feel_parser::parse_unary_tests(&scope, text, false)
    } else {
        dsntk_feel_parser::parse_expression(&scope, text, false)
    };
    parsed
        .map(|_| ())
        .map_err(|e| format!("does not parse as FEEL: {e}"))
}

/// The scope FEEL's parser needs for `text`: the `declared` names, the
/// words of `text` that may be variables, and the extension functions.
pub(crate) fn parse_scope(text: &str, declared: &[String]) -> Result<FeelScope, String> {
    let mut ctx = FeelContext::default();
    for name in EXTENSIONS {
        ctx.set_entry(&Name::from(*name), Value::Null(None));
    }
    for w in variable_words(&words(text)?).iter().chain(declared) {
        ctx.set_entry(&Name::from(w.as_str()), Value::Null(None));
    }
    Ok(FeelScope::from(ctx))
}

/// The FEEL value of `c` against `vars` at `now`.
pub(super) fn eval(
    c: &Compiled,
    vars: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<Value, String> {
    let mut ctx = FeelContext::default();
    for (word, name) in &c.words {
        if let Some(v) = vars.get(word) {
            ctx.set_entry(name, to_feel(v));
        }
    }
    for (name, f) in c.extensions.iter() {
        ctx.set_entry(name, f.clone());
    }
    if c.clock {
        bind_clock(&mut ctx, now)?;
    }
    Ok((c.evaluator)(&FeelScope::from(ctx)))
}

/// A condition's value: true or false; anything else is an error naming it
/// (a null with FEEL's reason for it).
pub(super) fn boolean(v: &Value) -> Result<bool, String> {
    match v {
        Value::Boolean(b) => Ok(*b),
        Value::Null(Some(reason)) => Err(format!(
            "evaluated to null ({reason}), not to true or false"
        )),
        other => Err(format!("evaluated to {other}, not to true or false")),
    }
}

/// Binds `now()` and `today()` in `ctx` to `now` (a scope's own names win
/// over FEEL's built-in functions, which read the system clock).
pub(crate) fn bind_clock(ctx: &mut FeelContext, now: crate::clock::Millis) -> Result<(), String> {
    let (date_time, date) = instant(now)?;
    ctx.set_entry(&Name::from("now"), constant(Value::DateTime(date_time)));
    ctx.set_entry(&Name::from("today"), constant(Value::Date(date)));
    Ok(())
}

/// `now` as FEEL's date and time and date (UTC).
fn instant(
    now: crate::clock::Millis,
) -> Result<
    (
        dsntk_feel_temporal::FeelDateTime,
        dsntk_feel_temporal::FeelDate,
    ),
    String,
> {
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(now as i64)
        .ok_or_else(|| format!("instant {now} ms is out of range"))?;
    let text = at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
    let date_time = dsntk_feel_temporal::FeelDateTime::try_from(text.as_str())
        .map_err(|e| format!("instant {text}: {e}"))?;
    let date = text[..10]
        .parse::<dsntk_feel_temporal::FeelDate>()
        .map_err(|e| format!("date {}: {e}", &text[..10]))?;
    Ok((date_time, date))
}

/// The value of a function postfach binds itself (`now`, `today`, one of
/// [`EXTENSIONS`]) at instant `now`.
pub(crate) fn bound_function(name: &str, now: crate::clock::Millis) -> Result<Value, String> {
    Ok(match name {
        "now" => constant(Value::DateTime(instant(now)?.0)),
        "today" => constant(Value::Date(instant(now)?.1)),
        other => extension(other),
    })
}

/// A function of no parameters that answers `value`.
fn constant(value: Value) -> Value {
    function(&[], move |_| value.clone())
}

/// A FEEL function value over `params` whose body is `body`.
fn function(params: &[&str], body: impl Fn(&[Value]) -> Value + Send + Sync + 'static) -> Value {
    let names: Vec<Name> = params.iter().map(|p| Name::from(*p)).collect();
    let formal = names.iter().map(|n| (n.clone(), FeelType::Any)).collect();
    let evaluator: Evaluator = Box::new(move |scope: &FeelScope| {
        let args: Vec<Value> = names
            .iter()
            .map(|n| scope.get_value(n).unwrap_or(Value::Null(None)))
            .collect();
        body(&args)
    });
    Value::FunctionDefinition(
        formal,
        FunctionBody::LiteralExpression(Arc::new(evaluator)),
        false,
        Closure::default(),
        FeelContext::default(),
        FeelType::Any,
    )
}

fn null(reason: String) -> Value {
    Value::Null(Some(reason))
}

/// The extension function `name` (one of [`EXTENSIONS`]).
fn extension(name: &str) -> Value {
    match name {
        // a value is defined when it was computed: null is a value, a
        // missing variable (null with a reason) is not
        "is defined" => function(&["value"], |a| {
            Value::Boolean(!matches!(a[0], Value::Null(Some(_))))
        }),
        "get or else" => function(&["value", "default"], |a| match &a[0] {
            Value::Null(_) => a[1].clone(),
            v => v.clone(),
        }),
        "assert" => function(&["value", "condition"], |a| match &a[1] {
            Value::Boolean(true) => a[0].clone(),
            other => null(format!("assertion failed: the condition is {other}")),
        }),
        "is empty" => function(&["list"], |a| match &a[0] {
            Value::List(items) => Value::Boolean(items.is_empty()),
            other => null(format!("is empty: expected a list, got {other}")),
        }),
        "is blank" => function(&["string"], |a| match &a[0] {
            Value::String(s) => Value::Boolean(s.trim().is_empty()),
            other => null(format!("is blank: expected a string, got {other}")),
        }),
        "trim" => function(&["string"], |a| match &a[0] {
            Value::String(s) => Value::String(s.trim().to_string()),
            other => null(format!("trim: expected a string, got {other}")),
        }),
        "partition" => function(&["list", "size"], |a| {
            let size = match &a[1] {
                Value::Number(n) => usize::try_from(n).ok().filter(|s| *s > 0),
                _ => None,
            };
            match (&a[0], size) {
                (Value::List(items), Some(size)) => Value::List(
                    items
                        .chunks(size)
                        .map(|c| Value::List(c.to_vec()))
                        .collect(),
                ),
                (list, _) => null(format!(
                    "partition: expected a list and a positive whole size, got {list} and {}",
                    a[1]
                )),
            }
        }),
        "duplicate values" => function(&["list"], |a| match &a[0] {
            Value::List(items) => {
                let mut out: Vec<Value> = Vec::new();
                for (i, v) in items.iter().enumerate() {
                    if items[..i].contains(v) && !out.contains(v) {
                        out.push(v.clone());
                    }
                }
                Value::List(out)
            }
            other => null(format!("duplicate values: expected a list, got {other}")),
        }),
        "extract" => function(&["string", "pattern"], |a| match (&a[0], &a[1]) {
            (Value::String(s), Value::String(p)) => match regex::Regex::new(p) {
                Ok(re) => Value::List(
                    re.find_iter(s)
                        .map(|m| Value::String(m.as_str().to_string()))
                        .collect(),
                ),
                Err(e) => null(format!("extract: pattern '{p}': {e}")),
            },
            (s, p) => null(format!(
                "extract: expected a string and a pattern, got {s} and {p}"
            )),
        }),
        "from json" => function(&["json"], |a| match &a[0] {
            Value::String(s) => match serde_json::from_str::<serde_json::Value>(s) {
                Ok(v) => to_feel(&v),
                Err(e) => null(format!("from json: {e}")),
            },
            other => null(format!("from json: expected a string, got {other}")),
        }),
        "to json" => function(&["value"], |a| match from_feel(&a[0]) {
            Ok(v) => Value::String(v.to_string()),
            Err(e) => null(format!("to json: {e}")),
        }),
        "last day of month" => function(&["date"], |a| {
            let text = match &a[0] {
                Value::Date(d) => d.to_string(),
                Value::DateTime(d) => d.to_string(),
                other => return null(format!("last day of month: expected a date, got {other}")),
            };
            let last = text.get(..10).and_then(|ymd| {
                let first =
                    chrono::NaiveDate::parse_from_str(&format!("{}-01", &ymd[..7]), "%Y-%m-%d")
                        .ok()?;
                first.checked_add_months(chrono::Months::new(1))?.pred_opt()
            });
            match last.and_then(|d| {
                d.format("%Y-%m-%d")
                    .to_string()
                    .parse::<dsntk_feel_temporal::FeelDate>()
                    .ok()
            }) {
                Some(d) => Value::Date(d),
                None => null(format!(
                    "last day of month: '{text}' is no date postfach can read"
                )),
            }
        }),
        other => null(format!("no extension function '{other}'")),
    }
}

/// A JSON value as FEEL's (numbers are decimal: whole ones exactly, others
/// through their shortest text).
pub(crate) fn to_feel(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null(None),
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Number(FeelNumber::from(i)),
            (None, Some(u)) => Value::Number(FeelNumber::from(u)),
            _ => match n.to_string().parse::<FeelNumber>() {
                Ok(n) => Value::Number(n),
                Err(e) => null(format!("number {n}: {e}")),
            },
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::List(items.iter().map(to_feel).collect()),
        serde_json::Value::Object(map) => {
            let mut ctx = FeelContext::default();
            for (k, v) in map {
                ctx.set_entry(&Name::from(k.as_str()), to_feel(v));
            }
            Value::Context(ctx)
        }
    }
}

/// A FEEL value as JSON. A null that carries a reason is FEEL's way of
/// failing: it is an error with that reason, except a variable that is not
/// set, which reads as null (as Zeebe reads it).
pub(crate) fn from_feel(v: &Value) -> Result<serde_json::Value, String> {
    Ok(match v {
        Value::Null(None) => serde_json::Value::Null,
        Value::Null(Some(reason)) if reason.starts_with("context has no value for key") => {
            serde_json::Value::Null
        }
        Value::Null(Some(reason)) => return Err(reason.clone()),
        Value::Boolean(b) => serde_json::Value::Bool(*b),
        Value::Number(n) => number(n)?,
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::List(items) => {
            serde_json::Value::Array(items.iter().map(from_feel).collect::<Result<_, _>>()?)
        }
        Value::Context(ctx) => serde_json::Value::Object(
            ctx.iter()
                .map(|(k, v)| Ok((k.to_string(), from_feel(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        Value::Date(_)
        | Value::DateTime(_)
        | Value::Time(_)
        | Value::DaysAndTimeDuration(_)
        | Value::YearsAndMonthsDuration(_) => serde_json::Value::String(v.to_string()),
        other => {
            return Err(format!(
                "its value {other} cannot be kept in a variable (a number, string, boolean, list, context, date, time or duration can)"
            ));
        }
    })
}

/// A FEEL value as JSON, every null as null (DMN decisions: a value FEEL
/// cannot compute is null there).
pub(crate) fn from_feel_nullable(v: &Value) -> Result<serde_json::Value, String> {
    Ok(match v {
        Value::Null(_) => serde_json::Value::Null,
        Value::List(items) => serde_json::Value::Array(
            items
                .iter()
                .map(from_feel_nullable)
                .collect::<Result<_, _>>()?,
        ),
        Value::Context(ctx) => serde_json::Value::Object(
            ctx.iter()
                .map(|(k, v)| Ok((k.to_string(), from_feel_nullable(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => from_feel(other)?,
    })
}

/// A FEEL number as JSON: whole numbers exactly, others as the nearest
/// binary64.
fn number(n: &FeelNumber) -> Result<serde_json::Value, String> {
    if n.is_integer()
        && let Ok(i) = i64::try_from(n)
    {
        return Ok(serde_json::Value::from(i));
    }
    let text = n.to_string();
    text.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(serde_json::Value::Number)
        .ok_or_else(|| format!("number {text} has no JSON form"))
}

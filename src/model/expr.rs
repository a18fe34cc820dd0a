//! Condition expressions on sequence flows, over process variables.
//!
//! Invariant: an expression is parsed once at deploy time (errors name the flow)
//! and evaluation is pure: it reads variables and nothing else. Accepted forms:
//! JUEL-style `${amount > 100 && approved}` (also `#{..}`), FEEL-style
//! `=amount > 100`, and a bare expression; with comparisons, `&&`/`||`/`!`
//! and arithmetic on numbers (`nrOfCompletedInstances / nrOfInstances >= 0.5`).
//! With the `feel` feature, `=…` is FEEL and goes to the FEEL engine
//! ([`super::feel`]); without it, `=…` is read by this evaluator as far as it
//! goes. Evaluation is given the instant the step runs at (what FEEL's
//! `now()` reads).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A parsed condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// A literal.
    Lit(Lit),
    /// A variable, with an optional path into its JSON value (`order.total`).
    Var(Vec<String>),
    /// Logical negation.
    Not(Box<Expr>),
    /// Short-circuit and.
    And(Box<Expr>, Box<Expr>),
    /// Short-circuit or.
    Or(Box<Expr>, Box<Expr>),
    /// A comparison.
    Cmp(CmpOp, Box<Expr>, Box<Expr>),
    /// Arithmetic on numbers (stored definitions encode variants by
    /// position: new ones go last).
    Arith(ArithOp, Box<Expr>, Box<Expr>),
    /// A FEEL expression (`=…` as Zeebe writes one), evaluated by the FEEL
    /// engine (feature `feel`; see [`super::feel`]).
    Feel(super::feel::Feel),
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` or `div`
    Div,
    /// `%` or `mod`
    Rem,
}

/// A literal value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Lit {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// `null`.
    Null,
}

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Parses a condition expression; the error text says where it went wrong.
/// With the `feel` feature, `=…` is FEEL ([`super::feel::Feel`]).
pub fn parse(source: &str) -> Result<Expr, String> {
    if cfg!(feature = "feel")
        && let Some(feel) = source.trim().strip_prefix('=')
    {
        return super::feel::Feel::parse(feel).map(Expr::Feel);
    }
    parse_native(source)
}

/// Parses with postfach's own evaluator only (`=…` read as far as it goes).
pub fn parse_native(source: &str) -> Result<Expr, String> {
    let s = source.trim();
    let (body, feel) = if let Some(inner) = s
        .strip_prefix("${")
        .or_else(|| s.strip_prefix("#{"))
        .and_then(|r| r.strip_suffix('}'))
    {
        (inner, false)
    } else if let Some(inner) = s.strip_prefix('=') {
        (inner, true)
    } else {
        (s, false)
    };
    let tokens = lex(body, feel)?;
    let mut p = Parser { tokens, pos: 0 };
    let e = p.or()?;
    if p.pos != p.tokens.len() {
        return Err(format!(
            "unexpected '{}' in condition '{source}'",
            p.tokens[p.pos].text()
        ));
    }
    Ok(e)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    Dot,
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Tok::Num(n) => n.to_string(),
            Tok::Str(s) => format!("'{s}'"),
            Tok::Ident(s) => s.clone(),
            Tok::Op(o) => (*o).to_string(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::Dot => ".".into(),
        }
    }
}

fn lex(s: &str, feel: bool) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        let op2 = match two.as_str() {
            "==" => Some("=="),
            "!=" => Some("!="),
            "<=" => Some("<="),
            ">=" => Some(">="),
            "&&" => Some("&&"),
            "||" => Some("||"),
            _ => None,
        };
        if let Some(op) = op2 {
            out.push(Tok::Op(op));
            i += 2;
            continue;
        }
        match c {
            '<' => out.push(Tok::Op("<")),
            '>' => out.push(Tok::Op(">")),
            '!' => out.push(Tok::Op("!")),
            '=' if feel => out.push(Tok::Op("==")),
            '+' => out.push(Tok::Op("+")),
            '*' => out.push(Tok::Op("*")),
            '/' => out.push(Tok::Op("/")),
            '%' => out.push(Tok::Op("%")),
            '-' if follows_value(&out) => out.push(Tok::Op("-")),
            '(' => out.push(Tok::LParen),
            ')' => out.push(Tok::RParen),
            '.' => out.push(Tok::Dot),
            '\'' | '"' => {
                let quote = c;
                let mut j = i + 1;
                let mut text = String::new();
                while j < chars.len() && chars[j] != quote {
                    text.push(chars[j]);
                    j += 1;
                }
                if j >= chars.len() {
                    return Err(format!("unterminated string in condition '{s}'"));
                }
                out.push(Tok::Str(text));
                i = j + 1;
                continue;
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                let mut j = i + 1;
                while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == '.') {
                    j += 1;
                }
                let text: String = chars[i..j].iter().collect();
                let n = text
                    .parse::<f64>()
                    .map_err(|_| format!("bad number '{text}' in condition '{s}'"))?;
                out.push(Tok::Num(n));
                i = j;
                continue;
            }
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                let mut j = i + 1;
                while j < chars.len()
                    && (chars[j].is_alphanumeric() || chars[j] == '_' || chars[j] == '$')
                {
                    j += 1;
                }
                let word: String = chars[i..j].iter().collect();
                out.push(match word.as_str() {
                    "and" => Tok::Op("&&"),
                    "or" => Tok::Op("||"),
                    "not" => Tok::Op("!"),
                    "eq" => Tok::Op("=="),
                    "ne" => Tok::Op("!="),
                    "lt" => Tok::Op("<"),
                    "le" => Tok::Op("<="),
                    "gt" => Tok::Op(">"),
                    "ge" => Tok::Op(">="),
                    "div" => Tok::Op("/"),
                    "mod" => Tok::Op("%"),
                    _ => Tok::Ident(word),
                });
                i = j;
                continue;
            }
            other => return Err(format!("unexpected character '{other}' in condition '{s}'")),
        }
        i += 1;
    }
    if out.is_empty() {
        return Err("empty condition".into());
    }
    Ok(out)
}

/// Whether the tokens so far end in a value, so that a `-` is a minus
/// rather than the sign of a number.
fn follows_value(out: &[Tok]) -> bool {
    matches!(
        out.last(),
        Some(Tok::Num(_) | Tok::Str(_) | Tok::Ident(_) | Tok::RParen)
    )
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek_op(&self, op: &str) -> bool {
        matches!(self.tokens.get(self.pos), Some(Tok::Op(o)) if *o == op)
    }
    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.peek_op("||") {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }
    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.not()?;
        while self.peek_op("&&") {
            self.pos += 1;
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }
    fn not(&mut self) -> Result<Expr, String> {
        if self.peek_op("!") {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.cmp()
    }
    fn cmp(&mut self) -> Result<Expr, String> {
        let left = self.sum()?;
        let op = match self.tokens.get(self.pos) {
            Some(Tok::Op("==")) => CmpOp::Eq,
            Some(Tok::Op("!=")) => CmpOp::Ne,
            Some(Tok::Op("<")) => CmpOp::Lt,
            Some(Tok::Op("<=")) => CmpOp::Le,
            Some(Tok::Op(">")) => CmpOp::Gt,
            Some(Tok::Op(">=")) => CmpOp::Ge,
            _ => return Ok(left),
        };
        self.pos += 1;
        let right = self.sum()?;
        Ok(Expr::Cmp(op, Box::new(left), Box::new(right)))
    }
    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.product()?;
        loop {
            let op = match self.tokens.get(self.pos) {
                Some(Tok::Op("+")) => ArithOp::Add,
                Some(Tok::Op("-")) => ArithOp::Sub,
                _ => return Ok(left),
            };
            self.pos += 1;
            left = Expr::Arith(op, Box::new(left), Box::new(self.product()?));
        }
    }
    fn product(&mut self) -> Result<Expr, String> {
        let mut left = self.primary()?;
        loop {
            let op = match self.tokens.get(self.pos) {
                Some(Tok::Op("*")) => ArithOp::Mul,
                Some(Tok::Op("/")) => ArithOp::Div,
                Some(Tok::Op("%")) => ArithOp::Rem,
                _ => return Ok(left),
            };
            self.pos += 1;
            left = Expr::Arith(op, Box::new(left), Box::new(self.primary()?));
        }
    }
    fn primary(&mut self) -> Result<Expr, String> {
        let tok = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or_else(|| "condition ends too early".to_string())?;
        self.pos += 1;
        match tok {
            Tok::Num(n) => Ok(Expr::Lit(Lit::Num(n))),
            Tok::Str(s) => Ok(Expr::Lit(Lit::Str(s))),
            Tok::LParen => {
                let e = self.or()?;
                if self.tokens.get(self.pos) != Some(&Tok::RParen) {
                    return Err("missing ')' in condition".into());
                }
                self.pos += 1;
                Ok(e)
            }
            Tok::Ident(w) => match w.as_str() {
                "true" => Ok(Expr::Lit(Lit::Bool(true))),
                "false" => Ok(Expr::Lit(Lit::Bool(false))),
                "null" => Ok(Expr::Lit(Lit::Null)),
                _ => {
                    let mut path = vec![w];
                    while self.tokens.get(self.pos) == Some(&Tok::Dot) {
                        match self.tokens.get(self.pos + 1) {
                            Some(Tok::Ident(seg)) => {
                                path.push(seg.clone());
                                self.pos += 2;
                            }
                            _ => return Err("a '.' must be followed by a name".into()),
                        }
                    }
                    Ok(Expr::Var(path))
                }
            },
            other => Err(format!("unexpected '{}' in condition", other.text())),
        }
    }
}

/// Evaluates a condition to a boolean; the error names what is missing or mistyped.
pub fn eval_bool(
    e: &Expr,
    vars: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<bool, String> {
    if let Expr::Feel(f) = e {
        return f.eval_bool(vars, now);
    }
    match eval(e, vars, now)? {
        Value::Bool(b) => Ok(b),
        other => Err(format!(
            "condition evaluated to {other}, not to true or false"
        )),
    }
}

/// Evaluates an expression to its value (a variable's JSON value, a
/// number, a string …); the error names what is missing or mistyped.
pub fn eval_value(
    e: &Expr,
    vars: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<Value, String> {
    eval(e, vars, now)
}

fn eval(e: &Expr, vars: &crate::model::Vars, now: crate::clock::Millis) -> Result<Value, String> {
    Ok(match e {
        Expr::Lit(Lit::Num(n)) => {
            serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number)
        }
        Expr::Lit(Lit::Str(s)) => Value::String(s.clone()),
        Expr::Lit(Lit::Bool(b)) => Value::Bool(*b),
        Expr::Lit(Lit::Null) => Value::Null,
        Expr::Var(path) => {
            let mut v = vars
                .get(&path[0])
                .ok_or_else(|| format!("variable '{}' is not set", path[0]))?;
            for seg in &path[1..] {
                v = v
                    .get(seg)
                    .ok_or_else(|| format!("variable '{}' has no field '{seg}'", path.join(".")))?;
            }
            v.clone()
        }
        Expr::Not(x) => Value::Bool(!eval_bool(x, vars, now)?),
        Expr::And(a, b) => Value::Bool(eval_bool(a, vars, now)? && eval_bool(b, vars, now)?),
        Expr::Or(a, b) => Value::Bool(eval_bool(a, vars, now)? || eval_bool(b, vars, now)?),
        Expr::Cmp(op, a, b) => {
            Value::Bool(compare(*op, &eval(a, vars, now)?, &eval(b, vars, now)?)?)
        }
        Expr::Arith(op, a, b) => arith(*op, &eval(a, vars, now)?, &eval(b, vars, now)?)?,
        Expr::Feel(f) => f.eval(vars, now)?,
    })
}

/// The most characters of a value an error quotes.
const QUOTED_CHARS: usize = 120;

/// A value as an error quotes it: its JSON, cut after [`QUOTED_CHARS`]
/// characters with the length it had, so a multi-megabyte variable never
/// lands whole in a log line or a stored incident.
pub fn quoted(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= QUOTED_CHARS {
        return text;
    }
    let head: String = text.chars().take(QUOTED_CHARS).collect();
    format!("{head}… ({} bytes in all)", text.len())
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

/// Arithmetic on two numbers (or numeric strings); a whole result stays a
/// whole number, so `2 + 1` compares and prints as `3`.
fn arith(op: ArithOp, a: &Value, b: &Value) -> Result<Value, String> {
    let (Some(x), Some(y)) = (number(a), number(b)) else {
        return Err(format!(
            "arithmetic needs numbers, not {} and {}",
            quoted(a),
            quoted(b)
        ));
    };
    let r = match op {
        ArithOp::Add => x + y,
        ArithOp::Sub => x - y,
        ArithOp::Mul => x * y,
        ArithOp::Div | ArithOp::Rem if y == 0.0 => {
            return Err(format!("division of {} by zero", quoted(a)));
        }
        ArithOp::Div => x / y,
        ArithOp::Rem => x % y,
    };
    if r.fract() == 0.0 && r.abs() < 9.0e15 {
        return Ok(Value::from(r as i64));
    }
    serde_json::Number::from_f64(r)
        .map(Value::Number)
        .ok_or_else(|| {
            format!(
                "arithmetic on {} and {} gives no number",
                quoted(a),
                quoted(b)
            )
        })
}

fn compare(op: CmpOp, a: &Value, b: &Value) -> Result<bool, String> {
    use std::cmp::Ordering;
    let num = number;
    let ord: Option<Ordering> = match (a, b) {
        (Value::Number(_), Value::String(_))
        | (Value::String(_), Value::Number(_))
        | (Value::Number(_), Value::Number(_)) => {
            num(a).zip(num(b)).and_then(|(x, y)| x.partial_cmp(&y))
        }
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    };
    match op {
        CmpOp::Eq => Ok(ord.map_or(a == b, |o| o == Ordering::Equal)),
        CmpOp::Ne => Ok(ord.map_or(a != b, |o| o != Ordering::Equal)),
        _ => {
            let o = ord.ok_or_else(|| format!("cannot order {} and {}", quoted(a), quoted(b)))?;
            Ok(match op {
                CmpOp::Lt => o == Ordering::Less,
                CmpOp::Le => o != Ordering::Greater,
                CmpOp::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(src: &str, vars: serde_json::Value) -> Result<bool, String> {
        let vars = vars.as_object().cloned().unwrap();
        eval_bool(&parse_native(src)?, &vars, 0)
    }

    #[test]
    fn a_huge_value_is_quoted_cut_with_its_length() {
        let big = "x".repeat(3_000_000);
        let e = check("${gross > 5}", json!({"gross": [big]})).unwrap_err();
        assert!(e.len() < 400, "{} bytes", e.len());
        assert!(e.contains("3000004 bytes in all"), "{e}");
        let e = check("${a > b}", json!({"a": [1], "b": {"k": 2}})).unwrap_err();
        assert_eq!(e, "cannot order [1] and {\"k\":2}");
    }

    #[test]
    fn juel_feel_and_bare_forms() {
        assert_eq!(check("${amount > 100}", json!({"amount": 150})), Ok(true));
        assert_eq!(check("#{amount <= 100}", json!({"amount": 150})), Ok(false));
        assert_eq!(check("=status = \"ok\"", json!({"status": "ok"})), Ok(true));
        assert_eq!(
            check(
                "approved && !blocked",
                json!({"approved": true, "blocked": false})
            ),
            Ok(true)
        );
        assert_eq!(
            check("${a.b == 'x' or n gt 2}", json!({"a": {"b": "y"}, "n": 3})),
            Ok(true)
        );
        assert_eq!(
            check("${(x == null) and not false}", json!({"x": null})),
            Ok(true)
        );
        assert_eq!(check("${betrag > 100}", json!({"betrag": "150"})), Ok(true));
        assert_eq!(check("${id == 4711}", json!({"id": "4711"})), Ok(true));
    }

    #[test]
    fn arithmetic_follows_precedence_and_refuses_what_is_not_a_number() {
        let counts = json!({"nrOfCompletedInstances": 3, "nrOfInstances": 5});
        assert_eq!(
            check(
                "${nrOfCompletedInstances/nrOfInstances >= 0.6}",
                counts.clone()
            ),
            Ok(true)
        );
        assert_eq!(
            check(
                "${nrOfCompletedInstances div nrOfInstances > 0.6}",
                counts.clone()
            ),
            Ok(false)
        );
        assert_eq!(check("=1 + 2 * 3 == 7", json!({})), Ok(true));
        assert_eq!(check("=(1 + 2) * 3 == 9", json!({})), Ok(true));
        assert_eq!(check("${n-1 == 4}", json!({"n": 5})), Ok(true));
        assert_eq!(check("${n - -1 == 6}", json!({"n": 5})), Ok(true));
        assert_eq!(check("${7 % 4 == 3 && 7 mod 4 == 3}", json!({})), Ok(true));
        assert_eq!(
            eval_value(
                &parse_native("=n * 2").unwrap(),
                json!({"n": 4}).as_object().unwrap(),
                0
            ),
            Ok(json!(8))
        );
        assert!(
            check("${n / 0 > 1}", json!({"n": 1}))
                .unwrap_err()
                .contains("zero")
        );
        assert!(
            check("${s + 1 > 1}", json!({"s": "x"}))
                .unwrap_err()
                .contains("numbers")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(
            check("${missing > 1}", json!({}))
                .unwrap_err()
                .contains("missing")
        );
        assert!(
            check("${n}", json!({"n": 3}))
                .unwrap_err()
                .contains("not to true")
        );
        assert!(parse("${a >}").is_err());
        assert!(parse("${'open}").is_err());
        assert!(parse("${a b}").is_err());
        assert!(
            check("${s < 3}", json!({"s": "x"}))
                .unwrap_err()
                .contains("cannot order")
        );
    }
}

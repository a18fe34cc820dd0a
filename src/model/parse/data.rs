//! Data and mappings: variable paths, input/output mappings as Camunda,
//! Flowable and Zeebe write them, and the expressions a user task reads.
//!
//! Invariant: a mapping is kept only when postfach can apply it as written;
//! every other one is named (a warning or a refusal), never half applied.

use super::context::is_true;
use super::xml::Node;

/// A variable path (`orderId`, `order.id`) as mappings and FEEL write it.
pub(super) fn variable_path(s: &str) -> Option<String> {
    let s = s.trim();
    let ok = !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && !s.ends_with('.')
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    ok.then(|| s.to_string())
}

/// A Camunda/Flowable parameter body: `${var}` / `#{var}` reads a variable,
/// plain text is a string; any other expression cannot be evaluated (`None`).
pub(super) fn camunda_source(text: &str) -> Option<crate::model::Source> {
    let t = text.trim();
    let inner = t
        .strip_prefix("${")
        .or_else(|| t.strip_prefix("#{"))
        .and_then(|r| r.strip_suffix('}'));
    match inner {
        Some(e) => variable_path(e).map(crate::model::Source::Variable),
        None if t.contains("${") || t.contains("#{") => None,
        None => Some(crate::model::Source::Literal(
            serde_json::Value::String(t.into()).to_string(),
        )),
    }
}

/// A Zeebe mapping source: `=path`, `="text"`, `=12`, `=true`, `=null`, or a
/// static value without `=`; any other FEEL expression is evaluated by the
/// FEEL engine (feature `feel`; without it, `Ok(None)`: it cannot be
/// evaluated). `Err` when it does not parse as FEEL.
pub(super) fn zeebe_source(text: &str) -> Result<Option<crate::model::Source>, String> {
    let t = text.trim();
    let Some(feel) = t.strip_prefix('=') else {
        return Ok(Some(crate::model::Source::Literal(
            serde_json::Value::String(t.into()).to_string(),
        )));
    };
    let feel = feel.trim();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(feel)
        && !v.is_object()
        && !v.is_array()
    {
        return Ok(Some(crate::model::Source::Literal(v.to_string())));
    }
    if let Some(path) = variable_path(feel) {
        return Ok(Some(crate::model::Source::Variable(path)));
    }
    if !cfg!(feature = "feel") {
        return Ok(None);
    }
    crate::model::feel::Feel::parse(feel).map(|f| Some(crate::model::Source::Feel(f)))
}

/// An element's asyncAfter and variable mappings, what of its mappings
/// cannot be applied (each a warning text), and what is refused (a FEEL
/// source that does not parse).
pub(super) fn extras_of(n: &Node) -> (crate::model::Extras, Vec<String>, Vec<String>) {
    let mut x = crate::model::Extras {
        async_after: is_true(n.attr("asyncAfter")),
        ..Default::default()
    };
    let mut skipped = Vec::new();
    let mut refused = Vec::new();
    let Some(ext) = n.child("extensionElements") else {
        return (x, skipped, refused);
    };
    for c in ext.children.iter().filter(|c| c.name == "taskHeaders") {
        for h in c.children.iter().filter(|h| h.name == "header") {
            match h.attr("key").map(str::trim).filter(|k| !k.is_empty()) {
                Some(key) => x
                    .headers
                    .push((key.to_string(), h.attr("value").unwrap_or("").to_string())),
                None => skipped.push(format!(
                    "zeebe:header without a key (line {}) is not delivered",
                    h.line
                )),
            }
        }
    }
    for c in &ext.children {
        let params = c.children.iter().filter_map(|p| {
            let (inputs, source) = match (c.name.as_str(), p.name.as_str()) {
                ("inputOutput", "inputParameter") => (true, p.attr("name")),
                ("inputOutput", "outputParameter") => (false, p.attr("name")),
                ("ioMapping", "input") => (true, p.attr("target")),
                ("ioMapping", "output") => (false, p.attr("target")),
                _ => return None,
            };
            Some((inputs, p, source.unwrap_or("").trim().to_string()))
        });
        for (input, p, target) in params {
            let source = if c.name == "ioMapping" {
                match zeebe_source(p.attr("source").unwrap_or("")) {
                    Ok(source) => source,
                    Err(e) => {
                        refused.push(format!(
                            "zeebe:ioMapping source '{}' of '{target}' (line {}): {e}",
                            p.attr("source").unwrap_or("").trim(),
                            p.line
                        ));
                        continue;
                    }
                }
            } else if p.children.is_empty() {
                camunda_source(&p.text)
            } else {
                None // camunda:list, camunda:map, camunda:script
            };
            let what = if input { "input" } else { "output" };
            match (variable_path(&target).filter(|t| !t.contains('.')), source) {
                (Some(target), Some(source)) => {
                    let m = crate::model::Mapping { target, source };
                    if input { x.inputs.push(m) } else { x.outputs.push(m) }
                }
                _ => skipped.push(format!(
                    "{} {what} '{target}' is not applied: postfach maps plain variables, paths and constants, not this expression",
                    c.name
                )),
            }
        }
    }
    (x, skipped, refused)
}

/// A text attribute written as FEEL (`=` with more than a variable path),
/// parsed: `None` when it is no FEEL expression (or this build has no
/// FEEL), else whether it parses.
pub(super) fn feel_text(raw: &str) -> Option<Result<(), String>> {
    let expr = crate::model::feel::body(raw).filter(|e| variable_path(e).is_none())?;
    cfg!(feature = "feel").then(|| crate::model::feel::Feel::parse(expr).map(|_| ()))
}

/// Whether a user task attribute is something [`crate::model::UserTaskSpec::resolve`]
/// evaluates as written: a literal, `=path`, or text whose `${…}`/`#{…}`
/// parts are variable paths.
pub(super) fn reads_variables_only(raw: &str) -> bool {
    let raw = raw.trim();
    if let Some(feel) = raw.strip_prefix('=') {
        return variable_path(feel).is_some() || feel_text(raw).is_some_and(|r| r.is_ok());
    }
    let mut rest = raw;
    while let Some(at) = [rest.find("${"), rest.find("#{")]
        .into_iter()
        .flatten()
        .min()
    {
        let Some(end) = rest[at..].find('}').map(|e| e + at) else {
            return false;
        };
        if variable_path(&rest[at + 2..end]).is_none() {
            return false;
        }
        rest = &rest[end + 1..];
    }
    true
}

/// The variable path an expression reads where a value may be given as one
/// (`${path}`, `#{path}`, `=path`; a quoted `="…"` is a value, not an
/// expression): `None` when `raw` is no expression, `Some(None)` for an
/// expression that is more than a variable or path.
pub(super) fn expression_path(raw: &str) -> Option<Option<String>> {
    let raw = raw.trim();
    let inner = raw
        .strip_prefix("${")
        .or_else(|| raw.strip_prefix("#{"))
        .and_then(|r| r.strip_suffix('}'))
        .or_else(|| {
            raw.strip_prefix('=')
                .map(str::trim)
                .filter(|e| !e.starts_with('"'))
        });
    match inner {
        Some(e) => Some(variable_path(e)),
        None if raw.contains("${") || raw.contains("#{") => Some(None),
        None => None,
    }
}

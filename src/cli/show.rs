//! A command's human text, rendered from its JSON document alone — so a
//! command shows the same text against its own database and against a
//! server (`--server`), which answers only the document.
//!
//! Invariant: rendering never panics: a field that is missing or of another
//! type shows as empty.

use super::Output;
use serde_json::Value;

/// A command's output: its document and the text rendered from it.
pub(super) fn shown(doc: Value, text: impl FnOnce(&Value) -> String) -> Output {
    let text = text(&doc);
    Output { json: doc, text }
}

/// A field as text: a string as it is, null as nothing, anything else as
/// JSON.
pub(super) fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A list field as its items' text.
pub(super) fn items(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|l| l.iter().map(s).collect())
        .unwrap_or_default()
}

/// A list field's items joined by `, `.
pub(super) fn joined(v: &Value) -> String {
    items(v).join(", ")
}

/// The elements of a list field (none when it is not a list).
pub(super) fn each(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whatever_a_document_holds_renders() {
        assert_eq!(s(&json!("a")), "a");
        assert_eq!(s(&json!(null)), "");
        assert_eq!(s(&json!(3)), "3");
        assert_eq!(joined(&json!(["a", 1])), "a, 1");
        assert_eq!(joined(&json!({"not": "a list"})), "");
        assert!(each(&json!(7)).is_empty());
    }
}

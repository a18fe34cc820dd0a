//! Process variables: the JSON object an instance, a scope, a message and a
//! job carry.
//!
//! Invariant: variables are a JSON object keyed by name — never another JSON
//! value; the model owns the type so the store, the engine and the faces
//! name it from here, not from the crate root.

/// Process variables: a JSON object.
pub type Vars = serde_json::Map<String, serde_json::Value>;

/// Builds variables from pairs: `vars([("auftragId", "4711".into())])`.
pub fn vars<const N: usize>(pairs: [(&str, serde_json::Value); N]) -> Vars {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

//! DMN decisions (feature `feel`): a decision file, read and built by
//! DecisionToolkit, and the evaluation of one of its decisions against an
//! instance's variables — the value, and which rules of its decision table
//! matched.
//!
//! Invariant: a decision's value is a function of the variables and the
//! instant it is given (`now()` and `today()` read that instant, as in
//! [`super::feel`]); a value DMN cannot compute is an error with
//! DecisionToolkit's reason, a table where no rule matches is null (as in
//! Camunda and Zeebe). A file that does not build is refused when it is
//! parsed, never when a task evaluates it.

use super::parse::ParseError;
pub use super::parse::dmn::{DecisionOutline, DmnOutline, is_dmn};
use std::sync::Arc;

/// A parsed decision file, ready to evaluate.
#[derive(Clone)]
pub struct DecisionModel {
    /// Its decisions, namespace and name.
    pub outline: DmnOutline,
    #[cfg(feature = "feel")]
    built: Arc<imp::Built>,
    #[cfg(not(feature = "feel"))]
    _never: Arc<std::convert::Infallible>,
}

impl std::fmt::Debug for DecisionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionModel")
            .field("outline", &self.outline)
            .finish()
    }
}

/// What a decision came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The decision's value, as JSON (a decision table with several outputs
    /// gives a context per rule, a collect policy a list).
    pub value: serde_json::Value,
    /// The ids of its decision table's rules that matched, in rule order
    /// (empty for a literal expression).
    pub rules: Vec<String>,
}

/// Parses and builds DMN file `file`.
pub fn parse(file: &str, xml: &str) -> Result<DecisionModel, ParseError> {
    let xml = super::parse::dmn::normalized(xml);
    let outline = super::parse::dmn::outline(file, &xml)?;
    #[cfg(feature = "feel")]
    {
        let built = imp::build(file, &xml, &outline)?;
        Ok(DecisionModel {
            outline,
            built: Arc::new(built),
        })
    }
    #[cfg(not(feature = "feel"))]
    {
        let _ = outline;
        Err(ParseError::Dmn {
            file: file.into(),
            message: "this build of postfach has no DMN (cargo feature `feel`)".into(),
        })
    }
}

/// The built model of a DMN file, from a cache of at most [`CACHED`]
/// files keyed by their text (building one costs milliseconds; a decision
/// task evaluates it per token).
pub fn cached(file: &str, xml: &str) -> Result<Arc<DecisionModel>, ParseError> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<DecisionModel>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(m) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(xml) {
        return Ok(m.clone());
    }
    let m = Arc::new(parse(file, xml)?);
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= CACHED {
        map.clear();
    }
    map.insert(xml.to_string(), m.clone());
    Ok(m)
}

/// The most decision files [`cached`] keeps built.
const CACHED: usize = 256;

impl DecisionModel {
    /// The decision with id `id`.
    pub fn decision(&self, id: &str) -> Option<&DecisionOutline> {
        self.outline.decisions.iter().find(|d| d.id == id)
    }

    /// Evaluates decision `id` (and the decisions it requires) against
    /// `vars` at `now`. `Err` says why it has no value.
    pub fn decide(
        &self,
        id: &str,
        vars: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<Decided, String> {
        let Some(d) = self.decision(id) else {
            return Err(format!("the file has no decision '{id}'"));
        };
        #[cfg(feature = "feel")]
        {
            imp::decide(&self.built, &self.outline, d, vars, now)
        }
        #[cfg(not(feature = "feel"))]
        {
            let _ = (d, vars, now);
            match *self._never {}
        }
    }
}

#[cfg(feature = "feel")]
mod imp;

#[cfg(all(test, feature = "feel"))]
pub(crate) mod tests;

//! FEEL expressions, as Zeebe models write them (`=…`), evaluated by
//! DecisionToolkit (feature `feel`).
//!
//! Invariant: an expression is parsed once, when the model is deployed (the
//! error says what does not parse), and its evaluation is a function of the
//! variables it names and the instant it is given: `now()` and `today()`
//! read that instant (the engine passes its batch's), never the system
//! clock, and nothing reaches the network (`external` functions are refused
//! at deploy). A value FEEL cannot compute (a wrong type, a missing
//! variable where a number is needed) is an error carrying DecisionToolkit's
//! reason, never a silent null where a boolean is wanted.
//!
//! Without the feature every FEEL expression is refused when it is parsed,
//! naming the feature; a build without it never holds one.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// A parsed FEEL expression: its source (what is stored) and, with the
/// feature, its prepared evaluator.
#[derive(Clone)]
pub struct Feel {
    source: String,
    #[cfg(feature = "feel")]
    compiled: Arc<imp::Compiled>,
    #[cfg(not(feature = "feel"))]
    _never: Arc<std::convert::Infallible>,
}

impl Feel {
    /// Parses `source` (without its leading `=`).
    pub fn parse(source: &str) -> Result<Feel, String> {
        #[cfg(feature = "feel")]
        {
            let compiled = imp::compile(source)?;
            Ok(Feel {
                source: source.trim().to_string(),
                compiled: Arc::new(compiled),
            })
        }
        #[cfg(not(feature = "feel"))]
        {
            Err(format!(
                "'={}' is a FEEL expression: this build of postfach has no FEEL (cargo feature `feel`)",
                source.trim()
            ))
        }
    }

    /// The names it mentions that may be variables (what the engine loads
    /// for it).
    pub fn words(&self) -> impl Iterator<Item = &str> {
        #[cfg(feature = "feel")]
        {
            self.compiled.words()
        }
        #[cfg(not(feature = "feel"))]
        {
            std::iter::empty()
        }
    }

    /// Whether it reads the clock (`now()`, `today()`).
    pub fn reads_clock(&self) -> bool {
        #[cfg(feature = "feel")]
        {
            self.compiled.reads_clock()
        }
        #[cfg(not(feature = "feel"))]
        {
            false
        }
    }

    /// The expression as written (without its leading `=`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Its value against `vars` at instant `now` (milliseconds since the
    /// epoch, what `now()` and `today()` read), as JSON: numbers, strings,
    /// booleans, lists and contexts as they are, dates, times and durations
    /// as their ISO 8601 text. `Err` gives FEEL's reason when it cannot be
    /// computed.
    pub fn eval(
        &self,
        vars: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<serde_json::Value, String> {
        #[cfg(feature = "feel")]
        {
            imp::eval(&self.compiled, vars, now)
                .and_then(|v| imp::from_feel(&v))
                .map_err(|why| format!("FEEL expression '{}': {why}", self.source))
        }
        #[cfg(not(feature = "feel"))]
        {
            let _ = (vars, now);
            match *self._never {}
        }
    }
}

impl Feel {
    /// Its value as a condition: `Err` unless it is true or false.
    pub fn eval_bool(
        &self,
        vars: &crate::model::Vars,
        now: crate::clock::Millis,
    ) -> Result<bool, String> {
        #[cfg(feature = "feel")]
        {
            imp::eval(&self.compiled, vars, now)
                .and_then(|v| imp::boolean(&v))
                .map_err(|why| format!("FEEL expression '{}': {why}", self.source))
        }
        #[cfg(not(feature = "feel"))]
        {
            let _ = (vars, now);
            match *self._never {}
        }
    }
}

/// Whether FEEL text of a DMN file parses: `unary` for unary tests (an
/// input entry), else an expression; `declared` are the names the file
/// declares (input data, decisions), which may have spaces.
pub fn check_text(text: &str, unary: bool, declared: &[String]) -> Result<(), String> {
    #[cfg(feature = "feel")]
    {
        imp::check_text(text, unary, declared)
    }
    #[cfg(not(feature = "feel"))]
    {
        let _ = (text, unary, declared);
        Err("this build of postfach has no FEEL (cargo feature `feel`)".into())
    }
}

/// What FEEL text `text` reads from outside: the words that may name a
/// variable (as [`Feel::words`] has them), and the functions postfach binds
/// itself that it calls (`now`, `today`, Camunda's extensions). Empty
/// without the feature or when the text cannot be read.
pub fn outside_names(text: &str) -> (Vec<String>, Vec<String>) {
    #[cfg(feature = "feel")]
    {
        imp::outside_names(text)
    }
    #[cfg(not(feature = "feel"))]
    {
        let _ = text;
        (Vec::new(), Vec::new())
    }
}

/// Whether `text` is a FEEL expression as Zeebe marks one (a leading `=`),
/// and its body.
pub fn body(text: &str) -> Option<&str> {
    text.trim().strip_prefix('=').map(str::trim)
}

/// Evaluates the FEEL text `source` (without `=`) for a site that keeps
/// expressions as text (a called process, a timer, a user task attribute):
/// parsed once per process and cached, as deploy already parsed it.
pub fn eval_text(
    source: &str,
    vars: &crate::model::Vars,
    now: crate::clock::Millis,
) -> Result<serde_json::Value, String> {
    cached(source)?.eval(vars, now)
}

/// The names FEEL text `source` mentions that may be variables (empty when
/// it does not parse).
pub fn words_of(source: &str) -> Vec<String> {
    cached(source)
        .map(|f| f.words().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The prepared expression for `source`, from a cache of at most
/// [`CACHED`] expressions (cleared when full: deploy-time text only ever
/// lands here, so it refills with what runs).
fn cached(source: &str) -> Result<Feel, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Feel>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(f) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(source) {
        return Ok(f.clone());
    }
    let f = Feel::parse(source)?;
    let mut map = cache.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= CACHED {
        map.clear();
    }
    map.insert(source.to_string(), f.clone());
    Ok(f)
}

/// The most expressions [`eval_text`] keeps prepared.
const CACHED: usize = 4096;

impl std::fmt::Debug for Feel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Feel({:?})", self.source)
    }
}

impl PartialEq for Feel {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Feel {}

impl Serialize for Feel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.source.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Feel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let source = String::deserialize(d)?;
        Feel::parse(&source).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "feel")]
pub(crate) mod imp;

#[cfg(all(test, feature = "feel"))]
mod tests;

//! Deployed DMN decisions as operators and callers see them, and their
//! evaluation without a process.
//!
//! Invariant: reading and evaluating change nothing: a decision is
//! evaluated from this snapshot's latest (or named) version at the
//! snapshot's instant, and nothing of it is stored.

use super::{RErr, Reader};
use crate::engine::EngineError;
use serde::Serialize;

/// A deployed decision, latest version.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionView {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its latest version.
    pub version: u32,
    /// The file it was deployed from.
    pub file: String,
    /// When (RFC 3339).
    pub deployed_at: String,
}

/// What a decision came to, evaluated without a process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// The decision's id.
    pub decision: String,
    /// The version evaluated.
    pub version: u32,
    /// Its value.
    pub value: serde_json::Value,
    /// The ids of the rules that matched, in rule order.
    pub rules: Vec<String>,
}

impl Reader {
    /// Every deployed decision, latest version, by id.
    pub fn decisions(&self) -> Result<Vec<DecisionView>, RErr> {
        let mut out = Vec::new();
        for (id, version) in self.snap.decisions()? {
            if let Some(rec) = self.snap.decision(&id, Some(version))? {
                out.push(DecisionView {
                    id,
                    name: rec.name,
                    version,
                    file: rec.file,
                    deployed_at: crate::clock::rfc3339(rec.deployed_at),
                });
            }
        }
        Ok(out)
    }

    /// Evaluates version `version` (latest when `None`) of decision `id`
    /// against `vars` at this snapshot's instant.
    pub fn decide(
        &self,
        id: &str,
        version: Option<u32>,
        vars: &crate::model::Vars,
    ) -> Result<Decision, EngineError> {
        let rec = self
            .snap
            .decision(id, version)?
            .ok_or_else(|| EngineError::UnknownDecision(id.to_string()))?;
        let model = crate::model::dmn::cached(&rec.file, &rec.xml)?;
        let d = model
            .decide(id, vars, self.now)
            .map_err(|reason| EngineError::DecisionFailed {
                decision: id.to_string(),
                version: rec.version,
                reason,
            })?;
        Ok(Decision {
            decision: id.to_string(),
            version: rec.version,
            value: d.value,
            rules: d.rules,
        })
    }
}

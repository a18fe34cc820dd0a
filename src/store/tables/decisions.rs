//! Deployed DMN decisions (`decisions`, `decision_latest`): what each
//! version of a decision is, and which version is the latest.
//!
//! Invariant: a version, once written, is never changed; `decision_latest`
//! only grows.

use super::*;

impl Tables<'_> {
    /// A stored decision version.
    pub fn decision(&self, id: &str, version: u32) -> Result<Option<DecisionRecord>, StoreError> {
        let decisions = self.decisions.get()?;
        read_decision(
            None::<&Table<&str, u32>>,
            Some(decisions),
            id,
            Some(version),
        )
    }

    /// The latest version of a decision (0 when it was never deployed).
    pub fn latest_decision(&self, id: &str) -> Result<u32, StoreError> {
        latest_decision(Some(self.decision_latest.get()?), id)
    }

    /// Stores a decision version and makes it the latest.
    pub fn put_decision(&mut self, rec: &DecisionRecord) -> Result<(), StoreError> {
        let id = rec.id.as_str();
        self.decisions
            .get_mut()?
            .insert((id, rec.version), codec::encode(rec)?.as_slice())?;
        self.decision_latest.get_mut()?.insert(id, rec.version)?;
        Ok(())
    }
}

/// The latest version of decision `id` in `latest` (0 when it was never
/// deployed, or the table is missing: a database of an earlier release).
fn latest_decision(
    latest: Option<&impl ReadableTable<&'static str, u32>>,
    id: &str,
) -> Result<u32, StoreError> {
    let Some(latest) = latest else {
        return Ok(0);
    };
    Ok(latest.get(id)?.map(|g| g.value()).unwrap_or(0))
}

/// Version `version` of decision `id`, or its latest when `None`: the one
/// read of a decision, for the write transaction and a read snapshot alike
/// (a table a database of an earlier release lacks is `None`).
pub(crate) fn read_decision(
    latest: Option<&impl ReadableTable<&'static str, u32>>,
    decisions: Option<&impl ReadableTable<(&'static str, u32), &'static [u8]>>,
    id: &str,
    version: Option<u32>,
) -> Result<Option<DecisionRecord>, StoreError> {
    let version = match version {
        Some(v) => v,
        None => latest_decision(latest, id)?,
    };
    let Some(decisions) = decisions.filter(|_| version > 0) else {
        return Ok(None);
    };
    match decisions.get((id, version))? {
        Some(g) => Ok(Some(codec::decode(g.value())?)),
        None => Ok(None),
    }
}

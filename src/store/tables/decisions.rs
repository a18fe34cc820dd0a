//! Deployed DMN decisions (`decisions`, `decision_latest`): what each
//! version of a decision is, and which version is the latest.
//!
//! Invariant: a version, once written, is never changed; `decision_latest`
//! only grows.

use super::*;

impl Tables<'_> {
    /// A stored decision version.
    pub fn decision(&self, id: &str, version: u32) -> Result<Option<DecisionRecord>, StoreError> {
        match self.decisions.get()?.get((id, version))? {
            Some(g) => Ok(Some(codec::decode(g.value())?)),
            None => Ok(None),
        }
    }

    /// The latest version of a decision (0 when it was never deployed).
    pub fn latest_decision(&self, id: &str) -> Result<u32, StoreError> {
        Ok(self
            .decision_latest
            .get()?
            .get(id)?
            .map(|g| g.value())
            .unwrap_or(0))
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

//! Definitions (`definitions`, `definition_sources`, `latest`) and the
//! message catalog (`catalog`): what each deployed version is and which
//! versions catch or start with a message.
//!
//! Invariant: a version, once written, is never changed; `latest` only
//! grows.

use super::*;

impl Tables<'_> {
    /// A stored process version.
    pub fn definition(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<DefinitionRecord>, StoreError> {
        let Some(g) = self.definitions.get((process, version))? else {
            return Ok(None);
        };
        let rec: DefinitionRecord = codec::decode(g.value())?;
        let extras = self.definition_extras.get((process, version))?;
        Ok(Some(super::with_extras(
            rec,
            extras.as_ref().map(|g| g.value()),
        )?))
    }

    /// Every deployed process with its latest version, by process id.
    pub fn latest_versions(&self) -> Result<Vec<(String, u32)>, StoreError> {
        let mut out = Vec::new();
        for row in self.latest.iter()? {
            let (k, v) = row?;
            out.push((k.value().to_string(), v.value()));
        }
        Ok(out)
    }

    /// The latest version of a process (0 when it was never deployed).
    pub fn latest_version(&self, process: &str) -> Result<u32, StoreError> {
        Ok(self.latest.get(process)?.map(|g| g.value()).unwrap_or(0))
    }

    /// Stores a process version and makes it the latest.
    pub fn put_definition(&mut self, rec: &DefinitionRecord) -> Result<(), StoreError> {
        let id = rec.process.id.as_str();
        self.definitions
            .insert((id, rec.version), codec::encode(rec)?.as_slice())?;
        if let Some(extras) = super::extras_of(rec)? {
            self.definition_extras
                .insert((id, rec.version), extras.as_slice())?;
        }
        self.latest.insert(id, rec.version)?;
        Ok(())
    }

    /// Keeps the XML a process version was deployed from.
    pub fn put_definition_source(
        &mut self,
        process: &str,
        version: u32,
        xml: &str,
    ) -> Result<(), StoreError> {
        self.definition_sources
            .insert((process, version), xml.as_bytes())?;
        Ok(())
    }

    /// What message `name` means to each process: (process, entry).
    pub fn catalog_of(&self, name: &str) -> Result<Vec<(String, CatalogEntry)>, StoreError> {
        let mut out = Vec::new();
        for row in self.catalog.range((name, "")..)? {
            let (k, v) = row?;
            let (m, p) = k.value();
            if m != name {
                break;
            }
            out.push((p.to_string(), codec::decode::<CatalogEntry>(v.value())?));
        }
        Ok(out)
    }

    /// Replaces what the messages mean to `process` with `entries`.
    pub fn set_catalog(
        &mut self,
        process: &str,
        entries: &std::collections::BTreeMap<&str, CatalogEntry>,
    ) -> Result<(), StoreError> {
        let mut stale = Vec::new();
        for row in self.catalog.iter()? {
            let (k, _) = row?;
            let (m, p) = k.value();
            if p == process && !entries.contains_key(m) {
                stale.push(m.to_string());
            }
        }
        for m in stale {
            self.catalog.remove((m.as_str(), process))?;
        }
        for (m, e) in entries {
            self.catalog
                .insert((*m, process), codec::encode(e)?.as_slice())?;
        }
        Ok(())
    }
}

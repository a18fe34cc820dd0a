//! Definitions (`definition_heads`, `definition_sources`, the pinned
//! format-4 rows of `definitions`, `latest`) and the message catalog
//! (`catalog`): what each deployed version is and which versions catch or
//! start with a message.
//!
//! Invariant: a version, once written, is never changed (a format-4 row
//! migrated to its source is the same version, parsed to the same model);
//! `latest` only grows. [`read_definition`] is the one read of a version, for
//! the write transaction and a read snapshot alike.

use super::*;

/// The (process, version) → bytes tables a definition is read from.
pub(crate) trait DefinitionTable: ReadableTable<(&'static str, u32), &'static [u8]> {}
impl<T: ReadableTable<(&'static str, u32), &'static [u8]>> DefinitionTable for T {}

/// A stored process version from its tables (a table missing in a database
/// of an earlier release opened read-only is `None`): its head and source
/// when it has a head, else its pinned format-4 row.
pub(crate) fn read_definition(
    heads: Option<&impl DefinitionTable>,
    sources: Option<&impl DefinitionTable>,
    pinned: Option<&impl DefinitionTable>,
    pinned_extras: Option<&impl DefinitionTable>,
    process: &str,
    version: u32,
) -> Result<Option<StoredDefinition>, StoreError> {
    if let Some(head) = heads
        .map(|t| t.get((process, version)))
        .transpose()?
        .flatten()
    {
        let head: DefinitionHead = codec::decode(head.value())?;
        let xml = sources
            .map(|t| t.get((process, version)))
            .transpose()?
            .flatten()
            .map(|g| String::from_utf8_lossy(g.value()).into_owned())
            .ok_or_else(|| StoreError::UnreadableDefinition {
                process: process.to_string(),
                version,
                reason: "its source row is missing: the database file may be damaged".into(),
            })?;
        return Ok(Some(StoredDefinition::Source { head, xml }));
    }
    let Some(row) = pinned
        .map(|t| t.get((process, version)))
        .transpose()?
        .flatten()
    else {
        return Ok(None);
    };
    let extras = pinned_extras
        .map(|t| t.get((process, version)))
        .transpose()?
        .flatten();
    Ok(Some(StoredDefinition::Pinned(Box::new(
        super::super::pinned::read(row.value(), extras.as_ref().map(|g| g.value()))?,
    ))))
}

impl Tables<'_> {
    /// A stored process version.
    pub fn definition(
        &self,
        process: &str,
        version: u32,
    ) -> Result<Option<StoredDefinition>, StoreError> {
        read_definition(
            Some(self.definition_heads.get()?),
            Some(self.definition_sources.get()?),
            Some(self.definitions.get()?),
            Some(self.definition_extras.get()?),
            process,
            version,
        )
    }

    /// Every deployed process with its latest version, by process id.
    pub fn latest_versions(&self) -> Result<Vec<(String, u32)>, StoreError> {
        let mut out = Vec::new();
        for row in self.latest.get()?.iter()? {
            let (k, v) = row?;
            out.push((k.value().to_string(), v.value()));
        }
        Ok(out)
    }

    /// The latest version of a process (0 when it was never deployed).
    pub fn latest_version(&self, process: &str) -> Result<u32, StoreError> {
        Ok(self
            .latest
            .get()?
            .get(process)?
            .map(|g| g.value())
            .unwrap_or(0))
    }

    /// Stores a process version, as its source and how it was deployed, and
    /// makes it the latest.
    pub fn put_definition(
        &mut self,
        process: &str,
        version: u32,
        head: &DefinitionHead,
        xml: &str,
    ) -> Result<(), StoreError> {
        self.definition_sources
            .get_mut()?
            .insert((process, version), xml.as_bytes())?;
        self.definition_heads
            .get_mut()?
            .insert((process, version), codec::encode(head)?.as_slice())?;
        self.latest.get_mut()?.insert(process, version)?;
        Ok(())
    }

    /// What message `name` means to each process: (process, entry).
    pub fn catalog_of(&self, name: &str) -> Result<Vec<(String, CatalogEntry)>, StoreError> {
        let mut out = Vec::new();
        for row in self.catalog.get()?.range((name, "")..)? {
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
        for row in self.catalog.get()?.iter()? {
            let (k, _) = row?;
            let (m, p) = k.value();
            if p == process && !entries.contains_key(m) {
                stale.push(m.to_string());
            }
        }
        for m in stale {
            self.catalog.get_mut()?.remove((m.as_str(), process))?;
        }
        for (m, e) in entries {
            self.catalog
                .get_mut()?
                .insert((*m, process), codec::encode(e)?.as_slice())?;
        }
        Ok(())
    }
}

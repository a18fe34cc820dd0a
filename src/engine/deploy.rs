//! Deploy: stores parsed processes as new versions and the message catalog.
//!
//! Invariant: identical source (fingerprint of XML and key overrides) keeps its
//! version; a new version replaces what the process means to each message name.

use super::*;

impl<'a, 't> Engine<'a, 't> {
    /// Stores a BPMN file; each process gets a new version unless the latest
    /// version was deployed from the identical source. `parsed` is what
    /// [`model::parse`] made of `xml` (the caller parses off the writer); `None`
    /// parses here (replay of the log).
    pub fn deploy(
        &mut self,
        file: &str,
        xml: &str,
        overrides: &BTreeMap<String, String>,
        parsed: Option<Vec<Process>>,
    ) -> R<Vec<Deployed>> {
        if model::dmn::is_dmn(xml) {
            return self.deploy_decisions(file, xml);
        }
        let processes = match parsed {
            Some(p) => p,
            None => model::parse(file, xml, overrides)?,
        };
        if self.cfg.partition.is_clustered() {
            for p in &processes {
                self.one_key(p)?;
            }
        }
        let fingerprint = fingerprint(xml, overrides);
        let mut out = Vec::new();
        for p in processes {
            let latest = self.t.latest_version(&p.id)?;
            if latest > 0
                && let Some(prev) = self.t.definition(&p.id, latest)?
                && prev.fingerprint() == fingerprint
            {
                out.push(Deployed {
                    process: p.id.clone(),
                    decision: false,
                    version: latest,
                    new_version: false,
                });
                continue;
            }
            let version = latest + 1;
            let head = DefinitionHead {
                deployed_at: self.now,
                file: file.to_string(),
                fingerprint,
                overrides: overrides.clone(),
                parser: model::PARSER_LEVEL,
            };
            self.t.put_definition(&p.id, version, &head, xml)?;
            // a timer start fires on partition 0 of a cluster only
            if self.cfg.partition.index() == 0 {
                self.schedule_start_timers(&p, version)?;
            }
            let mut entries: BTreeMap<&str, CatalogEntry> = BTreeMap::new();
            for (m, k) in &p.correlation_keys {
                entries.entry(m).or_default().key_variable = Some(k.clone());
            }
            for m in p.start_messages() {
                entries.entry(m).or_default().starts = true;
            }
            // a new version replaces what the process means to each message name
            self.t.set_catalog(&p.id, &entries)?;
            self.defs.clear_catalog();
            out.push(Deployed {
                process: p.id.clone(),
                decision: false,
                version,
                new_version: true,
            });
            // what loading the stored source gives: the writer does not parse
            // it again (an aborted batch clears the cache)
            let id = p.id.clone();
            self.defs.put(&id, version, Arc::new(p));
        }
        Ok(out)
    }

    /// In a cluster an instance lives on the partition of its correlation
    /// key, so all of a process's messages must be correlated by one
    /// variable: refused naming each variable with its messages and elements.
    fn one_key(&self, p: &Process) -> R<()> {
        let mut by_variable: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (message, variable) in &p.correlation_keys {
            let at = p.message_catchers(message).join(", ");
            by_variable
                .entry(variable)
                .or_default()
                .push(format!("'{message}' at {at}"));
        }
        if by_variable.len() < 2 {
            return Ok(());
        }
        let keys = by_variable
            .iter()
            .map(|(v, uses)| format!("{v}: {}", uses.join("; ")))
            .collect::<Vec<_>>()
            .join(" | ");
        Err(EngineError::MixedKeys {
            process: p.id.clone(),
            keys,
            count: self.cfg.partition.count(),
        })
    }
}

//! Migrations of older database formats, run once at open inside the
//! transaction that stamps the new format: index rows built for records
//! written before the index existed, instances rewritten as rows, waits kept
//! with their tokens.
//!
//! Invariant: a migration only derives rows from stored records (never from
//! the model; format 5 parses a kept source only to prove it gives the stored
//! model again), and a file of a newer format is refused before anything is
//! written.

use super::messages::parked_reason;
use super::*;

impl Tables<'_> {
    /// Brings the derived rows and gauges of a database written before
    /// [`INDEX_VERSION`] in line with its records, once: `buffer_age` from the
    /// buffered messages, the parked gauges from the parked ones, the incident
    /// gauge from the jobs. A new database only gets the stamp.
    pub(in crate::store) fn upgrade_indexes(&mut self) -> Result<(), StoreError> {
        let version = self
            .meta
            .get(INDEX_VERSION_KEY)?
            .map(|g| g.value())
            .unwrap_or(0);
        if version >= INDEX_VERSION {
            return Ok(());
        }
        if version < 2 {
            self.upgrade_to_2()?;
        }
        if version < 3 {
            self.upgrade_to_3()?;
        }
        self.upgrade_to_4()?;
        self.meta.insert(INDEX_VERSION_KEY, INDEX_VERSION)?;
        Ok(())
    }

    /// Index generation 2: `buffer_age`, the parked and incident gauges.
    pub(super) fn upgrade_to_2(&mut self) -> Result<(), StoreError> {
        let mut buffered = Vec::new();
        for row in self.buffer.get()?.iter()? {
            buffered.push(row?.0.value().2);
        }
        for seq in buffered {
            if let Some(m) = self.message(seq)? {
                self.buffer_age
                    .get_mut()?
                    .insert((m.accepted_at, seq), ())?;
            }
        }
        let mut parked = Vec::new();
        for row in self.parked.get()?.iter()? {
            parked.push(row?.0.value());
        }
        let mut by_reason: std::collections::BTreeMap<&'static str, u64> = Default::default();
        for seq in parked {
            if let Some(m) = self.message(seq)? {
                *by_reason.entry(parked_reason(&m)).or_default() += 1;
            }
        }
        for (reason, n) in by_reason {
            self.meta
                .insert(format!("{PARKED_GAUGE}{reason}").as_str(), n)?;
        }
        let mut incidents = 0u64;
        for row in self.jobs.get()?.iter()? {
            let j: JobRecord = codec::decode(row?.1.value())?;
            incidents += u64::from(j.state == JobState::Incident);
        }
        self.meta.insert(INCIDENTS_GAUGE, incidents)?;
        Ok(())
    }

    /// Index generation 3: `version_tokens` and the per-version element
    /// gauges from the instances and jobs, the per-name message gauges from
    /// the buffered and parked messages.
    pub(super) fn upgrade_to_3(&mut self) -> Result<(), StoreError> {
        let mut gauges: std::collections::BTreeMap<String, u64> = Default::default();
        let mut scopes: std::collections::HashMap<u64, (String, u32)> = Default::default();
        let mut rows = Vec::new();
        for row in self.instances.get()?.iter()? {
            let mut i = super::decode_instance(row?.1.value())?;
            self.fill_all(i.id, &mut i.tokens)?;
            for t in i.tokens.iter() {
                rows.push((
                    i.process.clone(),
                    i.version,
                    t.element.clone(),
                    t.since,
                    i.id,
                    t.id,
                ));
                *gauges
                    .entry(stat_key(STAT_TOKENS, &i.process, i.version, &t.element))
                    .or_default() += 1;
                if matches!(t.wait, Wait::Incident { .. }) {
                    *gauges
                        .entry(stat_key(STAT_INCIDENTS, &i.process, i.version, &t.element))
                        .or_default() += 1;
                }
            }
            scopes.insert(i.id, (i.process, i.version));
        }
        for (p, v, e, since, i, t) in &rows {
            self.version_tokens
                .get_mut()?
                .insert((p.as_str(), *v, e.as_str(), *since, *i, *t), ())?;
        }
        for row in self.jobs.get()?.iter()? {
            let j: JobRecord = codec::decode(row?.1.value())?;
            if matches!(j.kind, JobKind::StartTimer { .. }) {
                continue;
            }
            let Some((p, v)) = scopes.get(&j.instance) else {
                continue;
            };
            let kind = match j.state {
                JobState::Ready => STAT_READY,
                JobState::Incident => STAT_INCIDENTS,
                JobState::Locked => continue,
            };
            *gauges.entry(stat_key(kind, p, *v, &j.element)).or_default() += 1;
        }
        for row in self.messages.get()?.iter()? {
            let m = super::decode_message(row?.1.value())?;
            match m.state {
                MessageState::Buffered => {
                    *gauges
                        .entry(format!("{BUFFERED_BY_NAME}{}", m.name))
                        .or_default() += 1;
                }
                MessageState::Parked => {
                    let key = format!("{PARKED_BY_NAME}{}:{}", parked_reason(&m), m.name);
                    *gauges.entry(key).or_default() += 1;
                }
                MessageState::Correlated | MessageState::Discarded => {}
            }
        }
        for (k, v) in gauges {
            self.meta.insert(k.as_str(), v)?;
        }
        Ok(())
    }

    /// Index generation 4: `instance_messages` from the correlated and
    /// parked messages, `incident_jobs` from the jobs, `tasks_at` and the
    /// open-task gauges from the open user tasks.
    pub(super) fn upgrade_to_4(&mut self) -> Result<(), StoreError> {
        let mut tasks = Vec::new();
        for row in self.tasks.get()?.iter()? {
            let t: TaskRecord = codec::decode(row?.1.value())?;
            tasks.push((t.element, t.created_at, t.id));
        }
        let mut open: std::collections::BTreeMap<String, u64> = Default::default();
        for (element, at, id) in &tasks {
            self.tasks_at
                .get_mut()?
                .insert((element.as_str(), *at, *id), ())?;
            *open.entry(format!("{OPEN_TASKS}{element}")).or_default() += 1;
        }
        for (k, n) in open {
            self.meta.insert(k.as_str(), n)?;
        }
        let mut incidents = Vec::new();
        for row in self.jobs.get()?.iter()? {
            let j: JobRecord = codec::decode(row?.1.value())?;
            if j.state == JobState::Incident {
                incidents.push(j.id);
            }
        }
        for id in incidents {
            self.incident_jobs.get_mut()?.insert(id, ())?;
        }
        let mut rows = Vec::new();
        for row in self.messages.get()?.iter()? {
            let m = super::decode_message(row?.1.value())?;
            for inst in message_instances(&m) {
                rows.push((inst, m.seq));
            }
        }
        for r in rows {
            self.instance_messages.get_mut()?.insert(r, ())?;
        }
        Ok(())
    }

    /// Stamps the format of a new database, and brings an older one to it:
    /// format 1 kept each instance's history inside its record; format 2
    /// keeps it in `history` rows, format 3 the tokens too
    /// ([`Tables::migrate_instances_to_rows`]); format 4 keeps every boundary
    /// subscription with its token ([`Tables::keep_registrations_with_tokens`]);
    /// format 5 a definition as its source ([`Tables::store_definitions_as_sources`]).
    pub(in crate::store) fn stamp_format(&mut self, path: &str) -> Result<(), StoreError> {
        let found = self.meta.get(FORMAT_KEY)?.map(|g| g.value());
        match found {
            None => {}
            Some(v) if v > DB_FORMAT => {
                return Err(StoreError::NewerFormat {
                    path: path.to_string(),
                    found: v,
                    reads: DB_FORMAT,
                });
            }
            Some(v) if v < DB_FORMAT => {
                if v < 3 {
                    let n = self.migrate_instances_to_rows()?;
                    if n > 0 {
                        tracing::info!(
                            instances = n,
                            from = v,
                            "moved instance histories and tokens into rows (database format {v} → {DB_FORMAT})"
                        );
                    }
                }
                if v < 5 {
                    let (moved, kept) = self.store_definitions_as_sources()?;
                    if moved > 0 || kept > 0 {
                        tracing::info!(
                            moved,
                            kept,
                            from = v,
                            "stored the process versions as the sources they were deployed from (database format {v} → {DB_FORMAT}); versions without a source that gives their model again are kept as stored"
                        );
                    }
                }
                let (tokens, dropped) = self.keep_registrations_with_tokens()?;
                if tokens > 0 || dropped > 0 {
                    tracing::info!(
                        tokens,
                        dropped,
                        from = v,
                        "kept the boundary subscriptions with their tokens (database format {v} → {DB_FORMAT}); dropped subscriptions of tokens that no longer exist"
                    );
                }
            }
            Some(_) => return Ok(()),
        }
        self.meta.insert(FORMAT_KEY, DB_FORMAT)?;
        Ok(())
    }

    /// Format 5: a format-4 definition row whose source is kept and parses
    /// to the same model becomes that source and a head (the rows of the
    /// model go); any other row stays as it is, read through its frozen
    /// layout. Returns how many moved and how many stayed.
    pub(in crate::store) fn store_definitions_as_sources(
        &mut self,
    ) -> Result<(u64, u64), StoreError> {
        let mut rows = Vec::new();
        for row in self.definitions.get()?.iter()? {
            let (k, _) = row?;
            let (process, version) = k.value();
            rows.push((process.to_string(), version));
        }
        let (mut moved, mut kept) = (0, 0);
        for (process, version) in rows {
            let Some(StoredDefinition::Pinned(rec)) = self.definition(&process, version)? else {
                continue;
            };
            let source = self
                .definition_sources
                .get()?
                .get((process.as_str(), version))?
                .map(|g| String::from_utf8_lossy(g.value()).into_owned());
            let Some(overrides) = source.and_then(|xml| overrides_giving(&rec, &xml)) else {
                kept += 1;
                continue;
            };
            let head = DefinitionHead {
                deployed_at: rec.deployed_at,
                file: rec.file,
                fingerprint: rec.fingerprint,
                overrides,
                parser: crate::model::PARSER_LEVEL,
            };
            self.definition_heads.get_mut()?.insert(
                (process.as_str(), version),
                codec::encode(&head)?.as_slice(),
            )?;
            self.definitions
                .get_mut()?
                .remove((process.as_str(), version))?;
            self.definition_extras
                .get_mut()?
                .remove((process.as_str(), version))?;
            moved += 1;
        }
        Ok((moved, kept))
    }

    /// Brings instance records of the layouts before rows (history, tokens
    /// and variables inside, versions 1 to 3) to the rows layout: the
    /// history, the tokens and the variables become rows, a multi-instance body's items `body_items`
    /// rows. The token's `tokens_at` rows and gauges exist already; its
    /// `token_scopes` and `scope_sizes` rows are written here. Run once when a
    /// database of format 1 or 2 opens; returns how many records it rewrote.
    pub(in crate::store) fn migrate_instances_to_rows(&mut self) -> Result<u64, StoreError> {
        let mut legacy = Vec::new();
        for row in self.instances.get()?.iter()? {
            let (k, v) = row?;
            if codec::version_of(v.value())? != codec::HEADER_VERSION {
                legacy.push(k.value());
            }
        }
        for id in &legacy {
            let Some(mut rec) = get_record::<InstanceRecord>(self.instances.get()?, *id)? else {
                continue;
            };
            self.append_history(&mut rec, None)?;
            for t in rec.tokens.iter() {
                let mut t = t.clone();
                if let Wait::Body { items, outputs, .. } = &mut t.wait {
                    let (items, outputs) = (std::mem::take(items), std::mem::take(outputs));
                    let n = items.len().max(outputs.len());
                    for i in 0..n {
                        let item = BodyItem {
                            item: items.get(i).cloned(),
                            output: outputs.get(i).cloned(),
                        };
                        self.put_body_item(rec.id, t.id, i as u32, &item)?;
                    }
                }
                self.tokens
                    .get_mut()?
                    .insert((rec.id, t.id), super::encode_token(&t)?.as_slice())?;
                if t.scope != 0 {
                    self.token_scopes
                        .get_mut()?
                        .insert((rec.id, t.scope, t.id), ())?;
                    self.scope_size(rec.id, t.scope, true)?;
                }
            }
            for (name, value) in rec.variables.iter() {
                let json =
                    serde_json::to_vec(value).map_err(|e| CodecError::Encode(e.to_string()))?;
                self.variables
                    .get_mut()?
                    .insert((rec.id, name.as_str()), json.as_slice())?;
            }
            self.instances
                .get_mut()?
                .insert(rec.id, super::encode_instance(&rec)?.as_slice())?;
        }
        Ok(legacy.len() as u64)
    }

    /// Moves the boundary subscriptions onto their tokens (database format
    /// 4): every `subscriptions` or `signal_subs` row that its token's wait
    /// does not explain was opened by a boundary event of the token's
    /// activity — format 3 kept the message ones with the token only when
    /// written by a later release, the signal ones never — and is now kept
    /// with the token, from which the store derives the rows. Rows that name
    /// a token which no longer exists cannot be closed by anything and are
    /// dropped. Returns (tokens rewritten, rows dropped).
    pub(in crate::store) fn keep_registrations_with_tokens(
        &mut self,
    ) -> Result<(u64, u64), StoreError> {
        type Open = (Vec<(String, String)>, Vec<String>);
        let mut open: std::collections::BTreeMap<(u64, u64), Open> = Default::default();
        for row in self.subscriptions.get()?.iter()? {
            let (k, vals) = row?;
            let (m, key) = k.value();
            for v in vals {
                let entry = open.entry(v?.value()).or_default();
                entry.0.push((m.to_string(), key.to_string()));
            }
        }
        for row in self.signal_subs.get()?.iter()? {
            let (k, vals) = row?;
            let name = k.value();
            for v in vals {
                open.entry(v?.value()).or_default().1.push(name.to_string());
            }
        }
        let (mut rewritten, mut dropped) = (0u64, 0u64);
        for ((inst, token), (messages, signals)) in open {
            let stored = match self.tokens.get()?.get((inst, token))? {
                Some(g) => Some(super::decode_token(g.value())?),
                None => None,
            };
            let Some(mut t) = stored else {
                for (m, key) in &messages {
                    self.subscriptions
                        .get_mut()?
                        .remove((m.as_str(), key.as_str()), (inst, token))?;
                }
                for name in &signals {
                    self.signal_subs
                        .get_mut()?
                        .remove(name.as_str(), (inst, token))?;
                }
                dropped += (messages.len() + signals.len()) as u64;
                continue;
            };
            let before = (t.boundary_messages.len(), t.boundary_signals.len());
            for (m, key) in messages {
                if !t.open_messages().contains(&(m.as_str(), key.as_str())) {
                    t.boundary_messages.push((m, key));
                }
            }
            for name in signals {
                if !t.open_signals().contains(&name.as_str()) {
                    t.boundary_signals.push(name);
                }
            }
            if before != (t.boundary_messages.len(), t.boundary_signals.len()) {
                self.tokens
                    .get_mut()?
                    .insert((inst, token), super::encode_token(&t)?.as_slice())?;
                rewritten += 1;
            }
        }
        Ok((rewritten, dropped))
    }
}

/// The deploy-time overrides under which `xml` parses to the model of `rec`
/// (its correlation keys and send-task topics given explicitly), if it does.
pub(in crate::store) fn overrides_giving(
    rec: &DefinitionRecord,
    xml: &str,
) -> Option<BTreeMap<String, String>> {
    let stored = &rec.process;
    let mut overrides = stored.correlation_keys.clone();
    for e in &stored.elements {
        if let crate::model::ElementKind::Activity(crate::model::ActivityKind::Publish { topic }) =
            &e.kind
        {
            overrides.insert(crate::model::send_topic_override(&e.id), topic.clone());
        }
    }
    let again = crate::model::parse(&rec.file, xml, &overrides)
        .ok()?
        .into_iter()
        .find(|p| p.id == stored.id)?;
    again.same_model(stored).then_some(overrides)
}

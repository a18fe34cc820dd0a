//! Instances as rows: the header (`instances`), tokens (`tokens`),
//! variables (`variables`), multi-instance items (`body_items`) and history
//! (`history`), with the indexes they own — `tokens_at`, `version_tokens`,
//! `token_scopes`, `scope_sizes`, `expect`, `subscriptions`, `signal_subs` —
//! and the per-version token gauges.
//!
//! Invariant: an instance written through [`Tables::put_instance`] changes
//! exactly the rows of the tokens and variables that moved, and every index
//! row follows from the rows it is written with.

use super::*;
use std::collections::BTreeSet;

/// What an instance header had indexed: the definition version its tokens
/// count under and the (message, key) pairs it will still catch (`expect`).
/// Taken when an instance is loaded and handed back when it is written, so
/// the store changes exactly the rows that moved. (Each token's own rows —
/// `tokens_at`, `version_tokens`, `token_scopes` and the gauges — follow from
/// comparing the token with its stored row, see [`Tokens`].)
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Resting {
    /// The definition version the tokens count under.
    scope: (String, u32),
    expects: BTreeSet<(String, String)>,
}

impl Resting {
    /// The indexed state of `rec`'s header.
    pub fn of(rec: &InstanceRecord) -> Self {
        Resting {
            scope: (rec.process.clone(), rec.version),
            expects: rec.expects.iter().cloned().collect(),
        }
    }
}

/// Where a token rests as `tokens_at` says it: (element, since, token,
/// stopped by an engine error).
pub(super) fn resting_row(t: &Token) -> (&str, Millis, u64, bool) {
    (
        t.element.as_str(),
        t.since,
        t.id,
        matches!(t.wait, Wait::Incident { .. }),
    )
}

impl Tables<'_> {
    /// An instance's header; its tokens are read as they are asked for
    /// ([`Tables::fill_token`] and friends).
    pub fn instance(&self, id: u64) -> Result<Option<InstanceRecord>, StoreError> {
        let rec: Option<InstanceRecord> = get_record(self.instances.get()?, id)?;
        if let Some(r) = &rec {
            self.remember_scope(r);
        }
        Ok(rec)
    }

    /// An instance with every token and every variable.
    pub fn instance_full(&self, id: u64) -> Result<Option<InstanceRecord>, StoreError> {
        let Some(mut rec) = self.instance(id)? else {
            return Ok(None);
        };
        self.fill_all(id, &mut rec.tokens)?;
        self.fill_variables(id, &mut rec.variables)?;
        Ok(Some(rec))
    }

    /// Reads variable `name` of `inst` into `set`, unless it knows it.
    pub fn fill_variable(
        &self,
        inst: u64,
        set: &mut Variables,
        name: &str,
    ) -> Result<(), StoreError> {
        if set.knows(name) {
            return Ok(());
        }
        let row = match self.variables.get()?.get((inst, name))? {
            Some(g) => Some(serde_json::from_slice(g.value()).map_err(|e| {
                CodecError::Decode(format!("variable '{name}' of instance {inst}: {e}"))
            })?),
            None => None,
        };
        set.loaded(name, row);
        Ok(())
    }

    /// Reads every variable of `inst` into `set`.
    pub fn fill_variables(&self, inst: u64, set: &mut Variables) -> Result<(), StoreError> {
        if set.is_complete() {
            return Ok(());
        }
        set.loaded_all(super::read_variables(self.variables.get()?, inst)?);
        Ok(())
    }

    /// Reads token `token` of `inst` into `set`, unless it knows it.
    pub fn fill_token(&self, inst: u64, set: &mut Tokens, token: u64) -> Result<(), StoreError> {
        if set.knows(token) {
            return Ok(());
        }
        let row = match self.tokens.get()?.get((inst, token))? {
            Some(g) => Some(super::decode_token(g.value())?),
            None => None,
        };
        set.loaded(token, row);
        Ok(())
    }

    /// Reads token `token` and the tokens holding the scopes around it, and
    /// the sizes of the scopes they hold: what [`InstanceRecord::view`] and
    /// [`InstanceRecord::assign`] need.
    pub fn fill_chain(&self, inst: u64, set: &mut Tokens, token: u64) -> Result<(), StoreError> {
        let mut at = token;
        for _ in 0..=MAX_NESTING {
            if at == 0 {
                break;
            }
            self.fill_token(inst, set, at)?;
            let Some(t) = set.get(at) else { break };
            let (scope, body) = (t.scope, matches!(t.wait, Wait::Body { .. }));
            if body {
                self.fill_size(inst, set, at)?;
            }
            at = scope;
        }
        Ok(())
    }

    /// Reads every token of `inst` into `set`.
    pub fn fill_all(&self, inst: u64, set: &mut Tokens) -> Result<(), StoreError> {
        if set.is_complete() {
            return Ok(());
        }
        let mut rows = Vec::new();
        for row in self.tokens.get()?.range((inst, 0)..=(inst, u64::MAX))? {
            let (k, v) = row?;
            // a token read before keeps what this transaction did to it
            if !set.knows(k.value().1) {
                rows.push(super::decode_token(v.value())?);
            }
        }
        set.loaded_all(rows);
        Ok(())
    }

    /// Reads the stored size of scope `scope` of `inst` into `set`.
    pub fn fill_size(&self, inst: u64, set: &mut Tokens, scope: u64) -> Result<(), StoreError> {
        if set.knows_size(scope) {
            return Ok(());
        }
        debug_assert!(scope != 0, "the header counts the process level");
        let n = self
            .scope_sizes
            .get()?
            .get((inst, scope))?
            .map_or(0, |g| g.value());
        set.sized(scope, n);
        Ok(())
    }

    /// Reads the tokens stored as running in scope `scope` of `inst` into
    /// `set` (and the scope's size).
    pub fn fill_scope(&self, inst: u64, set: &mut Tokens, scope: u64) -> Result<(), StoreError> {
        if scope == 0 {
            // the process level has no `token_scopes` rows: everything is read
            return self.fill_all(inst, set);
        }
        self.fill_size(inst, set, scope)?;
        if set.is_complete() {
            return Ok(());
        }
        let mut ids = Vec::new();
        for row in self
            .token_scopes
            .get()?
            .range((inst, scope, 0)..=(inst, scope, u64::MAX))?
        {
            ids.push(row?.0.value().2);
        }
        for id in ids {
            self.fill_token(inst, set, id)?;
        }
        Ok(())
    }

    /// Item `index` of multi-instance body `body` of `inst`.
    pub fn body_item(
        &self,
        inst: u64,
        body: u64,
        index: u32,
    ) -> Result<Option<BodyItem>, StoreError> {
        match self.body_items.get()?.get((inst, body, index))? {
            Some(g) => Ok(Some(codec::decode(g.value())?)),
            None => Ok(None),
        }
    }

    /// Every item of multi-instance body `body` of `inst`, by index.
    pub fn body_items(&self, inst: u64, body: u64) -> Result<Vec<(u32, BodyItem)>, StoreError> {
        let mut out = Vec::new();
        for row in self
            .body_items
            .get()?
            .range((inst, body, 0)..=(inst, body, u32::MAX))?
        {
            let (k, v) = row?;
            out.push((k.value().2, codec::decode(v.value())?));
        }
        Ok(out)
    }

    /// Removes the items of multi-instance body `body` of `inst`.
    pub fn clear_body_items(&mut self, inst: u64, body: u64) -> Result<(), StoreError> {
        self.touched.instance_written(inst);
        self.body_items
            .get_mut()?
            .retain_in((inst, body, 0)..=(inst, body, u32::MAX), |_, _| false)?;
        Ok(())
    }

    /// Writes item `index` of multi-instance body `body` of `inst`.
    pub fn put_body_item(
        &mut self,
        inst: u64,
        body: u64,
        index: u32,
        item: &BodyItem,
    ) -> Result<(), StoreError> {
        self.touched.instance_written(inst);
        self.body_items
            .get_mut()?
            .insert((inst, body, index), codec::encode(item)?.as_slice())?;
        Ok(())
    }

    pub(super) fn remember_scope(&self, rec: &InstanceRecord) {
        self.scopes
            .borrow_mut()
            .entry(rec.id)
            .or_insert_with(|| (rec.process.clone(), rec.version));
    }

    /// The definition version of instance `id`, when it exists (or existed
    /// earlier in this transaction).
    pub(super) fn scope_of(&self, id: u64) -> Result<Option<(String, u32)>, StoreError> {
        if let Some(s) = self.scopes.borrow().get(&id) {
            return Ok(Some(s.clone()));
        }
        Ok(self.instance(id)?.map(|r| (r.process.clone(), r.version)))
    }

    /// Writes an instance: its header, the rows of the tokens that changed
    /// since they were read (with their `tokens_at`, `version_tokens`,
    /// `token_scopes` and `scope_sizes` rows and gauges), its `expect` rows
    /// moved from `before` ([`Resting::of`] the header as loaded; the default
    /// for a new one), and its new history entries appended as rows (after
    /// which `rec` counts them in `history_len` and holds none).
    pub fn put_instance(
        &mut self,
        rec: &mut InstanceRecord,
        before: &Resting,
        model: Option<&Process>,
    ) -> Result<(), StoreError> {
        let after = Resting::of(rec);
        self.remember_scope(rec);
        self.touched.instance_written(rec.id);
        let (process, version) = (rec.process.clone(), rec.version);
        debug_assert!(
            before.scope.0.is_empty() || before.scope == after.scope,
            "an instance keeps its definition version"
        );
        for (was, now) in rec.tokens.changes() {
            self.token_rows(rec.id, &process, version, was, now)?;
        }
        rec.top_level = rec.tokens.scope_size(0);
        for (name, value) in rec.variables.changes() {
            match value {
                Some(v) => {
                    let json =
                        serde_json::to_vec(v).map_err(|e| CodecError::Encode(e.to_string()))?;
                    self.variables
                        .get_mut()?
                        .insert((rec.id, name), json.as_slice())?;
                }
                None => {
                    self.variables.get_mut()?.remove((rec.id, name))?;
                }
            }
        }
        if after.expects != before.expects {
            for (m, key) in before.expects.difference(&after.expects) {
                waits::set_member(self.expect.get_mut()?, (m, key), rec.id, false)?;
            }
            for (m, key) in after.expects.difference(&before.expects) {
                waits::set_member(self.expect.get_mut()?, (m, key), rec.id, true)?;
            }
        }
        self.append_history(rec, model)?;
        self.instances
            .get_mut()?
            .insert(rec.id, super::encode_instance(rec)?.as_slice())?;
        Ok(())
    }

    /// Instance `rec` moves to version `to` of its process (a migration;
    /// its jobs moved first, [`Tables::move_job_versions`]): the
    /// `version_tokens` rows and token gauges of its tokens (every token, as
    /// stored) move from `before`'s version to `to`, and `before` says `to`
    /// from then on, so that writing the instance compares like with like.
    /// Its history rows, which name elements by their place in the model,
    /// are written again by `models` (old, new).
    pub fn move_version(
        &mut self,
        rec: &InstanceRecord,
        before: &mut Resting,
        to: u32,
        models: (&Process, &Process),
    ) -> Result<(), StoreError> {
        let (inst, tokens) = (rec.id, &rec.tokens);
        self.touched.instance_written(inst);
        let (process, from) = before.scope.clone();
        self.rewrite_history(rec, models)?;
        for t in tokens {
            let (e, since, tok, incident) = resting_row(t);
            for (version, insert) in [(from, false), (to, true)] {
                let vk = (process.as_str(), version, e, since, inst, tok);
                if insert {
                    self.version_tokens.get_mut()?.insert(vk, ())?;
                } else {
                    self.version_tokens.get_mut()?.remove(vk)?;
                }
                self.gauge(&stat_key(STAT_TOKENS, &process, version, e), insert)?;
                if incident {
                    self.gauge(&stat_key(STAT_INCIDENTS, &process, version, e), insert)?;
                }
            }
        }
        self.scopes.borrow_mut().insert(inst, (process.clone(), to));
        before.scope = (process, to);
        Ok(())
    }

    /// Moves one token's row and the rows derived from it from `was` (as
    /// stored; `None`: new) to `now` (`None`: removed). A body that stops
    /// being one takes its items with it.
    pub(super) fn token_rows(
        &mut self,
        inst: u64,
        process: &str,
        version: u32,
        was: Option<&Token>,
        now: Option<&Token>,
    ) -> Result<(), StoreError> {
        let Some(id) = now.or(was).map(|t| t.id) else {
            return Ok(());
        };
        match now {
            Some(t) => {
                self.tokens
                    .get_mut()?
                    .insert((inst, id), super::encode_token(t)?.as_slice())?;
            }
            None => {
                self.tokens.get_mut()?.remove((inst, id))?;
            }
        }
        let was_body = was.is_some_and(|t| matches!(t.wait, Wait::Body { .. }));
        let is_body = now.is_some_and(|t| matches!(t.wait, Wait::Body { .. }));
        if was_body && !is_body {
            self.clear_body_items(inst, id)?;
        }
        let (rest_was, rest_now) = (was.map(resting_row), now.map(resting_row));
        if rest_was != rest_now {
            for (row, insert) in [(rest_was, false), (rest_now, true)] {
                let Some((e, since, tok, incident)) = row else {
                    continue;
                };
                let k = (e, since, inst, tok);
                let vk = (process, version, e, since, inst, tok);
                if insert {
                    self.tokens_at.get_mut()?.insert(k, ())?;
                    self.version_tokens.get_mut()?.insert(vk, ())?;
                } else {
                    self.tokens_at.get_mut()?.remove(k)?;
                    self.version_tokens.get_mut()?.remove(vk)?;
                }
                self.gauge(&stat_key(STAT_TOKENS, process, version, e), insert)?;
                if incident {
                    self.gauge(&stat_key(STAT_INCIDENTS, process, version, e), insert)?;
                }
            }
        }
        // the subscriptions are the registrations the token holds open
        let open = |t: Option<&Token>| -> BTreeSet<(String, String)> {
            t.map(|t| {
                t.open_messages()
                    .into_iter()
                    .map(|(n, k)| (n.to_string(), k.to_string()))
                    .collect()
            })
            .unwrap_or_default()
        };
        let (subs_was, subs_now) = (open(was), open(now));
        for (name, key) in subs_was.difference(&subs_now) {
            self.subscriptions
                .get_mut()?
                .remove((name.as_str(), key.as_str()), (inst, id))?;
        }
        for (name, key) in subs_now.difference(&subs_was) {
            self.subscriptions
                .get_mut()?
                .insert((name.as_str(), key.as_str()), (inst, id))?;
        }
        let signals = |t: Option<&Token>| -> BTreeSet<String> {
            t.map(|t| t.open_signals().into_iter().map(String::from).collect())
                .unwrap_or_default()
        };
        let (sig_was, sig_now) = (signals(was), signals(now));
        for name in sig_was.difference(&sig_now) {
            self.signal_subs
                .get_mut()?
                .remove(name.as_str(), (inst, id))?;
        }
        for name in sig_now.difference(&sig_was) {
            self.signal_subs
                .get_mut()?
                .insert(name.as_str(), (inst, id))?;
        }
        // the process level is counted in the header (`top_level`)
        let inside = |t: &Token| Some(t.scope).filter(|&s| s != 0);
        let (scope_was, scope_now) = (was.and_then(inside), now.and_then(inside));
        if scope_was != scope_now {
            if let Some(s) = scope_was {
                self.token_scopes.get_mut()?.remove((inst, s, id))?;
                self.scope_size(inst, s, false)?;
            }
            if let Some(s) = scope_now {
                self.token_scopes.get_mut()?.insert((inst, s, id), ())?;
                self.scope_size(inst, s, true)?;
            }
        }
        Ok(())
    }

    /// Counts a token into (or out of) scope `scope` of `inst`.
    pub(super) fn scope_size(&mut self, inst: u64, scope: u64, up: bool) -> Result<(), StoreError> {
        let n = self
            .scope_sizes
            .get()?
            .get((inst, scope))?
            .map_or(0, |g| g.value());
        let n = if up { n + 1 } else { n.saturating_sub(1) };
        if n == 0 {
            self.scope_sizes.get_mut()?.remove((inst, scope))?;
        } else {
            self.scope_sizes.get_mut()?.insert((inst, scope), n)?;
        }
        Ok(())
    }

    /// Writes `rec.new_history` as one row keyed by the sequence of its first
    /// entry, `rec.history_len`.
    /// Writes every history row of `rec` again, read by the old model and
    /// written by the new (an element the new one lacks is kept as text).
    fn rewrite_history(
        &mut self,
        rec: &InstanceRecord,
        (old, new): (&Process, &Process),
    ) -> Result<(), StoreError> {
        let mut rows = Vec::new();
        for row in self
            .history
            .get()?
            .range((rec.id, 0)..=(rec.id, u64::MAX))?
        {
            let (k, v) = row?;
            let entries = super::history::decode(v.value(), rec.started_at, Some(old))?;
            rows.push((k.value().1, entries));
        }
        for (seq, entries) in rows {
            let bytes = super::history::encode(&entries, rec.started_at, Some(new))?;
            self.history
                .get_mut()?
                .insert((rec.id, seq), bytes.as_slice())?;
        }
        Ok(())
    }

    pub(super) fn append_history(
        &mut self,
        rec: &mut InstanceRecord,
        model: Option<&Process>,
    ) -> Result<(), StoreError> {
        if rec.new_history.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(&mut rec.new_history);
        self.history.get_mut()?.insert(
            (rec.id, rec.history_len),
            super::history::encode(&entries, rec.started_at, model)?.as_slice(),
        )?;
        rec.history_len += entries.len() as u64;
        Ok(())
    }

    /// Removes an instance with its token rows (and what they index), its
    /// `expect` rows and its history. `rec` holds every token.
    pub fn remove_instance(&mut self, rec: &InstanceRecord) -> Result<(), StoreError> {
        self.remember_scope(rec);
        self.touched.instance_written(rec.id);
        for t in rec.tokens.iter() {
            self.token_rows(rec.id, &rec.process, rec.version, Some(t), None)?;
        }
        for (m, key) in &rec.expects {
            waits::set_member(self.expect.get_mut()?, (m, key), rec.id, false)?;
        }
        self.variables
            .get_mut()?
            .retain_in((rec.id, "")..(rec.id.saturating_add(1), ""), |_, _| false)?;
        self.history
            .get_mut()?
            .retain_in((rec.id, 0)..=(rec.id, u64::MAX), |_, _| false)?;
        self.instances.get_mut()?.remove(rec.id)?;
        Ok(())
    }

    /// Up to `limit` instances from id `from` on, and the id to continue from
    /// (`None` when the table ends).
    pub fn instances_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<(Vec<InstanceRecord>, Option<u64>), StoreError> {
        let (mut found, next): (Vec<InstanceRecord>, _) = scan(self.instances.get()?, from, limit)?;
        for rec in &mut found {
            self.fill_all(rec.id, &mut rec.tokens)?;
            self.fill_variables(rec.id, &mut rec.variables)?;
        }
        Ok((found, next))
    }
}

//! Messages (`messages`) with the rows they own — `dedup`, `by_id`,
//! `buffer`, `buffer_age`, `expiry`, `parked`, `instance_messages` and the
//! parked gauges — and the events about parked messages (`parked_events`).
//!
//! Invariant: a message's index rows are derived from its record before and
//! after each write; `dedup` lives as long as the record.

use super::*;

/// The index rows a message record owns besides `dedup` (which lives as long
/// as the record).
#[derive(Clone, PartialEq)]
pub(super) struct MessageRows {
    /// When a buffered message was accepted.
    buffered: Option<Millis>,
    expiry: Option<Millis>,
    /// The reason a parked message is parked for.
    parked: Option<&'static str>,
    /// The instances whose detail lists it: the one it was correlated into,
    /// or the candidates it is parked with.
    instances: Vec<u64>,
}

impl MessageRows {
    fn of(m: &MessageRecord) -> Self {
        let buffered = m.state == MessageState::Buffered;
        MessageRows {
            buffered: buffered.then_some(m.accepted_at),
            expiry: m.expires_at.filter(|_| buffered),
            parked: (m.state == MessageState::Parked).then(|| parked_reason(m)),
            instances: message_instances(m),
        }
    }
}

/// The instances whose detail lists message `m` (see [`INSTANCE_MESSAGES`]).
pub(in crate::store) fn message_instances(m: &MessageRecord) -> Vec<u64> {
    match m.state {
        MessageState::Correlated => m.instance.into_iter().collect(),
        MessageState::Parked => m.candidates.clone(),
        MessageState::Buffered | MessageState::Discarded => Vec::new(),
    }
}

/// The gauge name a parked message counts under.
pub(super) fn parked_reason(m: &MessageRecord) -> &'static str {
    m.reason.map_or("unknown", Reason::as_str)
}

impl Tables<'_> {
    /// A message record by accept sequence.
    pub fn message(&mut self, seq: u64) -> Result<Option<MessageRecord>, StoreError> {
        let rec: Option<MessageRecord> = get_record(self.messages.get()?, seq)?;
        if let Some(m) = &rec {
            self.message_rows.insert(seq, Some(MessageRows::of(m)));
        }
        Ok(rec)
    }

    /// The index rows of message `seq` as stored now (`None`: no such record).
    pub(super) fn stored_message_rows(
        &mut self,
        seq: u64,
    ) -> Result<Option<MessageRows>, StoreError> {
        if let Some(rows) = self.message_rows.get(&seq) {
            return Ok(rows.clone());
        }
        if self.messages.get()?.get(seq)?.is_none() {
            return Ok(None);
        }
        Ok(self.message(seq)?.map(|m| MessageRows::of(&m)))
    }

    /// The (seq, accepted_at) recorded for (message id, name), if any.
    pub fn dedup(&self, message_id: &str, name: &str) -> Result<Option<(u64, Millis)>, StoreError> {
        Ok(self
            .dedup
            .get()?
            .get((message_id, name))?
            .map(|g| g.value()))
    }

    /// Accept sequences of every message recorded under this message id (any name).
    pub fn seqs_by_id(&self, message_id: &str) -> Result<Vec<u64>, StoreError> {
        seqs_by_id(self.dedup.get()?, message_id)
    }

    /// Writes a message record and brings its index rows in line with its state.
    pub fn put_message(&mut self, rec: &MessageRecord) -> Result<(), StoreError> {
        self.touched.message_written(rec.seq);
        let new = MessageRows::of(rec);
        match self.stored_message_rows(rec.seq)? {
            None => {
                self.dedup.get_mut()?.insert(
                    (rec.message_id.as_str(), rec.name.as_str()),
                    (rec.seq, rec.accepted_at),
                )?;
                self.message_rows(rec, &new, true)?;
            }
            // name and key never change, so the old rows are `rec`'s with the
            // old state (the instances they name are kept in the rows)
            Some(old) if old != new => {
                self.message_rows(rec, &old, false)?;
                self.message_rows(rec, &new, true)?;
            }
            Some(_) => {}
        }
        self.messages
            .get_mut()?
            .insert(rec.seq, super::encode_message(rec)?.as_slice())?;
        self.message_rows.insert(rec.seq, Some(new));
        Ok(())
    }

    pub(super) fn message_rows(
        &mut self,
        m: &MessageRecord,
        rows: &MessageRows,
        insert: bool,
    ) -> Result<(), StoreError> {
        let buffer_key = (m.name.as_str(), m.key.as_str(), m.seq);
        if let Some(accepted_at) = rows.buffered {
            if insert {
                self.buffer.get_mut()?.insert(buffer_key, ())?;
                self.buffer_age
                    .get_mut()?
                    .insert((accepted_at, m.seq), ())?;
            } else {
                self.buffer.get_mut()?.remove(buffer_key)?;
                self.buffer_age.get_mut()?.remove((accepted_at, m.seq))?;
            }
            self.gauge(&format!("{BUFFERED_BY_NAME}{}", m.name), insert)?;
        }
        if let Some(at) = rows.expiry {
            if insert {
                self.expiry.get_mut()?.insert((at, m.seq), ())?;
            } else {
                self.expiry.get_mut()?.remove((at, m.seq))?;
            }
        }
        for &inst in &rows.instances {
            if insert {
                self.instance_messages
                    .get_mut()?
                    .insert((inst, m.seq), ())?;
            } else {
                self.instance_messages.get_mut()?.remove((inst, m.seq))?;
            }
        }
        if let Some(reason) = rows.parked {
            if insert {
                self.parked.get_mut()?.insert(m.seq, ())?;
            } else {
                self.parked.get_mut()?.remove(m.seq)?;
            }
            self.gauge(&format!("{PARKED_GAUGE}{reason}"), insert)?;
            self.gauge(&format!("{PARKED_BY_NAME}{reason}:{}", m.name), insert)?;
        }
        Ok(())
    }

    /// Removes a message record with all its index rows, `dedup` included.
    pub fn remove_message(&mut self, rec: &MessageRecord) -> Result<(), StoreError> {
        self.touched.message_written(rec.seq);
        let rows = match self.stored_message_rows(rec.seq)? {
            Some(rows) => rows,
            None => return Ok(()),
        };
        self.message_rows(rec, &rows, false)?;
        self.message_rows.insert(rec.seq, None);
        self.dedup
            .get_mut()?
            .remove((rec.message_id.as_str(), rec.name.as_str()))?;
        self.messages.get_mut()?.remove(rec.seq)?;
        Ok(())
    }

    /// Up to `limit` messages from seq `from` on, and the seq to continue from.
    pub fn messages_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<(Vec<MessageRecord>, Option<u64>), StoreError> {
        scan(self.messages.get()?, from, limit)
    }

    /// The oldest message buffered for (name, key).
    pub fn oldest_buffered(&self, name: &str, key: &str) -> Result<Option<u64>, StoreError> {
        let mut range = self
            .buffer
            .get()?
            .range((name, key, 0u64)..=(name, key, u64::MAX))?;
        Ok(match range.next() {
            Some(row) => Some(row?.0.value().2),
            None => None,
        })
    }

    /// Up to `limit` buffered messages whose TTL ran out by `now`, as (expires_at, seq).
    pub fn expired(&self, now: Millis, limit: usize) -> Result<Vec<(Millis, u64)>, StoreError> {
        let mut due = Vec::new();
        for row in self.expiry.get()?.range((0u64, 0u64)..=(now, u64::MAX))? {
            let (at, seq) = row?.0.value();
            // a message in a slot in a move expires where the move leaves it
            if !self.is_live(seq)? {
                continue;
            }
            due.push((at, seq));
            if due.len() >= limit {
                break;
            }
        }
        Ok(due)
    }

    /// Drops an `expiry` row whose message is gone or no longer buffered (a
    /// database written before the store derived its rows may hold one).
    pub fn drop_orphan_expiry(&mut self, at: Millis, seq: u64) -> Result<(), StoreError> {
        self.expiry.get_mut()?.remove((at, seq))?;
        Ok(())
    }

    /// Whether parked messages leave events to publish, as the database says.
    pub fn parked_events(&self) -> Option<ParkedEvents> {
        self.parked_events
    }

    /// Keeps an event about a parked message until it is published.
    pub fn put_parked_event(&mut self, id: u64, event: &[u8]) -> Result<(), StoreError> {
        self.parked_event_rows.get_mut()?.insert(id, event)?;
        Ok(())
    }

    /// Forgets a published event (an id not kept is no error: a confirmation
    /// may arrive twice).
    pub fn remove_parked_event(&mut self, id: u64) -> Result<bool, StoreError> {
        Ok(self.parked_event_rows.get_mut()?.remove(id)?.is_some())
    }

    /// What a signal with this id did when it was applied here, if it was.
    pub fn signal_seen(&self, id: &str) -> Result<Option<(u64, Millis)>, StoreError> {
        Ok(self.signals_seen.get()?.get(id)?.map(|g| g.value()))
    }

    /// Records that a signal with this id was applied, reaching `reached`.
    pub fn put_signal_seen(
        &mut self,
        id: &str,
        reached: u64,
        at: Millis,
    ) -> Result<(), StoreError> {
        self.signals_seen.get_mut()?.insert(id, (reached, at))?;
        self.signals_seen_at.get_mut()?.insert((at, id), ())?;
        Ok(())
    }

    /// Forgets up to `limit` signal ids applied before `before`; returns how
    /// many.
    pub fn forget_signals_before(
        &mut self,
        before: Millis,
        limit: usize,
    ) -> Result<usize, StoreError> {
        let old: Vec<(u64, String)> = self
            .signals_seen_at
            .get()?
            .range(..(before, ""))?
            .take(limit)
            .map(|r| r.map(|(k, _)| (k.value().0, k.value().1.to_string())))
            .collect::<Result<_, _>>()?;
        for (at, id) in &old {
            self.signals_seen_at.get_mut()?.remove((*at, id.as_str()))?;
            self.signals_seen.get_mut()?.remove(id.as_str())?;
        }
        Ok(old.len())
    }

    /// Keeps a signal thrown here until every other partition took it.
    pub fn put_signal_out(&mut self, seq: u64, signal: &[u8]) -> Result<(), StoreError> {
        self.signals_out.get_mut()?.insert(seq, signal)?;
        Ok(())
    }

    /// Forgets a signal every other partition took (one not kept is no error).
    pub fn remove_signal_out(&mut self, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .signals_out
            .get_mut()?
            .remove(seq)?
            .map(|v| v.value().to_vec()))
    }
}

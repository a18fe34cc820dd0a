//! An instance's tokens as rows: one row per token in `tokens`, keyed
//! (instance, token), and the in-memory set a transaction works on.
//!
//! A step reads the tokens it touches, not all of them: the engine loads a
//! token when it first asks for it ([`Tokens::knows`] says whether it did),
//! and the set remembers every row as it was read (`stored`). Writing the
//! instance compares each token held with its stored row and writes only
//! those that differ, so a step costs the same however many tokens the
//! instance has. The read side (views, verification, retention) loads every
//! token of an instance ([`Tokens::complete`]).
//!
//! Invariants: a token in `list` whose id is in `stored` was read from its row
//! (or found missing); a token in `list` not in `stored` is new in this
//! transaction; a token in `stored` but not in `list` was removed. Whoever
//! iterates over the set (`iter`, `len`, `retain`, …) holds every token of
//! the instance — debug builds assert it, so a code path that forgets to load
//! cannot silently see a part as the whole. The size of a scope (the tokens
//! running in it) is answered from the stored count (`scope_sizes`) and the
//! differences the set holds, never by counting rows.

use super::{Token, Wait};
use crate::codec::{self, CodecError};
use crate::model::Vars;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The tokens of one instance that the code at hand holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tokens {
    /// The tokens held, as they are now, by id (creation order).
    list: BTreeMap<u64, Token>,
    /// Every token of the instance is in `list`.
    complete: bool,
    /// The rows read in this transaction, as read (`None`: asked for, no row).
    stored: BTreeMap<u64, Option<Token>>,
    /// Stored sizes of the scopes asked for (tokens whose `scope` is the key).
    sizes: BTreeMap<u64, u64>,
}

impl Tokens {
    /// A set that holds every token of an instance: a new instance's (none
    /// yet), or all of an existing one's as read (nothing to compare against:
    /// views and verification).
    pub fn complete(tokens: impl IntoIterator<Item = Token>) -> Self {
        Tokens {
            list: tokens.into_iter().map(|t| (t.id, t)).collect(),
            complete: true,
            ..Tokens::default()
        }
    }

    /// An empty set for an instance whose rows stay to be read on demand.
    pub(crate) fn on_demand() -> Self {
        Tokens::default()
    }

    /// Whether every token of the instance is held.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether asking for token `id` needs no read: it is held, was read (or
    /// found missing), or the set is complete.
    pub fn knows(&self, id: u64) -> bool {
        self.complete || self.list.contains_key(&id) || self.stored.contains_key(&id)
    }

    /// Whether the stored size of scope `scope` is known.
    pub(crate) fn knows_size(&self, scope: u64) -> bool {
        self.complete || self.sizes.contains_key(&scope)
    }

    /// Takes in the row of token `id` as read (`None`: it has none). A token
    /// already known is left as it is.
    pub(crate) fn loaded(&mut self, id: u64, row: Option<Token>) {
        if self.knows(id) {
            return;
        }
        if let Some(t) = &row {
            self.list.insert(id, t.clone());
        }
        self.stored.insert(id, row);
    }

    /// Takes in every row of the instance: what is held stays as it is, a
    /// token removed in this transaction stays removed.
    pub(crate) fn loaded_all(&mut self, rows: Vec<Token>) {
        if self.complete {
            return;
        }
        for t in rows {
            if !self.stored.contains_key(&t.id) && !self.list.contains_key(&t.id) {
                self.stored.insert(t.id, Some(t.clone()));
                self.list.insert(t.id, t);
            }
        }
        self.complete = true;
    }

    /// Takes in the stored size of scope `scope`.
    pub(crate) fn sized(&mut self, scope: u64, stored: u64) {
        self.sizes.entry(scope).or_insert(stored);
    }

    /// Token `id`, when the instance has it. The caller made sure it is
    /// known ([`Tokens::knows`]).
    pub fn get(&self, id: u64) -> Option<&Token> {
        debug_assert!(self.knows(id), "token {id} asked for before it was read");
        self.list.get(&id)
    }

    /// Token `id` to change.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Token> {
        debug_assert!(self.knows(id), "token {id} asked for before it was read");
        self.list.get_mut(&id)
    }

    /// Adds a new token (its id is new to the instance).
    pub fn push(&mut self, t: Token) {
        self.list.insert(t.id, t);
    }

    /// Removes token `id`.
    pub fn remove(&mut self, id: u64) -> Option<Token> {
        debug_assert!(self.knows(id), "token {id} removed before it was read");
        self.list.remove(&id)
    }

    /// How many tokens run in scope `scope` now (0: at the process level).
    pub fn scope_size(&self, scope: u64) -> u64 {
        if self.complete {
            return self.list.values().filter(|t| t.scope == scope).count() as u64;
        }
        debug_assert!(self.knows_size(scope), "size of scope {scope} not read");
        let stored = self.sizes.get(&scope).copied().unwrap_or(0);
        let was = self
            .stored
            .values()
            .flatten()
            .filter(|t| t.scope == scope)
            .count() as u64;
        let now = self.list.values().filter(|t| t.scope == scope).count() as u64;
        (stored + now).saturating_sub(was)
    }

    /// The tokens held now, in id order (whether or not the set is complete).
    pub fn held(&self) -> impl Iterator<Item = &Token> {
        self.list.values()
    }

    /// Every token, in id order. The set must be complete.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Token> {
        debug_assert!(self.complete, "iterating over a part of the tokens");
        self.list.values()
    }

    /// Every token, to change. The set must be complete.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Token> {
        debug_assert!(self.complete, "iterating over a part of the tokens");
        self.list.values_mut()
    }

    /// How many tokens the instance has. The set must be complete.
    pub fn len(&self) -> usize {
        debug_assert!(self.complete, "counting a part of the tokens");
        self.list.len()
    }

    /// Whether the instance has no token. The set must be complete.
    pub fn is_empty(&self) -> bool {
        debug_assert!(self.complete, "asking a part of the tokens");
        self.list.is_empty()
    }

    /// Keeps the tokens `keep` says yes to. The set must be complete.
    pub fn retain(&mut self, mut keep: impl FnMut(&Token) -> bool) {
        debug_assert!(self.complete, "filtering a part of the tokens");
        self.list.retain(|_, t| keep(t));
    }

    /// Removes every token. The set must be complete.
    pub fn clear(&mut self) {
        debug_assert!(self.complete, "clearing a part of the tokens");
        self.list.clear();
    }

    /// Whether no token changed since it was read (none new, none removed).
    pub(crate) fn is_unchanged(&self) -> bool {
        self.list.len() == self.stored.values().flatten().count()
            && self
                .list
                .iter()
                .all(|(id, t)| matches!(self.stored.get(id), Some(Some(s)) if s == t))
    }

    /// Every token that changed since it was read: (as stored, as now), for
    /// the store to write.
    pub(crate) fn changes(&self) -> Vec<(Option<&Token>, Option<&Token>)> {
        let mut out = Vec::new();
        for (id, before) in &self.stored {
            let now = self.list.get(id);
            if before.as_ref() != now {
                out.push((before.as_ref(), now));
            }
        }
        for (id, t) in &self.list {
            if !self.stored.contains_key(id) {
                out.push((None, Some(t)));
            }
        }
        out
    }
}

impl<'a> IntoIterator for &'a Tokens {
    type Item = &'a Token;
    type IntoIter = std::collections::btree_map::Values<'a, u64, Token>;

    /// Every token, in id order. The set must be complete.
    fn into_iter(self) -> Self::IntoIter {
        debug_assert!(self.complete, "iterating over a part of the tokens");
        self.list.values()
    }
}

impl FromIterator<Token> for Tokens {
    fn from_iter<I: IntoIterator<Item = Token>>(iter: I) -> Self {
        Tokens::complete(iter)
    }
}

/// A token's row: the token with what its format-1 encoding leaves out.
#[derive(Deserialize)]
struct TokenRow {
    token: Token,
    scope: u64,
    /// Local variables as JSON text (empty: none).
    locals: String,
    boundary_messages: Vec<(String, String)>,
}

/// [`TokenRow`] as written, borrowing the token (encoding clones nothing).
#[derive(Serialize)]
struct TokenRowRef<'a> {
    token: &'a Token,
    scope: u64,
    locals: String,
    boundary_messages: &'a [(String, String)],
}

/// What a token row carries after its first layout, in the row's tail
/// (written only when there is one: a row without keeps the first layout).
/// Variants are encoded by position: new ones go last, and a build that does
/// not know one refuses the row.
#[derive(Debug, Serialize, Deserialize)]
enum TokenTail {
    /// The signals its activity's signal boundary events subscribed to.
    BoundarySignals(Vec<String>),
}

/// The bytes of token `t`'s row. A multi-instance body's items and outputs
/// are not part of it: they are rows of their own (`body_items`).
pub(crate) fn encode_token(t: &Token) -> Result<Vec<u8>, CodecError> {
    debug_assert!(
        !matches!(&t.wait, Wait::Body { items, outputs, .. } if !items.is_empty() || !outputs.is_empty()),
        "a body's items are rows of their own"
    );
    let locals = if t.locals.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&t.locals).map_err(|e| CodecError::Encode(e.to_string()))?
    };
    let tail = (!t.boundary_signals.is_empty())
        .then(|| vec![TokenTail::BoundarySignals(t.boundary_signals.clone())]);
    codec::encode_tailed(
        &TokenRowRef {
            token: t,
            scope: t.scope,
            locals,
            boundary_messages: &t.boundary_messages,
        },
        tail.as_ref(),
    )
}

/// Reads [`encode_token`]'s bytes.
pub(crate) fn decode_token(bytes: &[u8]) -> Result<Token, CodecError> {
    let (row, tail): (TokenRow, Vec<TokenTail>) = codec::decode_tailed(bytes)?;
    let mut t = row.token;
    t.scope = row.scope;
    t.boundary_messages = row.boundary_messages;
    for field in tail {
        match field {
            TokenTail::BoundarySignals(signals) => t.boundary_signals = signals,
        }
    }
    if !row.locals.is_empty() {
        t.locals = serde_json::from_str::<Vars>(&row.locals)
            .map_err(|e| CodecError::Decode(format!("local variables of token {}: {e}", t.id)))?;
    }
    Ok(t)
}

/// One item of a multi-instance body: the item (JSON text; none for
/// `loopCardinality`) and the output its inner instance produced (JSON
/// text; none without an output collection).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BodyItem {
    pub item: Option<String>,
    pub output: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Wait;

    fn token(id: u64, scope: u64) -> Token {
        Token {
            id,
            element: "a".into(),
            wait: Wait::Join { flow: 0 },
            since: 1,
            timers: Vec::new(),
            scope,
            locals: crate::model::vars([("i", 3.into())]),
            boundary_messages: vec![("m".into(), "k".into())],
            boundary_signals: Vec::new(),
        }
    }

    #[test]
    fn a_token_row_keeps_scope_locals_and_subscriptions() {
        let mut t = token(7, 3);
        let first_layout = encode_token(&t).unwrap();
        assert_eq!(
            first_layout[0],
            codec::FORMAT_VERSION,
            "no tail without signals"
        );
        assert_eq!(decode_token(&first_layout).unwrap(), t);
        t.boundary_signals = vec!["alarm".into(), "stop".into()];
        let tailed = encode_token(&t).unwrap();
        assert_eq!(tailed[0], codec::TAILED_VERSION);
        assert_eq!(decode_token(&tailed).unwrap(), t);
    }

    #[test]
    fn changes_are_the_tokens_that_differ_from_their_rows() {
        let mut s = Tokens::on_demand();
        s.loaded(1, Some(token(1, 0)));
        s.loaded(2, Some(token(2, 0)));
        s.loaded(9, None);
        s.get_mut(1).unwrap().since = 5;
        s.remove(2);
        s.push(token(3, 1));
        let changes = s.changes();
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert!(
            changes
                .iter()
                .any(|(b, a)| b.is_some_and(|b| b.id == 2) && a.is_none())
        );
        assert!(
            changes
                .iter()
                .any(|(b, a)| b.is_none() && a.is_some_and(|a| a.id == 3))
        );
    }

    #[test]
    fn a_scope_size_is_the_stored_count_moved_by_what_changed() {
        let mut s = Tokens::on_demand();
        s.sized(5, 1000);
        s.loaded(10, Some(token(10, 5)));
        assert_eq!(s.scope_size(5), 1000);
        s.remove(10);
        assert_eq!(s.scope_size(5), 999);
        s.push(token(11, 5));
        s.push(token(12, 5));
        assert_eq!(s.scope_size(5), 1001);
    }

    #[test]
    fn loading_all_keeps_what_was_removed_removed() {
        let mut s = Tokens::on_demand();
        s.loaded(1, Some(token(1, 0)));
        s.remove(1);
        s.loaded_all(vec![token(1, 0), token(2, 0)]);
        assert_eq!(s.iter().map(|t| t.id).collect::<Vec<_>>(), vec![2]);
    }
}

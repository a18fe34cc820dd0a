//! An instance's variables as rows: one row per variable in `variables`,
//! keyed (instance, name), holding its JSON text; and the in-memory set a
//! transaction works on.
//!
//! A step reads the variables it names, not all of them: an inner instance
//! of a multi-instance activity over a collection of 100,000 items does not
//! read the collection to complete. The set remembers each row as read and
//! writing the instance writes only the variables that changed. Whoever needs
//! them all (a view of every variable, a job without `fetch_variables`, an
//! expression whose names are not known) reads them all first
//! (`Tables::fill_variables`).
//!
//! Invariants: a name in `stored` was read from its row (`None`: no row); a
//! variable is written when its value differs from the stored one; the set
//! derefs to the whole map only when it holds every variable (debug builds
//! assert it), and answers a single name only when that name was read.

use crate::model::Vars;
use serde_json::Value;
use std::collections::BTreeMap;

/// The variables of one instance that the code at hand holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Variables {
    /// The variables held, as they are now.
    map: Vars,
    /// Every variable of the instance is in `map`.
    complete: bool,
    /// The rows read in this transaction, as read (`None`: asked for, no row).
    stored: BTreeMap<String, Option<Value>>,
}

impl Variables {
    /// A set that holds every variable: a new instance's, or all of an
    /// existing one's as read (views; nothing to compare against).
    pub fn complete(map: Vars) -> Self {
        Variables {
            map,
            complete: true,
            stored: BTreeMap::new(),
        }
    }

    /// An empty set for an instance whose rows stay to be read on demand.
    pub(crate) fn on_demand() -> Self {
        Variables::default()
    }

    /// Whether every variable of the instance is held.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether asking for `name` needs no read.
    pub fn knows(&self, name: &str) -> bool {
        self.complete || self.map.contains_key(name) || self.stored.contains_key(name)
    }

    /// Takes in the row of `name` as read (`None`: none). A name already
    /// known is left as it is.
    pub(crate) fn loaded(&mut self, name: &str, row: Option<Value>) {
        if self.knows(name) {
            return;
        }
        if let Some(v) = &row {
            self.map.insert(name.to_string(), v.clone());
        }
        self.stored.insert(name.to_string(), row);
    }

    /// Takes in every row: what is held stays as it is.
    pub(crate) fn loaded_all(&mut self, rows: Vec<(String, Value)>) {
        if self.complete {
            return;
        }
        for (name, v) in rows {
            if !self.stored.contains_key(&name) && !self.map.contains_key(&name) {
                self.map.insert(name.clone(), v.clone());
                self.stored.insert(name, Some(v));
            }
        }
        self.complete = true;
    }

    /// Variable `name`, when the instance has it. The caller made sure it is
    /// known ([`Variables::knows`]).
    pub fn lookup(&self, name: &str) -> Option<&Value> {
        debug_assert!(
            self.knows(name),
            "variable {name} asked for before it was read"
        );
        self.map.get(name)
    }

    /// Sets variable `name` (no read needed: the value is replaced).
    pub fn set(&mut self, name: &str, value: Value) {
        self.map.insert(name.to_string(), value);
    }

    /// The variables named in `names` that the instance has (each known).
    pub fn subset<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Vars {
        let mut out = Vars::new();
        for n in names {
            if let Some(v) = self.lookup(n) {
                out.insert(n.to_string(), v.clone());
            }
        }
        out
    }

    /// Whether no variable changed since it was read (none set anew).
    pub(crate) fn is_unchanged(&self) -> bool {
        self.map.len() == self.stored.values().flatten().count()
            && self
                .map
                .iter()
                .all(|(n, v)| matches!(self.stored.get(n), Some(Some(s)) if s == v))
    }

    /// Every variable that changed since it was read: (name, value now;
    /// `None`: removed), for the store to write.
    pub(crate) fn changes(&self) -> Vec<(&str, Option<&Value>)> {
        let mut out = Vec::new();
        for (name, before) in &self.stored {
            let now = self.map.get(name);
            if before.as_ref() != now {
                out.push((name.as_str(), now));
            }
        }
        for (name, v) in &self.map {
            if !self.stored.contains_key(name) {
                out.push((name.as_str(), Some(v)));
            }
        }
        out
    }
}

impl std::ops::Deref for Variables {
    type Target = Vars;

    /// Every variable. The set must be complete.
    fn deref(&self) -> &Vars {
        debug_assert!(self.complete, "reading a part of the variables as all");
        &self.map
    }
}

impl From<Vars> for Variables {
    fn from(map: Vars) -> Self {
        Variables::complete(map)
    }
}

/// The names an expression over variables reads: the roots of its paths.
pub fn names_of(e: &crate::model::Expr) -> Vec<&str> {
    use crate::model::Expr;
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Lit(_) => {}
            Expr::Var(path) => {
                if let Some(root) = path.first() {
                    out.push(root.as_str());
                }
            }
            Expr::Feel(f) => out.extend(f.words()),
            Expr::Not(a) => stack.push(a),
            Expr::And(a, b) | Expr::Or(a, b) | Expr::Cmp(_, a, b) | Expr::Arith(_, a, b) => {
                stack.push(a);
                stack.push(b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_the_variables_that_differ_from_their_rows() {
        let mut v = Variables::on_demand();
        v.loaded("a", Some(1.into()));
        v.loaded("b", Some(2.into()));
        v.loaded("c", None);
        v.set("a", 5.into());
        v.set("d", 7.into());
        let mut changes: Vec<(String, Option<Value>)> = v
            .changes()
            .into_iter()
            .map(|(n, x)| (n.to_string(), x.cloned()))
            .collect();
        changes.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            changes,
            [("a".into(), Some(5.into())), ("d".into(), Some(7.into()))]
        );
    }

    #[test]
    fn loading_all_keeps_what_was_set() {
        let mut v = Variables::on_demand();
        v.set("a", 9.into());
        v.loaded_all(vec![("a".into(), 1.into()), ("b".into(), 2.into())]);
        assert_eq!(v["a"], 9);
        assert_eq!(v["b"], 2);
        assert_eq!(v.changes().len(), 1);
    }
}

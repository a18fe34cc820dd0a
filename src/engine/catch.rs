//! Opening a message catch of any kind — an intermediate catch event or
//! receive task, a message event subprocess's listener, a message boundary
//! event, a branch of an event-based gateway.
//!
//! Invariants: the correlation key is resolved in one place
//! ([`Engine::catch_key`]), and a key variable that is not set stops the token
//! at an incident with one text, naming the variable, the message and the
//! catching element; per (message, key) a waiting token holds a subscription
//! or takes the buffered message, never both ([`Engine::rest_on_message`]).

use super::*;

/// Which kind of catch a key is resolved for (named in its incident).
#[derive(Clone, Copy)]
pub(super) enum Catcher<'a> {
    /// The element the token rests at (catch event, receive task).
    Here,
    /// A message boundary event of the activity.
    Boundary(&'a str),
    /// The listener of a message event subprocess.
    Listener(&'a str),
    /// A message branch of an event-based gateway.
    Branch(&'a str),
}

/// The incident text of a correlation key variable that is not set.
pub(super) fn key_not_set(var: &str, message: &str, by: Catcher<'_>) -> String {
    let of = match by {
        Catcher::Here => String::new(),
        Catcher::Boundary(id) => format!(" (boundary event '{id}')"),
        Catcher::Listener(id) => format!(" (event subprocess '{id}')"),
        Catcher::Branch(id) => format!(" (event-based gateway branch '{id}')"),
    };
    format!(
        "correlation key variable '{var}' of message '{message}'{of} is not set: set the variable and move the token here again"
    )
}

impl<'a, 't> Engine<'a, 't> {
    /// The key `token` catches `message` with, as its variables say now; or
    /// why it cannot (the text of the incident to raise).
    pub(super) fn key_for(
        &mut self,
        inst: u64,
        token: u64,
        message: &str,
        by: Catcher<'_>,
    ) -> R<Result<String, String>> {
        let p = self.proc_of(inst);
        // the key names one variable (or a path into one): only it is read
        let spec = p.correlation_keys.get(message).cloned().unwrap_or_default();
        let names = model::key_names(&spec);
        let vars = self.vars_named(inst, token, names.iter().map(String::as_str))?;
        Ok(p.correlation_key(message, &vars)
            .map_err(|var| key_not_set(var, message, by)))
    }

    /// The key `token` catches `message` with; when its variable is not
    /// set, the token stops at `element` with the incident saying so, and
    /// there is none.
    pub(super) fn catch_key(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        message: &str,
        by: Catcher<'_>,
    ) -> R<Option<String>> {
        Ok(match self.key_for(inst, token, message, by)? {
            Ok(key) => Some(key),
            Err(error) => {
                self.incident(inst, token, element, error);
                None
            }
        })
    }

    /// A token reached a message catch event or receive task (element
    /// `idx`): it takes a buffered message or waits for one under the key
    /// its variables give (an incident when they give none).
    pub(super) fn await_message(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        message: &str,
    ) -> R<()> {
        let p = self.proc_of(inst);
        let id = &p.at(idx).id;
        let Some(key) = self.catch_key(inst, token, id, message, Catcher::Here)? else {
            return Ok(());
        };
        if self.rest_on_message(inst, token, id, message, key)? {
            self.history(inst, id, "waiting");
        }
        Ok(())
    }

    /// Token `token` rests at `element` waiting for (`message`, `key`): the
    /// oldest buffered message is taken at once, else it subscribes (its
    /// wait is the subscription: the store derives the row). Returns whether
    /// it subscribed (it waits).
    pub(super) fn rest_on_message(
        &mut self,
        inst: u64,
        token: u64,
        element: &str,
        message: &str,
        key: String,
    ) -> R<bool> {
        let buffered = self.t.oldest_buffered(message, &key)?;
        let wait = Wait::Message {
            name: message.to_string(),
            key,
        };
        self.set_token(inst, token, element, wait);
        match buffered {
            Some(seq) => {
                self.consume_buffered(seq, inst, token)?;
                Ok(false)
            }
            None => Ok(true),
        }
    }

    /// Takes every buffered (`message`, `key`) for `token` while `still`
    /// says it waits; returns how many it took.
    pub(super) fn take_buffered_while(
        &mut self,
        inst: u64,
        token: u64,
        message: &str,
        key: &str,
        mut still: impl FnMut(&mut Self) -> bool,
    ) -> R<usize> {
        let mut taken = 0;
        while still(self) {
            let Some(seq) = self.t.oldest_buffered(message, key)? else {
                break;
            };
            self.consume_buffered(seq, inst, token)?;
            taken += 1;
        }
        Ok(taken)
    }
}

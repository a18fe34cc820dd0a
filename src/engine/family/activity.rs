//! Activities: tasks that do work or wait for it, and call activities.
//!
//! Invariant: a task that waits (for a job, a person, a message, a trigger
//! or a child instance) holds its boundary events while it waits; a task
//! the engine runs in the step itself (script, decision, plain and manual
//! task) holds none.

use super::*;

impl Engine<'_, '_> {
    /// An activity starts its work: a job for a worker or handler, a user
    /// task, a message it waits for, a child instance; a script, a decision
    /// or a plain task runs in this step and the token leaves.
    pub(super) fn activate_activity(&mut self, at: At, kind: &ActivityKind) -> R<()> {
        let At { inst, token, idx } = at;
        let p = self.proc_of(inst);
        let id = &p.at(idx).id;
        match kind {
            // a wait state: nothing registered, a caller moves it on
            ActivityKind::WaitState => {
                self.set_token(inst, token, id, Wait::Trigger);
                self.history(inst, id, "waiting");
            }
            ActivityKind::Script {
                expression,
                result_variable,
            } => self.run_script(inst, token, idx, expression, result_variable)?,
            ActivityKind::Decide { .. } => self.run_decision(inst, token, idx)?,
            ActivityKind::CallActivity { .. } => self.call(inst, token, idx)?,
            ActivityKind::UserTask { spec } => {
                if let Some(task) = self.open_user_task(inst, token, idx, spec)? {
                    self.set_token(inst, token, id, Wait::Task { task });
                }
            }
            // a script or rule task waits for the worker that evaluates it
            ActivityKind::ServiceTask { topic } | ActivityKind::Delegated { topic, .. } => {
                let topic = topic.clone();
                let job = self.create_job(inst, token, id, JobKind::Task { topic })?;
                self.set_token(inst, token, id, Wait::Job { job });
            }
            ActivityKind::Publish { topic } => {
                let topic = format!("{}{topic}", model::OUTBOX_TOPIC_PREFIX);
                let job = self.create_job(inst, token, id, JobKind::Task { topic })?;
                self.set_token(inst, token, id, Wait::Job { job });
            }
            ActivityKind::ReceiveTask { message } => {
                self.await_message(inst, token, idx, message)?
            }
            // a plain or manual task does its work outside any system
            ActivityKind::Task { .. } | ActivityKind::SendTask => {
                self.pass_through(inst, token, idx)?
            }
        }
        Ok(())
    }
}

pub(super) fn hosts_boundaries(kind: &ActivityKind) -> bool {
    match kind {
        ActivityKind::ServiceTask { .. }
        | ActivityKind::Delegated { .. }
        | ActivityKind::UserTask { .. }
        | ActivityKind::Publish { .. }
        | ActivityKind::ReceiveTask { .. }
        | ActivityKind::WaitState
        | ActivityKind::CallActivity { .. } => true,
        ActivityKind::Script { .. }
        | ActivityKind::Decide { .. }
        | ActivityKind::Task { .. }
        | ActivityKind::SendTask => false,
    }
}

/// A receive task behind an event-based gateway waits for its message.
pub(super) fn branch(kind: &ActivityKind) -> Branch<'_> {
    match kind {
        ActivityKind::ReceiveTask { message } => Branch::Message(message),
        ActivityKind::ServiceTask { .. }
        | ActivityKind::Delegated { .. }
        | ActivityKind::UserTask { .. }
        | ActivityKind::Publish { .. }
        | ActivityKind::WaitState
        | ActivityKind::CallActivity { .. }
        | ActivityKind::Script { .. }
        | ActivityKind::Decide { .. }
        | ActivityKind::Task { .. }
        | ActivityKind::SendTask => Branch::None,
    }
}

//! Which commands the audit trail records, and how one travels with its
//! principal ([`crate::audit`]).
//!
//! Invariant: the choice is one exhaustive match over the commands, so a new
//! command cannot compile without a decision; only an audited command
//! submitted inside `audit::acting` is wrapped, once.

use super::Command;

impl Command {
    /// The operation and target the audit trail names for this command, if
    /// it is audited (see [`crate::audit`]) — exhaustive, so a new command
    /// is decided here.
    pub(crate) fn audited(&self) -> Option<(&'static str, String)> {
        Some(match self {
            Command::Deploy { file, .. } => ("deploy", format!("file {file}")),
            Command::RetryJob { job } => ("retry", format!("job {job}")),
            Command::Requeue { id } => ("requeue", format!("message {id}")),
            Command::Discard { id, why, .. } => ("discard", format!("message {id} ({why})")),
            Command::AddToken {
                instance, element, ..
            } => ("add-token", format!("instance {instance} at {element}")),
            Command::MoveToken {
                instance,
                token,
                element,
                ..
            } => (
                "move-token",
                format!("instance {instance} token {token} to {element}"),
            ),
            Command::CancelToken { instance, token } => {
                ("cancel-token", format!("instance {instance} token {token}"))
            }
            Command::Cleanup { .. } => (
                "cleanup",
                "completed instances and settled messages".to_string(),
            ),
            Command::Task { task, user, action } => {
                let what = match action {
                    crate::engine::TaskAction::Claim => "claim".to_string(),
                    crate::engine::TaskAction::Unclaim => "unclaim".to_string(),
                    crate::engine::TaskAction::Assign { to } => format!("assign to {to}"),
                    crate::engine::TaskAction::Complete { .. } => "complete".to_string(),
                };
                ("task", format!("task {task}: {what} as {user}"))
            }
            Command::Trigger {
                instance, token, ..
            } => ("trigger", format!("instance {instance} token {token}")),
            Command::AdHoc {
                instance,
                token,
                activate,
            } => (
                "ad-hoc",
                match activate {
                    Some(a) => format!("instance {instance} token {token}: activate {a}"),
                    None => format!("instance {instance} token {token}: complete"),
                },
            ),
            Command::CancelInstance { instance } => {
                ("cancel-instance", format!("instance {instance}"))
            }
            Command::SetVariables {
                instance,
                token,
                vars,
                ..
            } => (
                "set-variables",
                format!(
                    "instance {instance}{}: {}",
                    if *token == 0 {
                        String::new()
                    } else {
                        format!(" token {token}")
                    },
                    vars.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ),
            Command::BackupTaken { id } => ("backup", format!("backup {id}")),
            Command::Migrate {
                plan,
                instances,
                dry_run: false,
            } => (
                "migrate",
                format!(
                    "{} instances of {} from version {} to {}",
                    instances.len(),
                    plan.process,
                    plan.from,
                    plan.to
                ),
            ),
            Command::Migrate { dry_run: true, .. } => return None,
            Command::CreateBatch { op, items } => ("batch", batch_of(op, items.len())),
            Command::StopBatch { batch } => ("batch-stop", format!("batch {batch}")),
            Command::SlotMove(step) => return moved(step),
            Command::By { command, .. } => return command.audited(),
            Command::Start { .. }
            | Command::Publish(_)
            | Command::Correlate(_)
            | Command::Malformed(_)
            | Command::Signal { .. }
            | Command::RunContinuations { .. }
            | Command::LockJobs { .. }
            | Command::CompleteJob { .. }
            | Command::FailJob { .. }
            | Command::ExtendLease { .. }
            | Command::ThrowError { .. }
            | Command::ReleaseAllLeases
            | Command::Tick
            | Command::LockJobsFetching { .. }
            | Command::ParkedEventsSent { .. }
            | Command::SignalOnce { .. }
            | Command::SignalsForwarded { .. }
            | Command::StartByConditions { .. }
            | Command::RunBatch { .. } => return None,
        })
    }

    /// This command as a principal's, when the running task acts as one
    /// and the command is audited: `By { by, command }`; else unchanged.
    pub(crate) fn by_actor(self) -> Command {
        // the process's own traffic returns here, without a look at the task
        if self.audited().is_none() || matches!(self, Command::By { .. }) {
            return self;
        }
        match crate::audit::actor() {
            Some(by) => Command::By {
                by: by.to_string(),
                command: Box::new(self),
            },
            _ => self,
        }
    }
}

/// A move of slots is audited when it begins; the steps after it are the
/// move's own, not a caller's.
fn moved(step: &crate::engine::MoveCommand) -> Option<(&'static str, String)> {
    use crate::engine::MoveCommand as M;
    match step {
        M::Begin {
            first, last, to, ..
        } => Some((
            "move-slots",
            format!("slots {first}-{last} to partition {to}"),
        )),
        M::Exported { .. }
        | M::Flip { .. }
        | M::Forget { .. }
        | M::Import { .. }
        | M::Adopt { .. }
        | M::CatchUp { .. } => None,
    }
}

/// What a batch created over `items` items does, for the audit trail.
fn batch_of(op: &crate::store::batches::BatchOp, items: usize) -> String {
    let what = if op.on_messages() {
        "messages"
    } else {
        "instances"
    };
    format!("{} of {items} {what}", op.name())
}

//! What callers do to the tokens and user tasks of running instances:
//! token repairs, triggering a wait state, running or completing an ad-hoc
//! subprocess, and claiming, assigning and completing user tasks.
//!
//! Invariant: like every method of [`Postfach`], each sends one command to
//! the writer after range-checking what it carries, and returns once the
//! command's batch is durable.

use super::Postfach;
use crate::commit::Command;
use crate::engine::{Repair, TaskAction};
use crate::error::Error;
use crate::model::Vars;

impl Postfach {
    /// Evaluates the latest version of DMN decision `id` against `vars`,
    /// without a process: nothing is stored. Refused when no such decision
    /// is deployed ([`crate::EngineError::UnknownDecision`]) or DMN cannot
    /// evaluate it ([`crate::EngineError::DecisionFailed`]).
    pub fn decide(&self, id: &str, vars: &Vars) -> Result<crate::ops::Decision, Error> {
        crate::limits::check_name("decision", id)?;
        Ok(self.reader()?.decide(id, None, vars)?)
    }

    /// `user` takes user task `task`: refused while someone else holds it.
    pub async fn claim_task(&self, task: u64, user: &str) -> Result<(), Error> {
        self.task_action(task, user, TaskAction::Claim).await
    }

    /// `user` gives user task `task` back: only its holder can.
    pub async fn unclaim_task(&self, task: u64, user: &str) -> Result<(), Error> {
        self.task_action(task, user, TaskAction::Unclaim).await
    }

    /// `by` gives user task `task` to `to`.
    pub async fn assign_task(&self, task: u64, to: &str, by: &str) -> Result<(), Error> {
        self.task_action(task, by, TaskAction::Assign { to: to.into() })
            .await
    }

    /// `user` completes user task `task` with `vars`: only its holder, or anyone
    /// while nobody holds it. The token moves on in the same commit.
    pub async fn complete_task(&self, task: u64, user: &str, vars: Vars) -> Result<(), Error> {
        self.task_action(task, user, TaskAction::Complete { vars })
            .await
    }

    async fn task_action(&self, task: u64, user: &str, action: TaskAction) -> Result<(), Error> {
        crate::limits::check_name("user", user)?;
        match &action {
            TaskAction::Assign { to } => {
                crate::limits::check_name("to", to)?;
            }
            TaskAction::Claim | TaskAction::Unclaim | TaskAction::Complete { .. } => {}
        };
        self.submit(Command::Task {
            task,
            user: user.into(),
            action,
        })
        .await
        .map(|_| ())
    }

    /// Adds a token before `element`; refused if it would open a second
    /// subscription for an already subscribed (message, key), unless `force`.
    pub async fn add_token(
        &self,
        instance: u64,
        element: &str,
        force: bool,
    ) -> Result<Repair, Error> {
        self.submit(Command::AddToken {
            instance,
            element: element.into(),
            force,
        })
        .await?
        .repair()
    }

    /// Moves a token to before `element`; guarded like [`Postfach::add_token`].
    pub async fn move_token(
        &self,
        instance: u64,
        token: u64,
        element: &str,
        force: bool,
    ) -> Result<Repair, Error> {
        self.submit(Command::MoveToken {
            instance,
            token,
            element: element.into(),
            force,
        })
        .await?
        .repair()
    }

    /// Moves token `token` of `instance` on from the wait state it rests at
    /// (a receive task or catch event without an event definition), with
    /// `vars` as the element's result; refused when it waits for anything
    /// else. Returns the element it left and where the instance waits then.
    pub async fn trigger(
        &self,
        instance: u64,
        token: u64,
        vars: Vars,
    ) -> Result<crate::engine::Triggered, Error> {
        self.submit(Command::Trigger {
            instance,
            token,
            vars,
        })
        .await?
        .triggered()
    }

    /// Activates `activate` in the ad-hoc subprocess token `token` of
    /// `instance` holds (one of its activities without incoming flows), or
    /// (`None`) completes it; refused, changing nothing, when the token holds
    /// no ad-hoc subprocess, the activity cannot be activated (or a
    /// sequential one runs another), or activities still run in it.
    /// Returns the element activated (or the subprocess completed) and
    /// where the instance waits then.
    pub async fn ad_hoc(
        &self,
        instance: u64,
        token: u64,
        activate: Option<&str>,
    ) -> Result<crate::engine::Triggered, Error> {
        if let Some(a) = activate {
            crate::limits::check_name("element id", a)?;
        }
        self.submit(Command::AdHoc {
            instance,
            token,
            activate: activate.map(str::to_string),
        })
        .await?
        .triggered()
    }

    /// Removes a token; removing the last one ends the instance as cancelled.
    pub async fn cancel_token(&self, instance: u64, token: u64) -> Result<Repair, Error> {
        self.submit(Command::CancelToken { instance, token })
            .await?
            .repair()
    }

    /// Ends running instance `instance` as cancelled with everything inside
    /// it (jobs, timers, subscriptions, user tasks, called instances); a
    /// caller waiting for it stops at an incident. Refused for an unknown or
    /// ended instance.
    pub async fn cancel_instance(&self, instance: u64) -> Result<(), Error> {
        self.submit(Command::CancelInstance { instance }).await?;
        Ok(())
    }

    /// Sets `vars` in running instance `instance` as token `token` writes
    /// them (a variable local to a scope around it changes there, any other
    /// in the instance; `token` 0 is the instance), or with `local` on the
    /// token itself. Refused for an unknown token or an ended instance.
    pub async fn set_variables(
        &self,
        instance: u64,
        token: u64,
        local: bool,
        vars: Vars,
    ) -> Result<(), Error> {
        for name in vars.keys() {
            crate::limits::check_name("variable name", name)?;
        }
        self.submit(Command::SetVariables {
            instance,
            token,
            local,
            vars,
        })
        .await?;
        Ok(())
    }
}

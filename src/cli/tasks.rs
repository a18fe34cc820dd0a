//! User tasks as people act on them: `tasks`, and `task claim|unclaim|assign|complete`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON.

use super::prelude::*;
use super::values::{VarArgs, parse_instant, parse_to, parse_user, parse_vars};
use clap::{Args, Subcommand};
use postfach::Postfach;
use postfach::server::http::requests;
use serde_json::Value;

// The arguments of `postfach tasks`.
#[derive(Debug, Args)]
pub(crate) struct TasksArgs {
    /// Held by this user.
    #[arg(long)]
    pub(crate) assignee: Option<String>,
    /// This user may claim it.
    #[arg(long = "candidate-user")]
    pub(crate) candidate_user: Option<String>,
    /// Members of this group may claim it.
    #[arg(long = "candidate-group")]
    pub(crate) candidate_group: Option<String>,
    /// Of this process.
    #[arg(long)]
    pub(crate) process: Option<String>,
    /// At this element.
    #[arg(long)]
    pub(crate) element: Option<String>,
    /// Created before this instant (RFC 3339).
    #[arg(long = "created-before", value_parser = parse_instant)]
    pub(crate) created_before: Option<u64>,
    /// Due before this instant (RFC 3339).
    #[arg(long = "due-before", value_parser = parse_instant)]
    pub(crate) due_before: Option<u64>,
}

// The arguments of `postfach task`.
#[derive(Debug, Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    pub(crate) action: TaskCommand,
}

/// What `postfach task` does.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Take the task (refused while someone else holds it).
    ///
    /// Example: postfach task claim 7 --user anna
    Claim {
        task: u64,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
    },
    /// Give the task back (only its holder can).
    ///
    /// Example: postfach task unclaim 7 --user anna
    Unclaim {
        task: u64,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
    },
    /// Give the task to someone.
    ///
    /// Example: postfach task assign 7 --to ben --user lead
    Assign {
        task: u64,
        /// The new holder.
        #[arg(long, value_parser = parse_to)]
        to: String,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
    },
    /// Finish the task (as its holder, or anyone while nobody holds it).
    ///
    /// Example: postfach task complete 7 --user anna --var genehmigt=true
    Complete {
        task: u64,
        /// Who you are.
        #[arg(long, env = "USER", value_parser = parse_user)]
        user: String,
        #[command(flatten)]
        vars: VarArgs,
    },
}

/// The query of `postfach tasks`.
pub(super) fn tasks_query(args: TasksArgs) -> requests::TasksQuery {
    let instant = |ms: Option<u64>| ms.map(postfach::clock::rfc3339);
    requests::TasksQuery {
        assignee: args.assignee,
        candidate_user: args.candidate_user,
        candidate_group: args.candidate_group,
        process: args.process,
        element: args.element,
        created_before: instant(args.created_before),
        due_before: instant(args.due_before),
    }
}

/// `postfach tasks` against the open database.
pub(super) async fn tasks(pf: &Postfach, args: TasksArgs) -> Result<Output, Failure> {
    let filter = tasks_query(args).filter().map_err(usage)?;
    let list = pf.reader()?.tasks(&filter)?;
    Ok(shown(postfach::server::documents::tasks(&list), tasks_text))
}

pub(super) fn tasks_text(d: &Value) -> String {
    let text = each(&d["tasks"])
        .iter()
        .map(|t| {
            let groups = joined(&t["candidate_groups"]).replace(", ", ",");
            format!(
                "{:>8}  instance {:<8} {:<22} {}{}{}",
                s(&t["task"]),
                s(&t["instance"]),
                s(&t["element"]),
                t["assignee"]
                    .as_str()
                    .map(|a| format!("held by {a}"))
                    .unwrap_or_else(|| "open".into()),
                t["due"]
                    .as_str()
                    .map(|d| format!(" due {d}"))
                    .unwrap_or_default(),
                if groups.is_empty() {
                    String::new()
                } else {
                    format!(" groups {groups}")
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = if text.is_empty() {
        "no open tasks".to_string()
    } else {
        text
    };
    super::instances::missing_note(d, &text)
}

/// The task, the action's path segment and the request of `postfach task`.
pub(super) fn task_request(
    action: TaskCommand,
) -> Result<(u64, &'static str, requests::TaskBody), Failure> {
    let (task, action, user, to, vars) = match action {
        TaskCommand::Claim { task, user } => (task, "claim", user, None, None),
        TaskCommand::Unclaim { task, user } => (task, "unclaim", user, None, None),
        TaskCommand::Assign { task, to, user } => (task, "assign", user, Some(to), None),
        TaskCommand::Complete { task, user, vars } => (task, "complete", user, None, Some(vars)),
    };
    let variables = match vars {
        Some(vars) => parse_vars(&vars.var).map_err(usage)?,
        None => Default::default(),
    };
    Ok((
        task,
        action,
        requests::TaskBody {
            user,
            to,
            variables,
        },
    ))
}

/// `postfach task` against the open database.
pub(super) async fn task(pf: &Postfach, args: TaskArgs) -> Result<Output, Failure> {
    let (task, action, b) = task_request(args.action)?;
    match action {
        "claim" => pf.claim_task(task, &b.user).await?,
        "unclaim" => pf.unclaim_task(task, &b.user).await?,
        "assign" => {
            pf.assign_task(task, b.to.as_deref().unwrap_or_default(), &b.user)
                .await?
        }
        _ => pf.complete_task(task, &b.user, b.variables).await?,
    }
    // the one document every face answers
    let doc = postfach::server::documents::task_done(task, action, &b.user, b.to.as_deref());
    Ok(shown(doc, task_text))
}

pub(super) fn task_text(d: &Value) -> String {
    format!("task {} {}", s(&d["task"]), s(&d["done"]))
}

//! User tasks as people act on them: `tasks`, and `task claim|unclaim|assign|complete`.
//!
//! Invariant: each command owns its arguments, its human text and its JSON.

use super::Output;
use super::failure::{Failure, out, usage};
use super::values::{VarArgs, parse_instant, parse_to, parse_user, parse_vars};
use clap::{Args, Subcommand};
use postfach::Postfach;

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

/// `postfach tasks` against the open database.
pub(super) async fn tasks(pf: &Postfach, args: TasksArgs) -> Result<Output, Failure> {
    let TasksArgs {
        assignee,
        candidate_user,
        candidate_group,
        process,
        element,
        created_before,
        due_before,
    } = args;
    let filter = postfach::ops::TaskFilter {
        assignee,
        candidate_user,
        candidate_group,
        process,
        element,
        created_before,
        due_before,
    };
    let list = pf.reader()?.tasks(&filter)?;
    let text = list
        .iter()
        .map(|t| {
            format!(
                "{:>8}  instance {:<8} {:<22} {}{}{}",
                t.task,
                t.instance,
                t.element,
                t.assignee
                    .as_ref()
                    .map(|a| format!("held by {a}"))
                    .unwrap_or_else(|| "open".into()),
                t.due
                    .as_ref()
                    .map(|d| format!(" due {d}"))
                    .unwrap_or_default(),
                if t.candidate_groups.is_empty() {
                    String::new()
                } else {
                    format!(" groups {}", t.candidate_groups.join(","))
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
    Ok(out(postfach::server::documents::tasks(&list), text))
}

/// `postfach task` against the open database.
pub(super) async fn task(pf: &Postfach, args: TaskArgs) -> Result<Output, Failure> {
    let TaskArgs { action } = args;
    let (task, action, user, to) = match action {
        TaskCommand::Claim { task, user } => {
            pf.claim_task(task, &user).await?;
            (task, "claim", user, None)
        }
        TaskCommand::Unclaim { task, user } => {
            pf.unclaim_task(task, &user).await?;
            (task, "unclaim", user, None)
        }
        TaskCommand::Assign { task, to, user } => {
            pf.assign_task(task, &to, &user).await?;
            (task, "assign", user, Some(to))
        }
        TaskCommand::Complete { task, user, vars } => {
            let vars = parse_vars(&vars.var).map_err(usage)?;
            pf.complete_task(task, &user, vars).await?;
            (task, "complete", user, None)
        }
    };
    // the one document every face answers
    let doc = postfach::server::documents::task_done(task, action, &user, to.as_deref());
    let text = format!("task {task} {}", doc["done"].as_str().unwrap_or_default());
    Ok(out(doc, text))
}

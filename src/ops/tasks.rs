//! Views of open user tasks, by filter.
//!
//! Invariant: only reads; a task is listed while it is open.

use super::*;
use crate::clock::{Millis, rfc3339};
use crate::store::*;
use serde::Serialize;

/// An open user task in the task list.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    /// Task id.
    pub task: String,
    /// Instance id.
    pub instance: String,
    /// Process id.
    pub process: String,
    /// The user task's element id.
    pub element: String,
    /// Its name in the diagram.
    pub name: Option<String>,
    /// Who holds it.
    pub assignee: Option<String>,
    /// Who may claim it.
    pub candidate_users: Vec<String>,
    /// Groups whose members may claim it.
    pub candidate_groups: Vec<String>,
    /// Due date (ISO 8601, as the model gave it).
    pub due: Option<String>,
    /// Follow-up date (ISO 8601, as the model gave it).
    pub follow_up: Option<String>,
    /// Priority.
    pub priority: Option<String>,
    /// Form key.
    pub form_key: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// How long it has been open, in milliseconds.
    pub age_ms: u64,
}

/// Which user tasks to list (all given conditions hold).
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Held by this user.
    pub assignee: Option<String>,
    /// This user may claim it (a candidate user, or unassigned with no candidates).
    pub candidate_user: Option<String>,
    /// Members of this group may claim it.
    pub candidate_group: Option<String>,
    /// Of this process.
    pub process: Option<String>,
    /// At this element.
    pub element: Option<String>,
    /// Created before this instant.
    pub created_before: Option<Millis>,
    /// Due before this instant (tasks whose due date is not an instant never match).
    pub due_before: Option<Millis>,
}

impl TaskFilter {
    fn keeps(&self, t: &TaskRecord) -> bool {
        let due = t
            .due
            .as_deref()
            .and_then(|d| crate::model::iso::instant(d).ok());
        self.assignee
            .as_ref()
            .is_none_or(|a| t.assignee.as_ref() == Some(a))
            && self.candidate_user.as_ref().is_none_or(|u| {
                t.candidate_users.contains(u)
                    || (t.assignee.is_none()
                        && t.candidate_users.is_empty()
                        && t.candidate_groups.is_empty())
            })
            && self
                .candidate_group
                .as_ref()
                .is_none_or(|g| t.candidate_groups.contains(g))
            && self.process.as_ref().is_none_or(|p| &t.process == p)
            && self.element.as_ref().is_none_or(|e| &t.element == e)
            && self.created_before.is_none_or(|b| t.created_at < b)
            && self.due_before.is_none_or(|b| due.is_some_and(|d| d < b))
    }
}

impl Reader {
    /// Open user tasks that pass `filter`, oldest first.
    pub fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskView>, RErr> {
        Ok(self
            .snap
            .tasks()?
            .iter()
            .filter(|t| filter.keeps(t))
            .map(|t| TaskView {
                task: t.id.to_string(),
                instance: t.instance.to_string(),
                process: t.process.clone(),
                element: t.element.clone(),
                name: t.name.clone(),
                assignee: t.assignee.clone(),
                candidate_users: t.candidate_users.clone(),
                candidate_groups: t.candidate_groups.clone(),
                due: t.due.clone(),
                follow_up: t.follow_up.clone(),
                priority: t.priority.clone(),
                form_key: t.form_key.clone(),
                created_at: rfc3339(t.created_at),
                age_ms: self.now.saturating_sub(t.created_at),
            })
            .collect())
    }

    /// Whether `user` (a member of `groups`) may claim or complete open
    /// task `task`: its holder may; while nobody holds it, a candidate user,
    /// a member of a candidate group, or anyone when it names no candidates.
    /// `None`: no such open task.
    pub fn task_open_to(
        &self,
        task: u64,
        user: &str,
        groups: &[String],
    ) -> Result<Option<bool>, RErr> {
        let Some(t) = self.snap.task(task)? else {
            return Ok(None);
        };
        Ok(Some(match &t.assignee {
            Some(holder) => holder == user,
            None => {
                (t.candidate_users.is_empty() && t.candidate_groups.is_empty())
                    || t.candidate_users.iter().any(|u| u == user)
                    || t.candidate_groups.iter().any(|g| groups.contains(g))
            }
        }))
    }

    /// The audit trail's entries that pass `filter`, newest first.
    pub fn audit(
        &self,
        filter: &crate::audit::AuditFilter,
    ) -> Result<Vec<crate::audit::AuditEntry>, RErr> {
        self.snap.audit(filter)
    }

    /// Open user tasks per element: how many, and since when the oldest is
    /// open (from a gauge and an index head per element, not the tasks).
    pub fn open_tasks_summary(&self) -> Result<Vec<(String, u64, Millis)>, RErr> {
        self.snap.open_tasks_summary()
    }
}

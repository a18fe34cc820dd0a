//! User tasks: the task record a waiting token opens, and what people do with
//! it (claim, unclaim, assign, complete).
//!
//! Invariant: a token waiting at a user task has exactly one open task record
//! and the record names that token; completing it removes the record and moves
//! the token in the same transaction; a claim never takes a task someone else
//! holds, and only its holder (or anyone, while nobody holds it) completes it.
//! Every action is in the instance's history with who did it.

use super::*;
use crate::model::UserTaskSpec;

/// What a person does with a user task.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum TaskAction {
    /// Take it: refused while someone else holds it.
    Claim,
    /// Give it back: only its holder can.
    Unclaim,
    /// Give it to `to` (an operator's or a lead's action; replaces the holder).
    Assign {
        /// The new holder.
        to: String,
    },
    /// Finish it with variables: only its holder, or anyone while nobody holds it.
    Complete {
        /// Merged into the instance.
        #[serde(with = "crate::codec::json_text")]
        vars: Vars,
    },
}

/// Why a user task refused an action (the edges say what to do next).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskRefusal {
    /// Someone else holds it.
    HeldBy(String),
    /// Only its holder can do this, and that is someone else (or nobody).
    NotHolder(Option<String>),
}

impl std::fmt::Display for TaskRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskRefusal::HeldBy(u) => write!(f, "is held by '{u}'"),
            TaskRefusal::NotHolder(Some(u)) => write!(f, "is held by '{u}', not by you"),
            TaskRefusal::NotHolder(None) => write!(f, "is held by nobody"),
        }
    }
}

fn list(raw: Option<String>) -> Vec<String> {
    raw.map(|r| {
        r.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

impl<'a, 't> Engine<'a, 't> {
    /// Opens the task record of a token arriving at a user task; attributes
    /// are resolved against the instance's variables now. `None` when an
    /// input mapping or an attribute's FEEL expression fails: the token
    /// stops at an incident naming it.
    pub(super) fn open_user_task(
        &mut self,
        inst: u64,
        token: u64,
        idx: usize,
        spec: &UserTaskSpec,
    ) -> R<Option<u64>> {
        let p = self.proc_of(inst);
        let el = p.at(idx);
        let mut vars = self.vars_all(inst, token)?;
        let now = self.now;
        let attributes = model::mapped(&el.extras.inputs, &vars, now).and_then(|inputs| {
            vars.extend(inputs);
            let r = |what: &str, raw: &Option<String>| {
                UserTaskSpec::resolve(raw.as_deref(), &vars, now)
                    .map_err(|e| format!("{what}: {e}"))
            };
            Ok([
                r("assignee", &spec.assignee)?,
                r("candidateUsers", &spec.candidate_users)?,
                r("candidateGroups", &spec.candidate_groups)?,
                r("dueDate", &spec.due_date)?,
                r("followUpDate", &spec.follow_up_date)?,
                r("priority", &spec.priority)?,
                r("formKey", &spec.form_key)?,
            ])
        });
        let [assignee, users, groups, due, follow_up, priority, form_key] = match attributes {
            Ok(a) => a,
            Err(e) => {
                let error = format!(
                    "user task {e}: fix the variables it reads, then move this token here again"
                );
                self.incident(inst, token, &el.id, error);
                return Ok(None);
            }
        };
        let mut rec = TaskRecord {
            id: 0,
            instance: inst,
            token,
            process: p.id.clone(),
            element: el.id.clone(),
            name: el.name.clone(),
            assignee,
            candidate_users: list(users),
            candidate_groups: list(groups),
            due,
            follow_up,
            priority,
            form_key,
            created_at: self.now,
        };
        rec.id = self.t.next_slot_id("task", self.slot_of_id(inst)?)?;
        self.t.put_task(&rec)?;
        self.history(inst, &el.id, &format!("task_created {}", rec.id));
        Ok(Some(rec.id))
    }

    /// `user` claims, gives back, assigns or completes user task `id`.
    pub fn task_action(&mut self, id: u64, user: &str, action: &TaskAction) -> R<()> {
        let mut task = self.t.task(id)?.ok_or(EngineError::UnknownTask(id))?;
        let refuse = |refusal| Err(EngineError::TaskRefused { task: id, refusal });
        match action {
            TaskAction::Claim => match &task.assignee {
                Some(holder) if holder != user => {
                    return refuse(TaskRefusal::HeldBy(holder.clone()));
                }
                _ => task.assignee = Some(user.to_string()),
            },
            TaskAction::Unclaim => {
                if task.assignee.as_deref() != Some(user) {
                    return refuse(TaskRefusal::NotHolder(task.assignee.clone()));
                }
                task.assignee = None;
            }
            TaskAction::Assign { to } => task.assignee = Some(to.clone()),
            TaskAction::Complete { .. } => {
                if let Some(holder) = task.assignee.as_ref().filter(|h| *h != user) {
                    return refuse(TaskRefusal::NotHolder(Some(holder.clone())));
                }
            }
        }
        self.load_at(task.instance, task.token)?;
        let event = match action {
            TaskAction::Claim => format!("task_claimed {id} by {user}"),
            TaskAction::Unclaim => format!("task_unclaimed {id} by {user}"),
            TaskAction::Assign { to } => format!("task_assigned {id} to {to} by {user}"),
            TaskAction::Complete { .. } => format!("task_completed {id} by {user}"),
        };
        self.history(task.instance, &task.element, &event);
        let TaskAction::Complete { vars } = action else {
            self.t.put_task(&task)?;
            return self.flush();
        };
        let p = self.proc_of(task.instance);
        let idx = p
            .index_of(&task.element)
            .ok_or_else(|| EngineError::UnknownElement {
                process: p.id.clone(),
                element: task.element.clone(),
            })?;
        self.t.remove_task(id)?;
        if self.complete_with(task.instance, task.token, idx, vars)? {
            self.queue_leave(task.instance, task.token, idx);
        }
        self.run()
    }
}

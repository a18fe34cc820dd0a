//! The JSON documents an operation answers, built in one place for every
//! face — the HTTP API, the command line (docs/cli.md) and the console — so
//! the faces cannot drift apart.
//!
//! Invariant: each function here is the only place its document is built;
//! a face adds its human text around it, never fields of its own.

use crate::clock::{Millis, rfc3339};
use serde_json::{Value, json};

/// Instances started (by conditions): `{"started": ["ID", …]}`.
pub fn started(ids: &[u64]) -> Value {
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    json!({ "started": ids })
}

/// A signal sent: `{"signal", "reached", "id"}` (`id` null without one).
pub fn signal(name: &str, reached: usize, id: Option<&str>) -> Value {
    json!({"signal": name, "reached": reached, "id": id})
}

/// A lease extended: `{"job", "lease_until"}`.
pub fn lease(job: u64, until: Millis) -> Value {
    json!({"job": job.to_string(), "lease_until": rfc3339(until)})
}

/// A job completed: `{"job", "state": "completed"}`.
pub fn job_completed(job: u64) -> Value {
    json!({"job": job.to_string(), "state": "completed"})
}

/// The open user tasks: `{"tasks": […]}`.
pub fn tasks(list: &[crate::ops::TaskView]) -> Value {
    json!({ "tasks": list })
}

/// The audit trail: `{"audit": [{seq, at, who, operation, target}]}`,
/// newest first, `at` in RFC 3339.
pub fn audit(list: &[crate::audit::AuditEntry]) -> Value {
    let entries: Vec<Value> = list
        .iter()
        .map(|e| {
            json!({
                "seq": e.seq.to_string(),
                "at": crate::clock::rfc3339(e.at),
                "who": e.who,
                "operation": e.operation,
                "target": e.target,
            })
        })
        .collect();
    json!({ "audit": entries })
}

/// What a user task action did: `{"task", "done"}`, `done` saying what was
/// done and by whom — "claimed by anna", "given back by anna", "assigned to
/// ben by anna", "completed by anna".
pub fn task_done(task: u64, action: &str, user: &str, to: Option<&str>) -> Value {
    let done = match action {
        "claim" => format!("claimed by {user}"),
        "unclaim" => format!("given back by {user}"),
        "assign" => format!("assigned to {} by {user}", to.unwrap_or("nobody")),
        "complete" => format!("completed by {user}"),
        other => format!("{other} by {user}"),
    };
    json!({"task": task.to_string(), "done": done})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_have_the_shapes_docs_cli_md_gives() {
        assert_eq!(started(&[3, 12]), json!({"started": ["3", "12"]}));
        assert_eq!(
            signal("Tarif", 2, None),
            json!({"signal": "Tarif", "reached": 2, "id": null})
        );
        assert_eq!(lease(9, 0)["lease_until"], "1970-01-01T00:00:00.000Z");
        assert_eq!(job_completed(9), json!({"job": "9", "state": "completed"}));
        assert_eq!(tasks(&[]), json!({"tasks": []}));
        assert_eq!(
            task_done(7, "assign", "anna", Some("ben")),
            json!({"task": "7", "done": "assigned to ben by anna"})
        );
    }
}

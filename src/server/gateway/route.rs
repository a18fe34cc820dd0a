//! Where the gateway sends a request of the partition API: a pure function of
//! its method and path, the placement the operation catalogue
//! (`server::catalogue`) gives the operation.
//!
//! Invariant: every operation of `postfach run`'s API is routed by its
//! placement, and a write goes to the one partition that owns its id or key
//! (or, when nothing in the path places it, to every partition or the one
//! that answers for it) — never to a partition picked by chance.

use crate::server::catalogue::{self, Placement};
use axum::http::Method;

/// The lists the gateway gathers page by page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `GET /instances`: newest first, unless `order=oldest`.
    Instances,
    /// `GET /messages`: parked, then buffered ones.
    Messages,
    /// `GET /jobs`: by id.
    Jobs,
    /// `GET /tasks`: every open task, unpaged.
    Tasks,
}

impl List {
    /// The field of the answer that holds the list.
    pub fn field(self) -> &'static str {
        match self {
            List::Instances => "instances",
            List::Messages => "messages",
            List::Jobs => "jobs",
            List::Tasks => "tasks",
        }
    }
}

/// Where a request goes: the catalogue's placement of its operation, with
/// the id a [`Placement::ById`] names parsed (`None` when it is not a
/// number: the partition answers 400); `None` for what the API does not
/// have, which any partition refuses as it would without the gateway.
pub fn route(method: &Method, path: &str) -> Option<(Placement, Option<u64>)> {
    let (op, params) = catalogue::find(method, path)?;
    let id = match op.placement {
        Placement::ById(name) | Placement::ByPartitionId(name) => params
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.parse::<u64>().ok()),
        _ => None,
    };
    Some((op.placement, id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Placement::*;

    /// The placement of `method` `path` and its id, as the gateway reads it.
    fn placed(method: &Method, path: &str) -> Option<(Placement, Option<u64>)> {
        route(method, path)
    }

    #[test]
    fn writes_go_by_id_or_key_and_reads_are_gathered() {
        let p = Method::POST;
        let g = Method::GET;
        let id = |n| Some((ById("id"), Some(n)));
        assert_eq!(placed(&p, "/deployments"), Some((Everywhere, None)));
        assert_eq!(placed(&p, "/instances"), Some((Start, None)));
        assert_eq!(
            placed(&g, "/instances"),
            Some((Gather(List::Instances), None))
        );
        assert_eq!(placed(&g, "/instances/17"), id(17));
        assert_eq!(placed(&p, "/instances/17/tokens"), id(17));
        assert_eq!(placed(&p, "/instances/17/tokens/3/move"), id(17));
        assert_eq!(placed(&p, "/instances/17/tokens/3/trigger"), id(17));
        assert_eq!(placed(&p, "/messages"), Some((ByKey, None)));
        assert_eq!(placed(&p, "/messages/correlate"), Some((ByKey, None)));
        assert_eq!(
            placed(&g, "/messages"),
            Some((Gather(List::Messages), None))
        );
        assert_eq!(placed(&p, "/messages/m-1/requeue"), Some((Find, None)));
        assert_eq!(placed(&p, "/messages/m-1/discard"), Some((Find, None)));
        assert_eq!(placed(&p, "/signals"), Some((Signal, None)));
        assert_eq!(placed(&p, "/conditions"), Some((PartitionZero, None)));
        assert_eq!(placed(&g, "/jobs"), Some((Gather(List::Jobs), None)));
        assert_eq!(placed(&p, "/jobs/acquire"), Some((Acquire, None)));
        assert_eq!(placed(&p, "/jobs/9/complete"), id(9));
        assert_eq!(placed(&g, "/jobs/9/objects/payload"), id(9));
        assert_eq!(placed(&g, "/processes"), Some((Processes, None)));
        assert_eq!(
            placed(&g, "/processes/p/statistics"),
            Some((Statistics, None))
        );
        assert_eq!(placed(&g, "/processes/p/xml"), Some((Same, None)));
        assert_eq!(placed(&g, "/decisions"), Some((Same, None)));
        assert_eq!(placed(&p, "/decisions/d/evaluate"), Some((Same, None)));
        assert_eq!(placed(&g, "/alarms"), Some((Alarms, None)));
        assert_eq!(placed(&g, "/tasks"), Some((Gather(List::Tasks), None)));
        assert_eq!(placed(&p, "/tasks/12/claim"), id(12));
        assert_eq!(placed(&g, "/metrics"), Some((Metrics, None)));
        assert_eq!(placed(&p, "/cli"), None);
        assert_eq!(placed(&p, "/cleanup"), Some((Summed, None)));
    }

    /// Every operation of the API has a placement of its own: none falls
    /// through to what the API does not have.
    #[test]
    fn every_operation_of_the_api_has_its_route() {
        let doc = crate::server::http::api_doc();
        let mut unrouted = Vec::new();
        for (path, item) in &doc.paths.paths {
            // a path with its parameters filled in as a caller would
            let concrete: String = path
                .split('/')
                .map(|s| if s.starts_with('{') { "7" } else { s })
                .collect::<Vec<_>>()
                .join("/");
            let methods = [
                (Method::GET, item.get.is_some()),
                (Method::POST, item.post.is_some()),
            ];
            for (method, _) in methods.into_iter().filter(|(_, has)| *has) {
                if route(&method, &concrete).is_none() {
                    unrouted.push(format!("{method} {path}"));
                }
            }
        }
        assert!(unrouted.is_empty(), "no route: {unrouted:?}");
    }

    #[test]
    fn what_the_api_does_not_have_goes_to_a_partition_that_refuses_it() {
        // a non-numeric id is the partition's 400, an unknown path its 404,
        // a wrong method its 405: the gateway adds no answers of its own
        assert_eq!(
            placed(&Method::GET, "/instances/x"),
            Some((ById("id"), None))
        );
        assert_eq!(placed(&Method::GET, "/nothing"), None);
        assert_eq!(placed(&Method::DELETE, "/instances/1"), None);
        assert_eq!(placed(&Method::GET, "/jobs/acquire"), None);
    }
}

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

/// How one request of the partition API is served by the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The partition that owns the id (`id mod P`).
    Id(u64),
    /// The partition of the body's correlation `key` (publish, correlate).
    BodyKey,
    /// Any partition (round-robin); a partition that owns another key answers
    /// 421 with the owner, and the start goes there.
    Start,
    /// Every partition, the same answer expected (deploy).
    Everywhere,
    /// Every partition, the counts of receivers summed (signals).
    Signal,
    /// The one partition that has it: a parked message named by the
    /// publisher's message id, which does not carry a partition.
    Find,
    /// A list gathered from every partition, with a cursor per partition.
    Gather(List),
    /// Deployed processes: the union over the partitions.
    Processes,
    /// A process's statistics, summed element by element.
    Statistics,
    /// Alarm states, each with its partition.
    Alarms,
    /// Jobs acquired round-robin over the partitions.
    Acquire,
    /// The Prometheus metrics of every partition, labelled with it.
    Metrics,
    /// A command line, routed by what it names.
    Cli,
    /// Any partition that answers, because the answer is the same on each —
    /// what a deployment put everywhere (a process's XML, the decisions and
    /// their evaluation, which stores nothing) — or is one partition's view
    /// that names it (`/partition`; `/cluster/status` has them all).
    Same,
    /// A path or method the API does not have: any partition, which refuses
    /// it as it would without the gateway.
    Any,
}

/// The route of `method` `path` (without the query): the placement of the
/// operation the catalogue finds for it; what the API does not have goes to
/// any partition, which refuses it as it would without the gateway.
pub fn route(method: &Method, path: &str) -> Route {
    let Some((op, params)) = catalogue::find(method, path) else {
        return Route::Any;
    };
    match op.placement {
        // a parameter that is not a number is the partition's 400
        Placement::ById(name) => params
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .map_or(Route::Any, Route::Id),
        Placement::ByKey => Route::BodyKey,
        Placement::Start => Route::Start,
        Placement::Everywhere => Route::Everywhere,
        Placement::Signal => Route::Signal,
        Placement::Find => Route::Find,
        Placement::Gather(list) => Route::Gather(list),
        Placement::Processes => Route::Processes,
        Placement::Statistics => Route::Statistics,
        Placement::Alarms => Route::Alarms,
        Placement::Acquire => Route::Acquire,
        Placement::Metrics => Route::Metrics,
        Placement::Cli => Route::Cli,
        Placement::Same => Route::Same,
        Placement::PartitionZero => Route::Id(0),
        // the gateway answers its health itself; forwarded, any would do
        Placement::Local => Route::Same,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_go_by_id_or_key_and_reads_are_gathered() {
        let p = Method::POST;
        let g = Method::GET;
        assert_eq!(route(&p, "/deployments"), Route::Everywhere);
        assert_eq!(route(&p, "/instances"), Route::Start);
        assert_eq!(route(&g, "/instances"), Route::Gather(List::Instances));
        assert_eq!(route(&g, "/instances/17"), Route::Id(17));
        assert_eq!(route(&p, "/instances/17/tokens"), Route::Id(17));
        assert_eq!(route(&p, "/instances/17/tokens/3/move"), Route::Id(17));
        assert_eq!(route(&p, "/instances/17/tokens/3/trigger"), Route::Id(17));
        assert_eq!(route(&p, "/messages"), Route::BodyKey);
        assert_eq!(route(&p, "/messages/correlate"), Route::BodyKey);
        assert_eq!(route(&g, "/messages"), Route::Gather(List::Messages));
        assert_eq!(route(&p, "/messages/m-1/requeue"), Route::Find);
        assert_eq!(route(&p, "/messages/m-1/discard"), Route::Find);
        assert_eq!(route(&p, "/signals"), Route::Signal);
        assert_eq!(route(&p, "/conditions"), Route::Id(0));
        assert_eq!(route(&g, "/jobs"), Route::Gather(List::Jobs));
        assert_eq!(route(&p, "/jobs/acquire"), Route::Acquire);
        assert_eq!(route(&p, "/jobs/9/complete"), Route::Id(9));
        assert_eq!(route(&g, "/jobs/9/objects/payload"), Route::Id(9));
        assert_eq!(route(&g, "/processes"), Route::Processes);
        assert_eq!(route(&g, "/processes/p/statistics"), Route::Statistics);
        assert_eq!(route(&g, "/processes/p/xml"), Route::Same);
        assert_eq!(route(&g, "/decisions"), Route::Same);
        assert_eq!(route(&Method::POST, "/decisions/d/evaluate"), Route::Same);
        assert_eq!(route(&g, "/alarms"), Route::Alarms);
        assert_eq!(route(&g, "/tasks"), Route::Gather(List::Tasks));
        assert_eq!(route(&p, "/tasks/12/claim"), Route::Id(12));
        assert_eq!(route(&g, "/metrics"), Route::Metrics);
        assert_eq!(route(&p, "/cli"), Route::Cli);
    }

    /// Every operation of the partition API has a route of its own: none
    /// falls through to the one for what the API does not have.
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
                if route(&method, &concrete) == Route::Any {
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
        assert_eq!(route(&Method::GET, "/instances/x"), Route::Any);
        assert_eq!(route(&Method::GET, "/nothing"), Route::Any);
        assert_eq!(route(&Method::DELETE, "/instances/1"), Route::Any);
        assert_eq!(route(&Method::GET, "/jobs/acquire"), Route::Any);
    }
}

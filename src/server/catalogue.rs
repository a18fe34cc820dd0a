//! The catalogue of operations: every operation of the API once, with its
//! method and path, where it runs in a cluster, the permission it needs and
//! whether it only reads. Each family of operations keeps its entries beside
//! its handlers (`http/instances.rs`, `messages.rs`, `jobs.rs`,
//! `processes.rs`, and the server's own in `http/mod.rs`); the HTTP router and
//! the OpenAPI document are built from the same family files
//! (`utoipa_axum::routes!`), and the gateway routes by [`Placement`].
//!
//! Invariants: an operation has exactly one entry, and every entry is served
//! and documented (tests compare the catalogue with the OpenAPI document the
//! router produced); a placement is matched exhaustively where the gateway
//! routes, so a new kind of placement cannot compile unrouted.

use crate::server::gateway::route::List;
use axum::http::Method;

/// Where an operation runs in a cluster of partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the partition that owns the id in the path parameter named here:
    /// the owner of the slot it carries, per the slot map.
    ById(&'static str),
    /// On the partition whose number the id in the path parameter named
    /// here carries (`id mod 1024`: a batch, which stays where it was made).
    ByPartitionId(&'static str),
    /// The slot map: gathered from every partition by the gateway.
    SlotMap,
    /// A move of a range of slots: begun on every partition that owns
    /// slots of it, each its own part, with the target's address and a
    /// map version of its own.
    MoveSlots,
    /// On the partition of the body's correlation `key`.
    ByKey,
    /// A start: any partition, which hands a keyed start to its owner.
    Start,
    /// On every partition, the same answer expected (a deployment).
    Everywhere,
    /// On every partition once per signal id, the receivers summed.
    Signal,
    /// On the one partition that has the message a publisher's id names.
    Find,
    /// A list gathered from every partition page by page.
    Gather(List),
    /// Deployed processes: the union over the partitions.
    Processes,
    /// A process's statistics, summed element by element.
    Statistics,
    /// Alarm states, each with its partition.
    Alarms,
    /// Jobs acquired from one partition after another.
    Acquire,
    /// Every partition's metrics, labelled with it.
    Metrics,
    /// On every partition, the answers merged: numbers added, lists
    /// concatenated (retention, a pass of the executor).
    Summed,
    /// A backup on every partition under one set id (the caller's, else one
    /// the gateway gives), the answers merged.
    BackupSet,
    /// Any partition: the answer is the same on each, or is one partition's
    /// view that names it.
    Same,
    /// On partition 0 (conditional starts, like signal starts).
    PartitionZero,
    /// Answered by whatever serves the request itself (health probes): the
    /// gateway does not forward it.
    Local,
}

/// What a caller must be allowed to do to call an operation (kinds, not
/// levels: a role grants the ones it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Nothing: open to anyone who reaches the listener (health probes).
    Open,
    /// Look: lists, details, statistics, metrics, decisions evaluated.
    Read,
    /// Do a worker's part: jobs and user tasks.
    Work,
    /// Start instances and send: messages published and correlated,
    /// signals broadcast.
    Start,
    /// Repair: tokens, parked messages, retried jobs.
    Operate,
    /// Change what runs: deployments, the command line.
    Admin,
}

impl Permission {
    /// Every permission, in order.
    pub const ALL: [Permission; 6] = [
        Permission::Open,
        Permission::Read,
        Permission::Work,
        Permission::Start,
        Permission::Operate,
        Permission::Admin,
    ];

    /// Its name in refusals and documents.
    pub fn name(self) -> &'static str {
        match self {
            Permission::Open => "open",
            Permission::Read => "read",
            Permission::Work => "work",
            Permission::Start => "start",
            Permission::Operate => "operate",
            Permission::Admin => "admin",
        }
    }
}

/// One operation of the API.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The handler's name, which is the OpenAPI `operationId`.
    pub name: &'static str,
    /// Its HTTP method.
    pub method: Method,
    /// Its path, with `{parameters}`.
    pub path: &'static str,
    /// Where it runs in a cluster.
    pub placement: Placement,
    /// What a caller needs.
    pub permission: Permission,
    /// Whether it changes nothing.
    pub reads_only: bool,
}

/// An entry of a family's list.
pub const fn op(
    name: &'static str,
    method: Method,
    path: &'static str,
    placement: Placement,
    permission: Permission,
) -> Operation {
    let reads_only = matches!(permission, Permission::Open | Permission::Read);
    Operation {
        name,
        method,
        path,
        placement,
        permission,
        reads_only,
    }
}

/// Every operation of the API, family by family.
pub fn operations() -> &'static [Operation] {
    static ALL: std::sync::OnceLock<Vec<Operation>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        crate::server::http::families()
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    })
}

/// The operation named `name` (its `operationId`).
pub fn named(name: &str) -> Option<&'static Operation> {
    operations().iter().find(|o| o.name == name)
}

/// The operation `method` `path` (without the query) calls, without its
/// parameters' values: what the token layer asks of every request, so it
/// allocates nothing (the segments of every path are split once).
pub fn operation_at(method: &Method, path: &str) -> Option<&'static Operation> {
    static SPLIT: std::sync::OnceLock<Vec<(&'static Operation, Vec<&'static str>, usize)>> =
        std::sync::OnceLock::new();
    let split = SPLIT.get_or_init(|| {
        operations()
            .iter()
            .map(|o| {
                let segments: Vec<&'static str> = o.path[1..].split('/').collect();
                let params = segments.iter().filter(|s| s.starts_with('{')).count();
                (o, segments, params)
            })
            .collect()
    });
    let given = path.strip_prefix('/').unwrap_or(path);
    let n = given.split('/').count();
    split
        .iter()
        .filter(|(o, segments, _)| o.method == method && segments.len() == n)
        .filter(|(_, segments, _)| {
            segments.iter().zip(given.split('/')).all(|(t, g)| {
                if t.starts_with('{') {
                    !g.is_empty()
                } else {
                    *t == g
                }
            })
        })
        // a literal segment wins over a parameter (`/jobs/acquire`)
        .min_by_key(|(_, _, params)| *params)
        .map(|(o, _, _)| *o)
}

/// The operation `method` `path` (without the query) calls, and the values
/// of its path parameters; `None` when the API has no such operation.
pub fn find(
    method: &Method,
    path: &str,
) -> Option<(&'static Operation, Vec<(&'static str, String)>)> {
    let given: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    // a literal segment wins over a parameter (`/jobs/acquire`)
    let matches = operations().iter().filter_map(|o| {
        if o.method != method {
            return None;
        }
        let template: Vec<&'static str> = o.path[1..].split('/').collect();
        if template.len() != given.len() {
            return None;
        }
        let mut params = Vec::new();
        for (t, g) in template.iter().zip(&given) {
            match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                Some(name) if !g.is_empty() => params.push((name, g.to_string())),
                Some(_) => return None,
                None if t == g => {}
                None => return None,
            }
        }
        Some((o, params))
    });
    matches.min_by_key(|(_, params)| params.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The token layer's allocation-free lookup finds what `find` finds,
    /// for every operation and for paths that are none.
    #[test]
    fn the_layers_lookup_is_find() {
        for o in operations() {
            let path: String = o
                .path
                .split('/')
                .map(|s| if s.starts_with('{') { "7" } else { s })
                .collect::<Vec<_>>()
                .join("/");
            let found = find(&o.method, &path).map(|(f, _)| f.name);
            assert_eq!(
                operation_at(&o.method, &path).map(|f| f.name),
                found,
                "{path}"
            );
            assert!(found.is_some(), "{path}");
        }
        for (m, p) in [
            (Method::GET, "/nothing"),
            (Method::POST, "/health/live"),
            (Method::GET, "/instances//x"),
            (Method::GET, ""),
        ] {
            assert_eq!(
                operation_at(&m, p).map(|o| o.name),
                find(&m, p).map(|(o, _)| o.name)
            );
        }
    }

    /// The catalogue and the OpenAPI document the router was built with
    /// list the same operations: each (method, path) once, under the same
    /// name.
    #[test]
    fn the_catalogue_is_what_is_served_and_documented() {
        let catalogue = operations();
        let mut seen = BTreeSet::new();
        for o in catalogue {
            assert!(
                seen.insert((o.method.to_string(), o.path)),
                "{} {} twice",
                o.method,
                o.path
            );
        }
        let doc = crate::server::http::api_doc();
        let mut documented = BTreeSet::new();
        for (path, item) in &doc.paths.paths {
            for (method, op) in [
                ("GET", &item.get),
                ("POST", &item.post),
                ("PUT", &item.put),
                ("DELETE", &item.delete),
                ("PATCH", &item.patch),
            ] {
                let Some(op) = op else { continue };
                let entry = catalogue
                    .iter()
                    .find(|o| o.method.as_str() == method && o.path == path)
                    .unwrap_or_else(|| panic!("{method} {path} is served but not catalogued"));
                assert_eq!(op.operation_id.as_deref(), Some(entry.name), "{path}");
                documented.insert((method.to_string(), path.clone()));
            }
        }
        for o in catalogue {
            assert!(
                documented.contains(&(o.method.to_string(), o.path.to_string())),
                "{} {} is catalogued but not served",
                o.method,
                o.path
            );
        }
        assert!(catalogue.len() >= 38, "{}", catalogue.len());
    }

    #[test]
    fn a_path_finds_its_operation_and_parameters() {
        let (o, params) = find(&Method::POST, "/instances/17/tokens/3/move").unwrap();
        assert_eq!(o.name, "move_token");
        assert_eq!(o.placement, Placement::ById("id"));
        assert_eq!(
            params,
            [("id", "17".to_string()), ("token", "3".to_string())]
        );
        assert!(find(&Method::GET, "/instances/17/tokens/3/move").is_none());
        assert!(find(&Method::GET, "/nothing").is_none());
        assert!(find(&Method::GET, "/instances//").is_none());
        let (o, _) = find(&Method::GET, "/instances").unwrap();
        assert!(o.reads_only);
        let (o, _) = find(&Method::POST, "/deployments").unwrap();
        assert_eq!(o.permission, Permission::Admin);
        assert!(!o.reads_only);
    }
}

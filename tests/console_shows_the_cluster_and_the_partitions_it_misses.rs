//! The console served by a gateway has a cluster view: every partition with
//! whether it is up and ready and what it holds, as `cluster status` says.
//! When a partition is down, the cluster view marks it, and a list gathered
//! without it says which partitions it lacks instead of looking complete. A
//! console served by one partition has no cluster view (headless chromium
//! over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::{Gateway, Server, http};
use serde_json::json;

#[test]
fn the_console_shows_the_cluster_and_the_partitions_it_misses() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut parts: Vec<Option<Server>> = (0..2)
        .map(|i| {
            Some(Server::launch(
                dirs[i].path(),
                &[
                    "--partitions".into(),
                    "2".into(),
                    "--partition".into(),
                    i.to_string(),
                ],
                &[],
            ))
        })
        .collect();
    let addrs: Vec<String> = parts
        .iter()
        .map(|p| p.as_ref().unwrap().addr.clone())
        .collect();
    let gw = Gateway::start(&addrs);
    for key in ["A-1", "A-2", "A-3", "A-4"] {
        let (status, v) = http(
            &gw.addr,
            "POST",
            "/instances",
            Some(&json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": key}})),
        );
        assert_eq!(status, 201, "{v}");
    }

    let b = Driver::start();
    b.open(&format!("http://{}/#view=cluster", gw.addr));
    b.wait_for_text("#cluster-summary", "2 partitions, all ready");
    b.find(r#"#partitions tr[data-partition="1"]"#);
    assert!(b.text("nav").contains("Cluster"), "{}", b.text("nav"));

    // partition 1 goes down: marked in the cluster view, named in the lists
    parts[1].take().unwrap().kill9();
    b.wait_for_text("#cluster-summary", "not ready: 1");
    b.wait_for_text(r#"#partitions tr[data-partition="1"]"#, "no");
    b.open(&format!("http://{}/#view=instances", gw.addr));
    b.wait_for_text("#problem", "partitions not reached: 1");
    b.find("#instance-list tbody tr");

    // a console served by one partition has no cluster view
    b.open(&format!("http://{}/#view=instances", addrs[0]));
    b.find("#instance-list tbody tr");
    let hidden = b.execute("return document.getElementById('cluster-link').hidden;");
    assert_eq!(hidden, json!(true));
    // what failed to load was the partition that is down, nothing else
    let errors: Vec<String> = b
        .errors()
        .into_iter()
        .filter(|e| !e.contains("503"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

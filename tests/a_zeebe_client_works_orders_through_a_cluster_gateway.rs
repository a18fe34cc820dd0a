//! pyzeebe 4.7.0 works the order process through `postfach gateway
//! --zeebe-listen` in front of two partitions, each serving Zeebe's gateway
//! protocol: the health check and the topology (both partitions, as two
//! brokers), a deployment to every partition, 100 orders started — each on
//! the partition that owns its correlation key, whichever partition the
//! gateway asked first —, the provider's completion published to the same
//! partition by its key (before the order waits: buffered, then
//! correlated), jobs activated from both partitions and completed on the
//! partition their key names. Every order is invoiced once and ends on the
//! partition that owns its key.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::{Gateway, Server, free_ports};
use postfach::partition::Partition;

const ORDERS: usize = 100;

#[test]
fn a_zeebe_client_works_orders_through_a_cluster_gateway() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let zeebe: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_ports(1)))
        .collect();
    let parts: Vec<Server> = (0..2)
        .map(|i| {
            Server::launch(
                dirs[i].path(),
                &[
                    "--partitions".into(),
                    "2".into(),
                    "--partition".into(),
                    i.to_string(),
                    "--zeebe-listen".into(),
                    zeebe[i].clone(),
                ],
                &[],
            )
        })
        .collect();
    let front = format!("127.0.0.1:{}", free_ports(1));
    let urls: Vec<String> = parts.iter().map(|p| p.addr.clone()).collect();
    let mut args = vec!["--zeebe-listen".to_string(), front.clone()];
    for (i, z) in zeebe.iter().enumerate() {
        args.push("--partition-zeebe".into());
        args.push(format!("{i}={z}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let gw = Gateway::start_with(&urls, &args);

    common::zeebe::pyzeebe_orders(&front, ORDERS, 2);

    // every order ended on the partition that owns its key
    let mut ended = 0;
    let owner = Partition::new(0, 2).unwrap();
    for (i, p) in parts.iter().enumerate() {
        let url = format!("http://{}", p.addr);
        let n = common::server::completed(&url, None, "auftrag-zeebe", 1);
        let done = common::server::cli_ok(
            &url,
            None,
            &[
                "instances",
                "--state",
                "completed",
                "--process",
                "auftrag-zeebe",
            ],
        );
        for inst in done["instances"].as_array().unwrap() {
            let view = common::server::cli_ok(
                &url,
                None,
                &["instance", inst["instance"].as_str().unwrap()],
            );
            let key = view["variables"]["auftragId"].as_str().unwrap().to_string();
            assert_eq!(
                owner.of_key(&key) as usize,
                i,
                "{key} ended on partition {i}"
            );
        }
        assert!(n > 0, "partition {i} took orders");
        ended += done["instances"].as_array().unwrap().len();
    }
    assert_eq!(ended, ORDERS, "every order ends");
    drop(gw);
    for p in parts {
        p.stop();
    }
}

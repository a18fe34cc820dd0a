//! The audit trail: a change a principal makes — a deploy, a repair, a
//! discard, a cleanup, a user task action — is applied together with an
//! entry naming who, when, which operation and on what; the process's own
//! traffic (starts, publishes) leaves none. Over HTTP the principal is the
//! caller's token (`GET /audit`, `postfach audit --who --since`), on a
//! server and through a gateway; in a host it is whoever
//! `postfach::audit::acting` names, and an instance's history names who
//! repaired it. Retention removes entries as old as completed instances.
use crate::common;
use common::Env;
use postfach::audit::{AuditFilter, acting};
use std::time::Duration;

#[tokio::test]
async fn a_hosts_principal_is_recorded_with_its_change_and_retention_forgets_it() {
    let env = Env::new();
    acting("anna".into(), env.deploy_reference()).await;
    // the process's own traffic: not audited, even inside `acting`
    let id = acting("anna".into(), env.start_order("A-1")).await;
    // outside `acting` a change names nobody and leaves no entry
    env.pf.cleanup(10).await.unwrap();
    let instance = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let token = instance.tokens[0].token;
    acting("ben".into(), env.pf.cancel_token(id, token))
        .await
        .unwrap();
    // a backup changes nothing but is a principal's act: recorded by name;
    // the schedule's (outside `acting`) leaves no entry
    let shelf = tempfile::tempdir().unwrap();
    let taken = acting("carla".into(), env.pf.backup(shelf.path()))
        .await
        .unwrap();
    env.pf.backup(shelf.path().join("plain")).await.unwrap();
    let all = env
        .pf
        .reader()
        .unwrap()
        .audit(&AuditFilter::default())
        .unwrap();
    let seen: Vec<(&str, &str)> = all
        .iter()
        .map(|e| (e.who.as_str(), e.operation.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("carla", "backup"),
            ("ben", "cancel-token"),
            ("anna", "deploy")
        ]
    );
    assert_eq!(all[0].target, format!("backup {}", taken.id));
    assert_eq!(all[1].target, format!("instance {id} token {token}"));
    // the instance's history names who repaired it
    let after = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert!(
        after
            .history
            .iter()
            .any(|h| h.event == "token_cancelled by ben"),
        "{:?}",
        after.history
    );
    assert_eq!(all[2].target, "file auftrag-ausfuehrung.bpmn");
    let bens = AuditFilter {
        who: Some("ben".into()),
        ..Default::default()
    };
    assert_eq!(env.pf.reader().unwrap().audit(&bens).unwrap().len(), 1);

    // past the retention period a cleanup removes them
    env.advance(Duration::from_millis(env.config.retention + 1));
    while env.pf.cleanup(100).await.unwrap().2 {}
    let left = env
        .pf
        .reader()
        .unwrap()
        .audit(&AuditFilter::default())
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[cfg(feature = "server")]
mod over_http {
    use super::common::server::{Gateway, Server};
    use serde_json::Value;

    const TOKENS: [(&str, &str, &str); 4] = [
        ("root", "t-root", "admin"),
        ("ops-1", "t-ops", "operator"),
        ("shop", "t-shop", "starter"),
        ("viewer", "t-view", "reader"),
    ];

    fn token(name: &str) -> &'static str {
        TOKENS.iter().find(|t| t.0 == name).unwrap().1
    }

    fn cli(url: &str, who: &str, args: &[&str]) -> Value {
        super::common::server::cli_ok(url, Some(token(who)), args)
    }

    fn config(dir: &std::path::Path) -> String {
        super::common::server::tokens_config(dir, &TOKENS)
    }

    fn trail(url: &str, args: &[&str]) -> Vec<(String, String, String)> {
        let mut all = vec!["audit"];
        all.extend_from_slice(args);
        let doc = cli(url, "viewer", &all);
        doc["audit"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["who"].as_str().unwrap().to_string(),
                    e["operation"].as_str().unwrap().to_string(),
                    e["target"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn the_trail_names_each_callers_token_on_a_server_and_through_a_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path());
        let shelf = dir.path().join("backups");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(&format!(
            "\n[backup]\nto = {:?}\n",
            shelf.display().to_string()
        ));
        std::fs::write(&cfg, text).unwrap();
        let srv = Server::launch(dir.path(), &["--config".into(), cfg.clone()], &[]);
        let url = format!("http://{}", srv.addr);
        cli(
            &url,
            "root",
            &[
                "deploy",
                "bpmn/auftrag-ausfuehrung.bpmn",
                "--correlation-key",
                "AuftragAbgeschlossen=auftragId",
            ],
        );
        cli(
            &url,
            "shop",
            &["start", "auftrag-ausfuehrung", "--var", "auftragId=A-1"],
        );
        cli(
            &url,
            "shop",
            &[
                "publish",
                "AuftragAbgeschlossen",
                "--key",
                "X-1",
                "--id",
                "m-x",
                "--ttl",
                "0s",
            ],
        );
        cli(&url, "ops-1", &["discard", "m-x", "--why", "no such order"]);
        cli(&url, "ops-1", &["cleanup"]);
        let all = trail(&url, &[]);
        let seen: Vec<(&str, &str)> = all
            .iter()
            .map(|(w, o, _)| (w.as_str(), o.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("ops-1", "cleanup"),
                ("ops-1", "discard"),
                ("root", "deploy")
            ],
            "starts and publishes leave no entry: {all:?}"
        );
        assert!(all[1].2.contains("m-x"), "{all:?}");
        assert_eq!(trail(&url, &["--who", "root"]).len(), 1);
        assert!(trail(&url, &["--since", "2999-01-01T00:00:00Z"]).is_empty());
        assert_eq!(trail(&url, &["--limit", "1"]).len(), 1);
        let (status, body) = srv.call("GET", "/audit?limit=0", None, Some(token("viewer")));
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("limit"), "{body}");

        // through a gateway: the partition records the caller's token
        let gw = Gateway::start_with(std::slice::from_ref(&srv.addr), &["--config", &cfg]);
        let gurl = format!("http://{}", gw.addr);
        cli(&gurl, "ops-1", &["cleanup"]);
        let via = trail(&gurl, &["--who", "ops-1"]);
        assert_eq!(via.len(), 3, "{via:?}");
        // a cluster's backup set: each partition records who took it
        let set = cli(&gurl, "root", &["backup", "--id", "nightly"]);
        let id = set["backups"][0]["id"].as_str().unwrap().to_string();
        let roots = trail(&gurl, &["--who", "root"]);
        assert_eq!(
            (roots[0].1.as_str(), roots[0].2.clone()),
            ("backup", format!("backup {id}")),
            "{roots:?}"
        );
        drop(gw);
        srv.stop();
    }
}

//! Orders waiting for their completion in a cluster of two partitions move
//! to a version with a check task after the catch, through the gateway: a
//! dry run says what would happen and changes nothing; the migration moves
//! every order on both partitions; then each completion correlates, each
//! order passes the new task and is invoiced once. A plan the new version
//! cannot take is refused per instance with its reason.
#![cfg(feature = "server")]
use crate::common;
use common::server::{Gateway, Server, cli_ok, completed};
use postfach::partition::Partition;
use serde_json::{Value, json};

const P: u64 = 2;

fn partition(dir: &std::path::Path, i: u64) -> Server {
    Server::launch(
        dir,
        &[
            "--partitions".into(),
            P.to_string(),
            "--partition".into(),
            i.to_string(),
        ],
        &[],
    )
}

/// The reference model with a check task (`pruefen`, a job on topic
/// `pruefen`) between the completion and the invoice.
fn with_check() -> String {
    let xml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bpmn/auftrag-ausfuehrung.bpmn"
    ))
    .unwrap();
    xml.replace(
        r#"<sequenceFlow id="zurRechnung" sourceRef="warteAufAbschluss" targetRef="rechnungStellen" />"#,
        r#"<sequenceFlow id="zurRechnung" sourceRef="warteAufAbschluss" targetRef="pruefen" />
        <serviceTask id="pruefen" name="Prüfen" flowable:type="external" flowable:topic="pruefen" />
        <sequenceFlow id="zurRechnung2" sourceRef="pruefen" targetRef="rechnungStellen" />"#,
    )
}

fn versions(gw: &Gateway) -> Vec<u64> {
    let (status, page) = gw.json(
        "GET",
        "/instances?process=auftrag-ausfuehrung&limit=1000",
        None,
    );
    assert_eq!(status, 200, "{page}");
    page["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["version"].as_u64().unwrap())
        .collect()
}

#[test]
fn waiting_orders_of_two_partitions_migrate_through_the_gateway_and_are_invoiced_once() {
    let dirs: Vec<_> = (0..P).map(|_| tempfile::tempdir().unwrap()).collect();
    let parts: Vec<Server> = (0..P)
        .map(|i| partition(dirs[i as usize].path(), i))
        .collect();
    let gw = Gateway::start(&parts.iter().map(|p| p.addr.clone()).collect::<Vec<_>>());
    let url = format!("http://{}", gw.addr);
    let keys: Vec<String> = (0..8).map(|n| format!("M-{n}")).collect();
    let on = |i: u64| {
        keys.iter()
            .filter(|k| u64::from(Partition::new(0, P).unwrap().of_key(k)) == i)
            .count()
    };
    assert!(on(0) > 0 && on(1) > 0, "both partitions hold orders");
    for k in &keys {
        let (status, v) = gw.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": k}})),
        );
        assert_eq!(status, 201, "{v}");
    }
    for (i, p) in parts.iter().enumerate() {
        p.hand_over(on(i as u64));
    }
    // version 2 everywhere
    let file = dirs[0].path().join("mit-pruefung.bpmn");
    std::fs::write(&file, with_check()).unwrap();
    let deployed = cli_ok(
        &url,
        None,
        &[
            "deploy",
            file.to_str().unwrap(),
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    assert!(deployed.to_string().contains("\"version\":2"), "{deployed}");

    let args = [
        "migrate",
        "auftrag-ausfuehrung",
        "--from-version",
        "1",
        "--to-version",
        "2",
        "--waiting-at",
        "warteAufAbschluss",
    ];
    let dry = cli_ok(&url, None, &[&args[..], &["--dry-run"]].concat());
    assert_eq!(dry["migrated"], json!(8), "{dry}");
    assert_eq!(dry["dry_run"], json!(true));
    assert_eq!(dry["missing"], json!([]), "{dry}");
    let moves: Vec<&Value> = dry["instances"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["tokens"].as_array().unwrap())
        .collect();
    assert!(
        moves
            .iter()
            .all(|t| t["from"] == "warteAufAbschluss" && t["carry"] == "kept"),
        "{dry}"
    );
    assert!(
        versions(&gw).iter().all(|&v| v == 1),
        "a dry run changed nothing"
    );

    let done = cli_ok(&url, None, &args);
    assert_eq!(
        (done["migrated"].clone(), done["refused"].clone()),
        (json!(8), json!([])),
        "{done}"
    );
    assert_eq!(versions(&gw), vec![2; 8]);
    // again: nothing of version 1 is left to move
    let again = cli_ok(&url, None, &args);
    assert_eq!(again["migrated"], json!(0), "{again}");

    for (n, k) in keys.iter().enumerate() {
        let (status, v) = gw.json(
            "POST",
            "/messages",
            Some(json!({"name": "AuftragAbgeschlossen", "key": k, "id": format!("done-{n}")})),
        );
        assert_eq!(
            (status, v["outcome"].clone()),
            (200, json!("correlated")),
            "{v}"
        );
    }
    // the new task's worker, through the gateway
    let mut checked = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while checked < keys.len() {
        assert!(
            std::time::Instant::now() < deadline,
            "{checked} checks done"
        );
        let (status, got) = gw.json(
            "POST",
            "/jobs/acquire",
            Some(json!({"topic": "pruefen", "worker": "pruefer", "max": 8, "lease_ms": 60_000})),
        );
        assert_eq!(status, 200, "{got}");
        for j in got["jobs"].as_array().unwrap() {
            let (status, body) = gw.json(
                "POST",
                &format!("/jobs/{}/complete", j["job"].as_str().unwrap()),
                Some(json!({"lease_token": j["lease_token"]})),
            );
            assert_eq!(status, 200, "{body}");
            checked += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(completed(&url, None, "auftrag-ausfuehrung", 8), 8);
    let invoiced: Vec<String> = dirs
        .iter()
        .flat_map(|d| {
            std::fs::read_to_string(d.path().join("invoices.tsv"))
                .unwrap_or_default()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let orders: std::collections::BTreeSet<&str> = invoiced
        .iter()
        .filter_map(|l| l.split('\t').nth(1))
        .collect();
    assert_eq!(
        (invoiced.len(), orders.len()),
        (8, 8),
        "one invoice per order: {invoiced:?}"
    );

    // version 3 lacks the catch: every order still waiting is refused, named
    let (status, v) = gw.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "M-late"}})),
    );
    assert_eq!(status, 201, "{v}");
    let owner = u64::from(Partition::new(0, P).unwrap().of_key("M-late"));
    parts[owner as usize].hand_over(1);
    let renamed = with_check().replace("warteAufAbschluss", "aufAbschlussWarten");
    std::fs::write(&file, renamed).unwrap();
    cli_ok(
        &url,
        None,
        &[
            "deploy",
            file.to_str().unwrap(),
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    let refused = cli_ok(
        &url,
        None,
        &[
            "migrate",
            "auftrag-ausfuehrung",
            "--from-version",
            "2",
            "--to-version",
            "3",
        ],
    );
    assert_eq!(refused["migrated"], json!(0), "{refused}");
    let reasons = refused["refused"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{refused}");
    assert!(
        reasons[0]["reason"]
            .as_str()
            .unwrap()
            .contains("'warteAufAbschluss' has no counterpart"),
        "{refused}"
    );
    let mapped = cli_ok(
        &url,
        None,
        &[
            "migrate",
            "auftrag-ausfuehrung",
            "--from-version",
            "2",
            "--to-version",
            "3",
            "--map",
            "warteAufAbschluss=aufAbschlussWarten",
        ],
    );
    assert_eq!(mapped["migrated"], json!(1), "{mapped}");
}

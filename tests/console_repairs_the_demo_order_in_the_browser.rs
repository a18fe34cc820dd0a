//! The README's walk-through in a real browser (headless chromium over
//! WebDriver): after `postfach demo --keep`, `postfach run` on that database
//! shows the order that waits with two tokens and its ambiguous completion;
//! the operator follows the message to its candidate instance, sees both
//! subscriptions, is refused a third token with the conflicting subscription
//! named, cancels the duplicate token, requeues the message, and the order is
//! invoiced once. An incident is retried from the incident list; a malformed
//! payload with `<script>` in it is shown as text and never runs; the browser
//! logs no error (nothing refused by the Content-Security-Policy either).
//! Each step leaves a screenshot under target/tmp/console-screenshots/.
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;
use serde_json::json;
use std::process::Command;

const ORDER: &str = "A-000000";
const COMPLETION: &str = "done-A-000000";
const SCRIPT: &str = "<script>document.body.dataset.pwned = 'yes'</script>";

/// `postfach demo --orders 20 --keep DIR/run.redb`, then a malformed
/// completion parked as the Pub/Sub ingress parks one.
async fn demo_database(dir: &std::path::Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .args(["demo", "--orders", "20", "--json", "--keep"])
        .arg(dir.join("run.redb"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["parked"]["ambiguous"], 1, "{summary}");

    let pf = postfach::Postfach::open(dir.join("run.redb")).unwrap();
    pf.park_malformed(postfach::Malformed {
        name: "AuftragAbgeschlossen".into(),
        message_id: "kaputt-1".into(),
        raw: format!("{{\"auftragId\": \"{SCRIPT}\"").into_bytes(),
        attributes: vec![("pubsub.delivery_attempt".into(), "3".into())],
        error: "not JSON: EOF while parsing an object".into(),
    })
    .await
    .unwrap();
    pf.close();
}

fn rows(b: &Driver, css: &str) -> u64 {
    b.execute(&format!(
        "return document.querySelectorAll({css:?}).length;"
    ))
    .as_u64()
    .unwrap()
}

fn wait_rows(b: &Driver, css: &str, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while rows(b, css) != n {
        assert!(
            std::time::Instant::now() < deadline,
            "{css}: {} rows, not {n}",
            rows(b, css)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_repairs_the_demo_s_ambiguous_order_and_it_is_invoiced_once() {
    let dir = tempfile::tempdir().unwrap();
    demo_database(dir.path()).await;
    let srv = Server::launch(dir.path(), &[], &[]);
    let b = Driver::start();
    let base = format!("http://{}/", srv.addr);
    // the demo starts its orders concurrently: which instance is A-000000 varies
    let (_, parked) = srv.json("GET", "/messages?parked=true", None);
    let inst = parked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["message_id"] == COMPLETION)
        .expect("the ambiguous completion is parked")["candidates"][0]
        .as_str()
        .unwrap()
        .to_string();

    // the overview: the order waits twice at the catch event, its completion is parked
    b.open(&base);
    b.find(r#".pf-badge.pf-waiting[data-element="warteAufAbschluss"][data-waiting="2"]"#);
    let row = b.text(r#"#elements tr[data-element="warteAufAbschluss"]"#);
    assert!(row.contains("1 ambiguous"), "{row}");
    b.screenshot("1-overview-after-the-demo");

    // the parked message names its candidate; the link opens the instance
    b.click(r#"nav a[data-view="messages"]"#);
    let parked = format!(r#"#parked tr[data-message="{COMPLETION}"][data-reason="ambiguous"]"#);
    b.find(&parked);
    b.click(&format!("{parked} a.instance-link"));
    b.wait_for_text("#instance-title", &format!("Instance {inst} "));
    wait_rows(&b, "#tokens tbody tr", 2);
    let subs = b.text("#subscriptions");
    assert_eq!(
        subs.matches(ORDER).count(),
        2,
        "both tokens wait for the same key:\n{subs}"
    );
    assert!(
        rows(&b, "#instance-diagram .djs-element.pf-current") >= 1,
        "the diagram marks where the tokens are"
    );
    assert!(rows(&b, "#instance-diagram .djs-element.pf-passed") >= 2);
    b.screenshot("2-the-instance-with-two-tokens");

    // a third token would wait for the same key: refused, the conflict named
    b.select("#add-token select.add-at", "auftragUebergeben");
    b.click("#add-token button.add-token");
    b.find(&format!(
        r#"#repair-outcome[data-conflict-instance="{inst}"]"#
    ));
    let refusal = b.text("#repair-outcome");
    assert!(refusal.contains("refused"), "{refusal}");
    assert!(
        refusal.contains(&format!("key {ORDER}")),
        "names the subscription: {refusal}"
    );
    b.screenshot("3-a-repair-refused-by-the-guard");
    wait_rows(&b, "#tokens tbody tr", 2);

    // cancel the duplicate token, then requeue the completion
    b.click("#tokens tbody tr:nth-child(2) button.cancel-token");
    wait_rows(&b, "#tokens tbody tr", 1);
    b.click(r#"nav a[data-view="messages"]"#);
    b.click(&format!(
        r#"#parked tr[data-message="{COMPLETION}"] button.requeue"#
    ));
    srv.wait_for(&format!("/instances/{inst}"), |v| v["state"] == "completed");
    b.open(&format!("{base}#view=instance&id={inst}"));
    b.wait_for_text("#instance-title", "completed");
    let messages = b.text("#instance-messages");
    assert!(
        messages.contains(COMPLETION) && messages.contains("correlated"),
        "{messages}"
    );
    b.screenshot("4-the-order-completed-after-the-repair");

    // a malformed payload with a script in it is text, not code
    b.click(r#"nav a[data-view="messages"]"#);
    let malformed = b.text(r#"#parked tr[data-message="kaputt-1"]"#);
    assert!(malformed.contains(SCRIPT), "{malformed}");
    assert!(
        malformed.contains("pubsub.delivery_attempt=3"),
        "{malformed}"
    );
    assert_eq!(
        b.execute("return document.body.dataset.pwned || null;"),
        json!(null),
        "the payload never ran"
    );
    assert_eq!(rows(&b, "#parked script"), 0);
    b.click(r#"#parked tr[data-message="kaputt-1"] details summary"#);
    let hex = b.text(r#"#parked tr[data-message="kaputt-1"] .raw-hex"#);
    assert!(hex.starts_with("7b 22 61"), "the bytes in hex: {hex}");
    b.screenshot("5-a-malformed-payload-shown-as-text");

    // an incident: the provider's worker gives up on a new order's hand-over
    let (_, started) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "A-9"}})),
    );
    let instance = started["instance"].as_str().unwrap().to_string();
    let job = loop {
        let (_, got) = srv.json(
            "POST",
            "/jobs/acquire",
            Some(json!({"topic": "auftragUebergeben", "worker": "provider", "max": 1, "lease_ms": 60_000})),
        );
        if let Some(j) = got["jobs"].as_array().and_then(|j| j.first()) {
            break j.clone();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let id = job["job"].as_str().unwrap();
    let (status, body) = srv.json(
        "POST",
        &format!("/jobs/{id}/fail"),
        Some(json!({"lease_token": job["lease_token"], "error": "provider unreachable", "retries": 0})),
    );
    assert_eq!(status, 200, "{body}");
    b.click(r#"nav a[data-view="jobs"]"#);
    let incident = format!(r#"#incident-jobs tr[data-job="{id}"]"#);
    let text = b.text(&incident);
    assert!(text.contains("provider unreachable"), "{text}");
    b.screenshot("6-an-incident-before-its-retry");
    b.click(&format!("{incident} button.retry"));
    srv.wait_for(&format!("/instances/{instance}"), |v| {
        v["state"] == "active"
    });
    wait_rows(&b, &incident, 0);

    // the browser reports every answer that is not 2xx; the guard's 409 is
    // the one the story asks for, anything else is an error of the page
    let errors: Vec<String> = b
        .errors()
        .into_iter()
        .filter(|e| !(e.contains(&format!("/instances/{inst}/tokens ")) && e.contains("409")))
        .collect();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());

    // invoiced once: the ledger of `postfach run` has the order exactly once
    let ledger =
        postfach::reference::InvoiceLedger::entries(&dir.path().join("invoices.tsv")).unwrap();
    assert_eq!(
        ledger.iter().filter(|(_, order)| order == ORDER).count(),
        1,
        "{ledger:?}"
    );
}

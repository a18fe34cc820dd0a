//! The console's batches view: a batch an operator ran shows its operation,
//! state and progress; picked, it lists the items it refused with their
//! reasons (headless chromium over WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::{Server, cli_ok};
use serde_json::json;

#[test]
fn the_console_shows_a_batch_and_the_items_it_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::launch(dir.path(), &[], &[]);
    let url = format!("http://{}", srv.addr);
    for k in 0..3 {
        let (status, v) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": format!("C-{k}")}})),
        );
        assert_eq!(status, 201, "{v}");
    }
    // one order reaches the catch; the other two still wait for the hand-over
    srv.hand_over(1);
    let done = cli_ok(
        &url,
        None,
        &[
            "batch",
            "move-token",
            "--from",
            "warteAufAbschluss",
            "--to",
            "rechnungStellen",
            "--process",
            "auftrag-ausfuehrung",
        ],
    );
    assert_eq!(
        (&done["done"], &done["refused"]),
        (&json!(1), &json!(2)),
        "{done}"
    );
    let id = done["batch"].as_str().unwrap();

    let b = Driver::start();
    b.open(&format!("{url}/#view=batches"));
    let rows = b.wait_for_text("#batch-list tbody", "move-token");
    assert!(rows.contains("done") && rows.contains("3 of 3"), "{rows}");
    b.open(&format!("{url}/#view=batches&batch={id}"));
    let refused = b.wait_for_text("#batch-refused tbody", "0 tokens at 'warteAufAbschluss'");
    assert_eq!(refused.matches("0 tokens at").count(), 2, "{refused}");
    let title = b.text("#batch-title");
    assert!(title.contains("1 done, 2 refused of 3"), "{title}");
    srv.stop();
}

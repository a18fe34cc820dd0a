//! The console's audit view: with named tokens, an operator's discard and
//! cleanup appear with the operator's name, the operation and what it acted
//! on, newest first — read with a reader's token (headless chromium over
//! WebDriver).
#![cfg(feature = "server")]
use crate::common;

use common::browser::Driver;
use common::server::Server;

const TOKENS: [(&str, &str, &str); 3] = [
    ("ops-1", "t-ops", "operator"),
    ("root", "t-root", "admin"),
    ("viewer", "t-view", "reader"),
];

fn cli(url: &str, token: &str, args: &[&str]) {
    common::server::cli_ok(url, Some(token), args);
}

#[test]
fn the_console_lists_who_changed_what() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::server::tokens_config(dir.path(), &TOKENS);
    let srv = Server::launch(dir.path(), &["--config".into(), cfg], &[]);
    let url = format!("http://{}", srv.addr);
    cli(
        &url,
        "t-root",
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
    cli(&url, "t-ops", &["discard", "m-x", "--why", "no such order"]);
    cli(&url, "t-ops", &["cleanup"]);

    let b = Driver::start();
    b.open(&format!("{url}/#view=audit"));
    b.execute("sessionStorage.setItem('postfach-token', 't-view'); location.reload();");
    let rows = b.wait_for_text("#audit-list tbody", "discard");
    assert!(rows.contains("ops-1") && rows.contains("m-x"), "{rows}");
    let first = b.text("#audit-list tbody tr:first-child");
    assert!(first.contains("cleanup"), "newest first: {first}");
    srv.stop();
}

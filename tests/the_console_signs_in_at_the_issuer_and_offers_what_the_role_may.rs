//! The console signs in at the OpenID Connect issuer — Keycloak, the
//! authorization code flow with PKCE, walked in headless chromium — and
//! offers each person only the actions their roles grant: a reader sees the
//! parked message, the instance and the task but no button that changes
//! them; an operator repairs and discards (the audit trail names them); a
//! worker claims the task as themself; a starter is told the roles grant no
//! view; an admin is offered everything. Signing out ends the session at the
//! issuer: the next sign-in asks for the password again.
#![cfg(feature = "server")]
use crate::common;
use common::browser::Driver;
use common::keycloak::Keycloak;
use common::server::Server;
use serde_json::Value;

fn admin(url: &str, args: &[&str]) -> Value {
    common::server::cli_ok(url, Some("the-admin"), args)
}

fn count(b: &Driver, css: &str) -> u64 {
    b.execute(&format!("return document.querySelectorAll({css:?}).length"))
        .as_u64()
        .unwrap()
}

/// Signs `user` in at Keycloak from the console's view `view`.
fn sign_in(b: &Driver, url: &str, view: &str, user: &str) {
    b.open(&format!("{url}/#view={view}"));
    b.click("#sign-in");
    b.type_into("#username", user);
    b.type_into("#password", &format!("{user}-pw"));
    b.click("#kc-login");
    b.wait_for_text("#who-am-i", user);
}

/// The views of the parked message, the instance and the task have
/// rendered (their rows are there).
fn rendered(b: &Driver, url: &str, instance: &str) {
    b.open(&format!("{url}/#view=messages"));
    b.wait_for_text("#parked tbody", "m-keep");
    b.open(&format!("{url}/#view=instance&id={instance}"));
    b.wait_for_text("#tokens tbody", "auftragUebergeben");
    b.open(&format!("{url}/#view=tasks"));
    b.wait_for_text("#task-list tbody", "freigeben");
}

#[test]
fn the_console_signs_in_at_the_issuer_and_offers_what_the_role_may() {
    let port = common::server::free_ports(1);
    let kc = Keycloak::start_for_console(port);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("postfach.toml");
    std::fs::write(
        &cfg,
        format!(
            "[auth]\nissuer = {:?}\nconsole_client = \"postfach-console\"\n",
            kc.issuer()
        ),
    )
    .unwrap();
    let admin_file = dir.path().join("admin-token");
    std::fs::write(&admin_file, "the-admin").unwrap();
    let srv = Server::launch(
        dir.path(),
        &[
            "--config".into(),
            cfg.display().to_string(),
            "--token-file".into(),
            admin_file.display().to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
        ],
        &[],
    );
    let url = format!("http://127.0.0.1:{port}");
    let model = dir.path().join("freigabe.bpmn");
    std::fs::write(&model, common::keycloak::FREIGABE).unwrap();
    admin(&url, &["deploy", model.to_str().unwrap()]);
    admin(&url, &["start", "einkauf-freigabe"]);
    let started = admin(
        &url,
        &["start", "auftrag-ausfuehrung", "--var", "auftragId=A-1"],
    );
    let instance = started["instance"]
        .to_string()
        .trim_matches('"')
        .to_string();
    for id in ["m-park", "m-keep"] {
        let publish = [
            "publish",
            "AuftragAbgeschlossen",
            "--key",
            "nobody",
            "--ttl",
            "0s",
        ];
        admin(&url, &[&publish[..], &["--id", id]].concat());
    }
    // a reader: everything to see, nothing to change
    let b = Driver::start();
    sign_in(&b, &url, "messages", "rita");
    assert_eq!(b.text("#who-am-i"), "rita (reader)");
    rendered(&b, &url, &instance);
    for button in [
        "button.discard",
        "button.requeue",
        "button.cancel-token",
        "button.claim",
    ] {
        assert_eq!(count(&b, button), 0, "a reader is offered {button}");
    }
    drop(b);

    // an operator: repairs and discards, no task of a worker's
    let b = Driver::start();
    sign_in(&b, &url, "messages", "otto");
    rendered(&b, &url, &instance);
    assert_eq!(
        count(&b, "button.claim"),
        0,
        "an operator is offered a claim"
    );
    b.open(&format!("{url}/#view=instance&id={instance}"));
    b.wait_for_text("#tokens tbody", "auftragUebergeben");
    assert!(
        count(&b, "button.cancel-token") > 0,
        "no repair for an operator"
    );
    b.open(&format!("{url}/#view=messages"));
    b.type_into("#parked tr[data-message=m-park] input.why", "no such order");
    b.click("#parked tr[data-message=m-park] button.discard");
    b.wait_for_text("#done", "discard");
    let audit = admin(&url, &["audit", "--who", "otto"]);
    assert!(audit.to_string().contains("m-park"), "{audit}");
    drop(b);

    // a worker who reads: claims the task as themself, repairs nothing
    let b = Driver::start();
    sign_in(&b, &url, "tasks", "tom");
    rendered(&b, &url, &instance);
    assert_eq!(
        count(&b, "button.cancel-token"),
        0,
        "a worker is offered a repair"
    );
    b.open(&format!("{url}/#view=tasks"));
    b.click("#task-list button.claim");
    b.wait_for_text("#task-list tbody", "tom");
    let tasks = admin(&url, &["tasks"]);
    assert!(tasks.to_string().contains("\"tom\""), "{tasks}");

    // signing out ends the session at the issuer too
    b.click("#sign-out");
    b.find("#sign-in");
    b.wait_for_text("#problem", "sign in");
    b.click("#sign-in");
    b.find("#password");
    drop(b);

    // a starter sends, but sees nothing: the page says so rather than
    // failing view by view
    let b = Driver::start();
    b.open(&format!("{url}/#view=messages"));
    b.click("#sign-in");
    b.type_into("#username", "sara");
    b.type_into("#password", "sara-pw");
    b.click("#kc-login");
    b.wait_for_text("#problem", "grant no view");
    assert_eq!(b.text("#who-am-i"), "sara (starter)");
    drop(b);

    // an admin is offered everything
    let b = Driver::start();
    sign_in(&b, &url, "messages", "ada");
    rendered(&b, &url, &instance);
    b.find("#task-list button.unclaim"); // tom holds it; an admin may give it back
    b.open(&format!("{url}/#view=instance&id={instance}"));
    b.find("#tokens button.cancel-token");
    b.open(&format!("{url}/#view=messages"));
    b.find("#parked button.discard");
    drop(b);
    srv.stop();
}

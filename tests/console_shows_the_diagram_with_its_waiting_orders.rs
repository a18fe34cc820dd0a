//! The operations console in a real browser (headless chromium): `postfach run`
//! serves it at `/`; it draws the deployed model with bpmn-js (the bpmn.io
//! watermark visible, as its licence asks) and puts on each element what waits
//! there, from the statistics of the version; a model without a diagram gets
//! the same figures as a list. Assets come from the binary; the API keeps its
//! token while the static page does not need one. An operator requeues and
//! discards parked messages from the page (clicked through WebDriver); the
//! discard records the reason and who.
#![cfg(feature = "server")]
use crate::common;

use common::browser;
use common::server::Server;
use serde_json::json;

/// The reference process as a modeler saves it, with its diagram (version 2).
const WITH_DI: &str = include_str!("fixtures/auftrag-mit-diagramm.bpmn");

const NO_DI: &str = bpmn!(
    r#"
  <message id="m" name="Freigabe"/>
  <process id="ohne-diagramm" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="warteAufFreigabe"/>
    <receiveTask id="warteAufFreigabe" messageRef="m"/>
    <sequenceFlow id="f1" sourceRef="warteAufFreigabe" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[test]
fn the_console_draws_the_model_with_what_waits_on_each_element() {
    let srv = Server::start("127.0.0.1:0", None);
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "auftrag-mit-diagramm.bpmn", "xml": WITH_DI,
                    "correlation_keys": {"AuftragAbgeschlossen": "auftragId"}})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["deployed"][0]["version"], 2, "{body}");
    for a in ["4711", "4712"] {
        let (status, _) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": a}})),
        );
        assert_eq!(status, 201);
    }
    srv.hand_over(2);
    srv.wait_for("/instances?waiting_at=warteAufAbschluss", |v| {
        v["instances"].as_array().is_some_and(|i| i.len() == 2)
    });
    // a late completion of an order nobody has: buffered at the catch point
    let (status, _) = srv.json(
        "POST",
        "/messages",
        Some(json!({"name": "AuftragAbgeschlossen", "key": "9999", "id": "early-9999"})),
    );
    assert_eq!(status, 200);

    let page = browser::dom(&format!("http://{}/", srv.addr), 20_000);
    assert!(
        page.contains(r#"data-loaded="true""#),
        "the page loaded its data:\n{page}"
    );
    // the diagram: bpmn-js drew the model, with its watermark
    assert!(
        page.contains(r#"data-element-id="warteAufAbschluss""#),
        "diagram drawn:\n{page}"
    );
    assert!(
        page.contains("bjs-powered-by"),
        "the bpmn.io watermark stays"
    );
    // the overlay on the catch event: two waiting orders
    assert!(
        page.contains(r#"class="pf-badge pf-waiting""#)
            && page.contains(r#"data-element="warteAufAbschluss" data-waiting="2""#),
        "overlay with 2 waiting:\n{page}"
    );
    assert!(
        page.contains("✉ 1 buffered · 0 parked"),
        "the buffered completion shows"
    );
    // the same figures as a table
    assert!(page.contains(r#"<tr data-element="warteAufAbschluss" data-waiting="2""#));

    // the parked messages, with their reason, for an operator
    let (status, parked) = srv.json(
        "POST",
        "/messages",
        Some(json!({"name": "Unbekannt", "key": "7", "id": "u-7"})),
    );
    assert_eq!(
        (status, parked["outcome"].as_str()),
        (200, Some("parked")),
        "{parked}"
    );
    let page = browser::dom(&format!("http://{}/#view=messages", srv.addr), 20_000);
    assert!(page.contains(r#"data-loaded="true""#), "{page}");
    assert!(
        page.contains(&format!(
            r#"<tr data-message="u-7" data-reason="{}""#,
            parked["reason"].as_str().unwrap()
        )),
        "the parked message is listed with its reason:\n{page}"
    );
    assert!(
        page.contains(r#"id="overview" hidden"#),
        "only the messages view shows"
    );

    // a model without diagram interchange: the list, same figures
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "ohne.bpmn", "xml": NO_DI, "correlation_keys": {"Freigabe": "antragId"}})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, _) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "ohne-diagramm", "variables": {"antragId": "F-1"}})),
    );
    assert_eq!(status, 201);
    let page = browser::dom(
        &format!("http://{}/#process=ohne-diagramm", srv.addr),
        20_000,
    );
    assert!(page.contains(r#"data-loaded="true""#), "{page}");
    assert!(
        page.contains(r#"<tr data-element="warteAufFreigabe" data-waiting="1""#),
        "listed with its waiting token:\n{page}"
    );
    assert!(
        !page.contains(r#"id="no-diagram" class="muted" hidden"#),
        "says why there is no diagram"
    );
    assert!(srv.stop().success());
}

#[test]
fn the_page_needs_no_token_but_its_data_does() {
    let srv = Server::start("127.0.0.1:0", Some("s3cret"));
    assert_eq!(srv.call("GET", "/", None, None).0, 200);
    assert_eq!(srv.call("GET", "/console/app.js", None, None).0, 200);
    assert_eq!(
        srv.call("GET", "/console/vendor/LICENSE-bpmn-js.txt", None, None)
            .0,
        200
    );
    assert_eq!(srv.call("GET", "/console/../Cargo.toml", None, None).0, 404);
    assert_eq!(srv.call("GET", "/processes", None, None).0, 401);
    assert_eq!(srv.call("GET", "/processes", None, Some("s3cret")).0, 200);
    // without the token the page asks for it instead of showing nothing
    let page = browser::dom(&format!("http://{}/", srv.addr), 10_000);
    assert!(page.contains("this server wants a bearer token"), "{page}");
    assert!(srv.stop().success());
}

#[test]
fn an_operator_requeues_and_discards_parked_messages_in_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::launch(dir.path(), &[], &[]);
    for (name, id) in [("Unbekannt", "u-1"), ("AuchUnbekannt", "u-2")] {
        let (_, d) = srv.json(
            "POST",
            "/messages",
            Some(json!({"name": name, "key": "7", "id": id})),
        );
        assert_eq!(d["outcome"], "parked", "{d}");
    }
    let browser = browser::Driver::start();
    browser.open(&format!("http://{}/#view=messages", srv.addr));

    // a discard without a reason and who is refused in the page, nothing sent
    browser.click(r#"tr[data-message="u-2"] button.discard"#);
    browser.find(r#"#problem:not([hidden])"#);
    let (_, open) = srv.json("GET", "/messages?parked=true", None);
    assert_eq!(open["messages"].as_array().unwrap().len(), 2);

    browser.type_into("#who", "anna");
    browser.type_into(
        r#"tr[data-message="u-2"] input.why"#,
        "Testnachricht des Dienstleisters",
    );
    browser.click(r#"tr[data-message="u-2"] button.discard"#);
    srv.wait_for("/messages?parked=true", |v| {
        v["messages"].as_array().is_some_and(|m| m.len() == 1)
    });
    // the requeue is evaluated again: still nobody takes an unknown message, so it parks again
    browser.click(r#"tr[data-message="u-1"] button.requeue"#);
    srv.wait_for("/messages?parked=true", |v| {
        v["messages"][0]["requeues"].as_u64() == Some(1)
    });
    drop(browser);
    assert!(srv.stop().success());
    // who and why are recorded on the discarded message
    let pf = postfach::Postfach::open_read_only(dir.path().join("run.redb"), Default::default())
        .unwrap();
    let m = pf.reader().unwrap().message("u-2").unwrap();
    assert_eq!(m[0].state, "discarded");
    assert_eq!(
        m[0].note.as_deref(),
        Some("discarded by anna: Testnachricht des Dienstleisters")
    );
}

#[test]
fn parked_messages_beyond_one_page_are_reached_with_next_page() {
    let srv = Server::start("127.0.0.1:0", None);
    for i in 0..101 {
        let (_, d) = srv.json(
            "POST",
            "/messages",
            Some(json!({"name": "Unbekannt", "key": "7", "id": format!("u-{i:03}")})),
        );
        assert_eq!(d["outcome"], "parked", "{d}");
    }
    let browser = browser::Driver::start();
    browser.open(&format!("http://{}/#view=messages", srv.addr));
    browser.find(r#"#parked tr[data-message="u-099"]"#);
    assert_eq!(
        browser.execute("return document.querySelectorAll('#parked tbody tr').length;"),
        json!(100)
    );
    browser.click("#parked-next:not([hidden])");
    browser.find(r#"#parked tr[data-message="u-100"]"#);
    browser.click("#parked-first:not([hidden])");
    browser.find(r#"#parked tr[data-message="u-000"]"#);
    drop(browser);
    assert!(srv.stop().success());
}

#[test]
fn badges_cover_no_shape_no_label_and_no_other_badge() {
    let srv = Server::start("127.0.0.1:0", None);
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"file": "auftrag-mit-diagramm.bpmn", "xml": WITH_DI,
                    "correlation_keys": {"AuftragAbgeschlossen": "auftragId"}})),
    );
    assert_eq!(status, 200, "{body}");
    for a in ["4711", "4712", "4713"] {
        let (status, _) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": a}})),
        );
        assert_eq!(status, 201);
    }
    // two wait at the catch event, one hand-over stays a ready job
    srv.hand_over(2);
    let (status, _) = srv.json(
        "POST",
        "/messages",
        Some(json!({"name": "AuftragAbgeschlossen", "key": "9999", "id": "early-9999"})),
    );
    assert_eq!(status, 200);

    let b = browser::Driver::start();
    b.open(&format!("http://{}/", srv.addr));
    b.find(r#".pf-badge.pf-waiting[data-element="warteAufAbschluss"]"#);
    b.find(".pf-badge.pf-messages");
    b.find(r#"[data-element-id="warteAufAbschluss_label"]"#);
    let found = b.execute(
        r#"
        const box = (el) => { const r = el.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; };
        const badges = [...document.querySelectorAll('#diagram .pf-badge')].map((el) => ({ what: el.className + ' ' + el.textContent, ...box(el) }));
        const things = [...document.querySelectorAll('#diagram .djs-element.djs-shape')]
          .map((g) => ({ what: g.dataset.elementId, ...box(g.querySelector('.djs-visual')) }))
          .filter((t) => t.w > 0 && t.h > 0);
        // the lines of the flows, segment by segment, from their drawn path
        for (const g of document.querySelectorAll('#diagram .djs-element.djs-connection')) {
          const path = g.querySelector('.djs-visual path');
          const n = path.getTotalLength();
          const m = path.getScreenCTM();
          for (let l = 0; l <= n; l += 4) {
            const p = path.getPointAtLength(l).matrixTransform(m);
            things.push({ what: g.dataset.elementId, x: p.x - 0.5, y: p.y - 0.5, w: 1, h: 1 });
          }
        }
        const hit = (a, b) => a.x + 1 < b.x + b.w && b.x + 1 < a.x + a.w && a.y + 1 < b.y + b.h && b.y + 1 < a.y + a.h;
        const problems = [];
        badges.forEach((a, i) => {
          for (const t of things) if (hit(a, t)) problems.push(`${a.what} covers ${t.what}`);
          badges.slice(i + 1).forEach((o) => { if (hit(a, o)) problems.push(`${a.what} covers ${o.what}`); });
        });
        return { badges: badges.length, labels: things.filter((t) => t.what.endsWith('_label')).length, problems };
        "#,
    );
    assert!(
        found["badges"].as_u64().unwrap() >= 3,
        "waiting, buffered and ready badges: {found}"
    );
    assert!(found["labels"].as_u64().unwrap() >= 3, "{found}");
    assert_eq!(found["problems"], json!([]), "{found}");
    b.screenshot("overview-badges");
    let errors = b.errors();
    assert!(errors.is_empty(), "the browser logged errors: {errors:#?}");
    drop(b);
    assert!(srv.stop().success());
}

//! `postfach run` serves the operations over HTTP: a real server on an ephemeral
//! port, driven with plain HTTP/1.1. Covers the reference scenario, 400 on bad
//! input naming the field, 404, 409 on a refused repair, 401 without the token on
//! a non-loopback bind, metrics that can be scraped, and a clean stop on SIGTERM.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use crate::common;
use common::server::Server;
use serde_json::json;
use std::process::Command;

#[test]
fn the_reference_scenario_over_http_with_metrics() {
    let srv = Server::start("127.0.0.1:0", None);
    assert_eq!(srv.json("GET", "/health/ready", None).0, 200);

    let (status, started) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "4711"}})),
    );
    assert_eq!(status, 201);
    let id = started["instance"].as_str().unwrap().to_string();
    let (status, d) = srv.json(
        "POST",
        "/messages",
        Some(json!({"name": "AuftragAbgeschlossen", "key": "4711", "id": "evt-1"})),
    );
    assert_eq!(status, 200);
    assert!(
        d["outcome"] == "buffered" || d["outcome"] == "correlated",
        "{d}"
    );
    // the provider's worker takes the hand-over; the executor correlates and invoices
    srv.hand_over(1);
    srv.wait_for(&format!("/instances/{id}"), |v| v["state"] == "completed");

    // a second order waits at the catch event; a repair that would duplicate it is refused
    let (_, other) = srv.json(
        "POST",
        "/instances",
        Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "4712"}})),
    );
    let other = other["instance"].as_str().unwrap().to_string();
    srv.hand_over(1);
    srv.wait_for(&format!("/instances/{other}"), |v| {
        v["waiting_at"] == json!(["warteAufAbschluss"])
    });
    let (status, refused) = srv.json(
        "POST",
        &format!("/instances/{other}/tokens"),
        Some(json!({"element": "auftragUebergeben"})),
    );
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("a second token")
    );
    assert_eq!(
        refused["conflict"],
        json!({"message": "AuftragAbgeschlossen", "key": "4712", "instance": other,
               "element": "warteAufAbschluss"}),
        "the subscription the repair would duplicate"
    );

    // a late completion is parked and visible
    let (_, late) = srv.json(
        "POST",
        "/messages",
        Some(json!({"name": "AuftragAbgeschlossen", "key": "4711", "id": "evt-2"})),
    );
    assert_eq!(
        (late["outcome"].as_str(), late["reason"].as_str()),
        (Some("parked"), Some("late"))
    );
    let (_, parked) = srv.json("GET", "/messages?parked=true&reason=late", None);
    assert_eq!(parked["messages"][0]["message_id"], "evt-2");
    let (_, rejected) = srv.json(
        "POST",
        "/messages/correlate",
        Some(json!({"name": "AuftragAbgeschlossen", "key": "nobody"})),
    );
    assert_eq!(rejected["reason"], "no_subscription");

    // the statistics of the version: what waits where, and the parked late one
    let (status, st) = srv.json("GET", "/processes/auftrag-ausfuehrung/statistics", None);
    assert_eq!(status, 200, "{st}");
    let wait = st["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["element"] == "warteAufAbschluss")
        .unwrap();
    assert_eq!(wait["waiting"], 1, "{wait}");
    assert_eq!(wait["parked"]["late"], 1, "{wait}");
    assert_eq!(st["version"], 1);
    let (status, missing) = srv.json(
        "GET",
        "/processes/auftrag-ausfuehrung/statistics?version=9",
        None,
    );
    assert_eq!(status, 404);
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .contains("no deployed version 9")
    );
    assert_eq!(
        srv.json("GET", "/processes/gibt-es-nicht/statistics", None)
            .0,
        404
    );

    let (status, metrics) = srv.call("GET", "/metrics", None, None);
    assert_eq!(status, 200);
    let sample = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing in\n{metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        sample("postfach_instances_waiting{element=\"warteAufAbschluss\"}"),
        1.0
    );
    assert!(sample("postfach_oldest_wait_age_seconds{element=\"warteAufAbschluss\"}") >= 0.0);
    assert_eq!(sample("postfach_messages_parked{reason=\"late\"}"), 1.0);
    assert_eq!(
        sample("postfach_messages_total{outcome=\"parked\",reason=\"late\"}"),
        1.0
    );
    assert_eq!(sample("postfach_incidents"), 0.0);
    assert!(
        sample("postfach_commit_batch_size_count") >= 4.0,
        "every commit is measured"
    );
    assert!(sample("postfach_commit_latency_seconds_bucket{le=\"+Inf\"}") >= 4.0);
    assert_eq!(
        sample("postfach_job_attempts_total{result=\"completed\"}"),
        3.0,
        "two hand-overs by the provider's worker, one invoice"
    );

    assert!(srv.stop().success(), "SIGTERM stops the server cleanly");
}

#[test]
fn bad_input_is_400_naming_the_field_and_unknown_things_are_404() {
    let srv = Server::start("127.0.0.1:0", None);
    let (status, body) = srv.json(
        "POST",
        "/instances",
        Some(json!({"proces": "auftrag-ausfuehrung"})),
    );
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("proces"), "{body}");
    let (status, body) = srv.call("POST", "/messages", Some(&json!("not an object")), None);
    assert_eq!(status, 400, "{body}");
    assert_eq!(srv.json("GET", "/instances/999", None).0, 404);
    assert_eq!(
        srv.json("POST", "/instances", Some(json!({"process": "nope"})))
            .0,
        404
    );
    let (status, body) = srv.json("GET", "/messages?reason=whatever", None);
    assert_eq!(status, 400, "{body}");
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("order=sideways", "order"),
        ("variable=auftragId", "variable"),
        ("started_from=yesterday", "started_from"),
        ("state=sleeping", "state"),
        ("after=x", "after"),
    ] {
        let (status, body) = srv.json("GET", &format!("/instances?{query}"), None);
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap_or("").contains(field),
            "{query}: {body}"
        );
    }
    let (status, body) = srv.json("GET", "/tasks", None);
    assert_eq!((status, &body["tasks"]), (200, &json!([])), "{body}");
    let (status, body) = srv.json("GET", "/tasks?due_before=tomorrow", None);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("due_before"),
        "{body}"
    );
    let (status, body) = srv.json("POST", "/tasks/999/claim", Some(json!({"user": "anna"})));
    assert_eq!(status, 404, "{body}");
    let (status, body) = srv.json("POST", "/tasks/999/shred", Some(json!({"user": "anna"})));
    assert_eq!(status, 400, "{body}");
    // a model without its correlation key: the answer says how this API gives one
    let xml = include_str!("../bpmn/auftrag-ausfuehrung.bpmn");
    let (status, body) = srv.json("POST", "/deployments", Some(json!({"xml": xml})));
    assert_eq!(status, 400, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains(r#""correlation_keys": {"AuftragAbgeschlossen": "VARIABLE"}"#),
        "{error}"
    );
    // what will not run as written comes back as warnings; strict refuses it
    let java = xml.replace(
        r#"<serviceTask id="rechnungStellen""#,
        r#"<serviceTask id="rechnungStellen" flowable:class="com.acme.Invoice""#,
    );
    let keys = json!({"AuftragAbgeschlossen": "auftragId"});
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"xml": java, "correlation_keys": keys, "strict": true})),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("rechnungStellen"),
        "{body}"
    );
    let (status, body) = srv.json(
        "POST",
        "/deployments",
        Some(json!({"xml": java, "correlation_keys": keys})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["warnings"][0]["element"], "rechnungStellen", "{body}");
    srv.stop();
}

#[test]
fn the_instance_list_pages_by_cursor_and_filters_by_key() {
    let srv = Server::start("127.0.0.1:0", None);
    let mut started = Vec::new();
    for key in ["k1", "k2", "k3"] {
        let (_, v) = srv.json(
            "POST",
            "/instances",
            Some(json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": key}})),
        );
        started.push(v["instance"].as_str().unwrap().to_string());
    }
    let (status, first) = srv.json("GET", "/instances?limit=2", None);
    assert_eq!(status, 200, "{first}");
    let listed: Vec<&str> = first["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["instance"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [started[2].as_str(), started[1].as_str()],
        "newest first"
    );
    let next = first["next"].as_str().expect("a next cursor");
    let (_, second) = srv.json("GET", &format!("/instances?limit=2&after={next}"), None);
    assert_eq!(second["instances"][0]["instance"], started[0].as_str());
    assert!(second["next"].is_null(), "{second}");
    let (_, by_key) = srv.json("GET", "/instances?key=k2", None);
    assert_eq!(by_key["instances"].as_array().unwrap().len(), 1, "{by_key}");
    assert_eq!(by_key["instances"][0]["instance"], started[1].as_str());
    let (_, by_var) = srv.json(
        "GET",
        "/instances?variable=auftragId&value=k3&order=oldest",
        None,
    );
    assert_eq!(by_var["instances"][0]["instance"], started[2].as_str());
    // the jobs list pages by cursor too
    srv.wait_for("/jobs", |v| {
        v["jobs"]
            .as_array()
            .is_some_and(|j| j.len() == 3 && j.iter().all(|j| j["kind"] == "task"))
    });
    let (_, jobs) = srv.json("GET", "/jobs?limit=2", None);
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 2, "{jobs}");
    let next = jobs["next"].as_str().expect("a next cursor");
    let (_, rest) = srv.json("GET", &format!("/jobs?limit=2&after={next}"), None);
    assert_eq!(rest["jobs"].as_array().unwrap().len(), 1, "{rest}");
    assert!(rest["next"].is_null());
    assert_eq!(srv.json("GET", "/jobs?limit=0", None).0, 400);
    srv.stop();
}

#[test]
fn a_non_loopback_bind_needs_a_token_and_requests_without_it_get_401() {
    let out = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--db")
        .arg(tempfile::tempdir().unwrap().path().join("x.redb"))
        .args([
            "run",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
            "--listen",
            "0.0.0.0:0",
        ])
        .env_remove("POSTFACH_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("token"));

    let srv = Server::start("0.0.0.0:0", Some("s3cret"));
    assert_eq!(srv.call("GET", "/jobs", None, None).0, 401);
    assert_eq!(srv.call("GET", "/jobs", None, Some("wrong")).0, 401);
    assert_eq!(srv.call("GET", "/jobs", None, Some("s3cret")).0, 200);
    assert_eq!(
        srv.call("GET", "/health/live", None, None).0,
        200,
        "liveness needs no token"
    );
    srv.stop();
}

/// The OpenAPI document is valid by the specification's own schema, and a
/// generated client puts each parameter where the server reads it: a path
/// parameter is a `{name}` of its path, every other one is in the query.
#[test]
fn the_openapi_document_validates_and_puts_query_parameters_in_the_query() {
    let srv = Server::start("127.0.0.1:0", None);
    let (status, doc) = srv.json("GET", "/openapi.json", None);
    assert_eq!(status, 200);
    let mut query = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap();
                let templated = path.contains(&format!("{{{name}}}"));
                match p["in"].as_str() {
                    Some("path") => {
                        assert!(templated, "{method} {path}: {name} is not in the path")
                    }
                    Some("query") => {
                        assert!(!templated, "{method} {path}: {name} is a path parameter");
                        assert_ne!(p["required"], true, "{method} {path}: {name} is optional");
                        query += 1;
                    }
                    other => panic!("{method} {path}: {name} in {other:?}"),
                }
            }
        }
    }
    assert!(query >= 20, "only {query} query parameters");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), doc.to_string()).unwrap();
    let out = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(file.path())
        .env("PYTHONPATH", common::tools::openapi_validator())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    srv.stop();
}

/// Every operation of the catalogue is in the OpenAPI document the server
/// serves, and the server routes it: called with its parameters filled in,
/// it is answered by its handler (a JSON document, also for a refusal), never
/// by the router's bare 404 or 405. The same through a gateway in front of
/// the server.
#[test]
fn every_operation_of_the_catalogue_is_served_and_documented() {
    let srv = Server::start("127.0.0.1:0", None);
    let gw = common::server::Gateway::start(std::slice::from_ref(&srv.addr));
    let (status, doc) = srv.json("GET", "/openapi.json", None);
    assert_eq!(status, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with('3'));
    let operations = postfach::server::catalogue::operations();
    assert!(operations.len() >= 38, "{}", operations.len());
    for o in operations {
        let method = o.method.as_str().to_lowercase();
        assert!(
            doc["paths"][o.path][&method].is_object(),
            "{} {} is not in /openapi.json",
            o.method,
            o.path
        );
        assert_eq!(doc["paths"][o.path][&method]["operationId"], o.name);
        let concrete: String = o
            .path
            .split('/')
            .map(|s| if s.starts_with('{') { "7" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        let body = (o.method == "POST").then(|| json!({}));
        for (face, addr) in [("run", &srv.addr), ("gateway", &gw.addr)] {
            let (status, text) =
                common::server::call(addr, o.method.as_str(), &concrete, body.as_ref(), None);
            assert_ne!(status, 405, "{face}: {} {concrete}", o.method);
            assert!(
                !(status == 404 && text.trim().is_empty()),
                "{face}: {} {concrete} is not routed",
                o.method
            );
        }
    }
    srv.stop();
}

/// The first SIGTERM stops gracefully and waits for the request in flight (a
/// client still sending its body); a second one does not wait: the process
/// exits at once with 130, saying so.
#[test]
fn a_second_signal_exits_at_once_while_the_first_waits_for_a_request_in_flight() {
    use std::io::Write;
    let mut srv = Server::start("127.0.0.1:0", None);
    let mut slow = std::net::TcpStream::connect(&srv.addr).unwrap();
    write!(
        slow,
        "POST /messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"name\": "
    )
    .unwrap();
    slow.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    srv.signal_term();
    assert!(
        srv.exited_within(std::time::Duration::from_secs(2))
            .is_none(),
        "the graceful stop waits for the request in flight"
    );
    assert!(
        srv.log_so_far()
            .iter()
            .any(|l| l.contains("a second signal exits at once")),
        "{:?}",
        srv.log_so_far()
    );
    srv.signal_term();
    let status = srv
        .exited_within(std::time::Duration::from_secs(5))
        .expect("the second signal exits at once");
    assert_eq!(status.code(), Some(130));
    drop(slow);
}

/// The book's chapter on the HTTP API lists exactly the catalogue's
/// operations (besides the document and the console it serves): an
/// operation added, renamed or removed shows here until the book says so.
#[test]
fn the_books_http_chapter_lists_the_catalogue() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/src/http-api.md"))
            .unwrap();
    let mut listed = std::collections::BTreeSet::new();
    for span in text.split('`').skip(1).step_by(2) {
        if let Some((method, path)) = span.split_once(' ')
            && ["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method)
            && path.starts_with('/')
        {
            listed.insert(format!("{method} {path}"));
        }
    }
    for own in ["GET /openapi.json", "GET /", "GET /console/session"] {
        assert!(listed.remove(own), "{own} is not in the chapter");
    }
    let catalogue: std::collections::BTreeSet<String> = postfach::server::catalogue::operations()
        .iter()
        .map(|o| format!("{} {}", o.method, o.path))
        .collect();
    let missing: Vec<_> = catalogue.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&catalogue).collect();
    assert!(
        missing.is_empty(),
        "not in docs/src/http-api.md: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in the chapter but not an operation: {extra:?}"
    );
}

//! The `/v2` routes Camunda's clients call answer bad input as RFC 9457
//! problems with the status the matching gRPC code maps to, naming the
//! field: no token on a server that has one (401), a body that is no JSON
//! object, variables that are no object, a request field postfach does not
//! serve, another tenant, a version beyond any, keys postfach never gave
//! out (404), a second publish of a message id (409), an empty changeset,
//! an incident filter postfach cannot apply, a multipart part of another name, a route it does
//! not serve (501). Nothing changes, and the server serves on.
#![cfg(feature = "zeebe")]
use crate::common;
use common::server::Server;
use serde_json::{Value, json};

fn problem(srv: &Server, method: &str, path: &str, body: Option<Value>, status: u16, names: &str) {
    let (got, text) = srv.call(method, path, body.as_ref(), Some("s3cret"));
    assert_eq!(got, status, "{method} {path}: {text}");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"));
    assert_eq!(v["status"], status, "{v}");
    assert!(v["title"].is_string(), "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains(names),
        "{names}: {v}"
    );
}

#[test]
fn the_camunda_rest_face_refuses_bad_input_as_problems() {
    let srv = Server::start("127.0.0.1:0", Some("s3cret"));
    let (status, text) = srv.call("GET", "/v2/topology", None, None);
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("bearer token"), "{text}");
    let (status, topology) = srv.call("GET", "/v2/topology", None, Some("s3cret"));
    assert_eq!(status, 200, "{topology}");

    let start = "/v2/process-instances";
    problem(&srv, "POST", start, Some(json!([1])), 400, "JSON object");
    problem(
        &srv,
        "POST",
        start,
        Some(json!({"processDefinitionId": "auftrag-ausfuehrung", "variables": [1]})),
        400,
        "variables",
    );
    problem(
        &srv,
        "POST",
        start,
        Some(
            json!({"processDefinitionId": "auftrag-ausfuehrung", "startInstructions": [{"elementId": "x"}]}),
        ),
        400,
        "startInstructions",
    );
    problem(
        &srv,
        "POST",
        start,
        Some(json!({"processDefinitionId": "auftrag-ausfuehrung", "tenantId": "fremd"})),
        400,
        "tenantId 'fremd'",
    );
    problem(
        &srv,
        "POST",
        start,
        Some(json!({"processDefinitionId": "gibt-es-nicht"})),
        404,
        "gibt-es-nicht",
    );
    problem(
        &srv,
        "POST",
        "/v2/jobs/12345/completion",
        None,
        404,
        "12345",
    );
    problem(
        &srv,
        "POST",
        "/v2/jobs/zwölf/completion",
        None,
        400,
        "jobKey 'zwölf'",
    );
    problem(
        &srv,
        "POST",
        "/v2/process-instances/2251799813685249999/cancellation",
        None,
        404,
        "2251799813685249999",
    );
    let publish = json!({"name": "AuftragAbgeschlossen", "correlationKey": "rest-1", "messageId": "rest-1", "timeToLive": 60000});
    let (status, first) = srv.call(
        "POST",
        "/v2/messages/publication",
        Some(&publish),
        Some("s3cret"),
    );
    assert_eq!(status, 200, "{first}");
    problem(
        &srv,
        "POST",
        "/v2/messages/publication",
        Some(publish),
        409,
        "rest-1",
    );
    problem(
        &srv,
        "PATCH",
        "/v2/jobs/2251799813685249",
        Some(json!({"changeset": {}})),
        400,
        "changeset",
    );
    problem(
        &srv,
        "POST",
        "/v2/incidents/search",
        Some(json!({"filter": {"errorMessage": {"$like": "*"}}})),
        400,
        "filter.errorMessage",
    );
    problem(
        &srv,
        "POST",
        "/v2/user-tasks/search",
        Some(json!({})),
        501,
        "/v2/user-tasks/search",
    );

    // a deployment whose part is not named resources
    let body = "--b\r\nContent-Disposition: form-data; name=\"modell\"; filename=\"a.bpmn\"\r\n\r\n<definitions/>\r\n--b--\r\n";
    let mut s = std::net::TcpStream::connect(&srv.addr).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "POST /v2/deployments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("part 'modell'"), "{answer}");

    // nothing changed, and the server serves on
    let (status, jobs) = srv.call("GET", "/jobs", None, Some("s3cret"));
    assert_eq!(status, 200, "{jobs}");
    assert!(!jobs.contains("auftragUebergeben"), "{jobs}");
    srv.stop();
}

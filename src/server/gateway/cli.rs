//! A command line sent to the gateway's `/cli`: run where the binary's
//! [`CliRouter`](super::CliRouter) says — on the partition of an id or key, on
//! every partition, or on the one that has what it names — and answered in
//! `/cli`'s own shape, so `postfach --server GATEWAY …` prints what it would
//! print against one partition.
//!
//! Invariant: every answer is `{"code", "text" | "message", "json"}`, also when
//! a partition could not be asked (exit 1, naming it).

use super::client::{Answer, Unreachable};
use super::{CliRoute, Gw, Passed, any_answer, gather, missing_json, problem, respond, send};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A command line: run where its router says, its answer passed back (several
/// answers side by side under their partition numbers).
pub(super) async fn cli(gw: &Gw, p: &Passed) -> Response {
    let Some(router) = &gw.cli else {
        return problem(
            StatusCode::NOT_IMPLEMENTED,
            "this gateway runs no command line: it was started by a host, not by `postfach gateway`".into(),
        );
    };
    let args: Vec<String> = match serde_json::from_slice::<Value>(&p.body)
        .ok()
        .and_then(|v| v.get("args").cloned())
        .and_then(|a| serde_json::from_value(a).ok())
    {
        Some(a) => a,
        None => {
            return match any_answer(gw, p).await {
                Ok(a) => respond(a),
                Err(u) => cli_unreachable(&u),
            };
        }
    };
    match router(&args) {
        CliRoute::Id(id) => cli_one(gw, id % u64::from(gw.parts.count()), p).await,
        CliRoute::Key(k) => cli_one(gw, u64::from(gw.partition_of_key(&k)), p).await,
        CliRoute::Start => cli_start(gw, p).await,
        CliRoute::Everywhere => cli_everywhere(gw, p).await,
        CliRoute::Gather => cli_gather(gw, p, gather::merge).await,
        CliRoute::Statistics => cli_gather(gw, p, gather::statistics).await,
        CliRoute::Find => cli_find(gw, p).await,
        CliRoute::Any => match any_answer(gw, p).await {
            Ok(a) => respond(a),
            Err(u) => cli_unreachable(&u),
        },
        CliRoute::Refuse(why) => {
            Json(json!({"code": 2, "message": why, "json": null})).into_response()
        }
    }
}

/// A command line's answer when its partition could not be asked: exit 1,
/// naming the partition.
fn cli_unreachable(u: &Unreachable) -> Response {
    Json(json!({
        "code": 1,
        "message": format!("{u}; nothing was done: run it again when the partition is back"),
        "json": {"missing": missing_json(std::slice::from_ref(u))},
    }))
    .into_response()
}

async fn cli_one(gw: &Gw, partition: u64, p: &Passed) -> Response {
    match send(gw, partition as u32, p, &p.body).await {
        Ok(a) => respond(a),
        Err(u) => cli_unreachable(&u),
    }
}

fn cli_code(a: &Answer) -> Option<i64> {
    a.json().and_then(|v| v.get("code").and_then(Value::as_i64))
}

async fn cli_start(gw: &Gw, p: &Passed) -> Response {
    let first = gw.next_turn();
    match send(gw, first, p, &p.body).await {
        Ok(a) => {
            let owner = a
                .json()
                .and_then(|v| v.pointer("/json/partition_owner").and_then(Value::as_u64));
            match owner {
                Some(o) if o < u64::from(gw.parts.count()) => cli_one(gw, o, p).await,
                _ => respond(a),
            }
        }
        Err(u) => cli_unreachable(&u),
    }
}

async fn cli_everywhere(gw: &Gw, p: &Passed) -> Response {
    let answers = super::all(gw, p).await;
    let mut first_ok = None;
    for (i, a) in answers.into_iter().enumerate() {
        match a {
            Ok(a) if a.status.is_success() && cli_code(&a) == Some(0) => {
                first_ok.get_or_insert(a);
            }
            Ok(a) if a.status.is_success() => return respond(a),
            Ok(a) => return respond(a),
            Err(u) => {
                return Json(json!({"code": 1, "message": format!("{u}; the other partitions took it: send it again when partition {i} is back (a deployment is idempotent by content)"), "json": null})).into_response();
            }
        }
    }
    match first_ok {
        Some(a) => respond(a),
        None => problem(StatusCode::SERVICE_UNAVAILABLE, "no partitions".into()),
    }
}

async fn cli_gather(gw: &Gw, p: &Passed, merge: fn(&[Value]) -> Value) -> Response {
    let mut text = String::new();
    let mut parts = Vec::new();
    let mut code = 0;
    let mut missing = Vec::new();
    for (i, a) in super::all(gw, p).await.into_iter().enumerate() {
        match a.map(|a| a.json().unwrap_or(Value::Null)) {
            Ok(v) => {
                let c = v.get("code").and_then(Value::as_i64).unwrap_or(1);
                code = code.max(c);
                let body = v
                    .get("text")
                    .or_else(|| v.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                text.push_str(&format!("── partition {i} ──\n{body}"));
                if !body.ends_with('\n') {
                    text.push('\n');
                }
                if let Some(j) = v.get("json").filter(|j| j.is_object()) {
                    parts.push(j.clone());
                }
            }
            Err(u) => {
                code = code.max(1);
                text.push_str(&format!("── partition {i} ──\nnot reached: {}\n", u.reason));
                missing.push(u);
            }
        }
    }
    let mut json = merge(&parts);
    if let Value::Object(o) = &mut json {
        o.insert("missing".into(), missing_json(&missing));
    }
    if code == 0 {
        Json(json!({"code": 0, "text": text, "json": json})).into_response()
    } else {
        Json(json!({"code": code, "message": text.trim_end(), "json": json})).into_response()
    }
}

async fn cli_find(gw: &Gw, p: &Passed) -> Response {
    let mut last = None;
    let mut missing = Vec::new();
    for a in super::all(gw, p).await {
        match a {
            Ok(a) if cli_code(&a) == Some(0) => return respond(a),
            Ok(a) => last = Some(a),
            Err(u) => missing.push(u),
        }
    }
    match (last, missing.first()) {
        (_, Some(u)) => Json(json!({"code": 1, "message": format!("not found on the partitions that answered; {u}"), "json": null})).into_response(),
        (Some(a), None) => respond(a),
        (None, None) => problem(StatusCode::SERVICE_UNAVAILABLE, "no partitions".into()),
    }
}

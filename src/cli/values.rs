//! Values the command line reads: flag values parsed within their documented
//! ranges, `--var` pairs, and files read within a size cap.
//!
//! Invariant: every value from outside is range-checked here before a
//! command sees it; a file is never read past its cap.

use super::prelude::*;
use clap::Args;
use postfach::{Vars, limits};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Args)]
pub struct VarArgs {
    /// Variable (repeatable). NAME=VALUE sets text — `amount=120` is the
    /// string "120" — unless VALUE is a JSON object, array, quoted string,
    /// true, false or null; NAME:=JSON sets any JSON, numbers included
    /// (`amount:=120` is the number 120).
    #[arg(long = "var", value_name = "NAME=VALUE|NAME:=JSON")]
    pub var: Vec<String>,
}

/// `NAME=VALUE` of `instances --variable`.
pub(super) fn parse_variable_filter(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.to_string())),
        _ => Err(format!("{s:?}: expected NAME=VALUE")),
    }
}

// Durations of the command line, each parsed within its documented range.
/// An RFC 3339 instant as milliseconds since the epoch.
pub(super) fn parse_instant(s: &str) -> Result<u64, String> {
    postfach::model::iso::instant(s)
}

pub(super) fn parse_ttl(s: &str) -> Result<u64, String> {
    limits::MESSAGE_TTL.named("--ttl").parse(s)
}

pub(super) fn parse_lease(s: &str) -> Result<u64, String> {
    limits::LEASE.named("--lease").parse(s)
}

pub(super) fn parse_lease_extension(s: &str) -> Result<u64, String> {
    limits::LEASE_EXTENSION.named("--by").parse(s)
}

pub(super) fn parse_retry_delay(s: &str) -> Result<u64, String> {
    limits::RETRY_DELAY.named("--retry-delay").parse(s)
}

/// A name given to `flag` ([`limits::check_name`]).
pub(super) fn name_of(flag: &str, s: &str) -> Result<String, String> {
    limits::check_name(flag, s)
        .map(String::from)
        .map_err(|e| e.to_string())
}

pub(super) fn parse_worker(s: &str) -> Result<String, String> {
    name_of("--worker", s)
}

pub(super) fn parse_fetch(s: &str) -> Result<String, String> {
    name_of("--fetch-variable", s)
}

pub(super) fn parse_user(s: &str) -> Result<String, String> {
    name_of("--user", s)
}

pub(super) fn parse_to(s: &str) -> Result<String, String> {
    name_of("--to", s)
}

pub(super) fn parse_max(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("--max '{s}' is not a whole number"))?;
    limits::check_count("--max", n, limits::LOCK_BATCH).map_err(|e| e.to_string())
}

pub(super) fn parse_connect_timeout(s: &str) -> Result<u64, String> {
    limits::CLIENT_TIMEOUT.named("--connect-timeout").parse(s)
}

pub(super) fn parse_server_timeout(s: &str) -> Result<u64, String> {
    limits::CLIENT_TIMEOUT.named("--server-timeout").parse(s)
}

/// `--server`: an http or https URL with a host, a port (if any) that fits
/// 1 … 65535, and no query or fragment; returned without a trailing `/`.
pub(super) fn parse_server_url(s: &str) -> Result<String, String> {
    let bad =
        |why: &str| format!("'{s}' is not a server URL: {why} (example: http://127.0.0.1:7820)");
    let uri: axum::http::Uri = s.parse().map_err(|e| bad(&format!("{e}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(bad(&format!("scheme '{other}' is not http or https"))),
        None => return Err(bad("it has no http:// or https://")),
    }
    let Some(authority) = uri.authority() else {
        return Err(bad("it names no host"));
    };
    if authority.host().is_empty() {
        return Err(bad("it names no host"));
    }
    if authority.as_str().contains('@') {
        return Err(bad(
            "user information does not belong in it; set $POSTFACH_TOKEN",
        ));
    }
    // the text after the host's last ':' (outside an IPv6 address's brackets)
    let after_host = authority.as_str().rsplit(']').next().unwrap_or_default();
    if let Some((_, port)) = after_host.rsplit_once(':') {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(bad(&format!("port '{port}' is outside 1 … 65535"))),
        }
    }
    if uri.query().is_some() || s.contains('#') {
        return Err(bad("a query or fragment does not belong in it"));
    }
    Ok(s.trim_end_matches('/').to_string())
}

pub(super) fn parse_configured(s: &str) -> Result<u64, String> {
    limits::CONFIGURED.parse(s)
}

/// A `--var` value: JSON objects, arrays, quoted strings, `true`, `false` and
/// `null` are parsed as JSON; any other word, numbers included, is a string
/// (`auftragId=4711` → `"4711"`, as business keys are). Conditions compare a
/// numeric string with a number numerically.
pub fn parse_value(v: &str) -> Value {
    let t = v.trim_start();
    let json_like = t.starts_with(['{', '[', '"']) || matches!(v, "true" | "false" | "null");
    if json_like && let Ok(parsed) = serde_json::from_str::<Value>(v) {
        return parsed;
    }
    Value::String(v.to_string())
}

/// Parses `NAME=VALUE` pairs with [`parse_value`]; `NAME:=JSON` takes any
/// JSON, numbers included (`amount:=20000` is the number, `amount=20000`
/// the string).
pub fn parse_vars(pairs: &[String]) -> Result<Vars, String> {
    let mut out = Vars::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("--var '{p}' must look like NAME=VALUE"))?;
        if k.trim().is_empty() {
            return Err(format!("--var '{p}' has no name"));
        }
        let (k, value) = match k.strip_suffix(':') {
            Some(k) => (
                k,
                serde_json::from_str::<Value>(v)
                    .map_err(|e| format!("--var '{p}': '{v}' is not JSON ({e})"))?,
            ),
            None => (k, parse_value(v)),
        };
        limits::check_name("--var", k).map_err(|e| e.to_string())?;
        out.insert(k.to_string(), value);
    }
    Ok(out)
}

pub(super) fn correlation_keys(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    named_pairs("--correlation-key", "MESSAGE", "VARIABLE", pairs)
}

pub(super) fn send_topics(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    named_pairs("--send-topic", "ELEMENT", "TOPIC", pairs)
}

pub(super) fn element_map(pairs: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    named_pairs("--map", "OLD", "NEW", pairs)
}

/// `flag LEFT=RIGHT` options as a map: neither side blank, the right side a
/// name within the limits.
fn named_pairs(
    flag: &str,
    left: &str,
    right: &str,
    pairs: &[String],
) -> Result<BTreeMap<String, String>, Failure> {
    let mut out = BTreeMap::new();
    for kv in pairs {
        let (l, r) = kv
            .split_once('=')
            .filter(|(l, r)| !l.trim().is_empty() && !r.trim().is_empty())
            .ok_or_else(|| {
                usage(format!(
                    "{flag} '{kv}' must look like {left}={right} (neither blank)"
                ))
            })?;
        limits::check_name(&format!("{flag} {right}"), r).map_err(|e| usage(e.to_string()))?;
        out.insert(l.to_string(), r.to_string());
    }
    Ok(out)
}

/// Largest configuration file read.
pub(super) const MAX_CONFIG: usize = 1024 * 1024;

/// Largest token file read.
pub(super) const MAX_TOKEN: usize = 4096;

/// Longest line `import` reads (the HTTP body limit).
pub(super) const MAX_LINE: usize = postfach::server::http::MAX_BODY;

/// Reads a file the command line names, refusing it as soon as it passes `cap`
/// bytes (a device such as /dev/zero never fills memory), and naming the byte
/// and line where it stops being UTF-8.
pub(super) fn read_bounded(
    file: &std::path::Path,
    cap: usize,
    what: &str,
) -> Result<String, Failure> {
    use std::io::Read;
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    let f = std::fs::File::open(file)
        .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    let mut bytes = Vec::new();
    f.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    if bytes.len() > cap {
        return Err(fail(format!(
            "{}: {what} is larger than {cap} bytes; refused without reading further",
            file.display()
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
        fail(format!(
            "{}:{line}: not UTF-8 at byte {at}; save the {what} as UTF-8",
            file.display()
        ))
    })
}

pub(super) fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86399 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

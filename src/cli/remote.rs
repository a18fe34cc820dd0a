//! `--server`: the command line sent to a running server, which executes it
//! against its open database (`/cli`) and answers with the same output.
//!
//! Invariant: the server never opens a path a caller names; the client reads
//! the files a command needs and sends their contents, and every phase of
//! the exchange is bounded in time and size.

use super::failure::{Failure, out, usage};
use super::serve::checked_token;
use super::values::Sources;
use super::{Cli, Command, Output, execute};
use clap::Parser;
use postfach::Postfach;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Whether a command can run inside a server for a remote command line.
pub(crate) fn runs_remotely(c: &Command) -> Result<(), String> {
    match c {
        Command::Demo(_) => Err("demo runs on its own embedded database; drop --server".into()),
        Command::Run(_) => Err("run starts a server; drop --server".into()),
        Command::Gateway(_) | Command::Router(_) => {
            Err("gateway and router run on their own; drop --server".into())
        }
        Command::Cluster(_) => {
            Err("cluster runs on its own (cluster status asks the gateway itself)".into())
        }
        Command::Compact | Command::Recover(_) => Err(
            "compact and recover work on the files offline; stop the server first".into(),
        ),
        Command::Import(_) => {
            Err("import streams stdin; use POST /messages against the server instead".into())
        }
        Command::Object(_) => {
            Err("object streams bytes; use GET /jobs/{id}/objects/{variable} instead".into())
        }
                // a pass of the server's own executor is fine; a foreground executor or
        // handlers registered from a remote command line are not
        Command::Work(w)
            if w.until_idle && w.invoice_ledger.is_none() && w.invoice_delay.is_none() =>
        {
            Ok(())
        }
        Command::Work(_) => Err(
            "the server runs its own job executor: use `work --until-idle` for one pass, or drop --server to work a local database".into(),
        ),
        _ => Ok(()),
    }
}

/// The command line as the server's `/cli` runs it.
pub(super) fn remote_cli() -> postfach::server::RemoteCli {
    std::sync::Arc::new(|pf, args, files| {
        Box::pin(async move {
            match execute_remote(&pf, args, &files).await {
                Ok(o) => json!({"code": 0, "json": o.json, "text": o.text}),
                Err(f) => json!({"code": f.code, "message": f.message, "json": f.json}),
            }
        })
    })
}

/// Executes a parsed command line against an open database, for a remote caller.
pub(crate) async fn execute_remote(
    pf: &Postfach,
    args: Vec<String>,
    files: &BTreeMap<String, String>,
) -> Result<Output, Failure> {
    let cli =
        Cli::try_parse_from(std::iter::once("postfach".to_string()).chain(args)).map_err(|e| {
            usage(
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("invalid arguments")
                    .to_string(),
            )
        })?;
    runs_remotely(&cli.command).map_err(usage)?;
    execute(pf, cli.command, Sources::Sent(files)).await
}

/// The files a command line names, read here for a server that never reads a
/// caller's paths itself: the model of `deploy`.
pub(super) fn files_to_send(
    args: &[std::ffi::OsString],
) -> Result<BTreeMap<String, String>, Failure> {
    let mut files = BTreeMap::new();
    let parsed =
        Cli::try_parse_from(std::iter::once("postfach".into()).chain(args.iter().cloned()));
    if let Ok(Cli {
        command: Command::Deploy(deploy),
        ..
    }) = parsed
    {
        let file = deploy.file;
        files.insert(file.display().to_string(), Sources::Local.read(&file)?);
    }
    Ok(files)
}

/// The `--server` client: the server's URL and how long to wait for it.
pub(super) struct Client {
    pub(super) server: String,
    connect_ms: u64,
    answer_ms: u64,
}

pub(super) fn client_of(cli: &Cli) -> Client {
    Client {
        server: cli.server.clone().unwrap_or_default(),
        connect_ms: cli.connect_timeout,
        answer_ms: cli.server_timeout,
    }
}

impl Client {
    /// The HTTP client: statuses are answers, not errors; every phase is bounded.
    pub(super) fn agent(&self) -> ureq::Agent {
        let connect = std::time::Duration::from_millis(self.connect_ms);
        let answer = std::time::Duration::from_millis(self.answer_ms);
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_resolve(Some(connect))
            .timeout_connect(Some(connect))
            .timeout_send_request(Some(answer))
            .timeout_send_body(Some(answer))
            .timeout_recv_response(Some(answer))
            .timeout_recv_body(Some(answer))
            .build()
            .into()
    }

    /// Why the server could not be talked to, naming the timeout it hit.
    pub(super) fn unreachable(&self, e: ureq::Error) -> Failure {
        use ureq::Timeout as T;
        let show = |ms: u64| humantime::format_duration(std::time::Duration::from_millis(ms));
        let message = match e {
            ureq::Error::Timeout(T::Resolve | T::Connect) => format!(
                "no connection to {} within {} (--connect-timeout)",
                self.server,
                show(self.connect_ms)
            ),
            ureq::Error::Timeout(_) => format!(
                "{} accepted the connection but did not answer within {} (--server-timeout)",
                self.server,
                show(self.answer_ms)
            ),
            e => format!("cannot reach {}: {e}", self.server),
        };
        Failure {
            code: 1,
            message,
            json: None,
        }
    }
}

/// Adds `$POSTFACH_TOKEN` as bearer token, when set.
pub(super) fn with_token<B>(
    req: ureq::RequestBuilder<B>,
) -> Result<ureq::RequestBuilder<B>, Failure> {
    Ok(match std::env::var_os("POSTFACH_TOKEN") {
        Some(token) => {
            let token = token.into_string().map_err(|_| {
                usage("$POSTFACH_TOKEN is not UTF-8: a bearer token is printable ASCII".into())
            })?;
            let token = checked_token(&token, "$POSTFACH_TOKEN")?;
            req.header("Authorization", &format!("Bearer {token}"))
        }
        None => req,
    })
}

/// The most bytes of a server's answer the client reads.
pub(super) const MAX_ANSWER: u64 = 64 * 1024 * 1024;

/// Sends the command line to a server and turns its answer back into output.
pub(super) fn remote(client: &Client, args: Vec<std::ffi::OsString>) -> Result<Output, Failure> {
    let server = &client.server;
    let fail = |message: String| Failure {
        code: 1,
        message,
        json: None,
    };
    let url = format!("{server}/cli");
    let req = with_token(client.agent().post(&url))?;
    let files = files_to_send(&args)?;
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut resp = req
        .send_json(json!({ "args": args, "files": files }))
        .map_err(|e| client.unreachable(e))?;
    let status = resp.status().as_u16();
    let v: Value = resp
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_json()
        .map_err(|e| match e {
            ureq::Error::Timeout(_) => client.unreachable(e),
            e => fail(format!("{server} answered {status} without JSON: {e}")),
        })?;
    if status == 401 {
        return Err(fail(format!(
            "{server}: {} (set $POSTFACH_TOKEN)",
            v["error"].as_str().unwrap_or("unauthorized")
        )));
    }
    // only the documented exit codes pass through; anything else is the
    // server's fault, not an outcome of the command
    let code = match v["code"].as_i64() {
        Some(c @ 0..=4) => c as i32,
        other => {
            return Err(fail(format!(
                "{server} answered an exit code that postfach does not document ({}); what the command did is unknown: look with postfach --server {server} instance/jobs/messages",
                other.map_or("none".to_string(), |c| c.to_string())
            )));
        }
    };
    if code == 0 {
        Ok(out(
            v["json"].clone(),
            v["text"].as_str().unwrap_or_default(),
        ))
    } else {
        let message = v["message"]
            .as_str()
            .or(v["error"].as_str())
            .unwrap_or("the server refused the command")
            .to_string();
        let doc = Some(v["json"].clone()).filter(|j| !j.is_null());
        Err(Failure {
            code,
            message,
            json: doc,
        })
    }
}

/// Sends the command line to the server `--server` names, off the async
/// runtime (the client blocks).
pub(super) async fn send(cli: &Cli) -> Result<Output, Failure> {
    // what the shell passed, as sent: a path that is not UTF-8 travels
    // lossily (the server names files by their display form), never panics
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let minted = match &cli.command {
        Command::Signal(s) if s.id.is_none() => Some(signal_id()),
        _ => None,
    };
    if let Some(id) = &minted {
        args.extend(["--id".into(), id.into()]);
    }
    let client = client_of(cli);
    let answer = tokio::task::spawn_blocking(move || remote(&client, args))
        .await
        .map_err(|e| Failure {
            code: 1,
            message: e.to_string(),
            json: None,
        })?;
    let id = match &cli.command {
        Command::Signal(s) => s.id.clone().or(minted),
        _ => None,
    };
    answer.map_err(|f| match id {
        Some(id) if f.code == 1 => resend_with_id(f, &id),
        _ => f,
    })
}

/// A signal sent to a server with an id the command line gave it: a
/// retry with the same id is applied once on every partition, like the
/// gateway's own ids.
fn signal_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("c-{:x}-{nanos:x}", std::process::id())
}

/// A signal that not every partition took: what to send again.
fn resend_with_id(mut f: Failure, id: &str) -> Failure {
    f.message = format!(
        "{}\nsend it again with --id {id}: a partition that took it does not apply it twice",
        f.message.trim_end()
    );
    f
}

//! `--server`: each command sent as its operation of the catalogue — the
//! method and path the catalogue gives it, its body or query the server's
//! own request type (`postfach::server::http::requests`) — and the answer
//! shown with the command's own text, rendered from the document as it is
//! locally.
//!
//! Invariant: the server never opens a path a caller names (the client reads
//! a model and sends its contents); every exchange is bounded in time and
//! size (postfach's one HTTP client); a command no operation serves is
//! refused with the reason, never approximated.

use super::prelude::*;
use super::serve::checked_token;
use super::{Cli, Command, instances, jobs, messages, offline, repair, tasks, views};
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use postfach::server::catalogue::{self, Operation};
use postfach::server::client::{Answer, Failed, Http};
use postfach::server::http::requests;
use serde_json::{Value, json};
use std::time::Duration;

/// Why a command does not run against a server, for those that do not.
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
        Command::Backup(b) if b.to.is_some() => Err(
            "with --server the server writes the backup into its own `[backup] to`: drop --to".into(),
        ),
        Command::Backups(_) | Command::Restore(_) => Err(
            "backups and restore work on files where they are: drop --server".into(),
        ),
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

/// One request of an operation of the catalogue.
pub(super) struct Call {
    op: &'static Operation,
    params: Vec<String>,
    query: Vec<(String, String)>,
    body: Option<Value>,
}

impl Call {
    /// A request of the operation named `name` in the catalogue.
    pub(super) fn to(name: &str) -> Result<Call, Failure> {
        let op = catalogue::named(name).ok_or_else(|| Failure {
            code: 1,
            message: format!("this build's API has no operation '{name}'"),
            json: None,
        })?;
        Ok(Call {
            op,
            params: Vec::new(),
            query: Vec::new(),
            body: None,
        })
    }

    /// The next path parameter.
    pub(super) fn at(mut self, value: impl ToString) -> Self {
        self.params.push(value.to_string());
        self
    }

    /// The query, from the operation's query type.
    pub(super) fn query(mut self, q: &impl serde::Serialize) -> Result<Self, Failure> {
        let bad = |e: String| usage(format!("query of {}: {e}", self.op.name));
        let text = serde_urlencoded::to_string(q).map_err(|e| bad(e.to_string()))?;
        self.query = serde_urlencoded::from_str(&text).map_err(|e| bad(e.to_string()))?;
        Ok(self)
    }

    /// The body, from the operation's request type.
    pub(super) fn body(mut self, b: &impl serde::Serialize) -> Self {
        self.body = Some(serde_json::to_value(b).unwrap_or_default());
        self
    }

    /// The path and query: the catalogue's path with each parameter
    /// percent-encoded as one segment.
    fn target(&self) -> String {
        use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
        let mut params = self.params.iter();
        let mut path = String::new();
        for segment in self.op.path[1..].split('/') {
            path.push('/');
            if segment.starts_with('{') {
                let value = params.next().map(String::as_str).unwrap_or_default();
                path.extend(utf8_percent_encode(value, NON_ALPHANUMERIC));
            } else {
                path.push_str(segment);
            }
        }
        if !self.query.is_empty() {
            path.push('?');
            path.push_str(&serde_urlencoded::to_string(&self.query).unwrap_or_default());
        }
        path
    }

    /// The same request for the page after `cursor`.
    fn after(mut self, cursor: String) -> Self {
        self.query.retain(|(k, _)| k != "after");
        self.query.push(("after".into(), cursor));
        self
    }
}

/// The `--server` client: the server's URL, the caller's token and
/// postfach's HTTP client with the command line's timeouts.
pub(super) struct Client {
    pub(super) server: String,
    http: Http,
    token: Option<String>,
    connect: Duration,
    answer: Duration,
}

/// The client of `--server`, with `$POSTFACH_TOKEN` as bearer token when set.
pub(super) fn client_of(cli: &Cli) -> Result<Client, Failure> {
    let token = match std::env::var_os("POSTFACH_TOKEN") {
        Some(token) => {
            let token = token.into_string().map_err(|_| {
                usage("$POSTFACH_TOKEN is not UTF-8: a bearer token is printable ASCII".into())
            })?;
            Some(checked_token(&token, "$POSTFACH_TOKEN")?)
        }
        None => None,
    };
    let connect = Duration::from_millis(cli.connect_timeout);
    let answer = Duration::from_millis(cli.server_timeout);
    Ok(Client {
        server: cli.server.clone().unwrap_or_default(),
        http: Http::new(connect, answer).limit(postfach::objects::MAX_OBJECT_BYTES as usize),
        token,
        connect,
        answer,
    })
}

impl Client {
    /// Sends `method path` (with a JSON body) and takes the answer as it is.
    pub(super) async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| usage("$POSTFACH_TOKEN is not a valid header value".into()))?;
            headers.insert(header::AUTHORIZATION, value);
        }
        let bytes = match body {
            Some(b) => {
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Bytes::from(serde_json::to_vec(b).unwrap_or_default())
            }
            None => Bytes::new(),
        };
        let url = format!("{}{path}", self.server);
        self.http
            .send(method, &url, &headers, bytes)
            .await
            .map_err(|e| self.unreachable(e))
    }

    /// Why the server could not be talked to, naming the timeout it hit.
    fn unreachable(&self, e: Failed) -> Failure {
        let show = |d: Duration| humantime::format_duration(d);
        let message = match e {
            Failed::ConnectTimeout(_) => format!(
                "no connection to {} within {} (--connect-timeout)",
                self.server,
                show(self.connect)
            ),
            Failed::AnswerTimeout(_) => format!(
                "{} accepted the connection but did not answer within {} (--server-timeout)",
                self.server,
                show(self.answer)
            ),
            e => format!("cannot reach {}: {e}", self.server),
        };
        Failure {
            code: 1,
            message,
            json: None,
        }
    }

    /// The answer to a call, as it came.
    pub(super) async fn answer(&self, call: &Call) -> Result<Answer, Failure> {
        self.exchange(call.op.method.clone(), &call.target(), call.body.as_ref())
            .await
    }

    /// The document a call answers; a failure with the exit code its status
    /// means otherwise.
    pub(super) async fn call(&self, call: &Call) -> Result<Value, Failure> {
        let answer = self.answer(call).await?;
        self.whole(self.document(&answer)?)
    }

    /// The document of an answer already read, as `call` gives it.
    pub(super) fn call_answered(&self, answer: &Answer) -> Result<Value, Failure> {
        self.whole(self.document(answer)?)
    }

    /// A document that covers every partition; one that names partitions a
    /// gateway could not reach is an error (exit 1) carrying what was read.
    fn whole(&self, doc: Value) -> Result<Value, Failure> {
        let missing = each(&doc["missing"]);
        if missing.is_empty() {
            return Ok(doc);
        }
        let parts: Vec<String> = missing.iter().map(|m| s(&m["partition"])).collect();
        Err(Failure {
            code: 1,
            message: format!(
                "{}: partition(s) {} could not be reached; the answer covers the others (with --json: what was read, and where to resume)",
                self.server,
                parts.join(", ")
            ),
            json: Some(doc),
        })
    }

    /// A success's document, or the failure an error status means: 400/413
    /// a usage error (2), a refusal by the rules a rejection (3), anything
    /// else an error (1).
    pub(super) fn document(&self, a: &Answer) -> Result<Value, Failure> {
        let server = &self.server;
        let status = a.status;
        let Some(doc) = a.json() else {
            return Err(Failure {
                code: 1,
                message: format!("{server} answered {status} without JSON"),
                json: None,
            });
        };
        if status.is_success() {
            return Ok(doc);
        }
        let error = doc["error"].as_str().map(String::from);
        let message = error
            .clone()
            .unwrap_or_else(|| format!("{server} answered {status}"));
        let fail = |code, json| Failure {
            code,
            message: message.clone(),
            json,
        };
        Err(match status {
            StatusCode::UNAUTHORIZED => fail(1, None).with_message(format!(
                "{server}: {} (set $POSTFACH_TOKEN)",
                error.as_deref().unwrap_or("unauthorized")
            )),
            StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => fail(2, None),
            _ if doc["rejected"] == true => fail(3, None),
            // the owner of a key or id, as a partition answers locally
            StatusCode::MISDIRECTED_REQUEST => fail(
                1,
                Some(json!({"error": message, "partition_owner": doc["partition"]})),
            ),
            // a document rather than an error, or what failed where (a gateway)
            _ if error.is_none() || doc.get("failed").is_some() => fail(1, Some(doc)),
            _ => fail(1, None),
        })
    }

    /// Nothing, for an answer that succeeded whatever its content (XML, the
    /// metrics' text); else the failure its status means.
    pub(super) fn succeeded(&self, a: &Answer) -> Result<(), Failure> {
        if a.status.is_success() {
            return Ok(());
        }
        Err(self.document(a).err().unwrap_or_else(|| Failure {
            code: 1,
            message: format!("{} answered {}", self.server, a.status),
            json: None,
        }))
    }

    /// Every page of a list, its `fields` concatenated; when a gateway could
    /// not read partitions, an error naming them with what was read.
    pub(super) async fn list(&self, mut call: Call, fields: &[&str]) -> Result<Value, Failure> {
        let mut doc = json!({});
        let mut seen = std::collections::HashSet::new();
        loop {
            let answer = self.answer(&call).await?;
            let page = self.document(&answer)?;
            for f in fields {
                if let Some(items) = page[*f].as_array() {
                    let all = doc[*f].as_array_mut();
                    match all {
                        Some(all) => all.extend(items.iter().cloned()),
                        None => doc[*f] = json!(items),
                    }
                } else if doc.get(*f).is_none() && *f == fields[0] {
                    doc[*f] = json!([]);
                }
            }
            if let Some(missing) = page.get("missing").filter(|m| !each(m).is_empty()) {
                doc["missing"] = missing.clone();
            }
            let next = s(&page["next"]);
            if next.is_empty() {
                return self.whole(doc);
            }
            if !seen.insert(next.clone()) {
                return Err(Failure {
                    code: 1,
                    message: format!(
                        "{} answered the cursor {next} twice: the list does not end",
                        self.server
                    ),
                    json: None,
                });
            }
            call = call.after(next);
        }
    }
}

/// Sends the command line's command to the server `--server` names.
pub(super) async fn send(cli: Cli) -> Result<Output, Failure> {
    runs_remotely(&cli.command).map_err(usage)?;
    let c = client_of(&cli)?;
    match cli.command {
        Command::Demo(_)
        | Command::Run(_)
        | Command::Gateway(_)
        | Command::Router(_)
        | Command::Cluster(_)
        | Command::Compact
        | Command::Recover(_)
        | Command::Import(_)
        | Command::Object(_)
        | Command::Backups(_)
        | Command::Restore(_) => Err(usage("this command does not run against a server".into())),
        Command::Deploy(a) => {
            let b = instances::deploy_request(&a)?;
            let name = b.file.clone().unwrap_or_default();
            let doc = c.call(&Call::to("deploy")?.body(&b)).await?;
            Ok(shown(doc, |d| instances::deploy_text(&name, d)))
        }
        Command::Start(a) => {
            let b = instances::start_request(a)?;
            let doc = c.call(&Call::to("start")?.body(&b)).await?;
            Ok(shown(doc, instances::start_text))
        }
        Command::Signal(a) => signal(&c, a).await,
        Command::Conditions(a) => {
            let b = instances::conditions_request(a)?;
            let doc = c.call(&Call::to("conditions")?.body(&b)).await?;
            Ok(shown(doc, instances::conditions_text))
        }
        Command::Decide(a) => {
            let id = a.decision.clone();
            let b = instances::decide_request(a)?;
            let doc = c.call(&Call::to("evaluate")?.at(id).body(&b)).await?;
            Ok(shown(doc, instances::decide_text))
        }
        Command::Processes(a) => views::processes_over(&c, a).await,
        Command::Alarms => views::alarms(&c).await,
        Command::Partition => views::partition(&c).await,
        Command::Health(a) => views::health(&c, a).await,
        Command::Metrics => views::metrics(&c).await,
        Command::Decisions => {
            let doc = c.call(&Call::to("decisions")?).await?;
            Ok(shown(doc, instances::decisions_text))
        }
        Command::Instance(a) => {
            let doc = c.call(&Call::to("instance")?.at(a.id)).await?;
            Ok(shown(doc, instances::instance_text))
        }
        Command::Instances(a) => {
            let q = instances::instances_query(a);
            let call = Call::to("instances")?.query(&q)?;
            let doc = c.list(call, &["instances", "waiting"]).await?;
            Ok(shown(doc, instances::instances_text))
        }
        Command::Statistics(a) => {
            let q = requests::StatisticsQuery { version: a.version };
            let call = Call::to("statistics")?.at(a.process).query(&q)?;
            Ok(shown(c.call(&call).await?, instances::statistics_text))
        }
        other => send_more(&c, other).await,
    }
}

/// The commands of messages, jobs, tasks and repairs (see [`send`]).
async fn send_more(c: &Client, command: Command) -> Result<Output, Failure> {
    match command {
        Command::Publish(a) => {
            let b = messages::message_request(a.message, a.target, a.ttl)?;
            let doc = c.call(&Call::to("publish")?.body(&b)).await?;
            Ok(shown(doc, messages::delivery_text))
        }
        Command::Correlate(a) => {
            let b = messages::message_request(a.message, a.target, None)?;
            let answer = c.answer(&Call::to("correlate")?.body(&b)).await?;
            match answer.json() {
                Some(doc)
                    if answer.status == StatusCode::CONFLICT && doc["outcome"] == "rejected" =>
                {
                    Err(messages::rejected(&b.name, &b.key, doc))
                }
                _ => Ok(shown(c.document(&answer)?, messages::delivery_text)),
            }
        }
        Command::Messages(a) => {
            let q = messages::messages_query(a);
            q.filter().map_err(|e| usage(format!("--reason: {e}")))?;
            let call = Call::to("messages")?.query(&q)?;
            let doc = c.list(call, &["messages"]).await?;
            Ok(shown(doc, messages::messages_text))
        }
        Command::Requeue(a) => {
            let doc = c.call(&Call::to("requeue")?.at(a.message_id)).await?;
            Ok(shown(doc, messages::delivery_text))
        }
        Command::Discard(a) => {
            let b = messages::discard_request(&a);
            let doc = c
                .call(&Call::to("discard")?.at(a.message_id).body(&b))
                .await?;
            Ok(shown(doc, messages::discard_text))
        }
        Command::Jobs(a) => {
            let call = Call::to("jobs")?.query(&jobs::jobs_query(&a))?;
            let doc = c.list(call, &["jobs"]).await?;
            Ok(shown(doc, |d| jobs::jobs_text(d, a.incidents)))
        }
        Command::Retry(a) => {
            let doc = c.call(&Call::to("retry")?.at(a.job_id)).await?;
            Ok(shown(doc, jobs::retry_text))
        }
        Command::Acquire(a) => {
            let topic = a.topic.clone();
            let b = jobs::acquire_request(a);
            let doc = c.call(&Call::to("acquire")?.body(&b)).await?;
            Ok(shown(doc, |d| jobs::acquire_text(&topic, d)))
        }
        Command::Extend(a) => {
            let b = requests::ExtendBody {
                lease_token: a.lease_token,
                by_ms: a.by,
            };
            let doc = c.call(&Call::to("extend")?.at(a.job_id).body(&b)).await?;
            Ok(shown(doc, jobs::extend_text))
        }
        Command::Fail(a) => {
            let id = a.job_id;
            let b = jobs::fail_request(a);
            let doc = c.call(&Call::to("fail")?.at(id).body(&b)).await?;
            Ok(shown(doc, jobs::fail_text))
        }
        Command::BpmnError(a) => {
            let id = a.job_id;
            let b = jobs::bpmn_error_request(a)?;
            let answer = c.answer(&Call::to("bpmn_error")?.at(id).body(&b)).await?;
            match answer.json() {
                // an error no boundary event caught: the incident's document
                Some(doc) if answer.status == StatusCode::CONFLICT && doc["caught"] == false => {
                    jobs::bpmn_error_answer(&b.code, doc)
                }
                _ => jobs::bpmn_error_answer(&b.code, c.document(&answer)?),
            }
        }
        Command::Complete(a) => {
            let id = a.job_id;
            let b = jobs::complete_request(a)?;
            let doc = c.call(&Call::to("complete")?.at(id).body(&b)).await?;
            Ok(shown(doc, jobs::complete_text))
        }
        Command::Work(_) => Ok(shown(c.call(&Call::to("work")?).await?, jobs::work_text)),
        Command::Backup(b) => {
            let body = postfach::server::http::requests::BackupBody { id: b.id.clone() };
            Ok(shown(
                c.call(&Call::to("backup")?.body(&body)).await?,
                super::backups::backup_text,
            ))
        }
        Command::Cleanup => Ok(shown(
            c.call(&Call::to("cleanup")?).await?,
            offline::cleanup_text,
        )),
        Command::Tasks(a) => {
            let call = Call::to("tasks")?.query(&tasks::tasks_query(a))?;
            let doc = c.list(call, &["tasks"]).await?;
            Ok(shown(doc, tasks::tasks_text))
        }
        Command::Audit(a) => {
            let call = Call::to("audit")?.query(&super::audit::audit_query(a))?;
            Ok(shown(c.call(&call).await?, super::audit::audit_text))
        }
        Command::Task(a) => {
            let (task, action, b) = tasks::task_request(a.action)?;
            let call = Call::to("task_action")?.at(task).at(action).body(&b);
            Ok(shown(c.call(&call).await?, tasks::task_text))
        }
        other => send_repair(c, other).await,
    }
}

/// The repairs (see [`send`]).
async fn send_repair(c: &Client, command: Command) -> Result<Output, Failure> {
    let (call, shown_as) = match command {
        Command::AddToken(a) => (
            Call::to("add_token")?
                .at(a.instance)
                .body(&repair::token_request(a.element, a.force)),
            "added",
        ),
        Command::MoveToken(a) => (
            Call::to("move_token")?
                .at(a.instance)
                .at(a.token)
                .body(&repair::token_request(a.element, a.force)),
            "moved",
        ),
        Command::CancelToken(a) => (
            Call::to("cancel_token")?.at(a.instance).at(a.token),
            "cancelled",
        ),
        Command::Cancel(a) => {
            let doc = c.call(&Call::to("cancel_instance")?.at(a.instance)).await?;
            return Ok(shown(doc, repair::cancelled_text));
        }
        Command::Batch(a) => return super::batches::batch_over(c, a).await,
        Command::Batches => {
            let doc = c.call(&Call::to("batches")?).await?;
            return Ok(shown(doc, super::batches::batches_text));
        }
        Command::Migrate(a) => {
            let b = super::migrate::migration_request(a)?;
            let doc = c.call(&Call::to("migrate")?.body(&b)).await?;
            return Ok(shown(doc, super::migrate::migrated_text));
        }
        Command::SetVariables(a) => {
            let b = repair::variables_request(&a)?;
            let call = Call::to("set_variables")?.at(a.instance).body(&b);
            let doc = c.call(&call).await?;
            return Ok(shown(doc, repair::variables_text));
        }
        Command::Trigger(a) => {
            let b = repair::trigger_request(&a.vars)?;
            let token = token_at(c, a.instance, &a.token).await?;
            let call = Call::to("trigger")?.at(a.instance).at(token).body(&b);
            let doc = c.call(&call).await?;
            return Ok(shown(doc, |d| repair::moved_on_text(d, "triggered")));
        }
        Command::AdHoc(a) => {
            let token = token_at(c, a.instance, &a.token).await?;
            let (call, did) = match a.activate {
                Some(element) => (
                    Call::to("activate")?
                        .at(a.instance)
                        .at(token)
                        .body(&requests::ActivateBody { element }),
                    "activated",
                ),
                None => (
                    Call::to("complete_ad_hoc")?.at(a.instance).at(token),
                    "completed",
                ),
            };
            let doc = c.call(&call).await?;
            return Ok(shown(doc, |d| repair::moved_on_text(d, did)));
        }
        _ => {
            return Err(usage(
                "this command has no operation of the API (see docs/src/http-api.md)".into(),
            ));
        }
    };
    let doc = c.call(&call).await?;
    Ok(shown(doc, |d| repair::repair_text(d, shown_as)))
}

/// The token a command names by id or by the element it rests at, read
/// from the instance's document on the server.
async fn token_at(c: &Client, instance: u64, given: &str) -> Result<u64, Failure> {
    if let Ok(id) = given.parse::<u64>() {
        return Ok(id);
    }
    let view = c.call(&Call::to("instance")?.at(instance)).await?;
    repair::token_at(&view, instance, given)
}

/// `signal` against a server, with an id so that a retry is applied once
/// on every partition: the caller's `--id`, or one minted here.
async fn signal(c: &Client, mut a: super::instances::SignalArgs) -> Result<Output, Failure> {
    let id = a.id.get_or_insert_with(signal_id).clone();
    let b = instances::signal_request(a)?;
    match c.call(&Call::to("signal")?.body(&b)).await {
        Ok(doc) => Ok(shown(doc, instances::signal_text)),
        Err(f) if f.code == 1 => Err(resend_with_id(f, &id)),
        Err(f) => Err(f),
    }
}

/// A signal id minted by the command line: `c-PID-NANOS`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_fills_the_catalogues_path_and_encodes_what_it_carries() {
        let call = Call::to("discard").unwrap().at("Auftrag/evt 1");
        assert_eq!(call.target(), "/messages/Auftrag%2Fevt%201/discard");
        let q = requests::JobsQuery {
            incidents: true,
            after: None,
            limit: Some(10),
        };
        let call = Call::to("jobs").unwrap().query(&q).unwrap();
        assert_eq!(call.target(), "/jobs?incidents=true&limit=10");
        assert_eq!(
            call.after("7".into()).target(),
            "/jobs?incidents=true&limit=10&after=7"
        );
        assert!(Call::to("no_such_operation").is_err());
    }
}

//! How the command line fails: [`Failure`] with its exit code (1 error, 2
//! usage, 3 rejection, 4 missing object), and what to do next for each of
//! the library's errors.
//!
//! Invariant: the library's errors say what happened; only this module adds
//! what to do next, in one exhaustive match per error type.

use super::Output;
use postfach::Error;
use serde_json::Value;

/// A command-line failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
    /// Printed on stdout with --json (e.g. a rejected correlation).
    pub json: Option<Value>,
}

impl Failure {
    /// The same failure saying `message`.
    pub(super) fn with_message(mut self, message: String) -> Self {
        self.message = message;
        self
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let message = match next_step(&e) {
            Some(step) => format!("{e}: {step}"),
            None => e.to_string(),
        };
        // the owner of a key or id, for a gateway to send the command on
        let json = match &e {
            Error::Engine(postfach::EngineError::OtherPartition { owner, .. }) => {
                Some(serde_json::json!({"error": message, "partition_owner": owner}))
            }
            _ => None,
        };
        Failure {
            code: if e.is_rejection() { 3 } else { 1 },
            message,
            json,
        }
    }
}

/// What to do next, on the command line: the library's errors say only what
/// happened. Exhaustive, so a new kind of error is placed here deliberately.
pub(super) fn next_step(e: &Error) -> Option<String> {
    use postfach::EngineError as E;
    match e {
        Error::Engine(engine) => match engine {
            E::Store(s) => store_step(s),
            E::UnknownProcess(_) => {
                Some("deploy its BPMN file first (postfach deploy FILE.bpmn)".into())
            }
            E::UnknownInstance(_) => Some("list instances with `postfach instances`".into()),
            E::UnknownDecision(_) => Some(
                "deploy its DMN file first (postfach deploy FILE.dmn); `postfach decisions` lists what is deployed".into(),
            ),
            E::DecisionFailed { .. } => {
                Some("give the variables the decision reads with --var NAME=VALUE".into())
            }
            E::NotTriggerable { instance, .. } | E::AdHocRefused { instance, .. } => Some(format!(
                "see where its tokens wait with `postfach instance {instance}`"
            )),
            E::OtherPartition { owner, .. } => Some(format!(
                "send it to partition {owner}, or through the cluster's gateway, which routes by key and id"
            )),
            E::SlotMoving { .. } => Some(
                "nothing was written; run it again in a moment, once the move is done (`postfach batches` shows it)".into(),
            ),
            E::KeyNeeded { variable, .. } => Some(format!(
                "give the correlation key with --var {variable}=VALUE"
            )),
            E::MixedKeys { .. } => Some(
                "correlate every message of the process by the same variable, or run it unpartitioned".into(),
            ),
            E::UnknownJob(_) => Some("list jobs with `postfach jobs`".into()),
            E::UnknownBatch(_) => Some("list batches with `postfach batches`".into()),
            E::BatchRefused { .. } => Some("see it with `postfach batches`".into()),
            E::NoIncident(i) | E::InstanceRunning(i) => {
                Some(format!("see it with `postfach instance {i}`"))
            }
            E::NoSingleToken { instance, .. } => Some(format!(
                "see its tokens with `postfach instance {instance}` and move them one by one (postfach move-token)"
            )),
            E::UnknownMessageId(_) => Some("list messages with `postfach messages`".into()),
            E::UnknownToken { instance, .. } => Some(format!(
                "see its tokens with `postfach instance {instance}`"
            )),
            E::JobState { job, refusal } => match refusal {
                postfach::JobRefusal::LockedByWorker => {
                    Some("wait for the worker or its lease to expire".into())
                }
                postfach::JobRefusal::Incident => {
                    Some(format!("retry it first (postfach retry {job})"))
                }
                postfach::JobRefusal::Continuation => Some("run it with `postfach work`".into()),
                postfach::JobRefusal::NotAnIncident => Some("only incidents can be retried".into()),
                postfach::JobRefusal::NotATask => None,
            },
            E::RepairRefused { .. } => Some("pass --force to add it anyway".into()),
            E::MigrationRefused { instance, .. } => Some(format!(
                "see its tokens with `postfach instance {instance}`; map the element with --map OLD=NEW, or repair the instance first"
            )),
            E::NoSingleScope {
                instance,
                subprocess,
                active: 0,
                ..
            } => Some(format!(
                "start the subprocess first (postfach add-token {instance} {subprocess}; an event subprocess starts by its event), then place the token inside it"
            )),
            E::NoSingleScope { instance, .. } => Some(format!(
                "see its tokens with `postfach instance {instance}`: cancel the scopes you do not want first"
            )),
            E::UnknownTask(_) => Some("list open tasks with `postfach tasks`".into()),
            E::TaskRefused { task, refusal } => match refusal {
                postfach::TaskRefusal::HeldBy(u) => Some(format!(
                    "ask {u} to give it back (postfach task unclaim {task}), or have it assigned (postfach task assign {task} --to USER)"
                )),
                postfach::TaskRefusal::NotHolder(_) => {
                    Some(format!("claim it first (postfach task claim {task} --user USER)"))
                }
            },
            E::Parse(postfach::model::ParseError::Strict { .. }) => Some(
                "change the model, or deploy without --strict to run it with these parts not executed"
                    .into(),
            ),
            E::Parse(p) => {
                let missing = p.missing_keys();
                (!missing.is_empty()).then(|| {
                    let flags: Vec<String> = missing
                        .iter()
                        .map(|m| {
                            if m.chars()
                                .any(|c| c.is_whitespace() || "'\"$`\\".contains(c))
                            {
                                format!("--correlation-key '{}=VARIABLE'", m.replace('\'', "'\\''"))
                            } else {
                                format!("--correlation-key {m}=VARIABLE")
                            }
                        })
                        .collect();
                    format!(
                        "deploy with {} (or set [correlation_keys] in postfach.toml)",
                        flags.join(" ")
                    )
                })
            }
            E::NoStartEvent(_)
            | E::UnknownElement { .. }
            | E::StaleLease(_)
            | E::AmbiguousMessageId { .. }
            | E::NotParked { .. }
            | E::InstanceEnded(_) => None,
        },
        Error::Store(s) => store_step(s),
        Error::OutOfRange(_) | Error::Task(_) | Error::Rejected { .. } => None,
    }
}

/// What to do about a damaged database file.
pub const DAMAGED_ADVICE: &str = "stop every process that uses it, keep a copy of the file, and run `postfach recover` to check it; if it cannot be repaired, restore it from a backup (`postfach backups --at DIR` lists them checked; `postfach restore BACKUP --replace`)";

pub(super) fn store_step(e: &postfach::StoreError) -> Option<String> {
    use postfach::StoreError as S;
    match e {
        S::Locked { .. } => Some(
            "talk to the server with --server http://127.0.0.1:7820 (or its --listen address), or stop it and retry".into(),
        ),
        S::LogDamaged { .. } => Some(
            "see what is intact with `postfach recover`; `postfach recover --discard-damaged` keeps a copy of the log and replays every intact record".into(),
        ),
        S::ReadOnly => Some("this command changes the database; run it where the file is writable".into()),
        S::Damaged { .. } => Some(DAMAGED_ADVICE.into()),
        S::OtherPartition { .. } => Some(
            "give each partition its own database file and start it with the partition number its file was created with (--partition, or the ordinal at the end of $HOSTNAME)".into(),
        ),
        S::NewerFormat { .. } => Some(
            "open it with the release that wrote it (or a newer one); a file is never converted back to an older format".into(),
        ),
        S::UnreadableDefinition { .. } => Some(
            "open the database with the release that deployed that version, or deploy the process again and move its instances to the new version".into(),
        ),
        S::Open { .. } | S::Redb(_) | S::Codec(_) | S::Closed | S::Aborted(_) | S::Io(_) => None,
    }
}

impl From<postfach::StoreError> for Failure {
    fn from(e: postfach::StoreError) -> Self {
        Error::from(e).into()
    }
}

pub(super) fn usage(message: String) -> Failure {
    Failure {
        code: 2,
        message,
        json: None,
    }
}

/// A command's output: its JSON document and its human text.
pub(super) fn out(json: Value, text: impl Into<String>) -> Output {
    Output {
        json,
        text: text.into(),
    }
}

//! Shared scaffolding: a temporary database with a manual clock and the reference model.
#![allow(dead_code)]

#[macro_use]
pub mod bpmn;
#[cfg(feature = "server")]
pub mod browser;
#[cfg(feature = "pubsub")]
pub mod gcs;
#[cfg(feature = "server")]
pub mod keycloak;
pub mod proxy;
#[cfg(feature = "pubsub")]
pub mod pubsub;
pub mod server;
#[cfg(feature = "server")]
pub mod session;
pub mod tools;
#[cfg(feature = "zeebe")]
pub mod zeebe;

use postfach::{ManualClock, Options, Postfach, Publish, Vars};
use std::sync::Arc;
use std::time::Duration;

pub const REFERENCE: &str = include_str!("../../bpmn/auftrag-ausfuehrung.bpmn");
pub const PROCESS: &str = "auftrag-ausfuehrung";
/// The reference model's send task, and the topic of its job (no broker topic bound).
pub const HAND_OVER: &str = "auftragUebergeben";
pub const MESSAGE: &str = "AuftragAbgeschlossen";
/// 2026-01-01T00:00:00Z
pub const T0: u64 = 1_767_225_600_000;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub clock: Arc<ManualClock>,
    pub pf: Postfach,
    pub config: postfach::Config,
}

impl Env {
    pub fn new() -> Self {
        Self::with_config(postfach::Config::default())
    }

    pub fn with_config(config: postfach::Config) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let clock = ManualClock::new(T0);
        let pf = open(&dir, &clock, &config);
        Self {
            dir,
            clock,
            pf,
            config,
        }
    }

    /// Closes the database and opens it again from the file.
    pub fn reopen(&mut self) {
        self.pf.close();
        self.pf = open(&self.dir, &self.clock, &self.config);
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// A fresh database with the reference model deployed.
    pub async fn reference() -> Self {
        let env = Self::new();
        env.deploy_reference().await;
        env
    }

    /// Starts an order and runs its async hand-over, so it waits at the catch event.
    pub async fn waiting_order(&self, auftrag: &str) -> u64 {
        let id = self.start_order(auftrag).await;
        self.hand_over().await;
        id
    }

    /// Runs due async continuations and hands every order that reached
    /// `auftragUebergeben` to the provider: the unbound send task is a job on
    /// its own topic, completed here as the provider's worker would. Returns
    /// how many orders were handed over.
    pub async fn hand_over(&self) -> usize {
        self.pf
            .run_continuations(1000)
            .await
            .expect("async continuations run");
        let jobs = self.lock(HAND_OVER, 1000, "provider", 60_000).await;
        for j in &jobs {
            self.pf
                .complete_job(j.task.job, Some(j.lease_token), postfach::Vars::new())
                .await
                .expect("hand-over completes");
        }
        jobs.len()
    }

    /// Locks due jobs of a topic as an external worker would.
    pub async fn lock(
        &self,
        topic: &str,
        max: usize,
        worker: &str,
        lease: u64,
    ) -> Vec<postfach::LockedJob> {
        self.pf
            .lock_jobs(topic, max, worker, lease)
            .await
            .expect("lock jobs")
    }

    /// Every job, as the operator views list them.
    pub fn jobs(&self) -> Vec<postfach::ops::JobView> {
        self.pf.reader().unwrap().jobs(false).unwrap()
    }

    /// Why a deploy of `xml` is refused (panics when it deploys).
    pub async fn refusal(&self, xml: &str) -> String {
        self.pf
            .deploy("refused.bpmn", xml, Default::default())
            .await
            .unwrap_err()
            .to_string()
    }

    /// Buffered and parked messages.
    pub fn open_messages(&self) -> Vec<postfach::ops::MessageView> {
        self.pf
            .reader()
            .unwrap()
            .messages(&Default::default())
            .unwrap()
    }

    pub async fn deploy_reference(&self) {
        let keys = [(MESSAGE.to_string(), "auftragId".to_string())].into();
        self.pf
            .deploy("auftrag-ausfuehrung.bpmn", REFERENCE, keys)
            .await
            .expect("reference model deploys");
    }

    pub async fn deploy(&self, xml: &str) {
        self.pf
            .deploy("test.bpmn", xml, Default::default())
            .await
            .expect("model deploys");
    }

    pub async fn start_order(&self, auftrag: &str) -> u64 {
        self.start_keyed(PROCESS, auftrag).await
    }

    /// Starts an instance of `process` with `auftragId` = `key`.
    pub async fn start_keyed(&self, process: &str, key: &str) -> u64 {
        self.pf
            .start(process, postfach::vars([("auftragId", key.into())]), None)
            .await
            .expect("start")
    }

    pub fn state(&self, instance: u64) -> String {
        self.pf
            .reader()
            .unwrap()
            .instance(instance)
            .unwrap()
            .expect("instance exists")
            .state
            .to_string()
    }

    /// What happened to an instance: (element, event), oldest first.
    pub fn history(&self, instance: u64) -> Vec<(String, String)> {
        self.pf
            .reader()
            .unwrap()
            .instance(instance)
            .unwrap()
            .expect("instance exists")
            .history
            .into_iter()
            .map(|h| (h.element, h.event))
            .collect()
    }

    /// Completes every due job of `topic` as a worker would, with `vars`;
    /// returns how many.
    pub async fn complete_jobs(&self, topic: &str, vars: Vars) -> usize {
        let jobs = self.lock(topic, 100, "w", 60_000).await;
        for j in &jobs {
            self.pf
                .complete_job(j.task.job, Some(j.lease_token), vars.clone())
                .await
                .expect("job completes");
        }
        jobs.len()
    }

    /// The id of the (first) token of `instance` at `element`.
    pub fn token_at(&self, instance: u64, element: &str) -> u64 {
        let v = self
            .pf
            .reader()
            .unwrap()
            .instance(instance)
            .unwrap()
            .expect("instance exists");
        v.tokens
            .iter()
            .find(|t| t.element == element)
            .unwrap_or_else(|| panic!("no token at {element}: {:?}", v.tokens))
            .token
    }

    /// The id of the open user task at `element`, when there is one.
    pub fn task_at(&self, element: &str) -> u64 {
        let tasks = self
            .pf
            .reader()
            .unwrap()
            .tasks(&postfach::ops::TaskFilter::default())
            .unwrap();
        let t = tasks
            .iter()
            .find(|t| t.element == element)
            .unwrap_or_else(|| panic!("no open task at {element}: {tasks:?}"));
        t.task.parse().expect("task ids are numbers")
    }

    pub fn waiting_at(&self, instance: u64) -> Vec<String> {
        self.pf
            .reader()
            .unwrap()
            .instance(instance)
            .unwrap()
            .expect("instance exists")
            .waiting_at
    }
}

fn open(dir: &tempfile::TempDir, clock: &Arc<ManualClock>, config: &postfach::Config) -> Postfach {
    Postfach::open_with(
        dir.path().join("test.redb"),
        Options {
            config: config.clone(),
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .expect("database opens")
}

pub fn completion(auftrag: &str, id: &str) -> Publish {
    Publish {
        name: MESSAGE.into(),
        key: auftrag.into(),
        message_id: Some(id.into()),
        variables: postfach::vars([("erledigtePositionen", 1200.into())]),
        ..Default::default()
    }
}

pub fn no_vars() -> Vars {
    Vars::new()
}

/// Imports completions (`evt-N`, key `KN`) through the `postfach import` binary
/// until `n` are acknowledged, then SIGKILLs it: everything acknowledged lives only
/// in the write-ahead log (no checkpoint ran) and redb needs its crash recovery.
/// Returns the acknowledged message ids.
pub fn import_then_kill(db: &std::path::Path, n: usize) -> Vec<String> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(db)
        .args(["import", "--concurrency", "16"])
        .env("POSTFACH_CHECKPOINT_MS", "600000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for i in 0..100_000 {
            let line = format!(
                "{{\"name\":\"AuftragAbgeschlossen\",\"key\":\"K{i}\",\"id\":\"evt-{i}\"}}\n"
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                break; // the child is gone
            }
        }
    });
    let mut acked = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        acked.push(v["message_id"].as_str().unwrap().to_string());
        if acked.len() == n {
            child.kill().unwrap(); // SIGKILL
            break;
        }
    }
    child.wait().unwrap();
    let _ = writer.join();
    assert_eq!(
        acked.len(),
        n,
        "the import stopped after {} acknowledgements, before the kill",
        acked.len()
    );
    acked
}

/// Runs the `postfach` binary on `db` with `args` (from the crate root).
pub fn cli(db: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(db)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("binary runs")
}

/// Whether history `h` (see [`Env::history`]) has `event` at `element`.
pub fn has(h: &[(String, String)], element: &str, event: &str) -> bool {
    h.iter().any(|(e, ev)| e == element && ev == event)
}

/// `v`, sorted.
pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// A number from the environment (a soak makes a standing test longer), or
/// `default`.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (xorshift64*), seeded per run so a failing
/// run can be reproduced.
pub struct Rng(pub u64);
impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Two processes: `wartet` waits at a catch of the signal `Tarifwechsel`,
/// `wirft` throws it.
pub const SIGNALS: &str = bpmn!(
    r#"
  <signal id="tw" name="Tarifwechsel"/>
  <process id="wartet" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f1" sourceRef="s" targetRef="c"/>
    <intermediateCatchEvent id="c"><signalEventDefinition signalRef="tw"/></intermediateCatchEvent>
    <sequenceFlow id="f2" sourceRef="c" targetRef="e"/>
    <endEvent id="e"/>
  </process>
  <process id="wirft" isExecutable="true">
    <startEvent id="s2"/>
    <sequenceFlow id="g1" sourceRef="s2" targetRef="t"/>
    <intermediateThrowEvent id="t"><signalEventDefinition signalRef="tw"/></intermediateThrowEvent>
    <sequenceFlow id="g2" sourceRef="t" targetRef="e2"/>
    <endEvent id="e2"/>
  </process>
"#
);

/// The prose lines of markdown `text`: fenced and indented code left out.
pub fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && !line.starts_with("    ") {
            out.push(line);
        }
    }
    out
}

/// The markdown files of `dir` (relative to the crate root), sorted.
pub fn markdown_in(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> =
        std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
    files.sort();
    files
}

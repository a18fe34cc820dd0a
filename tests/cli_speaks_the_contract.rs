//! The command line keeps the contract of docs/cli.md: JSON shapes, exit codes
//! (0 ok · 1 error · 2 usage · 3 rejection) and one clear line on stderr.
// the command line and the HTTP server are built with the `server` feature
#![cfg(feature = "server")]
use serde_json::Value;
use std::process::{Command, Output};

struct Cli {
    dir: tempfile::TempDir,
}

impl Cli {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_postfach"))
            .arg("--db")
            .arg(self.dir.path().join("cli.redb"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("binary runs")
    }
    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let o = self.run(&a);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).expect("exactly one JSON document")
    }
}

#[test]
fn reference_scenario_through_the_command_line() {
    let cli = Cli::new();
    cli.json(&[
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ]);
    let started = cli.json(&["start", "auftrag-ausfuehrung", "--var", "auftragId=4711"]);
    let id = started["instance"]
        .as_str()
        .expect("instance id is a string")
        .to_string();

    let early = cli.json(&[
        "publish",
        "AuftragAbgeschlossen",
        "--key",
        "4711",
        "--id",
        "evt-1",
        "--ttl",
        "7d",
        "--var",
        "erledigtePositionen=1200",
    ]);
    assert_eq!(early["outcome"], "buffered");
    assert_eq!(early["message_id"], "evt-1");
    assert!(early["instance"].is_null() && early["element"].is_null() && early["reason"].is_null());
    assert_eq!(early["candidates"], serde_json::json!([]));
    assert!(early["expires_at"].as_str().unwrap().ends_with('Z'));

    let msgs = cli.json(&["messages", "--buffered"]);
    let m = &msgs["messages"][0];
    for field in [
        "message_id",
        "name",
        "key",
        "state",
        "reason",
        "accepted_at",
        "expires_at",
        "candidates",
    ] {
        assert!(m.get(field).is_some(), "messages entry lacks {field}");
    }

    let work = cli.json(&["work", "--until-idle"]);
    assert_eq!(work["continuations"], 1, "the async hand-over");
    // the unbound send task waits as a job: the provider's worker takes and completes it
    let handed = cli.json(&[
        "acquire",
        "auftragUebergeben",
        "--worker",
        "provider",
        "--lease",
        "5m",
    ]);
    let j = &handed["jobs"][0];
    assert_eq!(j["work"]["kind"], "send");
    cli.json(&[
        "complete",
        j["job"].as_str().unwrap(),
        "--lease-token",
        &j["lease_token"].to_string(),
    ]);
    let work = cli.json(&["work", "--until-idle"]);
    assert_eq!(work["continuations"], 1, "the async invoice");
    let inst = cli.json(&["instance", &id]);
    assert_eq!(inst["instance"], id.as_str());
    assert_eq!(inst["process"], "auftrag-ausfuehrung");
    assert_eq!(inst["state"], "active");
    assert_eq!(inst["waiting_at"], serde_json::json!(["rechnungStellen"]));
    assert_eq!(inst["variables"]["erledigtePositionen"], "1200");
    assert_eq!(
        inst["variables"]["auftragId"], "4711",
        "a bare word is a string"
    );
    let h = &inst["history"][0];
    assert!(h["element"].is_string() && h["event"].is_string() && h["at"].is_string());

    let jobs = cli.json(&["jobs"]);
    let job = &jobs["jobs"][0];
    for field in [
        "job", "instance", "element", "kind", "state", "attempts", "error",
    ] {
        assert!(job.get(field).is_some(), "jobs entry lacks {field}");
    }
    let job_id = job["job"].as_str().unwrap().to_string();
    cli.json(&[
        "complete",
        &job_id,
        "--var",
        "rechnungNr=\"R-1\"",
        "--var",
        "positionen=[1,2]",
    ]);
    assert_eq!(
        cli.json(&["instance", &id])["variables"]["positionen"],
        serde_json::json!([1, 2])
    );
    assert_eq!(cli.json(&["instance", &id])["state"], "completed");
    let listed = cli.json(&["instances", "--state", "completed"]);
    assert_eq!(listed["instances"].as_array().unwrap().len(), 1);
    let count = |args: &[&str]| {
        cli.json(&[&["instances"], args].concat())["instances"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(count(&["--key", "4711"]), 1, "by correlation key");
    assert_eq!(count(&["--key", "4712"]), 0);
    assert_eq!(count(&["--variable", "auftragId=4711"]), 1);
    assert_eq!(
        count(&["--variable", "rechnungNr=R-1", "--state", "active"]),
        0
    );
    assert_eq!(count(&["--started-from", "2999-01-01T00:00:00Z"]), 0);
    assert_eq!(count(&["--incident"]), 0);

    // duplicate and late
    assert_eq!(
        cli.json(&[
            "publish",
            "AuftragAbgeschlossen",
            "--key",
            "4711",
            "--id",
            "evt-1"
        ])["outcome"],
        "duplicate"
    );
    let late = cli.json(&[
        "publish",
        "AuftragAbgeschlossen",
        "--key",
        "4711",
        "--id",
        "evt-2",
    ]);
    assert_eq!(
        (late["outcome"].as_str(), late["reason"].as_str()),
        (Some("parked"), Some("late"))
    );
    assert_eq!(late["candidates"], serde_json::json!([id]));
    let parked = cli.json(&["messages", "--parked", "--reason", "late"]);
    assert_eq!(parked["messages"][0]["message_id"], "evt-2");
    let d = cli.json(&[
        "discard",
        "evt-2",
        "--why",
        "provider resent by mistake",
        "--by",
        "ops-anna",
    ]);
    assert_eq!(d["by"], "ops-anna");
    assert_eq!(cli.json(&["messages"])["messages"], serde_json::json!([]));
}

#[test]
fn synchronous_correlate_without_match_exits_3_with_the_reason() {
    let cli = Cli::new();
    cli.json(&[
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ]);
    let o = cli.run(&["--json", "correlate", "AuftragAbgeschlossen", "--key", "1"]);
    assert_eq!(o.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (doc["outcome"].as_str(), doc["reason"].as_str()),
        (Some("rejected"), Some("no_subscription"))
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        cli.json(&["messages"])["messages"]
            .as_array()
            .unwrap()
            .is_empty(),
        "correlate never buffers"
    );
}

#[test]
fn errors_exit_1_with_one_line_and_usage_errors_exit_2() {
    let cli = Cli::new();
    let o = cli.run(&["start", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("'nope' is not deployed") && stderr.contains("postfach deploy"),
        "{stderr}"
    );

    let o = cli.run(&["deploy", "bpmn/does-not-exist.bpmn"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does-not-exist.bpmn"));

    let o = cli.run(&["publish", "X", "--key", "1", "--ttl", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    let o = cli.run(&["publish", "X"]);
    assert_eq!(o.status.code(), Some(2), "missing --key is a usage error");
    for bad in [
        &["instances", "--state", "sleeping"][..],
        &["instances", "--variable", "novalue"],
        &["instances", "--started-from", "yesterday"],
    ] {
        let o = cli.run(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(bad[1]), "{bad:?} names the option: {err}");
    }
    let o = cli.run(&[
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "nokey",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn refused_repair_exits_3_and_async_repair_says_it_scheduled_work() {
    let cli = Cli::new();
    cli.json(&[
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ]);
    let id = cli.json(&["start", "auftrag-ausfuehrung", "--var", "auftragId=7"])["instance"]
        .as_str()
        .unwrap()
        .to_string();
    cli.json(&["work", "--until-idle"]);
    let o = cli.run(&["add-token", &id, "auftragUebergeben"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a second token"));
    let o = cli.run(&["add-token", &id, "auftragUebergeben", "--force"]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("not now"),
        "the async repair says it only scheduled work"
    );
}

#[test]
fn every_subcommand_explains_itself_with_an_example() {
    let cli = Cli::new();
    let subcommands = subcommands();
    assert!(subcommands.len() > 30, "{subcommands:?}");
    for sub in &subcommands {
        let o = cli.run(&[sub, "--help"]);
        assert!(o.status.success(), "{sub} --help");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Example: postfach"),
            "{sub} --help lacks an example"
        );
    }
}

/// Every subcommand `postfach --help` lists (clap's own list), `help` aside.
fn subcommands() -> Vec<String> {
    let help = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--help")
        .output()
        .unwrap();
    String::from_utf8_lossy(&help.stdout)
        .split("Commands:")
        .nth(1)
        .expect("--help lists the commands")
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

#[test]
fn demo_reports_zero_lost_messages_and_single_invoices() {
    let cli = Cli::new();
    let s = cli.json(&["demo", "--orders", "300"]);
    assert_eq!(s["orders"], 300);
    assert_eq!(s["messages_lost"], 0);
    assert_eq!(s["orders_invoiced_twice"], 0);
    assert_eq!(s["invoices_issued"], 299, "all but the ambiguous order");
    assert_eq!(s["parked"]["ambiguous"], 1);
    assert_eq!(s["parked"]["late"], 1);
    assert!(s["correlated_from_buffer"].as_u64().unwrap() > 0);
    assert!(s["duplicates_recognised"].as_u64().unwrap() > 0);
    assert_eq!(s["repair_guard_refused"], true);
}

#[test]
fn log_lines_can_be_json() {
    let cli = Cli::new();
    cli.json(&[
        "deploy",
        "bpmn/auftrag-ausfuehrung.bpmn",
        "--correlation-key",
        "AuftragAbgeschlossen=auftragId",
    ]);
    let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
        .arg("--db")
        .arg(cli.dir.path().join("cli.redb"))
        .args(["--log-format", "json", "signal", "Tarifwechsel"])
        .env("POSTFACH_LOG", "info")
        .output()
        .unwrap();
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("reached no subscription"))
        .expect("the quiet loss is logged");
    let v: Value = serde_json::from_str(line).expect("a JSON log line");
    assert_eq!(v["fields"]["signal"], "Tarifwechsel");
    assert_eq!(v["level"], "INFO");
}

#[test]
fn every_subcommand_is_in_the_contract_document() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md"))
        .expect("docs/cli.md is the contract");
    let commands = subcommands();
    assert!(commands.len() > 20, "{commands:?}");
    for c in commands {
        assert!(
            doc.contains(&format!("`{c} ")) || doc.contains(&format!("`{c}`")),
            "docs/cli.md does not list `{c}`"
        );
    }
}

/// Every flag the contract's table of subcommands names exists on that
/// subcommand: a documented flag the binary does not take is a defect.
#[test]
fn every_flag_in_the_contract_document_exists() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md"))
        .expect("docs/cli.md is the contract");
    let table = doc
        .split("## Subcommands")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("the table of subcommands");
    let mut checked = 0;
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let first_cell = row.split(" | ").next().unwrap_or_default();
        // one cell may name several commands: `a …` · `b …`
        for usage in first_cell.split('`').skip(1).step_by(2) {
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| {
                    w.starts_with(|c: char| c.is_ascii_lowercase())
                        && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                })
                .collect();
            if words.is_empty() {
                continue;
            }
            let flags: Vec<String> = usage
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .filter(|t| t.starts_with("--") && t.len() > 2)
                .map(str::to_string)
                .collect();
            if flags.is_empty() {
                continue;
            }
            let help = Command::new(env!("CARGO_BIN_EXE_postfach"))
                .args(&words)
                .arg("--help")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&help.stdout);
            for f in &flags {
                assert!(
                    text.contains(&format!("{f} "))
                        || text.contains(&format!("{f}\n"))
                        || text.contains(&format!("{f}="))
                        || text.contains(&format!("{f}<")),
                    "docs/cli.md names `{f}` for `postfach {}`, which does not take it:\n{text}",
                    words.join(" ")
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 60,
        "only {checked} flags checked: the table was not read"
    );
}

/// Every command that takes `--var` says in its help what `NAME=VALUE` and
/// `NAME:=JSON` set, and does that: `amount=120` is text, `amount:=120` the
/// number.
#[test]
fn every_var_flag_says_what_it_sets_and_does_it() {
    let cli = Cli::new();
    let mut with_var = 0;
    for sub in subcommands() {
        let help = String::from_utf8_lossy(&cli.run(&[&sub, "--help"]).stdout).to_string();
        if !help.contains("--var <") {
            continue;
        }
        with_var += 1;
        assert!(
            help.contains("--var <NAME=VALUE|NAME:=JSON>")
                && help.contains("`amount=120` is the")
                && help.contains("`amount:=120` is the number 120"),
            "{sub} --help:\n{help}"
        );
    }
    assert!(with_var >= 8, "{with_var} commands take --var");
    let dmn = r##"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" namespace="https://postfach.dev/t" name="t" id="t">
  <decision name="Type" id="type"><literalExpression><text>if (amount instance of number) then "number" else "text"</text></literalExpression></decision>
</definitions>"##;
    let file = cli.dir.path().join("type.dmn");
    std::fs::write(&file, dmn).unwrap();
    let o = cli.run(&["deploy", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (var, kind) in [("amount=120", "text"), ("amount:=120", "number")] {
        let v = cli.json(&["decide", "type", "--var", var]);
        assert_eq!(v["value"], kind, "--var {var}");
    }
}

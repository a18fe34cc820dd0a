//! Every operation of the catalogue has a face on the command line: a walk
//! of commands runs with `--server` against `postfach run` and against a
//! `postfach gateway` in front of it, through a proxy that records each
//! request the command line sends; every operation of the catalogue must be
//! among them (an operation without a command fails the walk), and no
//! command fails on the way there (a usage error, or no answer).
#![cfg(feature = "server")]
use crate::common;
use common::proxy::recorder;
use common::server::{Gateway, Server};
use postfach::server::catalogue;
use std::collections::BTreeSet;
use std::process::Command;

/// The walk: each command, and the exit codes it may end with (0 unless the
/// server refuses what it names: an unknown job, a token that is not there).
fn walk(instance: &str) -> Vec<(Vec<String>, &'static [i32])> {
    let ok: &[i32] = &[0];
    let refused: &[i32] = &[1, 3];
    let w = |args: &str, codes: &'static [i32]| {
        (
            args.replace("INSTANCE", instance)
                .split(' ')
                .map(String::from)
                .collect::<Vec<_>>(),
            codes,
        )
    };
    vec![
        w("deploy bpmn/antrag-freigabe.bpmn", ok),
        w("start antrag-freigabe", ok),
        w("instance INSTANCE", ok),
        w("instances --waiting-at auftragUebergeben", ok),
        w("processes", ok),
        w("processes --xml auftrag-ausfuehrung", ok),
        w("statistics auftrag-ausfuehrung", ok),
        w("publish AuftragAbgeschlossen --key niemand --id walk-1", ok),
        w("correlate AuftragAbgeschlossen --key niemand-2", &[3]),
        w("messages", ok),
        w("requeue walk-1", refused),
        w("discard walk-1 --why walk --by tester", refused),
        w("signal Tarifwechsel --id walk-signal", ok),
        w("conditions --var betrag=1", ok),
        w("decisions", ok),
        w("decide keine-entscheidung --var a=1", refused),
        w("jobs", ok),
        w("acquire rechnungStellen --worker walker", ok),
        w("complete 999999 --lease-token 1", refused),
        w("extend 999999 --lease-token 1 --by 1m", refused),
        w("fail 999999 --error walk", refused),
        w("bpmn-error 999999 --code WALK", refused),
        w("retry 999999", refused),
        w("object 999999 protokoll", refused),
        w("tasks", ok),
        w("audit --limit 10", ok),
        w("task claim 999999 --user walker", refused),
        w("add-token INSTANCE auftragUebergeben", refused),
        w("move-token INSTANCE 999999 auftragUebergeben", refused),
        w("cancel-token INSTANCE 999999", refused),
        w("trigger INSTANCE 999999", refused),
        w("set-variables INSTANCE --var gepflegt=true", ok),
        w(
            "set-variables INSTANCE --token 999999 --local --var x=1",
            refused,
        ),
        w("cancel 999999", refused),
        w(
            "migrate auftrag-ausfuehrung --from-version 1 --to-version 1 --dry-run",
            refused,
        ),
        w("batch retry --process auftrag-ausfuehrung", ok),
        w("batches", ok),
        w("batch status 999999", refused),
        w("batch stop 999999", refused),
        w("ad-hoc INSTANCE 999999 --activate rueckfrage", refused),
        w("ad-hoc INSTANCE 999999 --complete", refused),
        w("cleanup", ok),
        // a server without `[backup] to` takes none (501), but it was asked
        w("backup", refused),
        w("work --until-idle", ok),
        w("health", ok),
        w("health --live", ok),
        w("partition", ok),
        w("cluster slot A-1", ok),
        w("cluster move-slots 0-9 --to 0", refused),
        w("alarms", ok),
        w("metrics", ok),
    ]
}

fn walk_through(face: &str, upstream: String, instance: &str) {
    let (proxy, seen) = recorder(upstream);
    for (args, codes) in walk(instance) {
        let o = Command::new(env!("CARGO_BIN_EXE_postfach"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("POSTFACH_TOKEN")
            .arg("--server")
            .arg(format!("http://{proxy}"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        let code = o.status.code().unwrap_or(-1);
        assert!(
            codes.contains(&code),
            "{face}: postfach {} exited {code}: {stderr}",
            args.join(" ")
        );
        assert!(
            !stderr.contains("cannot reach") && !stderr.contains("no operation"),
            "{face}: postfach {}: {stderr}",
            args.join(" ")
        );
    }
    let reached: BTreeSet<&str> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(method, target)| {
            let method = method.parse().ok()?;
            let path = target.split('?').next().unwrap_or_default();
            catalogue::find(&method, path).map(|(o, _)| o.name)
        })
        .collect();
    let unreached: Vec<&str> = catalogue::operations()
        .iter()
        .map(|o| o.name)
        // a move's steps are sent by one partition to another, never by a
        // person (`cluster move-slots` and `cluster grow` start them)
        .filter(|n| *n != "slot_step")
        .filter(|n| !reached.contains(n))
        .collect();
    assert!(
        unreached.is_empty(),
        "{face}: no command reaches {unreached:?}"
    );
}

#[test]
fn every_operation_is_reachable_from_the_command_line_against_run_and_gateway() {
    let srv = Server::start("127.0.0.1:0", None);
    let gw = Gateway::start(std::slice::from_ref(&srv.addr));
    let (status, started) = srv.json(
        "POST",
        "/instances",
        Some(serde_json::json!({"process": "auftrag-ausfuehrung", "variables": {"auftragId": "walk"}})),
    );
    assert_eq!(status, 201, "{started}");
    let instance = started["instance"].as_str().unwrap().to_string();
    walk_through("run", srv.addr.clone(), &instance);
    walk_through("gateway", gw.addr.clone(), &instance);
    srv.stop();
}

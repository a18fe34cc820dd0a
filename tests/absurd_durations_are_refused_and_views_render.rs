//! A duration or instant out of its documented range is refused at every entry
//! point, naming the field, before anything is stored; and every view renders
//! whatever instant a database holds (issue: "one absurd duration poisons the
//! database").
#![cfg(feature = "server")]
use crate::common;

use common::{Env, MESSAGE, T0, cli, completion, server::Server};
use postfach::{Error, ManualClock, Options, Postfach, limits};
use proptest::prelude::*;
use serde_json::json;

#[test]
fn the_command_line_refuses_absurd_durations_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.redb");
    let o = cli(
        &db,
        &[
            "deploy",
            "bpmn/auftrag-ausfuehrung.bpmn",
            "--correlation-key",
            "AuftragAbgeschlossen=auftragId",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let refused = [
        (
            vec![
                "publish", MESSAGE, "--key", "9", "--id", "big", "--ttl", "10000y",
            ],
            "--ttl",
        ),
        (
            vec![
                "acquire",
                "rechnungStellen",
                "--worker",
                "w",
                "--lease",
                "100000y",
            ],
            "--lease",
        ),
        (
            vec!["extend", "1", "--lease-token", "1", "--by", "100000y"],
            "--by",
        ),
        (
            vec!["fail", "1", "--error", "x", "--retry-delay", "100000y"],
            "--retry-delay",
        ),
    ];
    for (args, field) in refused {
        let o = cli(&db, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?} is a usage error: {err}");
        assert!(err.contains(field), "{args:?} names {field}: {err}");
        assert!(err.contains("outside its range"), "{args:?}: {err}");
    }
    let o = cli(&db, &["--json", "messages"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["messages"],
        json!([]),
        "the refused publish stored nothing"
    );
}

#[test]
fn the_http_api_refuses_absurd_durations_with_400_naming_the_field() {
    let s = Server::start("127.0.0.1:0", None);
    let (status, body) = s.json(
        "POST",
        "/messages",
        Some(json!({"name": MESSAGE, "key": "9", "id": "big", "ttl": "10000y"})),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("ttl"), "{body}");
    for (path, body, field) in [
        (
            "/jobs/acquire",
            json!({"topic": "rechnungStellen", "worker": "w", "lease_ms": 1_000_000_000_000_000u64}),
            "lease_ms",
        ),
        (
            "/jobs/acquire",
            json!({"topic": "rechnungStellen", "worker": "w", "lease_ms": 1e15}),
            "lease_ms",
        ),
        (
            "/jobs/1/extend",
            json!({"lease_token": 1, "by_ms": u64::MAX}),
            "by_ms",
        ),
        (
            "/jobs/1/fail",
            json!({"error": "x", "retry_delay_ms": 100_000u64 * 366 * 86_400_000}),
            "retry_delay_ms",
        ),
    ] {
        let (status, answer) = s.json("POST", path, Some(body.clone()));
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(field),
            "{path} names {field}: {answer}"
        );
    }
    let (status, messages) = s.json("GET", "/messages", None);
    assert_eq!(status, 200);
    assert_eq!(messages["messages"], json!([]));
    assert_eq!(s.json("GET", "/jobs", None).0, 200);
}

#[tokio::test]
async fn configuration_out_of_range_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default();
    options.config.dedup_window = u64::MAX;
    let Err(Error::OutOfRange(e)) = Postfach::open_with(dir.path().join("x.redb"), options) else {
        panic!("a dedup window of 584 million years is refused");
    };
    assert_eq!(e.field, "dedup_window");
}

/// Durations anywhere in u64: in-range values, the edges of each range, absurd ones.
fn duration() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..=limits::LEASE.max,
        Just(limits::MESSAGE_TTL.max),
        Just(limits::MESSAGE_TTL.max + 1),
        Just(0u64),
        any::<u64>(),
    ]
}

/// Instants a clock may stand at, up to and far past year 9999.
fn instant() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(T0),
        0..=limits::MAX_INSTANT,
        limits::MAX_INSTANT..=u64::MAX,
        Just(u64::MAX),
    ]
}

fn in_range(limit: limits::Limit, v: u64) -> bool {
    v >= limit.min && v <= limit.max
}

/// The refusal names the field of the limit, or the call went through.
fn refused_or_ok<T>(limit: limits::Limit, v: u64, r: Result<T, Error>) -> Option<T> {
    match r {
        Ok(t) => {
            assert!(in_range(limit, v), "{} = {v} was accepted", limit.field);
            Some(t)
        }
        Err(Error::OutOfRange(e)) => {
            assert!(!in_range(limit, v), "{} = {v} was refused", limit.field);
            assert_eq!(e.field, limit.field);
            None
        }
        Err(other) => panic!("{} = {v}: unexpected {other}", limit.field),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_entry_point_checks_and_every_view_renders(
        at in instant(),
        ttl in duration(),
        lease in duration(),
        by in duration(),
        delay in duration(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let env = Env::reference().await;
            // handed over at T0: a worker's lease at u64::MAX would be stale at once
            env.waiting_order("4711").await;
            env.clock.set(at);
            let early = postfach::Publish { ttl: Some(ttl), ..completion("4712", "early") };
            refused_or_ok(limits::MESSAGE_TTL, ttl, env.pf.publish(early).await);
            env.pf.publish(completion("4711", "done")).await.unwrap();
            env.pf.run_continuations(100).await.unwrap();
            let locked = refused_or_ok(
                limits::LEASE,
                lease,
                env.pf.lock_jobs("rechnungStellen", 1, "w", lease).await,
            );
            if let Some(l) = &locked {
                assert_eq!(l.len(), 1, "the invoice job is due and was locked");
            }
            if let Some(job) = locked.and_then(|l| l.into_iter().next()) {
                let r = env.pf.extend_lease(job.task.job, job.lease_token, by).await;
                match r {
                    Err(Error::Engine(postfach::EngineError::StaleLease(_))) => {}
                    r => { refused_or_ok(limits::LEASE_EXTENSION, by, r); }
                }
                let r = env.pf.fail_job_with(job.task.job, Some(job.lease_token), "down", None, Some(delay)).await;
                match r {
                    Err(Error::Engine(postfach::EngineError::StaleLease(_))) => {}
                    r => { refused_or_ok(limits::RETRY_DELAY, delay, r); }
                }
            }
            env.pf.tick().await.unwrap();
            // every view renders whatever instants were stored
            let r = env.pf.reader().unwrap();
            let messages = r.messages(&Default::default()).unwrap();
            let jobs = r.jobs(false).unwrap();
            let instances = r.instances(&Default::default()).unwrap();
            for v in &instances {
                serde_json::to_string(&r.instance(v.instance.parse().unwrap()).unwrap()).unwrap();
            }
            serde_json::to_string(&(messages, jobs, instances)).unwrap();
            r.waiting_at("warteAufAbschluss").unwrap();
            postfach::server::metrics::render(
                &r,
                &postfach::server::backups::Backups::default(),
                &postfach::server::alarms::Alarms::new(Default::default()),
                env.pf.commit_stats(),
                env.pf.recovery(),
                &Default::default(),
            )
            .unwrap();
        });
    }
}

#[tokio::test]
async fn instants_past_year_9999_in_a_database_still_render() {
    // a clock far in the future stands in for a database written before the ranges existed
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(limits::MAX_INSTANT + 1000 * limits::DAY);
    let pf = Postfach::open_with(
        dir.path().join("future.redb"),
        Options {
            clock: clock.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    let keys = [(MESSAGE.to_string(), "auftragId".to_string())].into();
    pf.deploy("auftrag-ausfuehrung.bpmn", common::REFERENCE, keys)
        .await
        .unwrap();
    let d = pf.publish(completion("1", "early-id")).await.unwrap();
    assert!(d.expires_at.unwrap() > limits::MAX_INSTANT);
    let m = &pf.reader().unwrap().messages(&Default::default()).unwrap()[0];
    assert!(m.accepted_at.starts_with("+10002-"), "{}", m.accepted_at);
    pf.close();
    let o = cli(&dir.path().join("future.redb"), &["--json", "messages"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cli(&dir.path().join("future.redb"), &["messages"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

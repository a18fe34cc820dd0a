//! With `[notifications]`, every message that is parked, expires, is requeued
//! or discarded leaves one event, kept in the transaction that did it and
//! under an id that survives a restart, until the broker confirmed it.
//! Without the setting nothing is kept. Time comes from an injected clock.
use crate::common;
use common::*;
use postfach::{Options, Outcome, ParkedEvents, Postfach};
use serde_json::Value;
use std::time::Duration;

/// A fresh database that keeps events (the setting is stored in it, so
/// `Env::reopen`, which does not name it, keeps it).
fn keeping(setting: Option<ParkedEvents>) -> Env {
    let mut env = Env::new();
    env.pf.close();
    env.pf = Postfach::open_with(
        env.dir.path().join("test.redb"),
        Options {
            clock: env.clock.clone(),
            parked_events: Some(setting),
            ..Options::default()
        },
    )
    .unwrap();
    env
}

fn config(payload: bool) -> Env {
    keeping(Some(ParkedEvents { payload }))
}

/// The events waiting to be published, as JSON, with their row ids.
fn pending(env: &Env) -> Vec<(u64, String, Value)> {
    let (events, total) = env.pf.reader().unwrap().parked_events(1000).unwrap();
    assert_eq!(total as usize, events.len());
    events
        .into_iter()
        .map(|e| {
            let v: Value = serde_json::from_slice(&e.data).unwrap();
            assert_eq!(v["eventId"], e.event_id.as_str(), "one id, in and out");
            (e.id, e.event_id, v)
        })
        .collect()
}

#[tokio::test]
async fn every_park_expiry_requeue_and_discard_leaves_one_event() {
    let env = config(false);
    env.deploy_reference().await;
    let id = env.waiting_order("4711").await;

    // late: the order already passed its catch event
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    let late = env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    assert_eq!(late.outcome, Outcome::Parked);
    // expired: no order waits for 4712 within the TTL
    let early = env.pf.publish(completion("4712", "evt-3")).await.unwrap();
    assert_eq!(early.outcome, Outcome::Buffered);
    env.advance(Duration::from_secs(25 * 3600));
    env.pf.tick().await.unwrap();

    let events = pending(&env);
    let kinds: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|(_, _, v)| {
            (
                v["event"].as_str().unwrap(),
                v["message"]["id"].as_str().unwrap(),
                v["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![("parked", "evt-2", "late"), ("expired", "evt-3", "expired")]
    );
    let late_event = &events[0].2;
    assert_eq!(late_event["message"]["name"], MESSAGE);
    assert_eq!(late_event["message"]["key"], "4711");
    assert_eq!(
        late_event["candidates"],
        serde_json::json!([id.to_string()])
    );
    assert!(
        late_event.get("variables").is_none(),
        "no payload unless configured: {late_event}"
    );

    // an operator requeues the expired one (it waits in the buffer again)
    // and discards the late one
    env.pf.requeue("evt-3").await.unwrap();
    env.pf.discard("evt-2", "ops", "doppelt").await.unwrap();
    let events = pending(&env);
    let kinds: Vec<(&str, &str)> = events[2..]
        .iter()
        .map(|(_, _, v)| {
            (
                v["event"].as_str().unwrap(),
                v["message"]["id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kinds, vec![("requeued", "evt-3"), ("discarded", "evt-2")]);
    assert_eq!(
        events[2].2["message"]["state"], "buffered",
        "what it did next"
    );
    assert_eq!(events[2].2["requeues"], 1);
    assert!(
        events[3].2["note"]
            .as_str()
            .unwrap()
            .contains("discarded by ops: doppelt"),
        "{}",
        events[3].2
    );
    let ids: std::collections::BTreeSet<&String> = events.iter().map(|(_, e, _)| e).collect();
    assert_eq!(ids.len(), 4, "every event has its own id");
}

#[tokio::test]
async fn events_wait_across_a_restart_until_confirmed_under_the_same_id() {
    let mut env = config(false);
    env.deploy_reference().await;
    env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    env.pf.publish(completion("4711", "evt-3")).await.unwrap();
    let before = pending(&env);
    assert_eq!(before.len(), 2);

    env.reopen();
    let after = pending(&env);
    assert_eq!(after, before, "kept durably, under the same ids");

    // the first is confirmed (twice: a confirmation may repeat)
    assert_eq!(
        env.pf.parked_events_sent(vec![after[0].0]).await.unwrap(),
        1
    );
    assert_eq!(
        env.pf.parked_events_sent(vec![after[0].0]).await.unwrap(),
        0
    );
    env.reopen();
    let left = pending(&env);
    assert_eq!(left, after[1..].to_vec());
    // a new event never reuses a confirmed id
    env.pf.publish(completion("4711", "evt-4")).await.unwrap();
    let newest = pending(&env);
    assert_eq!(newest.len(), 2);
    assert!(newest[1].1 != after[0].1 && newest[1].1 != after[1].1);
}

#[tokio::test]
async fn the_payload_is_in_the_event_only_when_configured() {
    let env = config(true);
    env.deploy_reference().await;
    env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    let events = pending(&env);
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].2["variables"],
        serde_json::to_value(completion("4711", "evt-2").variables).unwrap()
    );
}

#[tokio::test]
async fn without_the_setting_nothing_is_kept() {
    let env = Env::reference().await;
    env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    let late = env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    assert_eq!(late.outcome, Outcome::Parked);
    env.pf.discard("evt-2", "ops", "x").await.unwrap();
    assert!(pending(&env).is_empty());
}

#[tokio::test]
async fn turning_the_setting_off_stops_new_events_and_keeps_the_unsent() {
    let mut env = config(false);
    env.deploy_reference().await;
    env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    assert_eq!(pending(&env).len(), 1);
    env.pf.close();
    env.pf = Postfach::open_with(
        env.dir.path().join("test.redb"),
        Options {
            clock: env.clock.clone(),
            parked_events: Some(None),
            ..Options::default()
        },
    )
    .unwrap();
    env.pf.publish(completion("4711", "evt-3")).await.unwrap();
    env.reopen();
    env.pf.discard("evt-3", "ops", "x").await.unwrap();
    let left = pending(&env);
    assert_eq!(
        left.len(),
        1,
        "only the event of evt-2, kept for publishing"
    );
    assert_eq!(left[0].2["message"]["id"], "evt-2");
}

//! A buffered message whose TTL runs out is parked as `expired`, never deleted.
//! Time comes from an injected clock: no sleeps.
use crate::common;
use common::*;
use postfach::ops::MessageFilter;
use postfach::{Config, Outcome, Reason};
use std::time::Duration;

#[tokio::test]
async fn expired_buffered_message_is_parked_not_deleted() {
    let env = Env::reference().await;
    let d = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Buffered);

    env.advance(Duration::from_secs(24 * 3600 - 1));
    env.pf.tick().await.unwrap();
    let r = env.pf.reader().unwrap();
    assert_eq!(
        r.messages(&MessageFilter {
            buffered: true,
            ..Default::default()
        })
        .unwrap()
        .len(),
        1,
        "one second before the TTL it still waits"
    );
    drop(r);

    env.advance(Duration::from_secs(1));
    env.pf.tick().await.unwrap();
    let r = env.pf.reader().unwrap();
    assert!(
        r.messages(&MessageFilter {
            buffered: true,
            ..Default::default()
        })
        .unwrap()
        .is_empty()
    );
    let parked = r
        .messages(&MessageFilter {
            parked: true,
            reason: Some(Reason::Expired),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].message_id, "evt-1");
    assert_eq!(parked[0].reason, Some("expired"));
    assert_eq!(parked[0].state, "parked");
    assert_eq!(r.counters().unwrap()["messages_parked_expired"], 1);
}

#[tokio::test]
async fn an_instance_arriving_after_expiry_does_not_get_the_expired_message() {
    let env = Env::reference().await;
    let id = env.start_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.advance(Duration::from_secs(25 * 3600));
    // the expiry sweep runs at the start of every batch, before the job
    env.hand_over().await;
    assert_eq!(env.waiting_at(id), vec!["warteAufAbschluss"]);
    // the operator requeues the parked message: it now correlates
    let d = env.pf.requeue("evt-1").await.unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!(d.instance, Some(id));
}

#[tokio::test]
async fn ttl_comes_from_publish_then_message_setting_then_default() {
    let mut config = Config::default();
    config.ttl_per_message.insert(MESSAGE.into(), 60_000);
    let env = Env::with_config(config);
    env.deploy_reference().await;
    let per_message = env.pf.publish(completion("1", "a")).await.unwrap();
    assert_eq!(per_message.expires_at, Some(T0 + 60_000));
    let mut p = completion("2", "b");
    p.ttl = Some(5_000);
    assert_eq!(
        env.pf.publish(p).await.unwrap().expires_at,
        Some(T0 + 5_000)
    );
    let mut zero = completion("3", "c");
    zero.ttl = Some(0);
    let d = env.pf.publish(zero).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::NoSubscription)),
        "TTL 0 disables buffering"
    );

    env.advance(Duration::from_secs(6));
    env.pf.tick().await.unwrap();
    let parked = env
        .pf
        .reader()
        .unwrap()
        .messages(&MessageFilter {
            parked: true,
            reason: Some(Reason::Expired),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        parked
            .iter()
            .map(|m| m.message_id.as_str())
            .collect::<Vec<_>>(),
        vec!["b"]
    );
}

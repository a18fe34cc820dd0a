//! Pub/Sub delivers at least once: a redelivered (name, id) is a duplicate with no
//! effect, before and after the first copy was consumed, for the whole dedup window.
use crate::common;
use common::*;
use postfach::{Config, Outcome};
use std::time::Duration;

#[tokio::test]
async fn duplicate_while_the_first_copy_waits_in_the_buffer() {
    let env = Env::reference().await;
    assert_eq!(
        env.pf
            .publish(completion("4711", "evt-1"))
            .await
            .unwrap()
            .outcome,
        Outcome::Buffered
    );
    assert_eq!(
        env.pf
            .publish(completion("4711", "evt-1"))
            .await
            .unwrap()
            .outcome,
        Outcome::Duplicate
    );
    let buffered = env
        .pf
        .reader()
        .unwrap()
        .messages(&Default::default())
        .unwrap();
    assert_eq!(
        buffered.len(),
        1,
        "the duplicate was not buffered a second time"
    );
}

#[tokio::test]
async fn duplicate_after_consumption_has_no_effect() {
    let env = Env::reference().await;
    let id = env.waiting_order("4711").await;
    let first = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(first.outcome, Outcome::Correlated);
    // 30 days later Pub/Sub redelivers (retention up to 31 days)
    env.advance(Duration::from_secs(30 * 24 * 3600));
    let again = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(again.outcome, Outcome::Duplicate);
    assert_eq!(
        again.instance,
        Some(id),
        "the duplicate names where the original went"
    );
    assert!(
        env.open_messages().is_empty(),
        "nothing parked, nothing buffered"
    );
    assert_eq!(
        env.pf.reader().unwrap().counters().unwrap()["messages_duplicate"],
        1
    );
}

#[tokio::test]
async fn same_id_under_another_message_name_is_not_a_duplicate() {
    let env = Env::reference().await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    let mut other = completion("4711", "evt-1");
    other.name = "AuftragGestartet".into();
    let d = env.pf.publish(other).await.unwrap();
    assert_ne!(d.outcome, Outcome::Duplicate);
}

#[tokio::test]
async fn after_the_dedup_window_the_id_is_accepted_again() {
    let config = Config {
        dedup_window: 3_600_000,
        ..Config::default()
    };
    let env = Env::with_config(config);
    env.deploy_reference().await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.advance(Duration::from_secs(3601));
    let d = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_ne!(d.outcome, Outcome::Duplicate);
}

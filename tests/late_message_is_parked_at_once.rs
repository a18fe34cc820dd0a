//! Rejection 2: the instance for the key already passed the catch event or ended.
//! postfach knows the history, so it parks the message as `late` at once instead
//! of buffering it until the TTL runs out.
use crate::common;
use common::*;
use postfach::{Outcome, Reason};

#[tokio::test]
async fn second_completion_after_the_instance_passed_the_catch_is_late() {
    let env = Env::reference().await;
    let id = env.waiting_order("4711").await;
    assert_eq!(
        env.pf
            .publish(completion("4711", "evt-1"))
            .await
            .unwrap()
            .outcome,
        Outcome::Correlated
    );
    // the instance now waits at the invoice task: a second completion (new id) is late
    let d = env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Parked);
    assert_eq!(d.reason, Some(Reason::Late));
    assert_eq!(d.candidates, vec![id]);
    assert_eq!(d.expires_at, None, "not buffered");
}

#[tokio::test]
async fn completion_for_a_completed_instance_is_late() {
    let env = Env::reference().await;
    let id = env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.pf.run_continuations(10).await.unwrap(); // async before the invoice task
    let jobs = env.pf.reader().unwrap().jobs(false).unwrap();
    assert_eq!(
        (jobs.len(), jobs[0].kind),
        (1, "task"),
        "the invoice waits as a visible job"
    );
    env.pf
        .complete_job(jobs[0].job.parse().unwrap(), None, no_vars())
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
    let d = env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    assert_eq!((d.outcome, d.reason), (Outcome::Parked, Some(Reason::Late)));
}

#[tokio::test]
async fn a_second_order_with_the_same_key_still_waiting_upstream_buffers_instead() {
    let env = Env::reference().await;
    env.start_order("4711").await;
    env.hand_over().await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    // a new instance for the same key has not reached the catch yet: not late
    let second = env.start_order("4711").await;
    let d = env.pf.publish(completion("4711", "evt-2")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Buffered);
    env.hand_over().await;
    assert_eq!(env.waiting_at(second), vec!["rechnungStellen"]);
}

#[tokio::test]
async fn a_message_nobody_catches_is_parked_as_unknown() {
    let env = Env::reference().await;
    let mut p = completion("4711", "x");
    p.name = "Unbekannt".into();
    let d = env.pf.publish(p).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::UnknownMessage))
    );
}

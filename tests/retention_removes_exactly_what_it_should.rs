//! Retention removes completed instances and settled messages (with their dedup
//! records) older than the retention period, in small batches, and nothing else:
//! parked and buffered messages, incidents and active instances stay.
use crate::common;
use common::*;
use postfach::{Config, Outcome};
use std::time::Duration;

const DAY: u64 = 86_400;

async fn cleanup_all(env: &Env) -> (usize, usize) {
    let (mut i, mut m) = (0, 0);
    loop {
        let (a, b, more) = env.pf.cleanup(2).await.unwrap(); // tiny batches on purpose
        i += a;
        m += b;
        if !more {
            return (i, m);
        }
    }
}

#[tokio::test]
async fn old_completed_work_goes_and_everything_an_operator_needs_stays() {
    let env = Env::with_config(Config {
        max_attempts: 1,
        ..Config::default()
    });
    env.deploy_reference().await;
    // completed: order 1
    let done = env.waiting_order("1").await;
    env.pf.publish(completion("1", "done-1")).await.unwrap();
    env.pf.run_continuations(10).await.unwrap();
    let j = env.lock("rechnungStellen", 1, "w", 60_000).await.remove(0);
    env.pf
        .complete_job(j.task.job, Some(j.lease_token), postfach::Vars::new())
        .await
        .unwrap();
    assert_eq!(env.state(done), "completed");
    // active and waiting: order 2
    let waiting = env.waiting_order("2").await;
    // an incident: order 3
    let stuck = env.waiting_order("3").await;
    env.pf.publish(completion("3", "done-3")).await.unwrap();
    env.pf.run_continuations(10).await.unwrap();
    let j = env.lock("rechnungStellen", 1, "w", 60_000).await.remove(0);
    env.pf
        .fail_job(j.task.job, Some(j.lease_token), "invoice system down")
        .await
        .unwrap();
    // parked (late) and discarded messages
    env.pf.publish(completion("1", "late-1")).await.unwrap();
    env.pf.publish(completion("1", "late-2")).await.unwrap();
    env.pf
        .discard("late-2", "ops-anna", "resent by mistake")
        .await
        .unwrap();

    env.advance(Duration::from_secs(30 * DAY));
    assert_eq!(
        cleanup_all(&env).await,
        (0, 0),
        "nothing is older than 31 days yet"
    );

    env.advance(Duration::from_secs(2 * DAY));
    let (instances, messages) = cleanup_all(&env).await;
    assert_eq!(
        (instances, messages),
        (1, 3),
        "order 1 and the messages done-1, done-3, late-2"
    );
    let r = env.pf.reader().unwrap();
    assert!(r.instance(done).unwrap().is_none());
    assert!(r.instance(waiting).unwrap().is_some());
    assert!(r.instance(stuck).unwrap().is_some());
    assert_eq!(r.jobs(true).unwrap().len(), 1, "the incident stays");
    assert_eq!(
        r.message("late-1").unwrap()[0].state,
        "parked",
        "parked messages are never removed"
    );
    assert!(r.message("done-1").unwrap().is_empty());
    assert!(
        r.message("late-2").unwrap().is_empty(),
        "a discarded message goes once past retention"
    );
    assert_eq!(r.counters().unwrap()["retention_instances_removed"], 1);
    drop(r);
    // the waiting order still correlates
    assert_eq!(
        env.pf
            .publish(completion("2", "done-2"))
            .await
            .unwrap()
            .outcome,
        Outcome::Correlated
    );
}

#[tokio::test]
async fn retention_is_never_shorter_than_the_dedup_window() {
    let env = Env::with_config(Config {
        retention: 86_400_000,
        ..Config::default()
    });
    env.deploy_reference().await;
    env.waiting_order("1").await;
    env.pf.publish(completion("1", "evt-1")).await.unwrap();
    env.advance(Duration::from_secs(5 * DAY));
    assert_eq!(cleanup_all(&env).await, (0, 0));
    assert_eq!(
        env.pf
            .publish(completion("1", "evt-1"))
            .await
            .unwrap()
            .outcome,
        Outcome::Duplicate,
        "still recognised"
    );
}

#[tokio::test]
async fn old_parked_messages_at_the_head_do_not_stall_the_cleanup() {
    let env = Env::reference().await;
    for n in 0..5 {
        let mut p = completion("x", &format!("unknown-{n}"));
        p.name = "Unbekannt".into();
        env.pf.publish(p).await.unwrap(); // parked: unknown_message
    }
    env.waiting_order("1").await;
    env.pf.publish(completion("1", "settled")).await.unwrap();
    env.advance(Duration::from_secs(40 * DAY));
    assert_eq!(
        cleanup_all(&env).await.1,
        1,
        "scanning went past the five parked ones"
    );
    assert_eq!(env.open_messages().len(), 5);
}

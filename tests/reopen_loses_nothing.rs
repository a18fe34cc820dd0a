//! Every call returns after a durable commit: closing and reopening the database
//! finds instances, subscriptions, the buffer, parked messages, jobs and the dedup
//! index exactly as they were.
use crate::common;
use common::*;
use postfach::{Outcome, Reason};

#[tokio::test]
async fn closing_and_reopening_keeps_every_piece_of_state() {
    let mut env = Env::reference().await;
    let waiting = env.start_order("1").await; // will wait at the catch
    env.hand_over().await;
    let early = env.start_order("2").await; // still at its send job
    env.pf.publish(completion("2", "evt-2")).await.unwrap(); // buffered
    let mut unknown = completion("9", "evt-9");
    unknown.name = "Unbekannt".into();
    env.pf.publish(unknown).await.unwrap(); // parked
    env.pf.publish(completion("1", "evt-1a")).await.unwrap(); // correlated: 1 → invoice job

    env.reopen();

    let r = env.pf.reader().unwrap();
    assert_eq!(
        r.instance(waiting).unwrap().unwrap().waiting_at,
        vec!["rechnungStellen"]
    );
    assert_eq!(
        r.instance(early).unwrap().unwrap().waiting_at,
        vec!["auftragUebergeben"]
    );
    let msgs = r.messages(&Default::default()).unwrap();
    assert_eq!(
        msgs.iter()
            .map(|m| (m.message_id.as_str(), m.state))
            .collect::<Vec<_>>(),
        vec![("evt-2", "buffered"), ("evt-9", "parked")]
    );
    assert_eq!(r.jobs(false).unwrap().len(), 2);
    drop(r);

    // the dedup index survived
    assert_eq!(
        env.pf
            .publish(completion("1", "evt-1a"))
            .await
            .unwrap()
            .outcome,
        Outcome::Duplicate
    );
    // the buffered message still correlates when its token arrives
    env.hand_over().await;
    assert!(
        env.waiting_at(early)
            .contains(&"rechnungStellen".to_string())
    );
    // and the history that tells 'late' from 'not yet' survived too
    let d = env.pf.publish(completion("1", "evt-1b")).await.unwrap();
    assert_eq!(d.reason, Some(Reason::Late));

    env.reopen();
    let r = env.pf.reader().unwrap();
    assert_eq!(r.counters().unwrap()["messages_parked_late"], 1);
    assert_eq!(r.messages(&Default::default()).unwrap().len(), 2);
}

#[tokio::test]
async fn a_second_open_of_a_held_database_says_who_holds_it() {
    let env = Env::new();
    let err = postfach::Postfach::open(env.dir.path().join("test.redb"))
        .err()
        .expect("second open must fail");
    let text = err.to_string();
    assert!(
        text.contains("held by another process") && text.contains("test.redb"),
        "{text}"
    );
}

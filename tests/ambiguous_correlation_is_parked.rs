//! Rejection 3: two tokens wait for the same (message, key). The engine makes no
//! choice: the message is parked with both candidates and nothing is correlated.
use crate::common;
use common::*;
use postfach::{Error, Outcome, Reason};

#[tokio::test]
async fn two_waiting_instances_with_one_key_park_the_message_with_both_candidates() {
    let env = Env::reference().await;
    let a = env.start_order("4711").await;
    let b = env.waiting_order("4711").await;

    let d = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Parked);
    assert_eq!(d.reason, Some(Reason::Ambiguous));
    assert_eq!(d.candidates, vec![a, b]);
    assert_eq!(
        env.waiting_at(a),
        vec!["warteAufAbschluss"],
        "neither instance was correlated"
    );
    assert_eq!(env.waiting_at(b), vec!["warteAufAbschluss"]);

    let parked = env
        .pf
        .reader()
        .unwrap()
        .messages(&Default::default())
        .unwrap();
    assert_eq!(parked[0].reason, Some("ambiguous"));
    assert_eq!(parked[0].candidates, vec![a.to_string(), b.to_string()]);
}

#[tokio::test]
async fn synchronous_correlate_rejects_with_candidates_and_records_nothing() {
    let env = Env::reference().await;
    let a = env.start_order("4711").await;
    let b = env.waiting_order("4711").await;
    match env.pf.correlate(completion("4711", "evt-1")).await {
        Err(Error::Rejected {
            reason, candidates, ..
        }) => {
            assert_eq!(reason, "ambiguous");
            assert_eq!(candidates, vec![a, b]);
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(env.open_messages().is_empty());
}

#[tokio::test]
async fn a_forced_repair_token_makes_the_next_completion_ambiguous_and_the_guard_refuses_it_unforced()
 {
    let env = Env::reference().await;
    let a = env.waiting_order("4711").await;
    // the article's repair: a second token before the async send task
    let refused = env
        .pf
        .add_token(a, "auftragUebergeben", false)
        .await
        .unwrap_err();
    assert!(refused.is_rejection());
    assert!(
        refused.to_string().contains("warteAufAbschluss"),
        "{refused}"
    );
    let forced = env
        .pf
        .add_token(a, "auftragUebergeben", true)
        .await
        .unwrap();
    assert_eq!(
        forced.jobs_created.len(),
        1,
        "the repair reports the async job it scheduled"
    );
    env.hand_over().await;
    assert_eq!(
        env.waiting_at(a),
        vec!["warteAufAbschluss", "warteAufAbschluss"]
    );
    let d = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(
        (d.outcome, d.reason),
        (Outcome::Parked, Some(Reason::Ambiguous))
    );
    assert_eq!(d.candidates, vec![a]);
}

#[tokio::test]
async fn each_candidate_s_detail_shows_the_parked_message_and_its_open_subscription_until_the_repair()
 {
    let env = Env::reference().await;
    let a = env.waiting_order("4711").await;
    let b = env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    let detail = |i| {
        env.pf
            .reader()
            .unwrap()
            .instance_detail(i)
            .unwrap()
            .unwrap()
    };
    for inst in [a, b] {
        let d = detail(inst);
        assert_eq!(d.subscriptions.len(), 1, "{:?}", d.subscriptions);
        let s = &d.subscriptions[0];
        assert_eq!(
            (
                s.kind,
                s.name.as_str(),
                s.key.as_deref(),
                s.element.as_str()
            ),
            ("message", MESSAGE, Some("4711"), "warteAufAbschluss")
        );
        assert_eq!(d.messages.len(), 1);
        assert_eq!(d.messages[0].message_id, "evt-1");
        assert_eq!(d.messages[0].reason, Some("ambiguous"));
    }
    // the operator cancels b's token and requeues: a's detail shows the message correlated
    let token = detail(b).instance.tokens[0].token;
    env.pf.cancel_token(b, token).await.unwrap();
    env.pf.requeue("evt-1").await.unwrap();
    let d = detail(a);
    assert!(d.subscriptions.is_empty());
    assert_eq!(d.messages[0].state, "correlated");
    assert_eq!(d.messages[0].instance, Some(a.to_string()));
    assert!(
        detail(b).messages.is_empty(),
        "b is no candidate of a correlated message"
    );
    // a's next step is the invoice job: the detail lists it
    env.pf.run_continuations(10).await.unwrap();
    let jobs = detail(a).jobs;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].element, "rechnungStellen");
}

//! Rejection 1 of the article: the completion overtakes its process. postfach
//! buffers it and correlates it the moment the token reaches the catch event.
use crate::common;
use common::*;
use postfach::{MessageState, Outcome};

#[tokio::test]
async fn early_completion_is_buffered_then_correlated_when_the_token_arrives() {
    let env = Env::reference().await;
    let id = env.start_order("4711").await;
    // the send task is async: the token sits at its job, not at the catch event
    assert_eq!(env.waiting_at(id), vec!["auftragUebergeben"]);

    let d = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Buffered);
    assert_eq!(
        d.expires_at,
        Some(T0 + 24 * 3600 * 1000),
        "default TTL is 24 h"
    );
    let buffered = env
        .pf
        .reader()
        .unwrap()
        .messages(&postfach::ops::MessageFilter {
            buffered: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(buffered.len(), 1);
    assert_eq!(buffered[0].message_id, "evt-1");

    // hand the order over: the token reaches warteAufAbschluss and takes the buffered message
    assert_eq!(env.hand_over().await, 1);
    assert_eq!(env.waiting_at(id), vec!["rechnungStellen"]);
    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    assert_eq!(view.variables["erledigtePositionen"], 1200);
    assert!(
        view.history
            .iter()
            .any(|h| h.element == "warteAufAbschluss" && h.event == "message_correlated")
    );

    let msg = env.pf.reader().unwrap().message("evt-1").unwrap();
    assert_eq!(msg[0].state, MessageState::Correlated.as_str());
    assert_eq!(msg[0].instance.as_deref(), Some(id.to_string().as_str()));
    assert!(env.open_messages().is_empty(), "buffer is empty again");
}

#[tokio::test]
async fn completion_after_the_token_waits_correlates_directly() {
    let env = Env::reference().await;
    let id = env.waiting_order("4711").await;
    assert_eq!(env.waiting_at(id), vec!["warteAufAbschluss"]);
    let d = env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(d.outcome, Outcome::Correlated);
    assert_eq!(d.instance, Some(id));
    assert_eq!(d.element.as_deref(), Some("warteAufAbschluss"));
    assert_eq!(env.waiting_at(id), vec!["rechnungStellen"]);
}

#[tokio::test]
async fn an_early_message_for_another_key_does_not_correlate() {
    let env = Env::reference().await;
    let id = env.start_order("4711").await;
    assert_eq!(
        env.pf
            .publish(completion("4712", "evt-9"))
            .await
            .unwrap()
            .outcome,
        Outcome::Buffered
    );
    env.hand_over().await;
    assert_eq!(
        env.waiting_at(id),
        vec!["warteAufAbschluss"],
        "4711 still waits: the buffered message is for 4712"
    );
}

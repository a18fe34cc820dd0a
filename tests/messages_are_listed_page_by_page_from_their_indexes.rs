//! An operator with a million buffered messages pages through them: parked
//! ones first (by arrival), then buffered ones oldest first, each page
//! continuing exactly where the last one stopped.
use crate::common;
use common::*;
use postfach::ops::{MessageCursorError, MessageFilter};
use postfach::{Outcome, Publish};
use std::time::Duration;

async fn three_parked_and_four_buffered(env: &Env) -> (Vec<String>, Vec<String>) {
    let (mut parked, mut buffered) = (Vec::new(), Vec::new());
    for i in 0..7 {
        env.advance(Duration::from_secs(1));
        if i % 2 == 0 && parked.len() < 3 {
            let id = format!("unknown-{i}");
            let d = env
                .pf
                .publish(Publish {
                    name: "NobodyWaitsForThis".into(),
                    key: "x".into(),
                    message_id: Some(id.clone()),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(d.outcome, Outcome::Parked);
            parked.push(id);
        } else {
            // an order that is still before its catch event: the completion waits
            let key = format!("early-{i}");
            env.start_order(&key).await;
            let id = format!("evt-{i}");
            let d = env.pf.publish(completion(&key, &id)).await.unwrap();
            assert_eq!(d.outcome, Outcome::Buffered);
            buffered.push(id);
        }
    }
    (parked, buffered)
}

#[tokio::test]
async fn pages_list_parked_then_buffered_each_once() {
    let env = Env::reference().await;
    let (parked, buffered) = three_parked_and_four_buffered(&env).await;
    let r = env.pf.reader().unwrap();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = r
            .message_page(&MessageFilter::default(), after.as_deref(), 2)
            .unwrap();
        assert!(page.messages.len() <= 2);
        seen.extend(page.messages.into_iter().map(|m| m.message_id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let expected: Vec<String> = parked.iter().chain(&buffered).cloned().collect();
    assert_eq!(seen, expected);

    let only_buffered = r
        .message_page(
            &MessageFilter {
                buffered: true,
                ..Default::default()
            },
            None,
            100,
        )
        .unwrap();
    let ids: Vec<_> = only_buffered
        .messages
        .iter()
        .map(|m| m.message_id.clone())
        .collect();
    assert_eq!(ids, buffered);
    assert!(
        only_buffered
            .messages
            .iter()
            .all(|m| m.expires_at.is_some()),
        "buffered messages show when they expire"
    );
    assert!(only_buffered.next.is_none());

    let by_reason = r
        .message_page(
            &MessageFilter {
                reason: Some(postfach::Reason::UnknownMessage),
                ..Default::default()
            },
            None,
            100,
        )
        .unwrap();
    assert_eq!(by_reason.messages.len(), 3);
}

#[tokio::test]
async fn a_cursor_that_no_page_handed_out_is_refused_by_name() {
    let env = Env::reference().await;
    let r = env.pf.reader().unwrap();
    for bad in ["", "p:", "q:1", "b:1", "b:x:1", "p:1:2"] {
        match r.message_page(&MessageFilter::default(), Some(bad), 10) {
            Err(MessageCursorError::Cursor(c)) => assert_eq!(c, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_page_that_fills_on_the_last_parked_message_goes_on_with_the_buffer() {
    let env = Env::reference().await;
    let (parked, buffered) = three_parked_and_four_buffered(&env).await;
    let r = env.pf.reader().unwrap();
    let first = r
        .message_page(&MessageFilter::default(), None, parked.len())
        .unwrap();
    assert_eq!(first.messages.len(), 3);
    let next = first.next.expect("the buffer follows");
    let second = r
        .message_page(&MessageFilter::default(), Some(&next), 100)
        .unwrap();
    let ids: Vec<_> = second.messages.into_iter().map(|m| m.message_id).collect();
    assert_eq!(ids, buffered);
}

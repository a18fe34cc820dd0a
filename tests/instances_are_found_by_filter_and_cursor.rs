//! An operator looking for one order among many: the instance list filters by
//! where tokens wait, state, correlation key, variable value, start time and
//! incidents, and pages by cursor without skipping or repeating an instance.
use crate::common;
use common::*;
use postfach::ops::{InstanceFilter, InstancePaging};
use std::time::Duration;

fn ids(page: &postfach::ops::InstancePage) -> Vec<u64> {
    page.instances
        .iter()
        .map(|i| i.instance.parse().unwrap())
        .collect()
}

/// Seven orders A1..A7, a minute apart; A1..A4 handed over (waiting at the
/// catch event), A5..A7 still before the hand-over.
async fn seven_orders(env: &Env) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 1..=7 {
        out.push(env.start_order(&format!("A{i}")).await);
        if i == 4 {
            env.hand_over().await;
        }
        env.advance(Duration::from_secs(60));
    }
    out
}

#[tokio::test]
async fn pages_follow_each_other_without_gaps_or_repeats_in_both_orders() {
    let env = Env::reference().await;
    let all = seven_orders(&env).await;
    let r = env.pf.reader().unwrap();
    for newest_first in [true, false] {
        let mut seen = Vec::new();
        let mut after = None;
        let mut pages = 0;
        loop {
            let page = r
                .instance_page(
                    &InstanceFilter::default(),
                    InstancePaging {
                        after,
                        limit: 3,
                        newest_first,
                    },
                )
                .unwrap();
            assert!(page.instances.len() <= 3);
            seen.extend(ids(&page));
            pages += 1;
            match page.next {
                Some(n) => after = Some(n.parse().unwrap()),
                None => break,
            }
        }
        let mut expected = all.clone();
        if newest_first {
            expected.reverse();
        }
        assert_eq!(seen, expected, "newest_first={newest_first}");
        assert_eq!(pages, 3);
    }
}

#[tokio::test]
async fn each_filter_narrows_to_the_instances_it_names() {
    let env = Env::reference().await;
    let all = seven_orders(&env).await;
    let r = env.pf.reader().unwrap();
    let find = |f: InstanceFilter| -> Vec<u64> {
        let mut v = ids(&r.instance_page(&f, InstancePaging::default()).unwrap());
        v.sort();
        v
    };
    assert_eq!(
        find(InstanceFilter {
            waiting_at: Some("warteAufAbschluss".into()),
            ..Default::default()
        }),
        all[..4]
    );
    // the correlation key is found through the subscription indexes
    assert_eq!(
        find(InstanceFilter {
            key: Some("A3".into()),
            ..Default::default()
        }),
        vec![all[2]]
    );
    assert_eq!(
        find(InstanceFilter {
            key: Some("A6".into()),
            ..Default::default()
        }),
        vec![all[5]],
        "an order before its catch point already expects its key"
    );
    assert_eq!(
        find(InstanceFilter {
            key: Some("A6".into()),
            waiting_at: Some("warteAufAbschluss".into()),
            ..Default::default()
        }),
        Vec::<u64>::new(),
        "both conditions hold or the instance is not listed"
    );
    assert_eq!(
        find(InstanceFilter {
            variable: Some(("auftragId".into(), "A5".into())),
            ..Default::default()
        }),
        vec![all[4]]
    );
    assert_eq!(
        find(InstanceFilter {
            started_from: Some(T0 + 60_000),
            started_before: Some(T0 + 3 * 60_000),
            ..Default::default()
        }),
        all[1..3]
    );
    assert_eq!(
        find(InstanceFilter {
            process: Some("another-process".into()),
            ..Default::default()
        }),
        Vec::<u64>::new()
    );
}

#[tokio::test]
async fn a_job_out_of_attempts_makes_its_instance_an_incident() {
    let env = Env::reference().await;
    let all = seven_orders(&env).await;
    env.pf.run_continuations(100).await.unwrap();
    let jobs = env.lock(HAND_OVER, 1, "provider", 60_000).await;
    let job = &jobs[0];
    env.pf
        .fail_job_with(
            job.task.job,
            Some(job.lease_token),
            "provider said no",
            Some(0),
            None,
        )
        .await
        .unwrap();
    let failed = job.task.instance;
    assert!(all.contains(&failed));
    let r = env.pf.reader().unwrap();
    let find = |f: InstanceFilter| ids(&r.instance_page(&f, InstancePaging::default()).unwrap());
    assert_eq!(
        find(InstanceFilter {
            has_incident: Some(true),
            ..Default::default()
        }),
        vec![failed]
    );
    assert_eq!(
        find(InstanceFilter {
            state: Some("incident".into()),
            ..Default::default()
        }),
        vec![failed]
    );
    assert_eq!(
        find(InstanceFilter {
            has_incident: Some(false),
            ..Default::default()
        })
        .len(),
        6
    );
    let view = r.instance(failed).unwrap().unwrap();
    assert_eq!(view.state, "incident");
    assert!(
        view.incidents[0].contains("provider said no"),
        "{:?}",
        view.incidents
    );
}

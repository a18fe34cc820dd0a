//! Alarms from configuration fire once and clear once, under an injected clock:
//! an order stuck at the catch event for more than 2 days, any parked message,
//! any incident; a backup older than its limit.
#![cfg(feature = "server")]
use crate::common;
use common::*;
use postfach::server::alarms::{Alarms, Change, Facts};
use postfach::server::config::ConfigFile;
use std::time::Duration;

const CONFIG: &str = r#"
[alarms.stuck_orders]
when = "oldest_wait"
element = "warteAufAbschluss"
older_than = "2d"

[alarms.parked]
when = "parked"

[alarms.incidents]
when = "incidents"
"#;

fn names(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| match c {
            Change::Fired { name, .. } => format!("+{name}"),
            Change::Cleared { name, .. } => format!("-{name}"),
        })
        .collect()
}

#[tokio::test]
async fn a_stuck_order_fires_after_two_days_and_clears_when_its_completion_arrives() {
    let env = Env::reference().await;
    let alarms = Alarms::new(ConfigFile::parse("postfach.toml", CONFIG).unwrap().alarms);
    let eval = |env: &Env| {
        names(
            &alarms
                .evaluate(&env.pf.reader().unwrap(), &Facts::default())
                .unwrap(),
        )
    };
    assert!(eval(&env).is_empty());

    env.waiting_order("4711").await;
    env.advance(Duration::from_secs(2 * 86_400));
    assert!(
        eval(&env).is_empty(),
        "exactly 2 days is not older than 2 days"
    );
    env.advance(Duration::from_secs(1));
    assert_eq!(eval(&env), vec!["+stuck_orders"]);
    assert!(eval(&env).is_empty(), "fires once, not at every evaluation");
    let metrics = postfach::server::metrics::render(
        &env.pf.reader().unwrap(),
        &postfach::server::backups::Backups::default(),
        &alarms,
        env.pf.commit_stats(),
        env.pf.recovery(),
        &Default::default(),
    )
    .unwrap();
    assert!(
        metrics.contains("alarm_active{name=\"stuck_orders\"} 1"),
        "{metrics}"
    );

    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    assert_eq!(eval(&env), vec!["-stuck_orders"]);
    let metrics = postfach::server::metrics::render(
        &env.pf.reader().unwrap(),
        &postfach::server::backups::Backups::default(),
        &alarms,
        env.pf.commit_stats(),
        env.pf.recovery(),
        &Default::default(),
    )
    .unwrap();
    assert!(
        metrics.contains("alarm_active{name=\"stuck_orders\"} 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_parked_message_fires_until_it_is_repaired() {
    let env = Env::reference().await;
    let alarms = Alarms::new(ConfigFile::parse("postfach.toml", CONFIG).unwrap().alarms);
    let eval = |env: &Env| {
        names(
            &alarms
                .evaluate(&env.pf.reader().unwrap(), &Facts::default())
                .unwrap(),
        )
    };
    env.waiting_order("1").await;
    env.pf.publish(completion("1", "a")).await.unwrap();
    env.pf.publish(completion("1", "b")).await.unwrap(); // late: parked
    assert_eq!(eval(&env), vec!["+parked"]);
    env.pf
        .discard("b", "ops-anna", "second copy sent by hand")
        .await
        .unwrap();
    assert_eq!(eval(&env), vec!["-parked"]);
    let record = &env.pf.reader().unwrap().message("b").unwrap()[0];
    assert_eq!(record.state, "discarded");
    assert!(
        record
            .note
            .as_deref()
            .unwrap()
            .contains("discarded by ops-anna: second copy sent by hand"),
        "who and why are recorded"
    );
}

#[test]
fn configuration_errors_name_the_file_and_the_alarm() {
    let e = ConfigFile::parse(
        "postfach.toml",
        "[alarms.x]\nwhen = \"oldest_wait\"\nelement = \"a\"\nolder_than = \"soon\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("postfach.toml") && e.contains("'x'") && e.contains("soon"),
        "{e}"
    );
    let e = ConfigFile::parse(
        "p.toml",
        "[alarms.y]\nwhen = \"parked\"\nreason = \"lost\"\n",
    )
    .unwrap_err();
    assert!(e.contains("'y'") && e.contains("lost"), "{e}");
    let e = ConfigFile::parse("p.toml", "[alarms.z]\nwhen = \"sometimes\"\n").unwrap_err();
    assert!(e.contains("p.toml"), "{e}");
}

const TASK_MODEL: &str = bpmn!(
    r#"
  <process id="antrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="review"/>
    <userTask id="review"/>
    <sequenceFlow id="f1" sourceRef="review" targetRef="e"/>
    <endEvent id="e"/>
  </process>
"#
);

#[tokio::test]
async fn open_user_tasks_and_the_oldest_of_them_fire_and_clear() {
    let env = Env::new();
    env.deploy(TASK_MODEL).await;
    let config = r#"
[alarms.backlog]
when = "open_tasks"
element = "review"
above = 1

[alarms.forgotten]
when = "oldest_task"
older_than = "1d"
"#;
    let alarms = Alarms::new(ConfigFile::parse("postfach.toml", config).unwrap().alarms);
    let eval = |env: &Env| {
        names(
            &alarms
                .evaluate(&env.pf.reader().unwrap(), &Facts::default())
                .unwrap(),
        )
    };
    env.pf.start("antrag", no_vars(), None).await.unwrap();
    assert!(eval(&env).is_empty(), "one open task is not a backlog");
    env.pf.start("antrag", no_vars(), None).await.unwrap();
    assert_eq!(eval(&env), vec!["+backlog"]);
    env.advance(Duration::from_secs(86_401));
    assert_eq!(eval(&env), vec!["+forgotten"]);
    let open = env.pf.reader().unwrap().tasks(&Default::default()).unwrap();
    for t in &open {
        env.pf
            .complete_task(t.task.parse().unwrap(), "anna", no_vars())
            .await
            .unwrap();
    }
    let mut cleared = eval(&env);
    cleared.sort();
    assert_eq!(cleared, vec!["-backlog", "-forgotten"]);
    assert!(
        ConfigFile::parse(
            "x.toml",
            "[alarms.a]\nwhen = \"oldest_task\"\nolder_than = \"soon\""
        )
        .is_err()
    );
}

#[tokio::test]
async fn events_about_parked_messages_that_wait_for_their_topic_fire_and_clear() {
    let mut env = Env::new();
    env.pf.close();
    env.pf = postfach::Postfach::open_with(
        env.dir.path().join("test.redb"),
        postfach::Options {
            clock: env.clock.clone(),
            parked_events: Some(Some(postfach::ParkedEvents::default())),
            ..postfach::Options::default()
        },
    )
    .unwrap();
    env.deploy_reference().await;
    let alarms = Alarms::new(
        ConfigFile::parse(
            "postfach.toml",
            "[alarms.notifications_stuck]\nwhen = \"parked_events_unpublished\"\n",
        )
        .unwrap()
        .alarms,
    );
    let eval = |env: &Env| {
        names(
            &alarms
                .evaluate(&env.pf.reader().unwrap(), &Facts::default())
                .unwrap(),
        )
    };
    assert!(eval(&env).is_empty());
    env.waiting_order("4711").await;
    env.pf.publish(completion("4711", "evt-1")).await.unwrap();
    env.pf.publish(completion("4711", "evt-2")).await.unwrap(); // late: one event
    assert_eq!(eval(&env), vec!["+notifications_stuck"]);
    let (events, _) = env.pf.reader().unwrap().parked_events(10).unwrap();
    env.pf
        .parked_events_sent(events.iter().map(|e| e.id).collect())
        .await
        .unwrap();
    assert_eq!(eval(&env), vec!["-notifications_stuck"]);
}

#[tokio::test]
async fn no_backup_fires_after_its_limit_from_the_start_and_a_new_one_clears_it() {
    let env = Env::reference().await;
    let alarms = Alarms::new(
        ConfigFile::parse(
            "postfach.toml",
            "[alarms.backup_old]\nwhen = \"oldest_backup\"\nolder_than = \"2h\"\n",
        )
        .unwrap()
        .alarms,
    );
    let started = env.pf.now();
    let eval = |env: &Env, last_backup| {
        let facts = Facts {
            started,
            last_backup,
        };
        names(&alarms.evaluate(&env.pf.reader().unwrap(), &facts).unwrap())
    };
    assert!(eval(&env, None).is_empty(), "just started: not yet");
    env.advance(Duration::from_secs(2 * 3600 + 1));
    assert_eq!(eval(&env, None), vec!["+backup_old"], "none in 2 h");
    let taken = env.pf.now();
    assert_eq!(eval(&env, Some(taken)), vec!["-backup_old"]);
    env.advance(Duration::from_secs(2 * 3600));
    assert!(
        eval(&env, Some(taken)).is_empty(),
        "exactly 2 h is not older"
    );
    env.advance(Duration::from_secs(1));
    assert_eq!(eval(&env, Some(taken)), vec!["+backup_old"]);
    let bad = ConfigFile::parse(
        "postfach.toml",
        "[alarms.b]\nwhen = \"oldest_backup\"\nolder_than = \"soon\"\n",
    );
    let bad = bad.unwrap_err();
    assert!(bad.contains("alarm 'b'") && bad.contains("soon"), "{bad}");
}

//! A user task is a wait state with a record in the task list: its assignee,
//! candidates, due date, priority and form key come from Flowable, Camunda 7
//! and Zeebe attributes, expressions resolved when it is created. People claim,
//! give back, assign and complete it; a claim of a task someone else holds and
//! a completion by anyone but its holder are refused with who holds it; each
//! action is in the history with who did it. A timer boundary escalates it, and
//! it survives a restart.
#![cfg(feature = "server")]
use crate::common;
use common::*;
use postfach::{EngineError, Error, TaskRefusal, vars};
use std::time::Duration;

const MODEL: &str = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0">
  <process id="antrag" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="review"/>
    <userTask id="review" name="Antrag prüfen" flowable:candidateUsers="anna, ben"
        flowable:dueDate="${frist}" flowable:priority="60" flowable:formKey="antrag-form"/>
    <boundaryEvent id="zu_spaet" attachedToRef="review"><timerEventDefinition><timeDuration>PT1H</timeDuration></timerEventDefinition></boundaryEvent>
    <sequenceFlow id="f1" sourceRef="review" targetRef="approve"/>
    <sequenceFlow id="f2" sourceRef="zu_spaet" targetRef="escalate"/>
    <userTask id="approve">
      <extensionElements><zeebe:assignmentDefinition assignee="=chef"/></extensionElements>
    </userTask>
    <userTask id="escalate" flowable:candidateGroups="leads"/>
    <sequenceFlow id="f3" sourceRef="approve" targetRef="e"/>
    <sequenceFlow id="f4" sourceRef="escalate" targetRef="e"/>
    <endEvent id="e"/>
  </process>
</definitions>"#;

fn tasks(env: &Env, filter: postfach::ops::TaskFilter) -> Vec<postfach::ops::TaskView> {
    env.pf.reader().unwrap().tasks(&filter).unwrap()
}

fn id_of(t: &postfach::ops::TaskView) -> u64 {
    t.task.parse().unwrap()
}

async fn started(env: &Env) -> u64 {
    env.pf
        .start(
            "antrag",
            vars([
                ("frist", "2026-01-02T00:00:00Z".into()),
                ("chef", "carla".into()),
            ]),
            None,
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn people_claim_and_complete_tasks_and_the_wrong_person_is_told_who_holds_it() {
    let mut env = Env::new();
    env.deploy(MODEL).await;
    let id = started(&env).await;
    assert_eq!(env.waiting_at(id), vec!["review".to_string()]);

    let open = tasks(&env, Default::default());
    assert_eq!(open.len(), 1);
    let review = &open[0];
    assert_eq!(review.name.as_deref(), Some("Antrag prüfen"));
    assert_eq!(review.candidate_users, vec!["anna", "ben"]);
    assert_eq!(review.due.as_deref(), Some("2026-01-02T00:00:00Z"));
    assert_eq!(review.priority.as_deref(), Some("60"));
    assert_eq!(review.form_key.as_deref(), Some("antrag-form"));
    assert_eq!(review.assignee, None);
    let task = id_of(review);

    let by = |u: &str| postfach::ops::TaskFilter {
        candidate_user: Some(u.into()),
        ..Default::default()
    };
    assert_eq!(tasks(&env, by("anna")).len(), 1);
    assert_eq!(tasks(&env, by("zoe")).len(), 0);
    let due_before = |t: u64| postfach::ops::TaskFilter {
        due_before: Some(t),
        ..Default::default()
    };
    assert_eq!(tasks(&env, due_before(T0 + 2 * 86_400_000)).len(), 1);
    assert_eq!(tasks(&env, due_before(T0)).len(), 0);

    // survives a restart
    env.reopen();
    env.pf.claim_task(task, "anna").await.unwrap();
    match env.pf.claim_task(task, "ben").await {
        Err(Error::Engine(EngineError::TaskRefused {
            refusal: TaskRefusal::HeldBy(holder),
            ..
        })) => assert_eq!(holder, "anna"),
        other => panic!("ben's claim must be refused: {other:?}"),
    }
    let refused = env
        .pf
        .complete_task(task, "ben", vars([]))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("held by 'anna'"), "{refused}");
    assert_eq!(
        env.waiting_at(id),
        vec!["review".to_string()],
        "nothing moved"
    );

    env.pf
        .complete_task(task, "anna", vars([("geprueft", true.into())]))
        .await
        .unwrap();
    assert_eq!(env.waiting_at(id), vec!["approve".to_string()]);
    let approve = tasks(&env, Default::default());
    assert_eq!(
        approve[0].assignee.as_deref(),
        Some("carla"),
        "=chef resolved"
    );
    let approve = id_of(&approve[0]);
    assert!(
        env.pf
            .complete_task(approve, "anna", vars([]))
            .await
            .is_err()
    );
    env.pf.assign_task(approve, "dora", "carla").await.unwrap();
    env.pf
        .complete_task(approve, "dora", vars([]))
        .await
        .unwrap();
    assert_eq!(env.state(id), "completed");
    assert!(tasks(&env, Default::default()).is_empty());

    let view = env.pf.reader().unwrap().instance(id).unwrap().unwrap();
    let events: Vec<&str> = view.history.iter().map(|h| h.event.as_str()).collect();
    assert!(
        events.contains(&format!("task_claimed {task} by anna").as_str()),
        "{events:?}"
    );
    assert!(
        events.contains(&format!("task_completed {task} by anna").as_str()),
        "{events:?}"
    );
    assert!(events.contains(&format!("task_assigned {approve} to dora by carla").as_str()));
    assert_eq!(view.variables["geprueft"], true);
}

#[tokio::test]
async fn a_timer_boundary_escalates_an_open_task_and_metrics_show_open_tasks() {
    let env = Env::new();
    env.deploy(MODEL).await;
    let id = started(&env).await;
    env.advance(Duration::from_secs(1800));
    let metrics = postfach::server::metrics::render(
        &env.pf.reader().unwrap(),
        &postfach::server::backups::Backups::default(),
        &postfach::server::alarms::Alarms::new(Default::default()),
        env.pf.commit_stats(),
        env.pf.recovery(),
        &Default::default(),
    )
    .unwrap();
    assert!(
        metrics.contains("postfach_tasks_open{element=\"review\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("postfach_oldest_task_age_seconds{element=\"review\"} 1800"),
        "{metrics}"
    );

    env.advance(Duration::from_secs(1800));
    env.pf.work_until_idle().await.unwrap();
    assert_eq!(env.waiting_at(id), vec!["escalate".to_string()]);
    let open = tasks(&env, Default::default());
    assert_eq!(open.len(), 1, "the review task was withdrawn: {open:?}");
    assert_eq!(open[0].candidate_groups, vec!["leads"]);
    let blank = env.pf.claim_task(id_of(&open[0]), " ").await.unwrap_err();
    assert!(
        matches!(&blank, postfach::Error::OutOfRange(e) if e.field == "user"),
        "{blank}"
    );
    assert!(blank.to_string().contains("not only blanks"), "{blank}");
}

#[test]
fn the_command_line_lists_tasks_and_refuses_the_wrong_person() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("antrag.bpmn");
    std::fs::write(&model, MODEL).unwrap();
    let db = dir.path().join("db.redb");
    assert!(
        cli(&db, &["deploy", model.to_str().unwrap()])
            .status
            .success()
    );
    assert!(
        cli(&db, &["start", "antrag", "--var", "chef=carla"])
            .status
            .success()
    );
    let o = cli(&db, &["--json", "tasks", "--candidate-user", "anna"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let task = doc["tasks"][0]["task"].as_str().unwrap().to_string();
    assert!(
        cli(&db, &["task", "claim", &task, "--user", "anna"])
            .status
            .success()
    );
    let o = cli(&db, &["task", "claim", &task, "--user", "ben"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("held by 'anna'"), "{stderr}");
    assert!(stderr.contains("task unclaim"), "{stderr}");
    let o = cli(
        &db,
        &[
            "--json", "task", "complete", &task, "--user", "anna", "--var", "ok=true",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cli(&db, &["--json", "tasks", "--assignee", "carla"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["tasks"][0]["element"], "approve", "{doc}");
}

#[tokio::test]
async fn attributes_read_paths_and_text_with_expressions_inside_and_warn_where_they_cannot() {
    let env = Env::new();
    let model = r#"<definitions xmlns="http://www.omg.org/spec/BPMN/20100524/MODEL"
    xmlns:flowable="http://flowable.org/bpmn">
  <process id="vorlage" isExecutable="true">
    <startEvent id="s"/>
    <sequenceFlow id="f0" sourceRef="s" targetRef="pruefen"/>
    <userTask id="pruefen" flowable:assignee="pruefer_${antrag.stufe}"
        flowable:candidateGroups="${gruppe.name()}"/>
  </process>
</definitions>"#;
    let deployed = env
        .pf
        .deploy_checked("vorlage.bpmn", model, Default::default(), false)
        .await
        .unwrap();
    let warnings: Vec<_> = deployed.warnings.iter().map(|w| &w.message).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("candidateGroups '${gruppe.name()}' is not evaluated"),
        "{warnings:?}"
    );
    env.pf
        .start(
            "vorlage",
            vars([("antrag", serde_json::json!({"stufe": 2}))]),
            None,
        )
        .await
        .unwrap();
    let t = tasks(&env, Default::default()).remove(0);
    assert_eq!(t.assignee.as_deref(), Some("pruefer_2"));
}

//! The calls of the gateway service that combine library calls: a start
//! that waits for its instance's end, a stream of jobs, a decision
//! evaluated, a job's lease or incident changed by its key.

use super::proto;
use super::service::{Face, status, variables};
use crate::server::auth::Caller;
use tonic::Status;

/// How often a start with result looks at its instance.
const RESULT_EVERY: std::time::Duration = std::time::Duration::from_millis(20);
/// The longest a job stream waits for a commit before it looks again (a
/// job can become due by time alone: a retry's backoff, a lease run out).
const STREAM_LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

impl Face {
    /// A locked job as Zeebe's `ActivatedJob`, held by `worker` until
    /// `deadline`.
    pub(super) fn activated(
        &self,
        reader: &crate::ops::Reader,
        job: crate::LockedJob,
        worker: &str,
        deadline: u64,
    ) -> Result<proto::ActivatedJob, Status> {
        let t = job.task;
        let (process, version) = match reader
            .instance_record(t.instance)
            .map_err(|e| status(e.into()))?
        {
            Some(i) => (i.process, i.version),
            None => (String::new(), 0),
        };
        // the element's zeebe:taskHeaders, from the (cached) definition
        let headers: serde_json::Map<String, serde_json::Value> = reader
            .process(&process, version)
            .map_err(|e| status(e.into()))?
            .and_then(|p| {
                let el = p.at(p.index_of(&t.element)?);
                Some(
                    el.extras
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                        .collect(),
                )
            })
            .unwrap_or_default();
        Ok(proto::ActivatedJob {
            key: self.key(t.job),
            r#type: t.topic,
            process_instance_key: self.key(t.instance),
            process_definition_key: self.definition_key(&process, version),
            bpmn_process_id: process,
            process_definition_version: version as i32,
            element_id: t.element,
            element_instance_key: super::keys::element_key_of(self.pf.partition().index(), t.job),
            custom_headers: serde_json::Value::Object(headers).to_string(),
            worker: worker.to_string(),
            retries: 3_i32.saturating_sub(t.attempt as i32 - 1).max(1),
            deadline: deadline as i64,
            variables: serde_json::Value::Object(t.variables).to_string(),
            tenant_id: super::service::TENANT.into(),
            ..Default::default()
        })
    }

    /// `StreamActivatedJobs`: each job of the type, locked for `lease` ms
    /// and pushed as it becomes due, one at a time and only when the stream
    /// has room — so a job is locked for a client that is still there; one
    /// pushed to a client that then goes away is activated again once its
    /// lease runs out, never lost.
    pub(super) fn stream(
        &self,
        r: proto::StreamActivatedJobsRequest,
        lease: u64,
    ) -> super::service::Stream<proto::ActivatedJob> {
        let face = self.clone();
        let worker = if r.worker.is_empty() {
            "zeebe-stream".to_string()
        } else {
            r.worker
        };
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                let Ok(room) = tx.reserve().await else { break };
                let locked = if r.fetch_variable.is_empty() {
                    face.pf.lock_jobs(&r.r#type, 1, &worker, lease).await
                } else {
                    face.pf
                        .lock_jobs_fetching(&r.r#type, 1, &worker, lease, r.fetch_variable.clone())
                        .await
                };
                let job = match locked {
                    Ok(mut jobs) if !jobs.is_empty() => jobs.swap_remove(0),
                    Ok(_) => {
                        drop(room);
                        tokio::select! {
                            _ = face.pf.committed().notified() => {}
                            _ = tokio::time::sleep(STREAM_LOOK_EVERY) => {}
                            _ = tx.closed() => break,
                        }
                        continue;
                    }
                    Err(e) => {
                        room.send(Err(status(e)));
                        break;
                    }
                };
                let deadline = face.pf.now() + lease;
                let pushed = face
                    .pf
                    .reader()
                    .map_err(status)
                    .and_then(|reader| face.activated(&reader, job, &worker, deadline));
                let failed = pushed.is_err();
                room.send(pushed);
                if failed {
                    break;
                }
            }
        });
        Box::pin(tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(
            rx,
        ))
    }

    /// `CreateProcessInstanceWithResult`: the start, then the instance's
    /// variables once it completed (only `fetch` when named), or
    /// `DEADLINE_EXCEEDED` when it did not within `timeout_ms` (it runs on).
    pub(super) async fn with_result(
        &self,
        caller: Option<&Caller>,
        r: proto::CreateProcessInstanceWithResultRequest,
    ) -> Result<proto::CreateProcessInstanceWithResultResponse, Status> {
        let request = r
            .request
            .ok_or_else(|| Status::invalid_argument("request: the instance to create"))?;
        let started = self.create(caller, request).await?;
        let (_, id) = super::keys::id_of(started.process_instance_key)
            .ok_or_else(|| Status::internal("a key of postfach's own was not one"))?;
        let wait = super::service::wait_ms(r.request_timeout);
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(wait);
        loop {
            let view = self
                .pf
                .reader()
                .map_err(status)?
                .instance(id)
                .map_err(|e| status(e.into()))?
                .ok_or_else(|| Status::not_found(format!("instance {id} is gone")))?;
            match view.state {
                "completed" => {
                    let mut vars = view.variables;
                    if !r.fetch_variables.is_empty() {
                        vars.retain(|k, _| r.fetch_variables.contains(k));
                    }
                    return Ok(proto::CreateProcessInstanceWithResultResponse {
                        process_definition_key: started.process_definition_key,
                        bpmn_process_id: started.bpmn_process_id,
                        version: started.version,
                        process_instance_key: started.process_instance_key,
                        variables: serde_json::Value::Object(vars).to_string(),
                        tenant_id: started.tenant_id,
                        tags: Vec::new(),
                        business_id: started.business_id,
                    });
                }
                "active" | "incident" if tokio::time::Instant::now() < until => {
                    tokio::time::sleep(RESULT_EVERY).await;
                }
                "active" | "incident" => {
                    return Err(Status::deadline_exceeded(format!(
                        "instance {} did not complete within {wait} ms; it runs on (state {})",
                        started.process_instance_key, view.state
                    )));
                }
                other => {
                    return Err(Status::failed_precondition(format!(
                        "instance {} ended {other}, with no result",
                        started.process_instance_key
                    )));
                }
            }
        }
    }

    /// `EvaluateDecision`: the decision's latest version on `variables`.
    pub(super) fn evaluate(
        &self,
        r: proto::EvaluateDecisionRequest,
    ) -> Result<proto::EvaluateDecisionResponse, Status> {
        if r.decision_id.is_empty() {
            return Err(Status::invalid_argument(
                "decisionId: postfach evaluates a decision by its id",
            ));
        }
        let vars = variables("variables", &r.variables)?;
        let d = self.pf.decide(&r.decision_id, &vars).map_err(status)?;
        let key = self.definition_key(&d.decision, d.version);
        let output = d.value.to_string();
        Ok(proto::EvaluateDecisionResponse {
            decision_key: key,
            decision_id: d.decision.clone(),
            decision_name: d.decision.clone(),
            decision_version: d.version as i32,
            decision_output: output.clone(),
            evaluated_decisions: vec![proto::EvaluatedDecision {
                decision_key: key,
                decision_id: d.decision.clone(),
                decision_name: d.decision,
                decision_version: d.version as i32,
                decision_type: "DECISION_TABLE".into(),
                decision_output: output,
                ..Default::default()
            }],
            tenant_id: super::service::TENANT.into(),
            ..Default::default()
        })
    }

    /// `UpdateJobTimeout`: the lease of the worker holding the job reaches
    /// `timeout` ms from now.
    pub(super) async fn job_timeout(
        &self,
        caller: Option<&Caller>,
        r: proto::UpdateJobTimeoutRequest,
    ) -> Result<(), Status> {
        let (id, lease) = self.job(caller, r.job_key)?;
        let lease = lease.ok_or_else(|| {
            Status::failed_precondition(format!("job {} is not activated", r.job_key))
        })?;
        let by = super::service::millis(crate::limits::LEASE_EXTENSION, "timeout", r.timeout)?;
        self.pf.extend_lease(id, lease, by).await.map_err(status)?;
        Ok(())
    }

    /// `ResolveIncident` (the incident's key is its job's) and
    /// `UpdateJobRetries` of a job in an incident: the job runs again.
    pub(super) async fn retry(&self, field: &str, key: i64) -> Result<(), Status> {
        let id = self.own(field, key)?;
        let job = self
            .pf
            .reader()
            .map_err(status)?
            .job(id)
            .map_err(|e| status(e.into()))?
            .ok_or_else(|| Status::not_found(format!("{field} {key}: no such incident")))?;
        if job.state != "incident" {
            return Err(Status::failed_precondition(format!(
                "{field} {key}: job {key} is {}, not in an incident (postfach sets retries when a worker fails a job)",
                job.state
            )));
        }
        self.pf.retry_job(id).await.map_err(status)
    }
}

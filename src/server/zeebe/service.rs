//! The calls of Zeebe's gateway service, each mapped onto the library call
//! of its catalogue operation (see the module above for the invariant).

use super::keys::{id_of, key_of, key_of_name};
use super::proto::{self, gateway_server::Gateway};
pub use super::wire::OWNER;
pub(super) use super::wire::{
    TENANT, as_caller, millis, status, unimplemented, variables, wait_ms,
};
use crate::server::auth::{Caller, Keys};
use crate::server::catalogue::{self, Permission};
use crate::{Outcome, Postfach, Publish};
use std::pin::Pin;
use tonic::{Request, Response, Status};

/// How often a waiting `ActivateJobs` looks again.
const LONG_POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
/// Most jobs one `ActivateJobs` hands out.
const MAX_JOBS: i32 = 10_000;

/// The gateway service over one engine, under the API's tokens.
#[derive(Clone)]
pub struct Face {
    pub(super) pf: Postfach,
    keys: Keys,
    /// The address clients reach this face at (told by `Topology`).
    addr: std::net::SocketAddr,
}

pub(super) type Stream<T> =
    Pin<Box<dyn tonic::codegen::tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

impl Face {
    /// The face of `pf`, accepting the tokens of `keys`, reached at `addr`.
    pub fn new(pf: Postfach, keys: Keys, addr: std::net::SocketAddr) -> Face {
        Face { pf, keys, addr }
    }

    /// The caller of `req`, allowed the catalogue operation `op` (none: no
    /// token is configured).
    pub(super) async fn caller<T>(
        &self,
        req: &Request<T>,
        op: &str,
    ) -> Result<Option<Caller>, Status> {
        if self.keys.is_open() {
            return Ok(None);
        }
        let presented = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated(
                    "a valid bearer token is required: authorization: Bearer TOKEN",
                )
            })?;
        let caller = self
            .keys
            .who(presented)
            .await
            .map_err(Status::unauthenticated)?;
        let needs = catalogue::named(op).map_or(Permission::Admin, |o| o.permission);
        if !caller.may(needs) {
            return Err(Status::permission_denied(format!(
                "token '{}' may not call {op}: it needs permission '{}'",
                caller.name,
                needs.name()
            )));
        }
        Ok(Some(caller))
    }

    /// A worker limited to topics may touch only the jobs of those.
    fn topic_allowed(caller: Option<&Caller>, topic: &str) -> Result<(), Status> {
        match caller {
            Some(c) if !c.may_work_on(topic) => Err(Status::permission_denied(format!(
                "token '{}' may not work on jobs of type '{topic}'",
                c.name
            ))),
            _ => Ok(()),
        }
    }

    /// The id a key names on this partition, or why it names none.
    pub(super) fn own(&self, field: &str, key: i64) -> Result<u64, Status> {
        let p = self.pf.partition();
        match id_of(key) {
            Some((part, id)) if part == p.index() => Ok(id),
            Some((part, _)) => Err(Status::not_found(format!(
                "{field} {key} belongs to partition {part}, this is {p}"
            ))),
            None => Err(Status::not_found(format!(
                "{field} {key} is no key postfach gave out"
            ))),
        }
    }

    pub(super) fn key(&self, id: u64) -> i64 {
        key_of(self.pf.partition().index(), id)
    }

    pub(super) fn definition_key(&self, process: &str, version: u32) -> i64 {
        key_of_name(self.pf.partition().index(), &format!("{process}:{version}"))
    }

    /// The job a key names, with its topic checked against the caller's.
    pub(super) fn job(
        &self,
        caller: Option<&Caller>,
        key: i64,
    ) -> Result<(u64, Option<u64>), Status> {
        let id = self.own("jobKey", key)?;
        let (topic, lease) = self
            .pf
            .reader()
            .map_err(status)?
            .job_lease(id)
            .map_err(|e| status(e.into()))?
            .ok_or_else(|| Status::not_found(format!("job {key} does not exist (any more)")))?;
        if let Some(topic) = &topic {
            Self::topic_allowed(caller, topic)?;
        }
        Ok((id, lease))
    }

    /// The instance and token an element instance key names: a process
    /// instance (token 0), or the element a job runs for.
    fn element(&self, key: i64) -> Result<(u64, u64), Status> {
        const FIELD: &str = "elementInstanceKey";
        let p = self.pf.partition();
        match super::keys::element_of(key) {
            Some((_, part, _)) if part != p.index() => Err(Status::not_found(format!(
                "{FIELD} {key} belongs to partition {part}, this is {p}"
            ))),
            Some((false, _, id)) => Ok((id, 0)),
            Some((true, _, job)) => {
                let reader = self.pf.reader().map_err(status)?;
                let j = reader
                    .job(job)
                    .map_err(|e| status(e.into()))?
                    .filter(|j| j.instance.is_some())
                    .ok_or_else(|| {
                        Status::not_found(format!(
                            "{FIELD} {key}: the element of job {job} has ended"
                        ))
                    })?;
                let instance = j.instance.as_deref().unwrap_or("0").parse().unwrap_or(0);
                Ok((instance, j.token))
            }
            None => Err(Status::not_found(format!(
                "{FIELD} {key} is no key postfach gave out"
            ))),
        }
    }

    /// A process's latest version, or NOT_FOUND naming it.
    fn latest(&self, process: &str) -> Result<u32, Status> {
        let deployed = self
            .pf
            .reader()
            .map_err(status)?
            .deployed()
            .map_err(|e| status(e.into()))?;
        deployed
            .iter()
            .find(|d| d.process == process)
            .map(|d| d.latest_version)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "no process with BPMN process id '{process}' is deployed"
                ))
            })
    }

    /// The process a definition key names.
    fn process_of_key(&self, key: i64) -> Result<(String, u32), Status> {
        let deployed = self
            .pf
            .reader()
            .map_err(status)?
            .deployed()
            .map_err(|e| status(e.into()))?;
        deployed
            .iter()
            .flat_map(|d| {
                d.versions
                    .iter()
                    .map(move |v| (d.process.clone(), v.version))
            })
            .find(|(p, v)| self.definition_key(p, *v) == key)
            .ok_or_else(|| {
                Status::not_found(format!(
                    "processDefinitionKey {key} names no deployed process"
                ))
            })
    }

    /// A scoped starter may start only its processes and send only what
    /// they catch.
    fn starter_allowed(
        &self,
        caller: Option<&Caller>,
        process: Option<&str>,
        message: Option<&str>,
    ) -> Result<(), Status> {
        let Some(c) = caller else { return Ok(()) };
        let Some(processes) = c.started_processes() else {
            return Ok(());
        };
        let allowed = match (process, message) {
            (Some(p), _) => processes.contains(&p),
            (None, Some(m)) => {
                let reader = self.pf.reader().map_err(status)?;
                let mut any = false;
                for p in &processes {
                    any |= reader
                        .any_element(p, |k| k.catches_message() == Some(m))
                        .map_err(|e| status(e.into()))?;
                }
                any
            }
            (None, None) => true,
        };
        if allowed {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "token '{}' starts and sends only for the processes {}",
                c.name,
                processes.join(", ")
            )))
        }
    }
}

impl Face {
    /// Starts the latest version of the process `r` names, as `caller`.
    pub(super) async fn create(
        &self,
        caller: Option<&Caller>,
        r: proto::CreateProcessInstanceRequest,
    ) -> Result<proto::CreateProcessInstanceResponse, Status> {
        let (process, asked) = if r.bpmn_process_id.is_empty() {
            let (p, v) = self.process_of_key(r.process_definition_key)?;
            (p, Some(v))
        } else {
            (
                r.bpmn_process_id.clone(),
                (r.version > 0).then_some(r.version as u32),
            )
        };
        self.starter_allowed(caller, Some(&process), None)?;
        if !r.start_instructions.is_empty() {
            return Err(Status::invalid_argument(
                "startInstructions: postfach starts an instance at its start event only",
            ));
        }
        let latest = self.latest(&process)?;
        if let Some(v) = asked.filter(|v| *v != latest) {
            return Err(Status::failed_precondition(format!(
                "postfach starts the latest version of '{process}' ({latest}), not version {v}"
            )));
        }
        let vars = variables("variables", &r.variables)?;
        let id = self
            .pf
            .start(&process, vars, r.business_id.clone())
            .await
            .map_err(status)?;
        Ok(proto::CreateProcessInstanceResponse {
            process_definition_key: self.definition_key(&process, latest),
            bpmn_process_id: process,
            version: latest as i32,
            process_instance_key: self.key(id),
            tenant_id: TENANT.into(),
            tags: Vec::new(),
            business_id: r.business_id,
        })
    }

    /// Deploys each named resource (BPMN or DMN, by its content) as the
    /// caller: the deployment's key and what each stored.
    async fn deploy(
        &self,
        caller: Option<&Caller>,
        resources: Vec<(String, Vec<u8>)>,
    ) -> Result<(i64, Vec<proto::deployment::Metadata>), Status> {
        if resources.is_empty() {
            return Err(Status::invalid_argument("resources: nothing to deploy"));
        }
        let mut out = Vec::new();
        let mut names = Vec::new();
        for (name, content) in resources {
            let xml = std::str::from_utf8(&content).map_err(|e| {
                Status::invalid_argument(format!("resource '{name}' is not UTF-8 text: {e}"))
            })?;
            let deploy = self
                .pf
                .deploy_checked(&name, xml, Default::default(), false);
            let d = as_caller(caller, deploy).await.map_err(|e| {
                let s = status(e);
                Status::new(s.code(), format!("resource '{name}': {}", s.message()))
            })?;
            for one in d.deployed {
                names.push(format!("{}:{}", one.process, one.version));
                let key = self.definition_key(&one.process, one.version);
                out.push(if one.decision {
                    proto::deployment::Metadata::Decision(proto::DecisionMetadata {
                        dmn_decision_id: one.process.clone(),
                        dmn_decision_name: one.process,
                        version: one.version as i32,
                        decision_key: key,
                        dmn_decision_requirements_id: String::new(),
                        decision_requirements_key: 0,
                        tenant_id: TENANT.into(),
                    })
                } else {
                    proto::deployment::Metadata::Process(proto::ProcessMetadata {
                        bpmn_process_id: one.process,
                        version: one.version as i32,
                        process_definition_key: key,
                        resource_name: name.clone(),
                        tenant_id: TENANT.into(),
                    })
                });
            }
        }
        let key = key_of_name(self.pf.partition().index(), &names.join(","));
        Ok((key, out))
    }
}

#[tonic::async_trait]
impl Gateway for Face {
    type ActivateJobsStream = Stream<proto::ActivateJobsResponse>;
    type StreamActivatedJobsStream = Stream<proto::ActivatedJob>;

    async fn topology(
        &self,
        req: Request<proto::TopologyRequest>,
    ) -> Result<Response<proto::TopologyResponse>, Status> {
        self.caller(&req, "partition").await?;
        let p = self.pf.partition();
        let partition = proto::Partition {
            partition_id: p.index() as i32 + 1,
            role: proto::partition::PartitionBrokerRole::Leader as i32,
            health: proto::partition::PartitionBrokerHealth::Healthy as i32,
        };
        Ok(Response::new(proto::TopologyResponse {
            brokers: vec![proto::BrokerInfo {
                node_id: p.index() as i32,
                host: self.addr.ip().to_string(),
                port: self.addr.port() as i32,
                partitions: vec![partition],
                version: env!("CARGO_PKG_VERSION").into(),
            }],
            cluster_size: p.count() as i32,
            partitions_count: p.count() as i32,
            replication_factor: 1,
            gateway_version: format!("postfach {}", env!("CARGO_PKG_VERSION")),
            cluster_id: String::new(),
        }))
    }

    async fn deploy_resource(
        &self,
        req: Request<proto::DeployResourceRequest>,
    ) -> Result<Response<proto::DeployResourceResponse>, Status> {
        let caller = self.caller(&req, "deploy").await?;
        let r = req.into_inner();
        let resources = r
            .resources
            .into_iter()
            .map(|x| (x.name, x.content))
            .collect();
        let (key, deployed) = self.deploy(caller.as_ref(), resources).await?;
        Ok(Response::new(proto::DeployResourceResponse {
            key,
            deployments: deployed
                .into_iter()
                .map(|m| proto::Deployment { metadata: Some(m) })
                .collect(),
            tenant_id: TENANT.into(),
        }))
    }

    async fn deploy_process(
        &self,
        req: Request<proto::DeployProcessRequest>,
    ) -> Result<Response<proto::DeployProcessResponse>, Status> {
        let caller = self.caller(&req, "deploy").await?;
        let r = req.into_inner();
        let resources = r
            .processes
            .into_iter()
            .map(|x| (x.name, x.definition))
            .collect();
        let (key, deployed) = self.deploy(caller.as_ref(), resources).await?;
        let processes = deployed
            .into_iter()
            .filter_map(|m| match m {
                proto::deployment::Metadata::Process(p) => Some(p),
                _ => None,
            })
            .collect();
        Ok(Response::new(proto::DeployProcessResponse {
            key,
            processes,
        }))
    }

    async fn create_process_instance(
        &self,
        req: Request<proto::CreateProcessInstanceRequest>,
    ) -> Result<Response<proto::CreateProcessInstanceResponse>, Status> {
        let caller = self.caller(&req, "start").await?;
        Ok(Response::new(
            self.create(caller.as_ref(), req.into_inner()).await?,
        ))
    }

    async fn publish_message(
        &self,
        req: Request<proto::PublishMessageRequest>,
    ) -> Result<Response<proto::PublishMessageResponse>, Status> {
        let caller = self.caller(&req, "publish").await?;
        let r = req.into_inner();
        self.starter_allowed(caller.as_ref(), None, Some(&r.name))?;
        let ttl = millis(crate::limits::MESSAGE_TTL, "timeToLive", r.time_to_live)?;
        let message_id = (!r.message_id.is_empty()).then(|| r.message_id.clone());
        let d = self
            .pf
            .publish(Publish {
                name: r.name.clone(),
                key: r.correlation_key,
                message_id,
                variables: variables("variables", &r.variables)?,
                ttl: Some(ttl),
                attributes: Vec::new(),
            })
            .await
            .map_err(status)?;
        if d.outcome == Outcome::Duplicate {
            return Err(Status::already_exists(format!(
                "message '{}' with id '{}' was published before",
                r.name, d.message_id
            )));
        }
        Ok(Response::new(proto::PublishMessageResponse {
            key: key_of_name(
                self.pf.partition().index(),
                &format!("{}/{}", r.name, d.message_id),
            ),
            tenant_id: TENANT.into(),
        }))
    }

    async fn activate_jobs(
        &self,
        req: Request<proto::ActivateJobsRequest>,
    ) -> Result<Response<Self::ActivateJobsStream>, Status> {
        let caller = self.caller(&req, "acquire").await?;
        let r = req.into_inner();
        if r.r#type.is_empty() {
            return Err(Status::invalid_argument(
                "type: name the job type to activate",
            ));
        }
        Self::topic_allowed(caller.as_ref(), &r.r#type)?;
        if !(1..=MAX_JOBS).contains(&r.max_jobs_to_activate) {
            return Err(Status::invalid_argument(format!(
                "maxJobsToActivate {} is not 1 to {MAX_JOBS}",
                r.max_jobs_to_activate
            )));
        }
        let lease = millis(crate::limits::LEASE, "timeout", r.timeout)?;
        let wait_ms = wait_ms(r.request_timeout);
        let worker = if r.worker.is_empty() {
            "zeebe-worker".to_string()
        } else {
            r.worker.clone()
        };
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
        let jobs = loop {
            let max = r.max_jobs_to_activate as usize;
            let locked = if r.fetch_variable.is_empty() {
                self.pf.lock_jobs(&r.r#type, max, &worker, lease).await
            } else {
                self.pf
                    .lock_jobs_fetching(&r.r#type, max, &worker, lease, r.fetch_variable.clone())
                    .await
            }
            .map_err(status)?;
            if !locked.is_empty() || tokio::time::Instant::now() >= until {
                break locked;
            }
            tokio::time::sleep(LONG_POLL_EVERY).await;
        };
        let reader = self.pf.reader().map_err(status)?;
        let deadline = self.pf.now() + lease;
        let out = jobs
            .into_iter()
            .map(|j| self.activated(&reader, j, &worker, deadline))
            .collect::<Result<Vec<_>, _>>()?;
        let answer = proto::ActivateJobsResponse { jobs: out };
        Ok(Response::new(Box::pin(tonic::codegen::tokio_stream::iter(
            [Ok(answer)],
        ))))
    }

    async fn stream_activated_jobs(
        &self,
        req: Request<proto::StreamActivatedJobsRequest>,
    ) -> Result<Response<Self::StreamActivatedJobsStream>, Status> {
        let caller = self.caller(&req, "acquire").await?;
        let r = req.into_inner();
        if r.r#type.is_empty() {
            return Err(Status::invalid_argument(
                "type: name the job type to stream",
            ));
        }
        Self::topic_allowed(caller.as_ref(), &r.r#type)?;
        let lease = millis(crate::limits::LEASE, "timeout", r.timeout)?;
        Ok(Response::new(self.stream(r, lease)))
    }

    async fn complete_job(
        &self,
        req: Request<proto::CompleteJobRequest>,
    ) -> Result<Response<proto::CompleteJobResponse>, Status> {
        let caller = self.caller(&req, "complete").await?;
        let r = req.into_inner();
        let (id, lease) = self.job(caller.as_ref(), r.job_key)?;
        let vars = variables("variables", &r.variables)?;
        self.pf
            .complete_job(id, lease, vars)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::CompleteJobResponse {}))
    }

    async fn fail_job(
        &self,
        req: Request<proto::FailJobRequest>,
    ) -> Result<Response<proto::FailJobResponse>, Status> {
        let caller = self.caller(&req, "fail").await?;
        let r = req.into_inner();
        let (id, lease) = self.job(caller.as_ref(), r.job_key)?;
        let retries = u32::try_from(r.retries)
            .map_err(|_| Status::invalid_argument(format!("retries {} is negative", r.retries)))?;
        let backoff = match r.retry_back_off {
            0 => None,
            ms => Some(millis(crate::limits::RETRY_DELAY, "retryBackOff", ms)?),
        };
        let error = if r.error_message.is_empty() {
            "failed by a Zeebe worker"
        } else {
            &r.error_message
        };
        self.pf
            .fail_job_with(id, lease, error, Some(retries), backoff)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::FailJobResponse {}))
    }

    async fn throw_error(
        &self,
        req: Request<proto::ThrowErrorRequest>,
    ) -> Result<Response<proto::ThrowErrorResponse>, Status> {
        let caller = self.caller(&req, "bpmn_error").await?;
        let r = req.into_inner();
        let (id, lease) = self.job(caller.as_ref(), r.job_key)?;
        if r.error_code.is_empty() {
            return Err(Status::invalid_argument(
                "errorCode: name the BPMN error thrown",
            ));
        }
        let vars = variables("variables", &r.variables)?;
        self.pf
            .throw_error(id, lease, &r.error_code, &r.error_message, vars)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::ThrowErrorResponse {}))
    }

    async fn broadcast_signal(
        &self,
        req: Request<proto::BroadcastSignalRequest>,
    ) -> Result<Response<proto::BroadcastSignalResponse>, Status> {
        self.caller(&req, "signal").await?;
        let r = req.into_inner();
        let vars = variables("variables", &r.variables)?;
        self.pf.signal(&r.signal_name, vars).await.map_err(status)?;
        Ok(Response::new(proto::BroadcastSignalResponse {
            key: key_of_name(self.pf.partition().index(), &r.signal_name),
            tenant_id: TENANT.into(),
        }))
    }

    async fn cancel_process_instance(
        &self,
        req: Request<proto::CancelProcessInstanceRequest>,
    ) -> Result<Response<proto::CancelProcessInstanceResponse>, Status> {
        let caller = self.caller(&req, "cancel_instance").await?;
        let id = self.own("processInstanceKey", req.into_inner().process_instance_key)?;
        as_caller(caller.as_ref(), self.pf.cancel_instance(id))
            .await
            .map_err(status)?;
        Ok(Response::new(proto::CancelProcessInstanceResponse {}))
    }

    async fn create_process_instance_with_result(
        &self,
        req: Request<proto::CreateProcessInstanceWithResultRequest>,
    ) -> Result<Response<proto::CreateProcessInstanceWithResultResponse>, Status> {
        let caller = self.caller(&req, "start").await?;
        let answer = self.with_result(caller.as_ref(), req.into_inner()).await?;
        Ok(Response::new(answer))
    }

    async fn evaluate_decision(
        &self,
        req: Request<proto::EvaluateDecisionRequest>,
    ) -> Result<Response<proto::EvaluateDecisionResponse>, Status> {
        self.caller(&req, "evaluate").await?;
        Ok(Response::new(self.evaluate(req.into_inner())?))
    }

    async fn resolve_incident(
        &self,
        req: Request<proto::ResolveIncidentRequest>,
    ) -> Result<Response<proto::ResolveIncidentResponse>, Status> {
        self.caller(&req, "retry").await?;
        self.retry("incidentKey", req.into_inner().incident_key)
            .await?;
        Ok(Response::new(proto::ResolveIncidentResponse {}))
    }

    async fn set_variables(
        &self,
        req: Request<proto::SetVariablesRequest>,
    ) -> Result<Response<proto::SetVariablesResponse>, Status> {
        let caller = self.caller(&req, "set_variables").await?;
        let r = req.into_inner();
        let vars = variables("variables", &r.variables)?;
        let (instance, token) = self.element(r.element_instance_key)?;
        // the instance itself is its own scope: local or not is the same
        let set = self
            .pf
            .set_variables(instance, token, r.local && token != 0, vars);
        as_caller(caller.as_ref(), set).await.map_err(status)?;
        Ok(Response::new(proto::SetVariablesResponse {
            key: r.element_instance_key,
        }))
    }

    async fn update_job_retries(
        &self,
        req: Request<proto::UpdateJobRetriesRequest>,
    ) -> Result<Response<proto::UpdateJobRetriesResponse>, Status> {
        self.caller(&req, "retry").await?;
        let r = req.into_inner();
        if r.retries < 1 {
            return Err(Status::invalid_argument(format!(
                "retries {} is not at least 1",
                r.retries
            )));
        }
        self.retry("jobKey", r.job_key).await?;
        Ok(Response::new(proto::UpdateJobRetriesResponse {}))
    }

    async fn modify_process_instance(
        &self,
        _req: Request<proto::ModifyProcessInstanceRequest>,
    ) -> Result<Response<proto::ModifyProcessInstanceResponse>, Status> {
        unimplemented("ModifyProcessInstance")
    }

    async fn migrate_process_instance(
        &self,
        _req: Request<proto::MigrateProcessInstanceRequest>,
    ) -> Result<Response<proto::MigrateProcessInstanceResponse>, Status> {
        unimplemented("MigrateProcessInstance")
    }

    async fn update_job_timeout(
        &self,
        req: Request<proto::UpdateJobTimeoutRequest>,
    ) -> Result<Response<proto::UpdateJobTimeoutResponse>, Status> {
        let caller = self.caller(&req, "extend").await?;
        self.job_timeout(caller.as_ref(), req.into_inner()).await?;
        Ok(Response::new(proto::UpdateJobTimeoutResponse {}))
    }

    async fn delete_resource(
        &self,
        _req: Request<proto::DeleteResourceRequest>,
    ) -> Result<Response<proto::DeleteResourceResponse>, Status> {
        unimplemented("DeleteResource")
    }

    async fn evaluate_conditional(
        &self,
        _req: Request<proto::EvaluateConditionalRequest>,
    ) -> Result<Response<proto::EvaluateConditionalResponse>, Status> {
        unimplemented("EvaluateConditional")
    }
}

//! What a service task's implementation is: the [`Handler`] a host
//! registers for a topic, what it may answer ([`HandlerError`]), and the
//! registry the facade keeps. The executor that runs them lives in
//! [`crate::jobs`], above the facade.
//!
//! Invariant: plain types; nothing here runs a job or touches the database.

use crate::engine::JobContext;
use crate::model::Vars;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

/// Why a handler did not complete its job.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// A technical failure: the job is retried, then becomes an incident.
    #[error("{0}")]
    Failed(String),
    /// A business error for the model: an error boundary event with this code on
    /// the task takes the token; without one the job becomes an incident.
    #[error("BPMN error {code}: {message}")]
    Bpmn {
        /// The error code an error boundary event catches.
        code: String,
        /// What went wrong, for people.
        message: String,
        /// Variables merged into the instance when a boundary catches it.
        variables: Vars,
    },
}

impl HandlerError {
    /// A BPMN error with `code`, for an error boundary event.
    pub fn bpmn(code: &str, message: &str) -> Self {
        HandlerError::Bpmn {
            code: code.into(),
            message: message.into(),
            variables: Vars::new(),
        }
    }
}

impl From<String> for HandlerError {
    fn from(s: String) -> Self {
        Self::Failed(s)
    }
}
impl From<&str> for HandlerError {
    fn from(s: &str) -> Self {
        Self::Failed(s.to_string())
    }
}

/// The future a handler returns.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Vars, HandlerError>> + Send>>;

/// A service task implementation; any `Fn(JobContext) -> impl Future<Output = Result<Vars, HandlerError>>`.
pub trait Handler: Send + Sync + 'static {
    /// Runs the job; the result completes it, fails it or throws a BPMN error.
    fn call(&self, ctx: JobContext) -> HandlerFuture;
}

impl<F, Fut> Handler for F
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vars, HandlerError>> + Send + 'static,
{
    fn call(&self, ctx: JobContext) -> HandlerFuture {
        Box::pin(self(ctx))
    }
}

/// Handlers by topic.
#[derive(Default)]
pub struct Handlers(RwLock<HashMap<String, Arc<dyn Handler>>>);

impl Handlers {
    pub(crate) fn insert(&self, topic: &str, h: Arc<dyn Handler>) {
        if let Ok(mut m) = self.0.write() {
            m.insert(topic.to_string(), h);
        }
    }
    pub(crate) fn get(&self, topic: &str) -> Option<Arc<dyn Handler>> {
        self.0.read().ok()?.get(topic).cloned()
    }
    pub(crate) fn topics(&self) -> Vec<String> {
        self.0
            .read()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }
}

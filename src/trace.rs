//! Traces across the message path: spans for a Pub/Sub delivery (receive →
//! decode → publish → group commit → ack), a job's execution and an outbox
//! publish, continuing the W3C trace context (`traceparent`, `tracestate`)
//! a publisher put into the message attributes and passing it on in outbox
//! messages. Exported over OTLP/HTTP by the layer [`otlp`] builds (feature
//! `otlp`, off until `[tracing] otlp_endpoint` or
//! `$OTEL_EXPORTER_OTLP_ENDPOINT` asks for it).
//!
//! Invariant: every span has target [`TARGET`], so a subscriber that does not
//! export traces filters them all out at their call sites (they cost nothing
//! then), and the log output never changes with tracing on or off. Trace
//! context is telemetry, not data: it is kept in memory only (a job created
//! before a restart starts a new trace), never in the database or the log.

use std::collections::HashMap;
use std::sync::Mutex;

/// The target of every span postfach opens.
pub const TARGET: &str = "postfach::otel";

/// The W3C trace-context attribute of a message.
pub const TRACEPARENT: &str = "traceparent";

/// The W3C trace-state attribute of a message.
pub const TRACESTATE: &str = "tracestate";

/// Makes `span` continue the W3C trace context found in `attributes` (a
/// message's). Without the feature, or without a `traceparent`, nothing.
pub fn continue_from<'a>(
    span: &tracing::Span,
    attributes: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        if span.is_disabled() {
            return;
        }
        let carrier: HashMap<String, String> = attributes
            .into_iter()
            .filter(|(k, _)| *k == TRACEPARENT || *k == TRACESTATE)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if carrier.contains_key(TRACEPARENT) {
            let parent =
                opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
            let _ = span.set_parent(parent);
        }
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = (span, attributes);
    }
}

/// The W3C trace context of `span` as message attributes (`traceparent`,
/// and `tracestate` when there is one); empty when no trace is recorded.
pub fn context_of(span: &tracing::Span) -> Vec<(String, String)> {
    #[cfg(feature = "otlp")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        if span.is_disabled() {
            return Vec::new();
        }
        let cx = span.context();
        if !cx.span().span_context().is_valid() {
            return Vec::new();
        }
        let mut carrier: HashMap<String, String> = HashMap::new();
        opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .inject_context(&cx, &mut carrier);
        let mut out: Vec<(String, String)> =
            carrier.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        out.sort();
        out
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = span;
        Vec::new()
    }
}

/// The `traceparent` of the current span, when a trace is recorded.
pub(crate) fn current_traceparent() -> Option<String> {
    context_of(&tracing::Span::current())
        .into_iter()
        .find(|(k, _)| k == TRACEPARENT)
        .map(|(_, v)| v)
}

/// Most job trace contexts remembered; the oldest are forgotten first.
const JOBS_REMEMBERED: usize = 65_536;

/// The trace context of the command that created each job, until the job
/// runs: the writer notes it, the executor takes it.
#[derive(Default)]
pub(crate) struct JobTraces {
    inner: Mutex<(HashMap<u64, String>, std::collections::VecDeque<u64>)>,
}

impl JobTraces {
    /// Notes `traceparent` for the jobs `ids`.
    pub(crate) fn note(&self, ids: &[u64], traceparent: &str) {
        let Ok(mut g) = self.inner.lock() else { return };
        let (map, order) = &mut *g;
        for &id in ids {
            if map.insert(id, traceparent.to_string()).is_none() {
                order.push_back(id);
            }
        }
        while order.len() > JOBS_REMEMBERED {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    /// The trace context job `id` was created in, once.
    pub(crate) fn take(&self, id: u64) -> Option<String> {
        self.inner.lock().ok()?.0.remove(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_traces_are_taken_once_and_bounded() {
        let t = JobTraces::default();
        t.note(&[1, 2], "00-a-b-01");
        assert_eq!(t.take(1).as_deref(), Some("00-a-b-01"));
        assert_eq!(t.take(1), None);
        let many: Vec<u64> = (10..10 + JOBS_REMEMBERED as u64 + 5).collect();
        t.note(&many, "x");
        assert_eq!(t.take(2), None, "the oldest were forgotten");
        assert_eq!(
            t.take(10 + JOBS_REMEMBERED as u64 + 4).as_deref(),
            Some("x")
        );
    }
}

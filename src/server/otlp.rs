//! The OTLP/HTTP exporter of postfach's spans ([`crate::trace`]): a
//! `tracing` layer over an OpenTelemetry batch span processor, set up by the
//! binary before anything runs and flushed when it ends.
//!
//! Invariant: only spans of target [`crate::trace::TARGET`] reach it; no
//! endpoint configured (`[tracing] otlp_endpoint`,
//! `$OTEL_EXPORTER_OTLP_ENDPOINT`, `$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! means no exporter at all.

use crate::trace::TARGET;
use std::collections::HashMap;

/// An OTLP/HTTP exporting layer and the provider to flush at exit.
pub struct Otlp {
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
}

impl Otlp {
    /// Builds the exporter: to `endpoint` (the collector's base URL; spans go
    /// to `/v1/traces` under it) or, without one, where the standard
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// say. `None` when neither asks for traces.
    pub fn from_settings(endpoint: Option<&str>) -> Result<Option<Self>, String> {
        use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
        let from_env = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
        let endpoint = endpoint.map(str::trim).filter(|e| !e.is_empty());
        if endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_headers(HashMap::new());
        if let Some(e) = endpoint {
            builder = builder.with_endpoint(traces_url(e));
        }
        let exporter = builder.build().map_err(|e| format!("OTLP exporter: {e}"))?;
        let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "postfach".to_string());
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service)
                    .build(),
            )
            .build();
        Ok(Some(Self { provider }))
    }

    /// The layer that turns postfach's spans into exported ones.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        use opentelemetry::trace::TracerProvider as _;
        use tracing_subscriber::Layer as _;
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("postfach"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(TARGET, tracing::Level::TRACE),
            )
    }

    /// Exports what is still buffered; call before the process ends.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("postfach: traces not all exported at exit: {e}");
        }
    }
}

/// The OTLP/HTTP traces URL of a collector's base URL (kept when it names
/// `/v1/traces` already).
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_url_is_under_the_collectors_base() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }
}

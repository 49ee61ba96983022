//! The OpenTelemetry pipeline of `[otel]`: an OTLP span exporter (HTTP/protobuf or gRPC), a
//! batch processor, a parent-based ratio sampler, the W3C trace-context propagator, and the
//! `tracing` layer that turns the node's spans (target [`switchboard_telemetry::trace::TARGET`])
//! into OpenTelemetry spans. The resource is `service.name` (`OTEL_SERVICE_NAME` or
//! `otel.service_name`), `service.instance.id` (the configured `cluster.node_id`) and
//! `OTEL_RESOURCE_ATTRIBUTES` (the SDK's environment detectors).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use crate::config::OtelConfig;

/// The exporter's provider, kept so that [`Pipeline::shutdown`] can flush the last spans.
pub struct Pipeline {
    provider: SdkTracerProvider,
}

impl Pipeline {
    /// Exports what is still buffered (bounded by the SDK's export timeout) and stops.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("switchboard: flushing traces failed: {e}");
        }
    }
}

/// Builds the pipeline when an endpoint is configured; `Ok(None)` when tracing is off. Must run
/// inside the Tokio runtime (the batch processor and the gRPC client run on it).
pub fn pipeline(
    config: &OtelConfig,
    node_id: &str,
) -> Result<Option<(Pipeline, opentelemetry_sdk::trace::Tracer)>, String> {
    let Some(endpoint) = config.effective_endpoint() else {
        return Ok(None);
    };
    let exporter = if config.grpc() {
        SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.clone())
            .build()
    } else {
        let base = endpoint.trim_end_matches('/');
        let url = if base.ends_with("/v1/traces") {
            base.to_owned()
        } else {
            format!("{base}/v1/traces")
        };
        SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .build()
    }
    .map_err(|e| format!("cannot set up the OTLP exporter for {endpoint}: {e}"))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(config.service_name.clone());
    }
    if !node_id.is_empty() {
        // The configured node id (the pod name, in the chart): which replica made a span.
        let id = opentelemetry::KeyValue::new("service.instance.id", node_id.to_owned());
        resource = resource.with_attribute(id);
    }
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sample_ratio)));
    // The batch processor on the node's Tokio runtime: both exporters' clients (reqwest, tonic)
    // need it (the SDK's default processor runs on a thread of its own, without one).
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler)
        .with_resource(resource.build())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("switchboard");
    switchboard_telemetry::trace::set_enabled();
    Ok(Some((Pipeline { provider }, tracer)))
}

//! The OpenTelemetry pipeline of `[otel]`: an OTLP span exporter (HTTP/protobuf or gRPC), a
//! batch processor, a parent-based ratio sampler, the W3C trace-context propagator, and the
//! `tracing` layer that turns the node's spans (target [`switchboard_telemetry::trace::TARGET`])
//! into OpenTelemetry spans. The resource is `service.name` (`OTEL_SERVICE_NAME` or
//! `otel.service_name`), `service.instance.id` (the configured `cluster.node_id`) and
//! `OTEL_RESOURCE_ATTRIBUTES` (the SDK's environment detectors).

use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter as OtlpExporter, WithExportConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use parking_lot::Mutex;

use crate::config::OtelConfig;

/// The exporter's provider, kept so that [`Pipeline::shutdown`] can flush the last spans.
pub struct Pipeline {
    provider: SdkTracerProvider,
}

impl Pipeline {
    /// Exports what is still buffered, waiting at most `limit`, and stops: the SDK's shutdown
    /// blocks while it flushes, so it runs on a thread of its own, which is left behind (and ends
    /// with the process) when the collector does not answer in time.
    pub async fn shutdown_within(self, limit: Duration) {
        let (done, finished) = tokio::sync::oneshot::channel();
        let provider = self.provider;
        std::thread::spawn(move || {
            let _ = done.send(provider.shutdown());
        });
        match tokio::time::timeout(limit, finished).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the last spans could not be exported"),
            _ => tracing::warn!(
                ?limit,
                "the collector did not take the last spans in time; exiting without them"
            ),
        }
    }
}

/// What the SDK would panic on or silently read otherwise: an endpoint that is not http(s), an
/// `OTEL_EXPORTER_OTLP_PROTOCOL` it does not speak, a batch queue or batch of size 0.
fn check_environment(endpoint: &str) -> Result<(), String> {
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(format!(
            "the OTLP endpoint `{endpoint}` is not an http:// or https:// URL"
        ));
    }
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
    if !matches!(protocol.as_str(), "" | "grpc" | "http/protobuf") {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL `{protocol}` is not `http/protobuf` or `grpc`"
        ));
    }
    for name in ["OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] {
        if std::env::var(name).is_ok_and(|v| v.trim() == "0") {
            return Err(format!("{name} must be at least 1"));
        }
    }
    Ok(())
}

/// How often at most a failing exporter is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// An exporter whose failures are logged (a warning at most every [`WARN_EVERY`], with the
/// number of spans lost since the last one): the SDK drops a batch it cannot export silently.
#[derive(Debug)]
struct Reported<E> {
    inner: E,
    endpoint: String,
    /// When the last warning was written, and the spans lost since.
    warned: Mutex<(Option<Instant>, usize)>,
}

impl<E> Reported<E> {
    fn new(inner: E, endpoint: String) -> Reported<E> {
        Reported {
            inner,
            endpoint,
            warned: Mutex::new((None, 0)),
        }
    }
}

impl<E: SpanExporter> SpanExporter for Reported<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let out = self.inner.export(batch).await;
        if let Err(e) = &out {
            let mut warned = self.warned.lock();
            warned.1 += spans;
            if warned.0.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                tracing::warn!(endpoint = %self.endpoint, error = %e, spans_lost = warned.1,
                    "could not export spans to the OTLP collector; serving goes on (next warning in a minute at the earliest)");
                *warned = (Some(Instant::now()), 0);
            }
        }
        out
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
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
    check_environment(&endpoint)?;
    let exporter = if config.grpc() {
        OtlpExporter::builder()
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
        OtlpExporter::builder()
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
    let exporter = Reported::new(exporter, endpoint.clone());
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

//! `[otel]` (traces exported over OTLP) and `[metrics]` (the `/metrics` listener and label caps).

use serde::{Deserialize, Serialize};

/// Traces: OpenTelemetry spans exported over OTLP. Off while no endpoint is set here or in
/// `OTEL_EXPORTER_OTLP_ENDPOINT`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtelConfig {
    /// The collector's OTLP endpoint: for `http/protobuf` its base URL
    /// (`http://collector:4318`; spans go to `/v1/traces` below it), for `grpc` its address
    /// (`http://collector:4317`). Empty: `OTEL_EXPORTER_OTLP_ENDPOINT`, and with neither set,
    /// no traces.
    pub endpoint: String,
    /// `http/protobuf` or `grpc` (`OTEL_EXPORTER_OTLP_PROTOCOL` when this is left empty).
    pub protocol: String,
    /// `service.name` of the node's spans; `OTEL_SERVICE_NAME` wins when set.
    /// `OTEL_RESOURCE_ATTRIBUTES` adds attributes (`k8s.pod.name=…,deployment.environment=…`).
    pub service_name: String,
    /// Share of new traces recorded, 0.0 to 1.0; a request that carries a client's
    /// `traceparent` follows the client's sampling decision (parent-based).
    pub sample_ratio: f64,
}

impl Default for OtelConfig {
    fn default() -> Self {
        OtelConfig {
            endpoint: String::new(),
            protocol: String::new(),
            service_name: "switchboard".into(),
            sample_ratio: 1.0,
        }
    }
}

impl OtelConfig {
    /// The endpoint in effect: this config's, else `OTEL_EXPORTER_OTLP_ENDPOINT`; `None`: off.
    pub fn effective_endpoint(&self) -> Option<String> {
        let env = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok();
        Some(self.endpoint.clone())
            .filter(|e| !e.trim().is_empty())
            .or(env.filter(|e| !e.trim().is_empty()))
    }

    /// Whether spans go out over gRPC (else HTTP/protobuf).
    pub fn grpc(&self) -> bool {
        let env = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
        let protocol = if self.protocol.is_empty() {
            env
        } else {
            self.protocol.clone()
        };
        protocol == "grpc"
    }

    pub(super) fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !matches!(self.protocol.as_str(), "" | "http/protobuf" | "grpc") {
            out.push((
                "otel.protocol",
                format!(
                    "otel.protocol `{}` is not `http/protobuf` or `grpc`",
                    self.protocol
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            out.push((
                "otel.sample_ratio",
                format!(
                    "otel.sample_ratio {} is not between 0.0 and 1.0",
                    self.sample_ratio
                ),
            ));
        }
        out
    }
}

/// `/metrics`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// A listener of its own for `/metrics` and `/upstreamz` (`0.0.0.0:9090`), which then leave
    /// the public listener (404 there). Empty: both are served beside the MCP endpoint on
    /// `http.listen`, readable by whoever reaches that port, without a token even when
    /// authorization is on.
    pub listen: String,
    /// Distinct tool names labelled in `switchboard_tool_calls_total` before the rest share
    /// `tool="other"` (label cardinality stays bounded whatever clients call).
    pub max_tool_labels: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: String::new(),
            max_tool_labels: switchboard_telemetry::metrics::labels::DEFAULT_MAX_TOOL_LABELS,
        }
    }
}

impl MetricsConfig {
    /// The metrics listener's address, when one is set and valid.
    pub fn listen_addr(&self) -> Option<std::net::SocketAddr> {
        self.listen.trim().parse().ok()
    }

    pub(super) fn problems(
        &self,
        http_listen: std::net::SocketAddr,
    ) -> Vec<(&'static str, String)> {
        let listen = self.listen.trim();
        if self.listen_addr() == Some(http_listen) {
            return vec![(
                "metrics.listen",
                format!("metrics.listen `{listen}` is http.listen's address: give /metrics another port, or leave metrics.listen empty to serve it beside the MCP endpoint"),
            )];
        }
        if listen.is_empty() || self.listen_addr().is_some() {
            return Vec::new();
        }
        vec![(
            "metrics.listen",
            format!("metrics.listen `{listen}` is not a socket address like 0.0.0.0:9090"),
        )]
    }
}

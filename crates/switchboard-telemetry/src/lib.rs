//! # switchboard-telemetry
//!
//! What a node reports about itself, shared by every crate that has something to report:
//!
//! - [`metrics`]: the Prometheus metrics (counters, gauges, histograms with bounded labels) that
//!   the store, the upstreams and the node record into, and their rendering for `/metrics`
//!   (OpenMetrics text, `prometheus-client`).
//! - [`trace`]: spans and W3C trace context (`traceparent`/`tracestate`, W3C Trace Context
//!   Level 1): the span target the OpenTelemetry layer listens to, reading a parent from HTTP
//!   headers, `params._meta` or a bus message, writing the current one into upstream requests
//!   and bus messages, and the session id hash that stands in for the id (a credential).
//!
//! Only API crates here (`opentelemetry`, `tracing-opentelemetry`): the SDK and the OTLP exporter
//! are set up by the binary, so with tracing off no span leaves the process.

pub mod metrics;
pub mod trace;

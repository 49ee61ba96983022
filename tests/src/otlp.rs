//! An OTLP trace receiver for tests, over HTTP ([`Receiver::start`]: nodes POST protobuf
//! `ExportTraceServiceRequest`s to `/v1/traces` below `http://127.0.0.1:PORT`) or gRPC
//! ([`Receiver::start_grpc`]: the `TraceService/Export` call), decoded with
//! `opentelemetry-proto`; the test reads back every span received.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;

/// One span as received.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// Trace id, hex.
    pub trace_id: String,
    /// Span id, hex.
    pub span_id: String,
    /// Parent span id, hex; empty for a root.
    pub parent_span_id: String,
    /// The span's name.
    pub name: String,
    /// `SPAN_KIND_SERVER`, `SPAN_KIND_CLIENT`, …
    pub kind: String,
    /// Its resource's `service.instance.id` (the node id).
    pub instance: String,
    /// Its attributes, as strings.
    pub attributes: BTreeMap<String, String>,
}

/// A receiver on a free loopback port, stopped on drop.
pub struct Receiver {
    /// `http://127.0.0.1:PORT`, the endpoint to configure (`otel.endpoint`).
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

type Spans = Arc<Mutex<Vec<ReceivedSpan>>>;

async fn export(State(spans): State<Spans>, body: Bytes) -> Vec<u8> {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    keep(&spans, request);
    ExportTraceServiceResponse::default().encode_to_vec()
}

/// The gRPC `TraceService`.
#[derive(Clone)]
struct Grpc(Spans);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        keep(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Adds the spans of one export to `spans`.
fn keep(spans: &Spans, request: ExportTraceServiceRequest) {
    let mut got = Vec::new();
    for resource in request.resource_spans {
        let instance = resource
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.instance.id")
            .map(text)
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                got.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: format!("{:?}", span.kind()),
                    name: span.name.clone(),
                    instance: instance.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv)))
                        .collect(),
                });
            }
        }
    }
    spans.lock().unwrap().extend(got);
}

impl Receiver {
    /// Starts the receiver on the current Tokio runtime.
    pub async fn start() -> Receiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route("/v1/traces", post(export))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            endpoint,
            spans,
            task,
        }
    }

    /// Starts a gRPC receiver (OTLP/gRPC, `otel.protocol = "grpc"`) on the current runtime.
    pub async fn start_grpc() -> Receiver {
        let spans = Spans::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let service = TraceServiceServer::new(Grpc(spans.clone()));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let task = tokio::spawn(async move {
            let server = tonic::transport::Server::builder().add_service(service);
            let _ = server.serve_with_incoming(incoming).await;
        });
        Receiver {
            endpoint,
            spans,
            task,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits (at most `limit`) until `done` holds for the spans received, and returns them;
    /// panics with what arrived when it does not.
    pub async fn until(
        &self,
        limit: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("the spans did not arrive within {limit:?}; got {spans:#?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

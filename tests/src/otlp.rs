//! An OTLP/HTTP trace receiver for tests: nodes export to `http://127.0.0.1:PORT` (spans are
//! POSTed to `/v1/traces` as protobuf `ExportTraceServiceRequest`s, decoded with
//! `opentelemetry-proto`), and the test reads back every span received.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
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

async fn export(State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>, body: Bytes) -> Vec<u8> {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
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
    ExportTraceServiceResponse::default().encode_to_vec()
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

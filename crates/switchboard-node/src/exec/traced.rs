//! The span of one MCP message handled here, and what a finished request reports.
//!
//! Follows OpenTelemetry's MCP semantic conventions (semantic-conventions-genai, `gen-ai/mcp`,
//! status Development): span name `{mcp.method.name} {target}` (target: the tool or prompt
//! name), kind server, `mcp.method.name`, `mcp.protocol.version`, `jsonrpc.request.id`,
//! `gen_ai.tool.name` / `gen_ai.operation.name = execute_tool` for `tools/call`,
//! `gen_ai.prompt.name`, `mcp.resource.uri`, `rpc.response.status_code` and `error.type` (the
//! JSON-RPC error code). One deviation: `mcp.session.id` holds a hash of the session id
//! ([`switchboard_telemetry::trace::session_hash`]), never the id, which is a credential.
//! The parent is the client's (`params._meta.traceparent`, else the HTTP `traceparent`).

use std::time::Instant;

use http::HeaderMap;
use serde_json::Value;
use switchboard_telemetry::metrics::{self, labels, RequestLabels};
use switchboard_telemetry::trace;
use tracing::{Instrument, Span};

/// A message's span, with the client's context as its parent.
pub(crate) fn message_span(
    headers: Option<&HeaderMap>,
    message: &Value,
    method: &str,
    sid: Option<&str>,
    revision: Option<&str>,
) -> Span {
    let params = message.get("params");
    let name = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .filter(|_| matches!(method, "tools/call" | "prompts/get"))
        // Span names stay short whatever a client sends (MCP names are at most 128 characters).
        .map(|n| short(n, 128));
    let request_id = message.get("id").map(|id| match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    let uri = params
        .filter(|_| method.starts_with("resources/"))
        .and_then(|p| p.get("uri"))
        .and_then(Value::as_str);
    // (The span macro brings `tracing::field::Value` into scope: JSON values are read above.)
    let span = tracing::info_span!(
        target: trace::TARGET,
        "mcp",
        otel.name = match name {
            Some(n) => format!("{method} {n}"),
            None => method.to_owned(),
        },
        otel.kind = "server",
        mcp.method.name = method,
        mcp.protocol.version = revision,
        mcp.session.id = sid.map(trace::session_hash),
        jsonrpc.request.id = request_id,
        gen_ai.operation.name = (method == "tools/call").then_some("execute_tool"),
        gen_ai.tool.name = name.filter(|_| method == "tools/call"),
        gen_ai.prompt.name = name.filter(|_| method == "prompts/get"),
        mcp.resource.uri = uri,
        network.transport = "tcp",
        rpc.response.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    trace::set_parent(&span, trace::client_parent(headers, message));
    span
}

/// Runs `work`, the handling of one message of `method`, in `span`, and counts its duration in
/// `switchboard_request_duration_seconds` (for the requests that do not run as a session-era
/// call, whose task reports through [`Finished`]: `initialize`, 2026-07-28 requests).
pub(crate) async fn observed<F: std::future::Future>(
    method: &str,
    span: Span,
    work: F,
) -> F::Output {
    let started = Instant::now();
    let (out, upstream) = labels::reaching_upstream(work.instrument(span)).await;
    let method = labels::method(method);
    metrics::get()
        .requests
        .get_or_create(&RequestLabels { method, upstream })
        .observe(started.elapsed().as_secs_f64());
    out
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn short(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a request reports when it ends: its duration by method and the upstream it reached, and
/// the JSON-RPC error code on its span (`tools/call` by tool is the upstream layer's count).
pub(crate) struct Finished<'a> {
    /// The method.
    pub method: &'a str,
    /// When its message was parsed.
    pub started: Instant,
    /// The upstream label ([`labels::reaching_upstream`]).
    pub upstream: &'static str,
}

impl Finished<'_> {
    /// Records the request's end; `response` is its JSON-RPC response.
    pub(crate) fn record(&self, span: &Span, response: &Value) {
        let m = metrics::get();
        let method = labels::method(self.method);
        let upstream = self.upstream;
        m.requests
            .get_or_create(&RequestLabels { method, upstream })
            .observe(self.started.elapsed().as_secs_f64());
        record_code(span, response);
    }
}

/// Records the JSON-RPC error code of `response` (if it is an error) on `span`.
pub(crate) fn record_code(span: &Span, response: &Value) {
    if let Some(code) = response.pointer("/error/code").and_then(Value::as_i64) {
        span.record("rpc.response.status_code", code.to_string());
        span.record("error.type", code.to_string());
    }
}

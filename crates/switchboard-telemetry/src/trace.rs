//! Spans and W3C trace context (W3C Trace Context Level 1: `traceparent`, `tracestate`).
//!
//! Every span the node makes for tracing has the target [`TARGET`]: the binary's OpenTelemetry
//! layer takes only those, and its log layer none of them, so log lines are unchanged and, with
//! tracing off, these spans are disabled at their call site (no cost past a cached check).
//! Span names and kinds come from the `otel.name` and `otel.kind` fields
//! (`tracing-opentelemetry`).
//!
//! A parent comes from the client (the `traceparent` header of the HTTP request, or
//! `params._meta.traceparent` of the message, which wins: OpenTelemetry's MCP conventions carry
//! context there), or from a bus message (the sender's span). [`current`] is what goes into
//! upstream requests and bus messages. The propagator is the process-wide one the binary
//! installs (`TraceContextPropagator`); before that, nothing is read or written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use serde_json::Value;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every span made for tracing.
pub const TARGET: &str = "switchboard_trace";

static ON: AtomicBool = AtomicBool::new(false);

/// Marks tracing on (the binary, once its exporter is installed). Until then [`current`] is
/// `None` at once and no context is read.
pub fn set_enabled() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether traces are exported.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        // An empty `tracestate` says nothing (W3C Trace Context §3.3: it may be left out).
        if value.is_empty() {
            return;
        }
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// `params._meta` read as a carrier (`traceparent`, `tracestate`).
struct Meta<'a>(&'a serde_json::Map<String, Value>);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

fn extract(carrier: &dyn Extractor) -> Option<Context> {
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(carrier));
    cx.span().span_context().is_valid().then_some(cx)
}

/// The client's context: `params._meta.traceparent` of `message` when valid, else the
/// `traceparent` header of the HTTP request (`headers`).
pub fn client_parent(headers: Option<&http::HeaderMap>, message: &Value) -> Option<Context> {
    if !enabled() {
        return None;
    }
    let meta = message.pointer("/params/_meta").and_then(Value::as_object);
    meta.and_then(|m| extract(&Meta(m)))
        .or_else(|| headers.and_then(|h| extract(&Headers(h))))
}

/// The context a bus message carried (its `traceparent`), when valid.
pub fn parent_from(traceparent: Option<&str>) -> Option<Context> {
    let tp = traceparent.filter(|_| enabled())?;
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_owned(), tp.to_owned());
    extract(&carrier)
}

/// Makes `cx` the parent of `span` (before the span is first entered).
pub fn set_parent(span: &Span, cx: Option<Context>) {
    if let Some(cx) = cx {
        let _ = span.set_parent(cx);
    }
}

/// The current span's `traceparent`, for a bus message; `None` with tracing off or outside a
/// sampled span.
pub fn current() -> Option<String> {
    if !enabled() {
        return None;
    }
    let cx = Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    carrier.remove("traceparent")
}

/// Writes the current span's context into `headers` (`traceparent`, `tracestate`), for a
/// request to an upstream. Nothing with tracing off.
pub fn inject(headers: &mut http::HeaderMap) {
    if !enabled() {
        return;
    }
    let cx = Span::current().context();
    if cx.span().span_context().is_valid() {
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&cx, &mut HeadersMut(headers));
        });
    }
}

/// What stands in for a session id in spans and logs: the first 8 bytes of its SHA-256, in hex
/// (16 characters). The id itself is a credential (MCP 2025-11-25, basic/security: session
/// hijacking) and is never recorded.
pub fn session_hash(sid: &str) -> String {
    use std::fmt::Write;
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, sid.as_bytes());
    d.as_ref()[..8]
        .iter()
        .fold(String::with_capacity(16), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// A session id as log lines show it: its [`session_hash`], so that lines of one session can be
/// found together without the id itself (a credential) in the logs. The labels stdio children
/// carry instead of a session (`shared`, `probe`) are shown as they are.
pub fn logged_session(sid: &str) -> String {
    match sid {
        "" | "shared" | "probe" => sid.to_owned(),
        _ => session_hash(sid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_stable_and_never_the_id() {
        let h = session_hash("0123456789abcdef0123456789abcdef");
        assert_eq!(h.len(), 16);
        assert_eq!(h, session_hash("0123456789abcdef0123456789abcdef"));
        assert!(!h.contains("0123456789abcdef"));
    }

    #[test]
    fn labels_that_are_no_session_stay_readable() {
        for label in ["shared", "probe", ""] {
            assert_eq!(logged_session(label), label);
        }
        assert_eq!(logged_session("abc"), session_hash("abc"));
    }

    #[test]
    fn nothing_is_read_while_tracing_is_off() {
        let msg = serde_json::json!({"params": {"_meta": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}});
        assert!(client_parent(None, &msg).is_none());
        assert!(current().is_none());
    }
}

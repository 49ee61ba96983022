//! [`Tracked`]: the one place where calls to a configured upstream are counted, timed
//! (`switchboard_upstream_call_duration_seconds`, errors by code in
//! `switchboard_upstream_call_errors_total`) and traced (one client span per call, whose context
//! HTTP upstreams send on as `traceparent`), for every kind.
//!
//! The `build` step puts it around each configured upstream (and around the demo server
//! when none is configured), outside the node-bound wrapper, so a call counts once, on the node
//! the client's request reached, however it is then carried out. Its status is the inner
//! upstream's ([`Upstream::statuses`]; stdio reports its children, restarts and back-off) with
//! the configured name and kind, the call counters, and, for kinds that report no state of their
//! own, the state and last error of the last call (see [`crate::status`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::codes;
use switchboard_telemetry::metrics::{
    self, labels, ToolLabels, UpstreamCallLabels, UpstreamErrorLabels,
};
use switchboard_telemetry::trace;
use tracing::Instrument;

use crate::status::{EndpointStatus, LastError, State, UpstreamStatus};
use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};

/// A configured upstream with its call counters.
pub struct Tracked {
    inner: Arc<dyn Upstream>,
    name: String,
    /// `name` as a metrics label, interned once here instead of on every call.
    label: &'static str,
    kind: &'static str,
    calls: AtomicU64,
    call_errors: AtomicU64,
    last: Mutex<Last>,
    /// The configured `timeout_ms` ([`Upstream::timeout`]).
    timeout: Duration,
}

/// What the last calls said.
#[derive(Default)]
struct Last {
    /// From the last call that was not cancelled.
    state: State,
    /// The last call that failed as unavailable or timed out.
    error: Option<LastError>,
}

impl Tracked {
    /// Wraps `inner`, the upstream configured as `name` of `kind` (`demo`, `stdio`, `http`,
    /// `sse`). `name` and `kind` are what its status says; [`Upstream::name`] stays the inner's.
    pub fn new(name: &str, kind: &'static str, inner: Arc<dyn Upstream>) -> Tracked {
        Tracked {
            inner,
            name: name.to_owned(),
            label: labels::upstream(name),
            kind,
            calls: AtomicU64::new(0),
            call_errors: AtomicU64::new(0),
            last: Mutex::default(),
            timeout: Duration::from_millis(crate::config::DEFAULT_TIMEOUT_MS),
        }
    }

    /// This upstream with its configured `timeout_ms` (default 60 s) as its
    /// [`Upstream::timeout`]. The kinds that talk to a server end a request there themselves;
    /// the demo server's calls are bounded by it only where they wait for the node's store.
    pub fn with_timeout(mut self, timeout: Duration) -> Tracked {
        self.timeout = timeout;
        self
    }

    fn record(&self, outcome: &Result<Value, RpcError>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let failure = outcome.as_ref().err();
        if failure.is_some_and(|e| e.code != codes::REQUEST_ABORTED) {
            self.call_errors.fetch_add(1, Ordering::Relaxed);
        }
        let mut last = self.last.lock();
        if let Some(state) = health(outcome) {
            last.state = state;
        }
        if let Some(e) = failure.filter(|e| is_failure(e.code)) {
            last.error = Some(LastError::now(e.message.clone()));
        }
    }
}

/// Counts a `tools/call` in `switchboard_tool_calls_total`: `ok`, `tool_error` (a result with
/// `isError: true`) or `error` (a JSON-RPC error); the tool gets a label of its own only once it
/// answered a result ([`labels::tool`]).
fn count_tool(upstream: &'static str, tool: &str, outcome: &Result<Value, RpcError>) {
    let (outcome, exists) = match outcome {
        Ok(r) if r.get("isError") == Some(&Value::Bool(true)) => ("tool_error", true),
        Ok(_) => ("ok", true),
        Err(_) => ("error", false),
    };
    let tool = labels::tool(tool, exists);
    metrics::get()
        .tool_calls
        .get_or_create(&ToolLabels {
            upstream,
            tool,
            outcome,
        })
        .inc();
}

/// -32006 (unavailable) or -32005 (timed out): the errors `last_error` keeps.
fn is_failure(code: i64) -> bool {
    matches!(code, codes::UPSTREAM_UNAVAILABLE | codes::UPSTREAM_TIMEOUT)
}

/// What one call's outcome says of the upstream's availability (see [`crate::status`]): `up`
/// for a result or any answer of the server's own, `degraded` for a timeout, `down` for an
/// upstream that could not be reached or failed; `None` for an outcome that says nothing of it:
/// a cancellation, or a lost upstream session (`data.reason = "upstream_session_lost"`: the
/// server forgot the session or the replica holding it left, and a new one is made).
fn health(outcome: &Result<Value, RpcError>) -> Option<State> {
    let Err(e) = outcome else {
        return Some(State::Up);
    };
    match e.code {
        codes::REQUEST_ABORTED => None,
        codes::UPSTREAM_TIMEOUT => Some(State::Degraded),
        codes::UPSTREAM_UNAVAILABLE if lost_session(e) => None,
        codes::UPSTREAM_UNAVAILABLE if answered(e) => Some(State::Up),
        codes::UPSTREAM_UNAVAILABLE => Some(State::Down),
        _ => Some(State::Up),
    }
}

/// A lost upstream session (`http::loss`).
fn lost_session(e: &RpcError) -> bool {
    let reason = e.data.as_ref().and_then(|d| d.get("reason"));
    reason.and_then(Value::as_str) == Some(crate::http::LOST_SESSION_REASON)
}

/// A -32006 the server answered: an HTTP-level refusal carrying its JSON-RPC error
/// (`data.error`), its refusal of the credentials (`data.status`, 401 or 403), or a message over
/// the size limit (`data.max_message_bytes`, `data.max_line_bytes`).
fn answered(e: &RpcError) -> bool {
    let Some(data) = e.data.as_ref() else {
        return false;
    };
    data.get("error").is_some_and(Value::is_object)
        || data.get("status").is_some_and(Value::is_u64)
        || data.get("max_message_bytes").is_some()
        || data.get("max_line_bytes").is_some()
}

/// The state of an upstream with network endpoints, from those the last resolution returned:
/// `down` when none of them can be reached (each was tried and could not be), `degraded` when
/// some could not be (or, none failing, the last call timed out or failed), else `up`; the last
/// call's state (`last`) while this node has tried none of them.
fn over_endpoints(last: State, endpoints: &[EndpointStatus]) -> State {
    let resolved: Vec<State> = endpoints
        .iter()
        .filter(|e| e.resolved)
        .map(|e| e.state)
        .collect();
    let tried = resolved.iter().filter(|s| **s != State::Unknown).count();
    let down = resolved.iter().filter(|s| **s == State::Down).count();
    match (tried, down) {
        (0, _) => last,
        (_, d) if d == resolved.len() => State::Down,
        (_, 0) if matches!(last, State::Up | State::Unknown) => State::Up,
        _ => State::Degraded,
    }
}

/// The later of two errors.
fn latest(a: Option<LastError>, b: Option<LastError>) -> Option<LastError> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.at_ms > a.at_ms { b } else { a }),
        (a, b) => a.or(b),
    }
}

#[async_trait]
impl Upstream for Tracked {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> Value {
        self.inner.capabilities()
    }

    fn server_info(&self) -> Value {
        self.inner.server_info()
    }

    fn instructions(&self) -> Option<String> {
        self.inner.instructions()
    }

    fn serves_stateless(&self) -> bool {
        self.inner.serves_stateless()
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        let upstream = self.label;
        labels::note_upstream(upstream);
        let span = tracing::info_span!(
            target: trace::TARGET,
            "upstream",
            otel.name = format!("{method} {}", self.name),
            otel.kind = "client",
            mcp.method.name = method,
            switchboard.upstream = self.name.as_str(),
            switchboard.upstream.kind = self.kind,
            rpc.response.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let tool = (method == "tools/call")
            .then(|| {
                params
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .flatten();
        let started = Instant::now();
        let outcome = self
            .inner
            .request(method, params, ctx)
            .instrument(span.clone())
            .await;
        self.record(&outcome);
        let m = metrics::get();
        let method = labels::method(method);
        m.upstream_calls
            .get_or_create(&UpstreamCallLabels { upstream, method })
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = &outcome {
            span.record("rpc.response.status_code", e.code.to_string());
            if e.code != codes::REQUEST_ABORTED {
                span.record("error.type", e.code.to_string());
                let code = labels::code(e.code);
                m.upstream_call_errors
                    .get_or_create(&UpstreamErrorLabels { upstream, code })
                    .inc();
            }
        }
        if let Some(tool) = tool {
            count_tool(upstream, &tool, &outcome);
        }
        outcome
    }

    fn members(&self) -> Vec<Arc<dyn Upstream>> {
        vec![self.inner.clone()]
    }

    async fn prepare(&self) {
        self.inner.prepare().await
    }

    async fn notify(&self, method: &str, params: Value, session: Arc<dyn SessionHandle>) {
        self.inner.notify(method, params, session).await
    }

    async fn session_ended(&self, session_id: &str) {
        self.inner.session_ended(session_id).await
    }

    fn held_sessions(&self) -> Vec<String> {
        self.inner.held_sessions()
    }

    async fn shutdown(&self) {
        self.inner.shutdown().await
    }

    /// The inner upstream's status (or a blank one) with the configured name and kind, this wrapper's
    /// counters; the state and last error of the last call where the inner one knows no state
    /// (an inner one that does, stdio, keeps its own last error: the child's failure, which its
    /// refusals during back-off only repeat).
    fn statuses(&self) -> Vec<UpstreamStatus> {
        let mut status = self
            .inner
            .statuses()
            .into_iter()
            .next()
            .unwrap_or_else(|| UpstreamStatus::new(&self.name, self.kind));
        status.name.clone_from(&self.name);
        status.kind = self.kind.to_owned();
        status.calls = self.calls.load(Ordering::Relaxed);
        status.call_errors = self.call_errors.load(Ordering::Relaxed);
        let last = self.last.lock();
        if status.state == State::Unknown {
            status.state = over_endpoints(last.state, &status.endpoints);
            status.last_error = latest(status.last_error.take(), last.error.clone());
        } else if status.last_error.is_none() {
            status.last_error = last.error.clone();
        }
        vec![status]
    }

    async fn refresh_statuses(&self) {
        self.inner.refresh_statuses().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::DemoUpstream;
    use crate::local_session::LocalSession;
    use crate::upstream::{ClientPeer, PeerError};
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    struct Silent;

    #[async_trait]
    impl ClientPeer for Silent {
        async fn notify(&self, _m: Value) -> Result<(), PeerError> {
            Ok(())
        }
        async fn notify_standalone(&self, _m: Value) -> Result<(), PeerError> {
            Ok(())
        }
        async fn request(&self, _m: &str, _p: Value) -> Result<Value, PeerError> {
            Err(PeerError::Cancelled)
        }
    }

    fn ctx() -> RequestContext {
        RequestContext {
            session_id: "s".into(),
            revision: switchboard_protocol::Revision::LATEST,
            client_capabilities: std::sync::Arc::new(json!({})),
            progress_token: None,
            cancel: CancellationToken::new(),
            peer: Arc::new(Silent),
            session: Arc::new(LocalSession::new("s", json!({}))),
            principal: crate::Principal::anonymous(),
        }
    }

    #[tokio::test]
    async fn counts_calls_and_errors_and_takes_the_state_of_the_last_call() {
        let tracked = Tracked::new("a", "demo", Arc::new(DemoUpstream::new()));
        assert_eq!(tracked.statuses()[0].state, State::Unknown);
        let echo = json!({"name": "echo", "arguments": {"text": "x"}});
        tracked.request("tools/call", echo, ctx()).await.unwrap();
        let unknown = json!({"name": "nope", "arguments": {}});
        let _ = tracked.request("tools/call", unknown, ctx()).await;
        let status = &tracked.statuses()[0];
        assert_eq!((status.calls, status.call_errors), (2, 1));
        assert_eq!(status.state, State::Up, "the server answered both");
        assert_eq!((status.name.as_str(), status.kind.as_str()), ("a", "demo"));
        assert_eq!(
            status.last_error, None,
            "a refusal by the server is no failure"
        );

        tracked.record(&Err(RpcError::new(codes::UPSTREAM_UNAVAILABLE, "gone")));
        let status = &tracked.statuses()[0];
        assert_eq!(status.state, State::Down);
        assert_eq!(
            status.last_error.as_ref().map(|e| e.message.as_str()),
            Some("gone")
        );
        tracked.record(&Err(RpcError::new(codes::REQUEST_ABORTED, "cancelled")));
        let status = &tracked.statuses()[0];
        assert_eq!(
            (status.calls, status.call_errors, status.state),
            (4, 2, State::Down)
        );
    }

    fn unavailable(data: Value) -> Result<Value, RpcError> {
        Err(RpcError {
            code: codes::UPSTREAM_UNAVAILABLE,
            message: "upstream `a` ...".into(),
            data: Some(data),
        })
    }

    /// Errors that say nothing of the upstream's availability leave it `up` (a lost session is
    /// still the last error); one that says it could not be reached makes it `down`.
    #[test]
    fn only_errors_about_availability_change_the_state() {
        let tracked = Tracked::new("a", "http", Arc::new(DemoUpstream::new()));
        tracked.record(&Ok(json!({})));
        let quiet = [
            json!({"upstream": "a", "endpoint": "127.0.0.2:80", "reason": "upstream_session_lost"}),
            json!({"upstream": "a", "endpoint": "127.0.0.2:80", "error": {"code": -32600, "message": "no"}}),
            json!({"upstream": "a", "status": 401, "www_authenticate": null}),
            json!({"upstream": "a", "max_message_bytes": 1024}),
        ];
        for data in quiet {
            tracked.record(&unavailable(data.clone()));
            let status = &tracked.statuses()[0];
            assert_eq!(status.state, State::Up, "{data}");
            assert!(status.last_error.is_some(), "{data}");
        }
        tracked.record(&unavailable(
            json!({"upstream": "a", "endpoint": "127.0.0.2:80"}),
        ));
        assert_eq!(tracked.statuses()[0].state, State::Down);
        tracked.record(&unavailable(
            json!({"upstream": "a", "reason": "upstream_session_lost"}),
        ));
        assert_eq!(
            tracked.statuses()[0].state,
            State::Down,
            "a loss says nothing"
        );
    }

    fn endpoint(state: State, resolved: bool) -> EndpointStatus {
        EndpointStatus {
            address: "127.0.0.2:80".into(),
            state,
            resolved,
            sessions: 0,
        }
    }

    /// With several endpoints: `down` only when every resolved one tried could not be reached,
    /// `degraded` when some could not.
    #[test]
    fn the_state_over_endpoints_needs_every_one_down_to_be_down() {
        use State::{Degraded, Down, Unknown, Up};
        let cases = [
            (Down, vec![(Up, true), (Down, true), (Up, true)], Degraded),
            (
                Down,
                vec![(Down, true), (Unknown, true), (Unknown, true)],
                Degraded,
            ),
            (Down, vec![(Down, true), (Down, true), (Down, true)], Down),
            (Up, vec![(Up, true), (Unknown, true), (Down, false)], Up),
            (Degraded, vec![(Up, true), (Up, true)], Degraded),
            (Down, vec![(Up, true), (Up, true)], Degraded),
            (Down, vec![(Unknown, true), (Down, false)], Down),
            (Up, vec![], Up),
        ];
        for (last, endpoints, want) in cases {
            let endpoints: Vec<EndpointStatus> =
                endpoints.iter().map(|(s, r)| endpoint(*s, *r)).collect();
            assert_eq!(
                over_endpoints(last, &endpoints),
                want,
                "{last:?} {endpoints:?}"
            );
        }
    }
}

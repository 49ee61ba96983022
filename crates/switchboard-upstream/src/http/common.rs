//! Pieces both network upstreams share (Streamable HTTP here and legacy HTTP+SSE in
//! the `sse` module): the HTTP client, our request ids, the errors that name an upstream, the
//! answer to a server-to-client request, the cancellation sent when a call is abandoned, and what
//! the upstream said about itself in `initialize`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::{json, Value};
use switchboard_protocol::{codes, Revision};

use crate::upstream::{ClientPeer, PeerError, RpcError};

/// How long connecting to an upstream may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The process-wide HTTP client: one connection pool for every network upstream, TCP_NODELAY
/// on, connect timeout [`CONNECT_TIMEOUT`], no overall timeout (calls have their own, and
/// response streams may be long).
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT.get_or_init(|| build_http_client(|b| b)).clone()
}

/// A client with the settings of [`http_client`], changed by `adjust` (an endpoint's pool:
/// `resolve()` to its address).
pub(crate) fn build_http_client(
    adjust: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
) -> Result<reqwest::Client, String> {
    adjust(
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(90)),
    )
    .build()
    .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// A fresh request id for a message we send to an upstream: `"sb-<process tag>-<counter>"`.
///
/// Never the client's id: clients choose ids freely (two sessions may both send id 1 at the same
/// moment, case C22), and one upstream session may be used by several nodes, so the id carries a
/// random per-process tag besides the counter.
pub(crate) fn next_request_id() -> Value {
    static TAG: OnceLock<String> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let tag = TAG.get_or_init(|| {
        const A: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
        let bytes: [u8; 8] = rand::random();
        bytes.iter().map(|b| A[(b & 31) as usize] as char).collect()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Value::String(format!("sb-{tag}-{n}"))
}

/// -32006 `upstream `NAME` is unavailable: <reason>`, with `data.upstream`.
pub(crate) fn unavailable(name: &str, reason: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: codes::UPSTREAM_UNAVAILABLE,
        message: format!("upstream `{name}` is unavailable: {reason}"),
        data: Some(json!({"upstream": name})),
    }
}

/// -32005 `upstream `NAME` did not answer within N ms`, with `data.upstream`.
pub(crate) fn timed_out(name: &str, timeout: Duration) -> RpcError {
    RpcError {
        code: codes::UPSTREAM_TIMEOUT,
        message: format!(
            "upstream `{name}` did not answer within {} ms",
            timeout.as_millis()
        ),
        data: Some(json!({"upstream": name})),
    }
}

/// -32006 for a message of upstream `name` over its size limit (case C32), the one place this
/// error is built for every kind: ``upstream `NAME` sent a message larger than SETTING (N bytes)
/// answering `tools/call` at 10.0.0.5:8080; CONSEQUENCE`` (`at`: the exchange, when the message
/// answered one) with `data.upstream` and `data.<setting>` = the limit (`exchange_error` adds
/// `data.endpoint`). Nothing of the message is passed on (no truncation).
pub(crate) fn too_large(
    name: &str,
    setting: &str,
    limit: usize,
    at: Option<&dyn std::fmt::Display>,
    consequence: &str,
) -> RpcError {
    let mut data = json!({"upstream": name});
    data[setting] = json!(limit);
    let answering = at.map(|at| format!(" answering {at}")).unwrap_or_default();
    RpcError {
        code: codes::UPSTREAM_UNAVAILABLE,
        message: format!(
            "upstream `{name}` sent a message larger than {setting} ({limit} bytes){answering}; \
             {consequence}"
        ),
        data: Some(data),
    }
}

/// `error` with `data.endpoint` set.
pub(crate) fn with_endpoint(mut error: RpcError, endpoint: &str) -> RpcError {
    if let Some(Value::Object(data)) = error.data.as_mut() {
        data.insert("endpoint".into(), endpoint.into());
    }
    error
}

/// Runs one upstream call bounded by the upstream's `timeout` and the request's cancellation
/// (the call's drop guard tells the upstream when it is cancelled).
pub(crate) async fn bounded<F>(
    name: &str,
    timeout: Duration,
    cancel: &tokio_util::sync::CancellationToken,
    call: F,
) -> Result<Value, RpcError>
where
    F: std::future::Future<Output = Result<Value, RpcError>>,
{
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(aborted()),
        r = tokio::time::timeout(timeout, call) => r.unwrap_or_else(|_| Err(timed_out(name, timeout))),
    }
}

/// -32004 `request cancelled`: what a call ends with when the client cancels it.
pub(crate) fn aborted() -> RpcError {
    RpcError::new(codes::REQUEST_ABORTED, "request cancelled")
}

/// A JSON-RPC request (with `id`) or notification to send, borrowing its parts; `params` is
/// left out when it is null. Serializes as `{"jsonrpc":"2.0","method":…,"id":…,"params":…}`.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Outgoing<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Value::is_null")]
    params: &'a Value,
}

/// The message `id` (absent for a notification), `method`, `params`, borrowed: the params of a
/// proxied call are serialized straight into its body, never copied.
pub(crate) fn message<'a>(
    id: Option<&'a Value>,
    method: &'a str,
    params: &'a Value,
) -> Outgoing<'a> {
    Outgoing {
        jsonrpc: "2.0",
        method,
        id,
        params,
    }
}

/// The `error` member of a JSON-RPC response as an [`RpcError`] (code -32603 when malformed).
pub(crate) fn rpc_error(error: &Value) -> RpcError {
    RpcError {
        code: error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(codes::INTERNAL_ERROR),
        message: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("upstream error without a message")
            .to_owned(),
        data: error.get("data").cloned(),
    }
}

/// The outcome carried by a JSON-RPC response: its `result`, or its `error`.
pub(crate) fn outcome(mut response: Value) -> Result<Value, RpcError> {
    match response.get("error") {
        Some(error) => Err(rpc_error(error)),
        None => Ok(response
            .get_mut("result")
            .map(Value::take)
            .unwrap_or(Value::Null)),
    }
}

/// Asks the client to answer a server-to-client request the upstream sent
/// (`sampling/createMessage`, `elicitation/create`, `roots/list`, `ping`) and builds the JSON-RPC
/// response to POST back, carrying the UPSTREAM's original id (MCP 2025-11-25, basic/transports,
/// Sending Messages item 4). When the client cannot answer (missing capability, or no stream to
/// ask it on → -32601, timeout or delivery failure → -32603, cancelled → -32004) the response is
/// a JSON-RPC error.
pub(crate) async fn answer_server_request(peer: &dyn ClientPeer, request: &Value) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
    let error = |code: i64, message: String| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    match peer.request(method, params).await {
        Ok(answer) => match answer.get("error") {
            Some(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
            None => {
                let result = answer.get("result").cloned().unwrap_or_else(|| json!({}));
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            }
        },
        Err(e @ (PeerError::MissingCapability(_) | PeerError::Unreachable(_))) => {
            error(codes::METHOD_NOT_FOUND, e.to_string())
        }
        Err(PeerError::Cancelled) => error(codes::REQUEST_ABORTED, "request cancelled".into()),
        Err(e) => error(codes::INTERNAL_ERROR, e.to_string()),
    }
}

/// A future that is spawned when the guard is dropped while armed: the
/// `notifications/cancelled` for a call that is abandoned (client cancel, timeout, or the node
/// dropping the call) before its answer arrived (MCP 2025-11-25, basic/utilities/cancellation;
/// basic/lifecycle, Timeouts: on timeout the sender SHOULD cancel).
pub(crate) struct CancelGuard {
    action: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl CancelGuard {
    /// A guard that runs `action` in the background unless disarmed.
    pub fn new(action: impl Future<Output = ()> + Send + 'static) -> CancelGuard {
        CancelGuard {
            action: Some(Box::pin(action)),
        }
    }

    /// The call finished (or never reached the upstream): nothing to cancel.
    pub fn disarm(&mut self) {
        self.action = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(action) = self.action.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(action);
            }
        }
    }
}

/// `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id,"reason":…}}`.
pub(crate) fn cancelled_notification(id: &Value, reason: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason}
    })
}

/// The `initialize` params to send upstream for a client session: the client's own, as stored
/// (capabilities, clientInfo and protocolVersion kept, so the upstream sees the real client);
/// `protocolVersion` is filled with `fallback` when missing.
pub(crate) fn client_initialize_params(stored: &Value, fallback: Revision) -> Value {
    let mut params = match stored {
        Value::Object(_) => stored.clone(),
        _ => json!({}),
    };
    let obj = params.as_object_mut().expect("an object");
    obj.entry("protocolVersion")
        .or_insert_with(|| fallback.as_str().into());
    obj.entry("capabilities").or_insert_with(|| json!({}));
    obj.entry("clientInfo")
        .or_insert_with(|| json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")}));
    params
}

/// The neutral identity of the probe `initialize` that [`crate::Upstream::prepare`] sends: no
/// capabilities, `clientInfo` `{"name":"switchboard","version":…}`, our latest revision.
pub(crate) fn probe_initialize_params() -> Value {
    json!({
        "protocolVersion": Revision::LATEST.as_str(),
        "capabilities": {},
        "clientInfo": {"name": "switchboard", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// What an upstream said about itself in its `InitializeResult` (MCP 2025-11-25,
/// basic/lifecycle): capabilities, serverInfo, instructions. Defaults until learned.
pub(crate) struct Facts {
    inner: RwLock<FactsInner>,
    /// The revisions its sessions negotiated against their clients'.
    pub revisions: crate::revisions::RevisionWatch,
}

struct FactsInner {
    capabilities: Value,
    server_info: Value,
    instructions: Option<String>,
    learned: bool,
}

impl Facts {
    /// Defaults for an upstream not reached yet: tools, resources and prompts, so that the
    /// client does not dismiss them, and `serverInfo` naming the upstream.
    pub fn new(name: &str) -> Facts {
        Facts {
            inner: RwLock::new(FactsInner {
                capabilities: json!({"tools": {}, "resources": {}, "prompts": {}}),
                server_info: json!({"name": name, "version": "unknown"}),
                instructions: None,
                learned: false,
            }),
            revisions: Default::default(),
        }
    }

    /// Records an `InitializeResult`. Without `overwrite`, only when nothing was learned yet
    /// (the lazy re-probe after a failed [`crate::Upstream::prepare`]).
    pub fn learn(&self, result: &Value, overwrite: bool) {
        let mut f = self.inner.write();
        if f.learned && !overwrite {
            return;
        }
        if let Some(caps) = result.get("capabilities").filter(|c| c.is_object()) {
            f.capabilities = caps.clone();
        }
        if let Some(info) = result.get("serverInfo").filter(|c| c.is_object()) {
            f.server_info = info.clone();
        }
        f.instructions = result
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_owned);
        f.learned = true;
    }

    /// Whether an `InitializeResult` was recorded.
    pub fn learned(&self) -> bool {
        self.inner.read().learned
    }

    /// The upstream's capabilities.
    pub fn capabilities(&self) -> Value {
        self.inner.read().capabilities.clone()
    }

    /// The upstream's `serverInfo`.
    pub fn server_info(&self) -> Value {
        self.inner.read().server_info.clone()
    }

    /// The upstream's `instructions`.
    pub fn instructions(&self) -> Option<String> {
        self.inner.read().instructions.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_strings_with_a_process_tag() {
        let a = next_request_id();
        let b = next_request_id();
        assert_ne!(a, b);
        let a = a.as_str().unwrap();
        assert!(a.starts_with("sb-") && a.len() > 12, "{a}");
    }

    #[test]
    fn initialize_params_keep_the_client_and_fill_gaps() {
        let stored = json!({"protocolVersion": "2025-06-18",
            "capabilities": {"sampling": {}}, "clientInfo": {"name": "c", "version": "1"}});
        assert_eq!(client_initialize_params(&stored, Revision::LATEST), stored);
        let filled = client_initialize_params(&Value::Null, Revision::V2025_03_26);
        assert_eq!(filled["protocolVersion"], "2025-03-26");
        assert_eq!(filled["capabilities"], json!({}));
    }

    #[test]
    fn facts_learn_once_unless_overwritten() {
        let f = Facts::new("up");
        assert_eq!(f.server_info()["name"], "up");
        f.learn(
            &json!({"capabilities": {"tools": {}}, "serverInfo": {"name": "a"}}),
            false,
        );
        f.learn(
            &json!({"capabilities": {}, "serverInfo": {"name": "b"}}),
            false,
        );
        assert_eq!(f.server_info()["name"], "a");
        f.learn(
            &json!({"serverInfo": {"name": "c"}, "instructions": "hi"}),
            true,
        );
        assert_eq!(f.server_info()["name"], "c");
        assert_eq!(f.instructions().as_deref(), Some("hi"));
    }
}

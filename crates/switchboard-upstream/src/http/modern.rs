//! A Streamable HTTP server of the stateless revision (MCP 2026-07-28) behind the cluster, for
//! clients of every era: the bridge from sessions to a stateless upstream.
//!
//! Every request is self-contained (MCP 2026-07-28, basic/transports/streamable-http): a POST
//! with `MCP-Protocol-Version: 2026-07-28`, `Mcp-Method`, `Mcp-Name` (`params.name` of
//! `tools/call` and `prompts/get`, `params.uri` of `resources/read`; `=?base64?…?=` when not
//! plain ASCII) and `_meta` carrying the version, the client's capabilities and clientInfo (from
//! the session's stored `initialize`, or the stateless request's own) and `logLevel: "debug"`
//! (the node filters log messages by the session's or the request's level). No `initialize`, no
//! session id, nothing stored per session: the upstream serves any node's requests alike
//! ([`Upstream::serves_stateless`]).
//!
//! **MRTR bridged to server-to-client requests** (basic/patterns/mrtr): when the upstream
//! answers `resultType: "input_required"`, each of its `inputRequests` is asked through the
//! request's [`ClientPeer`], which is a real `sampling/createMessage`, `elicitation/create` or
//! `roots/list` for a session-era client (answered on any node) and, for a 2026-07-28 client,
//! the node's own MRTR round. The answers go back in a retry (new id, same params,
//! `inputResponses`, the echoed `requestState`), at most [`MAX_ROUNDS`] rounds.
//!
//! Lossless: tools, prompts, resources reads and lists, completion, progress and log
//! notifications of the request, cancellation (closing the response stream), sampling,
//! elicitation and roots. Not bridged: `resources/subscribe` and list-change notifications (a
//! 2026-07-28 server raises them only on `subscriptions/listen`, which the node does not hold
//! towards it; the capability `resources.subscribe` is not advertised, so listeners of the
//! cluster are offered none), and the server's extensions (its tasks: the node runs tasks
//! itself and never declares the extension to the upstream). `logging/setLevel` is answered
//! here (the level lives in the session record); `resultType` is removed from results (the
//! stateless path adds it again).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};
use switchboard_protocol::param_headers::{self, ToolHeaders};
use switchboard_protocol::{codes, header_value, meta, Revision};

use super::call::Call;
use super::common::{bounded, message, next_request_id, outcome, Facts};
use super::wire::{exchange_error, Wire, WireError};
use crate::upstream::{ClientPeer, PeerError, RequestContext, RpcError, Upstream};

/// How many `InputRequiredResult` rounds one request may go through before it fails.
pub const MAX_ROUNDS: usize = 8;

/// The methods that need `Mcp-Name`, and the `params` member it mirrors.
fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// A 2026-07-28 Streamable HTTP server (see the module docs).
pub struct ModernHttpUpstream {
    name: String,
    wire: Arc<Wire>,
    timeout: Duration,
    revision: Revision,
    facts: Facts,
    /// The `x-mcp-header` declarations of its tools, from its own `tools/list`.
    params: ToolHeaders,
    fetching: tokio::sync::Mutex<()>,
}

/// A tool list younger than this is not fetched again for an unknown tool name.
const PARAMS_MIN_AGE: Duration = Duration::from_secs(5);
/// A tool list older than this is fetched again before the next `tools/call`.
const PARAMS_MAX_AGE: Duration = Duration::from_secs(60);

impl ModernHttpUpstream {
    /// An upstream called `name` at `url` speaking `revision` (a stateless one), sending
    /// `headers` on every request, with `timeout` per call (all rounds of one request included).
    pub fn new<K, V>(
        name: impl Into<String>,
        url: &str,
        headers: impl IntoIterator<Item = (K, V)>,
        timeout: Duration,
        revision: Revision,
    ) -> Result<ModernHttpUpstream, String>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let name = name.into();
        let wire = Wire::new(url, headers).map_err(|e| format!("upstream `{name}`: {e}"))?;
        Ok(ModernHttpUpstream {
            facts: Facts::new(&name),
            name,
            wire: Arc::new(wire),
            timeout,
            revision,
            params: ToolHeaders::default(),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// From its `[[upstreams]]` table (`kind = "http"` with a stateless `revision`).
    pub fn from_config(config: &crate::config::UpstreamConfig) -> Result<Self, String> {
        let name = &config.name;
        let revision = config
            .revision
            .as_deref()
            .and_then(Revision::parse_stateless)
            .ok_or_else(|| {
                format!("upstream `{name}`: `revision` must name a stateless revision")
            })?;
        let url = config
            .url
            .as_deref()
            .ok_or_else(|| format!("upstream `{name}`: kind `http` needs a `url`"))?;
        let mut upstream = ModernHttpUpstream::new(
            name.clone(),
            url,
            &config.headers,
            Duration::from_millis(config.timeout_ms),
            revision,
        )?;
        upstream.wire = Arc::new(upstream.wire.with_max_message(config.message_limit()));
        Ok(upstream)
    }

    /// `params` with the request `_meta` of this revision.
    fn with_meta(&self, mut params: Value, capabilities: &Value, client_info: &Value) -> Value {
        if !params.is_object() {
            params = json!({});
        }
        let m = params
            .as_object_mut()
            .expect("object")
            .entry("_meta")
            .or_insert_with(|| json!({}));
        if !m.is_object() {
            *m = json!({});
        }
        m[meta::PROTOCOL_VERSION] = json!(self.revision.as_str());
        m[meta::CLIENT_CAPABILITIES] = capabilities.clone();
        m[meta::CLIENT_INFO] = client_info.clone();
        m[meta::LOG_LEVEL] = json!("debug");
        params
    }

    /// The per-request headers for `method` with `params`, and for `tools/call` the arguments
    /// its tool mirrors into `Mcp-Param-*` (basic/transports/streamable-http, Custom Headers
    /// from Tool Parameters: a client MUST send them).
    fn headers(&self, method: &str, params: &Value) -> Result<HeaderMap, RpcError> {
        let mut h = HeaderMap::new();
        let mut put = |name: &'static str, value: &str| {
            let v = HeaderValue::from_str(value)
                .map_err(|_| RpcError::invalid_params(format!("{name} cannot carry {value:?}")))?;
            h.insert(HeaderName::from_static(name), v);
            Ok::<(), RpcError>(())
        };
        put("mcp-protocol-version", self.revision.as_str())?;
        put("mcp-method", method)?;
        if let Some(member) = name_member(method) {
            let value = params.get(member).and_then(Value::as_str).unwrap_or("");
            put("mcp-name", &header_value::encode(value))?;
        }
        let tool = params.get("name").and_then(Value::as_str);
        if let (true, Some(decls)) = (
            method == "tools/call",
            tool.and_then(|t| self.params.get(t)),
        ) {
            let arguments = params.get("arguments").unwrap_or(&Value::Null);
            for (name, value) in param_headers::headers_for(&decls, arguments) {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| RpcError::invalid_params(format!("bad header name {name}")))?;
                let value = HeaderValue::from_str(&value).map_err(|_| {
                    RpcError::invalid_params(format!("{name} cannot carry {value:?}"))
                })?;
                h.insert(name, value);
            }
        }
        Ok(h)
    }

    /// One POST of `method` and its whole JSON-RPC response.
    async fn post(
        &self,
        method: &str,
        params: &Value,
        peer: Option<&Arc<dyn ClientPeer>>,
    ) -> Result<Value, RpcError> {
        let wire = Arc::new(self.wire.with_headers(self.headers(method, params)?));
        let id = next_request_id();
        let call = Call {
            wire: &wire,
            name: &self.name,
            session: None,
            peer,
        };
        let answered = call
            .run(method, &message(Some(&id), method, params), &id)
            .await
            .map_err(|e| match e {
                // A stateless server answers JSON-RPC errors with an HTTP status (404 for
                // -32601, 400 for -32020/-32021/-32022): they are its answer, passed on as is.
                WireError::Rpc { error, .. } => error,
                other => exchange_error(&self.name, other),
            })?;
        Ok(answered.response)
    }

    /// A request through every `InputRequiredResult` round.
    async fn call(
        &self,
        method: &str,
        params: Value,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        if method == "logging/setLevel" {
            // Session state, kept in the session record; the upstream gets `logLevel: debug`.
            return Ok(json!({}));
        }
        let client_info = ctx
            .session
            .initialize_params()
            .get("clientInfo")
            .cloned()
            .unwrap_or_else(
                || json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")}),
            );
        // Extensions are the node's own business (it serves the tasks extension itself): the
        // upstream sees the client's core capabilities only.
        let mut capabilities = (*ctx.client_capabilities).clone();
        if let Some(caps) = capabilities.as_object_mut() {
            caps.remove("extensions");
        }
        let mut params = self.with_meta(params, &capabilities, &client_info);
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let (true, Some(tool)) = (method == "tools/call", &tool) {
            self.learn_params(tool, false).await;
        }
        let first_round = params.clone();
        let mut restarted = false;
        for _ in 0..MAX_ROUNDS {
            let posted = self.post(method, &params, Some(&ctx.peer)).await;
            let retrying = params.get("requestState").is_some();
            // A retry refused as invalid params (an HTTP refusal or a JSON-RPC error): the
            // upstream no longer takes its own state (it restarted with new keys, or the state
            // expired). Start over once.
            let refused = match &posted {
                Err(e) => e.code == codes::INVALID_PARAMS,
                Ok(r) => {
                    r.pointer("/error/code").and_then(Value::as_i64) == Some(codes::INVALID_PARAMS)
                }
            };
            let posted = if retrying && !restarted && refused {
                tracing::info!(upstream = %self.name,
                    "the upstream refused its own requestState; starting the request over");
                restarted = true;
                params = first_round.clone();
                self.post(method, &params, Some(&ctx.peer)).await
            } else {
                posted
            };
            let response = match (posted, &tool) {
                (Err(e), Some(tool)) if e.code == codes::HEADER_MISMATCH => {
                    // Its annotations may have changed: list again and retry once (the server
                    // refused before running anything).
                    tracing::info!(upstream = %self.name, tool, error = %e.message,
                        "header mismatch; listing the tools again and retrying once");
                    self.learn_params(tool, true).await;
                    self.post(method, &params, Some(&ctx.peer)).await?
                }
                (other, _) => other?,
            };
            let result = outcome(response)?;
            match result.get(meta::RESULT_TYPE).and_then(Value::as_str) {
                Some("input_required") => {}
                // `resultType` is of the stateless era: a session-era client never sees it (the
                // stateless path adds it again).
                _ => {
                    let mut result = result;
                    if let Some(obj) = result.as_object_mut() {
                        obj.remove(meta::RESULT_TYPE);
                    }
                    return Ok(result);
                }
            }
            let answers = ask_all(&*ctx.peer, &self.name, &result).await?;
            let p = params.as_object_mut().expect("object");
            p.insert("inputResponses".into(), Value::Object(answers));
            match result.get("requestState") {
                Some(state) => p.insert("requestState".into(), state.clone()),
                None => p.remove("requestState"),
            };
        }
        Err(RpcError::new(
            codes::INTERNAL_ERROR,
            format!(
                "upstream `{}` still needed input after {MAX_ROUNDS} rounds",
                self.name
            ),
        ))
    }

    /// Fetches the upstream's tool list for its `x-mcp-header` declarations when it is stale for
    /// `tool` (or always with `force`); one fetch at a time, a failure keeps the last list.
    async fn learn_params(&self, tool: &str, force: bool) {
        let stale = |p: &ToolHeaders| p.stale(tool, PARAMS_MIN_AGE, PARAMS_MAX_AGE);
        if !force && !stale(&self.params) {
            return;
        }
        let _one = self.fetching.lock().await;
        if !force && !stale(&self.params) {
            return;
        }
        let meta = json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")});
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let mut params = self.with_meta(json!({}), &json!({}), &meta);
            if let Some(c) = cursor.take() {
                params["cursor"] = json!(c);
            }
            let page = match self
                .post("tools/list", &params, None)
                .await
                .and_then(outcome)
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(upstream = %self.name, error = %e.message, "tools/list for Mcp-Param-* headers failed; keeping the last list");
                    return;
                }
            };
            tools.extend(page["tools"].as_array().cloned().unwrap_or_default());
            cursor = page["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                self.params.replace(tools.iter());
                return;
            }
        }
    }

    /// `server/discover`: the upstream's capabilities, server info and instructions.
    async fn discover(&self) -> Result<(), RpcError> {
        let params = self.with_meta(
            json!({}),
            &json!({}),
            &json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")}),
        );
        let response = self.post("server/discover", &params, None).await?;
        let mut result = outcome(response)?;
        if let Some(info) =
            result.pointer(&format!("/_meta/{}", meta::SERVER_INFO.replace('/', "~1")))
        {
            result["serverInfo"] = info.clone();
        }
        if let Some(resources) = result
            .pointer_mut("/capabilities/resources")
            .and_then(Value::as_object_mut)
        {
            resources.remove("subscribe");
        }
        // Its extensions (e.g. tasks) are not bridged; the node declares its own.
        if let Some(caps) = result
            .get_mut("capabilities")
            .and_then(Value::as_object_mut)
        {
            caps.remove("extensions");
        }
        self.facts.learn(&result, true);
        Ok(())
    }
}

/// Asks the client every question of an `InputRequiredResult` (in parallel) and returns the
/// `inputResponses`. A question the client answers with an error or with something that is not
/// a result object, or that cannot be asked, fails the request with -32603 naming it: MRTR has
/// no way to hand a refusal back to the upstream.
async fn ask_all(
    peer: &dyn ClientPeer,
    name: &str,
    result: &Value,
) -> Result<Map<String, Value>, RpcError> {
    let Some(questions) = result.get("inputRequests").and_then(Value::as_object) else {
        return Ok(Map::new());
    };
    let asks = questions.iter().map(|(key, q)| async move {
        let method = q.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = q.get("params").cloned().unwrap_or_else(|| json!({}));
        let answer = peer.request(method, params).await.map_err(|e| match e {
            PeerError::Cancelled => RpcError::new(codes::REQUEST_ABORTED, "request cancelled"),
            PeerError::MissingCapability(cap) => RpcError::new(
                codes::INTERNAL_ERROR,
                format!(
                    "upstream `{name}` asked {method}, which needs the client's `{cap}` capability"
                ),
            ),
            other => RpcError::new(
                codes::INTERNAL_ERROR,
                format!("{method} for upstream `{name}` failed: {other}"),
            ),
        })?;
        match (answer.get("result"), answer.get("error")) {
            (Some(r), _) if r.is_object() => Ok((key.clone(), r.clone())),
            (Some(r), _) => Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the client's {method} answer is not a result object: {r}"),
            )),
            (None, Some(e)) => Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the client answered {method} with an error: {e}"),
            )),
            (None, None) => Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the client's {method} answer has neither result nor error"),
            )),
        }
    });
    futures::future::try_join_all(asks)
        .await
        .map(|pairs| pairs.into_iter().collect())
}

#[async_trait]
impl Upstream for ModernHttpUpstream {
    fn name(&self) -> &str {
        &self.name
    }

    /// From `server/discover` (until it answers, tools, resources and prompts);
    /// `resources.subscribe` is never advertised (see the module docs).
    fn capabilities(&self) -> Value {
        self.facts.capabilities()
    }

    fn server_info(&self) -> Value {
        self.facts.server_info()
    }

    fn instructions(&self) -> Option<String> {
        self.facts.instructions()
    }

    /// It keeps no per-session state.
    fn serves_stateless(&self) -> bool {
        true
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if !self.facts.learned() {
            self.prepare().await;
        }
        bounded(
            &self.name,
            self.timeout,
            &ctx.cancel,
            self.call(method, params, &ctx),
        )
        .await
    }

    /// Asks `server/discover`; an unreachable server is logged, and asked again by each request
    /// until it answers once.
    async fn prepare(&self) {
        match tokio::time::timeout(self.timeout, self.discover()).await {
            Ok(Ok(())) => {
                tracing::info!(upstream = %self.name, revision = self.revision.as_str(), "discovered the upstream")
            }
            Ok(Err(e)) => {
                tracing::warn!(upstream = %self.name, error = %e.message, "server/discover failed; default capabilities until it answers")
            }
            Err(_) => {
                tracing::warn!(upstream = %self.name, "server/discover timed out; default capabilities until it answers")
            }
        }
    }
}

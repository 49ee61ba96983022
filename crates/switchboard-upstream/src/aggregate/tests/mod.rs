//! Unit tests of [`Aggregate`] over fake members ([`Fake`]) and demo servers, driven through
//! [`Upstream::request`].

mod lists;
mod policy;
mod resources;
mod routing;
mod setup;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};
use switchboard_protocol::{codes, Revision};
use tokio_util::sync::CancellationToken;

use super::{Aggregate, Member};
use crate::demo::DemoUpstream;
use crate::upstream::{ClientPeer, PeerError, RequestContext, RpcError, SessionHandle, Upstream};

/// A client peer that accepts notifications and answers no request.
struct NullPeer;

#[async_trait]
impl ClientPeer for NullPeer {
    async fn notify(&self, _message: Value) -> Result<(), PeerError> {
        Ok(())
    }

    async fn notify_standalone(&self, _message: Value) -> Result<(), PeerError> {
        Ok(())
    }

    async fn request(&self, _method: &str, _params: Value) -> Result<Value, PeerError> {
        Err(PeerError::Cancelled)
    }
}

/// A request context for tests.
pub(crate) fn ctx() -> RequestContext {
    RequestContext {
        session_id: "s1".into(),
        revision: Revision::LATEST,
        client_capabilities: std::sync::Arc::new(json!({})),
        progress_token: None,
        cancel: CancellationToken::new(),
        peer: Arc::new(NullPeer),
        session: Arc::new(crate::LocalSession::new("s1", json!({}))),
        principal: crate::Principal::anonymous(),
    }
}

/// A scripted member: lists of names and URIs (paginated `page` at a time when `page > 0`),
/// answers naming itself, a switch to make it "down" (-32006), and a record of what it was asked.
pub(super) struct Fake {
    name: String,
    caps: Value,
    tools: Vec<Value>,
    prompts: Vec<Value>,
    resources: Vec<Value>,
    templates: Vec<Value>,
    /// URI prefixes it can read besides its listed URIs.
    serves: Vec<String>,
    page: usize,
    /// At the end of a list, its `nextCursor` goes back to the second page (a member whose
    /// pages go round in a circle).
    wraps: bool,
    instructions: Option<String>,
    down: AtomicBool,
    calls: Mutex<Vec<(String, Value)>>,
}

impl Fake {
    /// A member named `name` with tools, prompts, resources and logging, and nothing listed.
    pub fn new(name: &str) -> Fake {
        Fake {
            name: name.to_owned(),
            caps: json!({"tools": {"listChanged": false}, "prompts": {},
                         "resources": {"subscribe": false}, "logging": {}}),
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            serves: Vec::new(),
            page: 0,
            wraps: false,
            instructions: None,
            down: AtomicBool::new(false),
            calls: Mutex::default(),
        }
    }

    /// Lists tools named `names` (with a schema, and an unknown field that must pass through).
    pub fn tools(mut self, names: &[&str]) -> Fake {
        self.tools = names
            .iter()
            .map(|n| {
                json!({"name": n, "inputSchema": {"type": "object", "$defs": {"x": {"const": n}}},
                       "x-vendor": {"kept": true}})
            })
            .collect();
        self
    }

    /// Lists prompts named `names`.
    pub fn prompts(mut self, names: &[&str]) -> Fake {
        self.prompts = names.iter().map(|n| json!({"name": n})).collect();
        self
    }

    /// Lists resources with these URIs.
    pub fn resources(mut self, uris: &[&str]) -> Fake {
        self.resources = uris.iter().map(|u| json!({"uri": u, "name": u})).collect();
        self
    }

    /// Lists templates, and serves every URI that starts with the matching `serves` prefix.
    pub fn templates(mut self, templates: &[&str], serves: &[&str]) -> Fake {
        self.templates = templates
            .iter()
            .map(|t| json!({"uriTemplate": t, "name": t}))
            .collect();
        self.serves = serves.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Serves URIs starting with `prefix` without listing them.
    pub fn serves(mut self, prefix: &str) -> Fake {
        self.serves.push(prefix.to_owned());
        self
    }

    /// Pages lists `n` entries at a time.
    pub fn page(mut self, n: usize) -> Fake {
        self.page = n;
        self
    }

    /// At the end of a paged list, answers a `nextCursor` back to the second page.
    pub fn wraps(mut self) -> Fake {
        self.wraps = true;
        self
    }

    /// Declares these capabilities.
    pub fn caps(mut self, caps: Value) -> Fake {
        self.caps = caps;
        self
    }

    /// Has these instructions.
    pub fn instructions(mut self, text: &str) -> Fake {
        self.instructions = Some(text.to_owned());
        self
    }

    /// Makes it unreachable (or reachable again).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// The requests it answered so far, as (method, params).
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }

    /// How many requests of `method` it was sent.
    pub fn count(&self, method: &str) -> usize {
        self.calls().iter().filter(|(m, _)| m == method).count()
    }

    fn list(&self, key: &str, all: &[Value], params: &Value) -> Result<Value, RpcError> {
        let start = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(c) => c
                .strip_prefix("p")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| RpcError::invalid_params("bad cursor"))?,
        };
        let size = if self.page == 0 { all.len() } else { self.page };
        let end = (start + size).min(all.len());
        let mut out = json!({ key: all[start.min(end)..end] });
        if end < all.len() {
            out["nextCursor"] = json!(format!("p{end}"));
        } else if self.wraps {
            out["nextCursor"] = json!(format!("p{size}"));
        }
        Ok(out)
    }

    fn record(&self, method: &str, params: Value) {
        self.calls.lock().unwrap().push((method.to_owned(), params));
    }

    fn has_name(all: &[Value], name: &str) -> bool {
        all.iter().any(|e| e["name"] == name)
    }

    fn reads(&self, uri: &str) -> bool {
        self.resources.iter().any(|r| r["uri"] == uri)
            || self.serves.iter().any(|p| uri.starts_with(p.as_str()))
    }
}

#[async_trait]
impl Upstream for Fake {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Value {
        self.caps.clone()
    }

    fn server_info(&self) -> Value {
        json!({"name": self.name})
    }

    fn instructions(&self) -> Option<String> {
        self.instructions.clone()
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        _ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                "connection refused",
            ));
        }
        self.record(method, params.clone());
        let me = &self.name;
        let name = params["name"].as_str().unwrap_or_default();
        let uri = params["uri"].as_str().unwrap_or_default();
        match method {
            "tools/list" => self.list("tools", &self.tools, &params),
            "prompts/list" => self.list("prompts", &self.prompts, &params),
            "resources/list" => self.list("resources", &self.resources, &params),
            "resources/templates/list" => self.list("resourceTemplates", &self.templates, &params),
            "tools/call" if Fake::has_name(&self.tools, name) => {
                Ok(json!({"content": [{"type": "text", "text": format!("{me}:{name}")}]}))
            }
            "prompts/get" if Fake::has_name(&self.prompts, name) => {
                Ok(json!({"messages": [], "description": format!("{me}:{name}")}))
            }
            "tools/call" | "prompts/get" => {
                Err(RpcError::invalid_params(format!("unknown: {name}")))
            }
            "resources/read" if self.reads(uri) => {
                Ok(json!({"contents": [{"uri": uri, "text": me}]}))
            }
            "resources/subscribe" | "resources/unsubscribe" if self.reads(uri) => Ok(json!({})),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Err(RpcError {
                data: Some(json!({"uri": uri})),
                ..RpcError::new(codes::RESOURCE_NOT_FOUND, "Resource not found")
            }),
            "completion/complete" => Ok(json!({"completion": {"values": [me]}})),
            "logging/setLevel" => Ok(json!({})),
            "custom/echo" => Ok(json!({"from": me, "params": params})),
            other => Err(RpcError::method_not_found(other)),
        }
    }

    async fn prepare(&self) {
        self.record("(prepare)", Value::Null);
    }

    async fn notify(&self, method: &str, params: Value, _session: Arc<dyn SessionHandle>) {
        self.record(&format!("(notify) {method}"), params);
    }

    async fn session_ended(&self, session_id: &str) {
        self.record("(ended)", json!(session_id));
    }
}

/// Members `(name, prefix, fake)` as an aggregate with the default separator, plus the fakes.
pub(super) fn aggregate(members: Vec<(&str, Option<&str>, Fake)>) -> (Aggregate, Vec<Arc<Fake>>) {
    let mut fakes = Vec::new();
    let mut list = Vec::new();
    for (name, prefix, fake) in members {
        let fake = Arc::new(fake);
        list.push(Member {
            name: name.to_owned(),
            prefix: prefix.map(str::to_owned),
            upstream: fake.clone(),
        });
        fakes.push(fake);
    }
    let agg = Aggregate::new(list, super::DEFAULT_SEPARATOR).expect("valid aggregate");
    (agg, fakes)
}

/// An aggregate of two demo servers with prefixes `a` and `b`.
pub(super) fn two_demos() -> Aggregate {
    let member = |name: &str| Member {
        name: name.into(),
        prefix: Some(name.into()),
        upstream: Arc::new(DemoUpstream::new()),
    };
    Aggregate::new(vec![member("a"), member("b")], "__").unwrap()
}

/// Sends one request.
pub(super) async fn ask(agg: &Aggregate, method: &str, params: Value) -> Result<Value, RpcError> {
    agg.request(method, params, ctx()).await
}

/// The `name`s (or `uri`s) of a list answer's entries under `key`.
pub(super) fn names(answer: &Value, key: &str, field: &str) -> Vec<String> {
    answer[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {answer}"))
        .iter()
        .map(|e| e[field].as_str().unwrap().to_owned())
        .collect()
}

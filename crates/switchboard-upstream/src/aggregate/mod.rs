//! [`Aggregate`]: several upstreams ("members") behind one MCP server.
//!
//! What the client sees (MCP 2025-11-25 throughout):
//! - `initialize`: the members' capabilities merged ([`Aggregate::capabilities`]), Switchboard's
//!   own `serverInfo`, and the members' `instructions`, each under its member's name.
//! - `tools/list`, `prompts/list`: every member's entries in member order, names prefixed
//!   `<prefix><separator><name>` (default separator `__`), everything else verbatim (JSON Schemas
//!   and unknown fields pass through). `resources/list`, `resources/templates/list`: merged the
//!   same way, URIs unchanged. Pagination walks every member's pages behind one opaque cursor
//!   (`cursor`). A list never silently shrinks: when a member that is asked fails its page
//!   (anything but -32601), the list fails with an error naming every such member (`lists`).
//! - `tools/call`, `prompts/get`: routed by prefix, which is stripped before forwarding; a name in
//!   no member's namespace goes to the unprefixed member that lists it (`routing`).
//! - `resources/read`, `resources/subscribe`, `resources/unsubscribe`: routed by URI (`resources`).
//! - `completion/complete`: routed by its `ref` (`complete`).
//! - `logging/setLevel`: sent to every member that declares `logging`; answers `{}`.
//! - any other method: forwarded when there is exactly one member, else -32601.
//!
//! Errors of a member that is down or too slow (-32006, -32005) name it: `upstream `weather` is
//! unavailable: …`, with `data.upstream`; requests for the other members keep working. There is
//! no cool-down: every request asks the members it needs again, so a member that is back is
//! used at once (one that refuses connections fails fast by itself, and a slow one is bounded by
//! its own `timeout_ms`). Notifications and
//! server-to-client requests of members reach the client through `ctx.peer` unchanged.
//!
//! With a `[policy]` ([`Aggregate::with_policy`], [`crate::policy`]), every request is seen
//! through its principal's view: merged lists leave out what it may not see (per entry and per
//! member, so cursors stay member positions and stay valid), and a by-name or by-URI request for
//! a hidden item, or one of a hidden member, gets exactly the error of an unknown one (the one
//! member's other methods, -32601 when it is hidden). While a policy is on, a member's own
//! "unknown" error (-32602 for a name its list lacks, "not found" for a URI) is answered in that
//! same shape, so a denied item and a missing one cannot be told apart.
//!
//! Submodules: `names` (prefix rules), `cursor` (pagination cursors), `lists` (merged lists),
//! `routing` (tools and prompts by name), `resources` (by URI), `template` (RFC 6570 matching),
//! `complete` (completion references).

mod complete;
mod cursor;
mod lists;
pub mod names;
mod resources;
mod routing;
mod template;

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};
use switchboard_protocol::codes;

use crate::item::Kind;
use crate::policy::{Policy, View};
use crate::upstream::{RequestContext, RpcError, SessionHandle, Upstream};

use lists::ListKind;
use names::Namespaces;
use resources::UriCache;
use routing::{NameCache, Named};

/// The separator between a member's prefix and a name when none is configured.
pub const DEFAULT_SEPARATOR: &str = "__";

pub use lists::DEFAULT_MAX_PAGES as DEFAULT_LIST_MAX_PAGES;

/// One upstream of an [`Aggregate`].
#[derive(Clone)]
pub struct Member {
    /// The configured name (`[A-Za-z0-9_-]{1,64}`), used in logs, errors and cursors.
    pub name: String,
    /// The namespace of the member's tools and prompts; `None` or `""` publishes them unprefixed.
    pub prefix: Option<String>,
    /// The upstream itself.
    pub upstream: Arc<dyn Upstream>,
}

/// Several upstreams behind one endpoint (see the module doc for what clients see).
pub struct Aggregate {
    members: Vec<Member>,
    policy: Arc<Policy>,
    names: Namespaces,
    tools: NameCache,
    prompts: NameCache,
    uris: UriCache,
    /// Most pages of one member in one walk of a merged list (`list_max_pages`).
    max_list_pages: u32,
}

impl Aggregate {
    /// Checks and builds an aggregate. Errors (naming the member) when there is no member, two
    /// members share a name, a name is not `[A-Za-z0-9_-]{1,64}`, the separator is not 1–16
    /// tool-name characters, a prefix has characters outside `[A-Za-z0-9_.-]` or leaves no room
    /// for a name within 128 characters, or one prefix's namespace contains another's.
    pub fn new(members: Vec<Member>, separator: &str) -> Result<Aggregate, String> {
        if members.is_empty() {
            return Err("an aggregate needs at least one upstream".into());
        }
        for (i, member) in members.iter().enumerate() {
            names::check_member_name(&member.name)?;
            if members[..i].iter().any(|m| m.name == member.name) {
                return Err(format!("upstream name `{}` is used twice", member.name));
            }
        }
        let spec: Vec<(&str, Option<&str>)> = members
            .iter()
            .map(|m| (m.name.as_str(), m.prefix.as_deref()))
            .collect();
        let names = Namespaces::new(&spec, separator)?;
        Ok(Aggregate {
            members,
            policy: Arc::new(Policy::default()),
            names,
            tools: NameCache::default(),
            prompts: NameCache::default(),
            uris: UriCache::default(),
            max_list_pages: lists::DEFAULT_MAX_PAGES,
        })
    }

    /// This aggregate with `policy` applied to every request, by the request's principal
    /// ([`crate::policy`]; see the module doc for where).
    pub fn with_policy(mut self, policy: Arc<Policy>) -> Aggregate {
        self.policy = policy;
        self
    }

    /// This aggregate with at most `pages` pages of one member in one walk of a merged list
    /// (`list_max_pages`, at least 1): past them the list fails naming the member.
    pub fn with_max_list_pages(mut self, pages: u32) -> Aggregate {
        self.max_list_pages = pages.max(1);
        self
    }

    /// What the principal of `ctx` may see.
    fn view(&self, ctx: &RequestContext) -> View<'_> {
        self.policy.view(&ctx.principal)
    }

    /// Whether the principal of `view` may use member `i` at all.
    fn member_allowed(&self, view: &View<'_>, i: usize) -> bool {
        view.allows(Kind::Upstream, &self.members[i].name)
    }

    /// Merged capabilities (see [`merge_capabilities`]) of the members `offered` keeps; with one
    /// member, its capabilities as they are (every method is forwarded to it, so nothing it
    /// declares is lost), or `{}` when `offered` drops it.
    fn offered_capabilities(&self, offered: impl Fn(usize) -> bool) -> Value {
        if let [only] = self.members.as_slice() {
            return if offered(0) {
                only.upstream.capabilities()
            } else {
                json!({})
            };
        }
        let all: Vec<Value> = (0..self.members.len())
            .filter(|&i| offered(i))
            .map(|i| self.members[i].upstream.capabilities())
            .collect();
        merge_capabilities(&all)
    }

    /// The instructions of the members `offered` keeps, each under a `## <name>` heading that
    /// says how its names are prefixed; `None` when none of them has any.
    fn offered_instructions(&self, offered: impl Fn(usize) -> bool) -> Option<String> {
        let parts: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .filter(|&(i, _)| offered(i))
            .filter_map(|(i, m)| {
                let text = m.upstream.instructions()?;
                let naming = match self.names.head(i) {
                    Some(head) => format!("Its tools and prompts are named `{head}<name>`.\n"),
                    None => String::new(),
                };
                Some(format!("## {}\n{naming}{text}", m.name))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The members, in order.
    pub fn member_list(&self) -> &[Member] {
        &self.members
    }

    /// Sends one request to member `i`. Errors of a member that is down (-32006) or too slow
    /// (-32005) are made to name it, when they do not already.
    async fn call(
        &self,
        i: usize,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        let member = &self.members[i];
        member
            .upstream
            .request(method, params, ctx)
            .await
            .map_err(|e| name_error(&member.name, e))
    }

    /// Whether member `i` may serve `capability` (`tools`, `prompts`, `resources`, …): it declares
    /// it, or its capabilities are not known yet (not an object, or empty).
    fn declares(&self, i: usize, capability: &str) -> bool {
        match self.members[i].upstream.capabilities() {
            Value::Object(caps) => caps.is_empty() || caps.contains_key(capability),
            _ => true,
        }
    }

    /// Member names, in order.
    fn member_names(&self) -> Vec<&str> {
        self.members.iter().map(|m| m.name.as_str()).collect()
    }

    /// `logging/setLevel`: to every member that declares `logging`; failures are logged.
    async fn set_level(&self, params: Value, ctx: RequestContext) -> Result<Value, RpcError> {
        let view = self.view(&ctx);
        let targets: Vec<usize> = (0..self.members.len())
            .filter(|&i| self.declares(i, "logging") && self.member_allowed(&view, i))
            .collect();
        let calls = targets
            .iter()
            .map(|&i| self.call(i, "logging/setLevel", params.clone(), ctx.clone()));
        for (i, out) in targets.iter().zip(futures::future::join_all(calls).await) {
            if let Err(e) = out {
                let upstream = &self.members[*i].name;
                tracing::warn!(upstream = %upstream, error = %e, "logging/setLevel failed");
            }
        }
        Ok(json!({}))
    }
}

/// Makes an unavailable or timeout error of member `name` say so, and carry `data.upstream`.
fn name_error(name: &str, mut e: RpcError) -> RpcError {
    let what = match e.code {
        codes::UPSTREAM_UNAVAILABLE => "is unavailable",
        codes::UPSTREAM_TIMEOUT => "did not answer in time",
        _ => return e,
    };
    if !e.message.contains(&format!("`{name}`")) {
        e.message = format!("upstream `{name}` {what}: {}", e.message);
    }
    match &mut e.data {
        None => e.data = Some(json!({"upstream": name})),
        Some(Value::Object(data)) if !data.contains_key("upstream") => {
            data.insert("upstream".into(), json!(name));
        }
        Some(_) => {}
    }
    e
}

/// The members' capabilities merged: each of `tools`, `prompts`, `resources`, `logging`,
/// `completions` that any member declares, with `listChanged` / `subscribe` true when any member
/// sets it (MCP 2025-11-25, basic/lifecycle, Capability Negotiation).
fn merge_capabilities(all: &[Value]) -> Value {
    let mut out = Map::new();
    let flags: [(&str, &[&str]); 5] = [
        ("tools", &["listChanged"]),
        ("prompts", &["listChanged"]),
        ("resources", &["subscribe", "listChanged"]),
        ("logging", &[]),
        ("completions", &[]),
    ];
    for (key, flags) in flags {
        let declared: Vec<&Value> = all.iter().filter_map(|c| c.get(key)).collect();
        if declared.is_empty() {
            continue;
        }
        let mut entry = Map::new();
        for flag in flags {
            let said: Vec<bool> = declared
                .iter()
                .filter_map(|d| d.get(*flag).and_then(Value::as_bool))
                .collect();
            if !said.is_empty() {
                entry.insert((*flag).to_owned(), json!(said.contains(&true)));
            }
        }
        out.insert(key.to_owned(), Value::Object(entry));
    }
    Value::Object(out)
}

#[async_trait]
impl Upstream for Aggregate {
    fn name(&self) -> &str {
        "switchboard"
    }

    /// Merged capabilities (see [`merge_capabilities`]). With one member, its capabilities as
    /// they are: every method is forwarded to it, so nothing it declares is lost.
    fn capabilities(&self) -> Value {
        self.offered_capabilities(|_| true)
    }

    /// Of the members `principal` may use only (`{}` when none).
    fn capabilities_for(&self, principal: &crate::Principal) -> Value {
        let view = self.policy.view(principal);
        self.offered_capabilities(|i| self.member_allowed(&view, i))
    }

    /// `{"name": "switchboard", "version": <crate version>}`.
    fn server_info(&self) -> Value {
        json!({"name": "switchboard", "version": env!("CARGO_PKG_VERSION")})
    }

    /// Only when every member does.
    fn serves_stateless(&self) -> bool {
        self.members.iter().all(|m| m.upstream.serves_stateless())
    }

    /// Each member's instructions under a `## <name>` heading that says how its names are
    /// prefixed; `None` when no member has any.
    fn instructions(&self) -> Option<String> {
        self.offered_instructions(|_| true)
    }

    /// Of the members `principal` may use only.
    fn instructions_for(&self, principal: &crate::Principal) -> Option<String> {
        let view = self.policy.view(principal);
        self.offered_instructions(|i| self.member_allowed(&view, i))
    }

    async fn request(
        &self,
        method: &str,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        if let Some(kind) = ListKind::of(method) {
            return lists::merged(self, kind, params, ctx).await;
        }
        match method {
            "tools/call" => routing::forward(self, Named::Tool, method, params, ctx).await,
            "prompts/get" => routing::forward(self, Named::Prompt, method, params, ctx).await,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                resources::forward(self, method, params, ctx).await
            }
            "completion/complete" => complete::forward(self, params, ctx).await,
            "logging/setLevel" => self.set_level(params, ctx).await,
            // The one member's other methods: only for a principal that may use it.
            _ if self.members.len() == 1 && self.member_allowed(&self.view(&ctx), 0) => {
                self.call(0, method, params, ctx).await
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    fn members(&self) -> Vec<Arc<dyn Upstream>> {
        self.members.iter().map(|m| m.upstream.clone()).collect()
    }

    /// The policy's view of `principal`.
    fn visible(&self, principal: &crate::Principal, kind: Kind, name: &str) -> bool {
        self.policy.view(principal).allows(kind, name)
    }

    /// The policy's step-up: scopes a wider token would need for this request.
    fn lacking_scopes(
        &self,
        principal: &crate::Principal,
        method: &str,
        params: &Value,
    ) -> Option<Vec<String>> {
        self.policy.lacking_scopes(principal, method, params)
    }

    /// Prepares every member concurrently.
    async fn prepare(&self) {
        futures::future::join_all(self.members.iter().map(|m| m.upstream.prepare())).await;
    }

    /// Forwards the notification to every member.
    async fn notify(&self, method: &str, params: Value, session: Arc<dyn SessionHandle>) {
        let sends = self
            .members
            .iter()
            .map(|m| m.upstream.notify(method, params.clone(), session.clone()));
        futures::future::join_all(sends).await;
    }

    /// Tells every member.
    async fn session_ended(&self, session_id: &str) {
        let ends = self
            .members
            .iter()
            .map(|m| m.upstream.session_ended(session_id));
        futures::future::join_all(ends).await;
    }

    /// Every member's held sessions.
    fn held_sessions(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .members
            .iter()
            .flat_map(|m| m.upstream.held_sessions())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Shuts every member down.
    async fn shutdown(&self) {
        futures::future::join_all(self.members.iter().map(|m| m.upstream.shutdown())).await;
    }

    /// Every member's, at the same time.
    async fn refresh_statuses(&self) {
        futures::future::join_all(self.members.iter().map(|m| m.upstream.refresh_statuses())).await;
    }

    /// Every member's, in member order.
    fn statuses(&self) -> Vec<crate::status::UpstreamStatus> {
        self.members
            .iter()
            .flat_map(|m| m.upstream.statuses())
            .collect()
    }
}

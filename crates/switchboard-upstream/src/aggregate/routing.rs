//! Routing `tools/call` and `prompts/get` by name (MCP 2025-11-25, server/tools, server/prompts).
//!
//! A name in a prefixed member's namespace (`<prefix><separator><rest>`) goes to that member as
//! `<rest>`. Any other name belongs to the unprefixed members: with one, it goes there; with
//! several, to the first whose list contains it, found through a per-node cache of name → member
//! that is rebuilt from the members' lists whenever a name is not in it. A name nobody owns is
//! -32602 `unknown tool: <name>` with `data.name` ([`crate::policy::unknown_tool`]); a name the
//! principal may not see gets the same ([`visible_route`]).

use std::collections::HashMap;

use parking_lot::Mutex;
use serde_json::Value;
use switchboard_protocol::codes;

use super::lists::{self, ListKind};
use super::Aggregate;
use crate::item::Kind;
use crate::policy;
use crate::upstream::{RequestContext, RpcError};

/// Most names kept in one [`NameCache`]; names past it are looked up by listing again.
const MAX_CACHED_NAMES: usize = 10_000;

/// What is routed by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Named {
    /// Tools (`tools/call`, names from `tools/list`).
    Tool,
    /// Prompts (`prompts/get` and `ref/prompt` completions, names from `prompts/list`).
    Prompt,
}

impl Named {
    fn list(self) -> ListKind {
        match self {
            Named::Tool => ListKind::Tools,
            Named::Prompt => ListKind::Prompts,
        }
    }

    /// What the policy calls these names.
    pub(super) fn kind(self) -> Kind {
        match self {
            Named::Tool => Kind::Tool,
            Named::Prompt => Kind::Prompt,
        }
    }

    /// The error for a name nobody owns, or the caller may not see (one shape for both).
    pub(super) fn unknown(self, name: &str) -> RpcError {
        match self {
            Named::Tool => policy::unknown_tool(name),
            Named::Prompt => policy::unknown_prompt(name),
        }
    }
}

/// Which unprefixed member owns which name, on this node.
#[derive(Default)]
pub(super) struct NameCache {
    map: Mutex<HashMap<String, usize>>,
}

impl NameCache {
    fn get(&self, name: &str) -> Option<usize> {
        self.map.lock().get(name).copied()
    }

    fn replace(&self, map: HashMap<String, usize>) {
        *self.map.lock() = map;
    }

    fn forget(&self, name: &str) {
        self.map.lock().remove(name);
    }
}

/// Where a name goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Route {
    /// The member.
    pub member: usize,
    /// The name as the member knows it.
    pub local: String,
    /// Whether the route came from the cache of unprefixed names.
    pub cached: bool,
}

/// Forwards `tools/call` or `prompts/get` to the member that owns `params.name`, with the name
/// as the member knows it; every other param passes unchanged. -32602 when `name` is missing,
/// nobody owns it, or the principal may not see it ([`Named::unknown`], the same error).
pub(super) async fn forward(
    agg: &Aggregate,
    named: Named,
    method: &str,
    mut params: Value,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("missing or non-string parameter `name`"))?
        .to_owned();
    let route = visible_route(agg, named, &name, &ctx).await?;
    params["name"] = Value::String(route.local.clone());
    let out = agg.call(route.member, method, params, ctx.clone()).await;
    let unknown = matches!(&out, Err(e) if e.code == codes::INVALID_PARAMS);
    if route.cached && unknown {
        // Perhaps the name moved to another member: look it up afresh next time.
        cache(agg, named).forget(&name);
    }
    if unknown && !agg.policy.is_off() && !listed(agg, named, &route, &ctx).await {
        // The member's own "unknown" error could tell a missing name from a denied one.
        return Err(named.unknown(&name));
    }
    out
}

/// [`route`] for the principal of `ctx`: a name it may not see, or of a member it may not use,
/// is unknown.
pub(super) async fn visible_route(
    agg: &Aggregate,
    named: Named,
    name: &str,
    ctx: &RequestContext,
) -> Result<Route, RpcError> {
    let view = agg.view(ctx);
    if !view.allows(named.kind(), name) {
        return Err(named.unknown(name));
    }
    let route = route(agg, named, name, ctx).await?;
    if !agg.member_allowed(&view, route.member) {
        return Err(named.unknown(name));
    }
    Ok(route)
}

/// Whether the route's member lists its local name (a member whose list cannot be read counts
/// as listing it, so its error passes unchanged).
async fn listed(agg: &Aggregate, named: Named, route: &Route, ctx: &RequestContext) -> bool {
    match lists::all_entries(agg, named.list(), route.member, ctx).await {
        Ok(entries) => entries
            .iter()
            .any(|e| e.get("name").and_then(Value::as_str) == Some(route.local.as_str())),
        Err(_) => true,
    }
}

/// The member that owns `name` (see the module doc).
pub(super) async fn route(
    agg: &Aggregate,
    named: Named,
    name: &str,
    ctx: &RequestContext,
) -> Result<Route, RpcError> {
    if let Some((member, local)) = agg.names.split(name) {
        return Ok(Route {
            member,
            local: local.to_owned(),
            cached: false,
        });
    }
    let unknown = || named.unknown(name);
    let unprefixed = agg.names.unprefixed();
    match unprefixed.as_slice() {
        [] => Err(unknown()),
        [only] => Ok(Route {
            member: *only,
            local: name.to_owned(),
            cached: false,
        }),
        several => {
            let cache = cache(agg, named);
            let member = match cache.get(name) {
                Some(member) => member,
                None => {
                    cache.replace(lookup(agg, named, several, ctx).await);
                    cache.get(name).ok_or_else(unknown)?
                }
            };
            Ok(Route {
                member,
                local: name.to_owned(),
                cached: true,
            })
        }
    }
}

fn cache(agg: &Aggregate, named: Named) -> &NameCache {
    match named {
        Named::Tool => &agg.tools,
        Named::Prompt => &agg.prompts,
    }
}

/// Name → first member listing it, over `members` (listed concurrently; a member that fails is
/// logged and left out).
async fn lookup(
    agg: &Aggregate,
    named: Named,
    members: &[usize],
    ctx: &RequestContext,
) -> HashMap<String, usize> {
    let kind = named.list();
    let lists = members
        .iter()
        .map(|&member| lists::all_entries(agg, kind, member, ctx));
    let lists = futures::future::join_all(lists).await;
    let mut map = HashMap::new();
    for (&member, list) in members.iter().zip(lists) {
        let entries = match list {
            Ok(entries) => entries,
            Err(e) => {
                let upstream = &agg.members[member].name;
                tracing::warn!(upstream = %upstream, method = kind.method(), error = %e, "cannot look up names");
                continue;
            }
        };
        let names = entries
            .iter()
            .filter_map(|e| e.get("name").and_then(Value::as_str));
        for name in names {
            if map.len() >= MAX_CACHED_NAMES {
                return map;
            }
            map.entry(name.to_owned()).or_insert(member);
        }
    }
    map
}

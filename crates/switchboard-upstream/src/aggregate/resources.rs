//! Routing `resources/read`, `resources/subscribe` and `resources/unsubscribe` by URI (MCP
//! 2025-11-25, server/resources). URIs are never rewritten.
//!
//! The owner of a URI, in order of preference:
//! 1. the member this node last saw answer for it (a per-node cache, [`UriCache`]);
//! 2. the first member whose `resources/list` contains it exactly;
//! 3. the first member with a `resources/templates/list` entry that matches it
//!    ([`super::template`]);
//! 4. failing those, every other member in order, until one does not answer "not found".
//!
//! "Not found" is -32002 (2025-11-25), -32602 (2026-07-28, and some SDKs) or -32601 (a member
//! without the method): the next candidate is tried. A member that is down is skipped in step 4
//! but answers for itself in steps 1–3. When nobody has the URI the answer is the owner's error
//! if there was an owner, the error of a member that is down if any, the only member's error if
//! only one was asked, else -32002 `Resource not found` with `data.uri`.
//!
//! The member that answered is noted on the session ([`crate::SessionHandle::served_by`]): the
//! node records a subscription with it, so that only that member's new upstream sessions are
//! subscribed again ([`crate::client_state`]).
//!
//! With a policy, a URI the principal may not see is -32002 `Resource not found` with `data.uri`
//! ([`crate::policy::resource_not_found`]; `resources/unsubscribe` answers `{}`), members it may
//! not use are never asked, and a "not found" of any kind is answered in that one shape.

use std::collections::HashMap;

use parking_lot::Mutex;
use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::lists::{self, ListKind};
use super::template;
use super::Aggregate;
use crate::item::Kind;
use crate::policy::{self, View};
use crate::upstream::{RequestContext, RpcError};

/// Most URIs kept in one node's [`UriCache`]; when full, it starts over.
const MAX_CACHED_URIS: usize = 10_000;

/// Which member answers for which URI, on this node.
#[derive(Default)]
pub(super) struct UriCache {
    /// URI → the index of the member that answers for it.
    pub(super) map: Mutex<HashMap<String, usize>>,
}

impl UriCache {
    pub(super) fn get(&self, uri: &str) -> Option<usize> {
        self.map.lock().get(uri).copied()
    }

    /// Records an owner; a full cache is emptied first.
    pub(super) fn insert(&self, uri: &str, member: usize) {
        let mut map = self.map.lock();
        if map.len() >= MAX_CACHED_URIS && !map.contains_key(uri) {
            map.clear();
        }
        map.insert(uri.to_owned(), member);
    }

    /// Records the listed owners of many URIs while there is room, keeping known ones.
    pub(super) fn fill(&self, owners: impl IntoIterator<Item = (String, usize)>) {
        let mut map = self.map.lock();
        for (uri, member) in owners {
            if map.len() >= MAX_CACHED_URIS {
                return;
            }
            map.entry(uri).or_insert(member);
        }
    }

    pub(super) fn forget(&self, uri: &str) {
        self.map.lock().remove(uri);
    }
}

/// What the members list: per member, its exact URIs and its URI templates.
pub(super) struct Catalog {
    uris: Vec<Vec<String>>,
    templates: Vec<Vec<String>>,
}

impl Catalog {
    /// Lists every member that declares `resources` (both lists, all pages, concurrently); a
    /// member that fails lists nothing.
    pub(super) async fn load(agg: &Aggregate, ctx: &RequestContext) -> Catalog {
        let n = agg.members.len();
        let one = |member: usize| async move {
            if !agg.declares(member, "resources") {
                return (Vec::new(), Vec::new());
            }
            let (uris, templates) = futures::join!(
                strings(agg, ListKind::Resources, member, "uri", ctx),
                strings(agg, ListKind::Templates, member, "uriTemplate", ctx)
            );
            (uris, templates)
        };
        let all = futures::future::join_all((0..n).map(one)).await;
        let (uris, templates) = all.into_iter().unzip();
        Catalog { uris, templates }
    }

    /// Members that list `uri` exactly, then members with a template matching it; each once, in
    /// that order.
    pub(super) fn owners(&self, uri: &str) -> Vec<usize> {
        let exact = (0..self.uris.len()).filter(|&i| self.uris[i].iter().any(|u| u == uri));
        let by_template = (0..self.templates.len())
            .filter(|&i| self.templates[i].iter().any(|t| template::matches(t, uri)));
        let mut out: Vec<usize> = Vec::new();
        for i in exact.chain(by_template) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
        out
    }

    /// The first member with a template written exactly as `text`.
    pub(super) fn template_owner(&self, text: &str) -> Option<usize> {
        (0..self.templates.len()).find(|&i| self.templates[i].iter().any(|t| t == text))
    }

    /// Every listed URI with its first lister.
    fn listed(&self) -> impl Iterator<Item = (String, usize)> + '_ {
        self.uris
            .iter()
            .enumerate()
            .flat_map(|(i, uris)| uris.iter().map(move |u| (u.clone(), i)))
    }
}

/// The string member `field` of every entry member `member` lists in `kind`.
async fn strings(
    agg: &Aggregate,
    kind: ListKind,
    member: usize,
    field: &str,
    ctx: &RequestContext,
) -> Vec<String> {
    match lists::all_entries(agg, kind, member, ctx).await {
        Ok(entries) => entries
            .iter()
            .filter_map(|e| e.get(field).and_then(Value::as_str).map(str::to_owned))
            .collect(),
        Err(e) => {
            if e.code != codes::METHOD_NOT_FOUND {
                let upstream = &agg.members[member].name;
                tracing::warn!(upstream = %upstream, method = kind.method(), error = %e, "cannot look up resources");
            }
            Vec::new()
        }
    }
}

/// The member that owns `uri` (a URI, or a template as written in a member's list), for
/// routing a completion: the cache, then a template written exactly so, then [`Catalog::owners`].
pub(super) async fn owner(agg: &Aggregate, uri: &str, ctx: &RequestContext) -> Option<usize> {
    if let Some(member) = agg.uris.get(uri) {
        return Some(member);
    }
    let catalog = Catalog::load(agg, ctx).await;
    agg.uris.fill(catalog.listed());
    catalog
        .template_owner(uri)
        .or_else(|| catalog.owners(uri).first().copied())
}

/// Whether an error means "not this member's URI".
fn not_here(e: &RpcError) -> bool {
    matches!(
        e.code,
        codes::RESOURCE_NOT_FOUND | codes::INVALID_PARAMS | codes::METHOD_NOT_FOUND
    )
}

/// Whether an error means the member is down or too slow.
fn unreachable(e: &RpcError) -> bool {
    matches!(
        e.code,
        codes::UPSTREAM_UNAVAILABLE | codes::UPSTREAM_TIMEOUT
    )
}

/// Forwards a by-URI request (see the module doc). -32602 when `uri` is missing.
pub(super) async fn forward(
    agg: &Aggregate,
    method: &str,
    params: Value,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("missing or non-string parameter `uri`"))?
        .to_owned();
    let view = agg.view(&ctx);
    if !view.allows(Kind::Resource, &uri) {
        return hidden(method, &uri);
    }
    let out = by_owner(agg, (method, &uri), params, ctx, &view).await;
    match out {
        Err(e) if not_here(&e) && !agg.policy.is_off() => Err(policy::resource_not_found(&uri)),
        out => out,
    }
}

/// The answer for a URI the principal may not see: `resources/unsubscribe` succeeds (a no-op, as
/// members answer for a URI nobody subscribed to); the others are -32002 as for a missing one.
fn hidden(method: &str, uri: &str) -> Result<Value, RpcError> {
    if method == "resources/unsubscribe" {
        return Ok(json!({}));
    }
    Err(policy::resource_not_found(uri))
}

/// Tries the URI's owners, then the other members the principal may use (module doc).
async fn by_owner(
    agg: &Aggregate,
    (method, uri): (&str, &str),
    params: Value,
    ctx: RequestContext,
    view: &View<'_>,
) -> Result<Value, RpcError> {
    let uri = uri.to_owned();
    let mut refused: Vec<(usize, bool, RpcError)> = Vec::new();
    let cached = agg.uris.get(&uri).filter(|&m| agg.member_allowed(view, m));
    if let Some(member) = cached {
        match agg.call(member, method, params.clone(), ctx.clone()).await {
            Err(e) if not_here(&e) => {
                agg.uris.forget(&uri);
                refused.push((member, true, e));
            }
            out => {
                if out.is_ok() {
                    ctx.session.served_by(&agg.members[member].name);
                }
                return out;
            }
        }
    }
    let catalog = Catalog::load(agg, &ctx).await;
    agg.uris.fill(catalog.listed());
    let mut owners = catalog.owners(&uri);
    owners.retain(|&i| agg.member_allowed(view, i));
    let others = (0..agg.members.len()).filter(|&i| {
        !owners.contains(&i) && agg.declares(i, "resources") && agg.member_allowed(view, i)
    });
    let candidates: Vec<(usize, bool)> = owners
        .iter()
        .map(|&i| (i, true))
        .chain(others.map(|i| (i, false)))
        .collect();
    for (member, owner) in candidates {
        if refused.iter().any(|(m, _, _)| *m == member) {
            continue;
        }
        match agg.call(member, method, params.clone(), ctx.clone()).await {
            Ok(answer) => {
                agg.uris.insert(&uri, member);
                ctx.session.served_by(&agg.members[member].name);
                return Ok(answer);
            }
            Err(e) if not_here(&e) || (!owner && unreachable(&e)) => {
                refused.push((member, owner, e));
            }
            Err(e) => return Err(e),
        }
    }
    Err(pick_error(refused, &uri))
}

/// The error to answer when no member served a URI (see the module doc).
fn pick_error(mut refused: Vec<(usize, bool, RpcError)>, uri: &str) -> RpcError {
    if let Some(i) = refused.iter().position(|(_, owner, _)| *owner) {
        return refused.swap_remove(i).2;
    }
    if let Some(i) = refused.iter().position(|(_, _, e)| unreachable(e)) {
        return refused.swap_remove(i).2;
    }
    if refused.len() == 1 {
        return refused.remove(0).2;
    }
    RpcError {
        data: Some(json!({"uri": uri})),
        ..RpcError::new(codes::RESOURCE_NOT_FOUND, "Resource not found")
    }
}

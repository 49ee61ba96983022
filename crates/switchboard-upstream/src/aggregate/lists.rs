//! The merged lists: `tools/list`, `prompts/list`, `resources/list` and
//! `resources/templates/list` (MCP 2025-11-25, server/tools, server/prompts, server/resources),
//! paginated across members (server/utilities/pagination).
//!
//! One answer holds the entries of consecutive members, in member order, until a member says it
//! has more (`nextCursor`): the answer then ends there, with a cursor ([`super::cursor`]) that
//! resumes at that member's next page. A walk without cursors asks every member at once; a walk
//! that resumes asks the cursor's member first and the ones after it only when it is done, so a
//! member with many pages does not make the others answer once per page.
//!
//! A list never silently shrinks (case C08): a client takes a list as the whole truth (a tool
//! missing from it is gone), so when a member that is asked cannot answer its page (any error but
//! -32601, "method not found", which means it has no such list) the answer is an error naming it
//! ([`incomplete`]), not the other members' entries. Members are asked when they declare the
//! list's capability, or when their capabilities are not known yet.
//!
//! A walk ends: a member whose `nextCursor` repeats one it gave earlier in the walk (its pages go
//! round in a circle), or that has more than `list_max_pages` pages, fails the list with an error
//! naming it ([`after`]), instead of sending the client round for ever (case C43).
//!
//! A policy ([`crate::policy`]) filters per entry, after prefixing, and leaves out members the
//! principal may not use; cursors still name member positions, so paging stays consistent (a
//! page may come out empty with a `nextCursor`).

use serde_json::{json, Map, Value};
use switchboard_protocol::codes;

use super::cursor::{self, Position};
use super::Aggregate;
use crate::item::Kind;
use crate::policy::View;
use crate::upstream::{RequestContext, RpcError};

/// Most pages read from one member when collecting all its entries (for routing lookups).
const MAX_LOOKUP_PAGES: usize = 100;

/// Most pages of one member in one walk of a merged list, by default (`list_max_pages`).
pub const DEFAULT_MAX_PAGES: u32 = 1000;

/// A merged list method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListKind {
    /// `tools/list` → `tools`.
    Tools,
    /// `prompts/list` → `prompts`.
    Prompts,
    /// `resources/list` → `resources`.
    Resources,
    /// `resources/templates/list` → `resourceTemplates`.
    Templates,
}

impl ListKind {
    /// The kind of a list method.
    pub(super) fn of(method: &str) -> Option<ListKind> {
        match method {
            "tools/list" => Some(ListKind::Tools),
            "prompts/list" => Some(ListKind::Prompts),
            "resources/list" => Some(ListKind::Resources),
            "resources/templates/list" => Some(ListKind::Templates),
            _ => None,
        }
    }

    /// The method.
    pub(super) fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Prompts => "prompts/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
        }
    }

    /// The result member holding the entries.
    pub(super) fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
        }
    }

    /// The server capability a member needs to be asked.
    pub(super) fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }

    /// Whether `view` shows `entry` (an entry as the client sees it): tools and prompts by
    /// `name`, resources by `uri`, templates by `uriTemplate` (a missing one reads as `""`).
    pub(super) fn visible(self, view: &View<'_>, entry: &Value) -> bool {
        if view.is_unrestricted() {
            return true;
        }
        let (kind, field) = match self {
            ListKind::Tools => (Kind::Tool, "name"),
            ListKind::Prompts => (Kind::Prompt, "name"),
            ListKind::Resources => (Kind::Resource, "uri"),
            ListKind::Templates => (Kind::Resource, "uriTemplate"),
        };
        view.allows(kind, entry.get(field).and_then(Value::as_str).unwrap_or(""))
    }

    /// Whether entry names are namespaced by member prefix.
    fn namespaced(self) -> bool {
        matches!(self, ListKind::Tools | ListKind::Prompts)
    }
}

/// Answers a list request: `{<key>: [...], "nextCursor"?: "..."}`. -32602 for a cursor that is
/// not a string or not ours.
pub(super) async fn merged(
    agg: &Aggregate,
    kind: ListKind,
    params: Value,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    let resume = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(cursor::decode(text, &agg.member_names(), kind.key())?),
        Some(_) => return Err(RpcError::invalid_params("cursor must be a string")),
    };
    let view = agg.view(&ctx);
    let mut entries = Vec::new();
    let rest_from = match resume {
        // A cursor into a member the principal may not use (made before a policy change, or
        // by hand): that member is done.
        Some(at) if !agg.member_allowed(&view, at.member) => at.member + 1,
        Some(at) => {
            // `list_max_pages` pages of this member were delivered: it has more than that.
            if at.pages >= agg.max_list_pages {
                return Err(incomplete(
                    agg,
                    kind,
                    vec![(at.member, too_many_pages(agg, kind, &at))],
                ));
            }
            let page = page(agg, kind, &params, &at, ctx.clone()).await;
            match usable(agg, kind, at.member, page) {
                Err(e) => return Err(incomplete(agg, kind, vec![(at.member, e)])),
                Ok(Some(page)) => {
                    let next = after(agg, kind, &at, &page)
                        .map_err(|e| incomplete(agg, kind, vec![(at.member, e)]))?;
                    let next = next.ok_or(at.member);
                    if let Some(next) = take(agg, kind, (next, &view), &page, &mut entries) {
                        return Ok(answer(kind, entries, Some(next)));
                    }
                }
                Ok(None) => {}
            }
            at.member + 1
        }
        None => 0,
    };
    let rest: Vec<usize> = (rest_from..agg.members.len())
        .filter(|&i| agg.declares(i, kind.capability()) && agg.member_allowed(&view, i))
        .collect();
    let pages = rest.iter().map(|&member| {
        let first = Position {
            member,
            ..Position::default()
        };
        let ctx = ctx.clone();
        let params = &params;
        async move { page(agg, kind, params, &first, ctx).await }
    });
    let pages = futures::future::join_all(pages).await;
    // The members whose entries this answer holds: up to the first that has more pages. A member
    // after it is asked again when the client resumes, so its failure does not count here.
    let mut failed = Vec::new();
    let mut answered = Vec::new();
    for (member, page) in rest.into_iter().zip(pages) {
        let first = Position {
            member,
            ..Position::default()
        };
        match usable(agg, kind, member, page) {
            Err(e) => failed.push((member, e)),
            Ok(None) => {}
            Ok(Some(page)) => match after(agg, kind, &first, &page) {
                Err(e) => failed.push((member, e)),
                Ok(next) => {
                    let more = next.is_some();
                    answered.push((member, next, page));
                    if more {
                        break;
                    }
                }
            },
        }
    }
    if !failed.is_empty() {
        return Err(incomplete(agg, kind, failed));
    }
    for (member, next, page) in answered {
        let next = next.ok_or(member);
        if let Some(next) = take(agg, kind, (next, &view), &page, &mut entries) {
            return Ok(answer(kind, entries, Some(next)));
        }
    }
    Ok(answer(kind, entries, None))
}

/// A member's page, `None` when the member has no such list (-32601), or its error (a page
/// without the list's array, e.g. no `tools`, is one: -32603 naming the member).
fn usable(
    agg: &Aggregate,
    kind: ListKind,
    member: usize,
    page: Result<Value, RpcError>,
) -> Result<Option<Value>, RpcError> {
    match page {
        Ok(page) if page.get(kind.key()).is_some_and(Value::is_array) => Ok(Some(page)),
        Ok(_) => Err(RpcError::new(
            codes::INTERNAL_ERROR,
            format!(
                "upstream `{}` answered {} without `{}`",
                agg.members[member].name,
                kind.method(),
                kind.key()
            ),
        )),
        Err(e) if e.code == codes::METHOD_NOT_FOUND => {
            let name = &agg.members[member].name;
            tracing::debug!(upstream = %name, method = kind.method(), "upstream has no such list");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The error of a merged list that some members could not answer (`failed`, in member order,
/// at least one): `request cancelled` (-32004) as it is when the client cancelled; else the
/// failures' code when they all share one (-32006 unavailable, -32005 too slow, or the member's
/// own), -32006 when they differ. The message names every failed member and its cause
/// (``tools/list cannot be answered in full: upstream `a` is unavailable: …; upstream `b` …``);
/// `data.upstream` is the first failed member (as in every upstream error), `data.upstreams`
/// all of them, and `data.errors` each one's `{upstream, code, message, data?}`.
pub(super) fn incomplete(
    agg: &Aggregate,
    kind: ListKind,
    failed: Vec<(usize, RpcError)>,
) -> RpcError {
    if let Some((_, cancelled)) = failed
        .iter()
        .find(|(_, e)| e.code == codes::REQUEST_ABORTED)
    {
        return cancelled.clone();
    }
    let code = match failed.first() {
        Some((_, first)) if failed.iter().all(|(_, e)| e.code == first.code) => first.code,
        _ => codes::UPSTREAM_UNAVAILABLE,
    };
    let mut causes = Vec::new();
    let mut names = Vec::new();
    let mut errors = Vec::new();
    for (member, e) in &failed {
        let name = agg.members[*member].name.as_str();
        tracing::warn!(upstream = %name, method = kind.method(), error = %e, "merged list failed: an upstream could not answer its page");
        causes.push(if e.message.contains(&format!("`{name}`")) {
            e.message.clone()
        } else {
            format!("upstream `{name}`: {}", e.message)
        });
        let mut entry = json!({"upstream": name, "code": e.code, "message": e.message});
        if let Some(data) = &e.data {
            entry["data"] = data.clone();
        }
        names.push(name);
        errors.push(entry);
    }
    RpcError {
        code,
        message: format!(
            "{} cannot be answered in full: {}",
            kind.method(),
            causes.join("; ")
        ),
        data: Some(json!({"upstream": names[0], "upstreams": names, "errors": errors})),
    }
}

/// Every entry member `member` lists (all pages, at most [`MAX_LOOKUP_PAGES`]), names as the
/// member has them.
pub(super) async fn all_entries(
    agg: &Aggregate,
    kind: ListKind,
    member: usize,
    ctx: &RequestContext,
) -> Result<Vec<Value>, RpcError> {
    let mut entries = Vec::new();
    let mut at = Position {
        member,
        ..Position::default()
    };
    let name = &agg.members[member].name;
    for _ in 0..MAX_LOOKUP_PAGES {
        let page = page(agg, kind, &json!({}), &at, ctx.clone()).await?;
        if let Some(list) = page.get(kind.key()).and_then(Value::as_array) {
            entries.extend(list.iter().cloned());
        }
        match after(agg, kind, &at, &page) {
            Ok(Some(next)) => at = next,
            Ok(None) => return Ok(entries),
            Err(e) => {
                tracing::warn!(upstream = %name, method = kind.method(), error = %e.message, "stopped reading a list");
                return Ok(entries);
            }
        }
    }
    tracing::warn!(upstream = %name, method = kind.method(), pages = MAX_LOOKUP_PAGES, "stopped reading a long list");
    Ok(entries)
}

/// One page of one member: the client's params with the member's own cursor.
async fn page(
    agg: &Aggregate,
    kind: ListKind,
    params: &Value,
    at: &Position,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    let mut params = match params {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    params.remove("cursor");
    if let Some(c) = &at.cursor {
        params.insert("cursor".into(), json!(c));
    }
    agg.call(at.member, kind.method(), Value::Object(params), ctx)
        .await
}

/// The position after `at`'s page `page`: `None` when the member has no more pages. An error
/// (-32603, naming the member) when its `nextCursor` is one it gave before in this walk (its
/// pages go round in a circle). A walk asking for a member's page after its `list_max_pages`th
/// gets [`too_many_pages`] instead of that page.
fn after(
    agg: &Aggregate,
    kind: ListKind,
    at: &Position,
    page: &Value,
) -> Result<Option<Position>, RpcError> {
    let Some(next) = next_cursor(page) else {
        return Ok(None);
    };
    let name = &agg.members[at.member].name;
    let method = kind.method();
    let Ok(next) = at.next(next) else {
        let why = format!("upstream `{name}` answered {method} with a nextCursor it had given before in this walk: its pages go round in a circle");
        return Err(RpcError::new(codes::INTERNAL_ERROR, why));
    };
    Ok(Some(next))
}

/// -32603 naming the member whose page after its `list_max_pages`th was asked for.
fn too_many_pages(agg: &Aggregate, kind: ListKind, at: &Position) -> RpcError {
    let (name, method, max) = (
        &agg.members[at.member].name,
        kind.method(),
        agg.max_list_pages,
    );
    let why = format!("upstream `{name}` has more than {max} pages of {method} (`list_max_pages`)");
    RpcError::new(codes::INTERNAL_ERROR, why)
}

/// Adds the entries of member `member`'s page (as [`usable`] let it through) that `view` shows
/// to `entries` (names prefixed where `kind` is namespaced); `next` is where the member goes on
/// ([`after`]), or just the member when it has no more pages. Returns the merged cursor when the
/// member has more pages (also when the policy left none of this page's entries: an empty page
/// with a cursor is a valid page).
fn take(
    agg: &Aggregate,
    kind: ListKind,
    (next, view): (Result<Position, usize>, &View<'_>),
    page: &Value,
    entries: &mut Vec<Value>,
) -> Option<String> {
    let member = match &next {
        Ok(at) => at.member,
        Err(member) => *member,
    };
    let name = &agg.members[member].name;
    let list = page.get(kind.key()).and_then(Value::as_array);
    for entry in list
        .into_iter()
        .flatten()
        .map(|e| qualify(agg, kind, member, e))
        .filter(|e| kind.visible(view, e))
    {
        // Two unprefixed members may list the same name; calls go to the first, so the later
        // one is not published (it could never be called).
        let shadowed = kind.namespaced()
            && entry
                .get("name")
                .is_some_and(|n| entries.iter().any(|e| e.get("name") == Some(n)));
        if shadowed {
            tracing::warn!(upstream = %name, method = kind.method(), entry = %entry["name"], "name already listed by an earlier upstream; left out");
        } else {
            entries.push(entry);
        }
    }
    Some(cursor::encode(&next.ok()?, name, kind.key()))
}

/// `nextCursor` of a page, when it is a non-empty string.
fn next_cursor(page: &Value) -> Option<String> {
    page.get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

/// An entry as the client sees it: for tools and prompts, `name` prefixed; all else verbatim.
fn qualify(agg: &Aggregate, kind: ListKind, member: usize, entry: &Value) -> Value {
    let mut entry = entry.clone();
    if kind.namespaced() {
        if let Some(name) = entry.get("name").and_then(Value::as_str) {
            let qualified = agg.names.qualify(member, name);
            entry["name"] = Value::String(qualified);
        }
    }
    entry
}

/// The merged answer.
fn answer(kind: ListKind, entries: Vec<Value>, next: Option<String>) -> Value {
    let mut out = Map::new();
    out.insert(kind.key().to_owned(), Value::Array(entries));
    if let Some(next) = next {
        out.insert("nextCursor".into(), Value::String(next));
    }
    Value::Object(out)
}

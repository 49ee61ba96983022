//! Routing `completion/complete` by its `ref` (MCP 2025-11-25, server/utilities/completion):
//! - `{"type": "ref/prompt", "name": ...}`: like `prompts/get` ([`super::routing`]), the name
//!   stripped of its prefix before forwarding;
//! - `{"type": "ref/resource", "uri": ...}`: to the member that lists that template (or URI),
//!   else whose template matches it ([`super::resources::owner`]); unchanged;
//! - anything else: to the only member, if there is one.
//!
//! -32602 when `ref` is malformed or nobody owns it; a `ref` the principal may not see, or of a
//! member it may not use, gets the error of one nobody owns.

use serde_json::Value;

use super::resources;
use super::routing::{self, Named};
use super::Aggregate;
use crate::item::Kind;
use crate::upstream::{RequestContext, RpcError};

/// Forwards a completion request to the member its `ref` belongs to.
pub(super) async fn forward(
    agg: &Aggregate,
    mut params: Value,
    ctx: RequestContext,
) -> Result<Value, RpcError> {
    const METHOD: &str = "completion/complete";
    let view = agg.view(&ctx);
    let reference = params
        .get("ref")
        .filter(|r| r.is_object())
        .ok_or_else(|| RpcError::invalid_params("missing or non-object parameter `ref`"))?;
    let text = |key: &str| {
        reference
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| RpcError::invalid_params(format!("`ref.{key}` must be a string")))
    };
    match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = text("name")?;
            let route = routing::visible_route(agg, Named::Prompt, &name, &ctx).await?;
            params["ref"]["name"] = Value::String(route.local);
            agg.call(route.member, METHOD, params, ctx).await
        }
        Some("ref/resource") => {
            let uri = text("uri")?;
            let nobody = || {
                RpcError::invalid_params(format!(
                    "no upstream has a resource or resource template `{uri}`"
                ))
            };
            if !view.allows(Kind::Resource, &uri) {
                return Err(nobody());
            }
            let member = match resources::owner(agg, &uri, &ctx).await {
                Some(member) => member,
                None if agg.members.len() == 1 => 0,
                None => return Err(nobody()),
            };
            if !agg.member_allowed(&view, member) {
                return Err(nobody());
            }
            agg.call(member, METHOD, params, ctx).await
        }
        _ if agg.members.len() == 1 && agg.member_allowed(&view, 0) => {
            agg.call(0, METHOD, params, ctx).await
        }
        other => Err(RpcError::invalid_params(format!(
            "unsupported completion reference type {}",
            other.map_or_else(|| "(none)".to_owned(), |t| format!("`{t}`"))
        ))),
    }
}

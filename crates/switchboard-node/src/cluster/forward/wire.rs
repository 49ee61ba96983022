//! What the owner side of a forwarded request sends back (its outcome, or "moved"), which the
//! origin side reads ([`super::origin::decode_forwarded`]), and finding the member upstream a
//! forwarded request names.

use std::sync::Arc;

use serde_json::{json, Value};
use switchboard_upstream::{RpcError, Upstream};

/// The deepest upstream named `name` in the tree under `up` (a node-bound wrapper's inner one).
pub fn find_member(up: &Arc<dyn Upstream>, name: &str) -> Option<Arc<dyn Upstream>> {
    for m in up.members() {
        if let Some(found) = find_member(&m, name) {
            return Some(found);
        }
    }
    (up.name() == name).then(|| up.clone())
}

/// `{"result": …}` or `{"error": …}`.
pub fn encode_outcome(outcome: &Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(v) => json!({ "result": v }),
        Err(e) => json!({ "error": { "code": e.code, "message": e.message, "data": e.data } }),
    }
}

/// The outcome of a forward this node declined because it is stopping: `{"moved": <node>}`
/// (the origin runs the request elsewhere; [`super::origin::decode_forwarded`] reads it).
pub fn encode_moved(node: &str) -> Value {
    json!({ "moved": node })
}

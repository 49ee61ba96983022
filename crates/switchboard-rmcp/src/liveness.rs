//! What happens to the requests a dead replica left behind. When another replica counts as dead
//! is the runtime's rule ([`switchboard_runtime::liveness`]).
//!
//! A dead replica's requests stay registered in flight (counting toward
//! `max_inflight_per_session`, holding their ids) until someone ends them, and so does a request
//! of this replica whose registration the store applied although this replica saw it fail (an
//! HTTP 500: no call runs behind it). [`end_lost_requests`] ends both kinds, as the gateway's
//! `end_lost_requests` ends dead nodes' requests, whenever a request is refused for either reason;
//! a client resuming a dead replica's stream ends that request too (the runtime's `pump`).

use std::collections::HashMap;

use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::{InflightEntry, StoreResult};
use switchboard_telemetry::trace::logged_session;

use crate::node::Node;

impl Node {
    /// Whether replica `other` is dead, by the runtime's rule
    /// ([`switchboard_runtime::liveness::is_dead`]: its heartbeat key is missing and this
    /// replica has reached the store without a gap for two `node_ttl`s). Never this replica;
    /// `false` while that cannot be told.
    pub async fn is_dead(&self, other: &str) -> bool {
        switchboard_runtime::liveness::is_dead(self, other).await
    }
}

/// The final event of a request of this replica whose POST failed after the store registered
/// it: error -32004 with `why`. (A dead replica's request gets the runtime's
/// [`switchboard_runtime::liveness::lost_request_event`].)
pub(crate) fn lost_request_event(request_key: &str, why: &str) -> String {
    let id = RequestId::from_key(request_key);
    let msg = format!("the request was lost: {why}; send it again");
    jsonrpc::error_response(id.as_ref(), codes::REQUEST_ABORTED, msg, None).to_string()
}

/// Ends every request of session `sid` registered in flight with no call behind it: one of a
/// dead replica (as [`Node::is_dead`] decides), or one of this replica that runs no call here
/// (its POST failed after the store registered it). Each gets a -32004 error as its stream's
/// final event (the runtime's text for a dead replica's, counted in `requests_aborted`) and loses its in-flight entry (one that ended meanwhile only loses its
/// entry, if that is still as listed). Returns how many it ended. One round trip to list them,
/// one per other replica to ask its liveness, one or two per request ended.
pub(crate) async fn end_lost_requests(node: &Node, sid: &str) -> StoreResult<usize> {
    let mut dead: HashMap<String, bool> = HashMap::new();
    let mut ended = 0;
    for entry in node.store.in_flight(sid).await? {
        let dead_node = if entry.node == node.id() {
            if node.running.has(sid, &entry.stream) {
                continue;
            }
            false
        } else {
            let is_dead = match dead.get(&entry.node) {
                Some(d) => *d,
                None => {
                    let d = node.is_dead(&entry.node).await;
                    dead.insert(entry.node.clone(), d);
                    d
                }
            };
            if !is_dead {
                continue;
            }
            true
        };
        end_lost_request(node, sid, &entry, dead_node).await?;
        ended += 1;
    }
    if ended > 0 {
        tracing::info!(session = %logged_session(sid), ended, "requests with no call behind them ended");
    }
    Ok(ended)
}

async fn end_lost_request(
    node: &Node,
    sid: &str,
    entry: &InflightEntry,
    dead_node: bool,
) -> StoreResult<()> {
    let data = if dead_node {
        switchboard_runtime::liveness::lost_request_event(&entry.request_key, &entry.node)
    } else {
        lost_request_event(&entry.request_key, "its POST failed")
    };
    let aborted = node
        .store
        .abort_running(sid, &entry.stream, &entry.node, &data)
        .await?;
    match aborted {
        Some(appended) => {
            if dead_node {
                switchboard_runtime::liveness::count_aborted(sid, &entry.stream, &entry.node);
            }
            node.deliver_here(sid, &entry.stream, &appended, data, true);
        }
        None => {
            node.store.forget_in_flight(sid, entry).await?;
        }
    }
    Ok(())
}

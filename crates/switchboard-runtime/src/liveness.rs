//! When another replica counts as dead.
//!
//! A replica's heartbeat key expires `node_ttl` after its last refresh, whatever the reason: the
//! replica died, or the store could not be reached for a while (a Redis restart, a failover, a
//! partition). After a store outage every replica's key may have lapsed although every replica
//! lives, so a missing key alone is not proof of death: this replica takes another for dead only
//! when the other's key is missing **and** its own heartbeats have been answered, without a gap,
//! for [`CONFIRM_TTLS`] × `node_ttl` ([`crate::health::StoreHealth::answering_for`]). A live
//! replica has refreshed its key by then (its heartbeat runs every third of `node_ttl`; one
//! stuck in the outage gives up after `node_ttl`).

use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_telemetry::trace::logged_session;

use crate::replica::Replica;

/// How many `node_ttl`s this replica's heartbeats must have been answered, without a gap, before
/// it takes another replica whose heartbeat key is missing for dead.
pub const CONFIRM_TTLS: u32 = 2;

/// Whether replica `other` is dead (see the module doc). Never this replica; `false` while that
/// cannot be told (a failed read also restarts this replica's count).
pub async fn is_dead(replica: &dyn Replica, other: &str) -> bool {
    let store = replica.store();
    if other == store.node_id() {
        return false;
    }
    let needed = CONFIRM_TTLS * replica.timing().node_ttl;
    if replica.health().answering_for() < needed {
        return false;
    }
    match store.is_alive(other).await {
        Ok(alive) => !alive,
        Err(e) => {
            replica.health().read_failed();
            tracing::debug!(error = %e, "could not read a replica's liveness");
            false
        }
    }
}

/// The final event of a request lost with its dead replica `node`: a JSON-RPC -32004 error
/// response to `request_key`'s id (MCP defines no code for it; -32004 is this project's "did not
/// finish"), telling the client to send the request again. A client resuming the request's
/// stream receives it.
pub fn lost_request_event(request_key: &str, node: &str) -> String {
    let id = RequestId::from_key(request_key);
    let msg = format!("the request was lost: node {node} running it stopped; send it again");
    jsonrpc::error_response(id.as_ref(), codes::REQUEST_ABORTED, msg, None).to_string()
}

/// Counts (`switchboard_requests_aborted`) and logs a request of dead replica `node` ended with
/// [`lost_request_event`] on `stream` of session `sid`.
pub fn count_aborted(sid: &str, stream: &str, node: &str) {
    switchboard_telemetry::metrics::get()
        .counters
        .requests_aborted
        .inc();
    tracing::warn!(
        session = %logged_session(sid),
        stream,
        dead_node = node,
        "request failed: its node stopped"
    );
}

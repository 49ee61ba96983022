//! Requests lost: registered in flight in the store with no call behind them. Two kinds, one
//! rule for both hosts:
//!
//! - a request of a dead replica ([`crate::liveness::is_dead`]): its call died with it;
//! - a request of this replica that runs no call here ([`crate::calls::Calls::runs`]): the
//!   store applied its registration although this replica saw it fail (a reply lost to a
//!   timeout or a failover), so nothing will ever finish it.
//!
//! Left alone they count toward the session's in-flight cap and hold their ids for the rest of
//! the session. [`end_lost_requests`] ends them: each gets a -32004 error as its stream's final
//! event, which a client resuming the stream receives, and loses its in-flight entry. Hosts call
//! it when a request is refused for a full session or a duplicate id (then ask again), and from
//! a held stream's periodic work.

use std::collections::HashMap;

use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::{InflightEntry, StoreResult};
use switchboard_telemetry::trace::logged_session;

use crate::liveness::{count_aborted, is_dead, lost_request_event};
use crate::replica::Replica;

/// Ends every lost request of session `sid` (see the module doc); `known_dead` is a replica the
/// caller has just found dead by [`is_dead`] (not asked again). Returns how many it ended,
/// counting those another replica ended first (their entries are then only dropped, if still
/// as listed: the client may already have sent the id again). One store round trip to list the
/// session's entries, one per other replica to ask its liveness, one or two per request ended.
///
/// # Errors
/// The store's, from listing or ending; requests ended before the failure stay ended.
pub async fn end_lost_requests(
    replica: &dyn Replica,
    sid: &str,
    known_dead: Option<&str>,
) -> StoreResult<usize> {
    let me = replica.store().node_id().to_owned();
    let mut dead: HashMap<String, bool> = known_dead
        .map(|n| (n.to_owned(), true))
        .into_iter()
        .collect();
    let mut ended = 0;
    for entry in replica.store().in_flight(sid).await? {
        let why = if entry.node == me {
            if replica.calls().runs(sid, &entry.request_key, &entry.stream) {
                continue;
            }
            Lost::NoCall
        } else {
            let is_dead = match dead.get(&entry.node) {
                Some(d) => *d,
                None => {
                    let d = is_dead(replica, &entry.node).await;
                    dead.insert(entry.node.clone(), d);
                    d
                }
            };
            if !is_dead {
                continue;
            }
            Lost::DeadReplica
        };
        end_lost_request(replica, sid, &entry, why).await?;
        ended += 1;
    }
    if ended > 0 {
        tracing::info!(session = %logged_session(sid), ended, "requests with no call behind them ended");
    }
    Ok(ended)
}

/// [`end_lost_requests`] from a stream's periodic work: a failure is logged, not returned.
pub async fn end_lost_requests_logged(replica: &dyn Replica, sid: &str) {
    if let Err(e) = end_lost_requests(replica, sid, None).await {
        tracing::warn!(error = %e, session = %logged_session(sid), "could not look for requests with no call behind them");
    }
}

/// The final event of a request of this replica whose registration failed as far as it could
/// tell although the store may have applied it: error -32004 naming `why`, e.g. "its POST
/// failed" (a dead replica's request gets [`lost_request_event`]).
pub fn failed_request_event(request_key: &str, why: &str) -> String {
    let id = RequestId::from_key(request_key);
    let msg = format!("the request was lost: {why}; send it again");
    jsonrpc::error_response(id.as_ref(), codes::REQUEST_ABORTED, msg, None).to_string()
}

/// Why a request is lost.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lost {
    /// Its replica is dead.
    DeadReplica,
    /// It is this replica's, and no call runs behind it here.
    NoCall,
}

async fn end_lost_request(
    replica: &dyn Replica,
    sid: &str,
    entry: &InflightEntry,
    why: Lost,
) -> StoreResult<()> {
    let data = match why {
        Lost::DeadReplica => lost_request_event(&entry.request_key, &entry.node),
        Lost::NoCall => failed_request_event(&entry.request_key, "its POST failed"),
    };
    let store = replica.store();
    match store
        .abort_running(sid, &entry.stream, &entry.node, &data)
        .await?
    {
        Some(appended) => {
            if why == Lost::DeadReplica {
                count_aborted(sid, &entry.stream, &entry.node);
            }
            let at = (sid, entry.stream.as_str());
            replica
                .hub()
                .deliver_appended(store.node_id(), at, &appended, data, true);
        }
        None => {
            store.forget_in_flight(sid, entry).await?;
        }
    }
    Ok(())
}

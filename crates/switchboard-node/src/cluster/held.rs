//! What upstreams hold on this node for client sessions (stdio children, legacy SSE connections,
//! GET-stream listeners, attachments to a shared child), checked against the store:
//!
//! - held for a session that no longer exists (lost with a Redis restart or flush, so no reaper
//!   will ever report it): released, with the session's streams and calls here;
//! - a node-bound resource ([`switchboard_upstream::placement`]) whose session record names
//!   another owner now: stopped. This node was found dead (it stalled, or could not reach the
//!   store, for longer than `cluster.node_ttl`) and a live node took the session over with a new
//!   child or connection; keeping the old one would give the session two, both sending the
//!   client their unsolicited messages.
//!
//! [`check`] runs on every sweep (the background reaper task, `cluster.reaper_interval`) and at once
//! when a heartbeat finds that the previous one had lapsed. It costs one store round trip per
//! [`BATCH`] sessions held. A draining node stops nothing another node took over: the requests
//! still running in it finish there (a request that found the owner stopping moved the session
//! meanwhile), and the end of the drain stops everything.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;

use crate::state::App;
use switchboard_telemetry::trace::logged_session;

/// Sessions read in one store round trip.
pub const BATCH: usize = 1000;

/// Checks everything held here against the session records (see the module doc).
pub async fn check(app: &App) {
    let owned = app.upstream.owned_sessions();
    let mut sids = app.upstream.held_sessions();
    sids.extend(owned.iter().map(|(_, sid)| sid.clone()));
    // The ephemeral sessions of 2026-07-28 requests and task calls are not in the store.
    sids.retain(|sid| !crate::state::names::is_local_only(sid));
    sids.sort();
    sids.dedup();
    let claims = app.owner_claims.load(Ordering::SeqCst);
    let mut owners: HashMap<String, BTreeMap<String, String>> = HashMap::new();
    for batch in sids.chunks(BATCH) {
        let found = match app.store.owners_of(batch).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "could not check what upstreams hold here against the store");
                return;
            }
        };
        for (sid, found) in batch.iter().zip(found) {
            match found {
                Some(map) => drop(owners.insert(sid.clone(), map)),
                None => session_gone(app, sid).await,
            }
        }
    }
    if app.shutdown.is_cancelled() {
        // Draining: requests running here finish in the old resources (the session's new owner
        // meanwhile serves its other requests), and the drain's end stops them all.
        return;
    }
    if app.owner_claims.load(Ordering::SeqCst) != claims {
        // This node claimed an owner meanwhile, which what was read may predate: a resource it
        // just took back must not be stopped. The next check decides.
        tracing::debug!(
            "an owner was claimed here during the check; ownership is checked again next time"
        );
        return;
    }
    let me = app.node_id();
    for (upstream, sid) in owned {
        let owner = owners.get(&sid).and_then(|map| map.get(&upstream));
        if let Some(owner) = owner.filter(|o| o.as_str() != me) {
            taken_over(app, &upstream, &sid, owner).await;
        }
    }
}

/// The session is gone: everything of it here goes.
async fn session_gone(app: &App, sid: &str) {
    tracing::info!(session = %logged_session(sid), "releasing upstream resources of a session that no longer exists");
    app.end_session_here(sid);
    app.upstream.session_ended(sid).await;
}

/// Node `owner` owns the session's resource of `upstream` now: the one held here is stopped (a
/// stdio child is stopped and reaped in the background; a legacy SSE connection is closed).
async fn taken_over(app: &App, upstream: &str, sid: &str, owner: &str) {
    let Some(member) = crate::cluster::forward::wire::find_member(&app.upstream, upstream) else {
        return;
    };
    tracing::warn!(
        session = %logged_session(sid),
        upstream,
        owner,
        "another node owns this session's node-bound upstream now (this node was taken for dead): stopping the one held here"
    );
    member.session_ended(sid).await;
}

//! This node as the shared replica runtime sees it ([`switchboard_runtime::Replica`]): the
//! runtime runs the heartbeat, session keep-alive, reaper and bus inbox
//! ([`switchboard_runtime::background`]); what is the node's own is here:
//!
//! - after a heartbeat, the fence ([`fence`]) and the check of what upstreams hold here;
//! - after a reaper pass, the same check ([`crate::cluster::held::check`]);
//! - the bus messages that are not about held streams ([`inbox`]);
//! - which sessions the keep-alive touches (not the ephemeral ones of 2026-07-28 requests and
//!   task calls, which the store does not keep).
//!
//! These keep running while the node drains (its running requests still need a live heartbeat
//! and sessions that do not expire) and end with the process.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_runtime::{Beat, Replica, ReplicaState};
use switchboard_store::eviction::Lapse;
use switchboard_store::{BusMessage, Store};

use crate::state::{App, AppState};

pub mod inbox;

/// How many `cluster.node_ttl`s without an answered heartbeat fence a node ([`fence`]). One is
/// when the others may take it for dead; a store failover (a Sentinel or Cluster promotion, about
/// 2–2.5 s here with a 1.5 s `node_ttl`) cuts every node off for about that long, and fencing
/// then closed streams whose calls would have finished (the chaos suite's `primary-kill`: 30–42
/// calls ended with -32004 and ~500 extra 503s per 60 s run). At two, a partition still fences
/// the node well before it ends.
const FENCE_AFTER: u32 = 2;

#[async_trait]
impl Replica for AppState {
    fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn state(&self) -> &ReplicaState {
        &self.replica
    }

    fn is_stored(&self, sid: &str) -> bool {
        // The ephemeral sessions of 2026-07-28 requests and task calls are not in the store.
        !crate::state::names::is_local_only(sid)
    }

    fn retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    async fn until_cut_off(&self) {
        self.until_fenced().await;
    }

    async fn session_gone(&self, sid: &str) {
        self.end_session_here(sid);
    }

    async fn reaped(self: Arc<Self>) {
        crate::cluster::held::check(&self).await;
    }

    async fn beat(self: Arc<Self>, beat: Beat) {
        after_heartbeat(self, beat);
    }

    async fn message(self: Arc<Self>, message: BusMessage) {
        inbox::deliver(&self, message).await;
    }
}

/// What a heartbeat means for this node. Other nodes fail its requests once it stops.
///
/// An answered one lifts the fence. One that finds the previous one had lapsed (the node
/// stalled, or could not reach the store, past `cluster.node_ttl`) checks at once what other
/// nodes may have taken over meanwhile ([`crate::cluster::held::check`]). One that finds it gone
/// although the previous heartbeat was answered well within `cluster.node_ttl` is logged and
/// counted as a probable eviction ([`switchboard_store::eviction::Lapse::ProbablyEvicted`]) and
/// checks the same. So does the first answered heartbeat after one that failed: a heartbeat that
/// timed out may still run later (its commands were already on the connection, e.g. while a
/// network partition held them back), and its `SET` then renews the key that had lapsed
/// meanwhile, so the next heartbeat's `EXISTS` finds it and cannot tell that other nodes took
/// this one for dead.
///
/// Once none has been answered for longer than `cluster.node_ttl`, the other nodes take this one
/// for dead (they end its requests with -32004 when their clients resume elsewhere, and take
/// over its node-bound upstreams); after [`FENCE_AFTER`] times that it fences itself ([`fence`])
/// until a heartbeat is answered again.
fn after_heartbeat(app: App, beat: Beat) {
    match beat {
        Beat::Answered {
            live,
            after_failure,
            lapse,
        } => {
            if app.fenced.send_replace(false) {
                tracing::warn!("the store answers this node's heartbeat again: serving again");
            }
            if lapse == Lapse::ProbablyEvicted {
                // Logged and counted as a probable eviction by the watch; the same check follows.
            } else if !live {
                tracing::warn!("this node's heartbeat had lapsed: other nodes may have found it dead and taken over node-bound upstreams; checking what it holds now");
            } else if after_failure {
                tracing::warn!("this node's heartbeat is answered again after failing: it may have lapsed meanwhile (a late heartbeat can have renewed it) and other nodes taken over node-bound upstreams; checking what it holds now");
            } else {
                return;
            }
            tokio::spawn(async move { crate::cluster::held::check(&app).await });
        }
        Beat::Failed { silent } => {
            if silent > FENCE_AFTER * app.cfg.node_ttl && !app.fenced.send_replace(true) {
                switchboard_telemetry::metrics::get().counters.fences.inc();
                fence(&app, silent);
            }
        }
    }
}

/// This node has been unable to reach the store for `silent`, longer than [`FENCE_AFTER`] ×
/// `cluster.node_ttl`:
/// every MCP request gets 503 at once, those still waiting for their answer's headers too
/// (`app::not_fenced`), and every client stream held here is
/// closed, so that its client resumes on another node (which ends a request of this node with
/// -32004, or serves the standalone stream from the log) instead of waiting on a stream no event
/// can reach. Calls running here go on: their events and answers are logged if the store comes
/// back while they run. The upstreams stop what another node resumes (GET-stream listeners:
/// `Upstream::fenced`).
fn fence(app: &App, silent: Duration) {
    let sessions = app.replica.hub.sessions();
    tracing::warn!(
        silent_ms = silent.as_millis() as u64,
        streams_of_sessions = sessions.len(),
        "this node has not reached the store for twice cluster.node_ttl: the others take it for dead; refusing requests and closing its client streams until it reaches the store again"
    );
    app.replica.hub.close_all();
    let upstream = app.upstream.clone();
    tokio::spawn(async move { upstream.fenced().await });
}

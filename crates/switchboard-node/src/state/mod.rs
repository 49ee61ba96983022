//! What every handler shares: config, store, upstream, and this node's live things.
//!
//! The registries it holds live here, as leaves that know nothing of [`AppState`], so that every
//! folder above may use the state and the state depends on no folder above it:
//!
//! - [`forwards`]: calls forwarded to or from other nodes.
//! - [`names`]: the names of what runs on this node alone (ephemeral sessions, task calls).
//! - [`listeners`]: `subscriptions/listen` streams open here, and their notification filter.
//! - [`parking`]: 2026-07-28 requests parked here, waiting for their MRTR answers.
//! - [`param_headers`]: the tools' `x-mcp-header` declarations.
//! - [`seats`]: the seats of ephemeral upstream sessions.
//! - [`tasks`]: the tasks whose calls run here, with their open questions.
//! - [`waiters`]: server-to-client requests waiting for the client's answer.
//!
//! The requests running here are the replica runtime's ([`switchboard_runtime::Calls`], in
//! [`AppState::replica`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use switchboard_runtime::{ReplicaState, Timing};
use switchboard_store::eviction::EvictionWatch;
use switchboard_store::Store;
use switchboard_upstream::Upstream;
use tokio_util::sync::CancellationToken;

pub mod forwards;
pub mod listeners;
pub mod names;
pub mod param_headers;
pub mod parking;
pub mod seats;
pub mod tasks;
pub mod waiters;

use crate::config::NodeConfig;
use crate::edge::auth::Auth;
use crate::mrtr::seal::{key_ring, KeyRing};
use forwards::Forwards;
use listeners::Listeners;
use param_headers::ParamHeaders;
use parking::Parking;
use seats::Seats;
use tasks::TaskCalls;
use waiters::Waiters;

/// A watch of a node's fence ([`AppState::fenced`]): what the edge's fence layer and the
/// probes read of the node.
#[derive(Clone)]
pub struct Fence(tokio::sync::watch::Receiver<bool>);

impl Fence {
    /// Whether the fence is up now.
    pub fn is_up(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the fence is up (at once if it is); never if the node is gone.
    pub async fn until_up(&mut self) {
        if self.0.wait_for(|fenced| *fenced).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Shared state of one node: what the transports' handlers take, since a request's path reads
/// the config, the store, the upstream and the registries. The edge's layers and the probes take
/// only what they use: the config, the authorization layer, the [`Fence`], the probes' view
/// (`probes::Probes`).
pub struct AppState {
    /// HTTP-front settings.
    pub cfg: Arc<NodeConfig>,
    /// Shared state (sessions, logs, bus).
    pub store: Arc<dyn Store>,
    /// The MCP server behind us.
    pub upstream: Arc<dyn Upstream>,
    /// What this node holds for the replica runtime: the streams held here, the requests running
    /// here (with their cancellation), how its heartbeats
    /// fared (the fence reads it: `replica`), Redis's `maxmemory-policy` as last read
    /// (behind `/readyz`), the loops' periods.
    pub replica: Arc<ReplicaState>,
    /// Server-to-client requests waiting here for the client's answer.
    pub waiters: Waiters,
    /// Calls forwarded to or from other nodes.
    pub forwards: Forwards,
    /// Set once the node has drained and told the cluster it stopped: no more heartbeats.
    pub retired: std::sync::atomic::AtomicBool,
    /// `true` while this node's heartbeat has not been answered for two `cluster.node_ttl`s:
    /// the other nodes take it for dead, so it serves nothing until the store answers again
    /// (see `replica`). A channel, so that requests already waiting are refused
    /// when it is set (`app::not_fenced`).
    pub fenced: tokio::sync::watch::Sender<bool>,
    /// The authorization layer, when configured.
    pub auth: Option<Arc<Auth>>,
    /// Fires when the node starts draining.
    pub shutdown: CancellationToken,
    /// The keys that seal and open MRTR `requestState` (from `cfg.mrtr.keys`; a random key of
    /// this process alone when that is empty, which [`crate::serve`] never leaves it).
    pub mrtr: KeyRing,
    /// 2026-07-28 requests parked here, waiting for their MRTR answers.
    pub parking: Parking,
    /// 2026-07-28 requests running here in an upstream session of their own
    /// (`stateless.max_ephemeral_sessions` seats).
    pub ephemeral_sessions: Arc<Seats>,
    /// Tasks whose calls run here, with their open questions.
    pub tasks: TaskCalls,
    /// The tools' `x-mcp-header` declarations, for `Mcp-Param-*` checks.
    pub param_headers: ParamHeaders,
    /// `subscriptions/listen` streams open here.
    pub listeners: Listeners,
    /// Owner claims of node-bound upstreams this node has sent (the `placement` module), counted
    /// before each is sent: the sweep of held resources (`held::check`) stops nothing when one
    /// was sent while it read the owners.
    pub owner_claims: AtomicU64,
    conn_seq: AtomicU64,
}

/// Handlers take this.
pub type App = Arc<AppState>;

impl AppState {
    /// Resolves once this node is fenced (at once when it is): what a wait on the store races
    /// against, so that the fence's refusals and closes take effect while the store is silent.
    pub async fn until_fenced(&self) {
        self.fence().until_up().await;
    }

    /// A watch of this node's fence.
    pub fn fence(&self) -> Fence {
        Fence(self.fenced.subscribe())
    }

    /// Builds the state, with nothing read yet of Redis's `maxmemory-policy` (tests; [`crate::serve`]
    /// builds it with the watch its start checked with).
    #[cfg(test)]
    pub fn new(cfg: NodeConfig, store: Arc<dyn Store>, upstream: Arc<dyn Upstream>) -> App {
        let eviction = EvictionWatch::new(cfg.eviction.clone(), crate::config::EVICTION_OPT_IN);
        AppState::with_eviction(cfg, store, upstream, eviction)
    }

    /// Builds the state around the `eviction` watch the start checked with.
    pub fn with_eviction(
        cfg: NodeConfig,
        store: Arc<dyn Store>,
        upstream: Arc<dyn Upstream>,
        eviction: EvictionWatch,
    ) -> App {
        let mrtr = key_ring(&cfg.mrtr.decoded_keys());
        Arc::new(AppState {
            mrtr,
            parking: Default::default(),
            param_headers: Default::default(),
            tasks: Default::default(),
            ephemeral_sessions: Arc::new(Seats::new(cfg.max_ephemeral_sessions)),
            replica: Arc::new(ReplicaState::new(
                cfg.connection_queue,
                eviction,
                timing(&cfg),
            )),
            listeners: Listeners::new(cfg.max_listeners, cfg.listen_queue),
            auth: cfg.auth.clone().map(|a| Arc::new(Auth::new(a))),
            cfg: Arc::new(cfg),
            store,
            upstream,
            waiters: Waiters::default(),
            forwards: Default::default(),
            retired: Default::default(),
            fenced: tokio::sync::watch::Sender::new(false),
            shutdown: CancellationToken::new(),
            owner_claims: AtomicU64::new(0),
            conn_seq: AtomicU64::new(0),
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        self.store.node_id()
    }

    /// A fresh holder token `<node>/<n>` for a new connection.
    pub fn new_holder(&self) -> String {
        format!(
            "{}/{}",
            self.node_id(),
            self.conn_seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// The session ended: closes its streams held here, cancels its requests running here (each
    /// still writes its final event) and drops its server requests' waiters.
    pub fn end_session_here(&self, sid: &str) {
        self.replica.hub.close_session(sid);
        self.replica.calls.end_session(sid);
        self.waiters.end_session(sid);
    }

    /// Whether a holder token names a connection on this node.
    pub fn is_local(&self, holder: &str) -> bool {
        switchboard_store::holder_node(holder) == self.node_id()
    }
}

/// The periods of the node's background loops (`cluster.*` settings).
fn timing(cfg: &NodeConfig) -> Timing {
    Timing {
        node_ttl: cfg.node_ttl,
        heartbeat: cfg.heartbeat_interval,
        keep_alive: cfg.session_touch_interval,
        reaper: cfg.reaper_interval,
    }
}

//! What every handler shares: config, store, upstream, and this node's live things.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use switchboard_store::Store;
use switchboard_upstream::Upstream;
use tokio_util::sync::CancellationToken;

use crate::calls::Calls;
use crate::config::NodeConfig;
use crate::hub::Hub;

/// Shared state of one node.
pub struct AppState {
    /// HTTP-front settings.
    pub cfg: NodeConfig,
    /// Shared state (sessions, logs, bus).
    pub store: Arc<dyn Store>,
    /// The MCP server behind us.
    pub upstream: Arc<dyn Upstream>,
    /// Streams held here.
    pub hub: Hub,
    /// Requests running here and server requests waiting here.
    pub calls: Calls,
    /// Calls forwarded to or from other nodes.
    pub forwards: crate::forward::Forwards,
    /// Set once the node has drained and told the cluster it stopped: no more heartbeats.
    pub retired: std::sync::atomic::AtomicBool,
    /// The authorization layer, when configured.
    pub auth: Option<crate::auth::Auth>,
    /// Fires when the node starts draining.
    pub shutdown: CancellationToken,
    /// The keys that seal and open MRTR `requestState` (from `cfg.mrtr.keys`; a random key of
    /// this process alone when that is empty, which [`crate::serve`] never leaves it).
    pub mrtr: crate::stateless::mrtr::KeyRing,
    /// 2026-07-28 requests parked here, waiting for their MRTR answers.
    pub parking: crate::stateless::park::Parking,
    /// 2026-07-28 requests running here in an upstream session of their own
    /// (`max_ephemeral_sessions`).
    pub ephemeral_sessions: std::sync::atomic::AtomicUsize,
    /// Tasks whose calls run here, with their open questions.
    pub tasks: crate::stateless::tasks::Running,
    /// The tools' `x-mcp-header` declarations, for `Mcp-Param-*` checks.
    pub param_headers: crate::stateless::params::ParamHeaders,
    /// `subscriptions/listen` streams open here.
    pub listeners: crate::stateless::listen::Listeners,
    /// Owner claims of node-bound upstreams this node has sent (`crate::placement`), counted
    /// before each is sent: the sweep of held resources (`held::check`) stops nothing when one
    /// was sent while it read the owners.
    pub owner_claims: AtomicU64,
    conn_seq: AtomicU64,
}

/// Handlers take this.
pub type App = Arc<AppState>;

impl AppState {
    /// Builds the state.
    pub fn new(cfg: NodeConfig, store: Arc<dyn Store>, upstream: Arc<dyn Upstream>) -> App {
        let mrtr = crate::stateless::mrtr::key_ring(&cfg.mrtr.keys);
        Arc::new(AppState {
            mrtr,
            parking: Default::default(),
            param_headers: Default::default(),
            tasks: Default::default(),
            ephemeral_sessions: Default::default(),
            hub: Hub::new(cfg.connection_queue),
            listeners: crate::stateless::listen::Listeners::new(
                cfg.max_listeners,
                cfg.listen_queue,
            ),
            auth: cfg.auth.clone().map(crate::auth::Auth::new),
            cfg,
            store,
            upstream,
            calls: Calls::default(),
            forwards: Default::default(),
            retired: Default::default(),
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

    /// Whether a holder token names a connection on this node.
    pub fn is_local(&self, holder: &str) -> bool {
        switchboard_store::holder_node(holder) == self.node_id()
    }
}

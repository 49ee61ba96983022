//! [`Replica`]: what the runtime needs of the process it runs in (the gateway node's state, or
//! library mode's), and what it leaves to it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use switchboard_store::eviction::{EvictionWatch, Lapse};
use switchboard_store::{BusMessage, Store};

use crate::calls::Calls;
use crate::health::StoreHealth;
use crate::hub::Hub;

/// How often the background loops run ([`crate::background`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long a heartbeat key lives (`node_ttl`): a heartbeat not answered within it failed.
    pub node_ttl: Duration,
    /// Between two heartbeats (below `node_ttl`).
    pub heartbeat: Duration,
    /// Between two keep-alive passes over the sessions with work here.
    pub keep_alive: Duration,
    /// Between two reaper passes.
    pub reaper: Duration,
}

/// What one heartbeat came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Beat {
    /// The store answered within `node_ttl`.
    Answered {
        /// It found the previous heartbeat key still there (false: it had lapsed; replicas that
        /// found this one dead meanwhile may have ended its requests).
        live: bool,
        /// A heartbeat had failed since the previous answered one: a late heartbeat can have
        /// renewed a key that lapsed meanwhile, so `live` cannot be trusted.
        after_failure: bool,
        /// What the eviction watch made of it (a key gone although the previous heartbeat was
        /// answered well within `node_ttl`: probably evicted).
        lapse: Lapse,
    },
    /// It failed or was not answered within `node_ttl`.
    Failed {
        /// How long since the last answered heartbeat ([`StoreHealth::silent_for`]).
        silent: Duration,
    },
}

/// What a replica holds in memory for the runtime: its held streams, its running calls, how its
/// heartbeats fared, its Redis memory-policy watch and its loops' periods. The host keeps one and hands it over
/// with [`Replica::state`].
pub struct ReplicaState {
    /// The streams held open here.
    pub hub: Hub,
    /// The calls running here.
    pub calls: Arc<Calls>,
    /// How this replica's heartbeats have fared.
    pub health: StoreHealth,
    /// Redis's `maxmemory-policy` as last read, and the heartbeats' timing.
    pub eviction: EvictionWatch,
    /// The loops' periods.
    pub timing: Timing,
}

impl ReplicaState {
    /// A replica's state: a hub whose connections queue at most `connection_queue` events, no
    /// heartbeat answered yet, no call running.
    pub fn new(connection_queue: usize, eviction: EvictionWatch, timing: Timing) -> ReplicaState {
        ReplicaState {
            hub: Hub::new(connection_queue),
            calls: Arc::default(),
            health: StoreHealth::default(),
            eviction,
            timing,
        }
    }
}

/// One replica of a Switchboard cluster, as the runtime sees it: its store, its held streams, its
/// heartbeats' health and its Redis memory-policy watch, and the hooks where the gateway node and
/// library mode differ.
#[async_trait]
pub trait Replica: Send + Sync + 'static {
    /// The store, seen as this replica (its node id names it).
    fn store(&self) -> &Arc<dyn Store>;
    /// What this replica holds in memory for the runtime.
    fn state(&self) -> &ReplicaState;
    /// The streams held open here.
    fn hub(&self) -> &Hub {
        &self.state().hub
    }
    /// How this replica's heartbeats have fared.
    fn health(&self) -> &StoreHealth {
        &self.state().health
    }
    /// Redis's `maxmemory-policy` as last read, and the heartbeats' timing.
    fn eviction(&self) -> &EvictionWatch {
        &self.state().eviction
    }
    /// The loops' periods.
    fn timing(&self) -> Timing {
        self.state().timing
    }
    /// The calls running here.
    fn calls(&self) -> &Calls {
        &self.state().calls
    }
    /// Whether session `sid` is one the store keeps (the gateway's ephemeral 2026-07-28
    /// sessions are not): only those are kept alive.
    fn is_stored(&self, _sid: &str) -> bool {
        true
    }
    /// Whether this replica has left the cluster for good (no heartbeat is sent any more).
    fn retired(&self) -> bool {
        false
    }
    /// Resolves once this replica can no longer serve its streams (the node: fenced, cut off
    /// from the store; library mode: stopped). Stream reads race against it, so that a silent
    /// store does not hold a close back. Never, by default.
    async fn until_cut_off(&self) {
        std::future::pending::<()>().await;
    }
    /// Session `sid` is gone from the store: close what it has here.
    async fn session_gone(&self, sid: &str);
    /// A reaper pass has run here (the node then checks what its upstreams hold).
    async fn reaped(self: Arc<Self>) {}
    /// What a heartbeat came to ([`Beat`]), after the runtime has recorded it (in
    /// [`StoreHealth`] and the eviction watch).
    async fn beat(self: Arc<Self>, beat: Beat);
    /// A bus message the runtime does not handle itself (it handles live events, takeovers and
    /// a resubscribed inbox: [`crate::inbox`]).
    async fn message(self: Arc<Self>, message: BusMessage);
}

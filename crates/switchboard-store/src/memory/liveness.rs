//! [`Liveness`] and [`Secrets`] in memory: heartbeats as deadlines in the shared state (a node
//! is alive until its deadline), agreed secrets as a map; no Redis, so no memory policy.

use async_trait::async_trait;
use tokio::time::Instant;

use super::MemoryStore;
use crate::model::MemoryPolicy;
use crate::traits::*;

#[async_trait]
impl Liveness for MemoryStore {
    fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// Always: the memory store is in this process.
    async fn reachable(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Nothing to evict: the state is in this process.
    async fn memory_policy(&self) -> StoreResult<MemoryPolicy> {
        Ok(MemoryPolicy::NotApplicable)
    }

    async fn heartbeat(&self) -> StoreResult<bool> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        shared.nodes.retain(|_, until| *until > now);
        let previous = shared
            .nodes
            .insert(self.config.node_id.clone(), now + self.config.node_ttl);
        Ok(previous.is_some())
    }

    async fn retire(&self) -> StoreResult<()> {
        self.shared.lock().nodes.remove(&self.config.node_id);
        Ok(())
    }

    async fn is_alive(&self, node: &str) -> StoreResult<bool> {
        let now = Instant::now();
        Ok(self
            .shared
            .lock()
            .nodes
            .get(node)
            .is_some_and(|until| *until > now))
    }
}

#[async_trait]
impl Secrets for MemoryStore {
    async fn agreed_secret(&self, name: &str, proposal: &[u8]) -> StoreResult<Vec<u8>> {
        let mut shared = self.shared.lock();
        let stored = shared
            .secrets
            .entry(name.to_owned())
            .or_insert_with(|| proposal.to_vec());
        Ok(stored.clone())
    }
}

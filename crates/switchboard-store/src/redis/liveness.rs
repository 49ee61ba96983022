//! [`Liveness`] over Redis: each node's heartbeat, and which nodes are alive.
//!
//! A node is alive while its liveness key `p:node:<id>` exists (`SET … PX node_ttl` at every
//! heartbeat; its value is the format the node writes, [`crate::FORMAT`]), or while the node
//! roster `p:nodes` (a ZSET: node id → the wall-clock ms of its last heartbeat) has a heartbeat
//! of it within `node_ttl`. The roster is one long-lived key that every heartbeat writes, so an
//! evicting `maxmemory-policy` (allowed with `redis.allow_eviction`) does not take it the way it
//! takes the short-lived liveness keys first (`volatile-ttl`): a node whose key was evicted is
//! not taken for dead (the chaos suite's `eviction`: 410s for delivered answers, and stdio
//! children taken over from live nodes, RELIABILITY.md finding 10). Nodes of the release before
//! look at the liveness key only, which each heartbeat still writes.

use async_trait::async_trait;

use super::{connection, Conn, RedisStore};
use crate::error::StoreError;
use crate::rules;
use crate::traits::*;

/// How long the roster lives without a heartbeat (it is written every heartbeat), and how old
/// an entry may be before a heartbeat drops it: a day.
const ROSTER_TTL_MS: u64 = 24 * 60 * 60 * 1000;

impl RedisStore {
    /// This node's beat in the roster: `ZADD` of now, the roster's TTL, and the entries of nodes
    /// silent for a day removed (one pipeline on one key).
    fn roster_beat(&self) -> ::redis::Pipeline {
        let now = rules::now_ms();
        let mut p = ::redis::pipe();
        p.cmd("ZADD")
            .arg(self.keys.nodes())
            .arg(now)
            .arg(&self.config.node_id)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(self.keys.nodes())
            .arg("-inf")
            .arg(now.saturating_sub(ROSTER_TTL_MS))
            .ignore()
            .cmd("PEXPIRE")
            .arg(self.keys.nodes())
            .arg(ROSTER_TTL_MS)
            .ignore();
        p
    }
}

#[async_trait]
impl Liveness for RedisStore {
    fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// Also beats in the node roster (`p:nodes`, [`RedisStore::roster_beat`]), and keeps the
    /// session index alive (its TTL is `2 × idle_ttl`, pushed by every heartbeat,
    /// create and reaper pass), so it cannot lapse while any node is running. Two commands sent
    /// together (they live in different slots): a pipeline of `EXISTS` of the liveness key (was
    /// the previous heartbeat live?) then `SET … PX`, and `PEXPIRE` of the index.
    async fn heartbeat(&self) -> StoreResult<bool> {
        let node = self.keys.node(&self.config.node_id);
        let mut beat = ::redis::pipe();
        beat.cmd("EXISTS")
            .arg(&node)
            .cmd("SET")
            .arg(&node)
            .arg(crate::FORMAT)
            .arg("PX")
            .arg(rules::millis(self.config.node_ttl))
            .ignore();
        let mut index = ::redis::pipe();
        index
            .cmd("PEXPIRE")
            .arg(self.keys.sessions())
            .arg(2 * self.idle_ms())
            .ignore();
        let roster = self.roster_beat();
        let (live, (), ()) = futures::try_join!(
            self.query::<(i64,)>(&beat),
            self.query::<()>(&index),
            self.query::<()>(&roster),
        )?;
        Ok(live.0 == 1)
    }

    /// Deletes the liveness key and leaves the node roster, at once.
    async fn retire(&self) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        ::redis::cmd("DEL")
            .arg(self.keys.node(&self.config.node_id))
            .query_async::<i64>(&mut conn)
            .await?;
        ::redis::cmd("ZREM")
            .arg(self.keys.nodes())
            .arg(&self.config.node_id)
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    /// `PING`; in Cluster mode one to every primary `CLUSTER SLOTS` names, each by address
    /// ([`connection::cluster_reachable`]).
    /// With `min_replicas_acked` above 0, also whether the primary (every primary, in Redis
    /// Cluster) has that many replicas: without them every write that waits for them fails, so
    /// the node is not ready.
    async fn reachable(&self) -> StoreResult<()> {
        let wanted = self.replicas_wanted();
        if let Conn::Cluster(cluster) = &self.conn {
            let fewest = connection::cluster_reachable(cluster).await?;
            if fewest < wanted as usize {
                return Err(StoreError::Backend(format!(
                    "a slot range has {fewest} replicas; redis.min_replicas_acked needs {wanted}"
                )));
            }
            return Ok(());
        }
        let mut conn = self.conn.clone();
        if wanted == 0 {
            ::redis::cmd("PING").query_async::<()>(&mut conn).await?;
            return Ok(());
        }
        // `ROLE` of a primary: ["master", offset, [[ip, port, offset], …]].
        let role: Vec<::redis::Value> = ::redis::cmd("ROLE").query_async(&mut conn).await?;
        let replicas = match role.get(2) {
            Some(::redis::Value::Array(replicas)) => replicas.len(),
            _ => 0,
        };
        if replicas < wanted as usize {
            return Err(StoreError::Backend(format!(
                "the primary has {replicas} replicas connected; redis.min_replicas_acked needs {wanted}"
            )));
        }
        Ok(())
    }

    async fn memory_policy(&self) -> StoreResult<crate::model::MemoryPolicy> {
        self.read_memory_policy().await
    }

    /// Its liveness key exists, or the roster has a heartbeat of it within `node_ttl` (two
    /// commands at once: they live in different slots).
    async fn is_alive(&self, node: &str) -> StoreResult<bool> {
        let (mut a, mut b) = (self.conn.clone(), self.conn.clone());
        let (mut exists, mut score) = (::redis::cmd("EXISTS"), ::redis::cmd("ZSCORE"));
        exists.arg(self.keys.node(node));
        score.arg(self.keys.nodes()).arg(node);
        let (exists, score) = futures::try_join!(
            exists.query_async::<i64>(&mut a),
            score.query_async::<Option<f64>>(&mut b)
        )?;
        let fresh = rules::now_ms().saturating_sub(rules::millis(self.config.node_ttl));
        Ok(exists == 1 || score.is_some_and(|at| at >= fresh as f64))
    }
}

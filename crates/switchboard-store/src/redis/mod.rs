//! The Redis backend: the cluster's shared state.
//!
//! Commands go through one auto-reconnecting [`ConnectionManager`]; every operation that reads and
//! writes is one Lua script (EVALSHA, loaded on demand), so it is atomic and one round trip. The
//! hot path's admission of a request whose session record is cached only reads, and runs as a
//! `MULTI`/`EXEC` of plain commands instead (as atomic, one round trip, without the Lua cost). The
//! inbox is a separate pub/sub connection that resubscribes after a drop.
//!
//! Modules:
//! - `keys`: key and channel names (the data model is documented there).
//! - `scripts`: the Lua scripts.
//! - `codec`: record ↔ hash fields, reply parsing.
//! - `pubsub`: the inbox reader.
//! - `records`: this node's version-checked cache of session records.
//! - `session`, `events`, `bus`, `tasks`: the trait implementations.

mod bus;
mod codec;
mod events;
mod keys;
mod pubsub;
mod records;
mod scripts;
mod session;
mod tasks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{
    Client, ErrorKind, FromRedisValue, Pipeline, Script, ScriptInvocation, ServerErrorKind,
};
use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::StoreConfig;
use crate::rules;
use crate::traits::*;
use keys::{Keys, SessionKeys};

const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// The Redis-backed store of one node.
pub struct RedisStore {
    config: StoreConfig,
    client: Client,
    conn: ConnectionManager,
    keys: Keys,
    subscribed: AtomicBool,
    records: records::RecordCache,
}

impl RedisStore {
    /// Connects to a standalone Redis at `url` (`redis://host:port/db`). Fails when Redis cannot be
    /// reached now; later outages are retried by the connection manager.
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Arc<RedisStore>, StoreError> {
        let client = Client::open(url)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECTION_TIMEOUT))
            .set_number_of_retries(3);
        let conn = client
            .get_connection_manager_with_config(manager_config)
            .await?;
        let keys = Keys::new(&config.key_prefix);
        Ok(Arc::new(RedisStore {
            records: records::RecordCache::new(config.record_cache_entries),
            config,
            client,
            conn,
            keys,
            subscribed: AtomicBool::new(false),
        }))
    }

    /// The settings of this store.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Debug aid for tests: how many keys containing `{sid}` exist (a `SCAN`, not for production).
    #[doc(hidden)]
    pub async fn key_count_for(&self, sid: &str) -> StoreResult<usize> {
        let pattern = format!("*{{{sid}}}*");
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        let mut count = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            count += batch.len();
            if next == 0 {
                return Ok(count);
            }
            cursor = next;
        }
    }

    /// Debug aid for tests: how many streams the session's registry holds (0 when it is gone).
    #[doc(hidden)]
    pub async fn registered_streams(&self, sid: &str) -> StoreResult<usize> {
        let mut conn = self.conn.clone();
        Ok(::redis::cmd("HLEN")
            .arg(self.session_keys(sid).streams())
            .query_async(&mut conn)
            .await?)
    }

    fn idle_ms(&self) -> u64 {
        rules::millis(self.config.idle_ttl)
    }

    fn session_keys(&self, sid: &str) -> SessionKeys {
        self.keys.session(sid)
    }

    /// A session script's invocation with its standard keys and first two arguments.
    fn session_call<'a>(
        &self,
        script: &'a Script,
        sk: &SessionKeys,
        stream: Option<&str>,
    ) -> ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for key in sk.core() {
            inv.key(key);
        }
        if let Some(stream) = stream {
            inv.key(sk.log(stream)).key(sk.trim(stream));
        }
        inv.arg(&sk.base).arg(self.idle_ms());
        inv
    }

    /// Runs one script invocation (loading the script if Redis does not know it).
    async fn invoke<T: FromRedisValue>(&self, inv: &ScriptInvocation<'_>) -> StoreResult<T> {
        let mut conn = self.conn.clone();
        Ok(inv.invoke_async(&mut conn).await?)
    }

    /// Runs a pipeline; if it contains scripts Redis has forgotten (restart, `SCRIPT FLUSH`),
    /// loads every script and runs it once more (every pipeline here is safe to repeat).
    async fn query<T: FromRedisValue>(&self, pipe: &Pipeline) -> StoreResult<T> {
        let mut conn = self.conn.clone();
        match pipe.query_async(&mut conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let mut load = ::redis::pipe();
                for script in scripts::all() {
                    load.load_script(script).ignore();
                }
                load.query_async::<()>(&mut conn).await?;
                Ok(pipe.query_async(&mut conn).await?)
            }
            other => Ok(other?),
        }
    }

    /// JSON of a bus message.
    fn encode(msg: &crate::model::BusMessage) -> StoreResult<String> {
        Ok(serde_json::to_string(msg)?)
    }
}

#[async_trait]
impl Liveness for RedisStore {
    fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// Also keeps the session index alive (its TTL is `2 × idle_ttl`, pushed by every heartbeat,
    /// create and reaper pass), so it cannot lapse while any node is running. One pipeline:
    /// `EXISTS` of the liveness key (was the previous heartbeat live?), then `SET … PX`.
    async fn heartbeat(&self) -> StoreResult<bool> {
        let mut pipe = ::redis::pipe();
        pipe.cmd("EXISTS")
            .arg(self.keys.node(&self.config.node_id))
            .cmd("SET")
            .arg(self.keys.node(&self.config.node_id))
            .arg("1")
            .arg("PX")
            .arg(rules::millis(self.config.node_ttl))
            .ignore()
            .cmd("PEXPIRE")
            .arg(self.keys.sessions())
            .arg(2 * self.idle_ms())
            .ignore();
        let (live,): (i64,) = self.query(&pipe).await?;
        Ok(live == 1)
    }

    async fn retire(&self) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        ::redis::cmd("DEL")
            .arg(self.keys.node(&self.config.node_id))
            .query_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    async fn is_alive(&self, node: &str) -> StoreResult<bool> {
        let mut conn = self.conn.clone();
        let n: i64 = ::redis::cmd("EXISTS")
            .arg(self.keys.node(node))
            .query_async(&mut conn)
            .await?;
        Ok(n == 1)
    }
}

#[async_trait]
impl Secrets for RedisStore {
    /// `SET NX` then `GET`, one pipeline: the first writer wins, everyone reads the winner.
    async fn agreed_secret(&self, name: &str, proposal: &[u8]) -> StoreResult<Vec<u8>> {
        let key = self.keys.secret(name);
        let mut conn = self.conn.clone();
        let (stored,): (Vec<u8>,) = ::redis::pipe()
            .cmd("SET")
            .arg(&key)
            .arg(proposal)
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        Ok(stored)
    }
}

impl Store for RedisStore {
    fn backend(&self) -> &'static str {
        "redis"
    }
}

impl RedisStore {
    /// Marks the inbox as taken; `Err` on a second subscription of this store.
    fn take_inbox(&self) -> StoreResult<()> {
        if self.subscribed.swap(true, Ordering::SeqCst) {
            return Err(StoreError::Backend(format!(
                "node {} is already subscribed",
                self.config.node_id
            )));
        }
        Ok(())
    }
}

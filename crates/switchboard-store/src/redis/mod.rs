//! The Redis backend: the cluster's shared state, on one Redis server, a Sentinel-managed
//! primary, or a Redis Cluster ([`RedisTopology`]).
//!
//! Commands go through one multiplexed, reconnecting connection (`connection`); every operation
//! that reads and writes is one Lua script (EVALSHA, loaded on demand on whichever server runs
//! it), so it is atomic and one round trip. The hot path's admission of a request whose session
//! record is cached only reads, and runs as a `MULTI`/`EXEC` of plain commands instead (as
//! atomic, one round trip, without the Lua cost). No command, script or transaction touches two
//! hash slots: every key of one session carries the hash tag `{<sid>}`, and what spans sessions
//! (the reaper, `owners_of`) sends one command per slot, concurrently on the one connection.
//!
//! Modules:
//! - `topology`: the deployment settings; `connection`, `sentinel`: the command connection.
//! - `keys`: key and channel names (the data model, and which slot each key lives in).
//! - `scripts`: the Lua scripts.
//! - `append_script`: their append path (event-log caps, positions, delivery).
//! - `delivery`: their Lua that posts a message to a mailbox and rings its doorbell.
//! - `codec`: record ↔ hash fields, reply parsing.
//! - `bus`: the bus: mailboxes and their doorbells, the inbox reader (standalone and Sentinel:
//!   `bus::classic`; Redis Cluster: `bus::sharded`).
//! - `records`: this node's version-checked cache of session records.
//! - `liveness`: heartbeats and which nodes are alive.
//! - `memory_policy`: the servers' `maxmemory-policy`, from `INFO memory`.
//! - `session`, `events`, `tasks`: the other trait implementations.

mod admission;
mod append_script;
mod bus;
mod codec;
mod connection;
mod delivery;
mod events;
mod keys;
mod liveness;
mod memory_policy;
mod rates;
mod reaper;
mod records;
mod scripts;
mod sentinel;
mod session;
mod tasks;
mod topology;
mod upload;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ::redis::{ErrorKind, FromRedisValue, Pipeline, Script, ScriptInvocation, ServerErrorKind};
use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::StoreConfig;
use crate::rules;
use crate::traits::*;
use connection::Conn;
use keys::{Keys, SessionKeys};
pub use topology::{
    redact_url, url_problem, RedisMode, RedisTopology, RESEND_WINDOW, RESPONSE_TIMEOUT,
};

/// How many connections carry the writes that wait for replicas (`min_replicas_acked` above 0):
/// that many such writes can wait for their `WAIT` at once; more queue behind them.
pub const DURABLE_CONNECTIONS: usize = 4;

/// The Redis-backed store of one node.
pub struct RedisStore {
    config: StoreConfig,
    conn: Conn,
    /// With `min_replicas_acked` above 0: the connections that carry the writes waiting for
    /// replicas and their `WAIT`s ([`DURABLE_CONNECTIONS`], used in turn). Redis holds a client
    /// in `WAIT` until the replicas confirm or the timeout passes, and a multiplexed connection's
    /// later commands wait behind it: on `conn`, one unconfirmed write would stall every
    /// heartbeat, admission and read of the node for `replicas_ack_timeout`.
    durable: Vec<Conn>,
    next_durable: std::sync::atomic::AtomicUsize,
    inbox: Inbox,
    keys: Keys,
    subscribed: AtomicBool,
    records: records::RecordCache,
    /// The standalone server's URL (password hidden), or the topology described, for messages.
    server: String,
}

/// Where this node's bus messages come from.
enum Inbox {
    /// Standalone and Sentinel: classic pub/sub on its own connection.
    Classic(bus::classic::Source),
    /// Redis Cluster: sharded pub/sub on the cluster connection.
    Sharded(Arc<bus::sharded::Sharded>),
}

impl RedisStore {
    /// Connects to a standalone Redis at `url` (`redis://host:port/db`); see [`RedisStore::open`].
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Arc<RedisStore>, StoreError> {
        RedisStore::open(&RedisTopology::standalone(url), config).await
    }

    /// Connects to the Redis `topology` describes. Fails when it cannot be reached now (no
    /// server, no sentinel naming a primary, or no cluster node answering); later outages and
    /// failovers are followed by the connection.
    pub async fn open(
        topology: &RedisTopology,
        config: StoreConfig,
    ) -> Result<Arc<RedisStore>, StoreError> {
        let lanes = if config.min_replicas_acked > 0 {
            DURABLE_CONNECTIONS
        } else {
            0
        };
        let (opened, durable) = connection::open_with_lanes(topology, lanes).await?;
        let keys = Keys::new(&config.key_prefix, topology.mode == RedisMode::Cluster);
        let inbox = match (&opened.conn, opened.subscriber) {
            (Conn::Cluster(c), Some(subscriber)) => Inbox::Sharded(bus::sharded::Sharded::new(
                c.clone(),
                subscriber,
                keys.clone(),
                &config.node_id,
                config.idle_ttl,
                config.bus.clone(),
            )),
            (Conn::Sentinel(p), _) => Inbox::Classic(bus::classic::Source::Sentinel(p.clone())),
            _ => Inbox::Classic(bus::classic::Source::Fixed(Box::new(
                topology.data_client(&topology.url)?,
            ))),
        };
        Ok(Arc::new(RedisStore {
            records: records::RecordCache::new(config.record_cache_entries),
            config,
            conn: opened.conn,
            durable,
            next_durable: std::sync::atomic::AtomicUsize::new(0),
            inbox,
            keys,
            subscribed: AtomicBool::new(false),
            server: topology.describe(),
        }))
    }

    /// The settings of this store.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Redis Cluster: makes sure this node receives the messages of `sid` before it does what
    /// makes it their target (see `sharded`); whether it subscribed just now. Nothing to do
    /// otherwise (`false`).
    async fn interest(&self, sid: &str) -> StoreResult<bool> {
        match &self.inbox {
            Inbox::Sharded(s) => s.interest(sid).await,
            Inbox::Classic(_) => Ok(false),
        }
    }

    /// Redis Cluster: stops receiving the messages of `sid` (it is gone).
    fn lose_interest(&self, sid: &str) {
        if let Inbox::Sharded(s) = &self.inbox {
            s.forget(sid);
        }
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

    /// Runs one script invocation (loading the script if the server that runs it does not know
    /// it).
    async fn invoke<T: FromRedisValue>(&self, inv: &ScriptInvocation<'_>) -> StoreResult<T> {
        let mut conn = self.conn.clone();
        Ok(inv.invoke_async(&mut conn).await?)
    }

    /// Runs a pipeline (of one hash slot); if it contains scripts the server has forgotten
    /// (restart, failover, `SCRIPT FLUSH`), loads every script built so far (on every primary in Redis
    /// Cluster) and runs it once more; in Redis Cluster, if a transaction came back with
    /// `MOVED`/`ASK` inside it (its slot moved, e.g. to a promoted replica: the cluster client
    /// only follows redirects of plain commands), sends one plain command on its first key, which
    /// makes the client learn the new owner, and runs it again (at most 5 times, 50 ms apart). Every pipeline here is safe
    /// to repeat.
    async fn query<T: FromRedisValue>(&self, pipe: &Pipeline) -> StoreResult<T> {
        self.query_on(&self.conn, pipe).await
    }

    /// [`RedisStore::query`] on the connection `on`.
    async fn query_on<T: FromRedisValue>(&self, on: &Conn, pipe: &Pipeline) -> StoreResult<T> {
        let mut conn = on.clone();
        match pipe.query_async(&mut conn).await {
            Err(e) if no_script(&e) => {
                let loads = scripts::built().into_iter().map(|script| {
                    let mut conn = on.clone();
                    async move { script.prepare_invoke().load_async(&mut conn).await }
                });
                futures::future::try_join_all(loads).await?;
                Ok(pipe.query_async(&mut conn).await?)
            }
            Err(e) if self.keys.sharded() && redirected(&e) => {
                // The client refreshes its slot map in the background: a few tries, 50 ms apart.
                let mut last = e;
                for _ in 0..REDIRECT_TRIES {
                    if let Some(key) = first_key(pipe) {
                        let probe = ::redis::cmd("EXISTS")
                            .arg(key)
                            .query_async::<i64>(&mut conn)
                            .await;
                        tracing::debug!(error = %last, ?probe, "a transaction's slot moved; retrying");
                    }
                    match pipe.query_async(&mut conn).await {
                        Err(e) if redirected(&e) => last = e,
                        other => return Ok(other?),
                    }
                    tokio::time::sleep(REDIRECT_PAUSE).await;
                }
                Err(last.into())
            }
            other => Ok(other?),
        }
    }

    /// Runs a writing script invocation and, with `min_replicas_acked` above 0, a `WAIT` for
    /// that many replicas in the same pipeline (the same server: `WAIT` has no key and follows
    /// the script's slot). Fewer confirmations: [`StoreError::NotReplicated`].
    async fn invoke_durably<T: FromRedisValue>(
        &self,
        inv: &ScriptInvocation<'_>,
    ) -> StoreResult<T> {
        let wanted = self.replicas_wanted();
        if wanted == 0 {
            return self.invoke(inv).await;
        }
        let mut p = ::redis::pipe();
        p.invoke_script(inv)
            .cmd("WAIT")
            .arg(wanted)
            .arg(rules::millis(self.config.replicas_ack_timeout));
        let (reply, acked): (T, u32) = self.query_on(self.durable_conn(), &p).await?;
        if acked < wanted {
            return Err(self.short_of_replicas(acked, wanted));
        }
        Ok(reply)
    }

    /// How many replicas a write waits for: `redis.min_replicas_acked`, except in Sentinel mode
    /// just after a switch, while the former primary is not a replica yet (at most the replicas
    /// the new primary has connected: [`sentinel::Primary::replicas_ceiling`]).
    pub(crate) fn replicas_wanted(&self) -> u32 {
        let wanted = self.config.min_replicas_acked;
        match &self.conn {
            Conn::Sentinel(primary) => wanted.min(primary.replicas_ceiling()),
            _ => wanted,
        }
    }

    /// The error of a write `acked` by fewer than `wanted` replicas. In Sentinel mode it also
    /// asks the sentinels again at once: a replica that stopped confirming may have been promoted
    /// (a `SENTINEL FAILOVER`), and every write waits until the node follows it.
    pub(crate) fn short_of_replicas(&self, acked: u32, wanted: u32) -> StoreError {
        if let Conn::Sentinel(primary) = &self.conn {
            primary.re_resolve();
        }
        StoreError::NotReplicated { acked, wanted }
    }

    /// The next of the connections for writes that wait for replicas (`conn` when there are
    /// none: `min_replicas_acked` is 0).
    fn durable_conn(&self) -> &Conn {
        if self.durable.is_empty() {
            return &self.conn;
        }
        let i = self.next_durable.fetch_add(1, Ordering::Relaxed);
        &self.durable[i % self.durable.len()]
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

/// How often a transaction whose slot moved is tried again ([`RedisStore::query`]).
const REDIRECT_TRIES: usize = 5;
/// The pause between those tries.
const REDIRECT_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether `e` (of a transaction or pipeline) says its slot is served elsewhere now.
/// Whether the server had forgotten a script: `NOSCRIPT` as the reply's own error, or inside a
/// pipeline's failure list (the cluster client reports a failed pipeline as
/// `Pipeline failure: [(Index 0, error: NoScript: …)]`, seen after a Cluster failover).
fn no_script(e: &::redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) || {
        let text = e.to_string();
        text.contains("NoScript") || text.contains("NOSCRIPT")
    }
}

fn redirected(e: &::redis::RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::Moved | ServerErrorKind::Ask)
    ) || {
        let text = e.to_string();
        text.contains("Moved") || text.contains("MOVED") || text.contains("Ask:")
    }
}

/// The first key of a pipeline: the first argument after the first command's name.
fn first_key(pipe: &Pipeline) -> Option<Vec<u8>> {
    let cmd = pipe.cmd_iter().find(|c| c.args_iter().len() > 1)?;
    match cmd.args_iter().nth(1)? {
        ::redis::Arg::Simple(key) => Some(key.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use ::redis::{ErrorKind, RedisError};

    /// The failure the cluster client gave for a pipeline on a just-promoted primary (chaos
    /// suite, Cluster primary-kill with `min_replicas_acked = 1`).
    #[test]
    fn a_forgotten_script_inside_a_pipeline_failure_is_recognised() {
        let wrapped = RedisError::from((
            ErrorKind::Extension,
            "Pipeline failure",
            "[(Index 0, error: NoScript: No matching script. Please use EVAL.)]".to_owned(),
        ));
        assert!(super::no_script(&wrapped), "{wrapped}");
        let other = RedisError::from((ErrorKind::Io, "broken pipe"));
        assert!(!super::no_script(&other));
    }
}

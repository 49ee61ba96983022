//! Sentinel mode: the store's commands go to the primary the sentinels name, and follow it when
//! they promote another one.
//!
//! At start the sentinels are asked for the primary (`SENTINEL GET-MASTER-ADDR-BY-NAME`, and
//! `ROLE` on the answer, by `redis`'s `SentinelClient`), and a reconnecting [`ConnectionManager`]
//! is opened to it. A command that fails because the server is gone, unreachable, timed out, or
//! no longer a primary (`READONLY`, `MASTERDOWN`) fails as it would in standalone mode (the node
//! answers 503), and starts one re-resolution in the background: the sentinels are asked again and,
//! when they name another server, a connection to it replaces the old one. Re-resolutions retry
//! every 250 ms while commands keep failing; the liveness heartbeat writes every few hundred
//! milliseconds, so a node notices a failover even when no client is calling. Besides, the
//! sentinels are asked again every second (`recheck`): a primary they stopped naming can go on
//! accepting writes for seconds (see there), and the inbox (the `pubsub` module) moves when the
//! address changes. After a switch, the former primary is excused from the replicas a write
//! waits for until the sentinels have turned it into a replica ([`conversion`]).

mod conversion;
mod leader;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Client, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, Pipeline, RedisError, RedisFuture,
    RedisResult, ServerErrorKind, TlsMode, Value,
};

use super::topology::{manager_config, RedisTopology};
use conversion::{Former, Standing};

/// The shortest time between two re-resolutions.
const RESOLVE_EVERY: Duration = Duration::from_millis(250);

/// How often the sentinels are asked again while every command succeeds.
const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// The sentinels' current primary, as a command connection (cheap to clone).
#[derive(Clone)]
pub(crate) struct Primary {
    inner: Arc<Inner>,
    /// Which of the primary's connections this one sends on: the shared one (`None`) or one of
    /// the lanes kept for writes that wait for replicas ([`Primary::lane`]).
    lane: Option<usize>,
}

struct Inner {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// Where the sentinels are, for [`leader::promoted`].
    topology: RedisTopology,
    current: RwLock<Current>,
    resolving: AtomicBool,
    /// The connection to `current` failed as a lost primary would: it is not used again (its
    /// manager would reconnect to the same address, where a restarted former primary answers,
    /// empty and still a primary for seconds, until the sentinels demote it) until a
    /// re-resolution has opened a fresh one to the server the sentinels name then.
    stale: AtomicBool,
    /// The primary before the last switch, while it may not have become a replica yet.
    former: Mutex<Option<Former>>,
    /// The most replicas a write may wait for ([`Primary::replicas_ceiling`]).
    ceiling: AtomicU32,
}

struct Current {
    manager: ConnectionManager,
    /// The lanes: connections of their own to the same primary, replaced with `manager`.
    lanes: Vec<ConnectionManager>,
    address: String,
    /// The settings `manager` connected with.
    info: ConnectionInfo,
}

/// `n` more connections to the primary `client` names.
async fn open_lanes(client: &Client, n: usize) -> RedisResult<Vec<ConnectionManager>> {
    let mut lanes = Vec::with_capacity(n);
    for _ in 0..n {
        lanes.push(
            client
                .get_connection_manager_with_config(manager_config())
                .await?,
        );
    }
    Ok(lanes)
}

impl Primary {
    /// Asks the sentinels for the primary and connects to it: one shared connection and `lanes`
    /// more ([`Primary::lane`]), all following the primary together.
    pub async fn connect(topology: &RedisTopology, lanes: usize) -> RedisResult<Primary> {
        let mut sentinels = sentinel_client(topology)?;
        let client = match sentinels.async_get_client().await {
            Ok(client) => client,
            Err(e) => return Err(blame(topology, e).await),
        };
        let info = client.get_connection_info().clone();
        let address = info.addr().to_string();
        let primary = format!("primary {address}");
        let at_primary = |e| during(e, PRIMARY_STEP, &primary, "redis.password");
        let manager = client
            .get_connection_manager_with_config(manager_config())
            .await
            .map_err(at_primary)?;
        let lanes = open_lanes(&client, lanes).await.map_err(at_primary)?;
        tracing::info!(primary = %address, "connected to the primary the sentinels name");
        let primary = Primary {
            inner: Arc::new(Inner {
                sentinels: tokio::sync::Mutex::new(sentinels),
                topology: topology.clone(),
                current: RwLock::new(Current {
                    manager,
                    lanes,
                    address,
                    info,
                }),
                resolving: AtomicBool::new(false),
                stale: AtomicBool::new(false),
                former: Mutex::new(None),
                ceiling: AtomicU32::new(u32::MAX),
            }),
            lane: None,
        };
        tokio::spawn(recheck(Arc::downgrade(&primary.inner)));
        Ok(primary)
    }

    /// A client for the primary the sentinels name now.
    async fn client(&self) -> RedisResult<Client> {
        self.inner.sentinels.lock().await.async_get_client().await
    }

    /// A client for the primary the inbox should listen on (it connects with it after every
    /// loss of its connection): the one the sentinels name, except the former primary while it
    /// is not yet a replica, where the sentinels lag behind a promotion this node already
    /// follows: then the primary the commands go to (an inbox that listened on the old primary
    /// heard nothing for 2 s, until its probe failed).
    pub async fn inbox_client(&self) -> RedisResult<Client> {
        let named = self.client().await?;
        if self.is_former(&named.get_connection_info().addr().to_string()) {
            return Client::open(self.inner.current.read().info.clone());
        }
        Ok(named)
    }

    /// The primary's address as last resolved (`host:port`).
    pub fn address(&self) -> String {
        self.inner.current.read().address.clone()
    }

    /// The same primary through lane `i` of the ones opened by [`Primary::connect`]: a
    /// connection of its own, so that a `WAIT` there holds up nothing sent on the others.
    pub fn lane(&self, i: usize) -> Primary {
        Primary {
            inner: self.inner.clone(),
            lane: Some(i),
        }
    }

    fn manager(&self) -> ConnectionManager {
        let current = self.inner.current.read();
        match self.lane.and_then(|i| current.lanes.get(i)) {
            Some(lane) => lane.clone(),
            None => current.manager.clone(),
        }
    }

    /// After a failed command: marks the connection stale and starts a re-resolution unless
    /// one runs.
    fn after<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(e) = &result {
            if lost_primary(e) {
                self.inner.stale.store(true, Ordering::SeqCst);
                self.re_resolve();
            }
        }
        result
    }

    /// Starts one re-resolution in the background unless one runs (then at most every
    /// [`RESOLVE_EVERY`]).
    pub(crate) fn re_resolve(&self) {
        if !self.inner.resolving.swap(true, Ordering::SeqCst) {
            let me = self.clone();
            tokio::spawn(async move {
                me.resolve(true).await;
                tokio::time::sleep(RESOLVE_EVERY).await;
                me.inner.resolving.store(false, Ordering::SeqCst);
            });
        }
    }

    /// The manager to send a command on, or an error (and a re-resolution) while the last one
    /// is stale.
    fn usable(&self) -> RedisResult<ConnectionManager> {
        if self.inner.stale.load(Ordering::SeqCst) {
            self.re_resolve();
            return Err(RedisError::from((
                ErrorKind::Io,
                "the Redis primary is being asked of the sentinels again",
            )));
        }
        Ok(self.manager())
    }

    /// Asks the sentinels for the primary and, when they name another one (or the connection is
    /// stale), connects to it and replaces the current connections. With `leader_first` (after
    /// a failed command), a replica a failover's leader has already promoted is taken before the
    /// sentinels name it ([`leader`]).
    async fn resolve(&self, leader_first: bool) {
        let promoted = if leader_first {
            self.promoted_client().await
        } else {
            None
        };
        let named = match promoted {
            Some(client) => Ok(client),
            None => self.client().await,
        };
        let client = match named {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "the sentinels name no reachable primary");
                return;
            }
        };
        let info = client.get_connection_info().clone();
        let address = info.addr().to_string();
        let stale = self.inner.stale.load(Ordering::SeqCst);
        if address == self.address() && !stale {
            return;
        }
        if self.is_former(&address) {
            // A sentinel still names the old primary (its `SENTINEL MASTER` entry changes only
            // when the failover ends, about 1 s after the promotion), which still answers `ROLE`
            // as a primary: going back there lost writes (seen: back and forth within 1 s).
            tracing::debug!(primary = %address, "not following the sentinels back to the former primary before it is a replica");
            return;
        }
        let lanes = self.inner.current.read().lanes.len();
        let opened = match client
            .get_connection_manager_with_config(manager_config())
            .await
        {
            Ok(manager) => open_lanes(&client, lanes).await.map(|l| (manager, l)),
            Err(e) => Err(e),
        };
        match opened {
            Ok((manager, lanes)) => {
                let (from, from_addr) = {
                    let current = self.inner.current.read();
                    (current.address.clone(), current.info.addr().clone())
                };
                if from != address {
                    tracing::warn!(from = %from, to = %address, "the sentinels promoted another primary; following it");
                    // Before any write reaches the new primary: one waiting for the former
                    // primary there would wait its whole `replicas_ack_timeout` in vain.
                    *self.inner.former.lock() = Some(Former::new(&from_addr, &info));
                    self.review_former_on(manager.clone()).await;
                } else {
                    tracing::info!(primary = %address, "connected again to the primary the sentinels name");
                }
                *self.inner.current.write() = Current {
                    manager,
                    lanes,
                    address,
                    info,
                };
                self.inner.stale.store(false, Ordering::SeqCst);
            }
            Err(e) => {
                tracing::warn!(error = %e, primary = %address, "cannot connect to the new primary yet")
            }
        }
    }
}

impl Primary {
    /// A client for the replica a failover's leading sentinel has promoted, when there is one
    /// and it answers `ROLE` as a primary.
    async fn promoted_client(&self) -> Option<Client> {
        let (host, port) = leader::promoted(&self.inner.topology).await?;
        let info = conversion::at(&self.inner.current.read().info, host, port);
        if info.addr().to_string() == self.address() || !conversion::is_primary(&info).await {
            return None;
        }
        Client::open(info).ok()
    }

    /// The most replicas a write may wait for now: `u32::MAX` (no bound but
    /// `redis.min_replicas_acked`) except just after a switch, while the former primary is still
    /// a primary ([`conversion`]): then the replicas the new primary has connected, at least 1.
    pub fn replicas_ceiling(&self) -> u32 {
        self.inner.ceiling.load(Ordering::SeqCst)
    }

    /// Whether `address` is the former primary, not yet seen as a replica or gone.
    fn is_former(&self, address: &str) -> bool {
        self.inner
            .former
            .lock()
            .as_ref()
            .is_some_and(|f| f.info.addr().to_string() == address)
    }

    /// Whether the former primary is still one; sets [`Primary::replicas_ceiling`] accordingly,
    /// and forgets the former primary once it answers as a replica or was remembered for
    /// [`conversion::EXCUSED_AT_MOST`]. Runs under the `resolving` guard (never beside a
    /// switch).
    async fn review_former(&self) {
        self.review_former_on(self.manager()).await;
    }

    /// [`Primary::review_former`] with `manager` a connection to the new primary.
    async fn review_former_on(&self, mut manager: ConnectionManager) {
        let Some((info, since)) = self
            .inner
            .former
            .lock()
            .as_ref()
            .map(|f| (f.info.clone(), f.since))
        else {
            return;
        };
        let former = Former { info, since };
        let standing = if since.elapsed() > conversion::EXCUSED_AT_MOST {
            Standing::Replica
        } else {
            conversion::standing(&former).await
        };
        let address = former.info.addr().to_string();
        let ceiling = match standing {
            Standing::Primary => conversion::connected_replicas(&mut manager)
                .await
                .unwrap_or(0)
                .max(1),
            Standing::Replica | Standing::Silent => u32::MAX,
        };
        if standing == Standing::Replica {
            *self.inner.former.lock() = None;
        }
        let before = self.inner.ceiling.swap(ceiling, Ordering::SeqCst);
        match (before == u32::MAX, ceiling == u32::MAX) {
            (true, false) => {
                tracing::warn!(former = %address, replicas = ceiling, "the former primary is not a replica of the new one yet: until it is, writes wait for at most the replicas connected to the new primary")
            }
            (false, true) => {
                tracing::info!(former = %address, ?standing, "the former primary is a replica now, or does not answer: writes wait for redis.min_replicas_acked replicas again")
            }
            _ => {}
        }
    }
}

/// Asks the sentinels again every [`RECHECK_EVERY`] while the primary lives, even when every
/// command succeeds: measured in `tests/tests/redis_failover.rs` (two replicas, 2 busy cores),
/// the sentinels first promoted one replica, then named the other, and the first stayed a
/// writable primary for 10 s more, until they turned it into a replica; a node that re-asked
/// only after a failed command wrote there meanwhile, and its inbox listened there.
async fn recheck(inner: std::sync::Weak<Inner>) {
    loop {
        tokio::time::sleep(RECHECK_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        let me = Primary { inner, lane: None };
        if !me.inner.resolving.swap(true, Ordering::SeqCst) {
            me.resolve(false).await;
            me.review_former().await;
            me.inner.resolving.store(false, Ordering::SeqCst);
        }
    }
}

const SENTINEL_STEP: &str = "asking the sentinels for the primary";
const PRIMARY_STEP: &str = "connecting to the primary the sentinels name";

/// Which side refused a first connection: `redis`'s `SentinelClient` asks the sentinels for the
/// primary and then checks `ROLE` on it, so its error alone does not say whether a sentinel or
/// the primary failed. The sentinels are asked again for the address alone
/// (`SENTINEL GET-MASTER-ADDR-BY-NAME`, with the sentinels' credentials, at most
/// [`super::topology::CONNECTION_TIMEOUT`] per sentinel): when one answers, `e` came from the
/// primary at that address.
async fn blame(topology: &RedisTopology, e: RedisError) -> RedisError {
    let sentinels = format!(
        "sentinels {} for master name `{}`",
        topology.describe_nodes(),
        topology.master_name
    );
    let at_sentinels = |e: RedisError| {
        let setting = if e.kind() == ErrorKind::MasterNameNotFoundBySentinel {
            "redis.master_name"
        } else {
            "redis.sentinel_password"
        };
        during(e, SENTINEL_STEP, &sentinels, setting)
    };
    let Ok(clients) = topology.sentinel_clients() else {
        return at_sentinels(e);
    };
    for client in clients {
        let ask = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&topology.master_name)
                .query_async::<Option<(String, u16)>>(&mut conn)
                .await
        };
        if let Ok(Ok(Some((host, port)))) =
            tokio::time::timeout(super::topology::CONNECTION_TIMEOUT, ask).await
        {
            let primary = format!("primary {host}:{port}");
            return during(e, PRIMARY_STEP, &primary, "redis.password");
        }
    }
    at_sentinels(e)
}

/// `e` (its kind kept) saying which `step` failed, about what (`subject`: the master name or
/// the primary's address), and, when the server refused the credentials, which setting gives
/// them (review of issue 14: a `NOAUTH` from the primary read the same as one from a sentinel,
/// and a dead primary was reported at the sentinels' addresses).
fn during(e: RedisError, step: &'static str, subject: &str, setting: &str) -> RedisError {
    let refused = e.kind() == ErrorKind::AuthenticationFailed
        || e.kind() == ErrorKind::MasterNameNotFoundBySentinel
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"));
    let hint = if refused {
        format!(" (check {setting})")
    } else {
        String::new()
    };
    RedisError::from((e.kind(), step, format!("{subject}: {e}{hint}")))
}

/// Whether `e` says the server is not (or no longer) a reachable primary.
fn lost_primary(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || e.is_timeout()
        || matches!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

fn sentinel_client(topology: &RedisTopology) -> RedisResult<SentinelClient> {
    let infos = topology.node_infos()?;
    // Credentials in a sentinel's URL count, as everywhere else, unless the fields give them.
    let from_urls = |get: fn(&redis::RedisConnectionInfo) -> Option<&str>| {
        infos
            .iter()
            .find_map(|i| get(i.redis_settings()).map(str::to_owned))
            .unwrap_or_default()
    };
    let sentinel_username = match topology.sentinel_username.as_str() {
        "" => from_urls(redis::RedisConnectionInfo::username),
        set => set.to_owned(),
    };
    let sentinel_password = match topology.sentinel_password.as_str() {
        "" => from_urls(redis::RedisConnectionInfo::password),
        set => set.to_owned(),
    };
    let addrs: Vec<ConnectionAddr> = infos.into_iter().map(|i| i.addr().clone()).collect();
    let mut builder =
        SentinelClientBuilder::new(addrs, &topology.master_name, SentinelServerType::Master)?;
    if !topology.url.is_empty() {
        // The URL's database and credentials count (`redis.username`/`redis.password` override
        // them); its host is the sentinels' to name.
        let primary = topology.data_info(&topology.url)?;
        let settings = primary.redis_settings();
        builder = builder.set_client_to_redis_db(settings.db());
        if let Some(username) = settings.username() {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = settings.password() {
            builder = builder.set_client_to_redis_password(password);
        }
    }
    if topology.primary_tls() {
        builder = builder.set_client_to_redis_tls_mode(TlsMode::Secure);
    }
    if !topology.username.is_empty() {
        builder = builder.set_client_to_redis_username(&topology.username);
    }
    if !topology.password.is_empty() {
        builder = builder.set_client_to_redis_password(&topology.password);
    }
    if !sentinel_username.is_empty() {
        builder = builder.set_client_to_sentinel_username(&sentinel_username);
    }
    if !sentinel_password.is_empty() {
        builder = builder.set_client_to_sentinel_password(&sentinel_password);
    }
    if let Some(certs) = topology.tls_certs()? {
        builder = builder
            .set_client_to_redis_certificates(certs.clone())
            .set_client_to_sentinel_certificates(certs);
    }
    builder.build()
}

impl ConnectionLike for Primary {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut manager = self.usable()?;
            let result = manager.req_packed_command(cmd).await;
            self.after(result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut manager = self.usable()?;
            let result = manager.req_packed_commands(pipeline, offset, count).await;
            self.after(result)
        })
    }

    fn get_db(&self) -> i64 {
        self.manager().get_db()
    }
}

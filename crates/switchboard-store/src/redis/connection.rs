//! The store's one command connection, whatever the deployment: an auto-reconnecting
//! [`ConnectionManager`] (standalone), the same following the sentinels' primary
//! (`sentinel::Primary`), or `redis`'s cluster connection (slot routing, `MOVED`/`ASK`,
//! topology refresh after a failover). All three are multiplexed: concurrent commands share one
//! socket per server, written back to back, so commands sent together cost one round trip.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{
    Cmd, Pipeline, ProtocolVersion, PushInfo, RedisError, RedisFuture, RedisResult, Value,
};
use tokio::sync::mpsc;

use super::sentinel::Primary;
use super::topology::{
    manager_config, RedisMode, RedisTopology, CONNECTION_TIMEOUT, RESPONSE_TIMEOUT,
};

/// A command connection (cheap to clone: clones share the sockets).
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server.
    Single(ConnectionManager),
    /// The sentinels' current primary.
    Sentinel(Primary),
    /// Redis Cluster (commands only: the node's sharded subscriptions have a cluster connection
    /// of their own, [`Subscriber`]).
    Cluster(ClusterConnection),
}

/// Redis Cluster: the cluster connection that carries this node's sharded subscriptions and
/// nothing else, and the receiver of its pushes (sharded pub/sub messages, subscription
/// confirmations, Redis unsubscribing a channel by itself, disconnections).
///
/// Kept apart from the command connection because `redis` (1.8) takes every subscription-kind
/// push for the reply of the oldest command waiting on that server's connection: an unsolicited
/// `sunsubscribe` (a slot moved, a failover demoted the server) arriving while commands were in
/// flight shifted every later reply onto the wrong command, until the connection failed (seen
/// under load: `Incompatible type` errors, then a panic in the crate's reply bookkeeping and
/// every command timing out; the node stayed fenced). Here only `SSUBSCRIBE` and `SUNSUBSCRIBE`
/// travel, so such a push finds nothing or one such command waiting (which takes it as its
/// confirmation, no error), and the connection's bookkeeping is right again once that command
/// is answered. (An `EXISTS` sent here to make it learn a new slot owner got such a push as its
/// reply, failed, and left the connection finding no server at all.)
pub(crate) struct Subscriber {
    pub conn: ClusterConnection,
    pub pushes: mpsc::UnboundedReceiver<PushInfo>,
    /// What makes another such connection (its pushes to the same receiver).
    pub renew: Renew,
}

/// Makes a new subscriber connection, whose pushes go where the first one's go: a cluster
/// connection learns the slot map when it connects, and a subscriber sends nothing that would
/// make it learn a change (a demoted server takes an `SSUBSCRIBE` without a `MOVED`).
#[derive(Clone)]
pub(crate) struct Renew {
    topology: RedisTopology,
    pushes: mpsc::UnboundedSender<PushInfo>,
}

impl Renew {
    /// A new subscriber connection (no subscriptions yet).
    pub async fn connect(&self) -> RedisResult<ClusterConnection> {
        cluster(&self.topology, Some(self.pushes.clone())).await
    }
}

/// A new command connection and, in Cluster mode, this node's subscriber.
pub(crate) struct Opened {
    pub conn: Conn,
    pub subscriber: Option<Subscriber>,
}

/// Whether every primary of the cluster answers: `CLUSTER SLOTS` (any node), then `PING` sent by
/// address to each primary it names for a slot range, concurrently. A `PING` routed to all
/// primaries is not enough: `redis` leaves out a primary it holds no connection to (its fan-out
/// skips missing nodes), so through a failover, with the dead primary still serving its slots in
/// the cluster's own view, that `PING` succeeded and `/readyz` said 200 (measured in
/// `tests/tests/redis_failover.rs`).
///
/// Returns the fewest replicas any slot range lists (what `redis.min_replicas_acked` is held
/// against).
///
/// # Errors
/// `CLUSTER SLOTS` failed or named no primary, or a primary did not answer.
pub(crate) async fn cluster_reachable(conn: &ClusterConnection) -> RedisResult<usize> {
    let (primaries, fewest) = cluster_primaries(conn).await?;
    on_each(conn, primaries, &redis::cmd("PING")).await?;
    Ok(fewest)
}

/// `cmd`'s answer from every primary `CLUSTER SLOTS` names, each asked by address (as
/// [`cluster_reachable`] does, for the same reason), concurrently: `("host:port", answer)`,
/// sorted by address.
///
/// # Errors
/// `CLUSTER SLOTS` failed or named no primary, or a primary did not answer or answered with an
/// error.
pub(crate) async fn on_every_primary(
    conn: &ClusterConnection,
    cmd: &Cmd,
) -> RedisResult<Vec<(String, Value)>> {
    let (primaries, _) = cluster_primaries(conn).await?;
    on_each(conn, primaries, cmd).await
}

/// The primaries `CLUSTER SLOTS` (any node) names, sorted and each once, and the fewest replicas
/// any slot range lists.
async fn cluster_primaries(conn: &ClusterConnection) -> RedisResult<(Vec<(String, u16)>, usize)> {
    let mut any = conn.clone();
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut any)
        .await?;
    // A range is `[start, end, primary, replica…]`.
    let fewest = ranges
        .iter()
        .map(|r| match r {
            Value::Array(fields) => fields.len().saturating_sub(3),
            _ => 0,
        })
        .min()
        .unwrap_or(0);
    let mut primaries: Vec<(String, u16)> = ranges.iter().filter_map(range_primary).collect();
    primaries.sort();
    primaries.dedup();
    if primaries.is_empty() {
        return Err((
            redis::ErrorKind::ClusterConnectionNotFound,
            "CLUSTER SLOTS names no primary",
        )
            .into());
    }
    Ok((primaries, fewest))
}

/// `cmd` sent by address to each of `servers`, concurrently: `("host:port", answer)` in their
/// order.
async fn on_each(
    conn: &ClusterConnection,
    servers: Vec<(String, u16)>,
    cmd: &Cmd,
) -> RedisResult<Vec<(String, Value)>> {
    let asks = servers.into_iter().map(|(host, port)| {
        let mut conn = conn.clone();
        let address = format!("{host}:{port}");
        let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
        let cmd = cmd.clone();
        async move { Ok((address, conn.route_command(cmd, to).await?)) }
    });
    futures::future::try_join_all(asks).await
}

/// The `(host, port)` of the primary in one `CLUSTER SLOTS` entry (`[start, end, [host, port,
/// id, …], replica…]`).
fn range_primary(range: &Value) -> Option<(String, u16)> {
    let Value::Array(fields) = range else {
        return None;
    };
    let Some(Value::Array(primary)) = fields.get(2) else {
        return None;
    };
    let host = match primary.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    match primary.get(1)? {
        Value::Int(port) => Some((host, u16::try_from(*port).ok()?)),
        _ => None,
    }
}

/// Connects as `topology` says, with `lanes` more connections of their own for writes that
/// wait for replicas (Sentinel: lanes of the one [`Primary`], following it together; otherwise
/// separate connections to the same servers). Fails when Redis cannot be reached now; later
/// outages are retried by the connections.
pub(crate) async fn open_with_lanes(
    topology: &RedisTopology,
    lanes: usize,
) -> RedisResult<(Opened, Vec<Conn>)> {
    install_tls_provider();
    if topology.mode == RedisMode::Sentinel {
        let primary = Primary::connect(topology, lanes).await?;
        let lanes = (0..lanes)
            .map(|i| Conn::Sentinel(primary.lane(i)))
            .collect();
        let opened = Opened {
            conn: Conn::Sentinel(primary),
            subscriber: None,
        };
        return Ok((opened, lanes));
    }
    let mut opened = open(topology).await?;
    if topology.mode == RedisMode::Cluster {
        let (tx, rx) = mpsc::unbounded_channel();
        let renew = Renew {
            topology: topology.clone(),
            pushes: tx,
        };
        let conn = renew.connect().await?;
        opened.subscriber = Some(Subscriber {
            conn,
            pushes: rx,
            renew,
        });
    }
    let mut more = Vec::with_capacity(lanes);
    for _ in 0..lanes {
        more.push(open(topology).await?.conn);
    }
    Ok((opened, more))
}

/// Connects as `topology` says. Fails when Redis cannot be reached now; later outages are retried
/// by the connection.
async fn open(topology: &RedisTopology) -> RedisResult<Opened> {
    install_tls_provider();
    match topology.mode {
        RedisMode::Standalone => {
            let client = topology.data_client(&topology.url)?;
            let manager = client
                .get_connection_manager_with_config(manager_config())
                .await
                .map_err(|e| tls_hint(&topology.url, e))?;
            check_standalone(&manager).await?;
            Ok(Opened {
                conn: Conn::Single(manager),
                subscriber: None,
            })
        }
        RedisMode::Sentinel => Ok(Opened {
            conn: Conn::Sentinel(Primary::connect(topology, 0).await?),
            subscriber: None,
        }),
        RedisMode::Cluster => Ok(Opened {
            conn: Conn::Cluster(cluster(topology, None).await?),
            subscriber: None,
        }),
    }
}

/// A cluster connection (RESP3), its pushes sent to `pushes` when given.
async fn cluster(
    topology: &RedisTopology,
    pushes: Option<mpsc::UnboundedSender<PushInfo>>,
) -> RedisResult<ClusterConnection> {
    let mut builder = ClusterClientBuilder::new(topology.node_infos()?)
        .use_protocol(ProtocolVersion::RESP3)
        .connection_timeout(CONNECTION_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retries(3);
    if let Some(tx) = pushes {
        builder = builder.push_sender(tx);
    }
    if !topology.username.is_empty() {
        builder = builder.username(&topology.username);
    }
    if !topology.password.is_empty() {
        builder = builder.password(&topology.password);
    }
    if let Some(certs) = topology.tls_certs()? {
        builder = builder.certs(certs);
    }
    builder
        .build()?
        .get_async_connection()
        .await
        .map_err(cluster_auth_hint)
}

/// A standalone server must answer (`PING`: a missing or wrong password fails here, not at the
/// node's first write) and be a writable primary that runs neither Redis Cluster nor Sentinel:
/// pointed at one of those, the first commands failed later with `MOVED`, a broken pipe or
/// `READONLY`, reported as the node failing to serve. `ROLE` or `INFO` refused (an ACL without
/// them) skips that check.
async fn check_standalone(manager: &ConnectionManager) -> RedisResult<()> {
    let mut conn = manager.clone();
    redis::cmd("PING").query_async::<()>(&mut conn).await?;
    let wrong = |what: &str| -> RedisResult<()> {
        Err((
            redis::ErrorKind::InvalidClientConfig,
            "wrong redis.mode",
            what.to_owned(),
        )
            .into())
    };
    if let Ok(role) = redis::cmd("ROLE")
        .query_async::<Vec<Value>>(&mut conn)
        .await
    {
        match role.first() {
            Some(Value::BulkString(r)) if r.as_slice() == b"sentinel" => {
                return wrong("this server is a sentinel: set redis.mode = \"sentinel\", the sentinels in redis.nodes and redis.master_name");
            }
            Some(Value::BulkString(r)) if r.as_slice() == b"slave" => {
                return wrong("this server is a replica: point redis.url at the primary (or use redis.mode = \"sentinel\")");
            }
            _ => {}
        }
    }
    if let Ok(info) = redis::cmd("INFO")
        .arg("cluster")
        .query_async::<String>(&mut conn)
        .await
    {
        if info.contains("cluster_enabled:1") {
            return wrong("this server runs Redis Cluster: set redis.mode = \"cluster\" and the seed URLs in redis.nodes");
        }
    }
    Ok(())
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// `e` with the setting to check when a Cluster seed refused the credentials (the client's
/// message quoted Redis's `HELLO` advice instead; review of issue 14).
fn cluster_auth_hint(e: RedisError) -> RedisError {
    let text = e.to_string();
    if !["NOAUTH", "WRONGPASS", "NOPERM"]
        .iter()
        .any(|code| text.contains(code))
    {
        return e;
    }
    RedisError::from((
        e.kind(),
        "the cluster refused the credentials",
        format!("{text} (check redis.password and redis.username)"),
    ))
}

/// `e` with a hint when a `rediss://` connection timed out: a server without TLS on that port
/// reads the TLS handshake as a partial command and never answers, so the client saw only
/// "timed out" (review of issue 14).
fn tls_hint(url: &str, e: RedisError) -> RedisError {
    if !url.starts_with("rediss://") || !e.is_timeout() {
        return e;
    }
    RedisError::from((
        e.kind(),
        "no TLS handshake",
        format!("{e} (redis.url is rediss://: does the server speak TLS on that port?)"),
    ))
}

/// Makes `ring` the process's TLS provider unless one is installed: rustls cannot choose by itself
/// when a build enables more than one (the test crates link `aws-lc-rs` as well), and a
/// `rediss://` connection would then panic.
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

//! The store's one command connection, whatever the deployment: an auto-reconnecting
//! [`ConnectionManager`] (standalone), the same following the sentinels' primary
//! ([`super::sentinel::Primary`]), or `redis`'s cluster connection (slot routing, `MOVED`/`ASK`,
//! topology refresh after a failover). All three are multiplexed: concurrent commands share one
//! socket per server, written back to back, so commands sent together cost one round trip.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, ProtocolVersion, PushInfo, RedisFuture, RedisResult, Value};
use tokio::sync::mpsc;

use super::sentinel::Primary;
use super::topology::{RedisMode, RedisTopology};

/// How long one command may wait for its reply.
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to one server may take.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// A command connection (cheap to clone: clones share the sockets).
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server.
    Single(ConnectionManager),
    /// The sentinels' current primary.
    Sentinel(Primary),
    /// Redis Cluster; it also carries this node's sharded subscriptions (RESP3 pushes).
    Cluster(ClusterConnection),
}

/// A new connection and, in Cluster mode, the receiver of its pushes (sharded pub/sub messages,
/// subscription confirmations and disconnections).
pub(crate) struct Opened {
    pub conn: Conn,
    pub pushes: Option<mpsc::UnboundedReceiver<PushInfo>>,
}

/// The reconnecting connection manager's settings: 3 quick retries, then the command fails (the
/// node answers 503) while the manager keeps reconnecting in the background.
pub(crate) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_number_of_retries(3)
}

/// Connects as `topology` says. Fails when Redis cannot be reached now; later outages are retried
/// by the connection.
pub(crate) async fn open(topology: &RedisTopology) -> RedisResult<Opened> {
    match topology.mode {
        RedisMode::Standalone => {
            let client = topology.data_client(&topology.url)?;
            let manager = client
                .get_connection_manager_with_config(manager_config())
                .await?;
            Ok(Opened {
                conn: Conn::Single(manager),
                pushes: None,
            })
        }
        RedisMode::Sentinel => Ok(Opened {
            conn: Conn::Sentinel(Primary::connect(topology).await?),
            pushes: None,
        }),
        RedisMode::Cluster => {
            let (tx, rx) = mpsc::unbounded_channel();
            let mut builder = ClusterClientBuilder::new(topology.node_infos()?)
                .use_protocol(ProtocolVersion::RESP3)
                .push_sender(tx)
                .connection_timeout(CONNECTION_TIMEOUT)
                .response_timeout(RESPONSE_TIMEOUT)
                .retries(3);
            if !topology.username.is_empty() {
                builder = builder.username(&topology.username);
            }
            if !topology.password.is_empty() {
                builder = builder.password(&topology.password);
            }
            if let Some(certs) = topology.tls_certs()? {
                builder = builder.certs(certs);
            }
            let conn = builder.build()?.get_async_connection().await?;
            Ok(Opened {
                conn: Conn::Cluster(conn),
                pushes: Some(rx),
            })
        }
    }
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

//! The former primary after the sentinels promoted another one, until they have turned it into a
//! replica of the new primary.
//!
//! `SENTINEL FAILOVER` (a planned switch: the old primary stays up) promotes a replica, points the
//! other replicas at it, and names the new primary (`+switch-master`); the old primary is turned
//! into a replica only when a sentinel next reads its `INFO` and has seen it claim the primary role
//! for a while: measured here 8–10 s after the switch. Until then it replicates nothing, so with
//! `redis.min_replicas_acked` counting every replica each write that waits for replicas on the new
//! primary failed for those seconds (RELIABILITY.md, finding 8: live events up to 8.3 s late). While
//! the former primary answers `ROLE` as a primary, it is excused: a write waits for every replica
//! the new primary has connected (at least one), up to `min_replicas_acked`. A former primary that
//! does not answer (it died: the sentinels' usual failover) is not excused, as before; one that
//! restarted empty answers as a primary and is excused until the sentinels convert it (what it
//! holds is discarded then; the writes are on the new primary and its connected replicas).

use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::{Client, ConnectionAddr, ConnectionInfo, Value};

/// How long the former primary is excused at most (the sentinels convert it within about 10 s).
pub(super) const EXCUSED_AT_MOST: Duration = Duration::from_secs(60);

/// How long one `ROLE` to the former primary may take.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);

/// The server the node wrote to before the sentinels named another primary.
pub(super) struct Former {
    /// Its connection settings (the new primary's, at its address: same credentials and TLS).
    pub info: ConnectionInfo,
    /// When the node followed the new primary.
    pub since: Instant,
}

impl Former {
    /// The former primary at `host:port` of `old`, with the settings of `current` (the new
    /// primary's connection settings).
    pub fn new(old: &ConnectionAddr, current: &ConnectionInfo) -> Former {
        Former {
            info: current.clone().set_addr(old.clone()),
            since: Instant::now(),
        }
    }
}

/// What the former primary says of itself.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Standing {
    /// Still a primary: not yet turned into a replica (also one restarted empty after it died:
    /// it answers as a primary until the sentinels convert it).
    Primary,
    /// A replica now: forgotten.
    Replica,
    /// No answer (down, or slower than [`ASK_TIMEOUT`]): not excused, but still remembered, so
    /// the node does not follow a lagging sentinel back to it (a single slow `ROLE` once made
    /// the node forget it, go back to it, and take the real primary for the former one).
    Silent,
}

/// `ROLE` on the former primary (a connection of its own, at most [`ASK_TIMEOUT`]).
pub(super) async fn standing(former: &Former) -> Standing {
    match role_of(&former.info).await.as_deref() {
        Some("master") => Standing::Primary,
        Some(_) => Standing::Replica,
        None => Standing::Silent,
    }
}

/// Whether the server `info` names answers `ROLE` as a primary.
pub(super) async fn is_primary(info: &ConnectionInfo) -> bool {
    role_of(info).await.as_deref() == Some("master")
}

/// The role the server `info` names answers `ROLE` with (a connection of its own, at most
/// [`ASK_TIMEOUT`]); `None` when it does not answer.
async fn role_of(info: &ConnectionInfo) -> Option<String> {
    let ask = async {
        let client = Client::open(info.clone())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("ROLE").query_async::<Value>(&mut conn).await
    };
    let role = tokio::time::timeout(ASK_TIMEOUT, ask).await.ok()?.ok()?;
    role_name(&role).map(str::to_owned)
}

/// `info` (credentials, TLS) for the server at `host:port`.
pub(super) fn at(info: &ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
    let addr = match info.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    info.clone().set_addr(addr)
}

/// How many replicas the primary behind `conn` has connected (`ROLE`: `["master", offset,
/// [[ip, port, offset], …]]`); `None` when it does not answer as a primary.
pub(super) async fn connected_replicas<C: ConnectionLike>(conn: &mut C) -> Option<u32> {
    let role: Value = redis::cmd("ROLE").query_async(conn).await.ok()?;
    if role_name(&role) != Some("master") {
        return None;
    }
    match &role {
        Value::Array(parts) => match parts.get(2) {
            Some(Value::Array(replicas)) => Some(replicas.len() as u32),
            _ => Some(0),
        },
        _ => None,
    }
}

/// The first element of a `ROLE` reply (`master`, `slave`, `sentinel`).
fn role_name(role: &Value) -> Option<&str> {
    match role {
        Value::Array(parts) => match parts.first() {
            Some(Value::BulkString(name)) => std::str::from_utf8(name).ok(),
            Some(Value::SimpleString(name)) => Some(name.as_str()),
            _ => None,
        },
        _ => None,
    }
}

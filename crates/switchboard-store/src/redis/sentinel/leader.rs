//! The replica a failover's leading sentinel has promoted, before the sentinels name it.
//!
//! During a failover the sentinel that leads it answers `SENTINEL GET-MASTER-ADDR-BY-NAME` with
//! the promoted replica as soon as that replica has taken the primary role (the failover's
//! `reconf-slaves` state), while its `SENTINEL MASTER` entry still names the old primary until
//! the failover ends (`+switch-master`). `redis`'s sentinel client reads the latter (`SENTINEL
//! MASTERS`), and the old primary answers `ROLE` as a primary until it is converted, so a node
//! following that client wrote to the old primary about 1.1 s longer than needed (measured on a
//! `SENTINEL FAILOVER` with 2 replicas: promoted at 1.05 s, `MASTERS` changed at 2.15 s), its
//! writes that wait for replicas failing meanwhile. Only a sentinel whose entry carries the
//! `failover_in_progress` flag and names two different addresses is taken: a sentinel that merely
//! lags names the old primary in both, and the old primary is never followed back from here.

use std::time::Duration;

use redis::{Client, Value};

use crate::redis::topology::RedisTopology;

/// How long one sentinel may take to answer.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);

/// The address (`host`, `port`) of the replica a failover in progress has promoted, if a
/// sentinel leading one says so (the sentinels asked concurrently).
pub(super) async fn promoted(topology: &RedisTopology) -> Option<(String, u16)> {
    let clients = topology.sentinel_clients().ok()?;
    let asks = clients
        .into_iter()
        .map(|client| ask(client, topology.master_name.clone()));
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .next()
}

/// One sentinel: `SENTINEL MASTER` and `SENTINEL GET-MASTER-ADDR-BY-NAME` in one pipeline.
async fn ask(client: Client, name: String) -> Option<(String, u16)> {
    let query = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::pipe()
            .cmd("SENTINEL")
            .arg("MASTER")
            .arg(&name)
            .cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&name)
            .query_async::<(Value, Option<(String, u16)>)>(&mut conn)
            .await
    };
    let (entry, named) = tokio::time::timeout(ASK_TIMEOUT, query).await.ok()?.ok()?;
    let named = named?;
    let field = |wanted: &str| field_of(&entry, wanted);
    let failing_over = field("flags")?
        .split(',')
        .any(|f| f == "failover_in_progress");
    let entry_port: u16 = field("port")?.parse().ok()?;
    let differs = field("ip")? != named.0 || entry_port != named.1;
    (failing_over && differs).then_some(named)
}

/// A field of a `SENTINEL MASTER` reply (a flat array of names and values in RESP2, a map in
/// RESP3).
fn field_of(entry: &Value, wanted: &str) -> Option<String> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match entry {
        Value::Array(items) => items
            .chunks(2)
            .find(|pair| pair.first().and_then(text).as_deref() == Some(wanted))
            .and_then(|pair| pair.get(1).and_then(text)),
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some(wanted))
            .and_then(|(_, v)| text(v)),
        _ => None,
    }
}

//! An event append sent again after its first run landed: the event must be logged once.
//!
//! The chaos suite's `primary-kill` on Redis Cluster with `min_replicas_acked = 1` once saw a
//! `notify` message arrive twice under two event ids. An append is a pipeline of the append
//! script and `WAIT`; when its connection drops after the script ran (a primary killed while its
//! client waits in `WAIT`), the cluster client counts the request as never answered and sends it
//! again (`RetryMethod::Reconnect` for a dropped connection, in redis 1.8.1's
//! `cluster_handling/async_connection/request.rs`), so the script ran twice. Here the drop is
//! made deterministic: each primary has no replica, so `WAIT 1` blocks until its timeout, and the
//! test kills the waiting client with `CLIENT KILL` while it blocks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_store::redis::RedisTopology;
use switchboard_store::*;
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_cluster::{RedisCluster, RedisClusterOptions};
use switchboard_tests::redis_process::*;

use crate::harness::*;

/// How long `WAIT` blocks (no replica ever confirms): the window in which the client is killed.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);

/// Kills the first client of the Redis at `port` found blocked in `WAIT` (polling `CLIENT LIST`
/// for at most 5 s); panics when none shows up.
fn kill_the_waiting_client(cluster: &RedisCluster, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let list: String = cluster.query_port(port, &["CLIENT", "LIST"]).unwrap();
        let waiting = list.lines().find(|l| l.contains(" cmd=wait "));
        if let Some(id) = waiting.and_then(|l| l.strip_prefix("id=")) {
            let id = id.split_whitespace().next().unwrap();
            let _: i64 = cluster
                .query_port(port, &["CLIENT", "KILL", "ID", id])
                .unwrap();
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no client blocked in WAIT on :{port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_sent_again_after_its_connection_dropped_is_logged_once() {
    let tools = [
        ("redis-server", redis_server_binary().is_some()),
        ("redis-cli", redis_cli_binary().is_some()),
    ];
    if !available_or_skip(
        "an_append_sent_again_after_its_connection_dropped_is_logged_once",
        &tools,
    ) {
        return;
    }
    let cluster = Arc::new(RedisCluster::start_with(RedisClusterOptions {
        replicas_per_primary: 0,
        ..RedisClusterOptions::default()
    }));
    let topology = RedisTopology::cluster(&cluster.seed_urls());
    let plain = StoreConfig {
        key_prefix: "sbr".into(),
        ..StoreConfig::default_for("a")
    };
    // The session is made without waiting for replicas (there are none); only the append waits.
    let setup: Arc<dyn Store> = RedisStore::open(&topology, plain.clone()).await.unwrap();
    let id = new_session(&setup).await;
    let s = stream();
    begin_ok(&setup, &id, Some(&inflight("1", &s, "a", "a/1"))).await;
    // The shard knows the append script from then on: the killed attempt runs it.
    assert!(setup
        .append(&id, &s, "before", false)
        .await
        .unwrap()
        .is_stored());
    let durable = StoreConfig {
        min_replicas_acked: 1,
        replicas_ack_timeout: ACK_TIMEOUT,
        ..plain
    };
    let a: Arc<dyn Store> = RedisStore::open(&topology, durable).await.unwrap();
    let port = cluster.primary_serving(&format!("sbr:{{{id}}}:s"));
    let killer = {
        let cluster = Arc::clone(&cluster);
        tokio::task::spawn_blocking(move || kill_the_waiting_client(&cluster, port))
    };
    // Every attempt ends unconfirmed (no replica): the store says so, whatever it stored.
    let appended = a.append(&id, &s, "once", false).await;
    killer.await.unwrap();
    assert!(
        matches!(appended, Err(StoreError::NotReplicated { .. })),
        "{appended:?}"
    );
    let waits = cluster.commandstats().get("wait").copied().unwrap_or(0);
    assert!(
        waits >= 2,
        "the cluster client sent the append again ({waits} WAITs)"
    );
    let logged = match a.replay(&id, &s, "0-0", 10).await.unwrap() {
        Replay::Events(events) => events,
        other => panic!("the stream's log is gone: {other:?}"),
    };
    let data: Vec<&str> = logged.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(
        data,
        ["before", "once"],
        "the event is logged once: {logged:?}"
    );
}

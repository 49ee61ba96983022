//! The Redis cost of the hot path, counted with `INFO commandstats` on a private Redis
//! (issue 4: "Redis round trips per POST on the hot path ≤ 1"), and on a private Redis Cluster
//! summed over its primaries (issue 14: the same bound in every mode).
//!
//! Background work is slowed to minutes so that every command counted comes from the requests.

use serde_json::json;
use std::time::Duration;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::eventually::eventually;

/// Round trips the node made: every command it sends is a script call (`EVALSHA`, or `EVAL` and
/// `SCRIPT LOAD` after a script cache miss) or a `MULTI`/`EXEC` transaction (one `EXEC` each);
/// `INFO commandstats` also counts the commands run inside scripts and transactions, so those are
/// not summed. Returns (round trips, commands outside scripts that the node should never send
/// directly).
fn round_trips(cluster: &Cluster) -> (u64, Vec<String>) {
    let mut trips = 0;
    let mut direct = Vec::new();
    for (name, calls) in cluster.backend().commandstats() {
        match name.as_str() {
            "evalsha" | "eval" | "script|load" | "exec" => trips += calls,
            "info" | "config|resetstat" | "multi" => {}
            "get" | "set" | "zadd" | "zrangebyscore" | "zcard" | "xadd" | "xrange" | "publish"
            | "subscribe" | "ping" | "spublish" | "ssubscribe" => {
                direct.push(format!("{name}={calls}"));
            }
            _ => {}
        }
    }
    (trips, direct)
}

/// How many times Redis ran `command` (inside scripts too) since the last `CONFIG RESETSTAT`,
/// summed over the shards.
fn calls_of(cluster: &Cluster, command: &str) -> u64 {
    cluster
        .backend()
        .commandstats()
        .get(command)
        .copied()
        .unwrap_or(0)
}

/// Waits until no more scripts arrive (a request's `finish` runs just after its answer is sent),
/// then returns [`round_trips`].
async fn settled(cluster: &Cluster) -> (u64, Vec<String>) {
    let mut last = None;
    eventually("Redis traffic to settle", Duration::from_secs(10), || {
        let now = round_trips(cluster).0;
        let done = last == Some(now);
        last = Some(now);
        async move { done.then_some(()) }
    })
    .await;
    round_trips(cluster)
}

fn quiet_cluster(kind: RedisKind) -> Cluster {
    quiet_cluster_with(kind, 1_800_000, 300_000)
}

/// Background work slowed to minutes (the touch of busy sessions to `touch_ms`, which must stay
/// under `session.idle_ttl`).
fn quiet_cluster_with(kind: RedisKind, idle_ttl_ms: u64, touch_ms: u64) -> Cluster {
    Cluster::start(1, quiet_options(kind, idle_ttl_ms, touch_ms))
}

fn quiet_options(kind: RedisKind, idle_ttl_ms: u64, touch_ms: u64) -> ClusterOptions {
    ClusterOptions::new()
        .redis(kind)
        .set("cluster.heartbeat_interval", "300s")
        .set("cluster.node_ttl", "600s")
        .set("cluster.reaper_interval", "300s")
        // The bus's self-check (a probe and two mailbox reads per second) is not a call's.
        .set("bus.check_interval", "300s")
        .set("session.idle_ttl", format!("{idle_ttl_ms}ms"))
        .set("session.touch_interval", format!("{touch_ms}ms"))
        // Every answer as plain JSON, even on a loaded machine.
        .set("http.sse_after", "30s")
}

/// A client with a session on node 0 that has made one `echo` call, and Redis's statistics reset
/// once that call's traffic has settled. The warm-up loads the scripts into Redis (NOSCRIPT,
/// `SCRIPT LOAD`, retry) and the session's record into the node's cache.
async fn warmed_up(cluster: &Cluster) -> (McpClient, String) {
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    client
        .call_tool(&url, 1, "echo", json!({"text": "warm"}))
        .await
        .json()
        .await;
    settled(cluster).await;
    cluster.backend().reset_stats();
    (client, url)
}

#[tokio::test]
async fn a_json_answered_call_costs_one_round_trip() {
    json_answered_calls(RedisKind::Standalone).await;
}

/// The same on Redis Cluster, counted over every shard: the session's keys share one slot, so
/// its admission is still one transaction on one primary.
#[tokio::test]
async fn a_json_answered_call_costs_one_round_trip_on_redis_cluster() {
    json_answered_calls(RedisKind::Cluster).await;
}

async fn json_answered_calls(kind: RedisKind) {
    let cluster = quiet_cluster(kind);
    let (client, url) = warmed_up(&cluster).await;
    let n = 50u64;
    for i in 0..n {
        let reply = client
            .call_tool(&url, i + 100, "echo", json!({"text": "x"}))
            .await;
        assert!(reply.is_json(), "echo should be answered as plain JSON");
        let body = reply.json().await;
        assert_eq!(body["result"]["content"][0]["text"], "x");
    }
    // One round trip before the upstream (the admission checks) and nothing after: a request
    // answered at once is never registered in flight, so there is nothing to finish.
    let (trips, direct) = settled(&cluster).await;
    assert_eq!(trips, n, "round trips for {n} echo calls");
    // With the record cached, the admission is a transaction of plain reads, not a Lua script
    // (the script cost Redis ~10 µs of Lua per call; BENCHMARKS.md §4).
    assert_eq!(calls_of(&cluster, "exec"), n, "admission transactions");
    assert_eq!(calls_of(&cluster, "evalsha"), 0, "scripts on the hot path");
    // The record is cached on the node and only its version is checked: never read whole.
    assert_eq!(calls_of(&cluster, "hgetall"), 0, "records read whole");
    assert!(
        direct.is_empty(),
        "commands sent outside scripts: {direct:?}"
    );
}

/// A session used less often than once per 1/64 of its idle TTL is due a touch at every call:
/// the admission then runs as the script, which touches in the same round trip (not the
/// transaction plus a separate touch).
#[tokio::test]
async fn a_sparsely_used_session_costs_one_round_trip_per_call() {
    sparse_calls(RedisKind::Standalone).await;
}

#[tokio::test]
async fn a_sparsely_used_session_costs_one_round_trip_per_call_on_redis_cluster() {
    sparse_calls(RedisKind::Cluster).await;
}

async fn sparse_calls(kind: RedisKind) {
    // Idle TTL 6.4 s: a touch falls due 100 ms after the last one; calls come every 250 ms.
    let cluster = quiet_cluster_with(kind, 6_400, 6_000);
    let (client, url) = warmed_up(&cluster).await;
    let n = 8u64;
    // Call 0 is one more warm-up: the first admission by the script (the handshake and the
    // warm-up's call need none), which loads it into Redis.
    for i in 0..=n {
        // Pacing is the thing under test (a touch falls due between calls): no event to wait for.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let reply = client
            .call_tool(&url, i + 100, "echo", json!({"text": "x"}))
            .await;
        let body = reply.json().await;
        assert_eq!(body["result"]["content"][0]["text"], "x");
        if i == 0 {
            settled(&cluster).await;
            cluster.backend().reset_stats();
        }
    }
    let (trips, direct) = settled(&cluster).await;
    assert_eq!(trips, n, "round trips for {n} sparse echo calls");
    assert!(calls_of(&cluster, "pexpire") >= 7 * n, "every call touched");
    assert!(
        direct.is_empty(),
        "commands sent outside scripts: {direct:?}"
    );
}

#[tokio::test]
async fn a_notification_costs_one_round_trip() {
    notifications(RedisKind::Standalone).await;
}

#[tokio::test]
async fn a_notification_costs_one_round_trip_on_redis_cluster() {
    notifications(RedisKind::Cluster).await;
}

async fn notifications(kind: RedisKind) {
    let cluster = quiet_cluster(kind);
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    cluster.backend().reset_stats();
    let n = 20u64;
    for _ in 0..n {
        let reply = client
            .post(
                &url,
                &json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
            )
            .await;
        assert_eq!(reply.status.as_u16(), 202);
    }
    let (trips, direct) = settled(&cluster).await;
    assert_eq!(trips, n, "round trips for {n} notifications");
    assert!(
        direct.is_empty(),
        "commands sent outside scripts: {direct:?}"
    );
}

/// A session's handshake, `initialize` then `notifications/initialized`: on standalone Redis one
/// script each (the reservation in `sb:sessions` and the record together; the load and the
/// update together, on the record cached at creation, so it is never read whole).
#[tokio::test]
async fn a_handshake_costs_two_round_trips() {
    handshakes(RedisKind::Standalone).await;
}

/// On Redis Cluster the index has a slot of its own: `initialize` is the reservation and then
/// the record's transaction, `notifications/initialized` still one script.
#[tokio::test]
async fn a_handshake_costs_three_round_trips_on_redis_cluster() {
    handshakes(RedisKind::Cluster).await;
}

async fn handshakes(kind: RedisKind) {
    let cluster = quiet_cluster(kind);
    let url = cluster.url(0);
    // The first handshake loads the scripts (NOSCRIPT, `SCRIPT LOAD`, retry).
    McpClient::new().initialize(&url, "2025-11-25").await;
    settled(&cluster).await;
    cluster.backend().reset_stats();
    let n = 10u64;
    for _ in 0..n {
        McpClient::new().initialize(&url, "2025-11-25").await;
    }
    let (trips, direct) = settled(&cluster).await;
    let (scripts, transactions) = match kind {
        RedisKind::Cluster => (2 * n, n),
        _ => (2 * n, 0),
    };
    assert_eq!(
        trips,
        scripts + transactions,
        "round trips for {n} handshakes"
    );
    assert_eq!(calls_of(&cluster, "evalsha"), scripts, "handshake scripts");
    assert_eq!(
        calls_of(&cluster, "exec"),
        transactions,
        "record transactions"
    );
    assert_eq!(calls_of(&cluster, "zadd"), n, "index entries");
    assert_eq!(
        calls_of(&cluster, "hset"),
        2 * n,
        "records written, then marked ready"
    );
    assert_eq!(calls_of(&cluster, "hgetall"), 0, "records read whole");
    // `zadd` and `zcard` are the reservation's, inside its script.
    let direct: Vec<_> = direct
        .into_iter()
        .filter(|c| !c.starts_with("zadd=") && !c.starts_with("zcard="))
        .collect();
    assert!(
        direct.is_empty(),
        "commands sent outside scripts: {direct:?}"
    );
}

/// A node with a per-principal and a per-tool limit on `echo`, both far above the calls made.
fn rate_limited_cluster(kind: RedisKind) -> Cluster {
    let options = quiet_options(kind, 1_800_000, 300_000)
        .set("rate_limits.principal", "{ rate = 10000, burst = 10000 }")
        .set("rate_limits.tools.echo", "{ rate = 10000, burst = 10000 }");
    Cluster::start(1, options)
}

async fn echo_calls(cluster: &Cluster, n: u64) {
    let (client, url) = warmed_up(cluster).await;
    for i in 0..n {
        let reply = client
            .call_tool(&url, i + 100, "echo", json!({"text": "x"}))
            .await;
        let body = reply.json().await;
        assert_eq!(body["result"]["content"][0]["text"], "x", "{body}");
    }
}

/// With rate limits configured a call still costs one round trip on standalone Redis: its two
/// limits ride in the admission (the `BEGIN` script gets their keys and arguments), so the
/// admission is one `EVALSHA` instead of the cached-record transaction, and nothing else.
#[tokio::test]
async fn a_rate_limited_call_costs_one_round_trip() {
    let cluster = rate_limited_cluster(RedisKind::Standalone);
    let n = 30u64;
    echo_calls(&cluster, n).await;
    let (trips, direct) = settled(&cluster).await;
    assert_eq!(trips, n, "round trips for {n} rate-limited echo calls");
    assert_eq!(calls_of(&cluster, "evalsha"), n, "admission scripts");
    assert_eq!(calls_of(&cluster, "exec"), 0, "admission transactions");
    inside_rate_scripts(&cluster, n, direct, false);
}

/// The GCRA scripts read (`GET`) and write (`SET … PX`) each limit's state once per call, inside
/// the script (`INFO commandstats` counts those too); nothing else is sent outside scripts. On
/// Redis Cluster (`take_ids`) each call's `RATES` script also looks up its take id (`EXISTS`)
/// and leaves it (`SET … PX`), so a take the cluster client sends again counts once.
fn inside_rate_scripts(cluster: &Cluster, n: u64, direct: Vec<String>, take_ids: bool) {
    let ids = u64::from(take_ids) * n;
    assert_eq!(calls_of(cluster, "get"), 2 * n, "limit states read");
    assert_eq!(calls_of(cluster, "exists"), ids, "take ids looked up");
    assert_eq!(
        calls_of(cluster, "set"),
        2 * n + ids,
        "limit states and take ids written"
    );
    let direct: Vec<String> = direct
        .into_iter()
        .filter(|c| !c.starts_with("get=") && !c.starts_with("set="))
        .collect();
    assert!(
        direct.is_empty(),
        "commands sent outside scripts: {direct:?}"
    );
}

/// On Redis Cluster the rate keys live in other slots than the session's, so the limits cannot
/// ride in its admission: the node sends the admission (the cached-record transaction) and one
/// `RATES` script for the principal's limits (its own and its per-tool ones share the
/// principal's hash tag) at the same time. Counted: 2 commands per call (`exec` + `evalsha`),
/// one sequential round trip (they are not awaited one after the other; `limits::admission`).
#[tokio::test]
async fn a_rate_limited_call_on_redis_cluster_sends_two_commands_at_once() {
    let cluster = rate_limited_cluster(RedisKind::Cluster);
    let n = 30u64;
    echo_calls(&cluster, n).await;
    let (trips, direct) = settled(&cluster).await;
    assert_eq!(trips, 2 * n, "commands for {n} rate-limited echo calls");
    assert_eq!(calls_of(&cluster, "exec"), n, "admission transactions");
    assert_eq!(calls_of(&cluster, "evalsha"), n, "rate scripts");
    inside_rate_scripts(&cluster, n, direct, true);
}

/// `n` 2026-07-28 `tools/call`s of `echo` on node 0 after a warm-up call (which loads the
/// scripts, if any), counted from a reset of Redis's statistics.
async fn stateless_echo_calls(cluster: &Cluster, n: u64) -> (u64, Vec<String>) {
    let url = cluster.url(0);
    let call = |id: u64| {
        let params = json!({"name": "echo", "arguments": {"text": "x"}});
        switchboard_tests::modern::request(id, "tools/call", params, json!({}))
    };
    let warm = switchboard_tests::modern::send(&url, &call(1)).await;
    assert_eq!(warm.status.as_u16(), 200);
    settled(cluster).await;
    cluster.backend().reset_stats();
    for id in 0..n {
        let reply = switchboard_tests::modern::send(&url, &call(id + 100)).await;
        let body = reply.json().await;
        assert_eq!(body["result"]["content"][0]["text"], "x", "{body}");
    }
    settled(cluster).await
}

/// A 2026-07-28 request without any rate limit touches no store (no session, nothing to take).
#[tokio::test]
async fn a_stateless_call_without_limits_costs_no_round_trip() {
    let cluster = quiet_cluster(RedisKind::Standalone);
    let (trips, direct) = stateless_echo_calls(&cluster, 30).await;
    assert_eq!(trips, 0, "round trips for 30 stateless echo calls");
    assert!(direct.is_empty(), "commands sent: {direct:?}");
}

/// With limits it takes them in one round trip: one `RATES` script per call (its principal's
/// and its tool's limits share the principal's tag), reading and writing each limit once.
#[tokio::test]
async fn a_rate_limited_stateless_call_costs_one_round_trip() {
    let cluster = rate_limited_cluster(RedisKind::Standalone);
    let n = 30u64;
    let (trips, direct) = stateless_echo_calls(&cluster, n).await;
    assert_eq!(
        trips, n,
        "round trips for {n} rate-limited stateless echo calls"
    );
    assert_eq!(calls_of(&cluster, "evalsha"), n, "rate scripts");
    inside_rate_scripts(&cluster, n, direct, false);
}

//! Case C38: a Redis whose `maxmemory-policy` may evict keys (every key Switchboard writes has a
//! TTL). Each observation of the case file on real `redis-server`s and node processes: a node
//! refuses such a Redis unless `redis.allow_eviction` accepts it (then it warns, and `/readyz`
//! and `/metrics` say so); the policy is read with `INFO`, so also where `CONFIG` is renamed
//! away, and on every primary of a Redis Cluster; a policy switched at runtime is noticed within
//! `redis.eviction_check_interval`; a heartbeat key Redis evicted is reported as such; under
//! `noeviction` at the memory limit requests get a clean 503.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::eventually::eventually;
use switchboard_tests::node::Node;
use switchboard_tests::redis_backend::{RedisBackend, RedisKind};
use switchboard_tests::redis_server::{Persistence, RedisServer};
use switchboard_tests::temp::TempDir;

/// Bound of every wait.
const T: Duration = Duration::from_secs(20);

/// A `redis-server` started with `args` after the harness's.
fn redis_with(args: &[&str]) -> RedisServer {
    RedisServer::start_with_args(Persistence::None, args)
}

/// `key=value` settings as [`Node::spawn`] takes them.
fn settings(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A node on the standalone `redis`, ready (panics with its log when it is not).
fn ready_node(id: &str, redis: &RedisServer, set: &[(&str, &str)], logs: &TempDir) -> Node {
    let mut node = Node::spawn(id, Some(&redis.url()), &settings(set), logs.path());
    assert!(
        node.wait_ready(),
        "node {id} not ready:\n{}",
        node.log_tail(40)
    );
    node
}

/// Status and body of `GET <path>` on `node`.
async fn get(node: &Node, path: &str) -> (u16, String) {
    let reply = reqwest::get(format!("{}{path}", node.base_url()))
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = reply.status().as_u16();
    (status, reply.text().await.unwrap_or_default())
}

/// The line of `name` (with its labels) in `node`'s `/metrics`.
async fn metric_line(node: &Node, name: &str) -> Option<String> {
    let (_, text) = get(node, "/metrics").await;
    text.lines()
        .find(|l| l.starts_with(name))
        .map(str::to_owned)
}

/// The node's whole log.
fn log_of(node: &Node) -> String {
    node.log_tail(10_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicting_policy_stops_the_node_with_a_message_naming_the_setting() {
    let redis = redis_with(&["--maxmemory-policy", "volatile-ttl"]);
    let logs = TempDir::new("sb-evict");
    let mut node = Node::spawn("a", Some(&redis.url()), &[], logs.path());
    let code = node.wait_exit(T);
    assert!(
        code.is_some_and(|c| c != 0),
        "exits non-zero: {code:?}\n{}",
        log_of(&node)
    );
    let log = log_of(&node);
    for needle in [
        "maxmemory-policy volatile-ttl",
        "`maxmemory-policy noeviction`",
        "redis.allow_eviction = true",
    ] {
        assert!(log.contains(needle), "{needle} in:\n{log}");
    }
    assert!(
        redis.keys_matching("sb:node:*").is_empty(),
        "a refused node wrote no heartbeat"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_opt_in_the_node_starts_warns_and_says_so() {
    let redis = redis_with(&["--maxmemory-policy", "volatile-ttl"]);
    let logs = TempDir::new("sb-evict");
    let node = ready_node("a", &redis, &[("redis.allow_eviction", "true")], &logs);
    let log = log_of(&node);
    assert!(
        log.contains("WARN") && log.contains("EVICTION ALLOWED"),
        "{log}"
    );
    let (status, body) = get(&node, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("warning") && body.contains("maxmemory-policy volatile-ttl"),
        "{body}"
    );
    let gauge = metric_line(&node, "switchboard_redis_evicting").await;
    assert_eq!(
        gauge.as_deref(),
        Some("switchboard_redis_evicting{policy=\"volatile-ttl\"} 1")
    );
}

/// The heartbeat key, evicted by Redis itself (`maxmemory` 1 byte for a moment under
/// `volatile-ttl`), is reported as a probable eviction, not as a lapse of a silent node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_heartbeat_is_reported_as_an_eviction() {
    let redis = redis_with(&["--maxmemory-policy", "volatile-ttl"]);
    let logs = TempDir::new("sb-evict");
    let node = ready_node("a", &redis, &[("redis.allow_eviction", "true")], &logs);
    let counted = || async { metric_line(&node, "switchboard_heartbeats_evicted_total").await };
    assert_eq!(
        counted().await.as_deref(),
        Some("switchboard_heartbeats_evicted_total 0")
    );
    // Each `CONFIG SET` evicts first: under a 1-byte limit every key with a TTL goes. Done again
    // every 40 polls (2 s): a heartbeat caught inside those microseconds fails instead of
    // finding its predecessor gone.
    let polls = std::sync::atomic::AtomicU32::new(0);
    eventually("an eviction reported", T, || async {
        if polls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .is_multiple_of(40)
        {
            for limit in ["1", "0"] {
                let _: () = redis.query(&["CONFIG", "SET", "maxmemory", limit]).unwrap();
            }
        }
        let line = counted().await?;
        (!line.ends_with(" 0")).then_some(())
    })
    .await;
    let log = log_of(&node);
    assert!(
        log.contains("probably evicted by Redis") && log.contains("maxmemory-policy"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_is_read_where_config_is_renamed_away() {
    let redis = redis_with(&["--rename-command", "CONFIG", ""]);
    assert!(
        redis
            .query::<Vec<String>>(&["CONFIG", "GET", "maxmemory-policy"])
            .is_err(),
        "CONFIG is renamed away"
    );
    let logs = TempDir::new("sb-evict");
    let node = ready_node("a", &redis, &[], &logs);
    assert_eq!(get(&node, "/readyz").await, (200, "ready".to_owned()));
    assert!(
        log_of(&node).contains("maxmemory-policy is noeviction"),
        "{}",
        log_of(&node)
    );
    let gauge = metric_line(&node, "switchboard_redis_evicting").await;
    assert_eq!(
        gauge.as_deref(),
        Some("switchboard_redis_evicting{policy=\"noeviction\"} 0")
    );

    // Where INFO is refused too, the node starts and says it could not check.
    let blind = redis_with(&["--rename-command", "INFO", ""]);
    let unchecked = ready_node("b", &blind, &[], &logs);
    let log = log_of(&unchecked);
    assert!(
        log.contains("could not check Redis's maxmemory-policy"),
        "{log}"
    );
    let (status, body) = get(&unchecked, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("could not be checked"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_on_one_cluster_primary_is_found() {
    let backend = RedisBackend::start(RedisKind::Cluster);
    let RedisBackend::Cluster(cluster) = &backend else {
        unreachable!("a cluster");
    };
    let primary = cluster.primaries()[1];
    let _: () = cluster
        .query_port(
            primary,
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        )
        .unwrap();
    let logs = TempDir::new("sb-evict");
    let to_cluster = backend.node_settings();
    let mut refused = Node::spawn("a", None, &to_cluster, logs.path());
    let code = refused.wait_exit(T);
    let log = log_of(&refused);
    assert!(
        code.is_some_and(|c| c != 0),
        "exits non-zero: {code:?}\n{log}"
    );
    assert!(
        log.contains("maxmemory-policy allkeys-lru") && log.contains(&primary.to_string()),
        "names the primary's policy and port {primary}:\n{log}"
    );
    let mut allowed = to_cluster.clone();
    allowed.push(("redis.allow_eviction".into(), "true".into()));
    let mut node = Node::spawn("b", None, &allowed, logs.path());
    assert!(node.wait_ready(), "{}", node.log_tail(40));
    let (status, body) = get(&node, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(&format!(":{primary} has maxmemory-policy allkeys-lru")),
        "{body}"
    );
}

/// A policy switched at runtime: without the opt-in the node goes not ready (503 with the
/// reason) and logs at error level; with it, it stays ready and says so; back to `noeviction`,
/// both are plainly ready again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_switched_at_runtime_is_noticed_within_the_interval() {
    let redis = redis_with(&[]);
    let logs = TempDir::new("sb-evict");
    let fast = ("redis.eviction_check_interval", "300ms");
    let mut strict = ready_node("a", &redis, &[fast], &logs);
    let lenient = ready_node(
        "b",
        &redis,
        &[fast, ("redis.allow_eviction", "true")],
        &logs,
    );
    assert_eq!(get(&strict, "/readyz").await.0, 200);
    let _: () = redis
        .query(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"])
        .unwrap();
    let body = eventually(
        "the strict node goes not ready",
        Duration::from_secs(3),
        || async {
            let (status, body) = get(&strict, "/readyz").await;
            (status == 503).then_some(body)
        },
    )
    .await;
    assert!(
        body.contains("store not ready") && body.contains("maxmemory-policy volatile-lru"),
        "{body}"
    );
    let log = log_of(&strict);
    assert!(
        log.contains("ERROR") && log.contains("maxmemory-policy is now volatile-lru"),
        "{log}"
    );
    assert_eq!(
        metric_line(&strict, "switchboard_redis_evicting")
            .await
            .as_deref(),
        Some("switchboard_redis_evicting{policy=\"volatile-lru\"} 1")
    );
    // The lenient node re-reads the policy on its own clock (every 300 ms), not when the strict
    // one did: it is asked until it has, within the same bound.
    let (status, body) = eventually(
        "the lenient node stays ready and warns",
        Duration::from_secs(3),
        || async {
            let (status, body) = get(&lenient, "/readyz").await;
            body.contains("volatile-lru").then_some((status, body))
        },
    )
    .await;
    assert!(status == 200, "{status} {body}");
    assert!(!strict.has_exited(), "not ready, not gone");

    let _: () = redis
        .query(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .unwrap();
    for node in [&strict, &lenient] {
        eventually("ready again", Duration::from_secs(3), || async {
            (get(node, "/readyz").await == (200, "ready".to_owned())).then_some(())
        })
        .await;
    }
}

/// Under `noeviction` at the memory limit a request gets 503 with a JSON-RPC error body and
/// `Retry-After`, no node exits, and service resumes within a second once memory is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_memory_limit_under_noeviction_requests_get_a_clean_503() {
    let redis = redis_with(&[]);
    let logs = TempDir::new("sb-evict");
    let mut node = ready_node("a", &redis, &[], &logs);
    let mut client = McpClient::new();
    client.initialize(&node.url(), "2025-11-25").await;
    let echo = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}})
    };
    let _: () = redis.query(&["CONFIG", "SET", "maxmemory", "1"]).unwrap();
    let refused = client.post(&node.url(), &echo(2)).await;
    assert_eq!(refused.status.as_u16(), 503);
    assert!(refused.header("retry-after").is_some(), "Retry-After");
    let body = refused.json().await;
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert!(body["error"]["code"].is_i64(), "a JSON-RPC error: {body}");
    let _: () = redis.query(&["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    let next = std::sync::atomic::AtomicU64::new(3);
    eventually("served again", Duration::from_secs(1), || async {
        let id = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let reply = client.post(&node.url(), &echo(id)).await;
        (reply.status.as_u16() == 200).then_some(())
    })
    .await;
    assert!(!node.has_exited(), "no node exits");
}

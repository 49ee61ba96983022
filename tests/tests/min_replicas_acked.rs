//! `redis.min_replicas_acked` on a Redis that has fewer replicas than it asks for (the review of
//! issue 14): the node says it is not ready and why, a write that cannot be confirmed fails with
//! 503 without leaving a session behind, and a `WAIT` in progress does not hold up the node's
//! other commands (before, it ran on the one shared connection: `/readyz` waited behind it and
//! answered 503 "store unreachable" for the whole `replicas_ack_timeout`).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;

/// `GET /readyz`: status, body, and how long it took.
async fn readyz(url: &str) -> (StatusCode, String, Duration) {
    let base = url.trim_end_matches("/mcp");
    let started = Instant::now();
    let r = reqwest::get(format!("{base}/readyz"))
        .await
        .expect("GET /readyz");
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    (status, body, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_replicas_is_not_ready_and_a_waiting_write_stalls_nothing_else() {
    // A standalone Redis has no replica; each unconfirmed write waits the full 4 s.
    let options = ClusterOptions::new()
        .set("redis.min_replicas_acked", 1)
        .set("redis.replicas_ack_timeout", "4s");
    let cluster = Cluster::start(1, options);
    let url = cluster.url(0);
    let baseline = cluster.baseline_keys().await;

    let (status, body, _) = readyz(&url).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains("redis.min_replicas_acked"),
        "/readyz names the setting it cannot meet: {body}"
    );

    let init = {
        let url = url.clone();
        tokio::spawn(async move {
            let client = McpClient::new();
            let started = Instant::now();
            let reply = client
                .post(&url, &msg::init("2025-11-25", serde_json::json!({})))
                .await;
            (reply, started.elapsed())
        })
    };
    // While the initialize waits for its `WAIT`, the node's other commands go through at once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let (_, body, took) = readyz(&url).await;
        assert!(
            body.contains("redis.min_replicas_acked"),
            "/readyz answered from the store, not a timeout: {body}"
        );
        slowest = slowest.max(took);
    }
    assert!(
        slowest < Duration::from_secs(1),
        "/readyz took {slowest:?} while a write waited for replicas"
    );

    let (reply, took) = init.await.expect("the initialize task");
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "after {took:?}"
    );
    assert!(
        reply.header("retry-after").is_some(),
        "503 without Retry-After"
    );
    assert!(
        took >= Duration::from_secs(3),
        "the initialize waited for its WAIT: {took:?}"
    );
    let body = reply.json().await;
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert!(body["error"]["code"].is_i64(), "{body}");
    assert_eq!(
        cluster.keys_beyond(&baseline),
        Vec::<String>::new(),
        "a session whose creation was not confirmed is removed (the client never got its id)"
    );
}

/// The same readiness rule in Redis Cluster: 3 primaries without replicas, and
/// `min_replicas_acked = 1`, are reachable but not ready, and `/readyz` says which setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_replicas_is_not_ready() {
    let options = ClusterOptions::new()
        .redis(switchboard_tests::redis_backend::RedisKind::Cluster)
        .redis_replicas(0)
        .set("redis.min_replicas_acked", 1);
    let cluster = Cluster::start(1, options);
    let (status, body, _) = readyz(&cluster.url(0)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains("a slot range has 0 replicas; redis.min_replicas_acked needs 1"),
        "/readyz names the shortfall: {body}"
    );
}

//! A request admitted just before Redis goes away (RELIABILITY.md, finding 1): its answer outlives
//! `http.sse_after`, so the node must register the request's stream before it answers with SSE.
//! When that registration fails the client gets 503 with `Retry-After` and a JSON-RPC body, never
//! a stream whose event ids (the priming event's `<stream>_0-0`) no node could resume later.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually_sync;
use switchboard_tests::redis_backend::RedisBackend;
use switchboard_tests::redis_process::commandstats_of;

/// Commands Redis ran, bar the ones this test and the node's liveness probe send themselves.
fn commands_run(stats: &BTreeMap<String, u64>) -> u64 {
    stats
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "info" | "ping"))
        .map(|(_, calls)| calls)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_cannot_be_registered_is_refused_with_503() {
    // Nothing but this test's requests reaches Redis in the window the test watches.
    let options = ClusterOptions::new()
        .set("http.sse_after", "1500ms")
        .set("cluster.heartbeat_interval", "60s")
        .set("cluster.node_ttl", "180s")
        .set("session.touch_interval", "60s")
        .set("cluster.reaper_interval", "60s");
    let mut cluster = Cluster::start(1, options);
    let url = cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let port = cluster.redis().port();
    let before = commands_run(&commandstats_of(port, None));

    // No progress token: nothing is sent before the result, 4 s later.
    let call = {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            client
                .call_tool(&url, 2, "countdown", json!({"n": 1, "interval_ms": 4000}))
                .await
        })
    };
    // The admission is the call's one store round trip before `sse_after` passes.
    eventually_sync("the call admitted in Redis", Duration::from_secs(1), || {
        (commands_run(&commandstats_of(port, None)) > before).then_some(())
    });
    let RedisBackend::Standalone(redis) = cluster.backend_mut() else {
        unreachable!("Cluster::start runs a standalone Redis")
    };
    redis.kill9();

    let reply = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .expect("the POST answered within 15 s")
        .expect("the POST task");
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "a stream that could not be registered must not be opened"
    );
    assert!(
        reply.header("retry-after").is_some(),
        "503 without Retry-After"
    );
    assert!(reply.is_json(), "503 without a JSON-RPC body");
    let body = reply.json().await;
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert!(body["error"]["code"].is_i64(), "{body}");
}

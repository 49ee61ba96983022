//! Graceful drain on SIGTERM: running requests finish and answer on their streams, standalone
//! streams close at once (clients reopen them elsewhere), and the node exits 0.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};

#[tokio::test]
async fn sigterm_lets_a_running_countdown_finish_and_closes_the_get_stream() {
    let mut cluster = Cluster::start(2, ClusterOptions::new());
    let (a, b) = (cluster.url(0), cluster.url(1));
    let mut client = McpClient::new();
    client.initialize(&a, "2025-11-25").await;

    let mut standalone = client.get_stream(&a, None).await.sse();
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "countdown", "arguments": {"n": 4, "interval_ms": 300}, "_meta": {"progressToken": "d"}}});
    let reply = client.post(&a, &call).await;
    assert!(reply.is_sse(), "countdown streams");
    let mut stream = reply.sse();
    let first = stream
        .until_method("notifications/progress", Duration::from_secs(5))
        .await;
    assert!(first.matched.is_some(), "first progress before the drain");

    cluster.node(0).terminate();

    let rest = stream
        .until_response(&json!(7), Duration::from_secs(10))
        .await;
    let response = rest
        .matched
        .expect("the countdown answers on its stream during the drain");
    assert_eq!(
        response["result"]["content"][0]["text"],
        "countdown finished"
    );
    let progress = 1 + rest
        .messages
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 4, "every progress notification arrives");
    assert!(
        standalone.until_end(Duration::from_secs(5)).await.is_ok(),
        "the GET stream closes at once"
    );

    assert_eq!(
        cluster.node_mut(0).wait_exit(Duration::from_secs(10)),
        Some(0),
        "the node exits 0 after draining"
    );
    // A drained node tells the cluster at once (no wait for cluster.node_ttl): its liveness key is
    // gone, so what it owned moves to other nodes on the next request.
    let liveness = format!("sb:node:{}.*", cluster.node(0).id());
    assert!(
        cluster.redis().keys_matching(&liveness).is_empty(),
        "liveness key {liveness} removed"
    );
    // The session lives on: the other node serves it.
    let listed = client
        .post(
            &b,
            &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
        )
        .await;
    assert_eq!(listed.status.as_u16(), 200);
}

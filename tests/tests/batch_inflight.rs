//! Requests inside a 2025-03-26 batch are registered in flight like single requests: a batch
//! element reusing the id of a running request is refused (instead of taking over its
//! cancellation), and the running request can still be cancelled from another node.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cannot_reuse_a_running_id_and_cancellation_still_works() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let (a, b) = (cluster.url(0), cluster.url(1));
    let mut client = McpClient::new();
    client.initialize(&a, "2025-03-26").await;
    let countdown = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "countdown", "arguments": {"n": 100, "interval_ms": 100}, "_meta": {"progressToken": "c"}}});
    let mut running = client.post(&a, &countdown).await.sse();
    assert!(running
        .until_method("notifications/progress", Duration::from_secs(5))
        .await
        .matched
        .is_some());

    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    ]);
    let answers = client.post(&a, &batch).await.json().await;
    let answers = answers.as_array().expect("a JSON array of responses");
    assert_eq!(answers.len(), 3, "{answers:?}");
    let by_id = |id: i64| {
        answers
            .iter()
            .filter(move |r| r["id"] == id)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        by_id(1)[0]["error"]["code"],
        -32600,
        "id 1 is in flight: {answers:?}"
    );
    let twos = by_id(2);
    assert_eq!(
        twos.iter().filter(|r| r.get("result").is_some()).count(),
        1,
        "one id 2 runs: {answers:?}"
    );
    assert_eq!(
        twos.iter().filter(|r| r["error"]["code"] == -32600).count(),
        1,
        "its duplicate is refused"
    );

    let started = Instant::now();
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    assert_eq!(client.post(&b, &cancel).await.status.as_u16(), 202);
    let end = running
        .until_response(&json!(1), Duration::from_secs(5))
        .await;
    assert!(
        end.matched.is_some(),
        "the countdown ends after its cancellation"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cancelled well before its 10 s run"
    );
}

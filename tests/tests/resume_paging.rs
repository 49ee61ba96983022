//! A stream resumed on another node with far more logged events than one replay page: every
//! event arrives once, in order (the node pages through the log instead of loading it whole).

use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_standalone_log_replays_completely_across_pages() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let (a, b) = (cluster.url(0), cluster.url(1));
    let mut client = McpClient::new();
    client.initialize(&a, "2025-11-25").await;
    // 300 log messages (and one resources/updated) on the standalone stream, nobody listening.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notify", "arguments": {"count": 300, "interval_ms": 0}}});
    let answer = client
        .post(&a, &call)
        .await
        .answer(json!(1), Duration::from_secs(30))
        .await;
    assert!(
        answer.response.get("result").is_some(),
        "{}",
        answer.response
    );

    let mut stream = client.get_stream(&b, Some("get_0-0")).await.sse();
    let mut seqs = Vec::new();
    let mut updated = 0;
    while seqs.len() < 300 || updated == 0 {
        let Some((_, msg)) = stream.next_message(Duration::from_secs(10)).await else {
            panic!("stream ended after {} of 300 messages", seqs.len());
        };
        match msg["method"].as_str() {
            Some("notifications/message") => {
                seqs.push(msg["params"]["data"]["seq"].as_u64().unwrap())
            }
            Some("notifications/resources/updated") => updated += 1,
            other => panic!("unexpected {other:?}: {msg}"),
        }
    }
    let first = seqs[0];
    let expected: Vec<u64> = (first..first + 300).collect();
    assert_eq!(seqs, expected, "every message once, in order");
    assert_eq!(updated, 1);
}

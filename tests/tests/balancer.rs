//! The real load balancer of the peer tests (Debian's HAProxy, `tests/src/balancer.rs`) in front of
//! three nodes: consecutive requests on ONE keep-alive client connection land on different nodes
//! (round robin per request, counted by each node's `/metrics`), and an SSE answer streams
//! through unbuffered (progress events arrive spaced out, before the final response).
//!
//! Needs `haproxy` (Debian package `haproxy`); without it the test prints that it skipped, or
//! fails when `CI` is set.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::metrics::counter;
use switchboard_tests::msg;
use switchboard_tests::peers::available_or_skip;

const CREATED: &str = "switchboard_sessions_created_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_spreads_each_request_round_robin_and_streams_sse() {
    let present = haproxy_binary().is_some();
    if !available_or_skip("balancer", &[("haproxy", present)]) {
        return;
    }
    let cluster = Cluster::start(3, ClusterOptions::new());
    let ports: Vec<u16> = (0..3).map(|i| cluster.node(i).port()).collect();
    let lb = Balancer::start(&ports);

    // Six initializes on one pooled client: two per node, whatever connection they share.
    let pooled = McpClient::new();
    let mut sessions = Vec::new();
    for _ in 0..6 {
        let mut client = pooled.with_session(None, None);
        client
            .initialize_with(&lb.url(), "2025-11-25", json!({}))
            .await;
        sessions.push(client);
    }
    for i in 0..3 {
        let node = cluster.node(i);
        let created = counter(&node.base_url(), CREATED).await;
        // Each initialize is followed by its notifications/initialized, which creates nothing.
        assert_eq!(
            created,
            2,
            "node {} created {created} of 6 sessions; round robin gives 2 each\nhaproxy log:\n{}",
            node.id(),
            lb.log()
        );
    }

    // SSE through HAProxy: countdown progress arrives as it happens, not in one burst at the end.
    let client = &sessions[0];
    let call = msg::call_with_progress(7, "countdown", json!({"n": 3, "interval_ms": 400}), "lb");
    let reply = client.post(&lb.url(), &call).await;
    let answer = reply.answer(json!(7), Duration::from_secs(15)).await;
    assert!(
        answer.sse,
        "countdown should answer as SSE: {:?}",
        answer.response
    );
    let progress: Vec<_> = answer
        .events
        .iter()
        .filter(|e| {
            e.json()
                .is_some_and(|m| m["method"] == "notifications/progress")
        })
        .map(|e| e.at)
        .collect();
    assert_eq!(progress.len(), 3, "progress events: {:?}", answer.events);
    let spread = progress[2].duration_since(progress[0]);
    assert!(
        spread >= Duration::from_millis(600),
        "progress events arrived {spread:?} apart in total: HAProxy buffered the stream"
    );
}

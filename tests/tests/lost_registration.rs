//! A running request whose registration Redis lost (a graceful Sentinel failover, or any
//! failover with `redis.min_replicas_acked = 0`, can drop the old primary's last writes: the
//! stream's holder, the running and in-flight entries) still reaches its client: the node that
//! holds the request's stream registers it again and hands it its events. Before, the client got
//! no further event and no answer, and waited for its own timeout (seen in the graceful-failover
//! probes of `cases_bus_sentinel.rs`). The lost writes are removed by hand here, which is what
//! the promoted replica lacks.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_registration_was_lost_still_reaches_its_client() {
    let cluster = Cluster::start(1, ClusterOptions::new());
    let url = cluster.url(0);
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&url, "2025-11-25").await;
    let call = msg::call_with_progress(1, "countdown", json!({"n": 8, "interval_ms": 150}), "lost");
    let mut stream = client.post(&url, &call).await.sse();
    let first = stream.until_method("notifications/progress", T).await;
    let event = first
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("event id");
    let (stream_id, _) = event.split_once('_').expect("<stream>_<position>");
    for (key, field) in [("st", stream_id), ("run", stream_id), ("inf", "1")] {
        let removed: i64 = cluster
            .redis()
            .query(&["HDEL", &format!("sb:{{{sid}}}:{key}"), field])
            .unwrap();
        assert_eq!(removed, 1, "sb:{{{sid}}}:{key} {field}");
    }
    // The next event comes, and with it the registration is back.
    let next = stream.until_method("notifications/progress", T).await;
    assert!(
        next.matched.is_some(),
        "no event after the registration was lost"
    );
    let holder: Option<String> = cluster
        .redis()
        .query(&["HGET", &format!("sb:{{{sid}}}:st"), stream_id])
        .unwrap();
    assert!(
        holder.as_deref().is_some_and(|h| !h.is_empty()),
        "the stream's holder is registered again: {holder:?}"
    );
    let running: Option<String> = cluster
        .redis()
        .query(&["HGET", &format!("sb:{{{sid}}}:run"), stream_id])
        .unwrap();
    assert!(
        running.is_some(),
        "the request is running again in the store"
    );
    let done = stream.until_response(&json!(1), T).await;
    let response = done.matched.clone().unwrap_or_else(|| {
        panic!(
            "no answer after the registration was lost: {:?}",
            done.events
        )
    });
    assert!(
        msg::result_text(&response).contains("countdown finished"),
        "{response}"
    );
    let progress: Vec<f64> = [&first.events, &next.events, &done.events]
        .into_iter()
        .flatten()
        .filter_map(|e| e.json())
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().unwrap_or(0.0))
        .collect();
    assert_eq!(
        progress,
        (1..=8).map(f64::from).collect::<Vec<_>>(),
        "every progress event once, in order"
    );
}

//! Streams and calls outliving a node or a connection (the scenarios 1–3): a standalone
//! stream whose node is killed, a response stream whose connection drops, and a call whose node
//! dies.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;
use switchboard_tests::sse::SseEvent;

const T: Duration = Duration::from_secs(10);

/// `(event id, message)` of every JSON message among `events`.
fn messages(events: &[SseEvent]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(|e| Some((e.id.clone()?, e.json()?)))
        .collect()
}

/// Scenario 1: the GET stream is held on A while `notify` (20 messages, 150 ms apart) runs on B;
/// A is killed mid-series; resuming on C with `Last-Event-ID` yields every remaining message
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_stream_survives_its_node() {
    let mut cluster = Cluster::start(3, ClusterOptions::new().fast_liveness(1500));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[1], "2025-11-25").await;
    let get = client.get_stream(&urls[0], None).await;
    assert_eq!(get.status, StatusCode::OK);
    let mut on_a = get.sse();
    let notify = client
        .call_tool(
            &urls[1],
            2,
            "notify",
            json!({"count": 20, "interval_ms": 150}),
        )
        .await;
    let runner = tokio::spawn(notify.answer(json!(2), Duration::from_secs(20)));

    let mut seen = 0;
    let before = on_a
        .until(T, |m| {
            seen += usize::from(m["method"] == "notifications/message");
            seen == 5
        })
        .await;
    assert!(
        before.matched.is_some(),
        "5 messages on A first; read {:?}",
        before.events
    );
    let last_id = before
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("event id");
    cluster.kill9(0);
    drop(on_a);

    let resumed = client.get_stream(&urls[2], Some(&last_id)).await;
    assert_eq!(resumed.status, StatusCode::OK, "resume on C from {last_id}");
    let mut on_c = resumed.sse();
    let after = on_c
        .until_method("notifications/resources/updated", Duration::from_secs(15))
        .await;
    assert!(
        after.matched.is_some(),
        "series completes on C; read {:?}",
        after.events
    );

    let all: Vec<(String, Value)> = messages(&before.events)
        .into_iter()
        .chain(messages(&after.events))
        .collect();
    let series: Vec<&(String, Value)> = all
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/message")
        .collect();
    let ids: HashSet<&String> = series.iter().map(|(id, _)| id).collect();
    let seqs: Vec<u64> = series
        .iter()
        .map(|(_, m)| m["params"]["data"]["seq"].as_u64().expect("seq"))
        .collect();
    let expected: Vec<u64> = (1..=20).collect();
    assert_eq!(
        seqs, expected,
        "every message exactly once, in order, across the kill"
    );
    assert_eq!(ids.len(), 20, "no event id twice");
    let done = runner.await.expect("notify task");
    assert!(
        done.response.get("result").is_some(),
        "notify call on B finished: {}",
        done.response
    );
}

/// Scenario 2: the client's connection to A drops mid-countdown (A stays up); resuming on B with
/// `Last-Event-ID` yields the remaining progress and the result exactly once, then the stream
/// ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_stream_survives_a_dropped_connection() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let call = msg::call_with_progress(1, "countdown", json!({"n": 8, "interval_ms": 200}), "drop");
    let reply = client.post(&urls[0], &call).await;
    assert!(reply.is_sse(), "countdown with progress streams");
    let mut on_a = reply.sse();
    let mut seen = 0;
    let before = on_a
        .until(T, |m| {
            seen += usize::from(m["method"] == "notifications/progress");
            seen == 2
        })
        .await;
    assert!(
        before.matched.is_some(),
        "two progress events on A; read {:?}",
        before.events
    );
    let last_id = before
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("event id");
    drop(on_a);

    let resumed = client.get_stream(&urls[1], Some(&last_id)).await;
    assert_eq!(resumed.status, StatusCode::OK, "resume on B from {last_id}");
    let mut on_b = resumed.sse();
    let after = on_b.until_response(&json!(1), T).await;
    let response = after
        .matched
        .clone()
        .unwrap_or_else(|| panic!("no result after resume: {:?}", after.events));
    assert!(
        msg::result_text(&response).contains("countdown finished"),
        "{response}"
    );
    let tail = on_b
        .until_end(T)
        .await
        .unwrap_or_else(|e| panic!("resumed stream not ended after its result: {e:?}"));
    assert!(
        tail.iter().all(|e| e.json().is_none()),
        "nothing after the result: {tail:?}"
    );

    let progress: Vec<f64> = messages(&before.events)
        .into_iter()
        .chain(messages(&after.events))
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .map(|(_, m)| m["params"]["progress"].as_f64().expect("numeric progress"))
        .collect();
    assert_eq!(
        progress.len(),
        8,
        "every progress event exactly once: {progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "in order, no repeats: {progress:?}"
    );
}

/// Scenario 3: the node running a call is killed; resuming the call's stream on another node
/// gets a JSON-RPC error for that request within a bounded time, and the session keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_whose_node_dies_gets_an_error_on_resume() {
    let mut cluster = Cluster::start(3, ClusterOptions::new().fast_liveness(1500));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[1], "2025-11-25").await;
    let call =
        msg::call_with_progress(1, "countdown", json!({"n": 50, "interval_ms": 200}), "dies");
    let mut on_a = client.post(&urls[0], &call).await.sse();
    let first = on_a.until_method("notifications/progress", T).await;
    assert!(
        first.matched.is_some(),
        "progress on A; read {:?}",
        first.events
    );
    let last_id = first
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("event id");
    cluster.kill9(0);
    let killed_at = Instant::now();
    drop(on_a);

    let resumed = client.get_stream(&urls[1], Some(&last_id)).await;
    assert_eq!(resumed.status, StatusCode::OK, "resume on B from {last_id}");
    let got = resumed
        .sse()
        .until_response(&json!(1), Duration::from_secs(8))
        .await;
    let response = got
        .matched
        .unwrap_or_else(|| panic!("no answer for the dead node's call: {:?}", got.events));
    assert!(
        response["error"]["code"].is_i64(),
        "a JSON-RPC error for request 1: {response}"
    );
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_millis(1500 + 4000),
        "error after {took:?} (node_ttl 1.5 s)"
    );

    let listed = client
        .post(&urls[2], &msg::bare(2, "tools/list"))
        .await
        .answer(json!(2), T)
        .await;
    assert!(
        listed.response["result"]["tools"].is_array(),
        "session works on C"
    );
    let echo = client
        .call_tool(&urls[1], 1, "echo", json!({"text": "again"}))
        .await
        .answer(json!(1), T)
        .await;
    assert!(
        msg::result_text(&echo.response).contains("again"),
        "id 1 is free again: {}",
        echo.response
    );
}

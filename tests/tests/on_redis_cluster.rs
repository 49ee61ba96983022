//! The cluster's behaviour on Redis Cluster (issue 14): real nodes on a real Redis Cluster of 3
//! primaries with a replica each (`ClusterOptions::redis(RedisKind::Cluster)`), one Redis Cluster
//! per test, each step on its own session.
//!
//! Here: requests spread over three nodes, a dropped POST stream and a GET stream resumed on
//! another node, a sampling answer posted to another node, cancellation across nodes and DELETE
//! (one cluster), then idle expiry and the reaper. The other behaviours run the standalone
//! tests' own bodies on Redis Cluster beside them: stdio ownership and takeover
//! (`stdio_cluster.rs`), `subscriptions/listen` fan-out (`stateless_listen.rs`), tasks
//! (`stateless_tasks.rs`), the hot path's round trips (`hot_path.rs`) and the conformance suite
//! (`conformance.rs`).

use std::collections::HashSet;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::eventually::eventually;
use switchboard_tests::expect;
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

/// A client with a session made on node a (2025-11-25, every client capability).
async fn session(cluster: &Cluster) -> (McpClient, String) {
    let mut client = McpClient::new();
    let (sid, _) = client
        .initialize_with(
            &cluster.url(0),
            "2025-11-25",
            msg::all_client_capabilities(),
        )
        .await;
    (client, sid)
}

/// Calls round robin on a, b, c: each answers with its own echo.
async fn calls_round_robin(cluster: &Cluster) {
    let (client, sid) = session(cluster).await;
    let urls = cluster.urls();
    for i in 0..9u64 {
        let text = format!("rr-{i}");
        let url = &urls[(i % 3) as usize];
        let answer = client
            .call_tool(url, i + 1, "echo", json!({ "text": text }))
            .await
            .answer(json!(i + 1), T)
            .await;
        assert!(
            msg::result_text(&answer.response).contains(&text),
            "echo {i} on {url}: {}",
            answer.response
        );
    }
    assert!(
        !cluster.session_keys(&sid).is_empty(),
        "the session's keys are on some primary"
    );
    let indexed: Option<f64> = cluster
        .backend()
        .query(&["ZSCORE", "sb:sessions", &sid])
        .expect("ZSCORE sb:sessions");
    assert!(indexed.is_some(), "the session index lists {sid}");
}

/// A countdown's POST stream on a is dropped after two progress events; resumed on b with
/// `Last-Event-ID`, every progress event arrives exactly once, in order, then the result.
async fn post_stream_resumed_elsewhere(cluster: &Cluster) {
    let (client, _) = session(cluster).await;
    let urls = cluster.urls();
    let call = msg::call_with_progress(1, "countdown", json!({"n": 8, "interval_ms": 150}), "drop");
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
    assert!(before.matched.is_some(), "two progress events on a");
    let last_id = before
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("event id");
    drop(on_a);

    let resumed = client.get_stream(&urls[1], Some(&last_id)).await;
    assert_eq!(resumed.status, StatusCode::OK, "resume on b from {last_id}");
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
    let tail = on_b.until_end(T).await.expect("resumed stream ends");
    assert!(tail.iter().all(|e| e.json().is_none()), "{tail:?}");
    let progress: Vec<f64> = messages(&before.events)
        .into_iter()
        .chain(messages(&after.events))
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .map(|(_, m)| m["params"]["progress"].as_f64().expect("numeric progress"))
        .collect();
    assert_eq!(progress.len(), 8, "each progress event once: {progress:?}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
}

/// The standalone GET stream held on c is dropped mid-series (`notify` running on a) and
/// resumed on b with `Last-Event-ID`: every message exactly once, in order.
async fn get_stream_resumed_elsewhere(cluster: &Cluster) {
    let (client, _) = session(cluster).await;
    let urls = cluster.urls();
    let get = client.get_stream(&urls[2], None).await;
    assert_eq!(get.status, StatusCode::OK, "GET on c");
    let mut on_c = get.sse();
    let args = json!({"count": 12, "interval_ms": 100});
    let notify = client.call_tool(&urls[0], 2, "notify", args).await;
    let runner = tokio::spawn(notify.answer(json!(2), Duration::from_secs(20)));
    let mut seen = 0;
    let before = on_c
        .until(T, |m| {
            seen += usize::from(m["method"] == "notifications/message");
            seen == 4
        })
        .await;
    assert!(
        before.matched.is_some(),
        "4 messages on c: {:?}",
        before.events
    );
    let last_id = before
        .events
        .last()
        .and_then(|e| e.id.clone())
        .expect("event id");
    drop(on_c);

    let resumed = client.get_stream(&urls[1], Some(&last_id)).await;
    assert_eq!(resumed.status, StatusCode::OK, "resume on b from {last_id}");
    let mut on_b = resumed.sse();
    let after = on_b
        .until_method("notifications/resources/updated", Duration::from_secs(15))
        .await;
    assert!(
        after.matched.is_some(),
        "series ends on b: {:?}",
        after.events
    );
    let all: Vec<(String, Value)> = messages(&before.events)
        .into_iter()
        .chain(messages(&after.events))
        .filter(|(_, m)| m["method"] == "notifications/message")
        .collect();
    let ids: HashSet<&String> = all.iter().map(|(id, _)| id).collect();
    let seqs: Vec<u64> = all
        .iter()
        .map(|(_, m)| m["params"]["data"]["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=12).collect::<Vec<u64>>(), "each message once");
    assert_eq!(ids.len(), 12, "no event id twice");
    let done = runner.await.expect("notify task");
    assert!(done.response.get("result").is_some(), "{}", done.response);
}

/// `sampling/createMessage` from a call on a, answered by a POST to b.
async fn sampling_answered_elsewhere(cluster: &Cluster) {
    let (client, _) = session(cluster).await;
    let urls = cluster.urls();
    let reply = client
        .call_tool(&urls[0], 7, "sample", json!({"prompt": "say ok"}))
        .await;
    assert!(reply.is_sse(), "a sampling call streams");
    let mut stream = reply.sse();
    let got = stream.until_method("sampling/createMessage", T).await;
    let request = got
        .matched
        .unwrap_or_else(|| panic!("no sampling request: {:?}", got.events));
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "ok-from-b"}, "model": "m"});
    let posted = client
        .post(&urls[1], &msg::result(&request["id"], answer))
        .await;
    expect::accepted(posted, "sampling answer on b").await;
    let done = stream.until_response(&json!(7), T).await;
    let response = done
        .matched
        .unwrap_or_else(|| panic!("call 7 hangs after the answer: {:?}", done.events));
    assert!(
        msg::result_text(&response).contains("ok-from-b"),
        "{response}"
    );
    assert!(response.get("error").is_none(), "{response}");
}

/// `notifications/cancelled` POSTed to b stops a countdown running on a; the id is free again.
async fn cancelled_elsewhere(cluster: &Cluster) {
    let (client, _) = session(cluster).await;
    let urls = cluster.urls();
    let call = msg::call_with_progress(1, "countdown", json!({"n": 50, "interval_ms": 100}), "c");
    let reply = client.post(&urls[0], &call).await;
    assert!(reply.is_sse(), "countdown with progress streams");
    let mut stream = reply.sse();
    let first = stream.until_method("notifications/progress", T).await;
    assert!(first.matched.is_some(), "no progress: {:?}", first.events);
    let cancel = client.post(&urls[1], &msg::cancelled(1)).await;
    expect::accepted(cancel, "notifications/cancelled on b").await;
    let rest = stream
        .until_end(Duration::from_secs(3))
        .await
        .unwrap_or_else(|e| panic!("call still running: {e:?}"));
    let messages: Vec<Value> = rest.iter().filter_map(|e| e.json()).collect();
    assert!(
        !messages
            .iter()
            .any(|m| msg::result_text(m).contains("countdown finished")),
        "{messages:?}"
    );
    assert!(messages.len() < 20, "kept going: {} more", messages.len());
    let echo = client
        .call_tool(&urls[2], 1, "echo", json!({"text": "free"}))
        .await
        .answer(json!(1), T)
        .await;
    assert!(
        msg::result_text(&echo.response).contains("free"),
        "{}",
        echo.response
    );
}

/// DELETE on c, with a GET stream on b and a call running on a: 404 everywhere, both streams
/// end (the call with -32004), and no key of the session is left on any primary.
async fn delete_ends_it_everywhere(cluster: &Cluster) {
    let (client, sid) = session(cluster).await;
    let urls = cluster.urls();
    let get = client.get_stream(&urls[1], None).await;
    assert_eq!(get.status, StatusCode::OK, "GET on b");
    let mut get_b = get.sse();
    let call = msg::call_with_progress(5, "countdown", json!({"n": 100, "interval_ms": 100}), "d");
    let running = client.post(&urls[0], &call).await;
    assert!(running.is_sse(), "countdown with progress streams");
    let mut running = running.sse();
    let first = running.until_method("notifications/progress", T).await;
    assert!(first.matched.is_some(), "no progress: {:?}", first.events);

    let deleted = client.delete(&urls[2]).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "DELETE on c");
    expect::session_gone_everywhere(&client, &urls).await;
    get_b.until_end(T).await.expect("GET on b ends");
    let rest = running.until_end(T).await.expect("the call's stream ends");
    let ended = rest.iter().filter_map(|e| e.json()).find(|m| m["id"] == 5);
    assert_eq!(
        ended.map(|m| m["error"].clone()),
        Some(json!({"code": -32004, "message": "request cancelled",
            "data": {"reason": "session_ended"}})),
        "{rest:?}"
    );
    eventually(
        "no key of the deleted session on any primary",
        T,
        || async { cluster.session_keys(&sid).is_empty().then_some(()) },
    )
    .await;
    let indexed: Option<f64> = cluster
        .backend()
        .query(&["ZSCORE", "sb:sessions", &sid])
        .expect("ZSCORE sb:sessions");
    assert_eq!(indexed, None, "the session index still lists {sid}");
}

/// Items 1–5 of issue 14's cluster tests on one Redis Cluster, each on its own session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_across_three_nodes() {
    let cluster = Cluster::start(3, ClusterOptions::new().redis(RedisKind::Cluster));
    calls_round_robin(&cluster).await;
    post_stream_resumed_elsewhere(&cluster).await;
    get_stream_resumed_elsewhere(&cluster).await;
    sampling_answered_elsewhere(&cluster).await;
    cancelled_elsewhere(&cluster).await;
    delete_ends_it_everywhere(&cluster).await;
}

/// Abandoned sessions (on every node, no DELETE) expire after the idle TTL: the reaper leaves
/// no key of them on any primary, and every node answers 404 for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_and_the_reaper_leaves_no_key() {
    let options = ClusterOptions::new()
        .redis(RedisKind::Cluster)
        .idle_expiry(1500, 300);
    let cluster = Cluster::start(3, options);
    let baseline = cluster.baseline_keys().await;
    let urls = cluster.urls();
    let mut sids = Vec::new();
    for i in 0..30 {
        let mut client = McpClient::new();
        sids.push(client.initialize(&urls[i % 3], "2025-06-18").await.0);
    }
    // The primaries holding the records still there (the first may have expired already).
    let redis = cluster.backend().cluster();
    let primaries = redis.primaries();
    let spread: HashSet<u16> = sids
        .iter()
        .filter_map(|sid| {
            let key = format!("sb:{{{sid}}}:s");
            primaries
                .iter()
                .copied()
                .find(|&p| !redis.keys_on(p, &key).is_empty())
        })
        .collect();
    assert!(spread.len() > 1, "sessions on several shards: {spread:?}");
    eventually(
        "back to the baseline keys",
        Duration::from_secs(15),
        || async {
            let extra = cluster.keys_beyond(&baseline);
            (cluster.all_session_keys().is_empty() && extra.is_empty()).then_some(())
        },
    )
    .await;
    for sid in sids.iter().step_by(6) {
        let client = McpClient::new().with_session(Some(sid), Some("2025-06-18"));
        for url in &urls {
            let reply = client.post(url, &msg::bare(9, "tools/list")).await;
            expect::session_not_found(reply, &format!("expired {sid} on {url}")).await;
        }
    }
}

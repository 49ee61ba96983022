//! Old and new nodes on one Redis (issue 32, rolling upgrades): three nodes of the previous
//! release ([`switchboard_tests::previous`]) are replaced one by one with this build, and at
//! every mix each message that crosses between an old and a new node still arrives: live events
//! on a held GET stream, a sampling answer POSTed to another node, `notifications/cancelled`
//! for a call running elsewhere, and a session's end (DELETE) closing streams held on the other
//! release. Standalone Redis and Redis Cluster (whose session ends travel differently).
//!
//! The previous release is built from a commit of this repository's history (about 20–40 s,
//! its dependencies linked from this build's).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::expect;
use switchboard_tests::msg;
use switchboard_tests::previous;

const T: Duration = Duration::from_secs(10);

/// A session made on node `on` (2025-11-25, every client capability).
async fn session(cluster: &Cluster, on: usize) -> McpClient {
    let mut client = McpClient::new();
    client
        .initialize_with(
            &cluster.url(on),
            "2025-11-25",
            msg::all_client_capabilities(),
        )
        .await;
    client
}

/// `notify` called on `call_on` reaches a GET stream held on `hold_on`: every message, in
/// order.
async fn events_cross(cluster: &Cluster, hold_on: usize, call_on: usize, what: &str) {
    let client = session(cluster, call_on).await;
    let get = client.get_stream(&cluster.url(hold_on), None).await;
    assert_eq!(get.status, StatusCode::OK, "{what}: GET");
    let mut get = get.sse();
    let answer = client
        .call_tool(
            &cluster.url(call_on),
            1,
            "notify",
            json!({"count": 4, "interval_ms": 20, "tag": what}),
        )
        .await
        .answer(json!(1), T)
        .await;
    assert!(
        answer.response.get("result").is_some(),
        "{what}: {}",
        answer.response
    );
    let mut seqs = Vec::new();
    while seqs.len() < 4 {
        let Some((_, m)) = get.next_message(T).await else {
            panic!("{what}: GET got {seqs:?}, then nothing");
        };
        if m["method"] == "notifications/message" {
            seqs.push(m["params"]["data"]["seq"].as_u64().unwrap_or(0));
        }
    }
    assert_eq!(seqs, vec![1, 2, 3, 4], "{what}");
}

/// `sample` called on `call_on`, its `sampling/createMessage` answered with a POST on
/// `answer_on`: the call ends with that answer.
async fn sampling_crosses(cluster: &Cluster, call_on: usize, answer_on: usize, what: &str) {
    let client = session(cluster, call_on).await;
    let reply = client
        .call_tool(&cluster.url(call_on), 7, "sample", json!({"prompt": what}))
        .await;
    let mut stream = reply.sse();
    let asked = stream.until_method("sampling/createMessage", T).await;
    let request = asked
        .matched
        .unwrap_or_else(|| panic!("{what}: no sampling request: {:?}", asked.events));
    let text = format!("answer-{what}");
    let answer =
        json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"});
    expect::accepted(
        client
            .post(
                &cluster.url(answer_on),
                &msg::result(&request["id"], answer),
            )
            .await,
        what,
    )
    .await;
    let done = stream.until_response(&json!(7), T).await;
    let response = done
        .matched
        .unwrap_or_else(|| panic!("{what}: the call hangs: {:?}", done.events));
    assert!(
        msg::result_text(&response).contains(&text),
        "{what}: {response}"
    );
}

/// A `countdown` running on `call_on`, cancelled with a POST on `cancel_on`: its stream ends
/// early, without the countdown's result.
async fn cancel_crosses(cluster: &Cluster, call_on: usize, cancel_on: usize, what: &str) {
    let client = session(cluster, call_on).await;
    let call = msg::call_with_progress(1, "countdown", json!({"n": 60, "interval_ms": 100}), what);
    let mut stream = client.post(&cluster.url(call_on), &call).await.sse();
    let first = stream.until_method("notifications/progress", T).await;
    assert!(first.matched.is_some(), "{what}: no progress");
    let cancel = client
        .post(&cluster.url(cancel_on), &msg::cancelled(1))
        .await;
    expect::accepted(cancel, what).await;
    let rest = stream
        .until_end(Duration::from_secs(3))
        .await
        .unwrap_or_else(|e| panic!("{what}: the call still runs: {e:?}"));
    let finished = rest
        .iter()
        .filter_map(|e| e.json())
        .any(|m: Value| msg::result_text(&m).contains("countdown finished"));
    assert!(!finished, "{what}: ran to its end");
}

/// DELETE on `delete_on` while a GET stream is held on `hold_on`: that stream ends, and every
/// node answers 404.
async fn end_crosses(cluster: &Cluster, hold_on: usize, delete_on: usize, what: &str) {
    let client = session(cluster, hold_on).await;
    let get = client.get_stream(&cluster.url(hold_on), None).await;
    assert_eq!(get.status, StatusCode::OK, "{what}: GET");
    let mut get = get.sse();
    let deleted = client.delete(&cluster.url(delete_on)).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{what}: DELETE");
    get.until_end(T)
        .await
        .unwrap_or_else(|e| panic!("{what}: the GET stream stays open: {e:?}"));
    for url in cluster.urls() {
        // 404 with -32001 on every node (the previous release answered with `"id": null`).
        let reply = client.post(&url, &msg::bare(99, "tools/list")).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{what}: POST on {url}");
        let body = reply.json().await;
        assert_eq!(
            body["error"]["code"], -32001,
            "{what}: POST on {url}: {body}"
        );
    }
}

/// Every message kind, both ways between node `old` and node `new`.
async fn both_ways(cluster: &Cluster, old: usize, new: usize, stage: &str) {
    for (from, to, dir) in [(old, new, "old->new"), (new, old, "new->old")] {
        let what = format!("{stage} {dir}");
        events_cross(cluster, to, from, &format!("{what} events")).await;
        sampling_crosses(cluster, from, to, &format!("{what} sampling")).await;
        cancel_crosses(cluster, from, to, &format!("{what} cancel")).await;
        end_crosses(cluster, to, from, &format!("{what} end")).await;
    }
}

/// Starts three nodes of the previous release, then replaces them one at a time (SIGTERM, a
/// drain, a start of this build on the same port), checking both ways at each mix.
async fn roll(redis: RedisKind) {
    let Some(old) = previous::binary() else {
        return;
    };
    let mut cluster = Cluster::start(3, ClusterOptions::new().redis(redis).program(old));
    both_ways(&cluster, 0, 1, "all old").await;
    cluster.set_program_for_new_nodes(None);
    for i in 0..3 {
        cluster.node(i).terminate();
        let code = cluster.node_mut(i).wait_exit(Duration::from_secs(40));
        assert_eq!(code, Some(0), "old node {i} drains and exits 0");
        cluster.restart(i);
        if i < 2 {
            both_ways(&cluster, 2, i, &format!("{} new", i + 1)).await;
        }
    }
    both_ways(&cluster, 0, 2, "all new").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_on_standalone_redis_loses_no_message() {
    roll(RedisKind::Standalone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_on_redis_cluster_loses_no_message() {
    roll(RedisKind::Cluster).await;
}

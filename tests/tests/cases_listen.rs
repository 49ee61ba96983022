//! Case C42 (from the shared case files): a `subscriptions/listen` whose agreed subset is empty (the
//! demo declares no `listChanged`, so list-change filters are never agreed) is acknowledged and
//! then ended at once with the closing result; it holds no `stateless.max_listeners` slot. A
//! filter with a subscribable URI is agreed and stays open, a mixed one agrees only the URI.
//!
//! Before the fix the empty stream stayed open with keep-alives only (the closing result never
//! came within 1 s) and the sixth such request on a node with `max_listeners = 5` got 503.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::Headers;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::metrics::counter;
use switchboard_tests::modern::{post, SUBSCRIPTION_ID as SUB_ID};
use switchboard_tests::sse::SseStream;

const T: Duration = Duration::from_secs(10);
/// The case's bound for the closing result after the acknowledgement.
const AT_ONCE: Duration = Duration::from_secs(1);
const QUIET: Duration = Duration::from_millis(1500);
const GREETING: &str = "demo://greeting";

fn modern(id: Value, method: &str, params: Value) -> Value {
    switchboard_tests::modern::request(id, method, params, json!({}))
}

fn hdrs(method: &str, name: Option<&str>) -> Headers {
    switchboard_tests::modern::headers(method, name)
}

/// POSTs `subscriptions/listen` with `filter`; the HTTP status and, on 200, the stream after
/// its acknowledgement (checked to come first, for `id`) and the agreed filter.
async fn listen(url: &str, id: &Value, filter: Value) -> (StatusCode, Option<(SseStream, Value)>) {
    let reply = switchboard_tests::modern::listen(url, id, filter).await;
    if reply.status != StatusCode::OK {
        return (reply.status, None);
    }
    let opened = switchboard_tests::modern::acknowledged(reply, id).await;
    (StatusCode::OK, Some(opened))
}

fn lists() -> Value {
    json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true})
}

/// The messages `stream` delivers within `within`.
async fn messages_within(stream: &mut SseStream, within: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + within;
    let mut out = Vec::new();
    while let Some((_, m)) = stream
        .next_message(deadline.saturating_duration_since(tokio::time::Instant::now()))
        .await
    {
        out.push(m);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_that_honours_nothing_ends_after_its_acknowledgement() {
    let cluster = Cluster::start(
        3,
        ClusterOptions::new()
            .set("http.keepalive_interval", "300ms")
            .set("stateless.max_listeners", 5),
    );
    let urls = cluster.urls();
    let node_a = cluster.node(0).base_url();

    for i in 0..10 {
        let id = json!(format!("empty-{i}"));
        let (status, opened) = listen(&urls[0], &id, lists()).await;
        assert_eq!(status, StatusCode::OK, "request {i}: no 503 (C42)");
        let (mut stream, agreed) = opened.expect("a stream");
        assert_eq!(agreed, json!({}), "the demo raises no list changes");
        let end = stream.until_response(&id, AT_ONCE).await;
        let result = end
            .matched
            .unwrap_or_else(|| panic!("request {i}: no closing result within 1 s"));
        assert_eq!(result["result"]["resultType"], "complete", "{result}");
        assert_eq!(result["result"]["_meta"][SUB_ID], id, "{result}");
        assert!(stream.until_end(AT_ONCE).await.is_ok(), "the stream ends");
    }
    assert_eq!(
        counter(&node_a, "switchboard_listeners_open").await,
        0,
        "nothing registered"
    );
    assert_eq!(
        counter(&node_a, "switchboard_listen_refused_total").await,
        0
    );

    // Control: a subscribable URI is agreed; the stream stays open and gets one update raised
    // on @C.
    let id = json!("greeting");
    let filter = json!({"resourceSubscriptions": [GREETING]});
    let (_, opened) = listen(&urls[0], &id, filter.clone()).await;
    let (mut greeting, agreed) = opened.expect("a stream");
    assert_eq!(agreed, filter);
    // Mixed: only the URI is agreed, and the stream stays open too.
    let mixed_id = json!("mixed");
    let mixed = json!({"toolsListChanged": true, "resourceSubscriptions": [GREETING]});
    let (_, opened) = listen(&urls[1], &mixed_id, mixed).await;
    let (mut mixed, agreed) = opened.expect("a stream");
    assert_eq!(agreed, filter, "only the URI is acknowledged");

    let call = modern(
        json!(5),
        "tools/call",
        json!({"name": "notify", "arguments": {"count": 1}}),
    );
    let r = post(&urls[2], &hdrs("tools/call", Some("notify")), &call).await;
    let r = r.answer(json!(5), T).await.response;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    for (stream, id) in [(&mut greeting, &id), (&mut mixed, &mixed_id)] {
        let got = messages_within(stream, QUIET).await;
        let updates: Vec<&Value> = got
            .iter()
            .filter(|m| m["method"] == "notifications/resources/updated")
            .collect();
        assert_eq!(updates.len(), 1, "{id}: {got:?}");
        assert_eq!(updates[0]["params"]["_meta"][SUB_ID], *id);
        assert!(
            got.iter().all(|m| m.get("id").is_none()),
            "{id}: no closing result: {got:?}"
        );
        assert!(!stream.is_ended(), "{id} stays open");
    }
}

//! `subscriptions/listen` (MCP 2026-07-28, basic/patterns/subscriptions; revisions.md 3.7.4,
//! 3.7.5, 3.4.7, 1.3.15–1.3.17) on a cluster of real nodes sharing one Redis: the acknowledgement
//! comes first with the subset the demo upstream can raise; a notification raised by a request on
//! one node reaches the matching listeners on every node exactly once, tagged with their
//! subscription id, and no other listener; a closed stream releases its listener; a draining
//! node ends its streams with the closing result while the rest of the cluster keeps listening.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::Headers;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::eventually;
use switchboard_tests::modern::{post, SUBSCRIPTION_ID as SUB_ID};
use switchboard_tests::sse::SseStream;

const T: Duration = Duration::from_secs(10);
/// How long a listener is watched for a message that must not come (or a second copy).
const QUIET: Duration = Duration::from_millis(1500);
const GREETING: &str = "demo://greeting";

/// Keep-alives every 300 ms, so a closed stream is noticed quickly.
fn options() -> ClusterOptions {
    ClusterOptions::new().set("http.keepalive_interval", "300ms")
}

/// A 2026-07-28 request with `params` and the required `_meta`.
fn modern(id: Value, method: &str, params: Value) -> Value {
    switchboard_tests::modern::request(id, method, params, json!({}))
}

fn hdrs(method: &str, name: Option<&str>) -> Headers {
    switchboard_tests::modern::headers(method, name)
}

/// Opens a listen stream with `filter` on `url`; returns it after checking the headers and that
/// the first message is the acknowledgement for `id`, and the acknowledged filter.
async fn listen(url: &str, id: Value, filter: Value) -> (SseStream, Value) {
    let reply = switchboard_tests::modern::listen(url, &id, filter).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.is_sse(), "listen answers with a stream");
    assert_eq!(reply.header("x-accel-buffering").as_deref(), Some("no"));
    assert!(reply.session_id().is_none());
    switchboard_tests::modern::acknowledged(reply, &id).await
}

/// Runs the demo's `notify` tool (no log messages, then `resources/updated` for the greeting)
/// as a 2026-07-28 request on `url`, to its answer.
async fn raise_update(url: &str, id: i64) {
    let call = modern(
        json!(id),
        "tools/call",
        json!({"name": "notify", "arguments": {"count": 0}}),
    );
    let r = post(url, &hdrs("tools/call", Some("notify")), &call).await;
    let r = r.answer(json!(id), T).await.response;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}

/// The JSON messages `stream` delivers within `within`.
async fn messages_within(stream: &mut SseStream, within: Duration) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + within;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match stream.next_message(left).await {
            Some((_, m)) => out.push(m),
            None => return out,
        }
    }
}

/// Waits for the first resources/updated on `stream`, then watches it for [`QUIET`]: exactly one
/// must arrive, tagged with `id`.
async fn exactly_one_update(stream: &mut SseStream, id: &Value) {
    let got = stream
        .until_method("notifications/resources/updated", T)
        .await;
    let note = got.matched.unwrap_or_else(|| panic!("no update for {id}"));
    assert!(
        got.messages.is_empty(),
        "nothing else first: {:?}",
        got.messages
    );
    assert_eq!(note["params"]["uri"], GREETING, "{note}");
    assert_eq!(note["params"]["_meta"][SUB_ID], *id, "{note}");
    let more = messages_within(stream, QUIET).await;
    assert!(more.is_empty(), "{id} got more: {more:?}");
}

async fn metric(cluster: &Cluster, i: usize, name: &str) -> u64 {
    let text = reqwest::get(format!("{}/metrics", cluster.node(i).base_url()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_on_one_node_reaches_the_matching_listeners_on_others() {
    listeners_on_other_nodes(RedisKind::Standalone).await;
}

/// The same on Redis Cluster, where the fan-out is one `SPUBLISH` on the broadcast channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_on_one_node_reaches_the_matching_listeners_on_others_on_redis_cluster() {
    listeners_on_other_nodes(RedisKind::Cluster).await;
}

async fn listeners_on_other_nodes(kind: RedisKind) {
    let cluster = Cluster::start(3, options().redis(kind));
    let urls = cluster.urls();

    // The demo declares resources.subscribe but no listChanged: only the URIs are agreed.
    let disc = modern(json!(1), "server/discover", json!({}));
    let r = post(&urls[0], &hdrs("server/discover", None), &disc).await;
    let r = r.answer(json!(1), T).await.response;
    assert_eq!(
        r["result"]["capabilities"]["resources"]["subscribe"], true,
        "{r}"
    );

    let asked = json!({"toolsListChanged": true, "resourceSubscriptions": [GREETING]});
    let (mut resources, agreed) = listen(&urls[0], json!("res-1"), asked).await;
    assert_eq!(agreed, json!({"resourceSubscriptions": [GREETING]}));
    // Nothing agreed: acknowledged, then ended at once with the closing result (case C42).
    let (mut tools, agreed) = listen(&urls[1], json!(42), json!({"toolsListChanged": true})).await;
    assert_eq!(
        agreed,
        json!({}),
        "the demo never raises tools/list_changed"
    );
    let end = tools.until_response(&json!(42), T).await;
    let closing = end.matched.expect("the closing result");
    assert_eq!(closing["result"]["_meta"][SUB_ID], 42, "{closing}");
    assert!(
        tools.until_end(T).await.is_ok(),
        "and the end of the stream"
    );
    // A listener of another URI stays open and gets nothing of the greeting.
    let (mut other, agreed) = listen(
        &urls[1],
        json!(43),
        json!({"resourceSubscriptions": ["demo://other"]}),
    )
    .await;
    assert_eq!(agreed, json!({"resourceSubscriptions": ["demo://other"]}));

    raise_update(&urls[2], 2).await;
    exactly_one_update(&mut resources, &json!("res-1")).await;
    let leaked = messages_within(&mut other, Duration::from_millis(300)).await;
    assert!(leaked.is_empty(), "the other URI's listener got {leaked:?}");
    assert!(other.comments() > 0, "keep-alive comments on the stream");
    assert!(!other.is_ended() && !resources.is_ended());

    // A listener on the raising node itself gets it too, once.
    let (mut local, _) = listen(
        &urls[2],
        json!(7),
        json!({"resourceSubscriptions": [GREETING]}),
    )
    .await;
    raise_update(&urls[2], 3).await;
    exactly_one_update(&mut local, &json!(7)).await;
    exactly_one_update(&mut resources, &json!("res-1")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_listeners_on_two_nodes_each_get_it_once() {
    let cluster = Cluster::start(3, options());
    let urls = cluster.urls();
    let mut streams = Vec::new();
    for i in 0..50 {
        let url = &urls[i % 2];
        let filter = json!({"resourceSubscriptions": [GREETING]});
        let (s, _) = listen(url, json!(format!("l{i}")), filter).await;
        streams.push(s);
    }
    assert_eq!(metric(&cluster, 0, "switchboard_listeners_open").await, 25);
    raise_update(&urls[2], 1).await;
    let checks = streams.iter_mut().enumerate().map(|(i, s)| async move {
        exactly_one_update(s, &json!(format!("l{i}"))).await;
    });
    futures::future::join_all(checks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_releases_its_listener_and_bad_filters_are_refused() {
    let cluster = Cluster::start(1, options());
    let url = cluster.url(0);
    let open = |_: ()| async {
        let (s, _) = listen(&url, json!(1), json!({"resourceSubscriptions": [GREETING]})).await;
        s
    };
    let a = open(()).await;
    let b = open(()).await;
    assert_eq!(metric(&cluster, 0, "switchboard_listeners_open").await, 2);
    drop(a);
    drop(b);
    eventually::eventually("closed listen streams leave the registry", T, || async {
        (metric(&cluster, 0, "switchboard_listeners_open").await == 0).then_some(())
    })
    .await;

    let h = hdrs("subscriptions/listen", None);
    for bad in [
        json!({}),
        json!({"notifications": {"toolsListChanged": "yes"}}),
        json!({"notifications": {"resourceSubscriptions": "demo://greeting"}}),
    ] {
        let reply = post(
            &url,
            &h,
            &modern(json!(9), "subscriptions/listen", bad.clone()),
        )
        .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}");
        let body = reply.json().await;
        assert_eq!(body["error"]["code"], -32602, "{bad}: {body}");
        assert_eq!(body["id"], 9);
    }
    assert_eq!(metric(&cluster, 0, "switchboard_listeners_open").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_node_ends_its_streams_with_the_closing_result() {
    let mut cluster = Cluster::start(3, options());
    let urls = cluster.urls();
    let filter = json!({"resourceSubscriptions": [GREETING]});
    let (mut stays, _) = listen(&urls[0], json!("stays"), filter.clone()).await;
    let (mut drained, _) = listen(&urls[1], json!("drained"), filter).await;

    cluster.node(1).terminate();
    let end = drained.until_response(&json!("drained"), T).await;
    let result = end.matched.expect("the closing result");
    assert_eq!(result["result"]["resultType"], "complete", "{result}");
    assert_eq!(result["result"]["_meta"][SUB_ID], "drained", "{result}");
    assert!(
        end.messages
            .iter()
            .all(|(_, m)| m["method"] != "notifications/cancelled"),
        "no notifications/cancelled (revisions.md 3.4.7)"
    );
    assert!(
        drained.until_end(T).await.is_ok(),
        "the stream closes after it"
    );
    assert_eq!(cluster.node_mut(1).wait_exit(T), Some(0));

    raise_update(&urls[2], 1).await;
    exactly_one_update(&mut stays, &json!("stays")).await;
}

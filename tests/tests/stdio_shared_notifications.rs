//! Case C23: notifications of a shared stdio child that belong to no request reach the sessions
//! attached to it, on their standalone GET streams wherever those are held: list changes every
//! attached session, `resources/updated` only the subscriber, log messages outside calls every
//! session at its own log level; per-session children stay one per session.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::sse::SseStream;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};

const T: Duration = Duration::from_secs(20);

async fn call(client: &McpClient, url: &str, id: u64, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    assert!(
        answer.response.get("result").is_some(),
        "{tool}: {}",
        answer.response
    );
    answer.response["result"].clone()
}

async fn request(client: &McpClient, url: &str, id: u64, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    assert!(
        answer.response.get("result").is_some(),
        "{method}: {}",
        answer.response
    );
    answer.response["result"].clone()
}

/// The standalone GET stream of `client` on `url`, once its priming event has arrived.
async fn standalone(client: &McpClient, url: &str) -> SseStream {
    let reply = client.get_stream(url, None).await;
    assert_eq!(reply.status.as_u16(), 200);
    let mut stream = reply.sse();
    assert!(stream.next_event(T).await.is_some(), "priming event");
    stream
}

/// The next JSON-RPC message on `stream` (panics after [`T`]).
async fn next(stream: &mut SseStream) -> Value {
    stream
        .next_message(T)
        .await
        .expect("a message on the GET stream")
        .1
}

const CHANGED: &str = "notifications/tools/list_changed";

/// C23: two sessions use one shared child through node A while their GET streams are held by
/// nodes A and B: the child's `tools/list_changed` (and the prompts and resources list changes)
/// reaches both streams, `resources/updated`
/// only the session that subscribed, a log message outside any call every session at or above
/// its level; per-session children have one PID per session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_of_a_shared_child_reach_the_attached_sessions_on_any_node() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstreams = [
        Upstream::stdio("hub", &python, &[fixture.as_str()]).set("shared", true),
        Upstream::stdio("own", &python, &[fixture.as_str()]),
    ];
    let started = start_cluster(2, &upstreams, ClusterOptions::new());
    let (a, b) = (started.cluster.url(0), started.cluster.url(1));
    let (mut s1, mut s2) = (McpClient::new(), McpClient::new());
    s1.initialize(&a, "2025-11-25").await;
    s2.initialize(&b, "2025-11-25").await;

    let own = |r: &Value| r["pid"].as_u64().unwrap_or_else(|| panic!("{r}"));
    let own1 = own(&call(&s1, &a, 1, "own__echo", json!({"s": "1"})).await);
    let own2 = own(&call(&s2, &a, 1, "own__echo", json!({"s": "2"})).await);
    assert_ne!(own1, own2, "per session: one child each");
    let hub1 = own(&call(&s1, &a, 2, "hub__echo", json!({"s": "1"})).await);
    let hub2 = own(&call(&s2, &a, 2, "hub__echo", json!({"s": "2"})).await);
    assert_eq!(hub1, hub2, "shared: one child on node A");
    request(
        &s1,
        &a,
        3,
        "resources/subscribe",
        json!({"uri": "fx://one"}),
    )
    .await;

    let mut get1 = standalone(&s1, &a).await;
    let mut get2 = standalone(&s2, &b).await;
    call(&s1, &a, 4, "hub__notify", json!({})).await;
    assert_eq!(next(&mut get1).await["method"], CHANGED);
    assert_eq!(
        next(&mut get2).await["method"],
        CHANGED,
        "on node B's stream too"
    );
    // The other list changes too, to both streams (ids 11 and 12: the ids below keep their order).
    for (id, kind) in [(11, "prompts"), (12, "resources")] {
        let method = format!("notifications/{kind}/list_changed");
        call(&s1, &a, id, "hub__notify", json!({"method": method})).await;
        assert_eq!(next(&mut get1).await["method"], method.as_str());
        assert_eq!(next(&mut get2).await["method"], method.as_str(), "node B");
    }

    // Only the subscriber hears of the update; the list change sent after it is S2's next.
    let updated =
        json!({"method": "notifications/resources/updated", "params": {"uri": "fx://one"}});
    call(&s2, &a, 5, "hub__notify", updated).await;
    let got = next(&mut get1).await;
    assert_eq!(got["method"], "notifications/resources/updated", "{got}");
    assert_eq!(got["params"]["uri"], "fx://one");
    call(&s2, &a, 6, "hub__notify", json!({})).await;
    assert_eq!(next(&mut get2).await["method"], CHANGED, "S2 got no update");
    assert_eq!(next(&mut get1).await["method"], CHANGED);

    // A log message outside any call: to every session at or above its own level.
    request(&s2, &a, 7, "logging/setLevel", json!({"level": "error"})).await;
    call(&s2, &a, 8, "hub__echo", json!({"s": "level"})).await;
    let later = json!({"seconds": 0.1, "method": "notifications/message",
        "params": {"level": "info", "logger": "fx", "data": "background"}});
    call(&s1, &a, 9, "hub__notify_later", later).await;
    let got = next(&mut get1).await;
    assert_eq!(
        (got["method"].clone(), got["params"]["data"].clone()),
        (json!("notifications/message"), json!("background")),
        "{got}"
    );
    call(&s1, &a, 10, "hub__notify", json!({})).await;
    assert_eq!(
        next(&mut get2).await["method"],
        CHANGED,
        "info is below S2's level"
    );
    assert_eq!(next(&mut get1).await["method"], CHANGED);
}

/// C23: with `max_attached_sessions = 2`, S1 subscribes to `fx://one` through node A's shared
/// child and is detached when S3 attaches; S1's next request attaches it again, and the child's
/// `resources/updated` for `fx://one` (sent during S3's call) reaches S1's GET stream again, before
/// the list change that follows it. Before, S1 came back without its subscription and got only
/// the list change, although the child still held the subscription.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_session_gets_its_subscriptions_back_when_it_returns() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let hub = Upstream::stdio("hub", &python, &[fixture.as_str()])
        .set("shared", true)
        .set("max_attached_sessions", 2);
    let started = start_cluster(2, &[hub], ClusterOptions::new());
    let (a, b) = (started.cluster.url(0), started.cluster.url(1));
    let mut sessions = vec![McpClient::new(), McpClient::new(), McpClient::new()];
    for s in &mut sessions {
        s.initialize(&a, "2025-11-25").await;
    }
    let mut get1 = standalone(&sessions[0], &b).await;
    call(&sessions[0], &a, 1, "hub__echo", json!({"s": "1"})).await;
    let subscribe = json!({"uri": "fx://one"});
    request(&sessions[0], &a, 2, "resources/subscribe", subscribe).await;
    call(&sessions[1], &a, 1, "hub__echo", json!({"s": "2"})).await;
    call(&sessions[2], &a, 1, "hub__echo", json!({"s": "3"})).await;
    let log = started.cluster.node(0).log_tail(500);
    assert!(
        log.contains("max_attached_sessions reached"),
        "S1 was detached:\n{log}"
    );

    call(&sessions[0], &a, 3, "hub__echo", json!({"s": "back"})).await;
    let info = call(&sessions[0], &a, 4, "hub__info", json!({})).await;
    assert_eq!(
        info["info"]["subscriptions"],
        json!([["resources/subscribe", "fx://one"]]),
        "the child still holds the subscription"
    );
    let updated =
        json!({"method": "notifications/resources/updated", "params": {"uri": "fx://one"}});
    call(&sessions[2], &a, 2, "hub__notify", updated).await;
    call(&sessions[2], &a, 3, "hub__notify", json!({})).await;
    let got = next(&mut get1).await;
    assert_eq!(
        (got["method"].clone(), got["params"]["uri"].clone()),
        (json!("notifications/resources/updated"), json!("fx://one")),
        "S1 hears of its resource again: {got}"
    );
    assert_eq!(next(&mut get1).await["method"], CHANGED);
}

//! Refused requests must leave the session as it was (found by an adversarial run, issue 5):
//! a refused resume does not take over the live stream, a request lost with its dead node does
//! not hold its id (or its in-flight slot) forever, and a session opened by the legacy SSE GET
//! runs nothing on the Streamable HTTP endpoint before its `initialize`.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::msg;
use switchboard_tests::sse::SseStream;

const T: Duration = Duration::from_secs(10);

/// A GET on node B whose `Last-Event-ID` is refused (400) leaves the standalone stream held on
/// node A in place: a notification raised afterwards still arrives there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_resume_leaves_the_live_stream_alone() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), "2025-11-25").await;
    let live = client.get_stream(&cluster.url(0), None).await;
    assert_eq!(live.status.as_u16(), 200);
    let mut live = live.sse();
    // An id from beyond any clock, one of no event sent yet, one of a stream this session never
    // had.
    for bad in ["get_9999999999999-0", "get_1-0", "aaaaaaaaaaaa_1-0"] {
        let refused = client.get_stream(&cluster.url(1), Some(bad)).await;
        assert_eq!(refused.status.as_u16(), 400, "Last-Event-ID {bad}");
    }
    let args = json!({"count": 1, "interval_ms": 0, "level": "info"});
    let done = client
        .call_tool(&cluster.url(1), 2, "notify", args)
        .await
        .answer(json!(2), T)
        .await;
    assert!(
        !msg::result_text(&done.response).is_empty(),
        "{}",
        done.response
    );
    let got = live.until_method("notifications/message", T).await;
    assert!(
        got.matched.is_some(),
        "the live stream lost its notification: {:?}",
        got.events
    );
}

/// A request whose node died is lost with it; once the node's heartbeat has lapsed, the same id
/// may be sent again on another node instead of being refused as "already in flight".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_held_by_a_dead_node_can_be_used_again() {
    let mut cluster = Cluster::start(2, ClusterOptions::new().fast_liveness(600));
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), "2025-11-25").await;
    let call = msg::call_with_progress(
        json!(9),
        "countdown",
        json!({"n": 50, "interval_ms": 200}),
        "run",
    );
    let running = client.post(&cluster.url(1), &call).await;
    assert!(running.is_sse(), "the countdown streams");
    let mut running = running.sse();
    let first = running.until_method("notifications/progress", T).await;
    assert!(first.matched.is_some(), "no progress: {:?}", first.events);
    cluster.kill9(1);
    echo_until_answered(&client, &cluster.url(0), 9, expect::INVALID_REQUEST).await;
}

/// Requests lost with their dead node do not keep their in-flight slots: a session that is at
/// `session.max_inflight` because of them takes a new request once the node's heartbeat has
/// lapsed, and resuming a lost request's stream reads the -32004 error that ended it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_slots_held_by_a_dead_node_come_back() {
    let (cluster, client, last_ids) = fill_with_requests_of_a_dead_node("2025-11-25").await;
    echo_until_answered(&client, &cluster.url(0), 3, -32003).await;
    let resumed = client.get_stream(&cluster.url(0), Some(&last_ids[0])).await;
    assert_eq!(resumed.status.as_u16(), 200, "resuming the lost stream");
    let got = resumed.sse().until_response(&json!(1), T).await;
    let answer = got
        .matched
        .unwrap_or_else(|| panic!("no answer: {:?}", got.events));
    let message = expect::rpc_error(&answer, -32004);
    assert!(message.contains("lost"), "{message}");
}

/// The same through a JSON-RPC batch (MCP 2025-03-26), which loads the session another way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_slots_held_by_a_dead_node_come_back_for_a_batch() {
    let (cluster, client, _) = fill_with_requests_of_a_dead_node("2025-03-26").await;
    let batch = json!([msg::call(3, "echo", json!({"text": "third"}))]);
    let deadline = Instant::now() + T;
    loop {
        let reply = client.post(&cluster.url(0), &batch).await;
        assert_eq!(reply.status.as_u16(), 200);
        let body = reply.json().await;
        let answer = &body[0];
        if msg::result_text(answer).contains("third") {
            break;
        }
        expect::rpc_error(answer, -32003);
        assert!(
            Instant::now() < deadline,
            "the dead node's requests still fill the session: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Calls `echo` with request id `id` on `url` every 200 ms until it is answered; until then each
/// refusal must be the JSON-RPC error `refused` (the id or the slots still held by a dead node).
/// Fails after [`T`].
async fn echo_until_answered(client: &McpClient, url: &str, id: u64, refused: i64) {
    let text = format!("echo {id}");
    let deadline = Instant::now() + T;
    loop {
        let reply = client
            .call_tool(url, id, "echo", json!({"text": text}))
            .await
            .answer(json!(id), T)
            .await;
        if msg::result_text(&reply.response).contains(&text) {
            return;
        }
        expect::rpc_error(&reply.response, refused);
        assert!(
            Instant::now() < deadline,
            "id {id} still refused long after the node holding it died: {}",
            reply.response
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A two-node cluster with `session.max_inflight` = 2, a session of `revision` whose two
/// slots are taken by countdowns running on node 1 (a third request on node 0 is refused with
/// -32003), and node 1 killed. Returns the last event id each countdown's stream delivered.
async fn fill_with_requests_of_a_dead_node(revision: &str) -> (Cluster, McpClient, Vec<String>) {
    let options = ClusterOptions::new()
        .fast_liveness(600)
        .set("session.max_inflight", 2);
    let mut cluster = Cluster::start(2, options);
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), revision).await;
    let mut last_ids = Vec::new();
    let mut streams = Vec::new();
    for id in [1, 2] {
        let args = json!({"n": 50, "interval_ms": 200});
        let call = msg::call_with_progress(json!(id), "countdown", args, &format!("run{id}"));
        let running = client.post(&cluster.url(1), &call).await;
        assert!(running.is_sse(), "the countdown streams");
        let mut running = running.sse();
        let first = running.until_method("notifications/progress", T).await;
        assert!(first.matched.is_some(), "no progress: {:?}", first.events);
        let last = first.events.iter().rev().find_map(|e| e.id.clone());
        last_ids.push(last.expect("the progress event has an id"));
        streams.push(running);
    }
    let busy = client
        .call_tool(&cluster.url(0), 3, "echo", json!({"text": "third"}))
        .await
        .answer(json!(3), T)
        .await;
    expect::rpc_error(&busy.response, -32003);
    cluster.kill9(1);
    drop(streams);
    (cluster, client, last_ids)
}

/// A session opened by `GET /sse` has not been initialized: a tool call for it on `/mcp` is
/// refused with -32600 until the client sends `initialize` (MCP 2024-11-05, basic/lifecycle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_runs_nothing_on_the_endpoint_before_initialize() {
    let cluster = Cluster::start(1, ClusterOptions::new());
    let base = cluster.url(0).trim_end_matches("/mcp").to_owned();
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("{base}/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("GET /sse");
    let mut stream = SseStream::new(resp, Instant::now());
    let endpoint = stream.next_event(T).await.expect("the endpoint event");
    let path = endpoint.data.expect("endpoint data");
    let sid = path.rsplit('=').next().expect("sessionId").to_owned();
    let client = McpClient::new().with_session(Some(&sid), Some("2024-11-05"));
    let reply = client
        .call_tool(&cluster.url(0), 1, "echo", json!({"text": "early"}))
        .await
        .answer(json!(1), T)
        .await;
    let message = expect::rpc_error(&reply.response, expect::INVALID_REQUEST);
    assert!(message.contains("initialize"), "{message}");
}

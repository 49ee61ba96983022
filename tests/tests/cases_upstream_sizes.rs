//! Case C32 on the upstream side: what an upstream sends is bounded by a per-upstream setting
//! (`max_line_bytes` for stdio, `max_message_bytes` for http, JSON or SSE answers, and sse). Under it a message
//! arrives intact; over it the client gets a clear JSON-RPC error naming the upstream and the
//! limit, never a truncated message, and the next call works.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::auth_upstream::{AuthUpstream, Policy};
use switchboard_tests::big_upstream::BigUpstream;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::metrics::upstream_status;
use switchboard_tests::msg;
use switchboard_tests::sse_upstream::SseUpstream;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};

const T: Duration = Duration::from_secs(20);

async fn call(client: &McpClient, url: &str, id: i64, tool: &str, args: Value) -> Value {
    client
        .call_tool(url, id, tool, args)
        .await
        .answer(json!(id), T)
        .await
        .response
}

/// C32 step 2 with a small limit: a stdio child configured with `max_line_bytes = 65536`
/// returns a 60,000-byte result intact; a 100,000-byte line fails that call with -32006 naming
/// the upstream and the limit (its process stopped: the stream cannot be resynchronised); the
/// next call is served by a new child. Before, the limit was a fixed 16 MiB and the message did
/// not name a setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c32_stdio_line_over_max_line_bytes_is_a_clear_error_and_the_next_call_works() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let upstream = Upstream::stdio("fixture", &python, &[stdio_fixture().as_str()])
        .prefix("")
        .set("max_line_bytes", 65536);
    let configured = start_cluster(2, &[upstream], ClusterOptions::new());
    let urls = configured.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let info = call(&client, &urls[0], 1, "info", json!({})).await;
    let first_pid = info["result"]["info"]["pid"].clone();
    assert!(first_pid.is_u64(), "{info}");

    let under = call(&client, &urls[1], 2, "huge", json!({"bytes": 60_000})).await;
    assert_eq!(
        msg::result_text(&under),
        "h".repeat(60_000),
        "arrives intact"
    );

    let over = call(&client, &urls[1], 3, "huge", json!({"bytes": 100_000})).await;
    let expected = json!({
        "code": -32006,
        "message": "upstream `fixture` sent a message larger than max_line_bytes (65536 bytes); \
                    its process was stopped",
        "data": {"upstream": "fixture", "max_line_bytes": 65536},
    });
    assert_eq!(over["error"], expected, "{over}");

    let echoed = call(&client, &urls[0], 4, "echo", json!({"s": "again"})).await;
    assert!(msg::result_text(&echoed).contains("again"), "{echoed}");
    let info = call(&client, &urls[1], 5, "info", json!({})).await;
    assert_ne!(
        info["result"]["info"]["pid"], first_pid,
        "a new child: {info}"
    );
}

/// C32 with C30: a result over `max_line_bytes` is one message's fault, not a failed start.
/// Session A's tool answers 2,000 bytes twice under `max_line_bytes = 1000` (each call fails
/// with the limit error and stops its child); session B, which never used the upstream, then
/// gets its answer at once, `/upstreamz` still says `up` with no back-off, and A's next call
/// works. Before, B got "upstream `st` is not started again yet after 2 failed starts (last:
/// ... larger than max_line_bytes ...); next try in N ms".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c32_results_over_max_line_bytes_put_no_session_in_restart_back_off() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let upstream =
        Upstream::stdio("st", &python, &[stdio_fixture().as_str()]).set("max_line_bytes", 1000);
    let configured = start_cluster(1, &[upstream], ClusterOptions::new());
    let (url, base) = (
        configured.cluster.url(0),
        configured.cluster.node(0).base_url(),
    );
    let mut a = McpClient::new();
    a.initialize(&url, "2025-11-25").await;
    let mut last_failure = None;
    for id in 1..=2 {
        let over = call(&a, &url, id, "st__huge", json!({"bytes": 2000})).await;
        assert_eq!(over["error"]["code"], -32006, "{over}");
        assert_eq!(over["error"]["data"]["max_line_bytes"], 1000, "{over}");
        // The stopped child's exit is accounted for before the next request.
        last_failure = Some(
            eventually("the stopped child to be accounted for", T, || async {
                let status = upstream_status(&base, "st").await;
                let at = status["last_error"]["at_ms"].as_u64();
                at.filter(|at| Some(*at) > last_failure)
            })
            .await,
        );
    }
    let status = upstream_status(&base, "st").await;
    assert_eq!(status["state"], "up", "{status}");
    assert_eq!(status["next_start_at_ms"], Value::Null, "{status}");

    let mut b = McpClient::new();
    b.initialize(&url, "2025-11-25").await;
    let echoed = call(&b, &url, 1, "st__echo", json!({"s": "from b"})).await;
    assert_eq!(msg::result_text(&echoed), "from b", "{echoed}");
    let again = call(&a, &url, 3, "st__echo", json!({"s": "from a"})).await;
    assert_eq!(msg::result_text(&again), "from a", "{again}");
}

/// C32 for a Streamable HTTP upstream with `max_message_bytes = 1024`: a JSON answer under it
/// arrives intact, one over it fails the call with -32006 naming the upstream, the limit, the
/// message it answered and the endpoint (also `data.endpoint`); the body is not read further, so
/// a runaway upstream cannot make the node hold it; the next call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c32_http_answer_over_max_message_bytes_is_a_clear_error() {
    let fixture = AuthUpstream::start(Policy::Require("Bearer k".into())).await;
    let upstream = Upstream::http("web", &fixture.url("/mcp"))
        .header("Authorization", "Bearer k")
        .set("max_message_bytes", 1024);
    let configured = start_cluster(1, &[upstream], ClusterOptions::new());
    let url = configured.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let small = "s".repeat(800);
    let under = call(&client, &url, 1, "web__echo", json!({"text": small})).await;
    assert_eq!(msg::result_text(&under), small, "{under}");
    let over = call(
        &client,
        &url,
        2,
        "web__echo",
        json!({"text": "b".repeat(2000)}),
    )
    .await;
    let endpoint = fixture.endpoint();
    let expected = json!({
        "code": -32006,
        "message": format!("upstream `web` sent a message larger than max_message_bytes \
                            (1024 bytes) answering `tools/call` at {endpoint}; the request \
                            failed"),
        "data": {"upstream": "web", "max_message_bytes": 1024, "endpoint": endpoint},
    });
    assert_eq!(over["error"], expected, "{over}");
    let again = call(&client, &url, 3, "web__echo", json!({"text": "ok"})).await;
    assert_eq!(msg::result_text(&again), "ok", "{again}");
}

/// C32 for a Streamable HTTP upstream answering as SSE, with `max_message_bytes = 4096`: an event
/// under it arrives intact; one over it fails the call with -32006 naming the upstream and the
/// limit; another session's call, and this session's next, work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c32_http_sse_event_over_max_message_bytes_is_a_clear_error() {
    let fixture = BigUpstream::start().await;
    let upstream = Upstream::http("big", &fixture.url()).set("max_message_bytes", 4096);
    let configured = start_cluster(1, &[upstream], ClusterOptions::new());
    let url = configured.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let under = call(
        &client,
        &url,
        1,
        "big__big",
        json!({"bytes": 3000, "sse": true}),
    )
    .await;
    assert_eq!(msg::result_text(&under), "x".repeat(3000), "{under}");
    let over = call(
        &client,
        &url,
        2,
        "big__big",
        json!({"bytes": 10_000, "sse": true}),
    )
    .await;
    assert_eq!(over["error"]["code"], -32006, "{over}");
    assert_eq!(over["error"]["data"]["upstream"], "big", "{over}");
    assert_eq!(over["error"]["data"]["max_message_bytes"], 4096, "{over}");
    let message = over["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "upstream `big` sent a message larger than max_message_bytes (4096 bytes)"
        ),
        "{over}"
    );
    let mut other = McpClient::new();
    other.initialize(&url, "2025-11-25").await;
    let theirs = call(
        &other,
        &url,
        1,
        "big__big",
        json!({"bytes": 5, "sse": true}),
    )
    .await;
    assert_eq!(msg::result_text(&theirs), "xxxxx", "{theirs}");
    let again = call(&client, &url, 3, "big__big", json!({"bytes": 7})).await;
    assert_eq!(msg::result_text(&again), "x".repeat(7), "{again}");
}

/// C32 for a legacy HTTP+SSE upstream (`kind = "sse"`) with `max_message_bytes = 2048`: an
/// answer event over it fails that call with -32006 naming the upstream and the limit (the
/// upstream connection, whose stream cannot be trusted past the cut, is dropped); a session on
/// another connection and the next call of this one work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c32_legacy_sse_event_over_max_message_bytes_is_a_clear_error() {
    let fixture = SseUpstream::start().await;
    let upstream = Upstream::sse("old", &fixture.url()).set("max_message_bytes", 2048);
    let configured = start_cluster(1, &[upstream], ClusterOptions::new());
    let url = configured.cluster.url(0);
    let (mut a, mut b) = (McpClient::new(), McpClient::new());
    a.initialize(&url, "2025-11-25").await;
    b.initialize(&url, "2025-11-25").await;
    let under = call(&a, &url, 1, "old__echo", json!({"s": "u".repeat(1000)})).await;
    assert_eq!(msg::result_text(&under), "u".repeat(1000), "{under}");
    let over = call(&a, &url, 2, "old__echo", json!({"s": "o".repeat(5000)})).await;
    let expected = json!({
        "code": -32006,
        "message": "upstream `old` sent a message larger than max_message_bytes (2048 bytes); \
                    the request failed",
        "data": {"upstream": "old", "max_message_bytes": 2048},
    });
    assert_eq!(over["error"], expected, "{over}");
    let theirs = call(&b, &url, 1, "old__echo", json!({"s": "b"})).await;
    assert_eq!(msg::result_text(&theirs), "b", "{theirs}");
    let again = call(&a, &url, 3, "old__echo", json!({"s": "again"})).await;
    assert_eq!(msg::result_text(&again), "again", "{again}");
}

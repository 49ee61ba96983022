//! Case C18: the `Accept` policy of POST. Both types, `*/*` or no `Accept` let the node choose
//! JSON or SSE per request; `text/event-stream` alone always gets a stream; `application/json`
//! alone always gets one JSON body (its notifications go to the standalone stream, and a
//! server-to-client request fails the call at once); neither gets 406 with a JSON-RPC body.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{Headers, McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::metrics::counter;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};
use switchboard_tests::{expect, modern, msg};

const T: Duration = Duration::from_secs(10);
const BOTH: &str = "application/json, text/event-stream";
const SSE: &str = "text/event-stream";
const JSON: &str = "application/json";

/// The answer form a POST with `accept` must get: `Some(Some(true))` SSE, `Some(Some(false))`
/// JSON, `Some(None)` either (the node chooses), `None` 406.
fn expected_form(accept: Option<&str>) -> Option<Option<bool>> {
    match accept {
        Some(SSE) => Some(Some(true)),
        Some(JSON) => Some(Some(false)),
        Some("text/html") => None,
        _ => Some(None),
    }
}

/// Asserts `reply` has the form `accept` allows and answers request `id`; `None` for a 406.
async fn answered_in_form(
    reply: Reply,
    accept: Option<&str>,
    id: Value,
    what: &str,
) -> Option<Value> {
    let Some(form) = expected_form(accept) else {
        let body = expect::refused(reply, StatusCode::NOT_ACCEPTABLE, Some(-32600), what).await;
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("text/event-stream"), "{what}: {body}");
        return None;
    };
    assert_eq!(reply.status, StatusCode::OK, "{what}");
    match form {
        Some(true) => assert!(reply.is_sse(), "{what}: {:?}", reply.header("content-type")),
        Some(false) => assert!(
            reply.is_json(),
            "{what}: {:?}",
            reply.header("content-type")
        ),
        None => assert!(reply.is_sse() || reply.is_json(), "{what}"),
    }
    let answer = reply.answer(id.clone(), T).await;
    assert!(answer.answers(&id), "{what}: {}", answer.response);
    Some(answer.response)
}

/// What a POST accepting only `application/json` got.
struct JsonOnly {
    status: StatusCode,
    body: Value,
    /// From sending it to having read the body.
    took: Duration,
}

/// POSTs `call` to `url` in `client`'s session with `Accept: application/json` alone; asserts
/// the answer is one JSON body.
async fn post_json_only(client: &McpClient, url: &str, call: &Value) -> JsonOnly {
    let headers = client.post_headers().set("Accept", JSON);
    let started = Instant::now();
    let reply = client
        .send(Method::POST, url, &headers, Some(call.to_string()))
        .await;
    let status = reply.status;
    assert!(
        reply.is_json(),
        "content type {:?}",
        reply.header("content-type")
    );
    let body = reply.json().await;
    JsonOnly {
        status,
        body,
        took: started.elapsed(),
    }
}

fn with_accept(headers: Headers, accept: Option<&str>) -> Headers {
    match accept {
        Some(a) => headers.set("Accept", a),
        None => headers.remove("Accept"),
    }
}

/// C18 step 1: each `Accept` value of the case on `initialize` and on a fast `tools/call`
/// (`echo`): SSE alone is answered with a stream even though the answer is ready at once, JSON
/// alone with one JSON body, `text/html` with 406 and no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c18_each_accept_value_gets_the_form_it_allows() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let urls = cluster.urls();
    let accepts = [
        Some(BOTH),
        Some(SSE),
        Some(JSON),
        Some("*/*"),
        None,
        Some("text/html"),
    ];
    let mut sessions = Vec::new();
    for accept in accepts {
        let anonymous = McpClient::new();
        let headers = with_accept(anonymous.post_headers(), accept);
        let init = msg::init("2025-11-25", json!({}));
        let reply = anonymous
            .send(Method::POST, &urls[0], &headers, Some(init.to_string()))
            .await;
        let sid = reply.session_id();
        let what = format!("initialize with Accept {accept:?}");
        match answered_in_form(reply, accept, json!(1), &what).await {
            Some(response) => {
                assert_eq!(
                    response["result"]["protocolVersion"], "2025-11-25",
                    "{what}"
                );
                sessions.push(sid.unwrap_or_else(|| panic!("{what}: no Mcp-Session-Id")));
            }
            None => assert_eq!(sid, None, "{what}"),
        }
    }
    assert_eq!(
        sessions.len(),
        5,
        "every Accept but text/html opened a session"
    );
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    for (i, accept) in accepts.into_iter().enumerate() {
        let headers = with_accept(client.post_headers(), accept);
        let call = msg::call(10 + i, "echo", json!({"text": "hi"}));
        let reply = client
            .send(Method::POST, &urls[1], &headers, Some(call.to_string()))
            .await;
        let what = format!("tools/call echo with Accept {accept:?}");
        if let Some(response) = answered_in_form(reply, accept, json!(10 + i), &what).await {
            assert_eq!(msg::result_text(&response), "hi", "{what}");
        }
    }
}

/// C18: a client accepting only JSON calls `countdown` with a progress token: exactly one JSON
/// body with the result, although the call takes far longer than `http.sse_after`; its progress
/// notifications reach the session's standalone stream (open on the other node) instead of
/// being lost, and are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c18_json_only_countdown_is_one_json_body_and_progress_goes_to_the_standalone_stream() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let mut standalone = client.get_stream(&urls[1], None).await.sse();
    let before = counter(
        &cluster.node(0).base_url(),
        "switchboard_notifications_rerouted_total",
    )
    .await;
    let call = msg::call_with_progress(
        7,
        "countdown",
        json!({"n": 3, "interval_ms": 150}),
        "cd-json",
    );
    let JsonOnly { status, body, took } = post_json_only(&client, &urls[0], &call).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        took >= Duration::from_millis(400),
        "the call ran its three steps"
    );
    assert_eq!(body["id"], 7, "{body}");
    assert_eq!(msg::result_text(&body), "countdown finished", "{body}");
    let got = standalone
        .until(T, |m| {
            m["method"] == "notifications/progress" && m["params"]["progress"] == 3
        })
        .await;
    let progress: Vec<&Value> = got
        .messages
        .iter()
        .map(|(_, m)| m)
        .chain(got.matched.as_ref())
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    let steps: Vec<&Value> = progress.iter().map(|m| &m["params"]["progress"]).collect();
    assert_eq!(
        steps,
        [&json!(1), &json!(2), &json!(3)],
        "read: {:?}",
        got.events
    );
    assert!(progress
        .iter()
        .all(|m| m["params"]["progressToken"] == "cd-json"));
    let after = counter(
        &cluster.node(0).base_url(),
        "switchboard_notifications_rerouted_total",
    )
    .await;
    assert_eq!(after - before, 3, "each rerouted notification is counted");
}

/// C18: a client accepting only JSON calls `sample` (which asks the client for sampling, a
/// capability it declared): the request cannot be sent on a single JSON answer, so the tool
/// fails at once with an error saying why, instead of waiting `client_request_timeout_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c18_json_only_sample_fails_at_once_with_a_clear_error() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;
    let call = msg::call(8, "sample", json!({"prompt": "Capital of France?"}));
    let JsonOnly { body, took, .. } = post_json_only(&client, &urls[1], &call).await;
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    assert_eq!(body["id"], 8, "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = msg::result_text(&body);
    assert!(
        text.contains("sampling/createMessage") && text.contains("accepts only application/json"),
        "{text}"
    );
    // The session is unharmed: the same call with both types accepted goes on to ask.
    let reply = client
        .post(&urls[0], &msg::call(9, "sample", json!({"prompt": "?"})))
        .await;
    let mut stream = reply.sse();
    let asked = stream.until_method("sampling/createMessage", T).await;
    assert!(asked.matched.is_some(), "read: {:?}", asked.events);
}

/// C18 on the 2026-07-28 path, which chooses JSON or SSE itself: `text/event-stream` alone gets
/// a stream for a fast `echo`; `application/json` alone gets one JSON body for a `countdown`
/// that sends progress (dropped and counted: the revision has no standalone stream);
/// `text/html` gets 406; `subscriptions/listen`, a stream by nature, gets 406 for JSON alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c18_stateless_requests_follow_the_same_accept_policy() {
    let cluster = Cluster::start(1, ClusterOptions::new());
    let url = cluster.url(0);
    let echo = modern::request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
        json!({}),
    );
    let h = modern::headers("tools/call", Some("echo"));
    let reply = modern::post(&url, &h.clone().set("Accept", SSE), &echo).await;
    assert!(
        reply.is_sse(),
        "SSE only: {:?}",
        reply.header("content-type")
    );
    let answer = reply.answer(json!(1), T).await;
    assert_eq!(msg::result_text(&answer.response), "x");
    let reply = modern::post(&url, &h.clone().set("Accept", "text/html"), &echo).await;
    expect::refused(
        reply,
        StatusCode::NOT_ACCEPTABLE,
        None,
        "stateless text/html",
    )
    .await;

    let before = counter(
        &cluster.node(0).base_url(),
        "switchboard_notifications_dropped_total",
    )
    .await;
    let params = json!({"name": "countdown", "arguments": {"n": 2, "interval_ms": 100},
                        "_meta": {"progressToken": "p"}});
    let countdown = modern::request(2, "tools/call", params, json!({}));
    let h = modern::headers("tools/call", Some("countdown")).set("Accept", JSON);
    let reply = modern::post(&url, &h, &countdown).await;
    assert!(
        reply.is_json(),
        "JSON only: {:?}",
        reply.header("content-type")
    );
    let body = reply.json().await;
    assert_eq!(msg::result_text(&body), "countdown finished", "{body}");
    let after = counter(
        &cluster.node(0).base_url(),
        "switchboard_notifications_dropped_total",
    )
    .await;
    assert_eq!(
        after - before,
        2,
        "both progress notifications counted as dropped"
    );

    let listen = modern::request(
        3,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
        json!({}),
    );
    let h = modern::headers("subscriptions/listen", None).set("Accept", JSON);
    let reply = modern::post(&url, &h, &listen).await;
    // Refused once the body was read: with the request's id (JSON-RPC 2.0 §5).
    let what = "listen with JSON only";
    expect::refused_with_id(reply, StatusCode::NOT_ACCEPTABLE, None, &json!(3), what).await;
}

/// C18 through a node-bound upstream: a stdio child owned by node A asks for sampling during a
/// JSON-only call that the client sent to node B (the call runs on A over the bus): the refusal
/// travels with the forwarded call, so the child gets the JSON-RPC error at once and its tool
/// answers with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c18_json_only_refusal_reaches_a_child_on_another_node() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let upstream = Upstream::stdio("fixture", &python, &[stdio_fixture().as_str()]).prefix("");
    let configured = start_cluster(2, &[upstream], ClusterOptions::new());
    let urls = configured.cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;
    // The session's child starts on node A.
    let echoed = client
        .call_tool(&urls[0], 1, "echo", json!({"s": "here"}))
        .await
        .answer(json!(1), T)
        .await;
    assert!(
        msg::result_text(&echoed.response).contains("here"),
        "{}",
        echoed.response
    );
    let call = msg::call(2, "ask", json!({"prompt": "?"}));
    let JsonOnly { body, took, .. } = post_json_only(&client, &urls[1], &call).await;
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    let text = msg::result_text(&body);
    assert!(text.contains("accepts only application/json"), "{body}");
    assert!(
        text.contains("-32601"),
        "the child got a JSON-RPC error: {body}"
    );
}

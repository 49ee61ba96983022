//! Requests in flight across nodes: cases C22 (a duplicate in-flight id is refused, never
//! crossed; `"1"` and `1` differ) and C26 (server-to-client requests answered on another node),
//! plus `notifications/cancelled` sent to another node.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::{Answer, McpClient};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::msg;
use switchboard_tests::sse::SseStream;

const T: Duration = Duration::from_secs(10);

/// Starts a countdown with progress and returns its stream once the first progress event is in
/// (so the request is certainly in flight).
async fn running_countdown(
    client: &McpClient,
    url: &str,
    id: Value,
    n: u64,
    interval_ms: u64,
) -> SseStream {
    let call = msg::call_with_progress(
        id.clone(),
        "countdown",
        json!({"n": n, "interval_ms": interval_ms}),
        "run",
    );
    let reply = client.post(url, &call).await;
    assert_eq!(reply.status, StatusCode::OK, "countdown {id}");
    assert!(reply.is_sse(), "countdown {id} with progress streams");
    let mut stream = reply.sse();
    let first = stream.until_method("notifications/progress", T).await;
    assert!(
        first.matched.is_some(),
        "countdown {id}: no progress; read {:?}",
        first.events
    );
    stream
}

/// Whether a response reports failure: a JSON-RPC error or a tool result with `isError`.
fn is_failure(response: &Value) -> bool {
    response.get("error").is_some() || response["result"]["isError"] == json!(true)
}

/// C22 steps 1–2: while id 1 runs on A, a request with id 1 on B is refused with -32600 naming
/// the id; string `"1"` and number `1` are different ids and both get their own results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c22_duplicate_in_flight_id_is_refused_and_string_and_number_differ() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;

    let mut a = running_countdown(&client, &urls[0], json!(1), 3, 300).await;
    let dup = client
        .call_tool(&urls[1], 1, "echo", json!({"text": "B"}))
        .await
        .answer(json!(1), T)
        .await;
    let message = expect::rpc_error(&dup.response, expect::INVALID_REQUEST);
    assert!(
        message.contains('1'),
        "the error names the duplicate id: {message:?}"
    );
    let own = a
        .until_response(&json!(1), T)
        .await
        .matched
        .expect("A's result");
    assert!(
        msg::result_text(&own).contains("countdown finished"),
        "A got its own result: {own}"
    );

    for (running, other) in [(json!("1"), json!(1)), (json!(1), json!("1"))] {
        let mut a = running_countdown(&client, &urls[0], running.clone(), 3, 300).await;
        let b = client
            .call_tool(&urls[1], other.clone(), "echo", json!({"text": "tag-B"}))
            .await;
        let b = b.answer(other.clone(), T).await;
        assert!(
            msg::result_text(&b.response).contains("tag-B"),
            "{other} while {running} runs: {}",
            b.response
        );
        let own = a
            .until_response(&running, T)
            .await
            .matched
            .expect("A's result");
        assert!(
            msg::result_text(&own).contains("countdown finished"),
            "{running}: {own}"
        );
    }
}

/// C22 step 3: the two requests sent at the same moment, ten times: never crossed, never both
/// refused, never a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c22_simultaneous_same_id_never_crosses() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    for round in 0..10 {
        let tag = format!("tag-B-{round}");
        let slow = msg::call(7, "countdown", json!({"n": 2, "interval_ms": 100}));
        let quick = msg::call(7, "echo", json!({"text": tag}));
        let (a, b) = tokio::join!(client.post(&urls[0], &slow), client.post(&urls[1], &quick));
        let (a, b) = tokio::join!(a.answer(json!(7), T), b.answer(json!(7), T));
        let refused = |x: &Answer| x.response["error"]["code"] == json!(expect::INVALID_REQUEST);
        assert!(
            !(refused(&a) && refused(&b)),
            "round {round}: both refused: {} / {}",
            a.response,
            b.response
        );
        if !refused(&a) {
            let text = msg::result_text(&a.response);
            assert!(
                text.contains("countdown finished") && !text.contains(&tag),
                "round {round}: A got {}",
                a.response
            );
        }
        if !refused(&b) {
            assert!(
                msg::result_text(&b.response).contains(&tag),
                "round {round}: B got {}",
                b.response
            );
        }
    }
}

/// C26 steps 1–5: `sampling/createMessage` goes out on the call's own stream with an `s-` id;
/// the answer POSTed to B gets 202 and reaches the call on A; the GET stream sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c26_sampling_answer_posted_to_another_node_reaches_the_call() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;
    let get = client.get_stream(&urls[2], None).await;
    assert_eq!(get.status, StatusCode::OK, "GET on C");
    let mut get = get.sse();

    let reply = client
        .call_tool(&urls[0], 7, "sample", json!({"prompt": "say ok"}))
        .await;
    assert!(reply.is_sse(), "a sampling call streams");
    let mut stream = reply.sse();
    let got = stream.until_method("sampling/createMessage", T).await;
    let request = got
        .matched
        .unwrap_or_else(|| panic!("no sampling request on the call's stream: {:?}", got.events));
    let server_id = request["id"]
        .as_str()
        .unwrap_or_else(|| panic!("server request id must be a string: {request}"));
    assert!(
        server_id.starts_with("s-"),
        "server request id {server_id:?}"
    );
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "ok-from-b"}, "model": "m"});
    expect::accepted(
        client
            .post(&urls[1], &msg::result(&request["id"], answer))
            .await,
        "sampling answer on B",
    )
    .await;
    let done = stream.until_response(&json!(7), T).await;
    let response = done
        .matched
        .unwrap_or_else(|| panic!("call 7 hangs after the answer: {:?}", done.events));
    assert!(
        msg::result_text(&response).contains("ok-from-b"),
        "{response}"
    );
    assert!(!is_failure(&response), "{response}");

    let first = get.next_event(Duration::from_millis(300)).await;
    assert!(
        first.as_ref().is_none_or(|e| e.is_priming()),
        "GET stream got {first:?}"
    );
    let next = get.next_event(Duration::from_millis(300)).await;
    assert!(
        next.is_none(),
        "the sampling request must go on the call's stream only; GET got {next:?}"
    );
}

/// C26 variants: `elicitation/create` and `roots/list` answered on other nodes; server request
/// ids are unique in the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c26_elicitation_and_roots_answered_on_other_nodes() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;
    let variants = [
        (
            "elicit",
            json!({"message": "name?"}),
            "elicitation/create",
            json!({"action": "accept", "content": {"answer": "ok-elicit"}}),
            "ok-elicit",
        ),
        (
            "list_roots",
            json!({}),
            "roots/list",
            json!({"roots": [{"uri": "file:///ok-root", "name": "r"}]}),
            "file:///ok-root",
        ),
        (
            "sample",
            json!({"prompt": "again"}),
            "sampling/createMessage",
            json!({"role": "assistant", "content": {"type": "text", "text": "ok-2"}, "model": "m"}),
            "ok-2",
        ),
    ];
    let mut server_ids = Vec::new();
    for (i, (tool, args, method, answer, marker)) in variants.into_iter().enumerate() {
        let id = json!(10 + i);
        let mut stream = client
            .call_tool(&urls[i % 3], id.clone(), tool, args)
            .await
            .sse();
        let got = stream.until_method(method, T).await;
        let request = got
            .matched
            .unwrap_or_else(|| panic!("{tool}: no {method}; read {:?}", got.events));
        server_ids.push(request["id"].as_str().expect("string id").to_owned());
        let answer_url = &urls[(i + 1) % 3];
        expect::accepted(
            client
                .post(answer_url, &msg::result(&request["id"], answer))
                .await,
            method,
        )
        .await;
        let done = stream.until_response(&id, T).await;
        let response = done
            .matched
            .unwrap_or_else(|| panic!("{tool} hangs after the answer: {:?}", done.events));
        assert!(!is_failure(&response), "{tool}: {response}");
        let text = msg::result_text(&response);
        assert!(
            text.contains(marker),
            "{tool} reports the answer: {response}"
        );
    }
    let mut unique = server_ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        server_ids.len(),
        "server request ids unique in the session: {server_ids:?}"
    );
}

/// C26 variants: the client answers with an error, never answers (client_request_timeout_ms),
/// or did not declare the capability; the call always ends, with a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c26_error_answer_no_answer_and_undeclared_capability_end_the_call() {
    let cluster = Cluster::start(
        3,
        ClusterOptions::new().set("session.client_request_timeout", "1s"),
    );
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;

    let mut stream = client
        .call_tool(&urls[0], 20, "sample", json!({"prompt": "x"}))
        .await
        .sse();
    let request = stream
        .until_method("sampling/createMessage", T)
        .await
        .matched
        .expect("sampling request");
    let error = json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "user declined"}});
    expect::accepted(client.post(&urls[2], &error).await, "error answer on C").await;
    let response = stream
        .until_response(&json!(20), T)
        .await
        .matched
        .expect("call 20 ends after an error answer");
    assert!(
        is_failure(&response),
        "an error answer fails the call: {response}"
    );

    let started = Instant::now();
    let mut stream = client
        .call_tool(&urls[1], 21, "sample", json!({"prompt": "x"}))
        .await
        .sse();
    let response = stream
        .until_response(&json!(21), T)
        .await
        .matched
        .expect("call 21 ends without an answer");
    assert!(
        is_failure(&response),
        "no answer fails the call: {response}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "timed out after {took:?}"
    );

    let mut bare = McpClient::new();
    bare.initialize(&urls[0], "2025-11-25").await;
    let answer = bare
        .call_tool(&urls[2], 22, "sample", json!({"prompt": "x"}))
        .await
        .answer(json!(22), T)
        .await;
    assert!(
        answer.with_method("sampling/createMessage").is_empty(),
        "sent to a client without sampling"
    );
    assert!(
        is_failure(&answer.response),
        "undeclared capability fails the call: {}",
        answer.response
    );
}

/// `notifications/cancelled` POSTed to B stops a call running on A: its stream ends without the
/// normal result, and the id is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_on_another_node_stops_the_call() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    let mut stream = running_countdown(&client, &urls[0], json!(1), 50, 100).await;
    expect::accepted(
        client.post(&urls[1], &msg::cancelled(1)).await,
        "notifications/cancelled on B",
    )
    .await;
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
    assert!(
        messages.len() < 20,
        "cancelled call kept going: {} more messages",
        messages.len()
    );
    let echo = client
        .call_tool(&urls[2], 1, "echo", json!({"text": "free"}))
        .await
        .answer(json!(1), T)
        .await;
    assert!(
        msg::result_text(&echo.response).contains("free"),
        "id 1 free after cancel: {}",
        echo.response
    );
}

//! Era bridging towards a 2026-07-28 upstream (`kind = "http"`, `revision = "2026-07-28"`): the
//! upstream is a real stateless MCP server (a Switchboard node with the built-in demo and the
//! memory store, serving 2026-07-28 with MRTR), the cluster is three nodes on one Redis.
//!
//! - A session-era client (2025-11-25) keeps its session in Redis while the upstream stays
//!   stateless: tools, progress, and the upstream's MRTR questions asked as real
//!   `sampling/createMessage` / `elicitation/create` requests whose answers land on another node.
//! - A 2026-07-28 client gets the upstream's questions as its own MRTR round and completes on
//!   another node.
//! - Cancelling the session-era call closes the upstream's response stream (the upstream counts
//!   a stateless cancellation).

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::metrics::counter;
use switchboard_tests::modern::{self, send};
use switchboard_tests::node::Node;
use switchboard_tests::temp::TempDir;
use switchboard_tests::upstreams::{start_cluster, ConfiguredCluster, Upstream};
use switchboard_tests::{expect, legacy_sse, msg};

const T: Duration = Duration::from_secs(15);

/// A stateless 2026-07-28 server: one Switchboard node, memory store, demo tools.
fn modern_upstream(logs: &TempDir) -> Node {
    let mut node = Node::spawn("upstream", None, &[], logs.path());
    assert!(node.wait_ready(), "{}", node.log_tail(40));
    node
}

fn cluster_in_front(upstream: &Node) -> ConfiguredCluster {
    let member = Upstream::http("m", &upstream.url()).revision("2026-07-28");
    start_cluster(3, &[member], ClusterOptions::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_client_uses_a_stateless_upstream_and_answers_its_questions_anywhere() {
    let logs = TempDir::new("sb-bridge");
    let upstream = modern_upstream(&logs);
    let configured = cluster_in_front(&upstream);
    let urls = configured.cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;

    let list = client
        .post(&urls[1], &msg::request(2, "tools/list", json!({})))
        .await;
    let list = list.answer(json!(2), T).await.response;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"m__echo") && names.contains(&"m__sample"),
        "{names:?}"
    );

    let echo = client
        .call_tool(&urls[2], 3, "m__echo", json!({"text": "hi"}))
        .await;
    let echo = echo.answer(json!(3), T).await.response;
    assert_eq!(msg::result_text(&echo), "hi", "{echo}");
    assert!(
        echo["result"].get("resultType").is_none(),
        "session era: {echo}"
    );

    // The upstream's MRTR questions reach the session client as server requests; each answer
    // is POSTed to another node than the call's.
    let cases = [
        (
            "m__sample",
            json!({"prompt": "Capital of France?"}),
            "sampling/createMessage",
            json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}),
            "Paris",
        ),
        (
            "m__elicit",
            json!({"message": "Favourite number?"}),
            "elicitation/create",
            json!({"action": "accept", "content": {"answer": "42"}}),
            "42",
        ),
        (
            "m__list_roots",
            json!({}),
            "roots/list",
            json!({"roots": [{"uri": "file:///bridged", "name": "b"}]}),
            "file:///bridged",
        ),
    ];
    for (i, (tool, args, method, answer, marker)) in cases.into_iter().enumerate() {
        let id = json!(10 + i);
        let mut stream = client
            .call_tool(&urls[i % 3], id.clone(), tool, args)
            .await
            .sse();
        let got = stream.until_method(method, T).await;
        let request = got
            .matched
            .unwrap_or_else(|| panic!("{tool}: no {method}; read {:?}", got.events));
        let answer_url = &urls[(i + 1) % 3];
        let posted = client
            .post(answer_url, &msg::result(&request["id"], answer))
            .await;
        expect::accepted(posted, method).await;
        let done = stream.until_response(&id, T).await;
        let response = done
            .matched
            .unwrap_or_else(|| panic!("{tool} hangs after the answer: {:?}", done.events));
        assert!(
            msg::result_text(&response).contains(marker),
            "{tool}: {response}"
        );
        assert!(
            response["result"].get("isError").is_none_or(|e| e == false),
            "{response}"
        );
    }

    // Progress of the upstream's request reaches the session client.
    let call = msg::request(
        20,
        "tools/call",
        json!({"name": "m__countdown", "arguments": {"n": 3, "interval_ms": 10},
               "_meta": {"progressToken": "p-20"}}),
    );
    let mut stream = client.post(&urls[1], &call).await.sse();
    let done = stream.until_response(&json!(20), T).await;
    let progress: Vec<&Value> = done
        .messages
        .iter()
        .map(|(_, m)| m)
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{:?}", done.events);
    assert!(progress
        .iter()
        .all(|p| p["params"]["progressToken"] == "p-20"));

    // logging/setLevel is session state here, never sent to the stateless upstream.
    let level = client
        .post(
            &urls[2],
            &msg::request(21, "logging/setLevel", json!({"level": "warning"})),
        )
        .await;
    let level = level.answer(json!(21), T).await.response;
    assert!(level.get("error").is_none(), "{level}");

    // notifications/cancelled for a long call closes the upstream's response stream. The call
    // carries a progress token so that its first progress shows the upstream running it.
    let before = counter(
        &upstream.base_url(),
        "switchboard_stateless_cancelled_total",
    )
    .await;
    let call = msg::request(
        22,
        "tools/call",
        json!({"name": "m__countdown", "arguments": {"n": 100, "interval_ms": 100},
               "_meta": {"progressToken": "p-22"}}),
    );
    let mut stream = client.post(&urls[0], &call).await.sse();
    let running = stream.until_method("notifications/progress", T).await;
    assert!(running.matched.is_some(), "{:?}", running.events);
    let cancel = msg::notification(
        "notifications/cancelled",
        json!({"requestId": 22, "reason": "test"}),
    );
    expect::accepted(client.post(&urls[2], &cancel).await, "cancel").await;
    eventually("the upstream to see its stream closed", T, || {
        let upstream = &upstream;
        async move {
            (counter(
                &upstream.base_url(),
                "switchboard_stateless_cancelled_total",
            )
            .await
                > before)
                .then_some(())
        }
    })
    .await;
    // Everything reached the upstream as stateless requests: it never made a session.
    assert_eq!(
        counter(&upstream.base_url(), "switchboard_sessions_created_total").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_meets_the_upstreams_questions_as_its_own_mrtr_round() {
    let logs = TempDir::new("sb-bridge");
    let upstream = modern_upstream(&logs);
    let configured = cluster_in_front(&upstream);
    let urls = configured.cluster.urls();
    let caps = json!({"sampling": {}});
    let first = modern::request(
        1,
        "tools/call",
        json!({"name": "m__sample", "arguments": {"prompt": "Two plus two?"}}),
        caps,
    );
    let asked = send(&urls[0], &first)
        .await
        .answer(json!(1), T)
        .await
        .response;
    let full = asked.clone();
    let asked = &asked["result"];
    assert_eq!(asked["resultType"], "input_required", "{full}");
    let (key, question) = asked["inputRequests"]
        .as_object()
        .and_then(|q| q.iter().next())
        .unwrap_or_else(|| panic!("{asked}"));
    assert_eq!(question["method"], "sampling/createMessage");
    assert_eq!(
        question["params"]["messages"][0]["content"]["text"],
        "Two plus two?"
    );
    let mut retry = first.clone();
    retry["id"] = json!(2);
    retry["params"]["inputResponses"] =
        json!({key: {"role": "assistant", "content": {"type": "text", "text": "four"}}});
    retry["params"]["requestState"] = asked["requestState"].clone();
    let done = send(&urls[1], &retry)
        .await
        .answer(json!(2), T)
        .await
        .response;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["text"], "four",
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_a_bridged_call_holds_the_upstreams_result() {
    let logs = TempDir::new("sb-bridge");
    let upstream = modern_upstream(&logs);
    let member = Upstream::http("m", &upstream.url()).revision("2026-07-28");
    let options = ClusterOptions::new().set("stateless.tasks.after", "200ms");
    let configured = start_cluster(2, &[member], options);
    let urls = configured.cluster.urls();
    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let call = modern::request(
        1,
        "tools/call",
        json!({"name": "m__countdown", "arguments": {"n": 3, "interval_ms": 300}}),
        caps.clone(),
    );
    let r = send(&urls[0], &call)
        .await
        .answer(json!(1), T)
        .await
        .response;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let task = r["result"]["taskId"].as_str().expect("taskId").to_owned();
    let done = eventually("the task to complete", T, || {
        let (url, task, caps) = (urls[1].clone(), task.clone(), caps.clone());
        async move {
            let get = modern::request(2, "tasks/get", json!({"taskId": task}), caps);
            let h = modern::headers("tasks/get", Some(&task));
            let r = switchboard_tests::modern::post(&url, &h, &get)
                .await
                .answer(json!(2), T)
                .await
                .response;
            (r["result"]["status"] == "completed").then_some(r)
        }
    })
    .await;
    // The upstream never saw the extension: the result is the tool's, not a task of its own.
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "countdown finished",
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2024_11_05_sse_client_answers_the_stateless_upstreams_question_on_another_node() {
    let logs = TempDir::new("sb-bridge");
    let upstream = modern_upstream(&logs);
    let configured = cluster_in_front(&upstream);
    let cluster = &configured.cluster;
    let http = reqwest::Client::new();
    let (mut stream, path) = legacy_sse::open(&http, &cluster.node(0).base_url()).await;
    let on = |i: usize| format!("{}{path}", cluster.node(i).base_url());
    let init = msg::init("2024-11-05", json!({"sampling": {}}));
    let answer = legacy_sse::exchange(&http, &mut stream, &on(1), init).await;
    assert_eq!(
        answer["result"]["protocolVersion"], "2024-11-05",
        "{answer}"
    );
    let (status, _) = legacy_sse::post(&http, &on(2), &msg::inited().to_string()).await;
    assert_eq!(status, 202);
    // The call on C; the upstream's question arrives on A's stream; the answer goes to B.
    let call = msg::call(2, "m__sample", json!({"prompt": "Old client?"}));
    let request = legacy_sse::exchange(&http, &mut stream, &on(2), call).await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let reply = msg::result(
        &request["id"],
        json!({"role": "assistant", "content": {"type": "text", "text": "still here"}, "model": "t"}),
    );
    let result = legacy_sse::exchange(&http, &mut stream, &on(1), reply).await;
    assert_eq!(result["id"], 2, "{result}");
    assert!(msg::result_text(&result).contains("still here"), "{result}");
    assert_eq!(
        counter(&upstream.base_url(), "switchboard_sessions_created_total").await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_the_upstream_no_longer_accepts_starts_the_request_over() {
    // The upstream's requestState lives 300 ms: an answer slower than that is refused by it.
    let logs = TempDir::new("sb-bridge");
    let settings = [("stateless.mrtr.state_ttl".to_owned(), "300ms".to_owned())];
    let mut upstream = Node::spawn("upstream", None, &settings, logs.path());
    assert!(upstream.wait_ready(), "{}", upstream.log_tail(40));
    let configured = cluster_in_front(&upstream);
    let urls = configured.cluster.urls();
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", msg::all_client_capabilities())
        .await;
    let mut stream = client
        .call_tool(&urls[0], 2, "m__sample", json!({"prompt": "slow?"}))
        .await
        .sse();
    let answer = |text: &str| json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"});
    // First question: answered too late for the upstream's state.
    let got = stream.until_method("sampling/createMessage", T).await;
    let first = got.matched.unwrap_or_else(|| panic!("{:?}", got.events));
    // Answering late on purpose (past the upstream's 300 ms requestState TTL) is the thing under
    // test: this sleep waits for no event.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let posted = client
        .post(&urls[1], &msg::result(&first["id"], answer("late")))
        .await;
    expect::accepted(posted, "late answer").await;
    // The front starts over: the same question again, answered at once this time.
    let got = stream.until_method("sampling/createMessage", T).await;
    let second = got
        .matched
        .unwrap_or_else(|| panic!("asked again: {:?}", got.events));
    assert_ne!(first["id"], second["id"]);
    let posted = client
        .post(&urls[1], &msg::result(&second["id"], answer("in time")))
        .await;
    expect::accepted(posted, "prompt answer").await;
    let done = stream.until_response(&json!(2), T).await;
    let response = done.matched.unwrap_or_else(|| panic!("{:?}", done.events));
    assert!(
        msg::result_text(&response).contains("in time"),
        "{response}"
    );
}

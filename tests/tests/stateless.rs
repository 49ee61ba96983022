//! MCP 2026-07-28 (stateless) requests on a three-node cluster, beside a session-era client on
//! the same endpoint: `server/discover`, tools with `Mcp-Method`/`Mcp-Name` (plain and
//! `=?base64?…?=`), every refusal of revisions.md 1.6.5–1.6.6, 1.7, 1.8.1, 3.1.10, 3.2.5, 3.3
//! and 5.13, the per-request log level, and a closed response stream cancelling its request
//! (1.3.17).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{Headers, McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually;
use switchboard_tests::modern::{self, post, V};

const T: Duration = Duration::from_secs(10);

fn modern(id: i64, method: &str, params: Value, caps: Value) -> Value {
    modern::request(id, method, params, caps)
}

fn hdrs(method: &str, name: Option<&str>) -> Headers {
    modern::headers(method, name)
}

/// Asserts a refusal's status and JSON-RPC code; returns the error object.
async fn refused(reply: Reply, status: StatusCode, code: i64, what: &str) -> Value {
    assert_eq!(reply.status, status, "{what}");
    assert!(reply.session_id().is_none(), "{what}: no session id");
    let body = reply.json().await;
    assert_eq!(body["error"]["code"], code, "{what}: {body}");
    body["error"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_are_served_on_any_node_beside_a_session() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut legacy = McpClient::new();
    legacy.initialize(&urls[0], "2025-11-25").await;

    let discover = modern(1, "server/discover", json!({}), json!({}));
    let reply = post(&urls[1], &hdrs("server/discover", None), &discover).await;
    assert!(reply.session_id().is_none(), "no session is minted");
    let r = reply.answer(json!(1), T).await.response;
    assert_eq!(r["result"]["supportedVersions"], json!([V]), "{r}");
    assert!(r["result"]["capabilities"]["tools"].is_object(), "{r}");
    assert_eq!(r["result"]["resultType"], "complete");
    assert!(r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].is_string());

    let list = modern(2, "tools/list", json!({}), json!({}));
    let r = post(&urls[2], &hdrs("tools/list", None), &list).await;
    let r = r.answer(json!(2), T).await.response;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(r["result"]["tools"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));

    let call = modern(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
        json!({}),
    );
    for (url, name) in [(&urls[0], "echo"), (&urls[1], "=?base64?ZWNobw==?=")] {
        let r = post(url, &hdrs("tools/call", Some(name)), &call).await;
        let r = r.answer(json!(3), T).await.response;
        assert_eq!(r["result"]["content"][0]["text"], "hi", "{name}: {r}");
        assert_eq!(r["result"]["resultType"], "complete");
    }

    // The session keeps working meanwhile, on another node.
    let r = legacy
        .call_tool(&urls[2], 4, "echo", json!({"text": "old"}))
        .await;
    let r = r.answer(json!(4), T).await.response;
    assert_eq!(r["result"]["content"][0]["text"], "old", "{r}");
    assert!(
        r["result"].get("resultType").is_none(),
        "session era unchanged: {r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stateless_rule_refuses_with_its_status_and_code() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let call = modern(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
        json!({}),
    );
    let good = hdrs("tools/call", Some("echo"));
    let url = &urls[0];

    let h = good.clone().set("Mcp-Name", "add");
    refused(
        post(url, &h, &call).await,
        StatusCode::BAD_REQUEST,
        -32020,
        "Mcp-Name differs",
    )
    .await;
    let h = good.clone().set("Mcp-Name", "=?base64?not base64!?=");
    refused(
        post(url, &h, &call).await,
        StatusCode::BAD_REQUEST,
        -32020,
        "bad base64",
    )
    .await;
    let h = good.clone().remove("Mcp-Method");
    refused(
        post(&urls[1], &h, &call).await,
        StatusCode::BAD_REQUEST,
        -32020,
        "no Mcp-Method",
    )
    .await;
    let h = good.clone().set("Mcp-Method", "tools/list");
    refused(
        post(url, &h, &call).await,
        StatusCode::BAD_REQUEST,
        -32020,
        "Mcp-Method differs",
    )
    .await;
    let h = good.clone().remove("MCP-Protocol-Version");
    refused(
        post(url, &h, &call).await,
        StatusCode::BAD_REQUEST,
        -32020,
        "no version header",
    )
    .await;

    let mut future = call.clone();
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let h = good.clone().set("MCP-Protocol-Version", "2099-01-01");
    let e = refused(
        post(&urls[2], &h, &future).await,
        StatusCode::BAD_REQUEST,
        -32022,
        "unsupported",
    )
    .await;
    assert_eq!(e["data"]["supported"], json!([V]), "{e}");
    assert_eq!(e["data"]["requested"], "2099-01-01");

    let mut bare = call.clone();
    bare["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    refused(
        post(url, &good, &bare).await,
        StatusCode::BAD_REQUEST,
        -32602,
        "no capabilities",
    )
    .await;

    let sample = modern(
        2,
        "tools/call",
        json!({"name": "sample", "arguments": {"prompt": "?"}}),
        json!({}),
    );
    let h = hdrs("tools/call", Some("sample"));
    let e = refused(
        post(url, &h, &sample).await,
        StatusCode::BAD_REQUEST,
        -32021,
        "no sampling",
    )
    .await;
    assert!(
        e["data"]["requiredCapabilities"]["sampling"].is_object(),
        "{e}"
    );
    // A progress token is a string or number within session.max_progress_token.
    let mut long = modern(
        5,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
        json!({}),
    );
    long["params"]["_meta"]["progressToken"] = json!("t".repeat(300));
    let h_echo = hdrs("tools/call", Some("echo"));
    refused(
        post(url, &h_echo, &long).await,
        StatusCode::BAD_REQUEST,
        -32602,
        "long token",
    )
    .await;
    long["params"]["_meta"]["progressToken"] = json!({"an": "object"});
    refused(
        post(url, &h_echo, &long).await,
        StatusCode::BAD_REQUEST,
        -32602,
        "object token",
    )
    .await;
    // `false` or `null` declares nothing.
    let declined = modern(
        2,
        "tools/call",
        json!({"name": "sample", "arguments": {"prompt": "?"}}),
        json!({"sampling": false}),
    );
    refused(
        post(url, &h, &declined).await,
        StatusCode::BAD_REQUEST,
        -32021,
        "sampling: false",
    )
    .await;
    let sample = modern(
        3,
        "tools/call",
        json!({"name": "sample", "arguments": {"prompt": "?"}}),
        json!({"sampling": {}}),
    );
    let r = post(url, &h, &sample).await.answer(json!(3), T).await;
    assert_eq!(
        r.response["result"]["resultType"], "input_required",
        "the question travels as an MRTR input request: {:?}",
        r
    );
    assert!(
        r.messages.iter().all(|m| m.get("id").is_none()),
        "{:?}",
        r.messages
    );

    // A batch under the stateless revision is refused as such, not as a missing session.
    let batch = json!([modern(30, "tools/list", json!({}), json!({}))]);
    let r = post(url, &hdrs("tools/list", None), &batch).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let body = r.json().await;
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("batches"),
        "{body}"
    );

    for method in ["ping", "logging/setLevel", "no/such/method"] {
        let body = modern(4, method, json!({}), json!({}));
        refused(
            post(url, &hdrs(method, None), &body).await,
            StatusCode::NOT_FOUND,
            -32601,
            method,
        )
        .await;
    }

    let note = json!({"jsonrpc": "2.0", "method": "notifications/whatever",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V}}});
    let reply = post(url, &hdrs("notifications/whatever", None), &note).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "notification");

    let modern_client = McpClient::new();
    let h = Headers::default()
        .set("Accept", "text/event-stream")
        .set("MCP-Protocol-Version", V);
    for m in [Method::GET, Method::DELETE] {
        let reply = modern_client.send(m.clone(), &urls[1], &h, None).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{m}");
    }
    assert!(
        cluster.all_session_keys().is_empty(),
        "{:?}",
        cluster.all_session_keys()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_request_log_level_and_closed_stream_cancels() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let h = hdrs("tools/call", Some("countdown"));
    let args = json!({"n": 3, "interval_ms": 50});
    let mut params =
        json!({"name": "countdown", "arguments": args, "_meta": {"progressToken": "p"}});
    let r = post(
        &urls[0],
        &h,
        &modern(1, "tools/call", params.clone(), json!({})),
    )
    .await;
    let r = r.answer(json!(1), T).await;
    assert!(r.sse, "progress streams");
    assert_eq!(
        r.with_method("notifications/progress").len(),
        3,
        "{:?}",
        r.messages
    );
    assert_eq!(r.response["result"]["resultType"], "complete");

    // The demo logs only on the standalone stream, which 2026-07-28 does not have: nothing of
    // `notify` reaches the request's stream, whatever its level (the level filter on the request
    // stream is unit-tested in stateless::peer). An invalid level is -32602.
    let nh = hdrs("tools/call", Some("notify"));
    let p = json!({"name": "notify", "arguments": {"count": 2, "interval_ms": 0},
        "_meta": {"io.modelcontextprotocol/logLevel": "debug"}});
    let r = post(
        &urls[1],
        &nh,
        &modern(2, "tools/call", p.clone(), json!({})),
    )
    .await;
    let r = r.answer(json!(2), T).await;
    assert!(
        r.with_method("notifications/message").is_empty(),
        "{:?}",
        r.messages
    );
    let mut bad = modern(2, "tools/call", p, json!({}));
    bad["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("loud");
    refused(
        post(&urls[1], &nh, &bad).await,
        StatusCode::BAD_REQUEST,
        -32602,
        "bad level",
    )
    .await;

    params["arguments"] = json!({"n": 100, "interval_ms": 100});
    let before = cancelled_count(&cluster, 2).await;
    let r = post(&urls[2], &h, &modern(3, "tools/call", params, json!({}))).await;
    let mut stream = r.sse();
    let first = stream.until_method("notifications/progress", T).await;
    assert!(first.matched.is_some(), "{:?}", first.events);
    drop(stream);
    eventually::eventually("the closed stream cancelled the countdown", T, || async {
        (cancelled_count(&cluster, 2).await > before).then_some(())
    })
    .await;
}

async fn cancelled_count(cluster: &Cluster, i: usize) -> u64 {
    let text = reqwest::get(format!("{}/metrics", cluster.node(i).base_url()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix("switchboard_stateless_cancelled_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

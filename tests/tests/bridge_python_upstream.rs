//! The official Python SDK (`mcp` 2.x) as a 2026-07-28 upstream behind two nodes
//! (`tests/python/modern_server.py`, `revision = "2026-07-28"`): its `greet` tool asks for the
//! user's name with an MRTR elicitation. A session-era client gets a real `elicitation/create`
//! and answers it on the other node; a 2026-07-28 client gets the question as the node's own
//! `InputRequiredResult` and retries on the other node.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::modern::{self, send};
use switchboard_tests::peers::{self, PeerProcess};
use switchboard_tests::ports::free_port;
use switchboard_tests::upstreams::{start_cluster, Upstream};
use switchboard_tests::{expect, msg};

const T: Duration = Duration::from_secs(20);

/// The Python greeter on a free port, or `None` (skipped) without Python venv support.
fn python_upstream() -> Option<(PeerProcess, String)> {
    let tools = [
        ("python3", peers::on_path("python3")),
        ("python3 venv + ensurepip", peers::python_can_make_venv()),
    ];
    if !peers::available_or_skip("bridge_python_upstream", &tools) {
        return None;
    }
    let python = peers::ensure_python_venv();
    let port = free_port();
    let mut cmd = Command::new(python);
    cmd.current_dir(peers::python_dir())
        .args(["modern_server.py", &port.to_string()]);
    let mut server = PeerProcess::spawn("python-modern-server", &mut cmd);
    server.wait_for_port(port, Duration::from_secs(30));
    Some((server, format!("http://127.0.0.1:{port}/mcp")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_stateless_server_serves_clients_of_both_eras() {
    let Some((server, url)) = python_upstream() else {
        return;
    };
    let member = Upstream::http("py", &url).revision("2026-07-28");
    let configured = start_cluster(2, &[member], ClusterOptions::new());
    let urls = configured.cluster.urls();

    // Session era: the elicitation is a real server request, answered on the other node.
    let mut client = McpClient::new();
    client
        .initialize_with(&urls[0], "2025-11-25", json!({"elicitation": {}}))
        .await;
    let add = client
        .call_tool(&urls[1], 2, "py__add", json!({"a": 2, "b": 3}))
        .await;
    let add = add.answer(json!(2), T).await.response;
    assert!(msg::result_text(&add).starts_with('5'), "{add}");
    let mut stream = client
        .call_tool(&urls[0], 3, "py__greet", json!({}))
        .await
        .sse();
    let got = stream.until_method("elicitation/create", T).await;
    let request = got
        .matched
        .unwrap_or_else(|| panic!("no elicitation: {:?}\n{}", got.events, server.log_text()));
    assert_eq!(request["params"]["message"], "What is your name?");
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let posted = client
        .post(&urls[1], &msg::result(&request["id"], answer))
        .await;
    expect::accepted(posted, "elicitation answer on the other node").await;
    let done = stream.until_response(&json!(3), T).await;
    let response = done
        .matched
        .unwrap_or_else(|| panic!("greet hangs: {:?}\n{}", done.events, server.log_text()));
    assert_eq!(msg::result_text(&response), "Hello, Ada!", "{response}");

    // 2026-07-28: the node's own MRTR round, retried on the other node.
    let first = modern::request(
        10,
        "tools/call",
        json!({"name": "py__greet", "arguments": {}}),
        json!({"elicitation": {}}),
    );
    let asked = send(&urls[1], &first)
        .await
        .answer(json!(10), T)
        .await
        .response;
    let asked = &asked["result"];
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let (key, question) = asked["inputRequests"]
        .as_object()
        .and_then(|q| q.iter().next())
        .unwrap_or_else(|| panic!("{asked}"));
    assert_eq!(question["method"], "elicitation/create");
    let mut retry = first.clone();
    retry["id"] = json!(11);
    retry["params"]["inputResponses"] =
        json!({key: {"action": "accept", "content": {"name": "Grace"}}});
    retry["params"]["requestState"] = asked["requestState"].clone();
    let done = send(&urls[0], &retry)
        .await
        .answer(json!(11), T)
        .await
        .response;
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Grace!",
        "{done}"
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
}

//! Aggregation end to end: real nodes whose config file lists two demo servers, `a` and `b`, as
//! `[[upstreams]]`; a client sees both namespaced behind one endpoint, on any node.
//!
//! Tables come from a config file only: each node gets it as `--config` ([`with_config`]).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::msg;
use switchboard_tests::node::Node;
use switchboard_tests::temp::TempDir;

const T: Duration = Duration::from_secs(10);

const TWO_DEMOS: &str = "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n\n\
                         [[upstreams]]\nname = \"b\"\nkind = \"demo\"\nprefix = \"b\"\n";

/// Runs `start` with the path of a config file holding `toml`; the directory holding the file is
/// returned with what `start` made, so it outlives the nodes.
fn with_config<T>(toml: &str, start: impl FnOnce(&Path) -> T) -> (T, TempDir) {
    let dir = TempDir::new("sb-aggregate");
    let path = dir.path().join("switchboard.toml");
    std::fs::write(&path, toml).expect("write switchboard.toml");
    (start(&path), dir)
}

/// Sends one request and returns its whole JSON-RPC response.
async fn ask(client: &McpClient, url: &str, id: u64, method: &str, params: Value) -> Value {
    let reply = client.post(url, &msg::request(id, method, params)).await;
    assert_eq!(reply.status, 200, "{method} on {url}");
    reply.answer(json!(id), T).await.response
}

fn tool_names(response: &Value) -> Vec<String> {
    response["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {response}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_demo_upstreams_behind_one_endpoint_on_any_node() {
    let (cluster, _config) = with_config(TWO_DEMOS, |p| {
        Cluster::start(2, ClusterOptions::new().config_file(p))
    });
    let urls = cluster.urls();
    let mut client = McpClient::new();
    let reply = client
        .post(&urls[0], &msg::init("2025-11-25", json!({})))
        .await;
    client.session_id = reply.session_id();
    client.revision = Some("2025-11-25".into());
    let init = reply.answer(json!(1), T).await.response;
    assert_eq!(
        init["result"]["serverInfo"]["name"], "switchboard",
        "{init}"
    );
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("## a") && instructions.contains("## b"),
        "{init}"
    );
    assert_eq!(client.post(&urls[0], &msg::inited()).await.status, 202);

    let tools = ask(&client, &urls[0], 2, "tools/list", json!({})).await;
    let names = tool_names(&tools);
    for name in ["a__echo", "b__echo", "a__countdown", "b__sample"] {
        assert!(
            names.contains(&name.to_owned()),
            "{name} missing from {names:?}"
        );
    }
    assert!(
        !names.contains(&"echo".to_owned()),
        "every name is prefixed"
    );

    // The call lands on the other node and reaches `b` as `echo`.
    let call = client
        .call_tool(&urls[1], 3, "b__echo", json!({"text": "through b"}))
        .await;
    let answer = call.answer(json!(3), T).await.response;
    assert_eq!(
        answer["result"]["content"][0]["text"], "through b",
        "{answer}"
    );

    let prompt = ask(
        &client,
        &urls[1],
        4,
        "prompts/get",
        json!({"name": "a__greet", "arguments": {"name": "Ada"}}),
    )
    .await;
    assert!(prompt["result"]["messages"].is_array(), "{prompt}");
    let read = ask(
        &client,
        &urls[0],
        5,
        "resources/read",
        json!({"uri": "demo://greeting"}),
    )
    .await;
    assert_eq!(
        read["result"]["contents"][0]["uri"], "demo://greeting",
        "{read}"
    );

    let unknown = client.call_tool(&urls[0], 6, "c__echo", json!({})).await;
    let error = unknown.answer(json!(6), T).await.response;
    assert_eq!(error["error"]["code"], -32602, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown tool: c__echo"),
        "{error}"
    );
}

#[test]
fn a_node_with_bad_upstreams_refuses_to_start_naming_them() {
    let logs = TempDir::new("sb-aggregate-logs");
    let bad = "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\nprefix = \"no spaces\"\n";
    let (mut node, _config) = with_config(bad, |p| {
        Node::spawn_with_config("bad", None, &[], logs.path(), Some(p))
    });
    assert_eq!(node.wait_exit(T), Some(2), "exit code 2 for a bad config");
    let log = node.log_tail(20);
    assert!(log.contains("upstream `a`: prefix `no spaces`"), "{log}");
}

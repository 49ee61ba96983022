//! `Mcp-Param-*` headers of MCP 2026-07-28 (revisions.md 1.7.5–1.7.8): the demo's
//! `regional_echo` mirrors its `region` argument into `Mcp-Param-Region` (`x-mcp-header`). Each
//! node checks the header against the body: present and equal (decoded from `=?base64?…?=`)
//! passes; missing, different, or sent for an absent argument is 400 -32020; headers no
//! declaration names pass. A 2026-07-28 upstream behind the cluster gets the header from the
//! node itself, for session-era clients too (they know nothing of headers).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::modern::{self, post};
use switchboard_tests::msg;
use switchboard_tests::node::Node;
use switchboard_tests::temp::TempDir;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(15);

fn call(id: i64, args: Value) -> Value {
    modern::request(
        id,
        "tools/call",
        json!({"name": "regional_echo", "arguments": args}),
        json!({}),
    )
}

async fn status_and_body(
    url: &str,
    region: Option<&str>,
    extra: &[(&str, &str)],
    body: &Value,
) -> (StatusCode, Value) {
    let mut h = modern::headers("tools/call", Some("regional_echo"));
    if let Some(r) = region {
        h = h.set("Mcp-Param-Region", r);
    }
    for (k, v) in extra {
        h = h.set(k, v);
    }
    let reply = post(url, &h, body).await;
    let status = reply.status;
    if status != StatusCode::OK {
        return (status, reply.json().await);
    }
    let id = body["id"].clone();
    (status, reply.answer(id, T).await.response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrored_arguments_are_checked_on_every_node() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let urls = cluster.urls();
    let body = call(1, json!({"region": "eu-west", "text": "hi"}));
    for url in &urls {
        let (status, r) =
            status_and_body(url, Some("eu-west"), &[("Mcp-Param-Other", "x")], &body).await;
        assert_eq!(status, StatusCode::OK, "{r}");
        assert_eq!(r["result"]["content"][0]["text"], "eu-west: hi", "{r}");
    }
    let cases: [(Option<&str>, Value, &str); 4] = [
        (
            None,
            json!({"region": "eu-west", "text": "hi"}),
            "missing header",
        ),
        (
            Some("us-east"),
            json!({"region": "eu-west", "text": "hi"}),
            "different value",
        ),
        (
            Some("eu-west"),
            json!({"text": "hi"}),
            "header without argument",
        ),
        (
            Some("=?base64?!!?="),
            json!({"region": "eu-west", "text": "hi"}),
            "undecodable",
        ),
    ];
    for (i, (region, args, what)) in cases.into_iter().enumerate() {
        let body = call(10 + i as i64, args);
        let (status, r) = status_and_body(&urls[i % 2], region, &[], &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {r}");
        assert_eq!(r["error"]["code"], -32020, "{what}: {r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains("Region"),
            "{what}: {r}"
        );
    }
    // Two copies of the header are ambiguous (a balancer may route on either): refused.
    let body = call(19, json!({"region": "eu-west", "text": "hi"}));
    let h = modern::headers("tools/call", Some("regional_echo"))
        .set("Mcp-Param-Region", "us-east")
        .add("Mcp-Param-Region", "eu-west");
    let reply = post(&urls[0], &h, &body).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let r = reply.json().await;
    assert_eq!(r["error"]["code"], -32020, "{r}");
    // A non-ASCII value travels base64-encoded and matches once decoded.
    let body = call(20, json!({"region": "zürich", "text": "grüezi"}));
    let encoded = "=?base64?esO8cmljaA==?=";
    let (status, r) = status_and_body(&urls[1], Some(encoded), &[], &body).await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "zürich: grüezi", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_mirrors_arguments_for_a_stateless_upstream() {
    // The upstream is itself a node serving 2026-07-28: it refuses a call without the header.
    let logs = TempDir::new("sb-params");
    let mut upstream = Node::spawn("upstream", None, &[], logs.path());
    assert!(upstream.wait_ready(), "{}", upstream.log_tail(40));
    let member = Upstream::http("m", &upstream.url()).revision("2026-07-28");
    let started = start_cluster(2, &[member], ClusterOptions::new());
    let urls = started.cluster.urls();

    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let reply = client
        .call_tool(
            &urls[1],
            2,
            "m__regional_echo",
            json!({"region": "ap-south", "text": "via session"}),
        )
        .await;
    let r = reply.answer(json!(2), T).await.response;
    assert_eq!(msg::result_text(&r), "ap-south: via session", "{r}");

    let body = modern::request(
        3,
        "tools/call",
        json!({"name": "m__regional_echo", "arguments": {"region": "ap-south", "text": "stateless"}}),
        json!({}),
    );
    let h =
        modern::headers("tools/call", Some("m__regional_echo")).set("Mcp-Param-Region", "ap-south");
    let r = post(&urls[0], &h, &body)
        .await
        .answer(json!(3), T)
        .await
        .response;
    assert_eq!(
        r["result"]["content"][0]["text"], "ap-south: stateless",
        "{r}"
    );
}

//! A real legacy peer: the official TypeScript SDK's `SSEClientTransport` (MCP 2024-11-05, HTTP
//! with SSE; `@modelcontextprotocol/sdk`, pinned in `tests/ts`) against three nodes behind HAProxy
//! (round robin per request, no stickiness). The SDK GETs `/sse` through the balancer and POSTs
//! every message to the `endpoint` it was given, so the POSTs land on several nodes while every
//! answer, and a sampling request, reaches the one SSE connection. Runs
//! `tests/ts/legacy_sse_scenario.mjs` and checks its JSON summary, then that the session the SDK
//! used is live in Redis until it idles out (the SDK's `close` only drops the connection).
//!
//! Needs `node`, `npm` and `haproxy` (else SKIPPED, or a failure under `CI`); `npm ci` runs in
//! `tests/ts` when `node_modules` is missing.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::peers::{available_or_skip, ensure_ts_sdk, on_path, run_bounded, ts_dir};

const SCRIPT_LIMIT: Duration = Duration::from_secs(55);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_sse_client_through_a_balancer() {
    let tools = [
        ("node", on_path("node")),
        ("npm", on_path("npm")),
        ("haproxy", haproxy_binary().is_some()),
    ];
    if !available_or_skip("ts_sdk_legacy_sse", &tools) {
        return;
    }
    ensure_ts_sdk();
    // Keep-alives every 300 ms: a node notices a closed SSE connection when it next writes to it.
    let options = ClusterOptions::new()
        .idle_expiry(3000, 300)
        .set("http.keepalive_interval", "300ms");
    let cluster = Cluster::start(3, options);
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let balancer = Balancer::start(&ports);
    let sse_url = format!("{}/sse", balancer.base_url());
    let mut node = Command::new("node");
    node.current_dir(ts_dir())
        .arg("legacy_sse_scenario.mjs")
        .arg(&sse_url);
    let out = tokio::task::spawn_blocking(move || {
        run_bounded(&mut node, SCRIPT_LIMIT, "node legacy_sse_scenario.mjs")
    })
    .await
    .expect("the scenario runner");
    let summary = out.json_summary("node legacy_sse_scenario.mjs");
    let show = format!(
        "{}\nsummary: {summary:#}\nstderr:\n{}",
        out.status, out.stderr
    );
    assert!(
        out.status.success() && summary["ok"] == true,
        "the SDK scenario failed: {show}"
    );
    let echoes: Vec<String> = (0..6).map(|i| format!("legacy-{i}")).collect();
    assert_eq!(summary["echoes"], json!(echoes), "{show}");
    assert!(
        summary["sampleText"]
            .as_str()
            .is_some_and(|t| t.contains("Paris.")),
        "{show}"
    );
    // initialize, initialized, tools/list, 6 echoes, sample and its answer: 11 POSTs, round
    // robin over 3 nodes.
    let post_nodes = summary["postNodes"].as_array().map_or(0, Vec::len);
    assert_eq!(post_nodes, 3, "POSTs should reach every node: {show}");
    // The session lived in Redis and idles out after the SDK closed its stream.
    let sid = summary["sessionId"].as_str().expect("sessionId").to_owned();
    eventually(
        "the SDK's session idles out",
        Duration::from_secs(15),
        || async { cluster.session_keys(&sid).is_empty().then_some(()) },
    )
    .await;
}

//! The OpenAI Agents SDK for Python (`openai-agents`, pinned with every dependency in
//! `tests/python/requirements.txt`, beside the MCP Python SDK 2.x it runs on) against three nodes
//! on one Redis behind HAProxy (round robin per request, no stickiness), fronting the built-in
//! demo upstream. `tests/python/agents_scenario.py` uses the SDK's MCP classes directly (no
//! model, no API key): `MCPServerStreamableHttp` on `/mcp` and `MCPServerSse` on the legacy
//! HTTP+SSE transport (`/sse`) each connect, list the tools and call `echo` and `add`. The test
//! checks the values and that the requests were spread over the three nodes.
//!
//! Needs `python3` (>= 3.10) with `venv` and `ensurepip`, and `haproxy`; without them the test
//! prints that it skipped, or fails when `CI` is set.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::peers;
use switchboard_tests::upstreams::start_cluster;

const SCENARIO_LIMIT: Duration = Duration::from_secs(120);

/// The demo upstream's tools, sorted.
const DEMO_TOOLS: [&str; 8] = [
    "add",
    "countdown",
    "echo",
    "elicit",
    "list_roots",
    "notify",
    "regional_echo",
    "sample",
];

/// The JSON-RPC methods of one client's exchanges, in order (`None` for the SSE GET).
fn rpcs(client: &Value) -> Vec<Option<&str>> {
    client["answers"]
        .as_array()
        .map(|a| a.iter().map(|e| e["rpc"].as_str()).collect())
        .unwrap_or_default()
}

/// The backends that answered one client, from HAProxy's `X-Served-By`.
fn served_by(client: &Value) -> BTreeSet<&str> {
    client["answers"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["servedBy"].as_str()).collect())
        .unwrap_or_default()
}

/// Both clients listed the demo's tools and got `echo` and `add` right.
fn assert_listed_and_called(client: &Value, echo_text: &str, show: &str) {
    assert_eq!(client["ok"], true, "{show}");
    let tools: Vec<&str> = client["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(tools, DEMO_TOOLS, "{show}");
    assert_eq!(client["echo"]["isError"], false, "{show}");
    assert_eq!(client["echo"]["text"], echo_text, "{show}");
    assert_eq!(client["add"]["isError"], false, "{show}");
    assert_eq!(client["add"]["text"], "5.5", "{show}");
}

#[test]
fn openai_agents_mcp_clients_connect_list_and_call_through_three_nodes_behind_haproxy() {
    let tools = [
        ("python3", peers::on_path("python3")),
        ("python3 venv + ensurepip", peers::python_can_make_venv()),
        ("haproxy", haproxy_binary().is_some()),
    ];
    if !peers::available_or_skip("openai_agents", &tools) {
        return;
    }
    let python = peers::ensure_python_venv();
    let started = start_cluster(3, &[], ClusterOptions::new());
    let cluster = &started.cluster;
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let lb = Balancer::start(&ports);

    let mut cmd = Command::new(&python);
    cmd.current_dir(peers::python_dir())
        .arg("agents_scenario.py")
        .arg(lb.url())
        .arg(format!("{}/sse", lb.base_url()));
    let out = peers::run_bounded(&mut cmd, SCENARIO_LIMIT, "python agents_scenario.py");
    let summary = out.json_summary("agents_scenario.py");
    let show = format!("{} {summary:#}\nstderr:\n{}", out.status, out.stderr);
    assert!(out.status.success() && summary["ok"] == true, "{show}");

    // Streamable HTTP: the SDK's client probes `server/discover`, which the cluster answers, so
    // it stays on the stateless revision 2026-07-28 (no `initialize`, no session).
    let http = &summary["streamableHttp"];
    assert_listed_and_called(http, "agents-MCPServerStreamableHttp", &show);
    assert_eq!(
        rpcs(http),
        [
            Some("server/discover"),
            Some("tools/list"),
            Some("tools/call"),
            Some("tools/call")
        ],
        "{show}"
    );
    for exchange in http["answers"].as_array().into_iter().flatten() {
        assert_eq!(exchange["status"], 200, "{show}");
        assert_eq!(exchange["revision"], "2026-07-28", "{show}");
    }

    // Legacy HTTP+SSE: one GET stream, every message a POST answered 202 on the next node and
    // its answer carried over Redis to the stream. The probe is refused there (-32600 before
    // `initialize`), so the client initializes.
    let sse = &summary["sse"];
    assert_listed_and_called(sse, "agents-MCPServerSse", &show);
    assert_eq!(sse["serverName"], "switchboard-demo", "{show}");
    assert_eq!(sse["protocolVersion"], "2025-11-25", "{show}");
    let methods = rpcs(sse);
    assert_eq!(
        methods.first(),
        Some(&None),
        "the SSE GET comes first: {show}"
    );
    for rpc in ["initialize", "notifications/initialized", "tools/list"] {
        assert!(methods.contains(&Some(rpc)), "no {rpc}: {show}");
    }
    for exchange in sse["answers"].as_array().into_iter().flatten().skip(1) {
        assert_eq!(exchange["http"], "POST", "{show}");
        assert_eq!(exchange["status"], 202, "{show}");
    }

    // Round robin: every client was answered by more than one node, all three between them.
    assert!(served_by(http).len() >= 2, "{show}");
    assert!(served_by(sse).len() >= 2, "{show}");
    let all: BTreeSet<&str> = served_by(http).union(&served_by(sse)).copied().collect();
    assert_eq!(all, BTreeSet::from(["n0", "n1", "n2"]), "{show}");
}

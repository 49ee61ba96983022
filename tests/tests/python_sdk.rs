//! The official MCP Python SDK (`mcp` 2.x, pinned in `tests/python/requirements.txt`, installed
//! into `tests/python/.venv` on first use) on both sides of the cluster:
//!
//! - its client (`Client` = `ClientSession` over the streamable HTTP client, mode `auto`) probes
//!   `server/discover` at revision 2026-07-28 first. The cluster serves that revision, so the
//!   client stays stateless (no `initialize`, no session id), and its list and call results must
//!   pass the SDK's 2026 validation (`resultType`, `ttlMs`/`cacheScope` on lists).
//!   `tests/python/client_scenario.py` records every HTTP exchange; the test checks them.
//! - a calculator server built with it (`tests/python/calculator_server.py`, the field's tutorial
//!   server: add, subtract, multiply, divide) is an upstream (`prefix = ""`) of three nodes behind
//!   HAProxy, once over stdio and once as a Streamable HTTP server on a free loopback port. The
//!   client stays stateless there too (over stdio each stateless request gets an ephemeral child
//!   of its own; over HTTP the node bridges to the server's session), lists the tools, calls all
//!   four operations and divides by zero, which must come back as a tool error (`isError: true`
//!   with the server's message), not a protocol error.
//!
//! Needs `python3` (>= 3.10) with `venv` and `ensurepip` (and `haproxy` for the calculator
//! tests); without them a test prints that it skipped, or fails when `CI` is set.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::peers::{self, PeerProcess};
use switchboard_tests::ports::free_port;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const SCENARIO_LIMIT: Duration = Duration::from_secs(90);
/// How long the calculator's HTTP server may take to listen (the SDK's imports take ~1 s).
const SERVER_START_LIMIT: Duration = Duration::from_secs(30);

fn venv_python(test: &str, need_haproxy: bool) -> Option<String> {
    let mut tools = vec![
        ("python3", peers::on_path("python3")),
        ("python3 venv + ensurepip", peers::python_can_make_venv()),
    ];
    if need_haproxy {
        tools.push(("haproxy", haproxy_binary().is_some()));
    }
    if !peers::available_or_skip(test, &tools) {
        return None;
    }
    let python = peers::ensure_python_venv();
    Some(python.to_str().expect("utf-8 path").to_owned())
}

/// Runs `client_scenario.py URL ARGS…` and returns its JSON summary.
fn run_client(python: &str, url: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new(python);
    cmd.current_dir(peers::python_dir())
        .args(["client_scenario.py", url])
        .args(args);
    let out = peers::run_bounded(&mut cmd, SCENARIO_LIMIT, "python client_scenario.py");
    let summary = out.json_summary("client_scenario.py");
    assert!(
        out.status.success() && summary["ok"] == true,
        "the Python client scenario failed ({}): {summary:#}\nstderr:\n{}",
        out.status,
        out.stderr
    );
    summary
}

/// The client's `server/discover` probe was answered (the cluster serves MCP 2026-07-28), so it
/// stayed stateless: every exchange answered 200 under revision 2026-07-28 with `Mcp-Method`, and
/// no session id was ever sent (MCP 2026-07-28 basic/transports; revisions.md 1.8.2, 1.8.4).
fn assert_stateless(summary: &Value) {
    let show = format!("{summary:#}");
    let exchanges = summary["exchanges"].as_array().expect("exchanges");
    assert_eq!(
        exchanges[0]["rpc"], "server/discover",
        "first request: {show}"
    );
    assert_eq!(summary["handshake"], "discover", "{show}");
    assert_eq!(summary["protocolVersion"], "2026-07-28", "{show}");
    for e in exchanges {
        assert_eq!(e["status"], 200, "{show}");
        assert_eq!(e["headers"]["mcp-protocol-version"], "2026-07-28", "{show}");
        assert!(e["headers"]["mcp-method"].is_string(), "{show}");
        assert!(e["headers"].get("mcp-session-id").is_none(), "{show}");
    }
    assert!(exchanges.iter().any(|e| e["rpc"] == "tools/call"), "{show}");
}

#[test]
fn python_client_stays_stateless_when_server_discover_is_answered() {
    let Some(python) = venv_python("python_client_probe", false) else {
        return;
    };
    // The probe is the node's business: the built-in demo upstream (it has `add` too) will do.
    let started = start_cluster(3, &[], ClusterOptions::new());
    let summary = run_client(&python, &started.cluster.url(1), &[]);
    assert_stateless(&summary);
    assert_eq!(summary["addText"], "5.5", "{summary:#}");
}

/// The calculator behind three nodes and HAProxy, driven by the Python client with
/// `--calculator`: the tools, every operation's value, and the division by zero as a tool error.
fn assert_calculator_through(python: &str, calculator: Upstream) {
    let started = start_cluster(3, &[calculator], ClusterOptions::new());
    let cluster = &started.cluster;
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let lb = Balancer::start(&ports);

    let summary = run_client(python, &lb.url(), &["", "--calculator"]);
    assert_stateless(&summary);
    let show = format!("{summary:#}");
    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(tools, ["add", "divide", "multiply", "subtract"], "{show}");
    assert_eq!(summary["addText"], "5.5", "{show}");
    assert_eq!(summary["addStructured"]["result"], 5.5, "{show}");
    let calls = &summary["calculator"];
    for (op, text, value) in [
        ("subtract", "5.5", 5.5),
        ("multiply", "42.0", 42.0),
        ("divide", "0.125", 0.125),
    ] {
        assert_eq!(calls[op]["isError"], false, "{op}: {show}");
        assert_eq!(calls[op]["text"], text, "{op}: {show}");
        assert_eq!(calls[op]["structured"]["result"], value, "{op}: {show}");
    }
    // A tool error, not a JSON-RPC error: the call has a result with isError and the message.
    let by_zero = &calls["divideByZero"];
    assert_eq!(by_zero["isError"], true, "{show}");
    let text = by_zero["text"].as_str().unwrap_or_default();
    assert!(text.contains("division by zero"), "{show}");
}

#[test]
fn python_calculator_over_stdio_through_three_nodes_with_the_python_client() {
    let Some(python) = venv_python("python_calculator", true) else {
        return;
    };
    let server = peers::python_dir().join("calculator_server.py");
    let server = server.to_str().expect("utf-8 path");
    let calculator = Upstream::stdio("calculator", &python, &[server]).prefix("");
    // A stdio upstream keeps per-session state: each stateless request gets an ephemeral child
    // of its own, so the client stays stateless through the balancer.
    assert_calculator_through(&python, calculator);
}

#[test]
fn python_calculator_over_streamable_http_through_three_nodes_with_the_python_client() {
    let Some(python) = venv_python("python_calculator_http", true) else {
        return;
    };
    let port = free_port();
    let mut server = Command::new(&python);
    server.current_dir(peers::python_dir()).args([
        "calculator_server.py",
        "http",
        &port.to_string(),
    ]);
    let mut server = PeerProcess::spawn("calculator-http", &mut server);
    server.wait_for_port(port, SERVER_START_LIMIT);
    // One server process for every node: a session-era HTTP upstream (the node keeps the
    // upstream session of each client session in Redis).
    let url = format!("http://127.0.0.1:{port}/mcp");
    let calculator = Upstream::http("calculator", &url).prefix("");
    assert_calculator_through(&python, calculator);
    let log = server.log_text();
    assert!(
        log.contains("POST /mcp"),
        "the calculator served nothing:\n{log}"
    );
}

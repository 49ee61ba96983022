//! The official MCP Python SDK (`mcp` 2.x, pinned in `tests/python/requirements.txt`, installed
//! into `tests/python/.venv` on first use) on both sides of the cluster:
//!
//! - its client (`Client` = `ClientSession` over the streamable HTTP client, mode `auto`) probes
//!   `server/discover` at revision 2026-07-28 first. The cluster serves that revision, so the
//!   client stays stateless (no `initialize`, no session id), and its list and call results must
//!   pass the SDK's 2026 validation (`resultType`, `ttlMs`/`cacheScope` on lists).
//!   `tests/python/client_scenario.py` records every HTTP exchange; the test checks them.
//! - a calculator server built with it (`tests/python/calculator_server.py`) is a stdio upstream
//!   (`prefix = ""`) of three nodes behind HAProxy; a stdio upstream keeps per-session state, so
//!   the probe is refused (HTTP 400, -32022 listing the handshake revisions; revisions.md 1.8.4)
//!   and the client falls back to `initialize` at once; it lists the tools and calls `add`.
//!
//! Needs `python3` (>= 3.10) with `venv` and `ensurepip` (and `haproxy` for the calculator test); without them a test
//! prints that it skipped, or fails when `CI` is set.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::peers;
use switchboard_tests::upstreams::{start_cluster, Upstream};

/// The Python client gives up on the probe after 10 s (`DISCOVER_TIMEOUT_SECONDS`); a fallback
/// "at once" takes a few round trips.
const AT_ONCE: u64 = 3000;
/// JSON-RPC code the probe must not get with a modern-only `supported` list (the client would
/// then give up instead of falling back).
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);

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

/// Runs `client_scenario.py URL` and returns its JSON summary.
fn run_client(python: &str, url: &str) -> Value {
    let mut cmd = Command::new(python);
    cmd.current_dir(peers::python_dir())
        .args(["client_scenario.py", url]);
    let out = peers::run_bounded(&mut cmd, SCENARIO_LIMIT, "python client_scenario.py");
    let summary = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| {
            panic!(
                "no JSON summary ({})\n{}\n{}",
                out.status, out.stdout, out.stderr
            )
        });
    assert!(
        out.status.success() && summary["ok"] == true,
        "the Python client scenario failed ({}): {summary:#}\nstderr:\n{}",
        out.status,
        out.stderr
    );
    summary
}

/// The probe got a 400 with a JSON-RPC error that means "not a modern server", and the very next
/// request was `initialize`, all quickly.
fn assert_prompt_fallback(summary: &Value) {
    let show = format!("{summary:#}");
    let probe = &summary["exchanges"][0];
    assert_eq!(probe["rpc"], "server/discover", "first request: {show}");
    assert_eq!(
        probe["headers"]["mcp-protocol-version"], "2026-07-28",
        "{show}"
    );
    assert_eq!(
        probe["status"], 400,
        "the probe must get HTTP 400 (1.8.4): {show}"
    );
    let json = probe["contentType"]
        .as_str()
        .is_some_and(|c| c.starts_with("application/json"));
    assert!(json, "the 400 must carry a JSON body: {show}");
    let body: Value =
        serde_json::from_str(probe["body"].as_str().unwrap_or("")).unwrap_or_default();
    assert_eq!(
        body["jsonrpc"], "2.0",
        "the 400 body must be a JSON-RPC error: {show}"
    );
    let code = body["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code: {show}"));
    if code == UNSUPPORTED_PROTOCOL_VERSION {
        let supported = body["error"]["data"]["supported"].to_string();
        assert!(
            supported.contains("2025-"),
            "-32022 must list a handshake-era revision, or the client gives up: {show}"
        );
    }
    assert_eq!(
        summary["exchanges"][1]["rpc"], "initialize",
        "fallback: {show}"
    );
    assert_eq!(summary["handshake"], "initialize", "{show}");
    assert_eq!(summary["protocolVersion"], "2025-11-25", "{show}");
    let connect_ms = summary["connectMs"].as_u64().unwrap_or(u64::MAX);
    assert!(
        connect_ms < AT_ONCE,
        "connect took {connect_ms} ms: not at once: {show}"
    );
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
    let summary = run_client(&python, &started.cluster.url(1));
    assert_stateless(&summary);
    assert_eq!(summary["addText"], "5.5", "{summary:#}");
}

#[test]
fn python_calculator_over_stdio_through_three_nodes_with_the_python_client() {
    let Some(python) = venv_python("python_calculator", true) else {
        return;
    };
    let server = peers::python_dir().join("calculator_server.py");
    let server = server.to_str().expect("utf-8 path");
    let calculator = Upstream::stdio("calculator", &python, &[server]).prefix("");
    let started = start_cluster(3, &[calculator], ClusterOptions::new());
    let cluster = &started.cluster;
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let lb = Balancer::start(&ports);

    // A stdio upstream keeps per-session state, which the stateless era cannot carry yet: the
    // probe is refused with -32022 listing the handshake revisions, and the client falls back.
    let summary = run_client(&python, &lb.url());
    assert_prompt_fallback(&summary);
    let show = format!("{summary:#}");
    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(tools, ["add", "divide", "multiply", "subtract"], "{show}");
    assert_eq!(summary["addText"], "5.5", "{show}");
    assert_eq!(summary["addStructured"]["result"], 5.5, "{show}");
}

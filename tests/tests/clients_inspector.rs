//! The MCP Inspector (`@modelcontextprotocol/inspector` 2.12.0, pinned in `tests/inspector`)
//! against three nodes on one Redis behind HAProxy (round robin per request, no stickiness),
//! fronting the built-in demo upstream:
//!
//! - its CLI mode (`--cli … --format json`, one process per call): `tools/list`, `tools/call`,
//!   `resources/read` and `prompts/get` in both protocol eras it speaks (`legacy`: `initialize`
//!   and a session; `modern`: stateless 2026-07-28), a tool error and a missing resource, and a
//!   call over the legacy HTTP+SSE transport (`/sse`);
//! - its web UI (backend proxy and page on free loopback ports, its own API token) in headless
//!   Chromium: connect to the cluster's Streamable HTTP URL, list the tools, call `echo` from the
//!   form; the screenshot is kept under the cargo target dir (`$CARGO_TARGET_TMPDIR/
//!   test-artifacts/`, path printed).
//!
//! Needs `node`, `npm` and `haproxy` (and Debian's `chromium` for the web UI); without them a test
//! prints that it skipped, or fails when `CI` is set. `npm ci` runs first when
//! `tests/inspector/node_modules` is incomplete; the Inspector runs on that project's Node 22.

use std::path::PathBuf;

use serde_json::Value;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::inspector::{self, chromium_binary, InspectorWeb};
use switchboard_tests::peers;
use switchboard_tests::upstreams::{start_cluster, ConfiguredCluster};

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

fn ready(test: &str, need_chromium: bool) -> bool {
    let mut tools = vec![
        ("node", peers::on_path("node")),
        ("npm", peers::on_path("npm")),
        ("haproxy", haproxy_binary().is_some()),
    ];
    if need_chromium {
        tools.push(("chromium", chromium_binary().is_some()));
    }
    if !peers::available_or_skip(test, &tools) {
        return false;
    }
    peers::ensure_inspector();
    true
}

/// Three nodes with the demo upstream behind HAProxy.
fn demo_cluster_behind_haproxy() -> (ConfiguredCluster, Balancer) {
    let started = start_cluster(3, &[], ClusterOptions::new());
    let cluster = &started.cluster;
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let lb = Balancer::start(&ports);
    (started, lb)
}

/// One successful CLI call's `result`.
fn result_of(url: &str, args: &[&str]) -> Value {
    let out = inspector::cli(url, args);
    assert!(
        out.status.success() && out.json["result"].is_object(),
        "mcp-inspector --cli {args:?} ({}): {:#}\nstderr:\n{}",
        out.status,
        out.json,
        out.stderr
    );
    out.json["result"].clone()
}

/// `tools/list`, `tools/call`, `resources/read` and `prompts/get` through the balancer, with the
/// demo's real values.
fn assert_cli_round(url: &str, era: &str) {
    let tools = result_of(url, &["--protocol-era", era, "--method", "tools/list"]);
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    names.sort_unstable();
    assert_eq!(names, DEMO_TOOLS, "{era}: {tools:#}");

    let text = format!("inspector-cli-{era}");
    let echo = result_of(
        url,
        &[
            "--protocol-era",
            era,
            "--method",
            "tools/call",
            "--tool-name",
            "echo",
            "--tool-arg",
            &format!("text={text}"),
        ],
    );
    assert_eq!(echo["isError"], false, "{era}: {echo:#}");
    assert_eq!(echo["content"][0]["text"], text.as_str(), "{era}: {echo:#}");

    let add = result_of(
        url,
        &[
            "--protocol-era",
            era,
            "--method",
            "tools/call",
            "--tool-name",
            "add",
            "--tool-arg",
            "a=2",
            "b=3.5",
        ],
    );
    assert_eq!(add["structuredContent"]["sum"], 5.5, "{era}: {add:#}");
    assert_eq!(add["content"][0]["text"], "5.5", "{era}: {add:#}");

    let read = result_of(
        url,
        &[
            "--protocol-era",
            era,
            "--method",
            "resources/read",
            "--uri",
            "demo://greeting",
        ],
    );
    let content = &read["contents"][0];
    assert_eq!(content["uri"], "demo://greeting", "{era}: {read:#}");
    assert_eq!(content["mimeType"], "text/plain", "{era}: {read:#}");
    assert_eq!(
        content["text"], "Hello from the Switchboard demo server!",
        "{era}: {read:#}"
    );

    let prompt = result_of(
        url,
        &[
            "--protocol-era",
            era,
            "--method",
            "prompts/get",
            "--prompt-name",
            "greet",
            "--prompt-args",
            "name=Ada",
        ],
    );
    assert_eq!(
        prompt["description"], "A greeting for Ada",
        "{era}: {prompt:#}"
    );
    let message = &prompt["messages"][0];
    assert_eq!(message["role"], "user", "{era}: {prompt:#}");
    assert_eq!(
        message["content"]["text"], "Please greet Ada warmly, in one sentence.",
        "{era}: {prompt:#}"
    );
}

#[test]
fn inspector_cli_lists_calls_reads_and_gets_through_three_nodes_behind_haproxy() {
    if !ready("inspector_cli", false) {
        return;
    }
    let (_cluster, lb) = demo_cluster_behind_haproxy();
    let url = lb.url();
    for era in ["legacy", "modern"] {
        assert_cli_round(&url, era);
    }

    // Arguments the tool's schema refuses: a tool error (exit 5), its message from the demo.
    let refused = inspector::cli(
        &url,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "add",
            "--tool-args-json",
            r#"{"a": "two", "b": 1}"#,
        ],
    );
    let show = format!("{refused:#?}");
    assert_eq!(refused.status.code(), Some(5), "{show}");
    assert_eq!(refused.json["result"]["isError"], true, "{show}");
    let text = refused.json["result"]["content"][0]["text"].as_str();
    assert!(
        text.is_some_and(|t| t.contains("argument `a` must be a number")),
        "{show}"
    );

    // A resource the demo does not have: a JSON-RPC error, reported on stderr (exit 1).
    let missing = inspector::cli(
        &url,
        &["--method", "resources/read", "--uri", "demo://nope"],
    );
    assert_eq!(missing.status.code(), Some(1), "{missing:#?}");
    assert!(
        missing.stderr.contains("Resource not found"),
        "{missing:#?}"
    );

    // The legacy HTTP+SSE transport: the stream held on one node, each POST on the next one.
    let sse_url = format!("{}/sse", lb.base_url());
    let echo = result_of(
        &sse_url,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "echo",
            "--tool-arg",
            "text=inspector-cli-sse",
        ],
    );
    assert_eq!(echo["content"][0]["text"], "inspector-cli-sse", "{echo:#}");
}

/// Where the web UI's screenshot is kept: under the cargo target dir, never in the tree.
fn screenshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("test-artifacts")
        .join("inspector-web-ui.png")
}

#[test]
fn inspector_web_ui_connects_through_haproxy_and_lists_the_tools_in_chromium() {
    if !ready("inspector_web_ui", true) {
        return;
    }
    let chromium = chromium_binary().expect("checked above");
    let (_cluster, lb) = demo_cluster_behind_haproxy();
    let web = InspectorWeb::start(&lb.url());
    let screenshot = screenshot_path();
    let _ = std::fs::remove_file(&screenshot);
    let echo_text = "inspector-web-ui-hello";
    let summary = inspector::drive_web_ui(&web.url(), &chromium, &screenshot, echo_text);
    let show = format!("{summary:#}\ninspector log:\n{}", web.log());
    assert_eq!(summary["ok"], true, "{show}");
    assert_eq!(summary["status"], "connected", "{show}");
    // The session the UI's backend initialized through the balancer (the server card's revision).
    assert_eq!(summary["revision"], "MCP 2025-11-25", "{show}");
    assert_eq!(summary["toolsHeading"], "Tools (8)", "{show}");
    let page = summary["toolsPage"].as_str().unwrap_or_default();
    for tool in DEMO_TOOLS {
        assert!(
            page.lines().any(|l| l.trim() == tool),
            "tool {tool} not on the page: {show}"
        );
    }
    let after = summary["afterCall"].as_str().unwrap_or_default();
    assert!(
        after.lines().any(|l| l.trim() == echo_text),
        "echo's result not on the page: {show}"
    );

    let png = std::fs::read(&screenshot).unwrap_or_default();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "no screenshot at {}: {show}",
        screenshot.display()
    );
    eprintln!("Inspector web UI screenshot: {}", screenshot.display());

    // The token setting is in force: without it the Inspector's backend refuses its API.
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let status = runtime.block_on(async {
        let url = format!("{}api/config", web.bare_url());
        reqwest::get(&url).await.expect("GET api/config").status()
    });
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED, "{show}");
}

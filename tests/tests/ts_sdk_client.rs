//! The official TypeScript SDK client (`@modelcontextprotocol/sdk`, pinned in `tests/ts`) against a
//! 3-node cluster on one Redis: runs `tests/ts/client_scenario.mjs` (connect via A, list via B,
//! echo via C, a countdown cut after two progress events and resumed by the SDK on another node,
//! then DELETE) and checks its JSON summary, then that every node answers 404 for the session.
//!
//! Needs `node` and `npm` on PATH (CI has them); without them the test prints that it skipped,
//! or fails when the `CI` environment variable is set.
//! `npm ci` runs first when `tests/ts/node_modules` is missing.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::peers::{available_or_skip, ensure_ts_sdk, on_path, run_bounded, ts_dir};

const SCRIPT_LIMIT: Duration = Duration::from_secs(90);

/// The last stdout line that parses as a JSON object.
fn summary_of(stdout: &str) -> Option<Value> {
    stdout.lines().rev().find_map(|l| {
        serde_json::from_str::<Value>(l)
            .ok()
            .filter(Value::is_object)
    })
}

#[test]
fn ts_sdk_client_spreads_over_nodes_and_resumes_a_cut_countdown_elsewhere() {
    let tools = [("node", on_path("node")), ("npm", on_path("npm"))];
    if !available_or_skip("ts_sdk_client", &tools) {
        return;
    }
    ensure_ts_sdk();
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut node = Command::new("node");
    node.current_dir(ts_dir())
        .arg("client_scenario.mjs")
        .args(&urls);
    let out = run_bounded(&mut node, SCRIPT_LIMIT, "node client_scenario.mjs");
    let (status, stdout, stderr) = (out.status, out.stdout, out.stderr);
    let summary = summary_of(&stdout).unwrap_or_else(|| {
        panic!("no JSON summary ({status})\nstdout:\n{stdout}\nstderr:\n{stderr}")
    });
    let show = format!("{status}\nsummary: {summary:#}\nstderr:\n{stderr}");
    assert!(
        status.success() && summary["ok"] == true,
        "the TS SDK scenario failed: {show}"
    );

    assert_eq!(summary["echo"], "ts-sdk-hello", "{show}");
    assert_eq!(summary["progressCount"], 6, "{show}");
    assert_eq!(summary["progress"], json!([1, 2, 3, 4, 5, 6]), "{show}");
    assert_eq!(summary["countdownResult"], "countdown finished", "{show}");
    let expected_nodes = json!({"initialize": 0, "tools/list": 1, "echo": 2, "countdown": 0});
    assert_eq!(summary["nodeOf"], expected_nodes, "{show}");
    let distinct = summary["distinctNodes"].as_array().map_or(0, Vec::len);
    assert!(
        distinct >= 2,
        "requests should hit at least two nodes: {show}"
    );

    let cut_node = &summary["cut"]["node"];
    let resumes = summary["resumes"].as_array().cloned().unwrap_or_default();
    assert!(
        !resumes.is_empty(),
        "the SDK should resume with Last-Event-ID: {show}"
    );
    for resume in &resumes {
        assert!(
            resume["lastEventId"].is_string(),
            "resumption without Last-Event-ID: {show}"
        );
        assert_ne!(
            &resume["node"], cut_node,
            "resumed on the node that was cut: {show}"
        );
        assert_eq!(resume["status"], 200, "resumption status: {show}");
    }
    let requests = summary["requests"].as_array().cloned().unwrap_or_default();
    let deletes: Vec<&Value> = requests.iter().filter(|r| r["http"] == "DELETE").collect();
    assert_eq!(
        deletes.len(),
        1,
        "terminateSession sends one DELETE: {show}"
    );
    assert_eq!(deletes[0]["status"], 204, "DELETE status: {show}");

    let sid = summary["sessionId"]
        .as_str()
        .expect("sessionId in the summary")
        .to_owned();
    let revision = summary["protocolVersion"].as_str().map(str::to_owned);
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    runtime.block_on(async {
        let raw = McpClient::new().with_session(Some(&sid), revision.as_deref());
        expect::session_gone_everywhere(&raw, &urls).await;
    });
}

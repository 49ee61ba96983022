//! The official TypeScript SDK client (`@modelcontextprotocol/sdk`, pinned in `tests/ts`) against a
//! 3-node cluster on one Redis: runs `tests/ts/client_scenario.mjs` (connect via A, list via B,
//! echo via C, a countdown cut after two progress events and resumed by the SDK on another node,
//! then DELETE) and checks its JSON summary, then that every node answers 404 for the session.
//!
//! Needs `node` and `npm` on PATH (CI has them); without them the test prints that it skipped,
//! or fails when the `CI` environment variable is set.
//! `npm ci` runs first when `tests/ts/node_modules` is missing.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::temp::TempDir;

const SCRIPT_LIMIT: Duration = Duration::from_secs(90);
const NPM_CI_LIMIT: Duration = Duration::from_secs(300);

fn ts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ts")
}

fn on_path(program: &str) -> bool {
    let status = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    status.is_ok_and(|s| s.success())
}

/// Runs `cmd` to completion within `limit` (killing it by PID otherwise); returns its status,
/// stdout and stderr.
fn run_bounded(cmd: &mut Command, limit: Duration, what: &str) -> (ExitStatus, String, String) {
    let dir = TempDir::new("sb-ts-run");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let out = File::create(&out_path).expect("stdout file");
    let err = File::create(&err_path).expect("stderr file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let (o, e) = (read(&out_path), read(&err_path));
            panic!("{what}: not finished within {limit:?}\nstdout:\n{o}\nstderr:\n{e}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (status, read(&out_path), read(&err_path))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Installs the pinned SDK from `package-lock.json` when `node_modules` is missing.
fn ensure_node_modules() {
    let dir = ts_dir();
    if dir.join("node_modules").is_dir() {
        return;
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir);
    let (status, out, err) = run_bounded(&mut npm, NPM_CI_LIMIT, "npm ci --prefix tests/ts");
    assert!(status.success(), "npm ci failed ({status}):\n{out}\n{err}");
}

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
    if !on_path("node") || !on_path("npm") {
        assert!(
            std::env::var_os("CI").is_none(),
            "ts_sdk_client: `node` and/or `npm` not found on PATH, and CI is set: install Node.js >= 18 and npm (.ci/run does)"
        );
        eprintln!("SKIPPED ts_sdk_client: `node` and/or `npm` not found on PATH");
        return;
    }
    ensure_node_modules();
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut node = Command::new("node");
    node.current_dir(ts_dir())
        .arg("client_scenario.mjs")
        .args(&urls);
    let (status, stdout, stderr) = run_bounded(&mut node, SCRIPT_LIMIT, "node client_scenario.mjs");
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

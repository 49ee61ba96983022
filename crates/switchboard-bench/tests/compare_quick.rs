//! `switchboard-bench compare --quick` against the debug `switchboard` binary: every scenario
//! row is there, with throughput, CPU per call and without errors, every target of issues 4
//! and 17 is in the one targets table with a measured value (the agentgateway ones skipped with
//! their reason, unless `AGENTGATEWAY_BIN` names a prebuilt agentgateway), the sessions phase
//! and the resume storm ran, and the Markdown and JSON are written. The HAProxy reference row
//! is there exactly when `haproxy` is installed; the axum + reqwest hop row always is.

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
    let agw = std::env::var_os("AGENTGATEWAY_BIN").filter(|v| !v.is_empty());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"));
    cmd.arg("compare");
    if let Some(bin) = &agw {
        cmd.arg("--agentgateway").arg(bin);
    }
    let out = cmd
        .args(["--quick", "--duration-secs", "1", "--clients", "16"])
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
    let agw_label = "rmcp behind agentgateway (stateful, peer)";
    for clients in ["16", "1"] {
        let row = format!("| {agw_label} | {clients} | ");
        assert_eq!(
            table.contains(&row),
            agw.is_some(),
            "row {row:?} in:\n{table}"
        );
    }
    let rows = r["rows"].as_array().expect("rows");
    let scenarios = 7 + usize::from(haproxy) + usize::from(agw.is_some());
    assert_eq!(rows.len(), 2 * scenarios, "{r:#}");
    for row in rows {
        assert!(row["rps"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["errors"].as_u64(), Some(0), "{row}\n{stderr}");
        assert!(row["rps_vs_rmcp"].as_f64().unwrap() > 0.0, "{row}");
        // CPU per call of the servers, from /proc (a whole number of clock ticks: may be 0).
        assert!(row["cpu_us_per_call"].as_f64().unwrap() >= 0.0, "{row}");
    }
    let proxy16 = rows
        .iter()
        .find(|r| r["scenario"] == "proxy" && r["clients"] == 16)
        .expect("proxy row");
    assert!(
        proxy16["cpu_us_per_call"].as_f64().unwrap() > 0.0,
        "{proxy16}"
    );
    assert!(
        proxy16["upstream_cpu_us_per_call"].as_f64().is_some(),
        "{proxy16}"
    );
    // At 2 client counts, each candidate (all but rmcp) with its own rmcp run.
    let runs = 2 * 2 * (scenarios - 1);
    assert_eq!(r["runs"].as_array().map(Vec::len), Some(runs), "{r:#}");

    // Every target of issue 4 (5) and issue 17 (2 proxy × serve-forward, 2 Redis node, 2 CPU
    // against agentgateway, sessions/s, 3 resume storm), in one table, issue 4's first.
    let targets = r["targets"].as_array().expect("targets");
    let issues: Vec<u64> = targets
        .iter()
        .map(|t| t["issue"].as_u64().unwrap())
        .collect();
    assert_eq!(issues, [vec![4; 5], vec![17; 10]].concat(), "{r:#}");
    for t in targets {
        let what = t["what"].as_str().unwrap();
        let row = format!("| {} | {what} | ", t["issue"]);
        assert!(table.contains(&row), "no target row {row:?} in:\n{table}");
        let verdict = t["verdict"].as_str().unwrap();
        if what.contains("agentgateway") && agw.is_none() {
            assert_eq!(verdict, "SKIPPED", "{t}");
            assert!(
                t["note"].as_str().unwrap().contains("--agentgateway"),
                "{t}"
            );
            assert!(
                table.contains("SKIPPED: no --agentgateway BIN given"),
                "{table}"
            );
            continue;
        }
        assert!(
            ["PASS", "MISS"].contains(&verdict) || what.contains("exactly once"),
            "{t}"
        );
        let value = t["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("no value: {t}"));
        assert!(value > 0.0, "{t}");
        // --quick is one round: each target shows that round's value.
        assert_eq!(t["rounds"].as_array().map(Vec::len), Some(1), "{t}");
    }
    // The storm's replays were complete: exactly once and in order.
    let once = targets
        .iter()
        .find(|t| t["what"].as_str().unwrap().contains("exactly once"))
        .unwrap();
    assert_eq!(once["verdict"], "PASS", "{once}\n{stderr}");
    let storm = &r["storm"];
    assert_eq!(storm["clients"], 10, "{storm}");
    assert_eq!(storm["events"], 500, "{storm}");
    assert_eq!(storm["events_received"], 10 * 500, "{storm}");
    // The sessions phase: rmcp then the Redis node, every session created and deleted, and
    // the node's index empty again afterwards.
    let phase = &r["sessions"];
    let sruns = phase["runs"].as_array().expect("sessions runs");
    assert_eq!(sruns.len(), 2, "{phase}");
    for (run, server) in sruns.iter().zip(["rmcp", "switchboard"]) {
        assert_eq!(run["server"], server, "{run}");
        assert_eq!(run["report"]["created"], 300, "{run}");
        assert_eq!(run["report"]["deleted"], 300, "{run}");
        assert!(
            run["report"]["sessions_per_sec"].as_f64().unwrap() > 0.0,
            "{run}"
        );
    }
    assert_eq!(
        sruns[1]["index_after"].as_u64(),
        sruns[1]["index_before"].as_u64(),
        "{phase}"
    );
    assert!(table.contains("Sessions created per second"), "{table}");
    assert!(table.contains("Resume storm"), "{table}");
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

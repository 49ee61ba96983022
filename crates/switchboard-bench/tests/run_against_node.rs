//! `switchboard-bench run` against a real `switchboard` node with the memory store.

use std::process::Command;

use switchboard_tests::node::Node;
use switchboard_tests::temp::TempDir;

#[test]
fn run_two_seconds_four_clients_against_a_memory_store_node() {
    let logs = TempDir::new("sb-bench");
    let mut node = Node::spawn("bench", None, &[], logs.path());
    assert!(node.wait_ready(), "node not ready:\n{}", node.log_tail(40));
    let report = logs.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"))
        .args([
            "run",
            "--url",
            &node.url(),
            "--clients",
            "4",
            "--duration-secs",
            "2",
        ])
        .args(["--timeout-ms", "5000", "--report"])
        .arg(&report)
        .output()
        .expect("run switchboard-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("rps="), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("report is JSON");
    for field in [
        "mode",
        "urls",
        "clients",
        "elapsed_secs",
        "sessions",
        "requests",
        "requests_per_sec",
        "errors",
        "errors_by_kind",
    ] {
        assert!(r.get(field).is_some(), "no `{field}` in {r}");
    }
    for p in ["p50", "p95", "p99"] {
        assert!(
            r["latency_ms"][p].as_f64().is_some(),
            "no latency_ms.{p} in {r}"
        );
    }
    assert!(r["requests"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    assert_eq!(r["sessions"].as_u64(), Some(4), "{r}");
    assert!(r["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{r}");
    let elapsed = r["elapsed_secs"].as_f64().unwrap();
    assert!((2.0..10.0).contains(&elapsed), "{r}");
}

#[test]
fn idle_sessions_creates_holds_and_deletes() {
    let logs = TempDir::new("sb-bench-idle");
    let mut node = Node::spawn("idle", None, &[], logs.path());
    assert!(node.wait_ready(), "node not ready:\n{}", node.log_tail(40));
    let report = logs.path().join("idle.json");
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"))
        .args(["idle-sessions", "--url", &node.url(), "--count", "20"])
        .args(["--concurrency", "4", "--hold-secs", "0", "--report"])
        .arg(&report)
        .output()
        .expect("run switchboard-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("report is JSON");
    assert_eq!(r["created"].as_u64(), Some(20), "{r}");
    assert_eq!(r["deleted"].as_u64(), Some(20), "{r}");
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    assert!(r["sessions_per_sec"].as_f64().unwrap() > 0.0, "{r}");
}

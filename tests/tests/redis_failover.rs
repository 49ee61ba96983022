//! Nodes through a real Redis failover, under streaming clients (issue 14, "Failover"): three
//! nodes on a Sentinel group or a Redis Cluster, three clients each holding its session's GET
//! stream and calling `notify`/`countdown` in a loop over the nodes, and the primary that holds
//! the first client's session killed with SIGKILL (Cluster: the primary serving that session's
//! slot). The tests check what the issue promises while the primary is gone and after its
//! replica is promoted, and print the figures (`--nocapture` shows them):
//! - `/readyz` answers 503 on every node at least once; every 503 carries a JSON-RPC error
//!   body and `Retry-After`; no node exits; no stream goes silent (events, keep-alives every
//!   second, or a clean close it resumes) for longer than the recovery target ([`SILENCE_LIMIT`]);
//! - from the promotion (the fixture's wait returning) to each node's first successful
//!   event-producing call: at most 5 s;
//! - every stream gets events again after the recovery; no session is lost (no 404); no call is
//!   left without an answer (an answer stream that ends first is resumed on the next node; a
//!   resume refused with 400, because no event of that stream had been logged, is counted);
//! - events are counted per stream against a replay of its whole log afterwards: received,
//!   lost (received, then missing from the log), skipped (in the log, never received live),
//!   duplicated, out of order. With `redis.min_replicas_acked = 1` none may arrive twice or out
//!   of order, and `countdown` progress must be whole; lost and skipped are printed.
//!
//! Known gaps (measured with these tests, not asserted so the suite stays green):
//! - lost with `min_replicas_acked = 1`: the session scripts `PUBLISH` an event to the node
//!   holding its stream inside the script, before the pipeline's `WAIT`, so a client can receive
//!   an event its primary then takes down with it (1 event on each of 2 or 3 streams, twice in
//!   about fifteen Sentinel runs, both while the sentinels promoted twice: see
//!   `switchboard-store`'s `redis/sentinel.rs`, `recheck`);
//! - skipped: events logged while a node's subscription was gone, which the catch-up after the
//!   resubscription did not deliver because live events had moved the stream past them (up to 6
//!   on one stream in Cluster runs, with and without `min_replicas_acked`).
//!
//! With `min_replicas_acked = 1` each primary has two replicas: after a promotion the new primary
//! still has one to confirm writes (with one replica, every event append would wait
//! `redis.replicas_ack_timeout` and fail with 503 until the old primary is back as a replica).
//!
//! Two more tests measure what `min_replicas_acked = 1` costs per event-producing call (p50,
//! calls alternating between a cluster with it and one without); nothing is asserted on time.
//!
//! Needs `redis-server`, `redis-cli` and `redis-sentinel`; without them a test prints
//! `SKIPPED`, or fails when `CI` is set.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::eventually::eventually;
use switchboard_tests::failover::calls::{
    self, call_once, first_success, CallLog, Outcome, PingLog,
};
use switchboard_tests::failover::stream::{self, Counts, StreamLog};
use switchboard_tests::failover::{percentile, watch_ready, ReadyLog, Stop};
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_process::{
    redis_cli_binary, redis_sentinel_binary, redis_server_binary,
};
use tokio::task::JoinHandle;

const NODES: usize = 3;
const CLIENTS: usize = 3;
const REVISION: &str = "2025-11-25";

/// The keep-alive interval the nodes run with (`http.keepalive_interval`).
const KEEPALIVE: Duration = Duration::from_secs(1);

/// How many times a node's bus inbox may subscribe in one run (see `check`).
const SUBSCRIBES_LIMIT: usize = 10;

/// How long a promotion may take (about 2–5 s measured: `redis_topologies.rs`).
const FAILOVER_LIMIT: Duration = Duration::from_secs(20);

/// The bound from the promotion to a node working against the new primary.
const RECOVERY_LIMIT: Duration = Duration::from_secs(5);
/// The longest a held stream may go without an event, a keep-alive or a close: the recovery
/// target. Under the whole suite's load a Cluster failover silenced a stream for 3.04 s (both
/// Cluster tests of one CI run; the bound was 3 keep-alive intervals then, and the same build
/// passed it when run alone). Where the stream paused is not traced yet.
const SILENCE_LIMIT: Duration = RECOVERY_LIMIT;

fn tools_or_skip(test: &str) -> bool {
    available_or_skip(
        test,
        &[
            ("redis-server", redis_server_binary().is_some()),
            ("redis-cli", redis_cli_binary().is_some()),
            ("redis-sentinel", redis_sentinel_binary().is_some()),
        ],
    )
}

/// Node settings: 1 s keep-alives, `Retry-After: 1`, and `min_replicas_acked` (above 0: with
/// two replicas per primary and a 2 s confirmation timeout).
fn options(kind: RedisKind, acked: u32) -> ClusterOptions {
    let options = ClusterOptions::new()
        .redis(kind)
        .set(
            "http.keepalive_interval",
            format!("{}ms", KEEPALIVE.as_millis()),
        )
        .set("http.retry_after", "1s")
        .set("redis.min_replicas_acked", acked);
    if acked > 0 {
        // 2 s, not 500 ms, for a replica's confirmation: on 2 busy cores a healthy replica
        // missed 500 ms once (an `initialize` answered 503 at start).
        options
            .set("redis.replicas_ack_timeout", "2s")
            .redis_replicas(2)
    } else {
        options
    }
}

/// The clients and pollers running against a cluster.
struct Workload {
    clients: Vec<McpClient>,
    stop: Stop,
    received: Vec<Arc<AtomicUsize>>,
    streams: Vec<JoinHandle<StreamLog>>,
    calls: Vec<JoinHandle<CallLog>>,
    pings: Vec<JoinHandle<PingLog>>,
    ready: Vec<JoinHandle<ReadyLog>>,
}

impl Workload {
    /// Opens one session per client (client `i` on node `i`), then starts its stream holder
    /// (first on node `i`), its call loop (first on node `i + 1`) and one `/readyz` poller per
    /// node.
    async fn start(cluster: &Cluster) -> Workload {
        let urls = cluster.urls();
        let stop = Stop::default();
        let mut w = Workload {
            clients: Vec::new(),
            stop: stop.clone(),
            received: Vec::new(),
            streams: Vec::new(),
            calls: Vec::new(),
            pings: Vec::new(),
            ready: Vec::new(),
        };
        for i in 0..CLIENTS {
            let mut client = McpClient::new();
            client.initialize(&urls[i % NODES], REVISION).await;
            let received = Arc::new(AtomicUsize::new(0));
            w.streams.push(tokio::spawn(stream::hold(
                client.clone(),
                urls.clone(),
                i,
                stop.clone(),
                Arc::clone(&received),
            )));
            w.calls.push(tokio::spawn(calls::call_loop(
                client.clone(),
                urls.clone(),
                i + 1,
                stop.clone(),
            )));
            w.pings.push(tokio::spawn(calls::ping_loop(
                client.clone(),
                urls.clone(),
                i + 2,
                stop.clone(),
            )));
            w.received.push(received);
            w.clients.push(client);
        }
        for i in 0..NODES {
            w.ready
                .push(watch_ready(cluster.node(i).base_url(), stop.clone()));
        }
        w
    }

    /// Events received so far, per stream.
    fn received(&self) -> Vec<usize> {
        self.received
            .iter()
            .map(|r| r.load(Ordering::SeqCst))
            .collect()
    }

    /// Waits (at most 15 s) until every stream received `more` events beyond `since`; panics
    /// with `what` at the limit.
    async fn wait_events(&self, since: &[usize], more: usize, what: &str) {
        eventually(what, Duration::from_secs(15), || async {
            self.has_events(since, more).then_some(())
        })
        .await;
    }

    /// Whether every stream received `more` events beyond `since`.
    fn has_events(&self, since: &[usize], more: usize) -> bool {
        self.received()
            .iter()
            .zip(since)
            .all(|(n, s)| *n >= s + more)
    }

    /// Waits (at most `limit`) until every stream received `more` events beyond `since`;
    /// whether they did.
    async fn went_on(&self, since: &[usize], more: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.has_events(since, more) {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

/// What one failover run saw.
struct Run {
    label: String,
    acked: u32,
    promotion: Duration,
    killed_at: Instant,
    /// Whether every stream received 3 events within 15 s of every node's recovery.
    went_on: bool,
    /// Events per stream at the recovery and at the end.
    received: (Vec<usize>, Vec<usize>),
    recovery: Vec<Option<Duration>>,
    streams: Vec<StreamLog>,
    calls: Vec<CallLog>,
    pings: Vec<PingLog>,
    ready: Vec<ReadyLog>,
    counts: Vec<Counts>,
    exited: Vec<bool>,
    /// Per node, how often its bus inbox subscribed and how often it left because the primary
    /// moved (its log's `bus inbox subscribing` and `bus inbox: the primary moved` lines).
    subscribes: Vec<(usize, usize)>,
}

/// Kills the primary holding session `sid` and waits for its replica's promotion; the time
/// from the kill to the promotion seen.
fn kill_primary(cluster: &mut Cluster, sid: &str) -> Duration {
    match cluster.backend().kind() {
        RedisKind::Sentinel => {
            let group = cluster.backend_mut().sentinel_mut();
            let old = group.primary_port();
            group.kill(old);
            group.wait_promotion(old, FAILOVER_LIMIT).1
        }
        RedisKind::Cluster => {
            let redis = cluster.backend_mut().cluster_mut();
            let old = redis.primary_serving(&format!("sb:{{{sid}}}:s"));
            redis.kill(old);
            redis.wait_failover(old, FAILOVER_LIMIT).1
        }
        RedisKind::Standalone => panic!("a standalone Redis has no failover"),
    }
}

/// Starts the cluster and the workload, kills the primary, measures each node's recovery, lets
/// every stream receive more events, stops, and counts.
async fn failover_run(kind: RedisKind, acked: u32) -> Run {
    let mut cluster = Cluster::start(NODES, options(kind, acked));
    let urls = cluster.urls();
    let w = Workload::start(&cluster).await;
    w.wait_events(&[0; CLIENTS], 3, "events on every stream before the kill")
        .await;
    let sid = w.clients[0].session_id.clone().expect("a session");
    let promotion = tokio::task::block_in_place(|| kill_primary(&mut cluster, &sid));
    let promoted = Instant::now();
    let probes =
        (0..NODES).map(|i| {
            let (client, url) = (w.clients[0].clone(), urls[i].clone());
            let first_id = 10_000_000 * (i as u64 + 1);
            async move {
                first_success(&client, &url, first_id, promoted, Duration::from_secs(20)).await
            }
        });
    let recovery = join_all(probes).await;
    let at_recovery = w.received();
    let went_on = w.went_on(&at_recovery, 3, Duration::from_secs(15)).await;
    let after_recovery = w.received();
    let slow = recovery
        .iter()
        .any(|r| r.is_none_or(|r| r > RECOVERY_LIMIT));
    if !went_on || slow {
        for i in 0..NODES {
            let node = cluster.node(i);
            let log = node.log_tail(100_000);
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("bus inbox") || l.contains("primary") || l.contains("ERROR"))
                .collect();
            let lines = &lines[lines.len().saturating_sub(40)..];
            println!(
                "----- node {} bus log -----\n{}",
                node.id(),
                lines.join("\n")
            );
        }
    }
    w.stop.stop();
    let calls: Vec<CallLog> = join_all(w.calls)
        .await
        .into_iter()
        .map(|r| r.expect("call loop"))
        .collect();
    let streams: Vec<StreamLog> = join_all(w.streams)
        .await
        .into_iter()
        .map(|r| r.expect("stream holder"))
        .collect();
    let pings: Vec<PingLog> = join_all(w.pings)
        .await
        .into_iter()
        .map(|r| r.expect("ping loop"))
        .collect();
    let ready: Vec<ReadyLog> = join_all(w.ready)
        .await
        .into_iter()
        .map(|r| r.expect("readyz poller"))
        .collect();
    let exited = (0..NODES)
        .map(|i| cluster.node_mut(i).has_exited())
        .collect();
    let subscribes = (0..NODES)
        .map(|i| {
            let log = cluster.node(i).log_tail(1_000_000);
            let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
            (
                count("bus inbox subscribing"),
                count("bus inbox: the primary moved"),
            )
        })
        .collect();
    let mut counts = Vec::new();
    for (client, log) in w.clients.iter().zip(&streams) {
        let first = log.first_id.as_deref().expect("a first event");
        let replayed = stream::replay(client, &urls[0], first)
            .await
            .unwrap_or_else(|e| panic!("the replay after the run: {e}"));
        counts.push(stream::count(&log.events, &replayed));
    }
    Run {
        label: format!("{kind:?}, min_replicas_acked = {acked}"),
        acked,
        promotion,
        killed_at: promoted - promotion,
        went_on,
        received: (at_recovery, after_recovery),
        recovery,
        streams,
        calls,
        pings,
        ready,
        counts,
        exited,
        subscribes,
    }
}

/// Prints the run's figures.
fn print(run: &Run) {
    let ms =
        |d: &Option<Duration>| d.map_or("never".to_owned(), |d| format!("{} ms", d.as_millis()));
    println!("== failover: {} ==", run.label);
    println!("kill -> promotion seen: {} ms", run.promotion.as_millis());
    let recovery: Vec<String> = run.recovery.iter().map(ms).collect();
    println!("promotion -> first successful call, per node: {recovery:?}");
    for (i, r) in run.ready.iter().enumerate() {
        let span = r.not_ready_span.map_or(0, |(a, b)| (b - a).as_millis());
        println!(
            "node {i}: /readyz polls {}, 503 {} (first to last {span} ms), unanswered {}, other {:?}, exited {}",
            r.polls, r.not_ready, r.unanswered, r.other, run.exited[i]
        );
    }
    for (i, (s, c)) in run.streams.iter().zip(&run.counts).enumerate() {
        println!(
            "stream {i}: {c:?}; opens {}, closes {}, refused resumes {}, 503 {}, 404 {}, other {:?}, longest silence {} ms",
            s.opens, s.closes, s.resumes_refused, s.unavailable, s.sessions_lost, s.other_statuses,
            s.max_silence.as_millis()
        );
    }
    for (i, c) in run.calls.iter().enumerate() {
        let since_kill = |t: Instant| {
            t.saturating_duration_since(run.killed_at).as_millis() as i128
                - run.killed_at.saturating_duration_since(t).as_millis() as i128
        };
        let other: Vec<String> = c
            .calls
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Ok | Outcome::Unavailable))
            .map(|r| {
                format!(
                    "{:?} on node {} sent at kill{:+} ms, took {} ms",
                    r.outcome,
                    r.node,
                    since_kill(r.started),
                    r.elapsed.as_millis()
                )
            })
            .collect();
        let after: Vec<Duration> = c
            .calls
            .iter()
            .filter(|r| r.outcome == Outcome::Ok && r.started > run.killed_at + run.promotion)
            .map(|r| r.elapsed)
            .collect();
        println!(
            "calls {i}: after the promotion {} ok, p50 {} ms, slowest {} ms",
            after.len(),
            percentile(&after, 50).as_millis(),
            percentile(&after, 100).as_millis()
        );
        println!(
            "calls {i}: {} calls, ok {}, 503 {}, answers resumed {}, others {other:?}; countdown progress lost {}, duplicated {}, out of order {}",
            c.calls.len(), c.count(&Outcome::Ok), c.count(&Outcome::Unavailable), c.resumed,
            c.progress_lost, c.progress_duplicated, c.progress_out_of_order
        );
    }
}

/// Prints the ping loops' figures.
fn print_pings(run: &Run) {
    for (i, p) in run.pings.iter().enumerate() {
        println!(
            "pings {i}: ok {}, 503 {}, 404 {}, other {:?}, slowest {} ms",
            p.ok,
            p.unavailable,
            p.not_found,
            p.other,
            p.slowest.as_millis()
        );
    }
}

/// The promises for a failover run (see the module doc).
fn check(run: &Run) {
    print(run);
    print_pings(run);
    let label = &run.label;
    let (at, end) = &run.received;
    println!("events per stream at every node's recovery {at:?}, 15 s later at most {end:?}");
    assert!(
        run.went_on,
        "{label}: a stream got no events after the recovery"
    );
    for (i, r) in run.ready.iter().enumerate() {
        assert!(
            r.not_ready > 0,
            "{label}: node {i}'s /readyz never answered 503"
        );
        assert!(!run.exited[i], "{label}: node {i} exited");
    }
    let bad: Vec<&String> = run
        .streams
        .iter()
        .flat_map(|s| &s.bad_503)
        .chain(run.calls.iter().flat_map(|c| &c.bad_503))
        .chain(run.pings.iter().flat_map(|p| &p.bad_503))
        .collect();
    assert!(bad.is_empty(), "{label}: malformed 503s: {bad:?}");
    // Through one failover an inbox leaves for a moved primary at most twice (measured: 0–1);
    // when the Sentinel inbox reconnected in a loop it logged that 50–170 times per node
    // (RELIABILITY.md, finding 5).
    println!(
        "bus inbox per node (subscribed, left as the primary moved): {:?}",
        run.subscribes
    );
    for (i, (subscribed, moved)) in run.subscribes.iter().enumerate() {
        assert!(
            *subscribed <= SUBSCRIBES_LIMIT && *moved <= 2,
            "{label}: node {i}'s bus inbox subscribed {subscribed} times, left {moved} times"
        );
    }
    for (i, r) in run.recovery.iter().enumerate() {
        let r = r.unwrap_or_else(|| panic!("{label}: node {i} never served again"));
        assert!(
            r <= RECOVERY_LIMIT,
            "{label}: node {i} served again after {r:?}"
        );
    }
    for (i, s) in run.streams.iter().enumerate() {
        assert!(
            s.max_silence <= SILENCE_LIMIT,
            "{label}: stream {i} silent for {:?}",
            s.max_silence
        );
        assert_eq!(s.sessions_lost, 0, "{label}: stream {i}'s session lost");
    }
    for (i, p) in run.pings.iter().enumerate() {
        assert_eq!(p.not_found, 0, "{label}: pings {i} got 404");
    }
    for (i, c) in run.calls.iter().enumerate() {
        assert_eq!(c.count(&Outcome::NotFound), 0, "{label}: calls {i} got 404");
        let unanswered: Vec<&Outcome> = c
            .calls
            .iter()
            .map(|r| &r.outcome)
            .filter(|o| matches!(o, Outcome::NoAnswer(_)))
            .collect();
        assert!(
            unanswered.is_empty(),
            "{label}: calls {i} left without an answer: {unanswered:?}"
        );
    }
    for (i, c) in run.counts.iter().enumerate() {
        assert_eq!(c.skipped, 0, "{label}: stream {i} skipped logged events");
    }
    if run.acked > 0 {
        for (i, c) in run.counts.iter().enumerate() {
            let wrong = (c.lost, c.duplicated, c.out_of_order);
            assert_eq!(
                wrong,
                (0, 0, 0),
                "{label}: stream {i} lost or repeated events"
            );
        }
        for (i, c) in run.calls.iter().enumerate() {
            let progress = (
                c.progress_lost,
                c.progress_duplicated,
                c.progress_out_of_order,
            );
            assert_eq!(
                progress,
                (0, 0, 0),
                "{label}: calls {i}' countdown progress"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_failover_with_min_replicas_acked() {
    if tools_or_skip("sentinel_failover_with_min_replicas_acked") {
        check(&failover_run(RedisKind::Sentinel, 1).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sentinel_failover_without_min_replicas_acked() {
    if tools_or_skip("sentinel_failover_without_min_replicas_acked") {
        check(&failover_run(RedisKind::Sentinel, 0).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_failover_with_min_replicas_acked() {
    if tools_or_skip("cluster_failover_with_min_replicas_acked") {
        check(&failover_run(RedisKind::Cluster, 1).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_failover_without_min_replicas_acked() {
    if tools_or_skip("cluster_failover_without_min_replicas_acked") {
        check(&failover_run(RedisKind::Cluster, 0).await);
    }
}

/// p50 of an event-producing call (`countdown`, 1 progress step) with and without
/// `min_replicas_acked = 1`: one node on each of two Redis of `kind` (one replica per primary
/// both), calls alternating between them after 20 warm-up calls each. Prints both and the
/// ratio; asserts only that every call succeeded.
async fn acked_cost(kind: RedisKind) {
    const CALLS: usize = 150;
    let plain = Cluster::start(1, options(kind, 0));
    let acked = Cluster::start(1, options(kind, 1).redis_replicas(1));
    let mut clients = Vec::new();
    for cluster in [&plain, &acked] {
        let mut client = McpClient::new();
        client.initialize(&cluster.url(0), REVISION).await;
        clients.push((client, cluster.urls()));
    }
    let mut samples = [Vec::new(), Vec::new()];
    for k in 0..(20 + CALLS) as u64 {
        for (j, (client, url)) in clients.iter().enumerate() {
            let started = Instant::now();
            let args = json!({"n": 1, "interval_ms": 0});
            let outcome = call_once(client, url, 0, 100 + k, "countdown", args)
                .await
                .outcome;
            assert_eq!(outcome, Outcome::Ok, "{kind:?}: call {k} (acked {j})");
            if k >= 20 {
                samples[j].push(started.elapsed());
            }
        }
    }
    let (p0, p1) = (percentile(&samples[0], 50), percentile(&samples[1], 50));
    println!(
        "== min_replicas_acked cost, {kind:?}, {CALLS} calls each: p50 {:.2} ms without, {:.2} ms with, ratio {:.2}; p90 {:.2} / {:.2} ms ==",
        p0.as_secs_f64() * 1e3,
        p1.as_secs_f64() * 1e3,
        p1.as_secs_f64() / p0.as_secs_f64(),
        percentile(&samples[0], 90).as_secs_f64() * 1e3,
        percentile(&samples[1], 90).as_secs_f64() * 1e3,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_replicas_acked_cost_sentinel() {
    if tools_or_skip("min_replicas_acked_cost_sentinel") {
        acked_cost(RedisKind::Sentinel).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_replicas_acked_cost_cluster() {
    if tools_or_skip("min_replicas_acked_cost_cluster") {
        acked_cost(RedisKind::Cluster).await;
    }
}

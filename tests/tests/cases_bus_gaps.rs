//! Case C37 on a real standalone Redis and three real nodes (`a`, `b`, `c`): what one node
//! tells another while the receiver's pub/sub connection is down arrives once it is back. Each
//! trial kills every node's pub/sub connection (`CLIENT KILL TYPE pubsub`) and holds their
//! reconnection off for 250 ms (`tests/src/bus_drop.rs`), with the message sent 0–50 ms after
//! the cut (spread evenly over the trials):
//! - a sampling answer POSTed on c while a's inbox is away: the tool result on a within 3 s;
//! - `notifications/cancelled` POSTed on c for a `countdown` running on a: its stream ends
//!   within 3 s and no progress is logged after;
//! - a call forwarded from b to a (`fx`, a stdio child per session, lives on a) whose outcome
//!   is sent while b's inbox is away: the answer on b within 3 s.
//!
//! - (case C44) `tasks/update` POSTed on c for a task on a waiting for input (the demo `sample`
//!   as a 2026-07-28 task): the task leaves `input_required` within 3 s.
//!
//! Each probe runs 20 trials with one cut, and 20 with two cuts 300 ms apart
//! (StackExchange.Redis#517). `SB_BUS_TRIALS` sets another count. Each test prints its figures
//! (`--nocapture`). The Sentinel variant is in `cases_bus_sentinel.rs`.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::bus_drop;
use switchboard_tests::bus_probes::{
    counter_or_zero, node_id, sampling_session, WaitingSample, EXPIRED, LOST, REDELIVERED,
};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::{always_for, eventually};
use switchboard_tests::msg;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, ConfiguredCluster, Upstream};

const T: Duration = Duration::from_secs(10);

/// The case's bound from the message (or the cut, for a forwarded call's outcome) to its
/// effect.
const BOUND: Duration = Duration::from_secs(3);

/// How long each cut holds the nodes' reconnection off.
const HOLD: Duration = Duration::from_millis(250);

/// From one cut to the next in the double-drop variant.
const GAP: Duration = Duration::from_millis(300);

/// The latest the message follows the cut.
const MAX_JITTER_MS: u64 = 50;

/// Trials per probe: 20 as the case says, or `SB_BUS_TRIALS`.
fn trials() -> usize {
    std::env::var("SB_BUS_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// Trial `i`'s delay from the cut to the message: 0–50 ms, spread evenly over `n` trials.
fn jitter(i: usize, n: usize) -> Duration {
    let step = MAX_JITTER_MS * i as u64 / (n.max(2) - 1) as u64;
    Duration::from_millis(step)
}

/// Three nodes on one standalone Redis with the demo server (names unprefixed) and the stdio
/// fixture as `fx`.
fn start() -> ConfiguredCluster {
    start_with(ClusterOptions::new())
}

fn start_with(options: ClusterOptions) -> ConfiguredCluster {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstreams = [
        Upstream::demo("demo").prefix(""),
        Upstream::stdio("fx", &python, &[fixture.as_str()]),
    ];
    start_cluster(3, &upstreams, options)
}

/// Every node's inbox channel `sb:inbox:<id>`, in node order.
fn inboxes(cluster: &Cluster) -> Vec<String> {
    (0..cluster.len())
        .map(|i| format!("sb:inbox:{}", node_id(cluster, i)))
        .collect()
}

/// Waits (at most 10 s) until every inbox channel has its one subscriber again, so a trial
/// starts with every node on the bus.
async fn all_subscribed(cluster: &Cluster, channels: &[String]) {
    eventually("every node's inbox subscribed", T, || async {
        channels
            .iter()
            .all(|c| {
                let reply: (String, i64) = cluster
                    .redis()
                    .query(&["PUBSUB", "NUMSUB", c])
                    .expect("PUBSUB NUMSUB");
                reply.1 == 1
            })
            .then_some(())
    })
    .await;
}

/// Cuts every node off the bus `drops` times, `GAP` apart, each time for `HOLD`, and sends
/// `message` `jitter` after the first cut. While the first cut holds, `away` (the receiver's
/// inbox) is checked to have no subscriber. Returns what `message` returned and when the first
/// cut was made.
async fn across_drops<T, Fut>(
    cluster: &Cluster,
    drops: usize,
    jitter: Duration,
    away: &[String],
    message: impl FnOnce() -> Fut,
) -> (T, Instant)
where
    Fut: Future<Output = T>,
{
    let port = cluster.redis().port();
    let (mut held, killed) = bus_drop::hold_off(port, None);
    assert!(
        killed >= 3,
        "every node's inbox connection ({killed} killed)"
    );
    let cut = held.since();
    held.away_until(cut + jitter, away).await;
    let out = message().await;
    held.away_until(cut + HOLD, away).await;
    held.release();
    for k in 1..drops {
        let next = cut + GAP * k as u32;
        let left = next.saturating_duration_since(Instant::now());
        always_for(
            "the Redis lets clients in between the cuts",
            left,
            || async { cluster.redis().query::<String>(&["PING"]).is_ok() },
        )
        .await;
        let (mut held, _) = bus_drop::hold_off(port, None);
        let since = held.since();
        held.away_until(since + HOLD, &[]).await;
        held.release();
    }
    (out, cut)
}

/// The outcome of every trial of a probe: how long each took, and what went wrong in the ones
/// that failed.
#[derive(Default)]
struct Tally {
    took: Vec<Duration>,
    failed: Vec<String>,
}

impl Tally {
    fn pass(&mut self, took: Duration) {
        self.took.push(took);
    }

    fn fail(&mut self, trial: usize, why: String) {
        self.failed.push(format!("trial {trial}: {why}"));
    }

    /// Prints the figures, then asserts every trial passed.
    fn report(mut self, probe: &str, n: usize, started: Instant) {
        self.took.sort();
        let pick = |q: usize| {
            let at = q * self.took.len().saturating_sub(1) / 100;
            self.took.get(at).copied().unwrap_or_default()
        };
        println!(
            "{probe}: {}/{n} within 3 s; min {:?}, median {:?}, max {:?}; {:?} in all",
            self.took.len(),
            pick(0),
            pick(50),
            pick(100),
            started.elapsed()
        );
        assert!(self.failed.is_empty(), "{probe}: {:#?}", self.failed);
        assert_eq!(self.took.len(), n, "{probe}");
    }
}

/// What the receiving node counted meanwhile: messages it read from its mailbox (their
/// doorbell was missed: the trials did hit the gap), and none lost or dropped anywhere.
async fn mailboxes_used(cluster: &Cluster, receiver: usize, probe: &str) {
    let redelivered = counter_or_zero(&cluster.node(receiver).base_url(), REDELIVERED).await;
    println!("{probe}: node {receiver} read {redelivered} message(s) from its mailbox");
    assert!(redelivered >= 1, "{probe}: no trial hit the gap");
    for i in 0..cluster.len() {
        let base = cluster.node(i).base_url();
        for name in [LOST, EXPIRED] {
            assert_eq!(counter_or_zero(&base, name).await, 0, "{name} on node {i}");
        }
    }
}

/// Probe 1: a sampling answer POSTed on c while a's inbox is away reaches the call on a.
async fn sampling_answers(drops: usize) {
    let started = start();
    let cluster = &started.cluster;
    let urls = cluster.urls();
    let channels = inboxes(cluster);
    let (client, _) = sampling_session(&urls[0]).await;
    let (n, began, mut tally) = (trials(), Instant::now(), Tally::default());
    for i in 0..n {
        all_subscribed(cluster, &channels).await;
        let tag = format!("t{i}");
        let mut sample = WaitingSample::start(&client, &urls[0], 10 + i as u64, &tag).await;
        let away = [channels[0].clone()];
        let ((sent, status), _) = across_drops(cluster, drops, jitter(i, n), &away, || {
            sample.answer(&client, &urls[2], &tag)
        })
        .await;
        if status != 202 {
            tally.fail(i, format!("the answer on c got {status}"));
            continue;
        }
        match sample.result_by(sent + BOUND).await {
            Some(r) if msg::result_text(&r).contains(&tag) => tally.pass(sent.elapsed()),
            Some(r) => tally.fail(i, format!("result {r}")),
            None => tally.fail(i, format!("no result within 3 s ({:?})", sent.elapsed())),
        }
    }
    tally.report(&format!("sampling, {drops} cut(s)"), n, began);
    mailboxes_used(cluster, 0, "sampling").await;
}

/// Probe 2: `notifications/cancelled` POSTed on c while a's inbox is away stops a countdown
/// running on a.
async fn cancellations(drops: usize) {
    let started = start();
    let cluster = &started.cluster;
    let urls = cluster.urls();
    let channels = inboxes(cluster);
    let (client, sid) = sampling_session(&urls[0]).await;
    let (n, began, mut tally) = (trials(), Instant::now(), Tally::default());
    for i in 0..n {
        all_subscribed(cluster, &channels).await;
        let id = 100 + i as u64;
        let args = json!({"n": 20, "interval_ms": 250});
        let call = msg::call_with_progress(id, "countdown", args, &format!("c{i}"));
        let mut stream = client.post(&urls[0], &call).await.sse();
        let mut progress = 0;
        let two = stream
            .until(T, |m| {
                progress += usize::from(m["method"] == "notifications/progress");
                progress == 2
            })
            .await;
        let last = two.events.last().and_then(|e| e.id.clone());
        let Some(last) = last.filter(|_| two.matched.is_some()) else {
            tally.fail(i, format!("no 2 progress events: {:?}", two.events));
            continue;
        };
        let away = [channels[0].clone()];
        let (status, _) = across_drops(cluster, drops, jitter(i, n), &away, || async {
            let sent = Instant::now();
            (
                sent,
                client.post(&urls[2], &msg::cancelled(id)).await.status,
            )
        })
        .await;
        let (sent, status) = status;
        if status.as_u16() != 202 {
            tally.fail(i, format!("the cancellation on c got {status}"));
            continue;
        }
        let left = (sent + BOUND).saturating_duration_since(Instant::now());
        let rest = match stream.until_end(left).await {
            Ok(rest) => rest,
            Err(read) => {
                let n = read.len();
                tally.fail(i, format!("stream still open after 3 s ({n} more events)"));
                continue;
            }
        };
        let took = sent.elapsed();
        let finished = rest
            .iter()
            .filter_map(|e| e.json())
            .any(|m| msg::result_text(&m).contains("countdown finished"));
        if finished {
            tally.fail(i, "the countdown ran to its end".into());
            continue;
        }
        no_progress_after(cluster, &sid, &last).await;
        tally.pass(took);
    }
    tally.report(&format!("cancellation, {drops} cut(s)"), n, began);
    mailboxes_used(cluster, 0, "cancellation").await;
}

/// The event log of the stream that `event_id` (`<stream>_<position>`) belongs to stays as it
/// is for 300 ms (more than one 250 ms countdown step): nothing is raised on it any more.
async fn no_progress_after(cluster: &Cluster, sid: &str, event_id: &str) {
    let (stream, _) = event_id.rsplit_once('_').expect("an event id");
    let key = format!("sb:{{{sid}}}:log:{stream}");
    let len = || -> i64 { cluster.redis().query(&["XLEN", &key]).expect("XLEN") };
    let ended = len();
    always_for(
        "no progress logged after the stream ended",
        Duration::from_millis(300),
        || async { len() == ended },
    )
    .await;
}

/// Probe 3: a 1 s call POSTed on b runs on a (the session's `fx` child lives there); its
/// outcome, sent while b's inbox is away, reaches b.
async fn forwarded_outcomes(drops: usize) {
    let started = start();
    let cluster = &started.cluster;
    let urls = cluster.urls();
    let channels = inboxes(cluster);
    let (client, _) = sampling_session(&urls[0]).await;
    let first = client
        .call_tool(&urls[0], 1, "fx__echo", json!({"s": "x"}))
        .await
        .answer(json!(1), T)
        .await;
    assert!(first.response.get("result").is_some(), "{}", first.response);
    let (n, began, mut tally) = (trials(), Instant::now(), Tally::default());
    for i in 0..n {
        all_subscribed(cluster, &channels).await;
        let (id, tag) = (200 + i as u64, format!("f{i}"));
        let (c, url, args) = (
            client.clone(),
            urls[1].clone(),
            json!({"seconds": 1, "tag": tag}),
        );
        let posted = Instant::now();
        let call = tokio::spawn(async move {
            c.call_tool(&url, id, "fx__slow", args)
                .await
                .answer(json!(id), T)
                .await
        });
        // The cut goes 0–50 ms before the outcome, sent about 1 s after the call.
        let cut_at = posted + Duration::from_secs(1) - jitter(i, n);
        let left = cut_at.saturating_duration_since(Instant::now());
        always_for(
            "the 1 s call not answered before its time",
            left,
            || async { !call.is_finished() },
        )
        .await;
        let away = [channels[1].clone()];
        let ((), cut) = across_drops(cluster, drops, Duration::ZERO, &away, || async {}).await;
        let left = (cut + BOUND).saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, call).await {
            Ok(Ok(answer)) if answer.response["result"]["content"][0]["text"] == tag => {
                tally.pass(cut.elapsed())
            }
            Ok(Ok(answer)) => tally.fail(i, format!("answer {}", answer.response)),
            Ok(Err(e)) => tally.fail(i, format!("the call failed: {e}")),
            Err(_) => tally.fail(i, "no answer on b within 3 s of the cut".into()),
        }
    }
    tally.report(&format!("forwarded call, {drops} cut(s)"), n, began);
    mailboxes_used(cluster, 1, "forwarded call").await;
}

/// A 2026-07-28 POST of `method` with the tasks extension and sampling declared; the answer.
async fn modern_post(
    url: &str,
    method: &str,
    name: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "sampling": {}});
    let body = switchboard_tests::modern::request(1, method, params, caps);
    let headers = switchboard_tests::modern::headers(method, Some(name));
    let reply = switchboard_tests::client::McpClient::new()
        .send(reqwest::Method::POST, url, &headers, Some(body.to_string()))
        .await;
    reply.answer(json!(1), T).await.response
}

/// Probe 4 (case C44): `tasks/update` POSTed on c while a's inbox is away reaches the task's
/// call on a, which goes on: the task leaves `input_required` within 3 s.
async fn task_input(drops: usize) {
    let options = ClusterOptions::new()
        .set("stateless.tasks.after", "200ms")
        .set("stateless.tasks.poll_interval", "100ms");
    let started = start_with(options);
    let cluster = &started.cluster;
    let urls = cluster.urls();
    let channels = inboxes(cluster);
    let (n, began, mut tally) = (trials(), Instant::now(), Tally::default());
    for i in 0..n {
        let tag = format!("t{i}");
        let args = json!({"name": "sample", "arguments": {"prompt": tag}});
        let created = modern_post(&urls[0], "tools/call", "sample", args).await;
        let task = created["result"]["taskId"]
            .as_str()
            .expect("a task")
            .to_owned();
        let get = || modern_post(&urls[1], "tasks/get", &task, json!({"taskId": task}));
        let waiting = eventually("the task waits for input", T, || async {
            let r = get().await;
            (r["result"]["status"] == "input_required").then_some(r)
        })
        .await;
        let key = waiting["result"]["inputRequests"]
            .as_object()
            .and_then(|q| q.keys().next().cloned())
            .expect("one question");
        let answer = json!({"role": "assistant", "model": "m",
                            "content": {"type": "text", "text": tag}});
        let params = json!({"taskId": task, "inputResponses": {key: answer}});
        all_subscribed(cluster, &channels).await;
        let away = [channels[0].clone()];
        let (updated, sent) = across_drops(cluster, drops, jitter(i, n), &away, || {
            modern_post(&urls[2], "tasks/update", &task, params)
        })
        .await;
        if updated["result"]["resultType"] != "complete" {
            tally.fail(i, format!("tasks/update on c: {updated}"));
            continue;
        }
        let left = async {
            loop {
                let r = get().await;
                if r["result"]["status"] != "input_required" {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        };
        // Left `input_required`: the call took the answer and goes on (`working`, then
        // `completed`).
        match tokio::time::timeout_at((sent + BOUND).into(), left).await {
            Ok(r)
                if ["working", "completed"]
                    .contains(&r["result"]["status"].as_str().unwrap_or("")) =>
            {
                tally.pass(sent.elapsed())
            }
            Ok(r) => tally.fail(i, format!("status {r}")),
            Err(_) => tally.fail(
                i,
                format!("still input_required after {:?}", sent.elapsed()),
            ),
        }
    }
    tally.report(&format!("task input, {drops} cut(s)"), n, began);
    mailboxes_used(cluster, 0, "task input").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c44_task_input_one_cut() {
    task_input(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_sampling_answer_one_cut() {
    sampling_answers(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_sampling_answer_two_cuts() {
    sampling_answers(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_cancellation_one_cut() {
    cancellations(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_cancellation_two_cuts() {
    cancellations(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_forwarded_outcome_one_cut() {
    forwarded_outcomes(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c37_forwarded_outcome_two_cuts() {
    forwarded_outcomes(2).await;
}

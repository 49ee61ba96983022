//! Streaming calls while Redis has no primary (issue 32): `countdown` (20 steps, 150 ms apart,
//! with a progress token: progress on its own answer stream) and `notify` (20 log messages 150 ms
//! apart, on the session's standalone stream, held on node B) run on node A when the session's
//! primary is killed. Their notifications cannot be logged until the replica is promoted; the
//! node tries each again until the call's deadline (its upstream's `timeout_ms`), in order, so
//! the calls ride out the promotion: each answers with its result and the client gets every
//! event once, in order (resuming with `Last-Event-ID` on the other node should a stream drop).
//! Before, the first notification that failed ended a call with -32603 "could not deliver a
//! notification".
//!
//! - Sentinel: the primary killed with SIGKILL; the sentinels promote the replica (about 4 s
//!   here, `down-after-milliseconds` 3 s).
//! - Redis Cluster: the primary serving the session's slot killed (about 2–3 s).
//! - A standalone Redis stopped for good, with the demo's `timeout_ms` at 2.5 s: the call ends at
//!   its deadline with -32603 naming the store (`data.reason = "store_unreachable"`), written
//!   straight to its open stream, instead of hanging.
//!
//! `--nocapture` prints the figures: the promotion, the longest pause between two progress
//! events, the call's duration.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::redis_process::{
    redis_cli_binary, redis_sentinel_binary, redis_server_binary,
};
use switchboard_tests::sse::{is_response, SseStream};
use switchboard_tests::temp::TempDir;

const REVISION: &str = "2025-11-25";
const STEPS: u64 = 20;
/// How long the promotion may take (2–5 s measured).
const FAILOVER_LIMIT: Duration = Duration::from_secs(20);
/// The whole call, promotion included, at most.
const CALL_LIMIT: Duration = Duration::from_secs(30);

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

/// What the client read of one stream.
#[derive(Debug, Default)]
struct Read {
    /// The counted messages (see [`read_stream`]) with their arrival, in order of arrival.
    counted: Vec<(Instant, Value)>,
    /// The message that ended the read, if it came.
    last: Option<Value>,
    /// Streams resumed with `Last-Event-ID`.
    resumes: usize,
}

impl Read {
    /// The longest time between two counted messages.
    fn longest_pause(&self) -> Duration {
        let pauses = self.counted.windows(2).map(|w| w[1].0 - w[0].0);
        pauses.max().unwrap_or_default()
    }

    /// `pointer` of each counted message.
    fn values(&self, pointer: &str) -> Vec<u64> {
        let value = |m: &Value| m.pointer(pointer).and_then(Value::as_u64).expect(pointer);
        self.counted.iter().map(|(_, m)| value(m)).collect()
    }
}

/// Reads `stream` until a message `last` accepts, keeping (and counting in `seen`) the messages
/// of method `counted`; a stream that ends first is resumed from its last event id on
/// `resume_on` (503s while the store is away are retried).
async fn read_stream(
    client: McpClient,
    resume_on: String,
    mut stream: SseStream,
    (counted, last): (&'static str, impl Fn(&Value) -> bool),
    seen: Arc<AtomicUsize>,
) -> Read {
    let mut read = Read::default();
    let mut last_id: Option<String> = None;
    let until = Instant::now() + CALL_LIMIT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let Some((event, message)) = stream.next_message(left).await else {
            if !stream.is_ended() {
                return read;
            }
            let from = last_id
                .clone()
                .expect("an event id before the stream ended");
            let what = format!("the stream resumed from {from}");
            stream = eventually(&what, Duration::from_secs(20), || async {
                let resumed = client.get_stream(&resume_on, Some(&from)).await;
                (resumed.status == StatusCode::OK).then(|| resumed.sse())
            })
            .await;
            read.resumes += 1;
            continue;
        };
        last_id = event.id.clone().or(last_id);
        if last(&message) {
            read.last = Some(message);
            return read;
        }
        if message["method"] == counted {
            read.counted.push((event.at, message));
            seen.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Starts `countdown` (`n` steps `interval_ms` apart, with a progress token) as request 2 on
/// `urls[0]` and its reader (resuming on `urls[1]`); returns the reader's task once three
/// progress events arrived.
async fn start_countdown(
    client: &McpClient,
    urls: &[String],
    n: u64,
    interval_ms: u64,
) -> tokio::task::JoinHandle<Read> {
    let args = json!({"n": n, "interval_ms": interval_ms});
    let reply = client
        .post(
            &urls[0],
            &msg::call_with_progress(2, "countdown", args, "promo"),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.is_sse(), "countdown with progress streams");
    let seen = Arc::new(AtomicUsize::new(0));
    let answered = |m: &Value| is_response(m, &json!(2));
    let reader = tokio::spawn(read_stream(
        client.clone(),
        urls[1].clone(),
        reply.sse(),
        ("notifications/progress", answered),
        seen.clone(),
    ));
    eventually("three progress events", Duration::from_secs(10), || async {
        (seen.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    reader
}

/// Starts `notify` (`n` log messages 150 ms apart, on the standalone stream) as request 3 on
/// `urls[0]`, its answer's task, and the reader of the standalone stream (held on `urls[1]`,
/// resumed on `urls[0]`).
async fn start_notify(
    client: &McpClient,
    urls: &[String],
    n: u64,
) -> (
    tokio::task::JoinHandle<Value>,
    tokio::task::JoinHandle<Read>,
) {
    let get = client.get_stream(&urls[1], None).await;
    assert_eq!(get.status, StatusCode::OK);
    let updated = |m: &Value| m["method"] == "notifications/resources/updated";
    let reader = tokio::spawn(read_stream(
        client.clone(),
        urls[0].clone(),
        get.sse(),
        ("notifications/message", updated),
        Arc::default(),
    ));
    let (c, url) = (client.clone(), urls[0].clone());
    let call = tokio::spawn(async move {
        let args = json!({"count": n, "interval_ms": 150});
        let reply = c.call_tool(&url, 3, "notify", args).await;
        reply.answer(json!(3), CALL_LIMIT).await.response
    });
    (call, reader)
}

/// A countdown and a `notify` on node A through the primary's loss (`kill` kills it and waits
/// for the promotion, returning how long that took): both calls answer with their result, and
/// every progress event and log message arrives once, in order.
async fn rides_out(kind: RedisKind, kill: impl FnOnce(&mut Cluster, &str) -> Duration) {
    let options = ClusterOptions::new()
        .redis(kind)
        .set("http.keepalive_interval", "1s");
    let mut cluster = Cluster::start(2, options);
    let urls = cluster.urls();
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&urls[0], REVISION).await;
    let started = Instant::now();
    let (notify, messages) = start_notify(&client, &urls, STEPS).await;
    let countdown = start_countdown(&client, &urls, STEPS, 150).await;
    let promotion = tokio::task::block_in_place(|| kill(&mut cluster, &sid));
    let read = tokio::time::timeout(CALL_LIMIT, countdown)
        .await
        .expect("the countdown answers")
        .expect("the reader");
    let took = started.elapsed();
    let notified = tokio::time::timeout(CALL_LIMIT, notify)
        .await
        .expect("notify answers")
        .expect("the notify call");
    let logged = tokio::time::timeout(CALL_LIMIT, messages)
        .await
        .expect("the standalone stream's messages")
        .expect("the reader");
    println!(
        "== {kind:?}: promotion {} ms after the kill; countdown {} ms, longest pause between progress events {} ms, resumes {}; notify: longest pause {} ms, resumes {} ==",
        promotion.as_millis(),
        took.as_millis(),
        read.longest_pause().as_millis(),
        read.resumes,
        logged.longest_pause().as_millis(),
        logged.resumes,
    );
    let response = read.last.clone().unwrap_or_else(|| {
        panic!("{kind:?}: no answer; read {read:?}");
    });
    assert_eq!(
        response["result"]["content"][0]["text"], "countdown finished",
        "{kind:?}: the call rode out the promotion: {response}"
    );
    let expected: Vec<u64> = (1..=STEPS).collect();
    assert_eq!(
        read.values("/params/progress"),
        expected,
        "{kind:?}: every progress event once, in order"
    );
    assert!(
        read.longest_pause() >= promotion / 2,
        "{kind:?}: the events waited for the promotion ({read:?})"
    );
    assert!(
        notified.get("result").is_some(),
        "{kind:?}: notify rode out the promotion: {notified}"
    );
    assert!(logged.last.is_some(), "{kind:?}: {logged:?}");
    assert_eq!(
        logged.values("/params/data/seq"),
        expected,
        "{kind:?}: every log message once, in order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_countdown_rides_out_a_sentinel_promotion() {
    if !tools_or_skip("a_countdown_rides_out_a_sentinel_promotion") {
        return;
    }
    rides_out(RedisKind::Sentinel, |cluster, _| {
        let group = cluster.backend_mut().sentinel_mut();
        let old = group.primary_port();
        group.kill(old);
        group.wait_promotion(old, FAILOVER_LIMIT).1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_countdown_rides_out_a_cluster_failover() {
    if !tools_or_skip("a_countdown_rides_out_a_cluster_failover") {
        return;
    }
    rides_out(RedisKind::Cluster, |cluster, sid| {
        let redis = cluster.backend_mut().cluster_mut();
        let old = redis.primary_serving(&format!("sb:{{{sid}}}:s"));
        redis.kill(old);
        redis.wait_failover(old, FAILOVER_LIMIT).1
    })
    .await;
}

/// The demo as the one upstream, unprefixed, with `timeout_ms` (the call's deadline).
fn demo_with_timeout(dir: &TempDir, timeout_ms: u64) -> std::path::PathBuf {
    let path = dir.path().join("switchboard.toml");
    let toml = format!(
        "[[upstreams]]\nname = \"demo\"\nkind = \"demo\"\nprefix = \"\"\ntimeout_ms = {timeout_ms}\n"
    );
    std::fs::write(&path, toml).expect("write the config");
    path
}

/// Redis stopped for longer than the call's deadline (2.5 s): the call ends with the store
/// error at its deadline, on its open stream, after the progress events logged before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_past_the_deadline_ends_the_call_with_the_store_error() {
    if !tools_or_skip("an_outage_past_the_deadline_ends_the_call_with_the_store_error") {
        return;
    }
    const DEADLINE: Duration = Duration::from_millis(2500);
    let dir = TempDir::new("sb-promo");
    let config = demo_with_timeout(&dir, DEADLINE.as_millis() as u64);
    let mut cluster = Cluster::start(2, ClusterOptions::new().config_file(&config));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], REVISION).await;
    let started = Instant::now();
    let reader = start_countdown(&client, &urls, 40, 100).await;
    cluster.backend_mut().server_mut().kill9();
    let read = tokio::time::timeout(CALL_LIMIT, reader)
        .await
        .expect("the call ends: no hang")
        .expect("the reader");
    let took = started.elapsed();
    println!(
        "== outage past the deadline: answered after {} ms (deadline {} ms), {} progress events ==",
        took.as_millis(),
        DEADLINE.as_millis(),
        read.counted.len()
    );
    let response = read
        .last
        .clone()
        .unwrap_or_else(|| panic!("no answer; read {read:?}"));
    assert_eq!(response["error"]["code"], -32603, "{response}");
    assert_eq!(
        response["error"]["data"]["reason"], "store_unreachable",
        "{response}"
    );
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("session store"), "{message}");
    assert!(
        took >= DEADLINE && took < DEADLINE + Duration::from_secs(3),
        "at the deadline: {took:?}"
    );
    let expected: Vec<u64> = (1..=read.counted.len() as u64).collect();
    assert_eq!(
        read.values("/params/progress"),
        expected,
        "the events before, once, in order"
    );
}

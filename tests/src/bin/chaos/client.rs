//! One chaos client: a session initialized through the balancer, its standalone stream held open,
//! and until told to stop two loops side by side: rounds of a `notify` and a `countdown`, and
//! with the full workload rounds of a `sample` and a node-bound call (see [`crate::workload`]);
//! then every sequence is checked, and the standalone stream's log replayed (`replay`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::msg;

use crate::args::Workload;
use crate::call::{call, end_of, init_answer, kind, Call, End, Hooks};
use crate::check::{check_sequence, note, NotifyCall};
use crate::replay;
use crate::report::Counts;
use crate::standalone::StandaloneReader;
use crate::workload;

/// The revision the clients speak (resumable streams with priming events).
const REVISION: &str = "2025-11-25";

/// Milliseconds between two events of one call.
const INTERVAL_MS: u64 = 30;

/// How long the standalone stream may take to deliver the last calls' events after the loop.
const SETTLE: Duration = Duration::from_secs(15);

/// What one client measured.
#[derive(Default)]
pub struct ClientRun {
    /// Its counts.
    pub counts: Counts,
    /// The calls that succeeded: when each was sent and when it answered.
    pub successes: Vec<(Instant, Instant)>,
}

/// Runs client `k` against `url` (the balancer) until `stop` is set.
pub async fn run(k: usize, url: String, workload: Workload, stop: Arc<AtomicBool>) -> ClientRun {
    let mut run = ClientRun {
        counts: Counts::default(),
        successes: Vec::new(),
    };
    let Some(client) = open_session(&url, &mut run.counts).await else {
        run.counts.error("initialize failed for 30 s");
        return run;
    };
    let reader = StandaloneReader::spawn(client.clone(), url.clone());
    if !reader.wait_open(Duration::from_secs(15)).await {
        run.counts.error("standalone GET never opened");
    }
    // The event streams and the extended workload run side by side, each in its own loop, so
    // one waiting out a fault (a sampling answer held in a mailbox) does not hold up the other
    // (a cancellation sent meanwhile).
    let mut notifies = Vec::new();
    let mut extra = ClientRun::default();
    let full = workload == Workload::Full;
    let going = || !stop.load(Ordering::SeqCst) && !reader.session_lost();
    let round = |n| Round {
        k,
        n,
        full,
        url: &url,
        client: &client,
    };
    let events = async {
        let mut n: u64 = 0;
        while going() {
            n += 1;
            if round(n).events(&mut run, &mut notifies).await {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let extras = async {
        let mut n: u64 = 0;
        while full && going() {
            n += 1;
            if round(n).extras(&mut extra).await {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    tokio::join!(events, extras);
    run.counts.merge(extra.counts);
    run.successes.extend(extra.successes);
    let done = reader.finish(&notifies, SETTLE).await;
    let (report, reader_counts) = (done.report, done.counts);
    if let (Some(first), 0) = (done.first_id, reader_counts.sessions_lost) {
        let replayed = replay::check_log(&client, &url, &first, &done.live_ids).await;
        run.counts.gone_from_log += replayed.gone;
        if let Some(e) = replayed.example {
            note(&mut run.counts.examples, format!("client {k}: {e}"));
        }
    }
    run.counts.merge(reader_counts);
    run.counts.events.add(report.counts);
    run.counts.stray += report.stray;
    for e in report.examples {
        note(&mut run.counts.examples, format!("client {k}: {e}"));
    }
    run.counts.sessions_lost = run.counts.sessions_lost.min(1);
    run
}

/// One round of one of a client's loops (see [`crate::workload`]): the events loop runs a
/// `notify` and a `countdown` side by side (with the full workload every third countdown is
/// cancelled); the extras loop (full workload) a `sample` and a node-bound call side by side.
/// Request ids: `4n + 1` … `4n + 4`, the first two the events loop's, the others the extras
/// loop's, so the loops never reuse each other's.
struct Round<'a> {
    k: usize,
    n: u64,
    full: bool,
    url: &'a str,
    client: &'a McpClient,
}

impl Round<'_> {
    fn ids(&self) -> [u64; 4] {
        std::array::from_fn(|i| 4 * self.n + 1 + i as u64)
    }

    /// Runs the events round and counts it; whether a call failed.
    async fn events(&self, run: &mut ClientRun, notifies: &mut Vec<NotifyCall>) -> bool {
        let (k, n, ids) = (self.k, self.n, self.ids());
        let cancel = self.full && workload::cancels(n);
        let count = 2 + n % 5;
        let (steps, interval) = if cancel {
            (workload::CANCEL_STEPS, workload::CANCEL_INTERVAL_MS)
        } else {
            (3 + n % 4, INTERVAL_MS)
        };
        let (t1, t2) = (format!("c{k}-{}", ids[0]), format!("c{k}-{}", ids[1]));
        let notify = msg::call_with_progress(
            ids[0],
            "notify",
            // The tag is the call's index among this client's `notify` calls: its events are
            // told apart from any other call's, even one that failed and was logged anyway.
            json!({"count": count, "interval_ms": INTERVAL_MS, "tag": notifies.len().to_string()}),
            &t1,
        );
        let countdown = msg::call_with_progress(
            ids[1],
            "countdown",
            json!({"n": steps, "interval_ms": interval}),
            &t2,
        );
        let (none, hooks) = (Hooks::default(), workload::countdown_hooks(self.full, n));
        let (mut c0, mut c1) = (Counts::default(), Counts::default());
        let (a, b) = tokio::join!(
            call(self.client, self.url, &notify, &t1, &none, &mut c0),
            call(self.client, self.url, &countdown, &t2, &hooks, &mut c1),
        );
        run.counts.merge(c0);
        run.counts.merge(c1);
        notifies.push(NotifyCall {
            count,
            complete: a.end == End::Result,
        });
        let progress = check_sequence(&b.progress, steps, b.end == End::Result);
        if progress.lost + progress.duplicated + progress.out_of_order > 0 {
            let what = format!(
                "countdown #{n} (n {steps}, {:?}): got {:?}",
                b.end, b.progress
            );
            note(&mut run.counts.examples, format!("client {k}: {what}"));
        }
        run.counts.events.add(progress);
        if cancel {
            workload::judge_cancel(&mut run.counts, k, n, &b);
        }
        tally(run, k, a) | tally(run, k, b)
    }

    /// Runs the extras round (full workload) and counts it; whether a call failed.
    async fn extras(&self, run: &mut ClientRun) -> bool {
        let (k, n, ids) = (self.k, self.n, self.ids());
        let tag = format!("c{k}-r{n}");
        let (sample, hooks) = workload::sample(ids[2], &tag);
        let forwarded = workload::forwarded(ids[3], &tag);
        let none = Hooks::default();
        let (mut c0, mut c1) = (Counts::default(), Counts::default());
        let (s, f) = tokio::join!(
            call(self.client, self.url, &sample, "", &hooks, &mut c0),
            call(self.client, self.url, &forwarded, "", &none, &mut c1),
        );
        run.counts.merge(c0);
        run.counts.merge(c1);
        workload::judge_sample(&mut run.counts, k, &tag, &s);
        workload::judge_forwarded(&mut run.counts, k, &tag, &f);
        tally(run, k, s) | tally(run, k, f)
    }
}

/// Counts one call's end; whether it failed.
fn tally(run: &mut ClientRun, k: usize, c: Call) -> bool {
    let counts = &mut run.counts;
    counts.calls += 1;
    if crate::workload::waited_out(&c) {
        counts.waited_out += 1;
    }
    let took = c.finished.duration_since(c.started);
    if took > counts.slowest {
        counts.slowest = took;
        counts.slowest_trail = format!("client {k}: {}", c.trail.join("; "));
    }
    match c.end {
        End::Result | End::Cancelled => {
            counts.calls_ok += 1;
            run.successes.push((c.started, c.finished));
            return false;
        }
        End::Rpc(-32004, _) => counts.ended_32004 += 1,
        End::Rpc(code, message) => {
            // The kind is the message up to its first detail (`: ...`), the rest is evidence.
            let head = message.split(':').next().unwrap_or_default();
            counts.error(format!("rpc {code} {head}"));
            note(
                &mut counts.examples,
                format!("client {k}: rpc {code} {message}"),
            );
        }
        End::SessionLost(how) => {
            counts.sessions_lost += 1;
            note(
                &mut counts.examples,
                format!("client {k}: session lost: {how}"),
            );
        }
        End::ToolError(text) => {
            counts.error(format!("tool error: {text}"));
            note(
                &mut counts.examples,
                format!("client {k}: tool error {text}"),
            );
        }
        End::Failed(what) => counts.error(what),
    }
    true
}

/// `initialize` and `notifications/initialized` through the balancer, retried for at most 30 s;
/// the client bound to the new session.
async fn open_session(url: &str, counts: &mut Counts) -> Option<McpClient> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut client = McpClient::new();
    while Instant::now() < deadline {
        if let Some(sid) = initialize(&client, url, counts).await {
            client = client.with_session(Some(&sid), Some(REVISION));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.session_id.as_ref()?;
    while Instant::now() < deadline {
        let headers = client.post_headers();
        let body = msg::inited().to_string();
        match client
            .try_send(Method::POST, url, &headers, Some(body))
            .await
        {
            Ok(r) if r.status == StatusCode::ACCEPTED => return Some(client),
            Ok(r) => counts.error(format!("initialized {}", r.status.as_u16())),
            Err(e) => counts.error(kind("initialized", &e)),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// One `initialize`; the session id when it answered with a result.
async fn initialize(client: &McpClient, url: &str, counts: &mut Counts) -> Option<String> {
    // The `sample` calls of the full workload need the sampling capability.
    let body = msg::init(REVISION, json!({"sampling": {}})).to_string();
    let headers = client.post_headers();
    let reply = match client
        .try_send(Method::POST, url, &headers, Some(body))
        .await
    {
        Ok(reply) => reply,
        Err(e) => {
            counts.error(kind("initialize", &e));
            return None;
        }
    };
    if reply.status != StatusCode::OK {
        counts.error(format!("initialize {}", reply.status.as_u16()));
        return None;
    }
    let sid = reply.session_id()?;
    let answer = init_answer(reply).await?;
    (end_of(&answer) == End::Result).then_some(sid)
}

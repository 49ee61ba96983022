//! One chaos client: a session initialized through the balancer, its standalone stream held open,
//! and a loop of `notify` and `countdown` calls (one of each at a time, side by side) until told
//! to stop; then every sequence is checked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard_tests::client::McpClient;
use switchboard_tests::msg;

use crate::call::{call, end_of, init_answer, kind, Call, End};
use crate::check::{check_sequence, note, NotifyCall};
use crate::report::Counts;
use crate::standalone::StandaloneReader;

/// The revision the clients speak (resumable streams with priming events).
const REVISION: &str = "2025-11-25";

/// Milliseconds between two events of one call.
const INTERVAL_MS: u64 = 30;

/// How long the standalone stream may take to deliver the last calls' events after the loop.
const SETTLE: Duration = Duration::from_secs(15);

/// What one client measured.
pub struct ClientRun {
    /// Its counts.
    pub counts: Counts,
    /// The calls that succeeded: when each was sent and when it answered.
    pub successes: Vec<(Instant, Instant)>,
}

/// Runs client `k` against `url` (the balancer) until `stop` is set.
pub async fn run(k: usize, url: String, stop: Arc<AtomicBool>) -> ClientRun {
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
    let mut notifies = Vec::new();
    let mut n: u64 = 0;
    while !stop.load(Ordering::SeqCst) && !reader.session_lost() {
        n += 1;
        let (count, steps) = (2 + n % 5, 3 + n % 4);
        let (notify_id, countdown_id) = (2 * n + 1, 2 * n + 2);
        let (t1, t2) = (format!("c{k}-{notify_id}"), format!("c{k}-{countdown_id}"));
        let notify = msg::call_with_progress(
            notify_id,
            "notify",
            // The tag is the call's index among this client's `notify` calls: its events are
            // told apart from any other call's, even one that failed and was logged anyway.
            json!({"count": count, "interval_ms": INTERVAL_MS, "tag": notifies.len().to_string()}),
            &t1,
        );
        let countdown = msg::call_with_progress(
            countdown_id,
            "countdown",
            json!({"n": steps, "interval_ms": INTERVAL_MS}),
            &t2,
        );
        let mut c2 = Counts::default();
        let (a, b) = tokio::join!(
            call(&client, &url, &notify, &t1, &mut run.counts),
            call(&client, &url, &countdown, &t2, &mut c2),
        );
        run.counts.merge(c2);
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
        let failed = tally(&mut run, k, a) | tally(&mut run, k, b);
        if failed {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let (report, reader_counts) = reader.finish(&notifies, SETTLE).await;
    run.counts.merge(reader_counts);
    run.counts.events.add(report.counts);
    run.counts.stray += report.stray;
    for e in report.examples {
        note(&mut run.counts.examples, format!("client {k}: {e}"));
    }
    run.counts.sessions_lost = run.counts.sessions_lost.min(1);
    run
}

/// Counts one call's end; whether it failed.
fn tally(run: &mut ClientRun, k: usize, c: Call) -> bool {
    let counts = &mut run.counts;
    counts.calls += 1;
    let took = c.finished.duration_since(c.started);
    if took > counts.slowest {
        counts.slowest = took;
        counts.slowest_trail = format!("client {k}: {}", c.trail.join("; "));
    }
    match c.end {
        End::Result => {
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
    let body = msg::init(REVISION, json!({})).to_string();
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

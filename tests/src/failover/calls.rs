//! The calling side of a failover client: event-producing `tools/call`s of the demo tools
//! (`notify`: log messages on the standalone stream; `countdown` with a progress token: progress
//! notifications on the call's own SSE answer), one after another, rotating over the nodes.
//! Every outcome is recorded; every 503 is checked for its JSON-RPC body and `Retry-After`.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{check_503, Stop};
use crate::client::McpClient;
use crate::msg;
use crate::sse::SseStream;

/// How long one call's answer may take before it counts as [`Outcome::NoAnswer`].
pub const ANSWER_LIMIT: Duration = Duration::from_secs(10);

/// Steps of each `countdown` and messages of each `notify` of the loop.
pub const STEPS: u64 = 3;

/// How one call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A JSON-RPC result.
    Ok,
    /// HTTP 503 (Redis unavailable).
    Unavailable,
    /// HTTP 404: the session was not found.
    NotFound,
    /// Another HTTP status.
    Status(u16),
    /// A JSON-RPC error response, by code.
    RpcError(i64),
    /// No response: none within [`ANSWER_LIMIT`], or the answer stream ended without one and
    /// its resumes did not bring it.
    NoAnswer,
}

/// One call: where, when, how long, how it ended.
#[derive(Clone, Debug)]
pub struct CallRecord {
    /// The index of the node it went to.
    pub node: usize,
    /// When it was sent.
    pub started: Instant,
    /// From sending to the end of its answer.
    pub elapsed: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

/// Everything one client's call loop saw.
#[derive(Clone, Debug, Default)]
pub struct CallLog {
    /// Every call, in order.
    pub calls: Vec<CallRecord>,
    /// The 503s without a JSON-RPC error body or `Retry-After` (see [`check_503`]).
    pub bad_503: Vec<String>,
    /// Answer streams that ended before their response and were resumed.
    pub resumed: usize,
    /// `countdown` progress steps missing from a call that succeeded.
    pub progress_lost: u64,
    /// `countdown` progress steps seen twice in one answer.
    pub progress_duplicated: u64,
    /// `countdown` progress steps after a higher one in one answer.
    pub progress_out_of_order: u64,
}

impl CallLog {
    /// The calls that ended with `outcome`.
    pub fn count(&self, outcome: &Outcome) -> usize {
        self.calls.iter().filter(|c| &c.outcome == outcome).count()
    }
}

/// What one call returned: its outcome, the progress values of its answer's stream, and what
/// was wrong with it if it was a 503.
pub struct CallResult {
    /// How it ended.
    pub outcome: Outcome,
    /// `params.progress` of each `notifications/progress` before the response, in order.
    pub progress: Vec<u64>,
    /// The problem with a 503 answer (see [`check_503`]).
    pub bad_503: Option<String>,
    /// How often its answer stream ended before the response and was resumed (GET with
    /// `Last-Event-ID` on the next node).
    pub resumed: usize,
}

/// `tools/call` of `tool` with `args` and a progress token, on `urls[node]`, read to its
/// response; an answer stream that ends first is resumed on the next nodes, at most 3 times.
pub async fn call_once(
    client: &McpClient,
    urls: &[String],
    node: usize,
    id: u64,
    tool: &str,
    args: Value,
) -> CallResult {
    let body = msg::call_with_progress(id, tool, args, &format!("p{id}"));
    let reply = client.post(&urls[node % urls.len()], &body).await;
    let mut result = CallResult {
        outcome: Outcome::Ok,
        progress: Vec::new(),
        bad_503: None,
        resumed: 0,
    };
    match reply.status {
        StatusCode::OK => {}
        StatusCode::SERVICE_UNAVAILABLE => {
            result.outcome = Outcome::Unavailable;
            result.bad_503 = check_503(reply).await;
            return result;
        }
        StatusCode::NOT_FOUND => {
            result.outcome = Outcome::NotFound;
            return result;
        }
        other => {
            result.outcome = Outcome::Status(other.as_u16());
            return result;
        }
    }
    let response = if reply.is_json() {
        Some(reply.json().await)
    } else {
        read_answer(client, urls, node, reply.sse(), id, &mut result).await
    };
    result.outcome = match response {
        None => Outcome::NoAnswer,
        Some(r) if r.get("result").is_some() => Outcome::Ok,
        Some(r) => Outcome::RpcError(r["error"]["code"].as_i64().unwrap_or(0)),
    };
    result
}

/// Reads an SSE answer to request `id` up to its response, resuming it when it ends first.
async fn read_answer(
    client: &McpClient,
    urls: &[String],
    node: usize,
    mut stream: SseStream,
    id: u64,
    result: &mut CallResult,
) -> Option<Value> {
    let mut last_id = None;
    for attempt in 1..=4 {
        let got = stream.until_response(&json!(id), ANSWER_LIMIT).await;
        result.progress.extend(
            got.with_method("notifications/progress")
                .iter()
                .filter_map(|m| m["params"]["progress"].as_u64()),
        );
        last_id = got
            .events
            .iter()
            .rev()
            .find_map(|e| e.id.clone())
            .or(last_id);
        if got.matched.is_some() || !stream.is_ended() || attempt == 4 {
            return got.matched;
        }
        let from = last_id.as_deref()?;
        let url = &urls[(node + attempt) % urls.len()];
        let resumed = client.get_stream(url, Some(from)).await;
        if resumed.status != StatusCode::OK {
            return None;
        }
        result.resumed += 1;
        stream = resumed.sse();
    }
    None
}

/// The arguments of the `k`-th call of a loop: `notify` and `countdown` by turns, each of
/// [`STEPS`] steps 30 ms apart.
pub fn nth_call(k: u64) -> (&'static str, Value) {
    if k % 2 == 0 {
        ("notify", json!({"count": STEPS, "interval_ms": 30}))
    } else {
        ("countdown", json!({"n": STEPS, "interval_ms": 30}))
    }
}

/// Calls [`nth_call`] after [`nth_call`] on `urls[(first + k) % len]` until `stop`, 50 ms apart
/// after a call that failed; returns the log.
pub async fn call_loop(client: McpClient, urls: Vec<String>, first: usize, stop: Stop) -> CallLog {
    let mut log = CallLog::default();
    let mut k: u64 = 0;
    while !stop.is_set() {
        let node = (first + k as usize) % urls.len();
        let (tool, args) = nth_call(k);
        let started = Instant::now();
        let result = call_once(&client, &urls, node, 1000 + k, tool, args).await;
        log.resumed += result.resumed;
        if tool == "countdown" && result.outcome == Outcome::Ok {
            count_progress(&mut log, &result.progress);
        }
        log.bad_503.extend(result.bad_503);
        let failed = result.outcome != Outcome::Ok;
        log.calls.push(CallRecord {
            node,
            started,
            elapsed: started.elapsed(),
            outcome: result.outcome,
        });
        if failed {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        k += 1;
    }
    log
}

/// Counts a successful countdown's progress `1..=STEPS` as lost, duplicated, out of order.
fn count_progress(log: &mut CallLog, progress: &[u64]) {
    let mut seen = Vec::new();
    let mut highest = 0;
    for &p in progress {
        if seen.contains(&p) {
            log.progress_duplicated += 1;
            continue;
        }
        if p < highest {
            log.progress_out_of_order += 1;
        }
        highest = highest.max(p);
        seen.push(p);
    }
    log.progress_lost += (1..=STEPS).filter(|s| !seen.contains(s)).count() as u64;
}

/// Sends `countdown` (1 step, no interval) to `url` every 50 ms until one succeeds or `limit`
/// passes; the time from `since` to the end of the first successful call, `None` at the limit.
/// The request ids count up from `first_id` (distinct per concurrent prober of one session).
pub async fn first_success(
    client: &McpClient,
    url: &str,
    first_id: u64,
    since: Instant,
    limit: Duration,
) -> Option<Duration> {
    let mut id = first_id;
    while since.elapsed() < limit {
        let args = json!({"n": 1, "interval_ms": 0});
        let urls = [url.to_owned()];
        if call_once(client, &urls, 0, id, "countdown", args)
            .await
            .outcome
            == Outcome::Ok
        {
            return Some(since.elapsed());
        }
        id += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

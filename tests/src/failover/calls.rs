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

/// How often one answer may be resumed (GETs answered 503 included).
pub const RESUMES: usize = 10;

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
    /// its resumes did not bring it (why, as text).
    NoAnswer(String),
    /// The answer stream ended before its response and its resume was refused with this status
    /// (400: no event of it was logged, so the node knows no such stream): the client learns the
    /// call is gone and must send it again.
    ResumeRefused(u16),
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
/// response; an answer stream that ends first is resumed on the next nodes, at most
/// [`RESUMES`] times.
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
        Ok(reply.json().await)
    } else {
        read_answer(client, urls, node, reply.sse(), id, &mut result).await
    };
    result.outcome = match response {
        Err(Ended::Refused(status)) => Outcome::ResumeRefused(status),
        Err(Ended::NoAnswer(why)) => Outcome::NoAnswer(why),
        Ok(r) if r.get("result").is_some() => Outcome::Ok,
        Ok(r) => Outcome::RpcError(r["error"]["code"].as_i64().unwrap_or(0)),
    };
    result
}

/// Why an answer brought no response.
enum Ended {
    /// See [`Outcome::NoAnswer`].
    NoAnswer(String),
    /// See [`Outcome::ResumeRefused`].
    Refused(u16),
}

/// Reads an SSE answer to request `id` up to its response, resuming it when it ends first;
/// `Err` says why no response came.
async fn read_answer(
    client: &McpClient,
    urls: &[String],
    node: usize,
    mut stream: SseStream,
    id: u64,
    result: &mut CallResult,
) -> Result<Value, Ended> {
    let mut last_id = None;
    let mut attempt = 0;
    loop {
        attempt += 1;
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
        if let Some(response) = got.matched {
            return Ok(response);
        }
        if !stream.is_ended() {
            return Err(Ended::NoAnswer(format!(
                "no response within {ANSWER_LIMIT:?}"
            )));
        }
        let ended = format!("the stream ended ({:?})", stream.error);
        let from = last_id
            .as_deref()
            .ok_or_else(|| Ended::NoAnswer(format!("{ended} before any event id")))?;
        let resumed = loop {
            if attempt > RESUMES {
                return Err(Ended::NoAnswer(format!(
                    "{ended}; {RESUMES} resumes from {from} did not bring it"
                )));
            }
            let url = &urls[(node + attempt) % urls.len()];
            let resumed = client.get_stream(url, Some(from)).await;
            match resumed.status {
                StatusCode::OK => break resumed,
                StatusCode::SERVICE_UNAVAILABLE => {
                    result.bad_503 = result.bad_503.take().or(check_503(resumed).await);
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => return Err(Ended::Refused(other.as_u16())),
            }
        };
        result.resumed += 1;
        stream = resumed.sse();
    }
}

/// The arguments of the `k`-th call of a loop: `notify` and `countdown` by turns, each of
/// [`STEPS`] steps 30 ms apart.
pub fn nth_call(k: u64) -> (&'static str, Value) {
    if k.is_multiple_of(2) {
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

/// What one client's [`ping_loop`] saw.
#[derive(Clone, Debug, Default)]
pub struct PingLog {
    /// Pings answered 200.
    pub ok: usize,
    /// Pings answered 503.
    pub unavailable: usize,
    /// Pings answered 404 (the session lost).
    pub not_found: usize,
    /// Other statuses.
    pub other: Vec<u16>,
    /// The 503s without a JSON-RPC error body or `Retry-After`.
    pub bad_503: Vec<String>,
    /// The longest time one ping took to its answer's headers.
    pub slowest: Duration,
}

/// POSTs `ping` to `urls[(first + k) % len]` every 100 ms until `stop`: a quick request with
/// one session load, to see what requests arriving during a failover get.
pub async fn ping_loop(client: McpClient, urls: Vec<String>, first: usize, stop: Stop) -> PingLog {
    let mut log = PingLog::default();
    let mut k: u64 = 0;
    while !stop.is_set() {
        let started = Instant::now();
        let reply = client
            .post(
                &urls[(first + k as usize) % urls.len()],
                &msg::bare(500_000 + k, "ping"),
            )
            .await;
        log.slowest = log.slowest.max(started.elapsed());
        match reply.status {
            StatusCode::OK => {
                log.ok += 1;
                let _ = reply.text().await;
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                log.unavailable += 1;
                log.bad_503.extend(check_503(reply).await);
            }
            StatusCode::NOT_FOUND => log.not_found += 1,
            other => log.other.push(other.as_u16()),
        }
        k += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    log
}

//! One MCP request through the balancer, lived through faults: its answer read from JSON or SSE,
//! its progress notifications collected, and its stream resumed with `Last-Event-ID` (a `GET`,
//! MCP 2025-11-25 basic/transports "Resumability and Redelivery") each time it drops, until it
//! answers, its session is gone, or [`CALL_LIMIT`] passes.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use switchboard_tests::client::{McpClient, Reply, SendError};
use switchboard_tests::sse::{is_response, SseStream};

use crate::report::Counts;

/// How long one call may take, resumes included (well above `cluster.node_ttl` plus the
/// liveness check, after which a request of a dead node ends with -32004).
pub const CALL_LIMIT: Duration = Duration::from_secs(30);

/// Pause between two attempts to reopen a stream.
const RETRY: Duration = Duration::from_millis(100);

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Answered with a result.
    Result,
    /// Answered with a JSON-RPC error: its code and message.
    Rpc(i64, String),
    /// The session answered 404.
    SessionLost(String),
    /// No answer: the kind of failure (a table error kind).
    Failed(String),
}

/// A finished call.
#[derive(Clone, Debug)]
pub struct Call {
    /// How it ended.
    pub end: End,
    /// The `progress` values of its `notifications/progress`, in arrival order.
    pub progress: Vec<u64>,
    /// When it was sent.
    pub started: Instant,
    /// When it ended.
    pub finished: Instant,
    /// What happened along the way, each step with its time since `started` (`+12ms POST 200
    /// SSE`, `+3004ms stream ended after <id>`, `+3110ms resume GET 503`, …): the evidence
    /// printed for the slowest call.
    pub trail: Vec<String>,
}

/// The steps of one call, timed from its start.
struct Trail {
    started: Instant,
    steps: Vec<String>,
}

impl Trail {
    fn mark(&mut self, what: impl std::fmt::Display) {
        let at = self.started.elapsed().as_millis();
        self.steps.push(format!("+{at}ms {what}"));
    }
}

/// The kind of a transport failure, for the error table (`<what>: <kind>`).
pub fn kind(what: &str, e: &SendError) -> String {
    match e {
        SendError::Timeout => format!("{what}: timeout"),
        SendError::Connect(_) => format!("{what}: connect"),
        SendError::Transport(_) => format!("{what}: transport"),
    }
}

/// How a call ended, from its JSON-RPC response.
pub fn end_of(response: &Value) -> End {
    if let Some(e) = response.get("error") {
        let code = e["code"].as_i64().unwrap_or(0);
        return End::Rpc(code, e["message"].as_str().unwrap_or_default().to_owned());
    }
    if response["result"]["isError"] == true {
        return End::Failed("tool error".into());
    }
    End::Result
}

/// POSTs `body` (a request with `id`, whose progress notifications carry `token`) and follows it
/// to its end; resumes and errors along the way go into `counts`.
pub async fn call(
    client: &McpClient,
    url: &str,
    body: &Value,
    token: &str,
    counts: &mut Counts,
) -> Call {
    let started = Instant::now();
    let mut progress = Vec::new();
    let mut trail = Trail {
        started,
        steps: Vec::new(),
    };
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    trail.mark(format_args!(
        "{} {} sent at Unix {}.{:03}",
        body["params"]["name"].as_str().unwrap_or("?"),
        body["id"],
        unix.as_secs(),
        unix.subsec_millis()
    ));
    let end = follow(client, url, body, token, &mut progress, counts, &mut trail).await;
    trail.mark(format_args!("ended: {end:?}"));
    Call {
        end,
        progress,
        started,
        finished: Instant::now(),
        trail: trail.steps,
    }
}

async fn follow(
    client: &McpClient,
    url: &str,
    body: &Value,
    token: &str,
    progress: &mut Vec<u64>,
    counts: &mut Counts,
    trail: &mut Trail,
) -> End {
    let deadline = Instant::now() + CALL_LIMIT;
    let headers = client.post_headers();
    let reply = match client
        .try_send(Method::POST, url, &headers, Some(body.to_string()))
        .await
    {
        Ok(reply) => reply,
        Err(e) => return End::Failed(kind("POST", &e)),
    };
    trail.mark(format_args!(
        "POST {} {}",
        reply.status.as_u16(),
        if reply.is_json() { "JSON" } else { "SSE" }
    ));
    match reply.status {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND => return End::SessionLost("POST 404".into()),
        other => return End::Failed(format!("POST {}", other.as_u16())),
    }
    if reply.is_json() {
        return match reply.try_text().await {
            Ok(text) => serde_json::from_str(&text)
                .map(|v: Value| end_of(&v))
                .unwrap_or_else(|_| End::Failed("POST: not JSON".into())),
            Err(e) => End::Failed(kind("POST body", &e)),
        };
    }
    let id = body["id"].clone();
    let mut stream = reply.sse();
    let mut last_id: Option<String> = None;
    loop {
        match read(&mut stream, &id, token, progress, &mut last_id, deadline).await {
            Read::Answer(response) => return end_of(&response),
            Read::Timeout => return End::Failed("call timed out".into()),
            Read::Ended => {}
        }
        trail.mark(format_args!("stream ended after {last_id:?}"));
        let Some(from) = last_id.clone() else {
            return End::Failed("stream dropped before its first event".into());
        };
        counts.resumes += 1;
        let before = counts.errors.values().sum::<u64>();
        stream = match reopen(client, url, &from, deadline, counts).await {
            Ok(stream) => stream,
            Err(end) => return end,
        };
        let refused = counts.errors.values().sum::<u64>() - before;
        trail.mark(format_args!("resumed ({refused} refused first)"));
    }
}

/// What reading a stream came to.
enum Read {
    /// The response arrived.
    Answer(Value),
    /// The stream ended (cleanly or not) without it.
    Ended,
    /// The deadline passed.
    Timeout,
}

async fn read(
    stream: &mut SseStream,
    id: &Value,
    token: &str,
    progress: &mut Vec<u64>,
    last_id: &mut Option<String>,
    deadline: Instant,
) -> Read {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(event) = stream.next_event(left).await else {
            return if stream.is_ended() {
                Read::Ended
            } else {
                Read::Timeout
            };
        };
        if let Some(event_id) = &event.id {
            *last_id = Some(event_id.clone());
        }
        let Some(msg) = event.json() else { continue };
        if is_response(&msg, id) {
            return Read::Answer(msg);
        }
        let params = &msg["params"];
        if msg["method"] == "notifications/progress" && params["progressToken"] == token {
            progress.push(params["progress"].as_u64().unwrap_or(0));
        }
    }
}

/// Opens `GET` with `Last-Event-ID: from` through the balancer until it streams (200), the
/// session is gone (404) or `deadline` passes.
pub async fn reopen(
    client: &McpClient,
    url: &str,
    from: &str,
    deadline: Instant,
    counts: &mut Counts,
) -> Result<SseStream, End> {
    let headers = client
        .session_headers()
        .set("Accept", "text/event-stream")
        .set("Last-Event-ID", from);
    while Instant::now() < deadline {
        match client.try_send(Method::GET, url, &headers, None).await {
            Ok(reply) if reply.status == StatusCode::OK => return Ok(reply.sse()),
            Ok(reply) if reply.status == StatusCode::NOT_FOUND => {
                return Err(End::SessionLost(format!("resume GET 404 after {from}")));
            }
            Ok(reply) => {
                let status = reply.status.as_u16();
                counts.error(format!("resume GET {status}"));
                let body = reply.try_text().await.unwrap_or_default();
                let body: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
                let body: String = body.chars().take(200).collect();
                let what = format!("resume GET {status} with Last-Event-ID {from}: {body}");
                crate::check::note(&mut counts.examples, what);
            }
            Err(e) => counts.error(kind("resume GET", &e)),
        }
        tokio::time::sleep(RETRY).await;
    }
    Err(End::Failed("resume timed out".into()))
}

/// The JSON-RPC response in `reply` to request 1 (`initialize`), from JSON or SSE.
pub async fn init_answer(reply: Reply) -> Option<Value> {
    if reply.is_json() {
        let text = reply.try_text().await.ok()?;
        return serde_json::from_str(&text).ok();
    }
    let mut stream = reply.sse();
    let got = stream
        .until_response(&serde_json::json!(1), Duration::from_secs(10))
        .await;
    got.matched
}

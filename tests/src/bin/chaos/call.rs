//! One MCP request through the balancer, lived through faults: its answer read from JSON or SSE,
//! its progress notifications collected, and its stream resumed with `Last-Event-ID` (a `GET`,
//! MCP 2025-11-25 basic/transports "Resumability and Redelivery") each time it drops, until it
//! answers, its session is gone, or [`CALL_LIMIT`] passes.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
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
    /// Answered with a tool result flagged `isError`: its text.
    ToolError(String),
    /// Its cancellation was accepted and then its stream ended without a result (with an error
    /// response, or none).
    Cancelled,
    /// The session answered 404.
    SessionLost(String),
    /// No answer: the kind of failure (a table error kind).
    Failed(String),
}

/// What a call does along the way besides reading (the extended workload).
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    /// Answer each server request on the call's stream (`sampling/createMessage`) with a
    /// sampling result of this text, POSTed through the balancer.
    pub answer: Option<String>,
    /// POST `notifications/cancelled` for the call through the balancer once this progress
    /// value arrived.
    pub cancel_after: Option<u64>,
}

/// A POST the call sent besides its request (an answer, a cancellation).
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    /// The status of its last attempt (0: no answer at all).
    pub status: u16,
    /// When that attempt was answered.
    pub at: Instant,
    /// When the first attempt was sent (the answer or cancellation was due).
    pub asked: Instant,
    /// How many times it was sent.
    pub tries: u32,
}

/// A finished call.
#[derive(Clone, Debug)]
pub struct Call {
    /// How it ended.
    pub end: End,
    /// The JSON-RPC response, when one arrived.
    pub response: Option<Value>,
    /// The `progress` values of its `notifications/progress`, in arrival order.
    pub progress: Vec<u64>,
    /// The answer POSTed to a server request, if one came.
    pub answered: Option<Sent>,
    /// The cancellation POSTed, if [`Hooks::cancel_after`] was reached.
    pub cancelled: Option<Sent>,
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
        let text = response["result"]["content"][0]["text"].as_str();
        return End::ToolError(text.unwrap_or_default().to_owned());
    }
    End::Result
}

/// POSTs `body` (a request with `id`, whose progress notifications carry `token`) and follows it
/// to its end, doing what `hooks` say on the way; resumes and errors along the way go into
/// `counts`.
pub async fn call(
    client: &McpClient,
    url: &str,
    body: &Value,
    token: &str,
    hooks: &Hooks,
    counts: &mut Counts,
) -> Call {
    let started = Instant::now();
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
    let mut f = Follow {
        client,
        url,
        id: body["id"].clone(),
        token,
        hooks,
        deadline: started + CALL_LIMIT,
        progress: Vec::new(),
        last_id: None,
        response: None,
        answered: None,
        cancelled: None,
        counts,
        trail,
    };
    let end = f.run(body).await;
    f.trail.mark(format_args!("ended: {end:?}"));
    Call {
        end,
        response: f.response,
        progress: f.progress,
        answered: f.answered,
        cancelled: f.cancelled,
        started,
        finished: Instant::now(),
        trail: f.trail.steps,
    }
}

/// One call being followed.
struct Follow<'a> {
    client: &'a McpClient,
    url: &'a str,
    id: Value,
    token: &'a str,
    hooks: &'a Hooks,
    deadline: Instant,
    progress: Vec<u64>,
    last_id: Option<String>,
    response: Option<Value>,
    answered: Option<Sent>,
    cancelled: Option<Sent>,
    counts: &'a mut Counts,
    trail: Trail,
}

impl Follow<'_> {
    async fn run(&mut self, body: &Value) -> End {
        let headers = self.client.post_headers();
        let reply = match self
            .client
            .try_send(Method::POST, self.url, &headers, Some(body.to_string()))
            .await
        {
            Ok(reply) => reply,
            Err(e) => return End::Failed(kind("POST", &e)),
        };
        self.trail.mark(format_args!(
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
                Ok(text) => match serde_json::from_str::<Value>(&text) {
                    Ok(v) => self.answered_with(v),
                    Err(_) => End::Failed("POST: not JSON".into()),
                },
                Err(e) => End::Failed(kind("POST body", &e)),
            };
        }
        let mut stream = reply.sse();
        loop {
            match self.read(&mut stream).await {
                Read::Answer(response) => return self.answered_with(response),
                Read::Timeout => return End::Failed("call timed out".into()),
                Read::Ended => {}
            }
            let last_id = self.last_id.clone();
            self.trail
                .mark(format_args!("stream ended after {last_id:?}"));
            if self.cancelled.is_some_and(|c| c.status == 202) {
                return End::Cancelled;
            }
            let Some(from) = last_id else {
                return End::Failed("stream dropped before its first event".into());
            };
            self.counts.resumes += 1;
            let before = self.counts.errors.values().sum::<u64>();
            stream = match reopen(self.client, self.url, &from, self.deadline, self.counts).await {
                Ok(stream) => stream,
                Err(end) => return end,
            };
            let refused = self.counts.errors.values().sum::<u64>() - before;
            self.trail
                .mark(format_args!("resumed ({refused} refused first)"));
        }
    }

    /// The end a response makes. After an accepted cancellation an error response (the node
    /// answers a cancelled request -32004 `request cancelled`) is the cancellation's effect.
    fn answered_with(&mut self, response: Value) -> End {
        let mut end = end_of(&response);
        let cancelled = self.cancelled.is_some_and(|c| c.status == 202);
        if cancelled && matches!(end, End::Rpc(..)) {
            end = End::Cancelled;
        }
        self.response = Some(response);
        end
    }

    async fn read(&mut self, stream: &mut SseStream) -> Read {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let Some(event) = stream.next_event(left).await else {
                return if stream.is_ended() {
                    Read::Ended
                } else {
                    Read::Timeout
                };
            };
            if let Some(event_id) = &event.id {
                self.last_id = Some(event_id.clone());
            }
            let Some(msg) = event.json() else { continue };
            if is_response(&msg, &self.id) {
                return Read::Answer(msg);
            }
            self.on_message(&msg).await;
        }
    }

    /// A progress notification is counted (and may trigger the cancellation); a server request
    /// is answered.
    async fn on_message(&mut self, msg: &Value) {
        let params = &msg["params"];
        if msg["method"] == "notifications/progress" && params["progressToken"] == self.token {
            let value = params["progress"].as_u64().unwrap_or(0);
            self.progress.push(value);
            if self.hooks.cancel_after == Some(value) && self.cancelled.is_none() {
                let cancel = switchboard_tests::msg::cancelled(self.id.clone());
                let sent = self.post(&cancel, "cancel").await;
                self.cancelled = Some(sent);
            }
            return;
        }
        let is_request = msg.get("method").is_some() && msg.get("id").is_some();
        if let (true, Some(text)) = (is_request, &self.hooks.answer) {
            let answer = json!({"role": "assistant", "model": "chaos",
                "content": {"type": "text", "text": text}});
            let answer = switchboard_tests::msg::result(&msg["id"], answer);
            let sent = self.post(&answer, "answer").await;
            self.answered = Some(sent);
        }
    }

    /// POSTs `body` (a notification or a response: 202 expected) through the balancer. A 503
    /// (the store paused or short of replicas, no balancer server up) is sent again, as a client
    /// that keeps its word would, until the call's own deadline: after the `Retry-After` the
    /// reply names (seconds, at most [`RESEND_AT_MOST`]), else after a pause that starts at
    /// [`RESEND_FIRST`] and doubles up to [`RESEND_AT_MOST`]. The waiting request ends with the
    /// first answer that reaches it; a second cancellation of an ended request is a no-op.
    async fn post(&mut self, body: &Value, what: &str) -> Sent {
        let headers = self.client.post_headers();
        let mut pause = RESEND_FIRST;
        let asked = Instant::now();
        let mut tries = 0;
        loop {
            tries += 1;
            let sent = self
                .client
                .try_send(Method::POST, self.url, &headers, Some(body.to_string()))
                .await;
            let (status, wait) = match sent {
                Ok(reply) => (reply.status.as_u16(), retry_after(&reply)),
                Err(e) => {
                    self.counts.error(kind(&format!("{what} POST"), &e));
                    (0, None)
                }
            };
            self.trail.mark(format_args!("{what} POST {status}"));
            let wait = wait.unwrap_or(pause);
            if status != 503 || Instant::now() + wait >= self.deadline {
                if status != 202 && status != 0 {
                    self.counts.error(format!("{what} POST {status}"));
                }
                return Sent {
                    status,
                    at: Instant::now(),
                    asked,
                    tries,
                };
            }
            self.counts.error(format!("{what} POST 503"));
            tokio::time::sleep(wait).await;
            pause = (pause * 2).min(RESEND_AT_MOST);
        }
    }
}

/// The first pause before an answer or cancellation refused with 503 (and no `Retry-After`)
/// is sent again.
const RESEND_FIRST: Duration = Duration::from_millis(200);

/// The longest pause between two sendings of a refused answer or cancellation.
const RESEND_AT_MOST: Duration = Duration::from_secs(1);

/// The `Retry-After` of `reply` in whole seconds (RFC 9110 section 10.2.3), capped at
/// [`RESEND_AT_MOST`]; `None` when it has none or it is a date.
fn retry_after(reply: &Reply) -> Option<Duration> {
    let value = reply.headers.get("retry-after")?.to_str().ok()?;
    let seconds: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(seconds).min(RESEND_AT_MOST))
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

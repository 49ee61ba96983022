//! One request's conversation with a Streamable HTTP upstream: POST it, read the answer as JSON
//! or as an event stream, pass notifications and server-to-client requests on to the client,
//! and resume a broken stream with `Last-Event-ID`.
//!
//! Sources: MCP 2025-11-25, basic/transports: Sending Messages to the Server items 5–6 (JSON or
//! SSE answer; requests and notifications before the response), Resumability and Redelivery
//! (`Last-Event-ID`, `retry`); MCP 2025-03-26 (a JSON answer may be a batch array).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use switchboard_protocol::Message;
use tokio::task::JoinSet;

use super::common::answer_server_request;
use super::events::EventReader;
use super::session::UpstreamSession;
use super::wire::{At, Reply, Wire, WireError};
use crate::upstream::ClientPeer;

/// How many times in a row a broken response stream is resumed without a message in between.
pub(crate) const MAX_RESUMES: u32 = 3;
/// The wait before resuming when the upstream sent no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_millis(1000);
/// The longest wait before resuming, whatever `retry` the upstream sent.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// One request in flight.
pub(crate) struct Call<'a> {
    /// The upstream's HTTP side.
    pub wire: &'a Arc<Wire>,
    /// The upstream's name, for logs.
    pub name: &'a str,
    /// The upstream session the request belongs to (`None` for `initialize`).
    pub session: Option<&'a UpstreamSession>,
    /// The way back to the client (`None` for `initialize` and probes: notifications are
    /// dropped and server-to-client requests refused).
    pub peer: Option<&'a Arc<dyn ClientPeer>>,
}

/// Where a response stream stands, for resuming it.
#[derive(Default)]
struct Place {
    /// The id of the last event that had one.
    last_event_id: Option<String>,
    /// The last `retry` the upstream sent, in milliseconds.
    retry: Option<u64>,
    /// Resumptions since the last message.
    resumes: u32,
}

/// The whole answer to one request.
pub(crate) struct Answered {
    /// The JSON-RPC response.
    pub response: Value,
    /// The `Mcp-Session-Id` the answer carried.
    pub session_id: Option<String>,
    /// The `Set-Cookie` values the answer carried.
    pub set_cookies: Vec<String>,
    /// Where it came from.
    pub at: At,
    /// The endpoint it connected to, when the URL names a host.
    pub endpoint: Option<std::net::SocketAddr>,
}

/// What one resumable read produced.
enum Step {
    /// The final response.
    Done(Value),
    /// The stream broke or ended; the text says how.
    Broken(String),
}

impl Call<'_> {
    /// Sends `message` (a request of `method` whose id is `id`) and returns the whole JSON-RPC
    /// response for `id`, with what else the answer carried.
    pub async fn run<M: serde::Serialize + ?Sized>(
        &self,
        method: &str,
        message: &M,
        id: &Value,
    ) -> Result<Answered, WireError> {
        let posted = self.wire.post(method, message, self.session).await?;
        let at = posted.at;
        let response = match posted.reply {
            Reply::Json(value) => self.json_answer(value, id, &at).await?,
            Reply::Stream(reader) => self.follow(reader, id, &at).await?,
            Reply::Accepted => {
                return Err(WireError::failed(
                    &at,
                    "accepted the request without answering it",
                ))
            }
        };
        Ok(Answered {
            response,
            session_id: posted.session_id,
            set_cookies: posted.set_cookies,
            at,
            endpoint: posted.endpoint,
        })
    }

    /// A JSON answer: the response itself, or a batch holding it among other messages.
    async fn json_answer(&self, value: Value, id: &Value, at: &At) -> Result<Value, WireError> {
        let mut tasks = JoinSet::new();
        let items = match value {
            Value::Array(items) => items,
            one => vec![one],
        };
        for item in items {
            if let Some(done) = self.dispatch(item, id, &mut tasks).await {
                return Ok(done);
            }
        }
        Err(WireError::failed(
            at,
            "answered JSON that holds no response to the request",
        ))
    }

    /// An event-stream answer, resumed up to [`MAX_RESUMES`] times in a row when it breaks
    /// after events with ids, waiting from the upstream's `retry`, longer and jittered at each try (at most [`MAX_RETRY`]); never when
    /// it broke on an event over `max_message_bytes`.
    async fn follow(
        &self,
        mut reader: EventReader,
        id: &Value,
        at: &At,
    ) -> Result<Value, WireError> {
        let mut tasks = JoinSet::new();
        let mut place = Place::default();
        loop {
            let why = match self.read(&mut reader, id, &mut tasks, &mut place).await {
                Step::Done(response) => return Ok(response),
                Step::Broken(why) => why,
            };
            // Resuming would only bring the same oversized event again.
            if let Some(limit) = reader.over_limit() {
                return Err(WireError::TooLarge {
                    at: Some(at.clone()),
                    limit,
                });
            }
            let (Some(session), Some(last)) = (self.session, place.last_event_id.as_deref()) else {
                return Err(WireError::failed(at, why));
            };
            if place.resumes >= MAX_RESUMES {
                let why = format!("{why} (gave up after {MAX_RESUMES} resumptions)");
                return Err(WireError::failed(at, why));
            }
            let base = place
                .retry
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_RETRY);
            let delay = super::backoff::reconnect_delay(base, MAX_RETRY, place.resumes);
            place.resumes += 1;
            tracing::info!(upstream = self.name, last_event_id = last, reason = %why,
                attempt = place.resumes, delay_ms = delay.as_millis() as u64,
                "resuming the upstream's response stream");
            tokio::time::sleep(delay).await;
            reader = self.wire.resume(session, last).await?;
        }
    }

    /// Reads events until the final response or the end of the stream.
    async fn read(
        &self,
        reader: &mut EventReader,
        id: &Value,
        tasks: &mut JoinSet<()>,
        place: &mut Place,
    ) -> Step {
        loop {
            let next = tokio::select! {
                next = reader.next() => next,
                Some(_) = tasks.join_next() => continue,
            };
            let event = match next {
                Some(Ok(event)) => event,
                Some(Err(e)) => return Step::Broken(format!("broke its response stream: {e}")),
                None => return Step::Broken("closed its response stream before answering".into()),
            };
            if event.id.is_some() {
                place.last_event_id.clone_from(&event.id);
            }
            if event.retry.is_some() {
                place.retry = event.retry;
            }
            if !event.is_message() {
                continue;
            }
            place.resumes = 0;
            let value: Value = match serde_json::from_str(&event.data) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(upstream = self.name, error = %e, "skipped an SSE event that is not JSON");
                    continue;
                }
            };
            let items = match value {
                Value::Array(items) => items,
                one => vec![one],
            };
            for item in items {
                if let Some(done) = self.dispatch(item, id, tasks).await {
                    return Step::Done(done);
                }
            }
        }
    }

    /// Handles one message from the upstream; returns it when it is the final response.
    async fn dispatch(&self, raw: Value, id: &Value, tasks: &mut JoinSet<()>) -> Option<Value> {
        match Message::classify(raw) {
            Ok(Message::Response { id: Some(rid), raw }) if rid.0 == *id => Some(raw),
            // An error without an id on the stream of our one request answers it.
            Ok(Message::Response { id: None, raw }) if raw.get("error").is_some() => Some(raw),
            Ok(Message::Response { id: other, .. }) => {
                tracing::debug!(upstream = self.name, id = ?other, "ignored a response to an id we did not send here");
                None
            }
            Ok(Message::Notification { method, raw }) => {
                self.notify(&method, raw).await;
                None
            }
            Ok(Message::Request { method, raw, .. }) => {
                self.answer(&method, raw, tasks);
                None
            }
            Err(e) => {
                tracing::warn!(
                    upstream = self.name,
                    error = e,
                    "skipped an invalid JSON-RPC message"
                );
                None
            }
        }
    }

    /// Passes a notification (progress, log message, list_changed …) on unchanged. The
    /// upstream's `notifications/cancelled` names ids of its own requests that the client never
    /// saw, so it is dropped; the client's late answer is then ignored upstream.
    async fn notify(&self, method: &str, raw: Value) {
        let Some(peer) = self.peer else {
            tracing::debug!(
                upstream = self.name,
                method,
                "dropped a notification sent outside a client request"
            );
            return;
        };
        if method == "notifications/cancelled" {
            tracing::debug!(
                upstream = self.name,
                "dropped the upstream's cancellation of its own request"
            );
            return;
        }
        if let Err(e) = peer.notify(raw).await {
            tracing::debug!(upstream = self.name, method, error = %e, "could not pass a notification to the client");
        }
    }

    /// Asks the client in the background and POSTs its answer with the upstream's id.
    fn answer(&self, method: &str, raw: Value, tasks: &mut JoinSet<()>) {
        let wire = self.wire.clone();
        let session = self.session.cloned();
        let name = self.name.to_owned();
        let method = method.to_owned();
        let peer = self.peer.cloned();
        tasks.spawn(async move {
            let answer = match peer {
                Some(peer) => answer_server_request(&*peer, &raw).await,
                None => refused(&raw),
            };
            if let Err(e) = wire.post("response", &answer, session.as_ref()).await {
                tracing::warn!(upstream = name, method, error = ?e, "could not return the client's answer to the upstream");
            }
        });
    }
}

/// The error answer to a server-to-client request made while no client request is running.
fn refused(request: &Value) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": request.get("id").cloned().unwrap_or(Value::Null),
        "error": {
            "code": switchboard_protocol::codes::INVALID_REQUEST,
            "message": "no client request is running to carry this request"
        }
    })
}

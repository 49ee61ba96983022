//! Streaming exchanges of one [`McpClient`] on a chosen node: a POST whose answer is read event
//! by event, a GET (standalone stream or resume with `Last-Event-ID`), and a POST of a message
//! that only needs a 2xx (e.g. the client's answer to a server request).
//!
//! Unlike [`McpClient::call_tool`], these do not follow the round robin: the caller names the
//! URL, since the cross-node modes need to know which node gets what.

use std::time::Instant;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;

use crate::client::{CallError, McpClient, PROTOCOL_VERSION};
use crate::sse::{SseEvent, SseEvents};

/// An HTTP answer with `Content-Type: text/event-stream`, read one event at a time.
#[derive(Debug)]
pub struct EventStream {
    events: SseEvents,
}

impl EventStream {
    /// Checks the status (2xx) and content type (SSE) of an answer.
    fn new(resp: reqwest::Response) -> Result<EventStream, CallError> {
        let status = resp.status();
        if !status.is_success() {
            return Err(CallError::Http(status.as_u16()));
        }
        let ct = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !ct.starts_with("text/event-stream") {
            return Err(CallError::Transport(format!(
                "expected an SSE answer, got content type {ct:?}"
            )));
        }
        Ok(EventStream {
            events: SseEvents::new(resp),
        })
    }

    /// The next event (priming events included), or `None` when the stream has ended.
    pub async fn next_event(&mut self) -> Result<Option<SseEvent>, CallError> {
        self.events.next().await
    }

    /// The next event with data, parsed as JSON (priming events skipped); `None` at the end.
    pub async fn next_message(&mut self) -> Result<Option<(Option<String>, Value)>, CallError> {
        while let Some(e) = self.next_event().await? {
            if e.data.is_empty() {
                continue;
            }
            let v = serde_json::from_str(&e.data)
                .map_err(|err| CallError::Transport(format!("bad event data: {err}")))?;
            return Ok(Some((e.id, v)));
        }
        Ok(None)
    }

    /// Reads body bytes until the stream ends; returns how many there were. For streams that are
    /// only held open (keep-alive comments are all that arrives).
    pub async fn drain(mut self) -> Result<u64, CallError> {
        while self.events.next().await?.is_some() {}
        Ok(self.events.bytes())
    }

    /// When the first body byte arrived, once one has.
    pub fn first_byte(&self) -> Option<Instant> {
        self.events.first_byte()
    }
}

impl McpClient {
    /// A fresh JSON-RPC request id of this session.
    pub fn next_request_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn with_session(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req.header("Mcp-Session-Id", self.session())
            .header("MCP-Protocol-Version", PROTOCOL_VERSION)
    }

    /// POSTs a JSON-RPC request to `url` and returns its answer as an event stream (an error
    /// when the server answers with one JSON body). Only the headers are awaited, within the
    /// target's timeout; reading the events is not timed.
    pub async fn post_stream(&self, url: &str, body: &Value) -> Result<EventStream, CallError> {
        self.open_stream(self.post_json(url, body)).await
    }

    /// A POST of `body` as JSON to `url`, accepting JSON or an event stream.
    fn post_json(&self, url: &str, body: &Value) -> reqwest::RequestBuilder {
        self.target
            .http
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(body.to_string())
    }

    /// Sends `req` with the session headers and reads its answer as an event stream; only the
    /// headers are awaited, within the target's timeout.
    async fn open_stream(&self, req: reqwest::RequestBuilder) -> Result<EventStream, CallError> {
        let send = self.with_session(req).send();
        match tokio::time::timeout(self.target.timeout, send).await {
            Ok(resp) => EventStream::new(resp?),
            Err(_) => Err(CallError::Timeout),
        }
    }

    /// GET on `url`: the session's standalone stream, or with `last_event_id` the resumption of
    /// the stream that id names. Only the headers are awaited, within the target's timeout.
    pub async fn get_stream(
        &self,
        url: &str,
        last_event_id: Option<&str>,
    ) -> Result<EventStream, CallError> {
        let mut req = self
            .target
            .http
            .get(url)
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        self.open_stream(req).await
    }

    /// POSTs a JSON-RPC notification or response to `url`; succeeds on any 2xx (the server
    /// answers `202 Accepted`). The whole exchange is bounded by the target's timeout.
    pub async fn post_message(&self, url: &str, body: &Value) -> Result<u16, CallError> {
        let req = self.post_json(url, body);
        let exchange = async {
            let resp = self.with_session(req).send().await?;
            let status = resp.status();
            // Read the (empty) body so the connection goes back to the pool.
            let _ = resp.bytes().await?;
            if status.is_success() {
                Ok(status.as_u16())
            } else {
                Err(CallError::Http(status.as_u16()))
            }
        };
        match tokio::time::timeout(self.target.timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout),
        }
    }
}

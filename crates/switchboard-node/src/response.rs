//! The answer channel of one POST request.
//!
//! A request is answered as plain JSON when its result is ready within `sse_after` and nothing
//! else was sent before it; otherwise as an SSE stream (MCP 2025-11-25, basic/transports, Sending
//! Messages item 5: the server chooses per request). Once streaming, every message is appended to
//! the stream's event log *before* it is handed to the connection, so a client whose connection
//! drops can resume on any node with `Last-Event-ID`. The request keeps running after a
//! disconnect (a disconnect is not a cancellation, item 6).

use std::sync::Mutex;

use serde_json::Value;
use switchboard_upstream::PeerError;
use tokio::sync::oneshot;

use crate::hub::StreamEvent;
use crate::state::App;

/// How the HTTP side answers, decided by the first thing the request produces.
#[derive(Debug)]
pub enum First {
    /// The response, to send as `application/json`.
    Json(Value),
    /// Something streamed first: answer with SSE.
    Stream,
}

enum Mode {
    Pending(Option<oneshot::Sender<First>>),
    Streaming,
    Done,
}

/// The answer channel of one POST request (one POST response stream).
pub struct ResponseStream {
    app: App,
    sid: String,
    stream: String,
    holder: String,
    request_key: String,
    batch: bool,
    mode: Mutex<Mode>,
}

impl ResponseStream {
    /// A channel in the pending state; the HTTP side waits on the returned receiver.
    pub fn new(
        app: App,
        sid: &str,
        stream: &str,
        holder: &str,
        request_key: &str,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        Self::build(app, sid, stream, holder, request_key, false)
    }

    /// A channel for one request of a JSON-RPC batch (MCP 2025-03-26): the answer is always JSON,
    /// notifications the request sends are dropped (progress and logging are optional), and
    /// server-to-client requests fail, since a batch answer has no stream to carry them.
    pub fn for_batch(
        app: App,
        sid: &str,
        stream: &str,
        request_key: &str,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        Self::build(app, sid, stream, "", request_key, true)
    }

    fn build(
        app: App,
        sid: &str,
        stream: &str,
        holder: &str,
        request_key: &str,
        batch: bool,
    ) -> (ResponseStream, oneshot::Receiver<First>) {
        let (tx, rx) = oneshot::channel();
        let rs = ResponseStream {
            app,
            sid: sid.to_owned(),
            stream: stream.to_owned(),
            holder: holder.to_owned(),
            request_key: request_key.to_owned(),
            batch,
            mode: Mutex::new(Mode::Pending(Some(tx))),
        };
        (rs, rx)
    }

    /// The HTTP side gave up waiting for a quick answer: from now on, stream. `false` when the
    /// first item is already decided (read it from the receiver).
    pub fn switch_to_stream(&self) -> bool {
        let mut mode = self.lock();
        if let Mode::Pending(_) = *mode {
            *mode = Mode::Streaming;
            return true;
        }
        false
    }

    /// Sends a request or notification on this stream (switching to SSE if still pending).
    pub async fn send(&self, message: &Value) -> Result<(), PeerError> {
        if self.batch {
            return match message.get("id") {
                Some(_) => Err(PeerError::Delivery(
                    "server-to-client requests are not available inside a batch".into(),
                )),
                None => Ok(()),
            };
        }
        {
            let mut mode = self.lock();
            match &mut *mode {
                Mode::Pending(tx) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(First::Stream);
                    }
                    *mode = Mode::Streaming;
                }
                Mode::Streaming => {}
                Mode::Done => return Err(PeerError::Cancelled),
            }
        }
        self.append(message.to_string(), false).await
    }

    /// Sends the final response: as the JSON answer when still pending, else as the stream's last
    /// event. Then records the end of the request (idle clock restarts).
    pub async fn finish(&self, response: Value) {
        let json = {
            let mut mode = self.lock();
            let prev = std::mem::replace(&mut *mode, Mode::Done);
            match prev {
                Mode::Pending(mut tx) => {
                    Some(tx.take().map(|tx| tx.send(First::Json(response.clone()))))
                }
                Mode::Streaming => None,
                Mode::Done => return,
            }
        };
        let store = &self.app.store;
        match json {
            Some(_) => {
                if let Err(e) = store
                    .finish(&self.sid, &self.request_key, Some(&self.stream))
                    .await
                {
                    tracing::warn!(error = %e, session = %self.sid, "could not record the end of a request");
                }
            }
            None => {
                self.append_final(response.to_string()).await;
                if let Err(e) = store.finish(&self.sid, &self.request_key, None).await {
                    tracing::warn!(error = %e, session = %self.sid, "could not record the end of a request");
                }
            }
        }
    }

    /// The final response must reach the log, or the client's stream would wait forever: retry
    /// through a store outage (0.5 s, 1 s, 2 s, 4 s, 8 s); if it still fails, close the local
    /// connection so the client sees the stream end and can resume or retry.
    async fn append_final(&self, data: String) {
        let mut delay = std::time::Duration::from_millis(500);
        for attempt in 1..=6 {
            match self.append(data.clone(), true).await {
                Ok(()) => return,
                Err(e) if attempt < 6 => {
                    tracing::warn!(error = %e, session = %self.sid, attempt, "could not log a final response; retrying");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => {
                    tracing::error!(error = %e, session = %self.sid, "could not log a final response; closing its stream")
                }
            }
        }
        self.app.hub.close(&self.sid, &self.stream, &self.holder);
    }

    async fn append(&self, data: String, end: bool) -> Result<(), PeerError> {
        let appended = self
            .app
            .store
            .append(&self.sid, &self.stream, &data, end)
            .await
            .map_err(|e| PeerError::Delivery(e.to_string()))?;
        if let Some(holder) = appended.holder {
            if self.app.is_local(&holder) {
                let ev = StreamEvent {
                    position: appended.position,
                    data,
                    end,
                };
                self.app.hub.deliver(&self.sid, &self.stream, &holder, ev);
            }
        }
        Ok(())
    }

    /// The holder token of the POST connection that started this stream.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }
}

//! Client frames of one WebSocket: each text frame is one JSON-RPC message, handled like a POST's
//! (the first on a new socket must be `initialize`; requests run via [`crate::exec::call::spawn`] and
//! answer into the session's standalone log; notifications and responses go through
//! [`crate::transport::streamable::post::deliver`]).

use serde_json::Value;
use switchboard_protocol::{codes, jsonrpc, Body, Message, RequestId};

use super::conn::{Conn, Step};
use super::frame::{self, close};
use crate::edge::error::HttpError;
use crate::exec::call::{start_call, AnswerTo, Request, Started};
use crate::exec::traced::message_span;
use crate::{session, transport::streamable::post};

impl Conn {
    pub(super) async fn on_text(&mut self, text: &str) -> Step {
        match Body::parse(text.as_bytes()) {
            Err(e) => self.direct(None, e.code(), e.message().to_owned()).await,
            Ok(Body::Batch(_)) => {
                let why = "one JSON-RPC message per frame: batches are not accepted on a WebSocket";
                self.direct(None, codes::INVALID_REQUEST, why.to_owned())
                    .await
            }
            Ok(Body::Single(m)) => match (&self.session, m) {
                (None, Message::Request { id, method, raw }) if method == "initialize" => {
                    self.initialize(id, raw).await
                }
                (None, m) => {
                    let id = match &m {
                        Message::Request { id, .. } => Some(id.clone()),
                        _ => None,
                    };
                    let why = "the first message on a new WebSocket must be initialize (or resume a session with Mcp-Session-Id)";
                    self.direct(id.as_ref(), codes::INVALID_REQUEST, why.to_owned())
                        .await
                }
                (Some(_), Message::Request { id, method, raw }) => {
                    self.request(id, method, raw).await
                }
                (Some(s), m) => match post::deliver(&self.app, &s.record, m).await {
                    Ok(()) => Step::Continue,
                    Err(e) => self.failed(e, None).await,
                },
            },
        }
    }

    /// `initialize` on a new socket: creates the session like a POST would, attaches the socket
    /// to its standalone stream, and logs the answer there (so it carries an event id too).
    async fn initialize(&mut self, id: RequestId, raw: Value) -> Step {
        let created = crate::session::initialize::create(&self.app, &id, &raw).await;
        let (answer, sid) = match created {
            Ok((answer, Some(sid))) => (answer, sid),
            Ok((answer, None)) => return self.send_text(answer.to_string()).await,
            Err(e @ HttpError::AtCapacity { .. }) => {
                self.direct(Some(&id), e.code(), e.to_string()).await;
                return self
                    .close(close::TRY_AGAIN_LATER, "session limit reached")
                    .await;
            }
            Err(e) => match e.rate_refusal(&id) {
                // Past its principal's limit: -32029 with `data.retryAfterMs`, as in a session.
                Some(refusal) => return self.send_text(refusal.to_string()).await,
                None => return self.direct(Some(&id), e.code(), e.to_string()).await,
            },
        };
        let attached = async {
            let record = session::load(&self.app, &sid, None)
                .await?
                .unwrap_or_else(|(r, _)| r);
            super::attach(&self.app, record, None).await
        };
        match attached.await {
            Ok((a, _)) => self.session = Some(a),
            Err(e) => return self.failed(e, Some(&id)).await,
        }
        self.log(&frame::with_session_id(answer, sid.as_str()))
            .await
    }

    /// A request on an attached session: admitted and registered in flight up front, in one
    /// store round trip (duplicate ids, the in-flight cap, the rate limits and cancellation from
    /// any node work as for POST; a refusal, -32029 past a limit, goes to the log like an
    /// answer), then run; everything it sends, its response included, goes to the standalone
    /// log.
    async fn request(&mut self, id: RequestId, method: String, raw: Value) -> Step {
        let Some(record) = self.session.as_ref().map(|s| s.record.clone()) else {
            return Step::Continue;
        };
        let app = self.app.clone();
        let request = Request::new(id.clone(), method, raw);
        let (sid, revision) = (record.id.as_str(), record.revision.as_str());
        let span = message_span(
            None,
            &request.raw,
            &request.method,
            Some(sid),
            Some(revision),
        );
        match start_call(&app, &record, request, AnswerTo::Standalone, span).await {
            Ok(Started::Refused(answer)) => self.log(&answer).await,
            Ok(Started::Running(running)) => {
                if let Some(s) = self.session.as_mut() {
                    s.record = std::sync::Arc::unwrap_or_clone(running.record);
                }
                Step::Continue
            }
            // A step-up refusal is an answer like any other: logged, so a resume replays it.
            Err(e @ HttpError::InsufficientScope { .. }) => {
                let answer = jsonrpc::error_response(Some(&id), e.code(), e.to_string(), None);
                self.log(&answer).await
            }
            Err(e) => self.failed(e, Some(&id)).await,
        }
    }

    /// A store or session failure while handling a frame: an ended session closes the socket
    /// (4404); anything else is reported as a JSON-RPC error, with the id of the request it
    /// answers when the frame was one (JSON-RPC 2.0 §5), and the socket stays.
    pub(super) async fn failed(&mut self, e: HttpError, id: Option<&RequestId>) -> Step {
        if e == HttpError::UnknownSession {
            return self.close(close::SESSION_ENDED, "session not found").await;
        }
        self.direct(id, e.code(), e.to_string()).await
    }
}

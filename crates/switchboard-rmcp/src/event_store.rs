//! rmcp's [`EventStore`] on switchboard-store's event logs, for the streams rmcp persists through
//! it: the response streams of requests served without a session (MCP 2026-07-28), and, with
//! rmcp's own `LocalSessionManager::with_event_store`, that manager's streams.
//!
//! rmcp names such a stream by an id of its own (a UUID, or `<session id>:common`) and never
//! says which session it belongs to, so its log cannot live under the session's hash tag. Each
//! such stream gets a *scope* instead: a store session of its own whose id is the stream id's
//! UUID as 32 hex digits, created with its first event, with the same caps, TTLs and reaper as a
//! session (it counts toward `max_sessions`, and expires `idle_ttl` after its last event). The
//! event id says where the event is: `<scope>:<stream>_<position>`.
//!
//! [`crate::ReplicatedSessionManager`] logs the streams of its sessions itself, under each
//! session's hash tag; this store serves only what rmcp hands it directly.

use std::sync::Arc;

use futures::stream;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId as RmcpEventId, EventStore, EventStoreError, EventStream, ServerSseMessage,
};
use serde_json::Value;
use switchboard_protocol::{EventId, SessionId, StreamId};
use switchboard_store::{Replay, Store};

use crate::error::Error;
use crate::routing;
use crate::session_store::{create, record};
use switchboard_runtime::pump::REPLAY_PAGE;

/// The stream id of every scope's one log.
const SCOPE_STREAM: &str = "s";

/// rmcp's event store on a switchboard store.
pub struct StoreEvents {
    store: Arc<dyn Store>,
}

impl StoreEvents {
    /// The event store over `store`.
    pub fn new(store: Arc<dyn Store>) -> StoreEvents {
        StoreEvents { store }
    }
}

/// The scope of rmcp stream `stream_id`: the UUID it starts with (up to a `:`), dashes
/// removed, when that is 32 hex digits.
fn scope_of(stream_id: &str) -> Option<String> {
    let head = stream_id.split(':').next()?;
    let hex: String = head.chars().filter(|c| *c != '-').collect();
    SessionId::parse(&hex.to_ascii_lowercase()).map(|s| s.as_str().to_owned())
}

/// `<scope>:<stream>_<position>`.
fn event_id(scope: &str, position: &str) -> String {
    let stream = StreamId::parse(SCOPE_STREAM).expect("a valid stream id");
    format!("{scope}:{}", EventId::new(stream, position))
}

/// The scope and event id in an id made by [`event_id`].
fn parse_event_id(id: &str) -> Option<(String, EventId)> {
    let (scope, rest) = id.split_once(':')?;
    let scope = SessionId::parse(scope)?;
    Some((scope.as_str().to_owned(), EventId::parse(rest)?))
}

impl StoreEvents {
    async fn append(&self, scope: &str, data: &str, end: bool) -> Result<String, Error> {
        let appended = self.store.append(scope, SCOPE_STREAM, data, end).await?;
        if appended.is_stored() {
            return Ok(appended.position);
        }
        // The scope's first event (or it expired since): create it, then append again.
        create(
            self.store.as_ref(),
            &record(scope, String::new(), Value::Null),
        )
        .await?;
        let appended = self.store.append(scope, SCOPE_STREAM, data, end).await?;
        if appended.is_stored() {
            Ok(appended.position)
        } else {
            Err(Error::SessionGone)
        }
    }
}

#[async_trait::async_trait]
impl EventStore for StoreEvents {
    /// Appends the event to its scope's log (one round trip; three for a scope's first event)
    /// and answers its id. A priming event (no message) is not stored: its id names the start.
    ///
    /// # Errors
    /// The stream id has no UUID, the store failed or refused a new scope at its session cap.
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<RmcpEventId, EventStoreError> {
        let scope = scope_of(stream_id)
            .ok_or_else(|| Error::EventId(format!("stream id without a UUID: {stream_id}")))?;
        let Some(message) = &event.message else {
            return Ok(event_id(&scope, EventId::START));
        };
        let value = serde_json::to_value(&**message).map_err(Error::from)?;
        let end = routing::is_response(&value);
        let position = self.append(&scope, &value.to_string(), end).await?;
        Ok(event_id(&scope, &position))
    }

    /// The events of the id's stream after it, oldest first, read a page at a time; a finite
    /// stream. An id this store did not make, or whose scope has expired, gives an error (rmcp
    /// then answers with an empty stream), and so does a position older than the log's oldest
    /// retained event (`max_events_per_stream` trimmed events the client never got).
    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let (scope, id) = parse_event_id(last_event_id)
            .ok_or_else(|| Error::EventId(last_event_id.to_owned()))?;
        let mut after = id.position;
        let mut out = Vec::new();
        loop {
            let page = self
                .store
                .replay(&scope, SCOPE_STREAM, &after, REPLAY_PAGE)
                .await;
            let events = match page.map_err(Error::from)? {
                Replay::Events(events) => events,
                // Unknown, expired, or trimmed past the id (events the client never got are
                // gone): nothing after it can be replayed exactly.
                Replay::UnknownStream | Replay::Truncated { .. } => {
                    return Err(Error::EventId(last_event_id.to_owned()).into())
                }
            };
            let full = events.len() >= REPLAY_PAGE;
            for e in events {
                let message: ServerJsonRpcMessage =
                    serde_json::from_str(&e.data).map_err(Error::from)?;
                out.push(ServerSseMessage::new(
                    event_id(&scope, &e.position),
                    message,
                ));
                after = e.position;
            }
            if !full {
                return Ok(Box::pin(stream::iter(out)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_come_from_the_uuid_of_the_stream_id() {
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(
            scope_of(uuid).as_deref(),
            Some("0f8fad5bd9cb469fa16570867728950e")
        );
        let common = format!("{uuid}:common");
        assert_eq!(scope_of(&common), scope_of(uuid));
        assert_eq!(scope_of("not-a-uuid"), None);
        let id = event_id("0f8fad5bd9cb469fa16570867728950e", "17-2");
        assert_eq!(id, "0f8fad5bd9cb469fa16570867728950e:s_17-2");
        let (scope, parsed) = parse_event_id(&id).unwrap();
        assert_eq!(scope, "0f8fad5bd9cb469fa16570867728950e");
        assert_eq!(parsed.position, "17-2");
        assert!(parse_event_id("s_17-2").is_none());
    }
}

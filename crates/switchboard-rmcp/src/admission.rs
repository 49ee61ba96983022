//! A request's registration in flight (the store's `begin`), and what keeps a refusal from
//! wedging the session: a request refused for the session's in-flight cap or for its id is first
//! checked against requests with no call behind them (a dead replica's, or this replica's own
//! whose POST failed), which are ended before the registration is asked again
//! ([`switchboard_runtime::lost::end_lost_requests`]); a registration that failed (HTTP 500) is undone in
//! the background in case the store applied it anyway.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_runtime::lost::{end_lost_requests, failed_request_event};
use switchboard_store::{BeginOutcome, InflightRequest};
use switchboard_telemetry::trace::logged_session;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::Error;
use crate::node::Node;

/// How often the undoing of a failed registration is tried.
const UNDO_ATTEMPTS: u32 = 10;
/// The first pause between two tries; it doubles after each (jittered), up to
/// [`UNDO_PAUSE_MAX`].
const UNDO_PAUSE: Duration = Duration::from_millis(200);
const UNDO_PAUSE_MAX: Duration = Duration::from_secs(5);

/// Registers `inflight` in session `sid`. `Ok(None)`: registered; `Ok(Some(stream))`: refused,
/// `stream` holds the JSON-RPC error to answer. One round trip; a refusal for the cap or the id
/// costs [`end_lost_requests`]'s and, when that ended any, a second `begin`.
pub(crate) async fn admit(
    node: &Arc<Node>,
    sid: &str,
    inflight: &InflightRequest,
    request_id: &RequestId,
) -> Result<Option<ReceiverStream<ServerSseMessage>>, Error> {
    let mut reclaimed = false;
    loop {
        let outcome = match node.store.begin(sid, Some(inflight)).await {
            Ok(outcome) => outcome,
            Err(e) => {
                undo_failed_begin(node.clone(), sid, inflight);
                return Err(e.into());
            }
        };
        let (code, why) = match outcome {
            BeginOutcome::Ready(_) => return Ok(None),
            BeginOutcome::Missing => {
                node.end_session_here(sid).await;
                return Err(Error::SessionGone);
            }
            BeginOutcome::Busy(_) => (
                codes::OVERLOADED,
                "too many requests in flight in this session",
            ),
            BeginOutcome::DuplicateId { .. } | BeginOutcome::Limited { .. } => (
                codes::INVALID_REQUEST,
                "a request with this id is already in flight in this session",
            ),
        };
        if !reclaimed {
            reclaimed = true;
            match end_lost_requests(node.as_ref(), sid, None).await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, session = %logged_session(sid), "could not look for requests with no call behind them");
                }
            }
        }
        return refusal(request_id, code, why).map(Some);
    }
}

/// `begin` failed, but the store may have applied it (a reply lost or late): ends the request's
/// registration if it is there, retrying a failing store in the background
/// ([`UNDO_ATTEMPTS`], until the replica stops). A registration applied after the last try is
/// ended by the next refusal in the session ([`end_lost_requests`]: no call runs behind it).
fn undo_failed_begin(node: Arc<Node>, sid: &str, inflight: &InflightRequest) {
    let (sid, stream) = (sid.to_owned(), inflight.stream.clone());
    let data = failed_request_event(&inflight.request_key, "its POST failed");
    let tasks = node.tasks.clone();
    let task = async move {
        let mut pauses = ExponentialBuilder::new()
            .with_jitter()
            .with_factor(2.0)
            .with_min_delay(UNDO_PAUSE)
            .with_max_delay(UNDO_PAUSE_MAX)
            .with_max_times(UNDO_ATTEMPTS as usize)
            .build();
        loop {
            let undo = node.store.abort_running(&sid, &stream, node.id(), &data);
            let done = tokio::select! {
                r = undo => r.is_ok(),
                () = node.stopped.cancelled() => return,
            };
            if done {
                return;
            }
            let Some(pause) = pauses.next() else { break };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = node.stopped.cancelled() => return,
            }
        }
        tracing::warn!(session = %logged_session(&sid), "could not undo a failed request registration; the next refusal in the session ends it");
    };
    tasks.spawn(task);
}

/// A response stream holding only the JSON-RPC error `code`/`message` for `id`.
pub(crate) fn refusal(
    id: &RequestId,
    code: i64,
    message: &str,
) -> Result<ReceiverStream<ServerSseMessage>, Error> {
    let error = jsonrpc::error_response(Some(id), code, message, None);
    let message: ServerJsonRpcMessage = serde_json::from_value(error)?;
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let _ = tx.try_send(ServerSseMessage::from_message(message));
    Ok(ReceiverStream::new(rx))
}

//! What a session's rmcp handler sends on this replica goes into the store before any client
//! sees it: a recorder reads one of rmcp's in-process streams (a request's response stream, or
//! the session's standalone channel) and appends every message to the matching event log. The
//! store then delivers it to whichever connection holds that stream, here or on another
//! replica, and keeps it for a client that resumes later.
//!
//! A recorder runs until its rmcp stream ends, whether or not a client is still connected, so a
//! call's answer is logged even after its client went away.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use switchboard_protocol::StreamId;

use crate::conn::{aborted_answer, NO_ANSWER};
use crate::node::{Appending, Node};
use crate::routing;

/// Logs the messages of one request's response stream `stream` (request id key `request_key`)
/// until its answer. If rmcp's stream ends without one, something else ends the log, so that a
/// client resuming it is not left waiting: for a request its client cancelled, [`NO_ANSWER`]
/// (the stream ends with no response, as MCP asks); otherwise (the replica stopped, the session's
/// handler here ended, an event was lost) a -32004 error.
pub(crate) async fn record_request(
    node: Arc<Node>,
    sid: String,
    stream: String,
    request_key: String,
    handler: u64,
    _running: switchboard_runtime::calls::Running,
    local: impl Stream<Item = ServerSseMessage> + Send,
) {
    futures::pin_mut!(local);
    let mut lost = false;
    while let Some(event) = local.next().await {
        match record(&node, &sid, &stream, handler, event).await {
            Recorded::End => {
                node.take_cancelled(&sid, &request_key);
                return;
            }
            Recorded::Lost => {
                // The client would read on past a gap: the call ends here with an error instead.
                lost = true;
                routing::deliver_cancel(&node, &sid, &request_key, Some(LOST.into())).await;
                break;
            }
            Recorded::Event | Recorded::Nothing => {}
        }
    }
    let cancelled = node.take_cancelled(&sid, &request_key);
    let data = if lost {
        aborted_answer(&request_key, LOST)
    } else if cancelled {
        // MCP 2025-11-25, basic/utilities/cancellation: no response for a cancelled request.
        NO_ANSWER.to_owned()
    } else if node.stopped.is_cancelled() {
        aborted_answer(&request_key, "its replica stopped")
    } else {
        aborted_answer(&request_key, "its handler here ended")
    };
    node.append_final(&sid, &stream, data).await;
}

/// Logs what the session's handler sends outside any request (notifications, server requests
/// not tied to a call) to the standalone stream, until the session's handler `handler` here
/// ends.
pub(crate) async fn record_standalone(
    node: Arc<Node>,
    sid: String,
    handler: u64,
    local: impl Stream<Item = ServerSseMessage> + Send,
) {
    futures::pin_mut!(local);
    while let Some(event) = local.next().await {
        record(&node, &sid, StreamId::STANDALONE, handler, event).await;
    }
    node.handler_ended(&sid, handler);
}

/// What [`record`] did with one message.
enum Recorded {
    /// It carried no message, or one that does not encode.
    Nothing,
    /// Logged (or the session is gone).
    Event,
    /// Not logged: the store kept failing.
    Lost,
    /// It was the request's answer, the stream's last event (logged, or given up: see
    /// [`Node::append_final`]).
    End,
}

/// Why a request whose stream lost an event ends.
const LOST: &str = "an event of its stream was lost while the store was unreachable";

/// Logs one message.
async fn record(
    node: &Node,
    sid: &str,
    stream: &str,
    handler: u64,
    event: ServerSseMessage,
) -> Recorded {
    let Some(message) = event.message else {
        return Recorded::Nothing;
    };
    let mut value = match serde_json::to_value(&*message) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "a server message does not encode; dropped");
            return Recorded::Nothing;
        }
    };
    let end = stream != StreamId::STANDALONE && routing::is_response(&value);
    routing::outbound(node, sid, handler, &mut value).await;
    if end {
        node.append_final(sid, stream, value.to_string()).await;
        return Recorded::End;
    }
    match node.append(sid, stream, value.to_string()).await {
        Appending::Lost => Recorded::Lost,
        Appending::Logged | Appending::SessionGone => Recorded::Event,
    }
}

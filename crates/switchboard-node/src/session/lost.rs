//! Requests lost (a dead node's, or this node's with no call behind them) that hold a refused
//! request's slot or id: the runtime's rule ([`switchboard_runtime::lost`]) applied at admission.

use switchboard_protocol::SessionId;
use switchboard_runtime::liveness::is_dead;
use switchboard_runtime::lost::end_lost_requests;
use switchboard_store::BeginOutcome;

use crate::edge::error::HttpError;
use crate::state::App;

/// A refusal may come from lost requests: a session at `session.max_inflight` full of them (they
/// would hold their slots until the session ends), or the request's id still held by one (it
/// would be refused as a duplicate for the rest of the session). Those are ended
/// ([`end_lost_requests`]); `true` when one was (the caller asks again). Only for the session's
/// own principal; a duplicate held by a live node, or by a call running here, is left alone.
pub(super) async fn ended_lost_requests(
    app: &App,
    sid: &SessionId,
    outcome: &BeginOutcome,
) -> Result<bool, HttpError> {
    let (record, holder) = match outcome {
        BeginOutcome::Busy(record) => (record, None),
        BeginOutcome::DuplicateId { record, node } => (record, Some(node.as_str())),
        _ => return Ok(false),
    };
    if !crate::session::may_use(&record.principal) {
        return Ok(false);
    }
    let known_dead = match holder {
        Some(node) if node == app.node_id() => None,
        Some(node) if is_dead(app.as_ref(), node).await => Some(node),
        Some(_) => return Ok(false),
        None => None,
    };
    Ok(end_lost_requests(app.as_ref(), sid.as_str(), known_dead).await? > 0)
}

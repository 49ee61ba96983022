//! Checks before a stream is resumed from `Last-Event-ID` (MCP 2025-11-25, basic/transports,
//! Resumability and Redelivery), shared by a GET on the endpoint and a WebSocket resumed on
//! another node.

use switchboard_runtime::resume::NotResumable;

use crate::edge::error::HttpError;
use crate::state::App;

/// Refuses a `Last-Event-ID` that cannot be resumed before anything is claimed, so that a refused
/// resume never disturbs the connection holding the stream now: a stream this session does not
/// have (400), an id older than the retained log (410), an id of no event sent yet (400). The
/// rule is the runtime's ([`switchboard_runtime::resume::check_resumable`]).
pub(crate) async fn check_resumable(
    app: &App,
    sid: &str,
    stream: &str,
    after: &str,
) -> Result<(), HttpError> {
    let store = app.store.as_ref();
    match switchboard_runtime::resume::check_resumable(store, sid, stream, after).await {
        Ok(()) => Ok(()),
        Err(NotResumable::Unknown) => Err(HttpError::UnknownStream),
        Err(NotResumable::Trimmed(oldest)) => Err(HttpError::EventsTrimmed(oldest)),
        Err(NotResumable::Store(e)) => Err(e.into()),
    }
}

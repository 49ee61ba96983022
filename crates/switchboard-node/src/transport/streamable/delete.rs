//! DELETE on the MCP endpoint: the client ends its session (MCP 2025-11-25, basic/transports,
//! Session Management item 5). Every key of the session is removed and every node is told to
//! close the session's streams and stop its calls; afterwards every node answers 404.
//!
//! With authorization on, the session is loaded first so a session bound to another principal
//! is "not found" and stays alive (one more store round trip, paid only by DELETE with auth on).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};

use crate::edge::error::HttpError;
use crate::state::App;
use crate::{session, telemetry};

/// The DELETE handler: 204 when the session ended, 404 when it did not exist.
pub async fn on_delete(State(app): State<App>, headers: HeaderMap) -> Response {
    let result = async {
        let sid = session::named(&headers)?;
        if app.auth.is_some() {
            // 404 for a missing session or another principal's (see session::load).
            let _record = session::load(&app, &sid, None).await?;
        }
        if !app.store.delete_session(sid.as_str()).await? {
            return Err(HttpError::UnknownSession);
        }
        telemetry::session_deleted(sid.as_str());
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    result.unwrap_or_else(|e: HttpError| e.into_response())
}

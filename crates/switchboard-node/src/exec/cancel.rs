//! The one rule every transport's call runs under when it is cancelled
//! (`notifications/cancelled`, the end of its session, a closed 2026-07-28 stream): it ends
//! without its upstream call being dropped mid-way ([`until_cancelled`]). Which calls run here
//! and their cancellation tokens are the runtime's ([`switchboard_runtime::Calls`]).

use serde_json::Value;
use switchboard_protocol::codes;
use switchboard_upstream::RpcError;
use tokio_util::sync::CancellationToken;

/// How long a cancelled request's upstream call may take to wind down (tell its server, e.g. a
/// stdio child or another node, with `notifications/cancelled`) before it is dropped.
pub const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `work` to its end, unless `cancel` fires: then `work` gets [`CANCEL_GRACE`] to notice the
/// cancellation itself (upstreams watch the same token and pass it on), and the outcome is the
/// cancellation error either way. Dropping `work` at once would skip that hand-on.
pub async fn until_cancelled<F>(work: F, cancel: &CancellationToken) -> Result<Value, RpcError>
where
    F: std::future::Future<Output = Result<Value, RpcError>>,
{
    tokio::pin!(work);
    tokio::select! {
        r = &mut work => r,
        _ = cancel.cancelled() => {
            let _ = tokio::time::timeout(CANCEL_GRACE, &mut work).await;
            Err(RpcError::new(codes::REQUEST_ABORTED, "request cancelled"))
        }
    }
}

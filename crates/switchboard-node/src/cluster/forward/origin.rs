//! The origin side of a forwarded call: the node that holds the client's request and waits for
//! the owner's outcome. [`crate::state::forwards::Forwards::start`] registers the call's peer;
//! the owner's [`BusMessage::ForwardMessage`]s are put on the client's stream through it in
//! arrival order, and [`BusMessage::ForwardDone`] ends the call; [`await_outcome`] gives up when
//! the owner's heartbeat lapses or the caller's deadline passes, and [`decode_forwarded`] reads
//! the outcome.

use std::time::Duration;

use serde_json::Value;
use switchboard_protocol::codes;
use switchboard_store::BusMessage;
use switchboard_upstream::placement::Forwarded;
use switchboard_upstream::RpcError;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::state::App;

/// How waiting for another node's outcome ended ([`await_outcome`]).
pub enum Awaited {
    /// The outcome the owner sent ([`BusMessage::ForwardDone`]'s `outcome`).
    Done(Value),
    /// `cancel` fired; the owner was sent `ForwardCancel`.
    Cancelled,
    /// The message could not be sent (the text says why): the owner never got it.
    NotSent(String),
    /// The owner stopped heartbeating before it answered; the text says why. It may have acted
    /// on the message.
    OwnerStopped(String),
    /// The deadline passed first; the owner was sent `ForwardCancel`.
    TimedOut,
}

/// Origin: sends `msg` (which names `call`) to `node` and waits for its `ForwardDone`
/// (`done`), telling `node` to cancel when `cancel` fires or `deadline` passes, and giving up
/// when `node` stops heartbeating (checked every `liveness_check_interval`).
pub async fn await_outcome(
    app: &App,
    node: &str,
    call: &str,
    msg: BusMessage,
    mut done: oneshot::Receiver<Value>,
    cancel: &CancellationToken,
    deadline: Option<tokio::time::Instant>,
) -> Awaited {
    // The message lives no longer than the caller waits: an owner that reads it later (its
    // subscription lapsed meanwhile) drops it rather than run a call whose client was answered.
    let within = deadline.map_or(Duration::MAX, |at| {
        at.saturating_duration_since(tokio::time::Instant::now())
    });
    if let Err(e) = app.store.send_within(node, &msg, within).await {
        return Awaited::NotSent(e.to_string());
    }
    let stop = BusMessage::ForwardCancel {
        call: call.to_owned(),
        origin: app.node_id().to_owned(),
    };
    let expiry = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let mut expiry = std::pin::pin!(expiry);
    let mut liveness = tokio::time::interval(app.cfg.liveness_check_interval);
    liveness.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    liveness.tick().await;
    loop {
        tokio::select! {
            outcome = &mut done => {
                return match outcome {
                    Ok(outcome) => Awaited::Done(outcome),
                    Err(_) => Awaited::NotSent("the forwarded call vanished".into()),
                };
            }
            _ = cancel.cancelled() => {
                let _ = app.store.send_to(node, &stop).await;
                return Awaited::Cancelled;
            }
            () = &mut expiry => {
                let _ = app.store.send_to(node, &stop).await;
                return Awaited::TimedOut;
            }
            _ = liveness.tick() => {
                if let Ok(false) = app.store.is_alive(node).await {
                    // An outcome sent just before the node stopped may already be here.
                    if let Ok(outcome) = done.try_recv() {
                        return Awaited::Done(outcome);
                    }
                    return Awaited::OwnerStopped(format!("node {node} that ran it for this session stopped"));
                }
            }
        }
    }
}

/// Reads the outcome the owner sent: its answer (`{"result": …}` or `{"error": …}`), or
/// "moved" (`{"moved": <node>}`) when it declined because it is stopping; the inverse of the
/// owner side's `encode_outcome` and `encode_moved`.
pub fn decode_forwarded(v: &Value) -> Forwarded {
    if v.get("moved").is_some() {
        return Forwarded::Moved;
    }
    Forwarded::Answered(decode_value(v))
}

fn decode_value(v: &Value) -> Result<Value, RpcError> {
    if let Some(r) = v.get("result") {
        return Ok(r.clone());
    }
    let e = v.get("error").cloned().unwrap_or_default();
    let data = e.get("data").filter(|d| !d.is_null()).cloned();
    Err(RpcError {
        code: e
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or(codes::INTERNAL_ERROR),
        message: e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("forwarded call failed")
            .to_owned(),
        data,
    })
}

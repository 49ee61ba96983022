//! A call's messages through a store outage (issue 32): a Sentinel or Cluster promotion leaves
//! no primary for about 2–5 s, a Redis restart for a moment, and every message of a streamed
//! call must be logged before any client sees it.
//!
//! - A message that cannot be logged is tried again (`switchboard_store::retry`: jittered
//!   attempts, one append id for all of them, so it is logged once) until the call's deadline:
//!   its upstream's `timeout_ms` from the call's start ([`call_wait`]), the bound the call has
//!   anyway (the kinds that talk to a server end it there with -32005). A promotion costs the
//!   call a pause, not its answer.
//! - One stream's messages are logged one at a time, in the order they come ([`Sequence`]): a
//!   later message waits while an earlier one is tried again, so the client gets every event
//!   once, in order, and a resume (`Last-Event-ID`) finds them so in the log.
//! - Past the deadline the message is given up, and so is every later message of the stream: a
//!   client must not read on past a gap it cannot see. The call's answer is then the error of
//!   [`store_unreachable`] (-32603 naming the store, `data.reason = "store_unreachable"`),
//!   whatever the call itself answered; it is logged if the store is back, else written straight
//!   to the stream's connection when that is open here (`exec::response`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::{retry, StoreError};
use tokio::time::Instant;

use crate::state::App;

/// How long a call's messages may wait for the store, counted from the call's start: its
/// upstream's timeout ([`switchboard_upstream::Upstream::timeout`], `timeout_ms`), or the
/// configured default where an upstream does not say.
pub(crate) fn call_wait(app: &App) -> Duration {
    let default = Duration::from_millis(switchboard_upstream::config::DEFAULT_TIMEOUT_MS);
    app.upstream.timeout().unwrap_or(default)
}

/// When a call's messages stop waiting for the store.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deadline {
    /// At this instant: a call's, [`call_wait`] after its start.
    At(Instant),
    /// This long after each message is handed over (messages not tied to a call: an
    /// upstream's own, on the session's standalone stream).
    Each(Duration),
}

impl Deadline {
    /// The deadline of a call starting now.
    pub(crate) fn of_call(app: &App) -> Deadline {
        Deadline::At(Instant::now() + call_wait(app))
    }

    fn at(self) -> Instant {
        match self {
            Deadline::At(at) => at,
            Deadline::Each(wait) => Instant::now() + wait,
        }
    }
}

/// The messages of one stream of one call, logged one at a time in the order they are handed
/// over (a FIFO lock held while a message is tried again), each until the [`Deadline`].
#[derive(Debug)]
pub(crate) struct Sequence {
    deadline: Deadline,
    order: tokio::sync::Mutex<()>,
    /// Why a message was given up, once one was: the stream has a gap from there on.
    lost: OnceLock<String>,
}

/// Why a message is given up when its sending was dropped (the call ended: cancelled, or its
/// upstream's own timeout) while it waited for the store.
const ABANDONED: &str = "the session store was unreachable: a message of this call was still \
                         waiting for it when the call ended";

impl Sequence {
    /// A stream whose messages wait for the store until `deadline`.
    pub(crate) fn new(deadline: Deadline) -> Sequence {
        Sequence {
            deadline,
            order: tokio::sync::Mutex::new(()),
            lost: OnceLock::new(),
        }
    }

    /// Why a message of this stream was given up, once one was.
    pub(crate) fn lost(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    /// Logs one message: runs `attempt` after the messages handed over before it, again while
    /// the store fails, until the deadline (see the module doc). `last`: the stream's final
    /// message, tried even after an earlier one was given up (it then carries the error).
    ///
    /// # Errors
    /// Why the message was not logged: the store kept failing until the deadline (the stream is
    /// then marked lost), or an earlier message was given up.
    pub(crate) async fn log<T, F, Fut>(&self, last: bool, mut attempt: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let _turn = self.order.lock().await;
        if let (Some(why), false) = (self.lost(), last) {
            return Err(why.to_owned());
        }
        let mut waiting = Waiting {
            sequence: self,
            failed: AtomicBool::new(false),
            done: false,
        };
        let failed = &waiting.failed;
        let logged = retry::until(self.deadline.at(), || {
            let tried = attempt();
            async move {
                let outcome = tried.await;
                if outcome.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                outcome
            }
        })
        .await;
        waiting.done = true;
        logged.map_err(|outage| {
            let why = outage.to_string();
            let _ = self.lost.set(why.clone());
            why
        })
    }
}

/// A message being logged: dropped after a failed attempt (the call ended while it waited for
/// the store), it marks the stream lost.
struct Waiting<'a> {
    sequence: &'a Sequence,
    failed: AtomicBool,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done && self.failed.load(Ordering::Relaxed) {
            let _ = self.sequence.lost.set(ABANDONED.to_owned());
        }
    }
}

/// The answer of a call whose stream lost a message (`why`): -32603 with the request's `id`,
/// naming the store, `data.reason = "store_unreachable"`. Whatever the call answered, its answer
/// after a gap would hide the gap.
pub(crate) fn store_unreachable(id: &Value, why: &str) -> Value {
    let message = format!(
        "this call's messages could not be logged before its deadline (the upstream's \
         timeout_ms) and the call was ended; send it again. {why}"
    );
    let id = (!id.is_null()).then(|| RequestId(id.clone()));
    let data = json!({"reason": "store_unreachable"});
    jsonrpc::error_response(id.as_ref(), codes::INTERNAL_ERROR, message, Some(data))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    use super::*;

    fn down() -> StoreError {
        StoreError::Backend("connection refused".into())
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_message_waits_for_one_being_retried() {
        let seq = Arc::new(Sequence::new(Deadline::Each(Duration::from_secs(10))));
        let logged = Arc::new(std::sync::Mutex::new(Vec::new()));
        let fails = Arc::new(AtomicU32::new(3));
        let first = {
            let (seq, logged, fails) = (seq.clone(), logged.clone(), fails.clone());
            tokio::spawn(async move {
                seq.log(false, || {
                    let (logged, fails) = (logged.clone(), fails.clone());
                    async move {
                        if fails.fetch_sub(1, Ordering::SeqCst) > 0 {
                            return Err(down());
                        }
                        logged.lock().unwrap().push(1);
                        Ok(())
                    }
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        let second = seq.log(false, || {
            let logged = logged.clone();
            async move {
                logged.lock().unwrap().push(2);
                Ok(())
            }
        });
        second.await.unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(*logged.lock().unwrap(), vec![1, 2]);
        assert!(seq.lost().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_deadline_the_stream_is_lost_but_its_last_message_is_tried() {
        let seq = Sequence::new(Deadline::At(Instant::now() + Duration::from_secs(2)));
        let why = seq
            .log(false, || async { Err::<(), _>(down()) })
            .await
            .unwrap_err();
        assert!(why.contains("session store was unreachable"), "{why}");
        assert_eq!(seq.lost(), Some(why.as_str()));
        let later = seq.log(false, || async { Ok(()) }).await;
        assert_eq!(later, Err(why.clone()), "no message after the gap");
        assert_eq!(seq.log(true, || async { Ok(7) }).await, Ok(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_dropped_while_it_waits_marks_the_stream_lost() {
        let seq = Sequence::new(Deadline::Each(Duration::from_secs(10)));
        let waiting = seq.log(false, || async { Err::<(), _>(down()) });
        let cut = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert!(cut.is_err(), "still waiting for the store");
        assert_eq!(seq.lost(), Some(ABANDONED));
        let quick = Sequence::new(Deadline::Each(Duration::from_secs(10)));
        let pending = quick.log(false, std::future::pending::<Result<(), StoreError>>);
        let _ = tokio::time::timeout(Duration::from_millis(10), pending).await;
        assert_eq!(quick.lost(), None, "no attempt had failed");
    }

    #[test]
    fn the_error_names_the_store_and_keeps_the_id() {
        let e = store_unreachable(&json!(7), "the session store was unreachable: x");
        assert_eq!(e["id"], 7);
        assert_eq!(e["error"]["code"], codes::INTERNAL_ERROR);
        assert_eq!(e["error"]["data"]["reason"], "store_unreachable");
        let text = e["error"]["message"].as_str().unwrap();
        assert!(text.contains("session store was unreachable"), "{text}");
    }
}

//! The extended workload of issue 32: what a client does besides its event streams, and how each
//! such call is judged.
//!
//! - `sample` (the demo tool): its `sampling/createMessage` arrives on the call's stream and is
//!   answered with a POST through the balancer (so usually on another node than the call's),
//!   which the node routes over the bus. Lost: the answer was accepted (202) but the call did
//!   not end with it (an error, a timeout).
//! - a cancelled `countdown` (every third round): [`CANCEL_STEPS`] steps, `notifications/
//!   cancelled` POSTed through the balancer after progress 2. Taken effect: the call's stream
//!   ends without its result. Lost: the countdown ran to its end (its result, or its last step).
//! - `fx__slow` of the stdio fixture (one child per session, started on the node that took the
//!   session's first call; later calls landing elsewhere are forwarded to that node over the
//!   bus). Lost: -32005, -32004 or no answer within the call limit (a hang).
//!
//! A call whose answer or cancellation was refused (503 until the call's deadline, 410) is no
//! loss: its client was told. Nor is a cancellation accepted only after its countdown could
//! have ended (refused until then): a finished request has nothing left to stop. Calls that ended because some timeout ran out are counted apart
//! (`waited_out`): the targets allow none.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::msg;

use crate::call::{Call, End, Hooks};
use crate::check::note;
use crate::report::Counts;

/// The upstream of the node-bound calls, as the rig configures it (`[[upstreams]]` `fx`).
pub const FORWARDED_TOOL: &str = "fx__slow";

/// How long each node-bound call runs in the child, in seconds.
const FORWARDED_SECONDS: f64 = 0.2;

/// Steps of a countdown that is cancelled (at [`CANCEL_INTERVAL_MS`], 3 s in all).
pub const CANCEL_STEPS: u64 = 60;

/// Milliseconds between two steps of a cancelled countdown.
pub const CANCEL_INTERVAL_MS: u64 = 50;

/// The progress value after which a countdown is cancelled.
const CANCEL_AFTER: u64 = 2;

/// How long a countdown runs on after the progress value its cancellation follows.
const COUNTDOWN_REST: Duration =
    Duration::from_millis((CANCEL_STEPS - CANCEL_AFTER) * CANCEL_INTERVAL_MS);

/// Whether round `n` cancels its countdown.
pub fn cancels(n: u64) -> bool {
    n.is_multiple_of(3)
}

/// The hooks of round `n`'s countdown (`full`: the full workload, which cancels some).
pub fn countdown_hooks(full: bool, n: u64) -> Hooks {
    Hooks {
        cancel_after: (full && cancels(n)).then_some(CANCEL_AFTER),
        ..Hooks::default()
    }
}

/// The `sample` request `id` of round tag `tag`, and the hooks that answer it.
pub fn sample(id: u64, tag: &str) -> (Value, Hooks) {
    let body = msg::call(id, "sample", json!({"prompt": tag}));
    let hooks = Hooks {
        answer: Some(answer_text(tag)),
        ..Hooks::default()
    };
    (body, hooks)
}

/// The node-bound call `id` of round tag `tag` (its result's text is the tag).
pub fn forwarded(id: u64, tag: &str) -> Value {
    msg::call(
        id,
        FORWARDED_TOOL,
        json!({"seconds": FORWARDED_SECONDS, "tag": tag}),
    )
}

fn answer_text(tag: &str) -> String {
    format!("answer to {tag}")
}

/// The text of a tool result (first content block, or `structuredContent.text`).
fn result_text(response: Option<&Value>) -> String {
    let Some(r) = response else {
        return String::new();
    };
    let result = &r["result"];
    result["structuredContent"]["text"]
        .as_str()
        .or_else(|| result["content"][0]["text"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The rig's timeouts (`session.client_request_timeout`, the `fx` upstream's `timeout_ms`): a
/// call of this workload (each designed to take at most 3 s) that takes this long was left
/// waiting for something, whatever it ended with.
pub const HANG: Duration = Duration::from_secs(10);

/// Whether `c` ended because a timeout ran out rather than with a prompt answer or error, or
/// took [`HANG`] or longer.
pub fn waited_out(c: &Call) -> bool {
    if c.finished.duration_since(c.started) >= HANG {
        return true;
    }
    match &c.end {
        End::Failed(what) => what == "call timed out",
        End::Rpc(code, _) => *code == -32005,
        End::ToolError(text) => text.contains("did not answer within"),
        _ => false,
    }
}

/// Judges client `k`'s `sample` call of tag `tag`.
pub fn judge_sample(counts: &mut Counts, k: usize, tag: &str, c: &Call) {
    let Some(answer) = c.answered.filter(|a| a.status == 202) else {
        return;
    };
    counts.sampling.made += 1;
    let got = result_text(c.response.as_ref());
    if c.end == End::Result && got == answer_text(tag) {
        return;
    }
    counts.sampling.lost += 1;
    let after = c.finished.saturating_duration_since(answer.at).as_millis();
    let what = format!(
        "client {k}: sampling answer of {tag} accepted, then the call ended {:?} ({after} ms \
         later, result text {got:?})",
        c.end
    );
    note(&mut counts.examples, what);
}

/// Judges client `k`'s round-`n` countdown `c` when it was to be cancelled.
pub fn judge_cancel(counts: &mut Counts, k: usize, n: u64, c: &Call) {
    if !cancels(n) {
        return;
    }
    let Some(cancel) = c.cancelled.filter(|s| s.status == 202) else {
        return;
    };
    if cancel.at.saturating_duration_since(cancel.asked) >= COUNTDOWN_REST {
        // Refused until the countdown could have ended: a cancellation of a finished request
        // has nothing to stop (the client was told of each refusal).
        return;
    }
    counts.cancels.made += 1;
    let ran_out = c.progress.iter().any(|&p| p >= CANCEL_STEPS);
    if c.end == End::Result || ran_out {
        counts.cancels.lost += 1;
        let after = c.progress.len();
        let what =
            format!(
            "client {k}: countdown of round {n} cancelled after progress {CANCEL_AFTER} (sent {} \
             times, accepted after {} ms), ran to its end anyway ({after} progress events, ended \
             {:?})",
            cancel.tries,
            cancel.at.saturating_duration_since(cancel.asked).as_millis(),
            c.end
        );
        note(&mut counts.examples, what);
        return;
    }
    let effect = c.finished.saturating_duration_since(cancel.at);
    counts.cancel_effect_max = counts.cancel_effect_max.max(effect);
}

/// Judges client `k`'s node-bound call of tag `tag`. Besides its end, one that took longer
/// than its upstream's `timeout_ms` ([`HANG`]) plus 2 s hung (that timeout bounds the whole
/// call, forwarding included).
pub fn judge_forwarded(counts: &mut Counts, k: usize, tag: &str, c: &Call) {
    counts.forwarded.made += 1;
    let hung = c.finished.duration_since(c.started) > HANG + Duration::from_secs(2);
    let lost = hung
        || match &c.end {
            End::Result => {
                let got = result_text(c.response.as_ref());
                if got != tag {
                    let what = format!("client {k}: {FORWARDED_TOOL} {tag} answered {got:?}");
                    note(&mut counts.examples, what);
                }
                false
            }
            End::Rpc(code, _) => matches!(code, -32005 | -32004),
            End::Failed(what) => what == "call timed out",
            _ => false,
        };
    if lost {
        counts.forwarded.lost += 1;
        let took = c.finished.duration_since(c.started).as_millis();
        let what = format!(
            "client {k}: {FORWARDED_TOOL} {tag} lost after {took} ms: {:?}",
            c.end
        );
        note(&mut counts.examples, what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Sent;
    use std::time::Instant;

    fn call(end: End, response: Option<Value>) -> Call {
        let now = Instant::now();
        Call {
            end,
            response,
            progress: Vec::new(),
            answered: None,
            cancelled: None,
            started: now,
            finished: now + Duration::from_millis(50),
            trail: Vec::new(),
        }
    }

    fn sent(status: u16) -> Option<Sent> {
        Some(Sent {
            status,
            at: Instant::now(),
            asked: Instant::now(),
            tries: 1,
        })
    }

    #[test]
    fn a_sampling_answer_is_lost_only_once_accepted() {
        let mut counts = Counts::default();
        let ok = json!({"result": {"structuredContent": {"text": "answer to t"}}});
        let mut c = call(End::Result, Some(ok));
        c.answered = sent(202);
        judge_sample(&mut counts, 0, "t", &c);
        let mut late = call(End::ToolError("did not answer within 10 ms".into()), None);
        late.answered = sent(202);
        judge_sample(&mut counts, 0, "t", &late);
        assert!(waited_out(&late));
        late.answered = sent(503);
        judge_sample(&mut counts, 0, "t", &late);
        assert_eq!((counts.sampling.made, counts.sampling.lost), (2, 1));
    }

    #[test]
    fn a_cancelled_countdown_that_finishes_is_lost() {
        let mut counts = Counts::default();
        let mut c = call(End::Cancelled, None);
        c.cancelled = sent(202);
        c.progress = vec![1, 2, 3];
        judge_cancel(&mut counts, 0, 3, &c);
        c.end = End::Result;
        judge_cancel(&mut counts, 0, 3, &c);
        judge_cancel(&mut counts, 0, 4, &c);
        assert_eq!((counts.cancels.made, counts.cancels.lost), (2, 1));
    }

    #[test]
    fn a_cancellation_accepted_only_after_the_countdown_could_end_is_not_judged() {
        let mut counts = Counts::default();
        let mut c = call(End::Result, None);
        let asked = Instant::now();
        let late = Sent {
            status: 202,
            at: asked + COUNTDOWN_REST,
            asked,
            tries: 6,
        };
        c.cancelled = Some(late);
        judge_cancel(&mut counts, 0, 3, &c);
        assert_eq!((counts.cancels.made, counts.cancels.lost), (0, 0));
        c.cancelled = Some(Sent {
            at: asked + COUNTDOWN_REST / 2,
            ..late
        });
        judge_cancel(&mut counts, 0, 3, &c);
        assert_eq!((counts.cancels.made, counts.cancels.lost), (1, 1));
    }

    #[test]
    fn a_forwarded_call_is_lost_on_timeouts_and_lost_requests() {
        let mut counts = Counts::default();
        for end in [
            End::Rpc(-32005, "upstream `fx` did not answer".into()),
            End::Rpc(-32004, "lost".into()),
            End::Failed("call timed out".into()),
            End::Failed("POST 503".into()),
        ] {
            judge_forwarded(&mut counts, 0, "t", &call(end, None));
        }
        assert_eq!((counts.forwarded.made, counts.forwarded.lost), (4, 3));
    }
}

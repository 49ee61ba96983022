//! Server-directed task creation for a `tools/call` from a client declaring the extension.
//!
//! The call starts like any 2026-07-28 request ([`super::super::call::spawn`]). If it finishes
//! within `task_after`, the client gets its answer as usual (JSON, or SSE when it sent
//! notifications meanwhile). Otherwise the node registers the task's cancellation handle, stores
//! the record (`working`), and only then answers with the `CreateTaskResult` (ext-tasks, Task
//! Creation: MUST NOT return it before a `tasks/get` would resolve). The call keeps running in
//! a detached runner that writes its outcome into the record; notifications it sends from then
//! on have no stream to go to and are dropped and counted (`switchboard_notifications_dropped_total`;
//! a task's progress is read with `tasks/get`).
//!
//! While the client waits for the first answer, closing the response cancels the call as on any
//! 2026-07-28 request; once the task exists only `tasks/cancel` does.
//!
//! A question the call asks the client (sampling, elicitation, roots) waits: the task turns
//! `input_required` with the open questions as `inputRequests`, and `tasks/update` on any node
//! delivers the answers to the waiting call ([`super::deliver`]), which goes on (`working`).

use std::sync::Arc;

use axum::response::Response;
use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::{Settled, TaskChange, TaskRecord, TaskStatus};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::super::checks::Checked;
use super::super::park::Item;
use super::super::refusal::Refusal;
use super::super::{answer, call, JSON_ONLY};
use super::{new_task_id, now_iso, wire, RESULT_TASK};
use crate::edge::header_checks::Answers;
use crate::mrtr::Inputs;
use crate::state::names::TASK_PREFIX;
use crate::state::App;
use crate::{streams::sse, telemetry};

/// The [`switchboard_runtime::Calls`] entry of a running task: `tasks/cancel` on any node reaches it
/// as a [`switchboard_store::BusMessage::Cancel`] for this (session, request) pair.
pub fn calls_key(task_id: &str) -> (String, &'static str) {
    (format!("{TASK_PREFIX}{task_id}"), "task")
}

/// Runs a task-capable request from a client that declared the extension.
pub async fn call(
    app: &App,
    id: RequestId,
    method: String,
    raw: Value,
    checked: Checked,
    answers: Answers,
) -> Response {
    // The principal is a task-local of the request; the spawned task needs it passed on.
    let principal = crate::session::current_principal();
    let params = raw.get("params").cloned().unwrap_or(Value::Null);
    let inputs = Arc::new(Inputs::for_task(&method, &params));
    let spawned = call::spawn(
        app,
        id.clone(),
        method,
        raw,
        checked,
        Some(inputs.clone()),
        principal.clone(),
    );
    let (mut rx, guard) = match spawned {
        Ok(spawned) => spawned,
        Err(refusal) => return refusal.respond(Some(&id)),
    };
    // Until the task exists, a closed response cancels the call as on any 2026-07-28 request.
    let deadline = tokio::time::sleep(app.cfg.task_after);
    tokio::pin!(deadline);
    let mut notes = Vec::new();
    loop {
        tokio::select! {
            item = rx.recv() => match item {
                Some(Item::Note(v)) if notes.len() < app.cfg.connection_queue => notes.push(v),
                Some(Item::Note(v)) => telemetry::notification_dropped(
                    v["method"].as_str().unwrap_or("?"),
                    "sent by a task's call after its CreateTaskResult (read with tasks/get)",
                ),
                Some(Item::Final(v)) => return finished_in_time(answers, notes, v),
                None => return internal(answers, &id, "the request ended without an answer"),
            },
            _ = &mut deadline => break,
        }
    }
    // From here the call's fate belongs to a task of its own, so that a client hanging up
    // while the record is written neither cancels the call nor leaves the record `working`.
    let run_token = guard.disarm();
    match tokio::spawn(start_task(app.clone(), principal, rx, run_token, inputs)).await {
        Ok(Started::Task(record)) => answer(
            answers,
            jsonrpc::result_response(&id, wire(&record, RESULT_TASK)),
        ),
        Ok(Started::AtCap(max)) => Refusal::Overloaded(format!(
            "this principal already has {max} running tasks (stateless.tasks.max_per_principal)"
        ))
        .respond(Some(&id)),
        _ => internal(answers, &id, "the task could not be stored"),
    }
}

/// What [`start_task`] made of the call.
enum Started {
    /// The task, stored.
    Task(TaskRecord),
    /// The principal runs `max` tasks already: the call is cancelled.
    AtCap(usize),
    /// The store refused: the call is cancelled.
    Failed,
}

/// Takes one of the principal's running-task slots, stores the task (its cancellation handle
/// registered first, so a `tasks/cancel` arriving right after the answer finds it) and hands the
/// call to [`detached`]. At the cap, or when the store refused, the call is cancelled.
async fn start_task(
    app: App,
    principal: String,
    rx: mpsc::Receiver<Item>,
    run_token: CancellationToken,
    inputs: Arc<Inputs>,
) -> Started {
    // The deadline is counted before the record exists, so it never falls after the record's
    // own expiry in the store.
    let deadline = Instant::now() + app.cfg.task_ttl;
    let task_id = new_task_id();
    let max = app.cfg.max_tasks_per_principal;
    let ttl = millis(app.cfg.task_ttl);
    let claimed = (app.store).claim_task_slot(&principal, &task_id, max as u64, ttl);
    match claimed.await {
        Ok(true) => {}
        outcome => {
            run_token.cancel();
            if let Ok(false) = outcome {
                telemetry::task_refused_at_cap(max);
                return Started::AtCap(max);
            }
            tracing::warn!(?outcome, "task slot not taken; the call is cancelled");
            return Started::Failed;
        }
    }
    let (sid, key) = calls_key(&task_id);
    let stop = app.replica.calls.start(&sid, key);
    let record = new_record(&app, &task_id, principal);
    match app.store.create_task(&record).await {
        Ok(true) => {}
        outcome => {
            app.replica.calls.end(&sid, key);
            run_token.cancel();
            release_slot(&app, &record).await;
            tracing::warn!(?outcome, "task not created; the call is cancelled");
            return Started::Failed;
        }
    }
    telemetry::task_created(&task_id);
    app.tasks.insert(&task_id, inputs.clone());
    let run = Run {
        task: record.clone(),
        deadline,
        run_token,
        stop,
    };
    tokio::spawn(detached(app, run, rx, inputs));
    Started::Task(record)
}

/// Gives back the running-task slot of `task` (a slot not given back frees itself at its TTL).
async fn release_slot(app: &App, task: &TaskRecord) {
    let released = (app.store).release_task_slot(&task.principal, &task.task_id);
    if let Err(e) = released.await {
        tracing::warn!(task = %task.task_id, error = %e, "task slot not released; it frees itself at the task's TTL");
    }
}

/// A new `working` task run by this node for `principal`.
fn new_record(app: &App, task_id: &str, principal: String) -> TaskRecord {
    let now = now_iso();
    TaskRecord {
        task_id: task_id.to_owned(),
        principal,
        node: app.node_id().to_owned(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: now.clone(),
        last_updated_at: now,
        ttl_ms: millis(app.cfg.task_ttl),
        poll_interval_ms: millis(app.cfg.task_poll_interval),
        outcome: None,
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The answer of a call that finished before becoming a task: JSON, or SSE with the
/// notifications it sent first (at most `http.connection_queue` of them are kept); always JSON for a
/// client that accepts only JSON (the notifications dropped and counted), always SSE for one
/// that accepts only SSE.
fn finished_in_time(answers: Answers, notes: Vec<Value>, last: Value) -> Response {
    if answers == Answers::JsonOnly {
        for note in &notes {
            telemetry::notification_dropped(note["method"].as_str().unwrap_or("?"), JSON_ONLY);
        }
        return answer(answers, last);
    }
    if notes.is_empty() {
        return answer(answers, last);
    }
    let messages = notes.into_iter().chain(std::iter::once(last));
    sse::body_response(sse::data_stream(tokio_stream::iter(messages)), &[])
}

fn internal(answers: Answers, id: &RequestId, message: &str) -> Response {
    answer(
        answers,
        jsonrpc::error_response(Some(id), codes::INTERNAL_ERROR, message, None),
    )
}

/// A task's call as [`detached`] drives it.
struct Run {
    /// The record as created.
    task: TaskRecord,
    /// `stateless.tasks.ttl` from the task's start.
    deadline: Instant,
    /// Cancels the call.
    run_token: CancellationToken,
    /// Fires on `tasks/cancel` (locally or over the bus).
    stop: CancellationToken,
}

/// Drives a task's call to its end and stores the outcome. `stop` fires on `tasks/cancel`
/// (locally or over the bus) and cancels the call; the call's own answer still arrives (the
/// cancellation error) and finds the record already `cancelled`, which stays. At the deadline
/// the task expires: its record gives way to a tombstone, then the call is cancelled (a question
/// waiting for input is released with it). A task that ended before its deadline is made a
/// tombstone at the deadline too, so an expired task always reads "expired" for the grace.
async fn detached(app: App, run: Run, mut rx: mpsc::Receiver<Item>, inputs: Arc<Inputs>) {
    let Run {
        task,
        deadline,
        run_token,
        stop,
    } = run;
    let task_id = task.task_id.clone();
    let mut expired = false;
    let last = loop {
        tokio::select! {
            item = rx.recv() => match item {
                Some(Item::Note(v)) => telemetry::notification_dropped(
                    v["method"].as_str().unwrap_or("?"),
                    "sent by a task's call after its CreateTaskResult (read with tasks/get)",
                ),
                Some(Item::Final(v)) => break Some(v),
                None => break None,
            },
            () = inputs.asked() => {
                // The call asks the client something: the task shows every open question.
                inputs.take_asked();
                super::ask(&app, &task_id, inputs.waiting()).await;
            }
            _ = stop.cancelled(), if !run_token.is_cancelled() => {
                run_token.cancel();
                telemetry::task_cancelled(&task_id);
            }
            () = tokio::time::sleep_until(deadline), if !expired => {
                expired = true;
                expire(&app, &task).await;
                if !run_token.is_cancelled() {
                    run_token.cancel();
                    telemetry::task_expired(&task_id);
                }
            }
        }
    };
    app.tasks.remove(&task_id);
    let (sid, key) = calls_key(&task_id);
    app.replica.calls.end(&sid, key);
    release_slot(&app, &task).await;
    let change = outcome_change(last);
    match super::settle(&app, &task_id, &change).await {
        Ok(Settled::Changed(r)) => telemetry::task_finished(&task_id, r.status.as_str()),
        Ok(Settled::AlreadyTerminal(_)) => {}
        Ok(Settled::Missing) => tracing::info!(task = %task_id, "task expired before it finished"),
        Err(e) => tracing::warn!(task = %task_id, error = %e, "task outcome not stored"),
    }
    if !expired {
        tokio::time::sleep_until(deadline).await;
        expire(&app, &task).await;
    }
}

/// Ends `task` at its TTL: its record gives way to a tombstone kept `stateless.tasks.expired_grace`
/// (written by this node, whether or not the record is still there).
async fn expire(app: &App, task: &TaskRecord) {
    let grace = millis(app.cfg.task_expired_grace);
    let ended = (app.store).expire_task(&task.task_id, &task.principal, grace);
    if let Err(e) = ended.await {
        tracing::warn!(task = %task.task_id, error = %e, "expired task's tombstone not written; it reads as unknown");
    }
}

/// The record change for the call's final JSON-RPC response: `completed` with its result (a tool
/// result with `isError: true` included), or `failed` with its error (ext-tasks, Task Status).
pub fn outcome_change(last: Option<Value>) -> TaskChange {
    let at = now_iso();
    let error = |e: Value| TaskChange {
        status: TaskStatus::Failed,
        at: at.clone(),
        message: e.get("message").and_then(Value::as_str).map(str::to_owned),
        outcome: Some(e.to_string()),
    };
    match last {
        Some(mut v) => match (v.get_mut("result").map(Value::take), v.get_mut("error")) {
            (Some(result), _) => TaskChange {
                status: TaskStatus::Completed,
                at,
                message: None,
                outcome: Some(result.to_string()),
            },
            (None, Some(e)) => error(e.take()),
            (None, None) => {
                error(json!({"code": codes::INTERNAL_ERROR, "message": "malformed answer"}))
            }
        },
        None => error(json!({
            "code": codes::INTERNAL_ERROR,
            "message": "the request ended without an answer",
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_complete_and_json_rpc_errors_fail() {
        let tool_error = json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [], "isError": true, "resultType": "complete"}});
        let c = outcome_change(Some(tool_error));
        assert_eq!(c.status, TaskStatus::Completed);
        let stored: Value = serde_json::from_str(c.outcome.as_deref().unwrap()).unwrap();
        assert_eq!(stored["isError"], true);
        let err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}});
        let c = outcome_change(Some(err));
        assert_eq!(
            (c.status, c.message.as_deref()),
            (TaskStatus::Failed, Some("bad"))
        );
        assert_eq!(outcome_change(None).status, TaskStatus::Failed);
    }
}

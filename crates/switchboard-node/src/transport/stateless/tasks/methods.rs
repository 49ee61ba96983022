//! `tasks/get`, `tasks/cancel` and `tasks/update`, served on any node from the store (ext-tasks,
//! Task Polling, Task Update Requests, Task Cancellation, Error Handling).
//!
//! Every method first loads the task for the request's principal: a missing or another
//! principal's task is the same -32602 "unknown task". A task of this principal that expired
//! within `stateless.tasks.expired_grace` (its tombstone) is -32602 "task has expired" with
//! `data: {"reason": "expired"}`. A non-terminal task whose running node is dead is failed on
//! the spot (see the module docs of [`super`]).

use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::{BusMessage, Settled, TaskChange, TaskRecord, TaskStatus};

use super::create::calls_key;
use super::{now_iso, wire};
use crate::state::App;
use crate::telemetry;

/// Why a task method is refused: its JSON-RPC code, message and `data`.
type Refused = (i64, String, Option<Value>);

/// The JSON-RPC response to a task method (`method` is one of [`super::METHODS`]).
pub async fn answer(app: &App, id: &RequestId, method: &str, params: &Value) -> Value {
    match serve(app, method, params).await {
        Ok(result) => jsonrpc::result_response(id, result),
        Err((code, message, data)) => jsonrpc::error_response(Some(id), code, message, data),
    }
}

async fn serve(app: &App, method: &str, params: &Value) -> Result<Value, Refused> {
    let task_id = params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("params.taskId (a string) is required"))?;
    let task = load(app, task_id).await?;
    match method {
        "tasks/get" => Ok(wire(&task, "complete")),
        "tasks/cancel" => cancel(app, task).await.map(|()| ack()),
        _ => update(app, task, params).await.map(|()| ack()),
    }
}

/// The empty acknowledgement of `tasks/cancel` and `tasks/update`.
fn ack() -> Value {
    json!({"resultType": "complete"})
}

fn invalid(message: &str) -> Refused {
    (codes::INVALID_PARAMS, message.to_owned(), None)
}

/// The answer for a task that reached its TTL (ext-tasks, Error Handling: "Task has expired").
fn expired(task_id: &str) -> Refused {
    (
        codes::INVALID_PARAMS,
        "task has expired".to_owned(),
        Some(json!({"reason": "expired", "taskId": task_id})),
    )
}

fn store_down(e: switchboard_store::StoreError) -> Refused {
    tracing::warn!(error = %e, "task store unavailable");
    (
        codes::INTERNAL_ERROR,
        "the task store is unavailable".into(),
        None,
    )
}

/// The task, if it exists and belongs to the request's principal; failed first when the node
/// running it has died.
async fn load(app: &App, task_id: &str) -> Result<TaskRecord, Refused> {
    let unknown = || invalid("unknown task");
    let task = app.store.get_task(task_id).await.map_err(store_down)?;
    let Some(task) = task else {
        let tomb = app.store.expired_task(task_id).await.map_err(store_down)?;
        return match tomb {
            Some(p) if crate::session::may_use(&p) => Err(expired(task_id)),
            _ => Err(unknown()),
        };
    };
    if !crate::session::may_use(&task.principal) {
        return Err(unknown());
    }
    if task.status.is_terminal() || task.node == app.node_id() {
        return Ok(task);
    }
    if app.store.is_alive(&task.node).await.map_err(store_down)? {
        return Ok(task);
    }
    let message = format!("the node running this task ({}) stopped", task.node);
    let change = TaskChange {
        status: TaskStatus::Failed,
        at: now_iso(),
        message: Some(message.clone()),
        outcome: Some(json!({"code": codes::INTERNAL_ERROR, "message": message}).to_string()),
    };
    match super::settle(app, task_id, &change)
        .await
        .map_err(store_down)?
    {
        Settled::Changed(t) => {
            telemetry::task_lost(task_id, &t.node);
            // Its node cannot give the slot back any more.
            let released = app.store.release_task_slot(&t.principal, task_id).await;
            if let Err(e) = released {
                tracing::warn!(task = task_id, error = %e, "lost task's slot not released");
            }
            Ok(t)
        }
        Settled::AlreadyTerminal(t) => Ok(t),
        Settled::Missing => Err(unknown()),
    }
}

/// `tasks/update`: the `inputResponses` go to the node running the task, which hands them to the
/// waiting call (acknowledged at once, eventually consistent; ext-tasks, Task Update Requests:
/// unknown or already answered keys are ignored).
async fn update(app: &App, task: TaskRecord, params: &Value) -> Result<(), Refused> {
    let answers = match params.get("inputResponses") {
        Some(Value::Object(m)) if m.values().all(Value::is_object) => m.clone(),
        _ => {
            return Err(invalid(
                "params.inputResponses is required: an object whose values are result objects",
            ))
        }
    };
    if task.status != TaskStatus::InputRequired {
        return Ok(());
    }
    if task.node == app.node_id() {
        super::deliver(app, &task.task_id, &answers).await;
        return Ok(());
    }
    let msg = BusMessage::TaskInput {
        task: task.task_id.clone(),
        answers,
    };
    if let Err(e) = app.store.send_to(&task.node, &msg).await {
        tracing::warn!(task = %task.task_id, error = %e, "input not delivered to the task's node");
    }
    Ok(())
}

/// Marks the task cancelled (a terminal task: -32602) and tells its node to stop the call.
async fn cancel(app: &App, task: TaskRecord) -> Result<(), Refused> {
    let terminal = |t: &TaskRecord| invalid(&format!("task is already {}", t.status.as_str()));
    if task.status.is_terminal() {
        return Err(terminal(&task));
    }
    let change = TaskChange {
        status: TaskStatus::Cancelled,
        at: now_iso(),
        message: Some("cancelled by the client".into()),
        outcome: None,
    };
    let settled = super::settle(app, &task.task_id, &change)
        .await
        .map_err(store_down)?;
    match settled {
        Settled::Changed(_) => {}
        Settled::AlreadyTerminal(t) => return Err(terminal(&t)),
        Settled::Missing => return Err(expired(&task.task_id)),
    }
    let (sid, key) = calls_key(&task.task_id);
    if task.node == app.node_id() {
        app.replica.calls.cancel(&sid, key);
        return Ok(());
    }
    let msg = BusMessage::Cancel {
        sid,
        request_key: key.to_owned(),
        reason: Some("tasks/cancel".into()),
    };
    // Fire and forget: the record is already cancelled whatever happens to the call.
    if let Err(e) = app.store.send_to(&task.node, &msg).await {
        tracing::warn!(task = %task.task_id, error = %e, "cancellation not delivered to the task's node");
    }
    Ok(())
}

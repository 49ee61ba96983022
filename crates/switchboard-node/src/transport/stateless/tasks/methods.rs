//! `tasks/get`, `tasks/cancel` and `tasks/update`, served on any node from the store (ext-tasks,
//! Task Polling, Task Update Requests, Task Cancellation, Error Handling).
//!
//! Every method first loads the task for the request's principal: a missing, expired or another
//! principal's task is the same -32602 "unknown task". A non-terminal task whose running node is
//! dead is failed on the spot (see the module docs of [`super`]).

use serde_json::{json, Value};
use switchboard_protocol::{codes, jsonrpc, RequestId};
use switchboard_store::{BusMessage, Settled, TaskChange, TaskRecord, TaskStatus};

use super::create::calls_key;
use super::{now_iso, wire};
use crate::state::App;
use crate::telemetry;

/// Why a task method is refused: its JSON-RPC code and message.
type Refused = (i64, String);

/// The JSON-RPC response to a task method (`method` is one of [`super::METHODS`]).
pub async fn answer(app: &App, id: &RequestId, method: &str, params: &Value) -> Value {
    match serve(app, method, params).await {
        Ok(result) => jsonrpc::result_response(id, result),
        Err((code, message)) => jsonrpc::error_response(Some(id), code, message, None),
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
    (codes::INVALID_PARAMS, message.to_owned())
}

fn store_down(e: switchboard_store::StoreError) -> Refused {
    tracing::warn!(error = %e, "task store unavailable");
    (
        codes::INTERNAL_ERROR,
        "the task store is unavailable".into(),
    )
}

/// The task, if it exists and belongs to the request's principal; failed first when the node
/// running it has died.
async fn load(app: &App, task_id: &str) -> Result<TaskRecord, Refused> {
    let unknown = || invalid("unknown task");
    let task = app.store.get_task(task_id).await.map_err(store_down)?;
    let task = task
        .filter(|t| crate::session::may_use(&t.principal))
        .ok_or_else(unknown)?;
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
    match app
        .store
        .settle_task(task_id, &change)
        .await
        .map_err(store_down)?
    {
        Settled::Changed(t) => {
            telemetry::task_lost(task_id, &t.node);
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
    let settled = app
        .store
        .settle_task(&task.task_id, &change)
        .await
        .map_err(store_down)?;
    match settled {
        Settled::Changed(_) => {}
        Settled::AlreadyTerminal(t) => return Err(terminal(&t)),
        Settled::Missing => return Err(invalid("unknown task")),
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

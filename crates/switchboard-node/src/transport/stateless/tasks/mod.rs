//! The tasks extension `io.modelcontextprotocol/tasks` for 2026-07-28 requests (revisions.md
//! 6.2; ext-tasks, docs/specification/draft/tasks.mdx; SEP-2663).
//!
//! - Negotiation: `server/discover` advertises the extension ([`advertise`]); a task is only
//!   ever returned to a request whose `_meta` client capabilities declare it ([`wanted`]).
//! - Creation ([`create`]): a `tools/call` from such a client that has not finished within
//!   `task_after` gets a `CreateTaskResult` (`resultType: "task"`, the task's fields flat in the
//!   result, as the extension's schema has `CreateTaskResult = Result & Task`). The record is in
//!   the store before that answer goes out, so `tasks/get` on any node finds it. From then on the
//!   call runs detached from the HTTP response: closing it no longer cancels.
//! - Methods ([`methods`]): `tasks/get`, `tasks/cancel` and `tasks/update` on any node; the
//!   header checks require `Mcp-Name` = `params.taskId` (1.7.3). `tasks/result` and `tasks/list`
//!   are gone in 2026-07-28 and stay 404/-32601 (not in [`super::checks::METHODS`]).
//! - Binding: a task belongs to the principal that created it; anyone else gets the answer an
//!   unknown id gets (-32602 "unknown task"), so existence does not leak.
//! - A task whose running node died (its heartbeat lapsed, [`switchboard_store::Liveness`]) is
//!   failed by the first `tasks/get`/`tasks/cancel`/`tasks/update` that sees it, with a -32603
//!   error naming the node: the work is lost with the node and would otherwise read `working`
//!   until its TTL.
//!
//! - Input ([`ask`], [`deliver`]): a question the call asks the client waits; the record turns
//!   `input_required` with every open question in `inputRequests` (keys never reused within the
//!   task), and `tasks/update` on any node sends its `inputResponses` to the running node, which
//!   hands them to the waiting call; keys not open are ignored. When no question is left open
//!   the task is `working` again.
//!
//! A cancellation or an answer for a task running on another node travels on the bus, which
//! keeps it until that node takes it (docs/redis.md, "What the bus guarantees").
//!
//! - Lifetime ([`create`]): at `stateless.tasks.ttl` from its creation the node running the
//!   call cancels it if it still runs (a waiting question included) and ends the record, leaving
//!   a tombstone for `stateless.tasks.expired_grace`; meanwhile every method answers -32602 with
//!   `data.reason = "expired"` ([`methods`]). `stateless.tasks.max_per_principal` tasks of one
//!   principal run at once, cluster-wide (a slot in the store per running task).
//! - Status notifications ([`settle`]): each status change raises `notifications/tasks` (the
//!   task as `tasks/get` shows it) on the bus, to the listen streams of the task's principal on
//!   every node whose `taskIds` name it.

pub mod create;
pub mod methods;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use switchboard_store::{BusMessage, Settled, StoreResult, TaskChange, TaskRecord, TaskStatus};

use super::checks::Checked;
use crate::state::listeners::filter::TASK_STATUS;
use crate::state::App;

/// Applies `change` to task `task_id` ([`switchboard_store::TaskStore::settle_task`]) and, when
/// it applied, raises `notifications/tasks` for it.
pub async fn settle(app: &App, task_id: &str, change: &TaskChange) -> StoreResult<Settled> {
    let settled = app.store.settle_task(task_id, change).await?;
    if let Settled::Changed(record) = &settled {
        announce(app, record).await;
    }
    Ok(settled)
}

/// Sends `notifications/tasks` for `record` (its params: the task as `tasks/get` shows it,
/// without `resultType`) to every node's listen streams of the task's principal (the cluster
/// fan-out of [`BusMessage::Notify`]); this node's own when the bus refuses.
pub async fn announce(app: &App, record: &TaskRecord) {
    let mut params = wire(record, "complete");
    if let Some(fields) = params.as_object_mut() {
        fields.remove("resultType");
    }
    let message = json!({"jsonrpc": "2.0", "method": TASK_STATUS, "params": params});
    let msg = BusMessage::Notify {
        origin: app.node_id().to_owned(),
        message: message.clone(),
        principal: Some(record.principal.clone()),
    };
    if let Err(e) = app.store.broadcast(&msg).await {
        tracing::warn!(task = %record.task_id, error = %e, "notifications/tasks not broadcast; only this node's listen streams get it");
        app.listeners.publish(&message, Some(&record.principal));
    }
}

/// The running call of task `task_id` asks `open` (key → request): the record turns
/// `input_required` with them as `inputRequests`.
pub async fn ask(app: &App, task_id: &str, open: Map<String, Value>) {
    if open.is_empty() {
        return;
    }
    let change = TaskChange {
        status: TaskStatus::InputRequired,
        at: now_iso(),
        message: Some("waiting for the client's input".into()),
        outcome: Some(Value::Object(open).to_string()),
    };
    if let Err(e) = settle(app, task_id, &change).await {
        tracing::warn!(task = task_id, error = %e, "could not mark the task input_required");
    }
}

/// On the running node: hands `answers` (key → result) to task `task_id`'s waiting questions;
/// unknown and already answered keys are ignored. With no question left open the task is
/// `working` again. `false` when the task does not run here (any more).
pub async fn deliver(app: &App, task_id: &str, answers: &Map<String, Value>) -> bool {
    let Some(inputs) = app.tasks.get(task_id) else {
        return false;
    };
    let open = inputs.waiting();
    let answered: Map<String, Value> = answers
        .iter()
        .filter(|(k, v)| open.contains_key(*k) && v.is_object())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if answered.is_empty() {
        return true;
    }
    if answered.len() == open.len() {
        let change = TaskChange {
            status: TaskStatus::Working,
            at: now_iso(),
            message: None,
            outcome: None,
        };
        match settle(app, task_id, &change).await {
            Ok(Settled::Changed(_)) | Ok(Settled::AlreadyTerminal(_)) | Ok(Settled::Missing) => {}
            Err(e) => tracing::warn!(task = task_id, error = %e, "could not mark the task working"),
        }
    }
    // Answering only some leaves the rest asked again: the runner writes them back.
    inputs.deliver(&answered);
    true
}

/// The extension's identifier (in `capabilities.extensions` on both sides).
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// `resultType` of a `CreateTaskResult`.
pub const RESULT_TASK: &str = "task";

/// The methods the extension adds that this node serves.
pub const METHODS: [&str; 3] = ["tasks/get", "tasks/cancel", "tasks/update"];

/// The requests that may become tasks (ext-tasks, Supported Methods).
const TASK_CAPABLE: [&str; 1] = ["tools/call"];

/// Adds the extension to `server/discover`'s capabilities.
pub fn advertise(capabilities: &mut Value) {
    if let Some(caps) = capabilities.as_object_mut() {
        let extensions = caps
            .entry("extensions")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(ext) = extensions.as_object_mut() {
            ext.insert(EXTENSION.to_owned(), json!({}));
        }
    }
}

/// Whether `method` may be answered with a task: a task-capable method from a request whose
/// client capabilities declare the extension (a server MUST NOT return a task otherwise).
pub fn wanted(method: &str, checked: &Checked) -> bool {
    TASK_CAPABLE.contains(&method)
        && checked
            .capabilities
            .get("extensions")
            .and_then(|e| e.get(EXTENSION))
            .is_some_and(Value::is_object)
}

/// A fresh task id: 128 bits from the thread-local CSPRNG, as 32 hex characters.
pub fn new_task_id() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The task as the wire shows it, with `resultType` (`task` when created, `complete` for
/// `tasks/get`): the common fields, then `result` (completed) or `error` (failed).
pub fn wire(r: &TaskRecord, result_type: &str) -> Value {
    let mut v = json!({
        "resultType": result_type,
        "taskId": r.task_id,
        "status": r.status.as_str(),
        "createdAt": r.created_at,
        "lastUpdatedAt": r.last_updated_at,
        "ttlMs": r.ttl_ms,
        "pollIntervalMs": r.poll_interval_ms,
    });
    if let Some(m) = &r.status_message {
        v["statusMessage"] = json!(m);
    }
    let outcome = || {
        r.outcome
            .as_deref()
            .and_then(|o| serde_json::from_str::<Value>(o).ok())
            .unwrap_or_else(|| json!({}))
    };
    match r.status {
        TaskStatus::Completed => v["result"] = outcome(),
        TaskStatus::Failed => v["error"] = outcome(),
        TaskStatus::InputRequired => v["inputRequests"] = outcome(),
        _ => {}
    }
    v
}

/// Now as ISO 8601 UTC with milliseconds (`2026-07-28T10:30:00.123Z`).
pub fn now_iso() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    iso8601(ms)
}

/// Milliseconds since the Unix epoch as ISO 8601 UTC (the civil-from-days algorithm).
fn iso8601(ms: u64) -> String {
    let (days, rem) = (ms / 86_400_000, ms % 86_400_000);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(1_785_234_600_123), "2026-07-28T10:30:00.123Z");
    }

    #[test]
    fn task_ids_are_128_bit_hex_and_distinct() {
        let (a, b) = (new_task_id(), new_task_id());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    fn checked(capabilities: Value) -> Checked {
        Checked {
            capabilities,
            log_level: None,
            client_info: Value::Null,
        }
    }

    #[test]
    fn only_declaring_clients_get_tasks_and_only_for_tool_calls() {
        let yes = checked(json!({"extensions": {EXTENSION: {}}}));
        assert!(wanted("tools/call", &yes));
        assert!(!wanted("tools/list", &yes));
        assert!(!wanted("tools/call", &checked(json!({}))));
        assert!(!wanted(
            "tools/call",
            &checked(json!({"extensions": {"other/ext": {}}}))
        ));
        let mut caps = json!({"tools": {}});
        advertise(&mut caps);
        assert_eq!(caps["extensions"][EXTENSION], json!({}));
    }

    #[test]
    fn the_wire_shape_inlines_result_or_error() {
        let mut r = TaskRecord {
            task_id: "t".into(),
            principal: "p".into(),
            node: "n".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "c".into(),
            last_updated_at: "u".into(),
            ttl_ms: 5,
            poll_interval_ms: 6,
            outcome: None,
        };
        let w = wire(&r, RESULT_TASK);
        assert_eq!(
            w,
            json!({"resultType": "task", "taskId": "t", "status": "working", "createdAt": "c",
                   "lastUpdatedAt": "u", "ttlMs": 5, "pollIntervalMs": 6})
        );
        r.status = TaskStatus::Failed;
        r.outcome = Some(r#"{"code":-32603,"message":"x"}"#.into());
        let w = wire(&r, "complete");
        assert_eq!(w["error"]["code"], -32603);
        assert!(w.get("result").is_none());
    }
}

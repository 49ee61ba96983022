//! Task records of the tasks extension (`io.modelcontextprotocol/tasks`, MCP 2026-07-28): what a
//! node stores so that `tasks/get`, `tasks/cancel` and `tasks/update` work on any node.
//!
//! A record lives `ttl_ms` from its creation (the backend expires it; nothing else deletes it).
//! Its status moves only forward: once terminal (`completed`, `failed`, `cancelled`) it never
//! changes again, which [`crate::TaskStore::settle_task`] enforces atomically.

use serde::{Deserialize, Serialize};

/// A task's status (ext-tasks, Task Status).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The request is being processed.
    Working,
    /// The server waits for the client's `inputResponses` (not produced yet by the node).
    InputRequired,
    /// Finished with a result (also a tool result with `isError: true`).
    Completed,
    /// Finished with a JSON-RPC error.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl TaskStatus {
    /// Every status, in the order of the state diagram.
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    /// The wire name (`working`, `input_required`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// The status named `s`, if any.
    pub fn parse(s: &str) -> Option<TaskStatus> {
        TaskStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the status is final (`completed`, `failed`, `cancelled`).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// One stored task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// The task id (unguessable; the caller generates it).
    pub task_id: String,
    /// The principal that created it; only it may read, update or cancel the task.
    pub principal: String,
    /// The node running the request (where cancellations go; its death fails the task).
    pub node: String,
    /// Current status.
    pub status: TaskStatus,
    /// Optional human-readable message about the status.
    pub status_message: Option<String>,
    /// ISO 8601 creation time.
    pub created_at: String,
    /// ISO 8601 time of the last change.
    pub last_updated_at: String,
    /// Lifetime from creation in ms; the record expires then.
    pub ttl_ms: u64,
    /// Suggested polling interval in ms.
    pub poll_interval_ms: u64,
    /// JSON text of the `result` (completed) or the JSON-RPC `error` (failed).
    pub outcome: Option<String>,
}

/// A change to a task that is not terminal yet.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskChange {
    /// The new status.
    pub status: TaskStatus,
    /// ISO 8601 time of the change (`lastUpdatedAt`).
    pub at: String,
    /// The status message of the new status (`None`: none; each change replaces the last).
    pub message: Option<String>,
    /// JSON text of the result or error (`None`: keep the current one).
    pub outcome: Option<String>,
}

/// What [`crate::TaskStore::settle_task`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Settled {
    /// The change applied; the record as it is now.
    Changed(TaskRecord),
    /// The task was already terminal and stays as it was (returned).
    AlreadyTerminal(TaskRecord),
    /// No such task (never created, or expired).
    Missing,
}

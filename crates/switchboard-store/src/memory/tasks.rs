//! [`TaskStore`] in memory: one map under the shared lock, expiry by timestamps (expired tasks
//! are invisible at once and purged on the next create).

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::MemoryStore;
use crate::task::*;
use crate::traits::*;

#[async_trait]
impl TaskStore for MemoryStore {
    async fn create_task(&self, record: &TaskRecord) -> StoreResult<bool> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        shared.tasks.retain(|_, (_, expires)| *expires > now);
        if shared.tasks.contains_key(&record.task_id) {
            return Ok(false);
        }
        let expires = now + Duration::from_millis(record.ttl_ms);
        shared
            .tasks
            .insert(record.task_id.clone(), (record.clone(), expires));
        Ok(true)
    }

    async fn get_task(&self, task_id: &str) -> StoreResult<Option<TaskRecord>> {
        let now = Instant::now();
        Ok(self
            .shared
            .lock()
            .tasks
            .get(task_id)
            .filter(|(_, expires)| *expires > now)
            .map(|(record, _)| record.clone()))
    }

    async fn settle_task(&self, task_id: &str, change: &TaskChange) -> StoreResult<Settled> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        let Some((record, _)) = shared
            .tasks
            .get_mut(task_id)
            .filter(|(_, expires)| *expires > now)
        else {
            return Ok(Settled::Missing);
        };
        Ok(apply(record, change))
    }
}

/// The rule both backends follow: a terminal task stays as it is; any other takes the change.
pub(crate) fn apply(record: &mut TaskRecord, change: &TaskChange) -> Settled {
    if record.status.is_terminal() {
        return Settled::AlreadyTerminal(record.clone());
    }
    record.status = change.status;
    record.last_updated_at = change.at.clone();
    record.status_message = change.message.clone();
    if let Some(o) = &change.outcome {
        record.outcome = Some(o.clone());
    }
    Settled::Changed(record.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StoreConfig;

    fn record(id: &str, ttl_ms: u64) -> TaskRecord {
        TaskRecord {
            task_id: id.into(),
            principal: "anonymous".into(),
            node: "a".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            last_updated_at: "2026-01-01T00:00:00Z".into(),
            ttl_ms,
            poll_interval_ms: 1000,
            outcome: None,
        }
    }

    fn change(status: TaskStatus, outcome: Option<&str>) -> TaskChange {
        TaskChange {
            status,
            at: "2026-01-01T00:00:05Z".into(),
            message: None,
            outcome: outcome.map(str::to_owned),
        }
    }

    #[tokio::test]
    async fn a_task_is_seen_by_every_node_and_created_once() {
        let a = MemoryStore::new(StoreConfig::default_for("a"));
        let b = a.for_node("b");
        assert!(a.create_task(&record("t1", 60_000)).await.unwrap());
        assert!(!b.create_task(&record("t1", 60_000)).await.unwrap());
        assert_eq!(b.get_task("t1").await.unwrap(), Some(record("t1", 60_000)));
        assert_eq!(b.get_task("t2").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_terminal_status_never_changes() {
        let a = MemoryStore::new(StoreConfig::default_for("a"));
        a.create_task(&record("t", 60_000)).await.unwrap();
        let done = change(TaskStatus::Completed, Some(r#"{"content":[]}"#));
        let Settled::Changed(r) = a.settle_task("t", &done).await.unwrap() else {
            panic!("working → completed applies");
        };
        assert_eq!(r.status, TaskStatus::Completed);
        assert_eq!(r.last_updated_at, "2026-01-01T00:00:05Z");
        let cancel = change(TaskStatus::Cancelled, None);
        let Settled::AlreadyTerminal(kept) = a.settle_task("t", &cancel).await.unwrap() else {
            panic!("completed stays completed");
        };
        assert_eq!(kept, r);
        assert_eq!(a.get_task("t").await.unwrap(), Some(r));
        assert_eq!(
            a.settle_task("nope", &cancel).await.unwrap(),
            Settled::Missing
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tasks_expire_after_their_ttl() {
        let a = MemoryStore::new(StoreConfig::default_for("a"));
        a.create_task(&record("t", 1000)).await.unwrap();
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(a.get_task("t").await.unwrap().is_some());
        tokio::time::advance(Duration::from_millis(2)).await;
        assert_eq!(a.get_task("t").await.unwrap(), None);
        let cancel = change(TaskStatus::Cancelled, None);
        assert_eq!(a.settle_task("t", &cancel).await.unwrap(), Settled::Missing);
        assert!(
            a.create_task(&record("t", 1000)).await.unwrap(),
            "expired id is free"
        );
        assert_eq!(
            a.shared.lock().tasks.len(),
            1,
            "the expired record was purged"
        );
    }
}

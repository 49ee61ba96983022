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

    async fn expire_task(&self, task_id: &str, principal: &str, grace_ms: u64) -> StoreResult<()> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        shared.tasks.remove(task_id);
        shared.expired_tasks.retain(|_, (_, until)| *until > now);
        let until = now + Duration::from_millis(grace_ms.max(1));
        (shared.expired_tasks).insert(task_id.to_owned(), (principal.to_owned(), until));
        Ok(())
    }

    async fn expired_task(&self, task_id: &str) -> StoreResult<Option<String>> {
        let now = Instant::now();
        let shared = self.shared.lock();
        let tomb = shared.expired_tasks.get(task_id);
        Ok(tomb
            .filter(|(_, until)| *until > now)
            .map(|(p, _)| p.clone()))
    }

    async fn claim_task_slot(
        &self,
        principal: &str,
        task_id: &str,
        max: u64,
        ttl_ms: u64,
    ) -> StoreResult<bool> {
        let now = Instant::now();
        let mut shared = self.shared.lock();
        let slots = shared.task_slots.entry(principal.to_owned()).or_default();
        slots.retain(|_, until| *until > now);
        if slots.contains_key(task_id) {
            return Ok(true);
        }
        if slots.len() as u64 >= max {
            return Ok(false);
        }
        slots.insert(task_id.to_owned(), now + Duration::from_millis(ttl_ms));
        Ok(true)
    }

    async fn release_task_slot(&self, principal: &str, task_id: &str) -> StoreResult<()> {
        let mut shared = self.shared.lock();
        if let Some(slots) = shared.task_slots.get_mut(principal) {
            slots.remove(task_id);
            if slots.is_empty() {
                shared.task_slots.remove(principal);
            }
        }
        Ok(())
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

    #[tokio::test(start_paused = true)]
    async fn an_expired_task_leaves_a_tombstone_for_its_grace() {
        let a = MemoryStore::new(StoreConfig::default_for("a"));
        let b = a.for_node("b");
        a.create_task(&record("t", 60_000)).await.unwrap();
        a.expire_task("t", "anonymous", 1000).await.unwrap();
        assert_eq!(b.get_task("t").await.unwrap(), None);
        assert_eq!(
            b.expired_task("t").await.unwrap().as_deref(),
            Some("anonymous")
        );
        assert_eq!(b.expired_task("never").await.unwrap(), None);
        // No record needed.
        b.expire_task("gone", "p", 1000).await.unwrap();
        assert!(a.expired_task("gone").await.unwrap().is_some());
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert_eq!(a.expired_task("t").await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn task_slots_cap_a_principal_and_free_themselves() {
        let a = MemoryStore::new(StoreConfig::default_for("a"));
        let b = a.for_node("b");
        assert!(a.claim_task_slot("p", "t1", 2, 1000).await.unwrap());
        assert!(b.claim_task_slot("p", "t2", 2, 1000).await.unwrap());
        assert!(!a.claim_task_slot("p", "t3", 2, 1000).await.unwrap());
        assert!(a.claim_task_slot("q", "t3", 2, 1000).await.unwrap());
        b.release_task_slot("p", "t1").await.unwrap();
        assert!(a.claim_task_slot("p", "t3", 2, 1000).await.unwrap());
        tokio::time::advance(Duration::from_millis(1001)).await;
        assert!(a.claim_task_slot("p", "t4", 2, 1000).await.unwrap());
        assert!(a.claim_task_slot("p", "t5", 2, 1000).await.unwrap());
    }
}

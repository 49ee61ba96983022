//! Task records of the tasks extension: seen by every node, terminal states final, expiry.

use std::time::Duration;

use switchboard_store::*;
use switchboard_tests::eventually::eventually;

use crate::harness::*;

fn task(id: &str, ttl_ms: u64) -> TaskRecord {
    TaskRecord {
        task_id: id.into(),
        principal: "https://issuer.test\nuser-1".into(),
        node: "a".into(),
        status: TaskStatus::Working,
        status_message: Some("started".into()),
        created_at: "2026-07-28T10:00:00.000Z".into(),
        last_updated_at: "2026-07-28T10:00:00.000Z".into(),
        ttl_ms,
        poll_interval_ms: 500,
        outcome: None,
    }
}

fn change(status: TaskStatus, outcome: Option<&str>) -> TaskChange {
    TaskChange {
        status,
        at: "2026-07-28T10:00:09.000Z".into(),
        message: None,
        outcome: outcome.map(str::to_owned),
    }
}

pub async fn tasks_are_shared_and_terminal_states_are_final(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    assert!(a.create_task(&task("t1", 60_000)).await.unwrap());
    assert!(
        !b.create_task(&task("t1", 60_000)).await.unwrap(),
        "ids are unique"
    );
    assert_eq!(b.get_task("t1").await.unwrap(), Some(task("t1", 60_000)));
    assert_eq!(b.get_task("t2").await.unwrap(), None);

    let result = r#"{"content":[],"isError":true,"big":12345678901234567890,"list":[]}"#;
    let Settled::Changed(done) = b
        .settle_task("t1", &change(TaskStatus::Completed, Some(result)))
        .await
        .unwrap()
    else {
        panic!("working → completed applies");
    };
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.outcome.as_deref(), Some(result), "stored verbatim");
    assert_eq!(
        done.status_message, None,
        "each change replaces the status message"
    );
    let again = a
        .settle_task("t1", &change(TaskStatus::Cancelled, None))
        .await
        .unwrap();
    assert_eq!(again, Settled::AlreadyTerminal(done.clone()));
    assert_eq!(a.get_task("t1").await.unwrap(), Some(done));
    assert_eq!(
        a.settle_task("t2", &change(TaskStatus::Failed, None))
            .await
            .unwrap(),
        Settled::Missing
    );
}

pub async fn tasks_expire_after_their_ttl(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let a = env.node("a").await;
    assert!(a.create_task(&task("short", 300)).await.unwrap());
    // A change keeps the expiry counted from creation.
    a.settle_task("short", &change(TaskStatus::Working, None))
        .await
        .unwrap();
    eventually("the task to expire", Duration::from_secs(5), || {
        let a = a.clone();
        async move { a.get_task("short").await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(a.create_task(&task("short", 300)).await.unwrap());
}

pub async fn expired_tasks_leave_tombstones_and_slots_cap_a_principal(kind: Kind) {
    let env = Env::new(kind, |_| {});
    let (a, b) = (env.node("a").await, env.node("b").await);
    let principal = "https://issuer.test\nuser-1";
    assert!(a.create_task(&task("t1", 60_000)).await.unwrap());
    b.expire_task("t1", principal, 60_000).await.unwrap();
    assert_eq!(a.get_task("t1").await.unwrap(), None);
    assert_eq!(
        a.expired_task("t1").await.unwrap().as_deref(),
        Some(principal)
    );
    assert_eq!(a.expired_task("t2").await.unwrap(), None);
    assert_eq!(
        a.settle_task("t1", &change(TaskStatus::Completed, None))
            .await
            .unwrap(),
        Settled::Missing,
        "an expired task takes no outcome"
    );

    for t in ["s1", "s2"] {
        assert!(a.claim_task_slot(principal, t, 2, 60_000).await.unwrap());
    }
    assert!(!b.claim_task_slot(principal, "s3", 2, 60_000).await.unwrap());
    assert!(b.claim_task_slot("other", "s3", 2, 60_000).await.unwrap());
    b.release_task_slot(principal, "s1").await.unwrap();
    assert!(b.claim_task_slot(principal, "s3", 2, 300).await.unwrap());
    eventually(
        "a slot past its time to free itself",
        Duration::from_secs(5),
        || {
            let a = a.clone();
            async move {
                let got = a.claim_task_slot(principal, "s4", 2, 60_000).await.unwrap();
                got.then_some(())
            }
        },
    )
    .await;
}

//! What counts as a failed start (case C30 with C32's `max_line_bytes`).

use std::time::Duration;

use serde_json::json;
use switchboard_protocol::codes;

use super::*;
use crate::http::tests::eventually;
use crate::status::State;

/// Waits (up to 5 s) until the status shows a failure newer than `after_ms`, i.e. until the
/// child's exit was accounted for; returns its time.
async fn next_failure(up: &StdioUpstream, after_ms: Option<u64>) -> u64 {
    let newer = || {
        let at = up.statuses()[0].last_error.as_ref().map(|e| e.at_ms);
        at.filter(|at| Some(*at) > after_ms)
    };
    assert!(
        eventually(|| newer().is_some()).await,
        "the exit was not accounted for"
    );
    newer().unwrap()
}

/// A result over `max_line_bytes` fails its call and stops the child, but once the child's
/// handshake is done that is no failed start: after two in a row, another session's first call
/// starts a child at once (before, it got "not started again yet after 2 failed starts") and
/// the status stays `up`.
#[tokio::test]
async fn over_long_results_after_the_handshake_are_not_failed_starts() {
    let up = upstream(&[]).with_max_line(1000);
    let mut last = None;
    for _ in 0..2 {
        let err = call(&up, ctx("a", &Peer::new()), "huge", json!({"bytes": 2000}))
            .await
            .unwrap_err();
        assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
        assert!(
            err.message
                .contains("larger than max_line_bytes (1000 bytes)"),
            "{}",
            err.message
        );
        last = Some(next_failure(&up, last).await);
    }
    let status = &up.statuses()[0];
    assert_eq!(
        (status.state, status.next_start_at_ms),
        (State::Up, None),
        "{status:?}"
    );
    let result = call(&up, ctx("b", &Peer::new()), "echo", json!({"s": "b"}))
        .await
        .expect("session b starts its child at once");
    assert_eq!(text(&result), "b");
    let again = call(&up, ctx("a", &Peer::new()), "echo", json!({"s": "a"}))
        .await
        .expect("session a gets a new child");
    assert_eq!(text(&again), "a");
    up.shutdown().await;
}

/// A line over `max_line_bytes` before the child is ready (its `initialize` answer) is a failed
/// start: the first is retried at once, the second puts the upstream in back-off.
#[tokio::test]
async fn an_over_long_initialize_answer_is_a_failed_start() {
    let policy = crate::config::RestartPolicy {
        backoff: Duration::from_secs(30),
        backoff_max: Duration::from_secs(30),
        stable: Duration::from_secs(30),
    };
    let up = upstream(&["--init-bytes", "2000"])
        .with_max_line(1000)
        .with_restart_policy(policy);
    for _ in 0..2 {
        let err = call(&up, ctx("a", &Peer::new()), "echo", json!({}))
            .await
            .unwrap_err();
        assert!(
            err.message
                .contains("larger than max_line_bytes (1000 bytes)"),
            "{}",
            err.message
        );
        assert_eq!(
            err.data,
            Some(json!({"upstream": "fx", "max_line_bytes": 1000}))
        );
    }
    let refused = call(&up, ctx("b", &Peer::new()), "echo", json!({}))
        .await
        .unwrap_err();
    let data = refused.data.expect("the back-off error");
    assert_eq!(
        (data["upstream"].clone(), data["failures"].clone()),
        (json!("fx"), json!(2))
    );
    assert!(
        refused.message.contains("larger than max_line_bytes"),
        "{}",
        refused.message
    );
    assert_eq!(up.statuses()[0].state, State::Down);
    up.shutdown().await;
}

/// A child that crashes on start is known by its last stderr lines: the start's error, the
/// back-off error that repeats it (`message` and `data.last_failure`) and the status's
/// `last_error` all end with what it wrote (before, only "exited (exit status 1)").
#[tokio::test]
async fn a_crashing_childs_last_stderr_lines_are_in_its_errors() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let flag = std::env::temp_dir().join(format!("sb-stderr-{}-{nanos}", std::process::id()));
    std::fs::write(&flag, "").unwrap();
    let policy = crate::config::RestartPolicy {
        backoff: Duration::from_secs(30),
        backoff_max: Duration::from_secs(30),
        stable: Duration::from_secs(30),
    };
    let up = upstream(&["--crash-while", flag.to_str().unwrap()]).with_restart_policy(policy);
    let said = format!(
        "upstream `fx` exited (exit status 1); its stderr ended with: FATAL: cannot start ({} exists)",
        flag.display()
    );
    for _ in 0..2 {
        let e = call(&up, ctx("s", &Peer::new()), "echo", json!({}))
            .await
            .unwrap_err();
        assert_eq!(e.message, said);
    }
    let refused = call(&up, ctx("s", &Peer::new()), "echo", json!({}))
        .await
        .unwrap_err();
    assert!(
        refused.message.contains(&format!("(last: {said})")),
        "{}",
        refused.message
    );
    assert_eq!(refused.data.unwrap()["last_failure"], json!(said));
    let status = &up.statuses()[0];
    assert_eq!(
        status.last_error.as_ref().map(|e| e.message.as_str()),
        Some(said.as_str())
    );
    std::fs::remove_file(&flag).unwrap();
    up.shutdown().await;
}

/// A child that dies without a word on stderr keeps the plain exit message.
#[tokio::test]
async fn a_child_that_wrote_no_stderr_keeps_the_plain_exit_message() {
    let up = upstream(&[]);
    let e = call(&up, ctx("s", &Peer::new()), "die", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.message, "upstream `fx` exited (exit status 3)");
    up.shutdown().await;
}

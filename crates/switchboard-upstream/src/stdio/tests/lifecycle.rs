//! Handshake, probe, exits, respawn, stopping and reaping (cases C21, C31).

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_protocol::codes;

use super::*;

#[tokio::test]
async fn the_child_is_initialized_before_any_request() {
    let up = upstream(&[]);
    let result = up
        .request("tools/list", json!({}), ctx("s1", &Peer::new()))
        .await
        .unwrap();
    assert!(result["tools"].as_array().unwrap().len() > 5);
    let info = info(&up, "s1").await;
    let received: Vec<&str> = info["received"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        received[..4],
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    // The client's own initialize params were replayed to the child.
    assert_eq!(info["init_params"], client_init());
    // The first session's child tells capabilities until a probe has run.
    assert_eq!(up.capabilities()["tools"], json!({"listChanged": true}));
    up.shutdown().await;
}

#[tokio::test]
async fn concurrent_first_requests_start_one_child() {
    let up = upstream(&[]);
    let peer = Peer::new();
    let calls = (0..4).map(|i| call(&up, ctx("s1", &peer), "echo", json!({"s": i.to_string()})));
    let results = futures::future::join_all(calls).await;
    let pids: Vec<Value> = results
        .into_iter()
        .map(|r| r.unwrap()["pid"].clone())
        .collect();
    assert!(pids.iter().all(|p| *p == pids[0]), "{pids:?}");
    assert_eq!(up.running_children(), 1);
    up.shutdown().await;
}

#[tokio::test]
async fn prepare_records_what_the_server_says_and_stops_the_probe() {
    let up = upstream(&[]);
    up.prepare().await;
    assert_eq!(
        up.server_info(),
        json!({"name": "fixture", "version": "1.0"})
    );
    assert_eq!(up.instructions().as_deref(), Some("a test fixture"));
    assert_eq!(up.capabilities()["logging"], json!({}));
    assert_eq!(up.running_children(), 0);
}

#[tokio::test]
async fn a_command_that_cannot_start_keeps_defaults_and_errors_clearly() {
    let up = StdioUpstream::new(
        "ghost",
        "/nonexistent/mcp-server",
        vec![],
        Default::default(),
        None,
        false,
        Duration::from_secs(5),
    );
    up.prepare().await;
    assert_eq!(up.capabilities(), json!({}));
    assert_eq!(up.server_info()["name"], "ghost");
    let err = call(&up, ctx("s1", &Peer::new()), "echo", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
    assert!(err.message.contains("`ghost`"), "{}", err.message);
}

#[tokio::test]
async fn env_is_exactly_the_configured_one_plus_path_and_home() {
    let script = "import os, sys, json\n\
        for line in sys.stdin:\n\
        \x20   m = json.loads(line)\n\
        \x20   if 'id' not in m: continue\n\
        \x20   env = {k: v for k, v in os.environ.items() if k not in ('LC_CTYPE',)}\n\
        \x20   print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'env': env, 'cwd': os.getcwd()}}), flush=True)\n";
    let env = [("GREETING".to_owned(), "hi".to_owned())].into();
    let up = StdioUpstream::new(
        "envy",
        python(),
        vec!["-c".into(), script.into()],
        env,
        Some("/tmp".into()),
        false,
        Duration::from_secs(10),
    );
    let result = up
        .request("anything", Value::Null, ctx("s1", &Peer::new()))
        .await
        .unwrap();
    let mut keys: Vec<&String> = result["env"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["GREETING", "HOME", "PATH"]);
    assert_eq!(result["env"]["GREETING"], "hi");
    // Debug output names the variables but never shows their values.
    let debug = format!("{up:?}");
    assert!(
        debug.contains("GREETING") && !debug.contains("\"hi\""),
        "{debug}"
    );
    assert_eq!(result["cwd"], "/tmp");
    up.shutdown().await;
}

#[tokio::test]
async fn session_end_kills_and_reaps_the_child() {
    let up = upstream(&[]);
    call(&up, ctx("s1", &Peer::new()), "echo", json!({"s": "x"}))
        .await
        .unwrap();
    let pid = up.child_pid("s1").unwrap();
    assert!(up.holds("s1") && !up.holds("s2"));
    assert!(matches!(proc_state(pid), Some('R' | 'S')));
    up.session_ended("s1").await;
    assert!(!up.holds("s1"));
    assert!(
        gone_within(pid, Duration::from_secs(5)).await,
        "state {:?}",
        proc_state(pid)
    );
}

#[tokio::test]
async fn a_child_ignoring_eof_and_sigterm_is_killed_with_its_grandchildren() {
    let up = upstream(&["--ignore-term", "--grandchild"]);
    let info = info(&up, "s1").await;
    let pid = info["pid"].as_u64().unwrap() as u32;
    let grandchild = info["grandchild"].as_u64().unwrap() as u32;
    assert!(proc_state(grandchild).is_some());
    up.session_ended("s1").await;
    // stdin closed, 300 ms; SIGTERM (ignored), 300 ms; SIGKILL to the group.
    assert!(
        gone_within(pid, Duration::from_secs(5)).await,
        "child {:?}",
        proc_state(pid)
    );
    // The grandchild is reparented to init (or a subreaper) once killed; it must not run on.
    let start = tokio::time::Instant::now();
    while matches!(proc_state(grandchild), Some(s) if s != 'Z')
        && start.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !matches!(proc_state(grandchild), Some(s) if s != 'Z'),
        "grandchild still running"
    );
}

#[tokio::test]
async fn a_child_dying_mid_call_fails_its_calls_at_once_and_is_respawned() {
    let up = upstream(&[]);
    let peer = Peer::new();
    let first = info(&up, "s1").await;
    let started = tokio::time::Instant::now();
    let slow = call(
        &up,
        ctx("s1", &peer),
        "slow",
        json!({"seconds": 20, "tag": "A"}),
    );
    let die = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        call(&up, ctx("s1", &peer), "die", json!({})).await
    };
    let (slow, die) = tokio::join!(slow, die);
    assert!(started.elapsed() < Duration::from_secs(5));
    for err in [slow.unwrap_err(), die.unwrap_err()] {
        assert_eq!(err.code, codes::UPSTREAM_UNAVAILABLE);
        assert_eq!(err.message, "upstream `fx` exited (exit status 3)");
    }
    let old_pid = first["pid"].as_u64().unwrap() as u32;
    assert!(gone_within(old_pid, Duration::from_secs(2)).await);
    // The next request starts a new child and replays the stored initialize.
    let second = info(&up, "s1").await;
    assert_ne!(second["pid"], first["pid"]);
    assert_eq!(second["init_params"], client_init());
    assert_eq!(second["received"][0], "initialize");
    up.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_every_child() {
    let up = upstream(&[]);
    let mut pids = Vec::new();
    for sid in ["a", "b", "c"] {
        call(&up, ctx(sid, &Peer::new()), "echo", json!({}))
            .await
            .unwrap();
        pids.push(up.child_pid(sid).unwrap());
    }
    assert_eq!(up.running_children(), 3);
    up.shutdown().await;
    assert_eq!(up.running_children(), 0);
    for pid in pids {
        assert!(gone_within(pid, Duration::from_secs(2)).await);
    }
}

#[tokio::test]
async fn requests_before_initialized_are_refused_but_ping_is_answered() {
    let up = upstream(&["--early-roots"]);
    let peer =
        Peer::answering(|_, _| Ok(json!({"jsonrpc": "2.0", "id": 1, "result": {"roots": []}})));
    let mut info = Value::Null;
    for _ in 0..100 {
        let result = call(&up, ctx("s1", &peer), "info", json!({}))
            .await
            .unwrap();
        info = result["info"].clone();
        if info["early"].as_object().is_some_and(|e| e.len() == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // roots/list arrived before `initialized`: refused; ping: answered; the client saw nothing.
    let early = &info["early"];
    assert_eq!(early["roots/list"]["error"]["code"], codes::INVALID_REQUEST);
    assert_eq!(early["roots/list"]["id"], "srv-1");
    assert_eq!(early["ping"]["result"], json!({}));
    assert!(peer.requests().is_empty());
    up.shutdown().await;
}

#[tokio::test]
async fn from_config_takes_the_stdio_fields() {
    use crate::config::{UpstreamConfig, UpstreamKind};
    let mut config = UpstreamConfig::new("files", UpstreamKind::Stdio);
    assert!(StdioUpstream::from_config(&config)
        .err()
        .is_some_and(|e| e.contains("`files`") && e.contains("command")));
    config.command = Some(python());
    config.args = vec!["-u".into(), fixture()];
    config.shared = true;
    config.timeout_ms = 25_000;
    let up = StdioUpstream::from_config(&config).unwrap();
    assert_eq!(up.name(), "files");
    assert!(up.is_shared());
    assert_eq!(up.timeout, Duration::from_millis(25_000));
    let result = call(&up, ctx("s1", &Peer::new()), "echo", json!({"s": "hi"})).await;
    assert_eq!(text(&result.unwrap()), "hi");
    up.shutdown().await;
    let http = UpstreamConfig::new("web", UpstreamKind::Http);
    assert!(StdioUpstream::from_config(&http).is_err());
}

#[tokio::test]
async fn rounds_of_start_call_end_leave_no_process_behind() {
    // C31, replay 1 (scaled down): start, call, end; then no child runs and none is a zombie.
    let up = upstream(&[]);
    let mut pids = Vec::new();
    for round in 0..20 {
        let sid = format!("round-{round}");
        call(&up, ctx(&sid, &Peer::new()), "echo", json!({}))
            .await
            .unwrap();
        pids.push(up.child_pid(&sid).unwrap());
        up.session_ended(&sid).await;
    }
    for pid in pids {
        assert!(
            gone_within(pid, Duration::from_secs(5)).await,
            "{pid}: {:?}",
            proc_state(pid)
        );
    }
    assert_eq!(up.running_children(), 0);
}

/// C30: a command that crashes on start is retried once at once, then refused with the back-off
/// error (no spawn) until the wait is over; its status says down with the restarts; once it
/// starts again it is used and the status says degraded until it has run stably.
#[tokio::test]
async fn a_child_crashing_on_start_is_refused_during_the_back_off() {
    use crate::status::State;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let flag = std::env::temp_dir().join(format!("sb-crash-{}-{nanos}", std::process::id()));
    std::fs::write(&flag, "").unwrap();
    let policy = crate::config::RestartPolicy {
        backoff: Duration::from_millis(400),
        backoff_max: Duration::from_millis(400),
        stable: Duration::from_secs(30),
    };
    let up = upstream(&["--crash-while", flag.to_str().unwrap()]).with_restart_policy(policy);
    for _ in 0..2 {
        let e = call(&up, ctx("s", &Peer::new()), "echo", json!({}))
            .await
            .unwrap_err();
        assert_eq!(e.code, codes::UPSTREAM_UNAVAILABLE);
        assert!(
            e.message.contains("exited (exit status 1)"),
            "{}",
            e.message
        );
        assert_eq!(e.data, None, "a tried start, not a refusal");
    }
    let refused = call(&up, ctx("s", &Peer::new()), "echo", json!({}))
        .await
        .unwrap_err();
    let data = refused.data.clone().expect("back-off data");
    assert_eq!(data["upstream"], "fx");
    let wait = data["retry_after_ms"].as_u64().unwrap();
    assert!((1..=400).contains(&wait), "{wait}");
    assert!(
        refused.message.contains("exit status 1"),
        "{}",
        refused.message
    );
    let status = &up.statuses()[0];
    assert_eq!((status.state, status.restarts), (State::Down, 1));
    assert!(status.next_start_at_ms.is_some() && status.children.is_empty());

    std::fs::remove_file(&flag).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let result = loop {
        match call(&up, ctx("s", &Peer::new()), "echo", json!({"s": "back"})).await {
            Ok(r) => break r,
            Err(e) => assert!(
                e.data.is_some(),
                "only refusals until the wait is over: {e:?}"
            ),
        }
        assert!(tokio::time::Instant::now() < deadline, "started again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(text(&result), "back");
    let status = &up.statuses()[0];
    assert_eq!(
        (status.state, status.restarts, status.children.len()),
        (State::Degraded, 2, 1)
    );
    up.shutdown().await;
}

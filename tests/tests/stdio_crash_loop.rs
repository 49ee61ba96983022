//! Case C30: a stdio child that crashes on start is restarted with an exponential back-off
//! (calls meanwhile fail at once with a clear error, spawns stay bounded), shows as down in
//! `/upstreamz` and `/metrics`, and is used again once it starts; a child that dies mid-call
//! fails that call at once with its exit status, the next call starts a new one (state lost),
//! and dead children are reaped (C31).

use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::eventually;
use switchboard_tests::metrics::{counter, upstream_status};
use switchboard_tests::temp::TempDir;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};

const T: Duration = Duration::from_secs(20);

struct Caller {
    client: McpClient,
    url: String,
    next_id: Cell<u64>,
}

impl Caller {
    async fn call(&self, tool: &str) -> Value {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"s": "x"}}});
        self.client
            .post(&self.url, &body)
            .await
            .answer(json!(id), T)
            .await
            .response
    }
}

fn spawns(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// A zombie (state `Z`) whose parent is `parent`, if any.
fn zombie_child_of(parent: u32) -> Option<String> {
    let entries = std::fs::read_dir("/proc").ok()?;
    entries.flatten().find_map(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let mut fields = rest.split(' ');
        let (state, ppid) = (fields.next()?, fields.next()?);
        (state == "Z" && ppid == parent.to_string()).then_some(stat)
    })
}

/// C30: N calls in a row during a crash loop get -32006 naming the upstream and the exit status
/// with a growing `data.retry_after_ms`; each spawn is one tried start (bounded); `/upstreamz`
/// and `/metrics` show it down with its restarts; once the command starts again the next try
/// uses it (degraded, then up after `restart_stable_ms`); a child dying mid-call fails that call
/// within 1 s with its exit status and the next call gets a new child (state lost), reaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_child_backs_off_and_is_used_again_once_it_starts() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let dir = TempDir::new("sb-crash-loop");
    let (log, flag) = (dir.path().join("spawns"), dir.path().join("crash"));
    std::fs::write(&flag, "").unwrap();
    let (log_arg, flag_arg) = (log.to_string_lossy(), flag.to_string_lossy());
    let args = [
        fixture.as_str(),
        "--spawn-log",
        &log_arg,
        "--crash-while",
        &flag_arg,
    ];
    let kid = Upstream::stdio("kid", &python, &args)
        .set("restart_backoff_ms", 200)
        .set("restart_backoff_max_ms", 1600)
        .set("restart_stable_ms", 3000);
    let started = start_cluster(1, &[kid], ClusterOptions::new());
    let node = started.cluster.node(0);
    let base = node.base_url();
    let mut client = McpClient::new();
    client.initialize(&node.url(), "2025-11-25").await;
    let caller = &Caller {
        client,
        url: node.url(),
        next_id: Cell::new(0),
    };
    assert_eq!(
        spawns(&log),
        1,
        "the start-up probe was the first failed start"
    );

    // Five tried starts; between them every call is refused at once.
    let (calls, refused, mut first_waits) = (&Cell::new(0usize), &Cell::new(0usize), Vec::new());
    for round in 0..5 {
        let first_wait = &Cell::new(None);
        let failure = eventually("a start to be tried", T, || async move {
            let answer = caller.call("kid__echo").await;
            calls.set(calls.get() + 1);
            let error = answer
                .get("error")
                .cloned()
                .unwrap_or_else(|| panic!("crashes: {answer}"));
            assert_eq!(error["code"], -32006, "{error}");
            assert_eq!(error["data"]["upstream"], "kid", "{error}");
            let message = error["message"].as_str().unwrap_or_default().to_owned();
            assert!(
                message.contains("`kid`") && message.contains("exit status 1"),
                "{error}"
            );
            match error["data"]["retry_after_ms"].as_u64() {
                Some(wait) => {
                    refused.set(refused.get() + 1);
                    first_wait.set(first_wait.get().or(Some(wait)));
                    None
                }
                None => Some(message),
            }
        })
        .await;
        assert!(
            failure.contains("exited (exit status 1)"),
            "round {round}: {failure}"
        );
        first_waits.push(first_wait.get());
        assert_eq!(spawns(&log), round + 2, "one spawn per tried start");
    }
    assert_eq!(
        first_waits[0], None,
        "the first failure after the probe is retried at once"
    );
    let waits: Vec<u64> = first_waits[1..]
        .iter()
        .map(|w| w.expect("refused before each try"))
        .collect();
    assert!(waits.iter().all(|w| *w <= 1600), "capped: {waits:?}");
    assert!(
        waits[0] < 200 && waits[2] >= 250 && waits[3] >= 600,
        "growing: {waits:?}"
    );
    assert!(
        waits[0] < waits[2] && waits[1] < waits[3],
        "growing: {waits:?}"
    );
    let (calls, refused) = (calls.get(), refused.get());
    println!("retry_after_ms right after each failed try: {waits:?}; {calls} calls, {refused} refused at once, {} spawns", spawns(&log));
    assert!(
        refused >= 4 && calls == refused + 5,
        "{calls} calls, {refused} refused"
    );

    let status = upstream_status(&base, "kid").await;
    assert_eq!(status["state"], "down", "{status}");
    assert_eq!(status["restarts"], 4, "{status}");
    assert_eq!(status["children"], json!([]), "{status}");
    assert!(
        status["last_error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exit status 1"),
        "{status}"
    );
    assert!(
        status["next_start_at_ms"].as_u64().is_some(),
        "in back-off: {status}"
    );
    assert_eq!(status["calls"].as_u64(), Some(calls as u64), "{status}");
    assert_eq!(
        status["call_errors"].as_u64(),
        Some(calls as u64),
        "{status}"
    );
    assert_eq!(
        counter(&base, r#"switchboard_upstream_up{upstream="kid"}"#).await,
        0
    );
    assert_eq!(
        counter(
            &base,
            r#"switchboard_upstream_state{upstream="kid",state="down"}"#
        )
        .await,
        1
    );
    assert_eq!(
        counter(
            &base,
            r#"switchboard_upstream_restarts_total{upstream="kid"}"#
        )
        .await,
        4
    );

    // The command works again: the next try after the wait uses it.
    std::fs::remove_file(&flag).unwrap();
    let echoed = eventually("the child to start again", T, || async move {
        caller.call("kid__echo").await.get("result").cloned()
    })
    .await;
    assert_eq!(spawns(&log), 7, "one more start");
    let pid = echoed["pid"].as_u64().unwrap_or_else(|| panic!("{echoed}"));
    let status = upstream_status(&base, "kid").await;
    assert_eq!(
        status["state"], "degraded",
        "running, not yet stable: {status}"
    );
    assert_eq!(status["children"][0]["pid"].as_u64(), Some(pid), "{status}");
    eventually("the child to count as stable", T, || async {
        (upstream_status(&base, "kid").await["state"] == "up").then_some(())
    })
    .await;

    // Mid-call death: that call fails at once with the exit status; the next call starts anew.
    assert_eq!(
        caller.call("kid__increment").await["result"]["content"][0]["text"],
        "1"
    );
    let sent = Instant::now();
    let died = caller.call("kid__die").await;
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "failed within 1 s: {:?}",
        sent.elapsed()
    );
    assert_eq!(died["error"]["code"], -32006, "{died}");
    assert!(
        died["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exit status 3"),
        "{died}"
    );
    let after = caller.call("kid__get").await;
    assert_eq!(
        after["result"]["content"][0]["text"], "0",
        "a new child, old state lost: {after}"
    );
    assert_eq!(spawns(&log), 8);
    let reaped = format!("/proc/{pid}");
    eventually("the dead child to be reaped", T, || async {
        (!Path::new(&reaped).exists()).then_some(())
    })
    .await;
    let node_pid = node.pid().expect("node runs");
    assert_eq!(
        zombie_child_of(node_pid),
        None,
        "no zombie children of the node"
    );
    let status = upstream_status(&base, "kid").await;
    assert_eq!(status["restarts"], 6, "{status}");
    assert!(
        status["last_error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("exit status 3"),
        "{status}"
    );
}

/// C30: a crash-looping child is known by what it wrote on stderr. The fixture writes
/// `FATAL: cannot start (<flag> exists)` and exits 1; the call that tried the start, the
/// back-off refusal (`message` and `data.last_failure`) and `/upstreamz`'s `last_error` all end
/// with that line (before, they said only "exited (exit status 1)").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_childs_stderr_is_in_its_errors_and_in_upstreamz() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let dir = TempDir::new("sb-crash-stderr");
    let flag = dir.path().join("db-missing");
    std::fs::write(&flag, "").unwrap();
    let flag_arg = flag.to_string_lossy();
    let args = [fixture.as_str(), "--crash-while", &flag_arg];
    let kid = Upstream::stdio("kid", &python, &args)
        .set("restart_backoff_ms", 60_000)
        .set("restart_backoff_max_ms", 60_000);
    let started = start_cluster(1, &[kid], ClusterOptions::new());
    let node = started.cluster.node(0);
    let mut client = McpClient::new();
    client.initialize(&node.url(), "2025-11-25").await;
    let caller = Caller {
        client,
        url: node.url(),
        next_id: Cell::new(0),
    };
    let said = format!(
        "upstream `kid` exited (exit status 1); its stderr ended with: FATAL: cannot start ({flag_arg} exists)"
    );
    // The probe failed at start-up; this call's start is retried at once and fails the same way.
    let tried = caller.call("kid__echo").await;
    assert_eq!(tried["error"]["message"], json!(said), "{tried}");
    let refused = caller.call("kid__echo").await;
    let error = &refused["error"];
    assert_eq!(error["data"]["last_failure"], json!(said), "{refused}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("upstream `kid` is not started again yet after 2 failed starts")
            && message.contains(&format!("(last: {said})")),
        "{refused}"
    );
    let status = upstream_status(&node.base_url(), "kid").await;
    assert_eq!(status["last_error"]["message"], json!(said), "{status}");
}

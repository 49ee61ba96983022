//! A stdio upstream (one child per client session) behind three nodes: the child lives on the
//! node that first used it; requests landing on other nodes run there through the bus, with their
//! progress coming back to the client's stream; when that node dies, the next request starts a
//! new child on a live node (state in the old one is lost); DELETE stops the child.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{ClusterOptions, RedisKind};
use switchboard_tests::eventually::eventually;
use switchboard_tests::stdio_children::{child_pid, fixture_children, fixture_owner};
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, Upstream};

const T: Duration = Duration::from_secs(20);

async fn call(client: &McpClient, url: &str, id: u64, tool: &str, args: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    let answer = client.post(url, &body).await.answer(json!(id), T).await;
    assert!(
        answer.response.get("result").is_some(),
        "{tool} on {url}: {}",
        answer.response
    );
    answer.response["result"].clone()
}

/// How many `tools/call` the session's child received before this one (an `info` call with
/// JSON-RPC id `id`, itself a `tools/call`).
async fn calls_received(client: &McpClient, url: &str, id: u64) -> usize {
    let info = call(client, url, id, "info", json!({})).await;
    let received = info["info"]["received"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    received.iter().filter(|m| *m == "tools/call").count() - 1
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_follows_its_owner_node_and_moves_when_it_dies() {
    child_follows_its_owner(RedisKind::Standalone).await;
}

/// The same on Redis Cluster: ownership leases, forwarded calls (node inboxes over sharded
/// pub/sub), cancellation and the takeover after the owner's death.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_follows_its_owner_node_and_moves_when_it_dies_on_redis_cluster() {
    child_follows_its_owner(RedisKind::Cluster).await;
}

async fn child_follows_its_owner(kind: RedisKind) {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let options = ClusterOptions::new().fast_liveness(1500).redis(kind);
    let mut started = start_cluster(3, &[upstream], options);
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&urls[0], "2025-11-25").await;

    // The first use on A starts the child there; B and C reach the same child (shared state).
    assert_eq!(
        text(&call(&client, &urls[0], 1, "increment", json!({})).await),
        "1"
    );
    assert_eq!(
        text(&call(&client, &urls[1], 2, "increment", json!({})).await),
        "2"
    );
    let pid_a = child_pid(&call(&client, &urls[2], 3, "echo", json!({"s": "x"})).await);
    let pid_b = child_pid(&call(&client, &urls[1], 4, "echo", json!({"s": "y"})).await);
    assert_eq!(
        pid_a, pid_b,
        "one child per session, wherever the request lands"
    );

    // Progress of a call forwarded from C to A reaches C's stream, then the result.
    let slow = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.6, "tag": "done"}, "_meta": {"progressToken": "p5"}}});
    let answer = client.post(&urls[2], &slow).await.answer(json!(5), T).await;
    assert_eq!(text(&answer.response["result"]), "done");
    assert!(
        answer.with_method("notifications/progress").len() >= 2,
        "progress relayed: {:?}",
        answer.messages
    );

    // A client's cancellation, sent to a third node, reaches the child with the child's own id,
    // whichever node the call came through (here it was forwarded from B to A).
    for round in 0..3u64 {
        let id = 50 + round;
        let slow = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 3, "tag": "x"}}});
        let before = calls_received(&client, &urls[0], 1000 * id).await;
        let post = client.post(&urls[1], &slow);
        let cancel = async {
            // The call is registered in flight (where a cancellation is routed from) and the
            // child is running it: its count of received `tools/call` went up by one more than
            // the polls themselves added.
            let polls = std::cell::Cell::new(0);
            let (cluster, sid) = (&started.cluster, &sid);
            eventually("the slow call in flight and at the child", T, || {
                let (client, url, poll) = (&client, &urls[0], polls.get() + 1);
                polls.set(poll);
                async move {
                    let seen = calls_received(client, url, 1000 * id + poll).await;
                    let running = cluster.in_flight_node(sid, &json!(id)).is_some();
                    (running && seen > before + poll as usize).then_some(())
                }
            })
            .await;
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
            assert_eq!(client.post(&urls[2], &note).await.status.as_u16(), 202);
        };
        let (reply, ()) = tokio::join!(post, cancel);
        let answer = reply.answer(json!(id), T).await;
        assert_eq!(
            answer.response["error"]["code"], -32004,
            "{}",
            answer.response
        );
    }
    let info = call(&client, &urls[0], 60, "info", json!({})).await;
    let told = info["info"]["cancelled"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(told, 3, "the child heard of every cancellation: {info}");

    // A dies. A request racing the detection gets a clear -32006 naming the upstream (it may
    // have run on the dead node, so it is not retried behind the client's back); once A's
    // heartbeat has lapsed the next request starts a new child on a live node.
    started.cluster.kill9(0);
    let mut id = 100;
    let result = eventually("a request to start a new child", T, || {
        id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "get", "arguments": {}}});
        let (client, url) = (&client, &urls[1]);
        async move {
            let answer = client.post(url, &body).await.answer(json!(id), T).await;
            if let Some(e) = answer.response.get("error") {
                assert_eq!(e["code"], -32006, "only the owner's death shows: {e}");
                assert!(e["message"].as_str().unwrap_or_default().contains("fixture"), "names the upstream: {e}");
                return None;
            }
            Some(answer.response["result"].clone())
        }
    })
    .await;
    assert_eq!(
        text(&result),
        "0",
        "state of the old child is lost: {result}"
    );
    let new_pid = child_pid(&call(&client, &urls[2], 7, "echo", json!({"s": "z"})).await);
    assert_ne!(new_pid, pid_a, "a new child");
    assert_eq!(
        text(&call(&client, &urls[1], 8, "increment", json!({})).await),
        "1"
    );

    // DELETE ends the session everywhere, and the child with it.
    assert_eq!(client.delete(&urls[2]).await.status.as_u16(), 204);
    eventually(
        "the child to be stopped and reaped",
        Duration::from_secs(15),
        || async { (!alive(new_pid)).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_every_child_of_the_node() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let mut started = start_cluster(1, &[upstream], ClusterOptions::new());
    let url = started.cluster.url(0);
    let mut pids = Vec::new();
    for i in 0..3 {
        let mut client = McpClient::new();
        client.initialize(&url, "2025-11-25").await;
        pids.push(child_pid(
            &call(&client, &url, i, "echo", json!({"s": "x"})).await,
        ));
    }
    assert!(pids.iter().all(|p| alive(*p)), "one child per session");
    started.cluster.node(0).terminate();
    let code = started
        .cluster
        .node_mut(0)
        .wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "drained and exited");
    for pid in &pids {
        assert!(!alive(*pid), "child {pid} stopped with its node");
    }
    // Stopped by the drain (stdin closed, then TERM/KILL to its process group), not merely killed
    // with the node's process.
    let log = started.cluster.node(0).log_tail(200);
    let stopped = log
        .lines()
        .filter(|l| l.contains("stopped a stdio child") && !l.contains("session=probe"))
        .count();
    assert_eq!(
        stopped,
        pids.len(),
        "every child stopped by the drain:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_whose_session_vanished_from_redis_is_stopped() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let started = start_cluster(
        1,
        &[upstream],
        ClusterOptions::new().set("cluster.reaper_interval", "300ms"),
    );
    let url = started.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let pid = child_pid(&call(&client, &url, 1, "echo", json!({"s": "x"})).await);
    assert!(alive(pid));
    // The session is lost without DELETE or expiry (as with a Redis restart without persistence).
    started
        .cluster
        .redis()
        .query::<()>(&["FLUSHALL"])
        .expect("FLUSHALL");
    eventually(
        "the orphaned child to be stopped",
        Duration::from_secs(15),
        || async { (!alive(pid)).then_some(()) },
    )
    .await;
}

/// C08, C31: the node owning a session's child stalls (SIGSTOP) past the node TTL, node B takes
/// the session over with a new child; when A wakes (SIGCONT), its heartbeat finds it had lapsed
/// and A stops its old child at once, well before the next sweep (`cluster.reaper_interval` is a
/// minute here): within 5 s the session has exactly one live child, B's, and the old one is gone
/// from the process table (reaped, no zombie). The request B forwarded to A during the stall is
/// handed back when A wakes, starting no child there. Requests through A reach B's child.
/// Before, both children lived on until the session ended, both sending their unsolicited
/// messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_owner_stops_its_child_once_another_node_took_the_session_over() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let options = ClusterOptions::new()
        .fast_liveness(1500)
        .set("cluster.reaper_interval", "60s");
    let started = start_cluster(2, &[upstream], options);
    let urls = started.cluster.urls();
    let (a, b) = (started.cluster.node(0), started.cluster.node(1));
    let (a_pid, b_pid) = (a.pid().expect("a runs"), b.pid().expect("b runs"));
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let old = child_pid(&call(&client, &urls[0], 1, "echo", json!({"s": "x"})).await);
    assert_eq!(fixture_children(a_pid), vec![old], "the child runs on a");

    a.pause();
    let mut id = 10;
    let new = eventually("b to take the session over", T, || {
        id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"s": "y"}}});
        let (client, url) = (&client, &urls[1]);
        async move {
            let answer = client.post(url, &body).await.answer(json!(id), T).await;
            if let Some(e) = answer.response.get("error") {
                assert_eq!(e["code"], -32006, "only the stalled owner shows: {e}");
                return None;
            }
            Some(child_pid(&answer.response["result"]))
        }
    })
    .await;
    assert_ne!(new, old, "a new child on b");
    assert_eq!(fixture_children(b_pid), vec![new]);
    assert!(alive(old), "a's child outlives a's stall so far");

    a.resume();
    let woke = std::time::Instant::now();
    eventually(
        "a to stop its old child, leaving one",
        Duration::from_secs(5),
        || async {
            let gone = !std::path::Path::new(&format!("/proc/{old}")).exists();
            let one = fixture_children(a_pid).is_empty() && fixture_children(b_pid) == vec![new];
            (gone && one).then_some(())
        },
    )
    .await;
    let took = woke.elapsed();
    // The request b forwarded to a during the stall reaches a when it wakes: a hands it back
    // instead of starting a child for a session it no longer owns.
    eventually("a to hand back the forward of the stall", T, || async {
        let log = a.log_tail(500);
        log.contains("a forwarded request moves to its origin")
            .then_some(())
    })
    .await;
    let log = a.log_tail(500);
    assert!(
        log.contains("heartbeat had lapsed")
            && log.contains("another node owns this session's node-bound upstream now (this node"),
        "a says why:\n{log}"
    );
    assert!(fixture_children(a_pid).is_empty(), "no child on a");
    let via_a = child_pid(&call(&client, &urls[0], 90, "echo", json!({"s": "z"})).await);
    assert_eq!(via_a, new, "requests through a reach b's child");
    assert_eq!(fixture_children(b_pid), vec![new], "still one child");
    eprintln!("old child {old} on a gone {took:?} after SIGCONT; b's child {new} is the one");
}

/// C08: a draining owner whose session moved to another node (a request found it stopping)
/// keeps its old child until the call running in it has finished, even though its sweeps
/// (`cluster.reaper_interval` 200 here) see the record naming the new owner: the call answers with
/// its result, not with the child's exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_owner_keeps_its_old_child_for_the_call_running_in_it() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstream = Upstream::stdio("fixture", &python, &[fixture.as_str()]).prefix("");
    let options = ClusterOptions::new().set("cluster.reaper_interval", "200ms");
    let mut started = start_cluster(2, &[upstream], options);
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let sid = client.session_id.clone().expect("session id");
    let old = child_pid(&call(&client, &urls[0], 1, "echo", json!({"s": "x"})).await);
    let slow = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 3, "tag": "finished"}}});
    let running = client.post(&urls[0], &slow).await;
    assert!(running.is_sse(), "the slow call runs");
    let running = tokio::spawn(running.answer(json!(2), T));
    started.cluster.node(0).terminate();
    let new = eventually("the session to move to b", T, || {
        let (client, url) = (&client, &urls[1]);
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"s": "y"}}});
            let answer = client.post(url, &body).await.answer(json!(3), T).await;
            answer.response.get("result").map(child_pid)
        }
    })
    .await;
    assert_ne!(new, old, "a new child on b");
    assert!(fixture_owner(&started, &sid).starts_with("b."));
    let finished = running.await.expect("the slow call's reader").response;
    assert_eq!(
        text(&finished["result"]),
        "finished",
        "the call ran to its end in the old child: {finished}"
    );
    let code = tokio::task::block_in_place(|| started.cluster.node_mut(0).wait_exit(T));
    assert_eq!(code, Some(0), "a drained and exited");
    assert!(!alive(old), "the old child went with its node");
}

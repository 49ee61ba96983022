//! Merged lists in a cluster (case C08): a list never silently shrinks. The nodes serve two
//! upstreams, a stdio server with one child per session (`fx`, node-bound: its child lives on
//! one node, the owner) and the built-in demo server (`demo`).
//!
//! - Rolling SIGTERM restarts of every node, each time of the node that owns the session's child,
//!   under a list every 50 ms (`tools/list`, `resources/list` and `prompts/list` in turn): every
//!   answer lists every entry of both upstreams, and no
//!   request fails (the child moves to a live node within the request that finds its owner
//!   stopping). The same with a legacy HTTP+SSE upstream in place of the stdio one (its
//!   connection moves the same way).
//! - After SIGKILL of the owner: every list is complete or an error naming `fx`; once the dead
//!   node's heartbeat lapsed, a live node runs a new child and lists are complete. The same with
//!   the legacy HTTP+SSE upstream.
//! - A member that refuses connections fails `tools/list` with an error naming it (all of them
//!   when several are down), while calls of the other member work.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::msg;
use switchboard_tests::ports::free_port;
use switchboard_tests::sse_upstream::SseUpstream;
use switchboard_tests::upstreams::{start_cluster, stdio_fixture, ConfiguredCluster, Upstream};

const T: Duration = Duration::from_secs(20);

/// The stdio fixture as `fx` (one child per session) and the demo server as `demo`.
fn fixture_and_demo() -> Vec<Upstream> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    vec![
        Upstream::stdio("fx", &python, &[fixture.as_str()]),
        Upstream::demo("demo"),
    ]
}

/// What one list got: the entries' names (URIs for resources), or the JSON-RPC error (or HTTP
/// status).
#[derive(Debug)]
struct Listed {
    node: usize,
    method: &'static str,
    outcome: Result<Vec<String>, Value>,
}

/// The merged lists the rolling restarts ask in turn (the stdio fixture serves tools and
/// resources, the demo server all three).
const LISTS: [&str; 3] = ["tools/list", "resources/list", "prompts/list"];

async fn list(client: &McpClient, url: &str, id: u64) -> Result<Vec<String>, Value> {
    list_of(client, url, id, "tools/list").await
}

async fn list_of(
    client: &McpClient,
    url: &str,
    id: u64,
    method: &str,
) -> Result<Vec<String>, Value> {
    let (field, key) = match method {
        "resources/list" => ("resources", "uri"),
        "prompts/list" => ("prompts", "name"),
        _ => ("tools", "name"),
    };
    let reply = client.post(url, &msg::bare(id, method)).await;
    if reply.status != 200 {
        return Err(json!({"http_status": reply.status.as_u16()}));
    }
    let response = reply.answer(json!(id), T).await.response;
    if let Some(error) = response.get("error") {
        return Err(error.clone());
    }
    let entries = response["result"][field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {response}"));
    let mut names: Vec<String> = entries
        .iter()
        .map(|t| t[key].as_str().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// The node (process id, `<name>.<suffix>`) that owns the session's `fx` child, from the
/// session record in Redis.
fn owner(cluster: &Cluster, sid: &str) -> Option<String> {
    let key = format!("sb:{{{sid}}}:s");
    let reply: Option<String> = cluster.redis().query(&["HGET", &key, "own"]).ok()?;
    let owners: Value = serde_json::from_str(&reply?).ok()?;
    owners["fx"].as_str().map(str::to_owned)
}

/// The index of the node whose process is `owner` (`b.1f2e` → 1).
fn index_of(cluster: &Cluster, owner: &str) -> usize {
    let name = owner.split('.').next().unwrap_or_default();
    (0..cluster.len())
        .find(|&i| cluster.node(i).id() == name)
        .unwrap_or_else(|| panic!("no node named {name}"))
}

/// What names the session's `fx` resource in an `echo` answer: the stdio fixture's child `pid`,
/// or the legacy SSE fixture's connection id (`structuredContent.connection`).
fn resource_of(response: &Value) -> String {
    let result = &response["result"];
    let pid = result["pid"].as_u64().map(|p| p.to_string());
    let connection = result["structuredContent"]["connection"].as_str();
    pid.or_else(|| connection.map(str::to_owned))
        .unwrap_or_else(|| panic!("no pid or connection in {response}"))
}

/// A list every 50 ms ([`LISTS`] in turn), round robin over the nodes in the rotation (a
/// balancer with readiness checks), every outcome recorded.
struct Lister {
    rotation: Arc<Mutex<Vec<bool>>>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Listed>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Lister {
    /// Starts listing through every node of `urls`.
    fn start(client: McpClient, urls: Vec<String>) -> Lister {
        let rotation = Arc::new(Mutex::new(vec![true; urls.len()]));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(Lister::run(
            client,
            urls,
            rotation.clone(),
            stop.clone(),
            seen.clone(),
        ));
        Lister {
            rotation,
            stop,
            seen,
            task,
        }
    }

    async fn run(
        client: McpClient,
        urls: Vec<String>,
        rotation: Arc<Mutex<Vec<bool>>>,
        stop: Arc<AtomicBool>,
        seen: Arc<Mutex<Vec<Listed>>>,
    ) {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut next, mut id) = (0usize, 1000u64);
        while !stop.load(Ordering::SeqCst) {
            tick.tick().await;
            let ready = rotation.lock().unwrap().clone();
            let Some(node) = (0..urls.len())
                .map(|k| (next + k) % urls.len())
                .find(|&n| ready[n])
            else {
                continue;
            };
            next = node + 1;
            id += 1;
            let method = LISTS[id as usize % LISTS.len()];
            let outcome = list_of(&client, &urls[node], id, method).await;
            seen.lock().unwrap().push(Listed {
                node,
                method,
                outcome,
            });
        }
    }

    /// Takes node `i` out of the rotation, or puts it back.
    fn set_ready(&self, i: usize, ready: bool) {
        self.rotation.lock().unwrap()[i] = ready;
    }

    /// Waits until `more` further lists were answered.
    async fn wait_for(&self, more: usize) {
        let target = self.seen.lock().unwrap().len() + more;
        eventually("more lists answered", T, || async {
            (self.seen.lock().unwrap().len() >= target).then_some(())
        })
        .await;
    }

    /// Stops listing; every outcome.
    async fn finish(self) -> Vec<Listed> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the list loop");
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// One rolling-restart step: node `victim` leaves the rotation, gets SIGTERM while a 1 s
/// `fx__slow` call runs on it (that call finishes there, during the drain: its child lives until
/// then), exits 0, starts again on its port and rejoins the rotation.
async fn restart_with_a_call_running(
    cluster: &mut Cluster,
    client: &McpClient,
    lister: &Lister,
    victim: usize,
    round: u64,
) {
    lister.set_ready(victim, false);
    let tag = format!("round {round}");
    let id = 500 + round;
    let slow = msg::call(id, "fx__slow", json!({"seconds": 1.0, "tag": tag}));
    let running = client.post(&cluster.url(victim), &slow).await;
    assert!(
        running.is_sse(),
        "the slow call runs (SSE after http.sse_after)"
    );
    let running = tokio::spawn(running.answer(json!(id), T));
    cluster.node(victim).terminate();
    let code = tokio::task::block_in_place(|| {
        let code = cluster.node_mut(victim).wait_exit(T);
        cluster.restart(victim);
        code
    });
    assert_eq!(code, Some(0), "node {victim} drained and exited");
    let finished = running.await.expect("the slow call's reader").response;
    assert_eq!(
        msg::result_text(&finished),
        tag,
        "finished during the drain: {finished}"
    );
    lister.set_ready(victim, true);
}

/// How many requests the nodes ran elsewhere because the owner said it was stopping (their logs).
fn handed_back(cluster: &Cluster) -> usize {
    (0..cluster.len())
        .map(|i| {
            let log = cluster.node(i).log_tail(100_000);
            log.matches("its owner node is stopping").count()
        })
        .sum()
}

/// What [`rolling_restarts_under_lists`] leaves: the cluster, the client and its session, the
/// owners of the session's `fx` resource in turn.
struct Rolled {
    started: ConfiguredCluster,
    client: McpClient,
    owners: Vec<String>,
}

/// Rolling SIGTERM restarts of the three nodes serving `upstreams` (a node-bound `fx` among
/// them), each time of the node owning the session's `fx` resource (then of the one not
/// restarted yet), under a `tools/list` every 50 ms: asserts that every answer lists every tool,
/// exactly, that none fails, that the resource moved with two restarts or more, and that a
/// stopping owner handed requests back on each move.
async fn rolling_restarts_under_lists(upstreams: &[Upstream]) -> Rolled {
    let mut started = start_cluster(3, upstreams, ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new_connections();
    client.initialize(&urls[0], "2025-11-25").await;
    let sid = client.session_id.clone().expect("session id");
    let first = client
        .call_tool(&urls[0], 1, "fx__echo", json!({"s": "x"}))
        .await;
    let first = first.answer(json!(1), T).await.response;
    assert!(first.get("result").is_some(), "{first}");
    let expected = list(&client, &urls[1], 2).await.expect("a first list");
    let fx = expected.iter().filter(|n| n.starts_with("fx__")).count();
    let demo = expected.iter().filter(|n| n.starts_with("demo__")).count();
    assert!(
        fx > 0 && demo > 0 && fx + demo == expected.len(),
        "{expected:?}"
    );
    let mut wanted = std::collections::HashMap::new();
    for (k, method) in LISTS.into_iter().enumerate() {
        let entries = list_of(&client, &urls[1], 3 + k as u64, method).await;
        wanted.insert(method, entries.expect("a first list"));
    }
    // The stdio fixture lists fx://one beside demo://greeting (the legacy SSE fixture lists
    // none, but is asked every time all the same).
    let resources = &wanted["resources/list"];
    assert!(
        resources.iter().any(|u| u == "demo://greeting"),
        "{resources:?}"
    );
    let mut owners = vec![owner(&started.cluster, &sid).expect("an owner")];
    assert!(owners[0].starts_with("a."), "first used on a: {owners:?}");

    let lister = Lister::start(client.clone(), urls.clone());
    lister.wait_for(5).await;
    let mut restarted = [false; 3];
    for round in 0..3 {
        let current = owner(&started.cluster, &sid).expect("an owner");
        let owning = index_of(&started.cluster, &current);
        let victim = match restarted[owning] {
            true => (0..3).find(|&i| !restarted[i]).expect("a node left"),
            false => owning,
        };
        restart_with_a_call_running(&mut started.cluster, &client, &lister, victim, round).await;
        restarted[victim] = true;
        lister.wait_for(10).await;
        let now = owner(&started.cluster, &sid).expect("an owner");
        if owners.last() != Some(&now) {
            owners.push(now);
        }
    }
    let seen = lister.finish().await;

    let bad: Vec<&Listed> = seen
        .iter()
        .filter(|l| l.outcome.as_ref() != Ok(&wanted[l.method]))
        .collect();
    let (total, tools) = (seen.len(), expected.len());
    assert!(
        bad.is_empty(),
        "{} of {total} lists were not complete ({wanted:?}): {bad:?}",
        bad.len()
    );
    for method in LISTS {
        assert!(
            seen.iter().filter(|l| l.method == method).count() >= 10,
            "{method} was asked"
        );
    }
    assert!(
        owners.len() >= 3,
        "the resource moved with two restarts or more: {owners:?}"
    );
    let handed_back = handed_back(&started.cluster);
    assert!(
        handed_back >= 2,
        "a stopping owner handed requests back on each move: {handed_back}"
    );
    let per_node: Vec<usize> = (0..3)
        .map(|n| seen.iter().filter(|l| l.node == n).count())
        .collect();
    eprintln!(
        "{total} lists (per node {per_node:?}), all complete ({tools} tools); owners of the \
         resource in turn: {owners:?}; requests handed back by a stopping owner: {handed_back}"
    );
    Rolled {
        started,
        client,
        owners,
    }
}

/// C08: rolling SIGTERM restarts, each time of the node owning the session's stdio child (then of
/// the one not restarted yet), under a `tools/list` every 50 ms: every answer lists every tool of
/// both upstreams, exactly, and none fails. A call running on the stopping node finishes there;
/// meanwhile the lists forwarded to it are handed back and move the child to a live node. Before,
/// lists after a restart left out all of `fx`'s tools (4 of 50 here; 38 of 104 in the case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_sigterm_restarts_never_shorten_a_list() {
    rolling_restarts_under_lists(&fixture_and_demo()).await;
}

/// C08 with a legacy HTTP+SSE upstream (`kind = "sse"`, MCP 2024-11-05: one SSE connection per
/// client session, held by its owner node): the same rolling SIGTERM restarts under a
/// `tools/list` every 50 ms; every answer is complete and none fails. Each move opens a new
/// connection on the new owner, initialized with the client's own stored `initialize`
/// (`clientInfo` "replay"), and the connections of the nodes that exited are closed: the session
/// has exactly one connection at the end, the one its requests reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_sigterm_restarts_never_shorten_a_list_with_a_legacy_sse_upstream() {
    let server = SseUpstream::start().await;
    let upstreams = [Upstream::sse("fx", &server.url()), Upstream::demo("demo")];
    let rolled = rolling_restarts_under_lists(&upstreams).await;
    let url = rolled.started.cluster.url(1);
    let whoami = rolled
        .client
        .call_tool(&url, 900, "fx__whoami", json!({}))
        .await;
    let whoami = whoami.answer(json!(900), T).await.response;
    let info: Value = serde_json::from_str(&msg::result_text(&whoami)).expect("clientInfo");
    assert_eq!(
        info["name"], "replay",
        "the client's own initialize: {whoami}"
    );
    let replayed = server
        .initializes()
        .iter()
        .filter(|p| p["clientInfo"]["name"] == "replay")
        .count();
    assert!(
        replayed >= rolled.owners.len(),
        "one initialize with the client's params per owner ({:?}): {replayed}",
        rolled.owners
    );
    eventually("one connection left, the owner's", T, || async {
        (server.open_connections() == 1).then_some(())
    })
    .await;
}

/// C08: after SIGKILL of the node owning the session's stdio child, every list through the other
/// nodes is complete or an error naming `fx`, never short; once the dead node's heartbeat lapsed
/// (`cluster.node_ttl`), a live node runs a new child and lists are complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_of_the_owner_lists_are_complete_or_name_the_upstream() {
    after_sigkill_of_the_owner(&fixture_and_demo()).await;
}

/// C08 with a legacy HTTP+SSE upstream: after SIGKILL of the node holding the session's
/// connection, every list is complete or an error naming `fx`; once the dead node's heartbeat
/// lapsed a live node opens a new connection and lists are complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_of_the_owner_lists_are_complete_or_name_the_legacy_sse_upstream() {
    let server = SseUpstream::start().await;
    let upstreams = [Upstream::sse("fx", &server.url()), Upstream::demo("demo")];
    let _cluster = after_sigkill_of_the_owner(&upstreams).await;
    eventually("one connection left, the new owner's", T, || async {
        (server.open_connections() == 1).then_some(())
    })
    .await;
}

/// SIGKILL of the node owning the session's `fx` resource among three nodes serving
/// `upstreams`, then lists through the other two until three complete ones after the heartbeat
/// lapsed: each is complete or an error naming `fx`; the resource is new, on a live node. Returns
/// the cluster, still running.
async fn after_sigkill_of_the_owner(upstreams: &[Upstream]) -> ConfiguredCluster {
    let ttl = Duration::from_millis(1500);
    let mut started = start_cluster(
        3,
        upstreams,
        ClusterOptions::new().fast_liveness(ttl.as_millis() as u64),
    );
    let urls = started.cluster.urls();
    let mut client = McpClient::new_connections();
    client.initialize(&urls[0], "2025-11-25").await;
    let sid = client.session_id.clone().expect("session id");
    let echo = |id: u64, url: String| {
        let client = client.clone();
        async move {
            let reply = client
                .call_tool(&url, id, "fx__echo", json!({"s": "x"}))
                .await;
            reply.answer(json!(id), T).await.response
        }
    };
    let old = resource_of(&echo(1, urls[0].clone()).await);
    let expected = list(&client, &urls[1], 2).await.expect("a first list");
    assert!(owner(&started.cluster, &sid).is_some_and(|o| o.starts_with("a.")));

    started.cluster.kill9(0);
    let killed = Instant::now();
    let (complete, errors, id) = (Cell::new(0), Cell::new(0), Cell::new(10u64));
    let (after_lapse, first) = (Cell::new(0), Cell::new(None));
    eventually("three complete lists after the heartbeat lapsed", T, || {
        id.set(id.get() + 1);
        let n = id.get();
        let (client, url, expected) = (&client, &urls[1 + (n as usize % 2)], &expected);
        let (complete, errors, after_lapse, first) = (&complete, &errors, &after_lapse, &first);
        async move {
            let outcome = list(client, url, n).await;
            if first.get().is_none() {
                first.set(Some(killed.elapsed()));
            }
            match outcome {
                Ok(names) => {
                    assert_eq!(&names, expected, "a list is complete or an error");
                    complete.set(complete.get() + 1);
                    if killed.elapsed() > ttl {
                        after_lapse.set(after_lapse.get() + 1);
                    }
                    (after_lapse.get() >= 3).then_some(())
                }
                Err(e) => {
                    assert_eq!(e["data"]["upstream"], "fx", "the error names fx: {e}");
                    assert!(
                        e["message"].as_str().unwrap_or_default().contains("`fx`"),
                        "{e}"
                    );
                    errors.set(errors.get() + 1);
                    None
                }
            }
        }
    })
    .await;
    let first_took = first.get().expect("a first answer");
    let new_owner = owner(&started.cluster, &sid).expect("an owner");
    assert!(!new_owner.starts_with("a."), "moved off a: {new_owner}");
    let new = resource_of(&echo(99, urls[2].clone()).await);
    assert_ne!(new, old, "a new child (or connection) on a live node");
    eprintln!(
        "after SIGKILL: {} complete lists, {} errors naming fx; the first took {first_took:?}; owner now {new_owner}",
        complete.get(),
        errors.get()
    );
    started
}

/// C08: a member that refuses connections fails `tools/list` with -32006 naming it (`data.upstream`,
/// and every failed member in `data.upstreams`), at once on every list (no cool-down that would
/// hide it or delay its return), while calls of the other member work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_is_down_fails_the_list_naming_it_and_calls_of_others_work() {
    let (one, two) = (free_port(), free_port());
    let upstreams = [
        Upstream::http("down1", &format!("http://127.0.0.1:{one}/mcp")),
        Upstream::demo("demo"),
        Upstream::http("down2", &format!("http://127.0.0.1:{two}/mcp")),
    ];
    let started = start_cluster(1, &upstreams, ClusterOptions::new());
    let url = started.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    for id in 1..=3u64 {
        let began = Instant::now();
        let error = list(&client, &url, id)
            .await
            .expect_err("an incomplete list fails");
        assert!(
            began.elapsed() < Duration::from_secs(3),
            "a refused connection fails fast: {:?}",
            began.elapsed()
        );
        assert_eq!(error["code"], -32006, "{error}");
        assert_eq!(error["data"]["upstream"], "down1", "{error}");
        assert_eq!(
            error["data"]["upstreams"],
            json!(["down1", "down2"]),
            "{error}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("`down1`") && message.contains("`down2`"),
            "{message}"
        );
        assert!(!message.contains("`demo`"), "{message}");
    }
    let call = client
        .call_tool(&url, 9, "demo__echo", json!({"text": "still here"}))
        .await
        .answer(json!(9), T)
        .await;
    assert_eq!(
        msg::result_text(&call.response),
        "still here",
        "{}",
        call.response
    );
}

/// Case C43: a member whose `nextCursor` never advances (the stdio fixture's `--stuck-pages`)
/// no longer sends the client round for ever: walking `tools/list` across three nodes ends, after
/// no more pages than the member really has, with -32603 naming it (`data.upstream`); the walk
/// before the fix went on for as long as the client followed the cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c43_a_member_whose_cursor_never_advances_ends_the_walk_naming_it() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let fixture = stdio_fixture();
    let upstreams = [
        Upstream::stdio("fx", &python, &[fixture.as_str(), "--stuck-pages"]),
        Upstream::demo("demo"),
    ];
    let started = start_cluster(3, &upstreams, ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let mut params = json!({});
    let mut pages = 0;
    let error = loop {
        assert!(pages < 10, "still walking after {pages} pages");
        let url = &urls[pages % urls.len()];
        let request = json!({"jsonrpc": "2.0", "id": 100 + pages, "method": "tools/list",
            "params": params});
        let reply = client
            .post(url, &request)
            .await
            .answer(json!(100 + pages), T)
            .await;
        if let Some(error) = reply.response.get("error") {
            break error.clone();
        }
        pages += 1;
        match reply.response["result"].get("nextCursor") {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => panic!("the walk ended without an error: {}", reply.response),
        }
    };
    assert_eq!(pages, 1, "one page, then the repeated cursor is refused");
    assert_eq!(error["code"], -32603, "{error}");
    assert_eq!(error["data"]["upstream"], "fx", "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("`fx`") && message.contains("circle"),
        "{message}"
    );
}

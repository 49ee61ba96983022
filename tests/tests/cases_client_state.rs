//! C41 (issue 34): what a client set up in an upstream session (resource subscriptions, the log
//! level) survives the upstream session being made again, on three nodes sharing one Redis.
//!
//! Upstreams `h` (the `subs` fixture over Streamable HTTP, resource `fx://h/1`) and `s` (the same
//! fixture over stdio, one child per session, resource `fx://s/1`); the client's GET stream is on
//! node B. After (a) a restart of the HTTP fixture, (b) `kill -9` of the session's stdio child,
//! (c) SIGKILL of the node owning that child, a `touch` of the subscribed URI delivers exactly
//! one `notifications/resources/updated` to the GET stream within 2 s of the first request that
//! made the new upstream session, and the debug log the `touch` writes (after
//! `logging/setLevel debug` before the restart) still reaches the client. After
//! `resources/unsubscribe` and a restart, a `touch` delivers none. Nothing is replayed into the
//! wrong upstream (that one would refuse it, and the client would be told).

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::{Answer, McpClient};
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::eventually::{eventually, eventually_sync};
use switchboard_tests::ports::free_port;
use switchboard_tests::sse::SseStream;
use switchboard_tests::upstreams::{start_cluster, ConfiguredCluster, Upstream};

const T: Duration = Duration::from_secs(15);
/// How long after the call that made the new upstream session the update must have arrived.
const WINDOW: Duration = Duration::from_secs(2);

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn fixture() -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    dir.join("python/subs_server.py")
        .to_string_lossy()
        .into_owned()
}

/// The `subs` fixture over HTTP on a port of its own; killed when dropped.
struct HttpFixture {
    port: u16,
    child: Child,
}

impl HttpFixture {
    fn start(port: u16) -> HttpFixture {
        let child = Command::new(python())
            .args([fixture().as_str(), "--http", &port.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .expect("start the subs fixture");
        eventually_sync("the subs fixture to listen", T, || {
            TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
        });
        HttpFixture { port, child }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Kills it (SIGKILL) and starts it again on the same port: every session is forgotten.
    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = HttpFixture::start(self.port);
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three nodes, upstreams `h` (HTTP at `http`) and `s` (stdio), fast liveness.
fn cluster(http: &HttpFixture) -> ConfiguredCluster {
    let (python, fixture) = (python(), fixture());
    let upstreams = [
        Upstream::http("h", &http.url()),
        Upstream::stdio("s", &python, &[fixture.as_str(), "--stdio"]),
    ];
    start_cluster(3, &upstreams, ClusterOptions::new().fast_liveness(1500))
}

async fn request(client: &McpClient, url: &str, id: u64, method: &str, params: Value) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    client.post(url, &body).await.answer(json!(id), T).await
}

async fn ok(client: &McpClient, url: &str, id: u64, method: &str, params: Value) -> Answer {
    let answer = request(client, url, id, method, params).await;
    assert!(
        answer.response.get("result").is_some(),
        "{method} on {url}: {}",
        answer.response
    );
    answer
}

/// `<prefix>__touch {uri}` through `url`, until it succeeds: the call that finds the upstream
/// session (or child, or owner node) gone may fail with -32006 by design, and is sent again.
/// Returns the successful answer and when the first of these calls was sent.
async fn touch(client: &McpClient, url: &str, id: &mut u64, prefix: &str, uri: &str) -> Answer {
    let tool = format!("{prefix}__touch");
    eventually("a touch to succeed", T, || {
        *id += 1;
        let params = json!({"name": tool, "arguments": {"uri": uri}});
        let id = *id;
        async move {
            let answer = request(client, url, id, "tools/call", params).await;
            match answer.response.get("error") {
                Some(e) => {
                    assert_eq!(e["code"], -32006, "only the loss shows: {e}");
                    None
                }
                None => Some(answer),
            }
        }
    })
    .await
}

/// What reached the client for one `touch` of `uri`: the updates and debug logs on the GET stream
/// within [`WINDOW`] after `since`, plus the debug logs on the call's own stream.
#[derive(Debug, Default)]
struct Seen {
    updates: usize,
    debug_logs: usize,
    /// `notifications/message` of logger `switchboard` (state not restored).
    told: Vec<Value>,
}

async fn seen(stream: &mut SseStream, answer: &Answer, uri: &str, since: Instant) -> Seen {
    let mut seen = Seen::default();
    let touched = format!("touched {uri}");
    let count = |m: &Value, seen: &mut Seen| {
        if m["method"] == "notifications/resources/updated" && m["params"]["uri"] == uri {
            seen.updates += 1;
        }
        if m["method"] == "notifications/message" {
            if m["params"]["level"] == "debug" && m["params"]["data"] == touched.as_str() {
                seen.debug_logs += 1;
            }
            if m["params"]["logger"] == "switchboard" {
                seen.told.push(m.clone());
            }
        }
    };
    for m in &answer.messages {
        count(m, &mut seen);
    }
    let deadline = since + WINDOW;
    while let Some((_, m)) = stream
        .next_message(deadline.saturating_duration_since(Instant::now()))
        .await
    {
        count(&m, &mut seen);
    }
    seen
}

/// An upstream's tool prefix and the URI subscribed on it.
type Target = (&'static str, &'static str);
/// The HTTP upstream's.
const H: Target = ("h", "fx://h/1");
/// The stdio upstream's.
const S: Target = ("s", "fx://s/1");

/// The client's session: its client, its GET stream and the next request id of its touches.
struct Session {
    client: McpClient,
    stream: SseStream,
    id: u64,
}

impl Session {
    /// Touches `target`'s URI through `url` (again after a -32006) and checks what reached the
    /// client: `updates` updates, one debug log, and no notice of state not restored.
    async fn check(&mut self, url: &str, target: Target, updates: usize, what: &str) {
        let (prefix, uri) = target;
        let (client, stream, id) = (&self.client, &mut self.stream, &mut self.id);
        let since = Instant::now();
        let answer = touch(client, url, id, prefix, uri).await;
        let seen = seen(stream, &answer, uri, since).await;
        assert_eq!(
            seen.updates, updates,
            "{what}: notifications/resources/updated of {uri} within {WINDOW:?} ({seen:?}; {})",
            answer.response
        );
        assert_eq!(
            seen.debug_logs, 1,
            "{what}: the debug log of the touch ({seen:?})"
        );
        assert!(
            seen.told.is_empty(),
            "{what}: nothing failed to be restored: {seen:?}"
        );
    }
}

/// The session's client, its GET stream on node B, log level debug (set through C) and both
/// URIs subscribed (through A), each routed to the upstream that lists it; and its id.
async fn set_up(urls: &[String]) -> (Session, String) {
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&urls[0], "2025-11-25").await;
    let stream = client.get_stream(&urls[1], None).await.sse();
    let set_up = [
        (2, "logging/setLevel", json!({"level": "debug"})),
        (0, "resources/subscribe", json!({"uri": H.1})),
        (0, "resources/subscribe", json!({"uri": S.1})),
    ];
    for (id, (node, method, params)) in (1..).zip(set_up) {
        ok(&client, &urls[node], id, method, params).await;
    }
    let session = Session {
        client,
        stream,
        id: 100,
    };
    (session, sid)
}

/// (a): an HTTP upstream restart, then unsubscribe and another restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_and_log_level_survive_an_http_upstream_restart() {
    let mut http = HttpFixture::start(free_port());
    let started = cluster(&http);
    let urls = started.cluster.urls();
    let (mut s, _) = set_up(&urls).await;
    s.check(&urls[0], H, 1, "baseline").await;

    http.restart();
    s.check(&urls[2], H, 1, "after the restart").await;
    // The stdio upstream was not touched by the replay for `h`, and still works.
    s.check(&urls[1], S, 1, "s unaffected").await;

    let uri = json!({"uri": H.1});
    ok(&s.client, &urls[1], 4, "resources/unsubscribe", uri).await;
    http.restart();
    s.check(&urls[0], H, 0, "after unsubscribe and a restart")
        .await;
}

/// The pid of the session's stdio child (its `info` tool).
async fn child_pid(client: &McpClient, url: &str, id: u64) -> u64 {
    let params = json!({"name": "s__info", "arguments": {}});
    let answer = ok(client, url, id, "tools/call", params).await;
    answer.response["result"]["structuredContent"]["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no pid: {}", answer.response))
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// `kill -9` of the process `pid`, then waits until it is gone (reaped by its node).
async fn kill9(pid: u64) {
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid}");
    eventually("the child to be gone", T, || async {
        (!alive(pid)).then_some(())
    })
    .await;
}

/// The index of the node the session record names as the owner of upstream `s`'s child.
fn owner_index(started: &ConfiguredCluster, sid: &str) -> usize {
    let key = format!("sb:{{{sid}}}:s");
    let own: Option<String> = started
        .cluster
        .redis()
        .query(&["HGET", &key, "own"])
        .expect("read the session record");
    let owners: Value = serde_json::from_str(&own.unwrap_or_default()).unwrap_or_default();
    // The owner is the node's process: `<node id>.<process tag>`.
    let node = owners["s"].as_str().unwrap_or_default();
    let node = node.split('.').next().unwrap_or_default();
    (0..3)
        .find(|&i| started.cluster.node(i).id() == node)
        .unwrap_or_else(|| panic!("no node owns the child: {owners}"))
}

/// (b) and (c): `kill -9` of the stdio child, SIGKILL of the node owning it, then unsubscribe
/// and another kill of the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_and_log_level_survive_a_stdio_child_and_its_owner_node_dying() {
    let http = HttpFixture::start(free_port());
    let mut started = cluster(&http);
    let urls = started.cluster.urls();
    let (mut s, sid) = set_up(&urls).await;
    s.check(&urls[0], S, 1, "baseline").await;

    // (b)
    kill9(child_pid(&s.client, &urls[2], 10).await).await;
    s.check(&urls[1], S, 1, "after kill -9 of the child").await;

    // (c): the owner dies; the next request starts a child on a live node.
    let owner = owner_index(&started, &sid);
    assert_ne!(owner, 1, "the GET stream's node is not the one killed here");
    started.cluster.kill9(owner);
    let other = (0..3).find(|&i| i != owner).unwrap();
    s.check(&urls[other], S, 1, "after the owner node died")
        .await;

    // Unsubscribed on any node: not replayed.
    let uri = json!({"uri": S.1});
    ok(&s.client, &urls[1], 5, "resources/unsubscribe", uri).await;
    kill9(child_pid(&s.client, &urls[other], 11).await).await;
    s.check(&urls[other], S, 0, "after unsubscribe and kill -9")
        .await;
}

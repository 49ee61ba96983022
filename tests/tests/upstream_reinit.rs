//! An HTTP upstream that restarts on the same address, behind three nodes: the upstream's own GET
//! stream comes back at once on the new upstream session (C06), and a `stateless = true`
//! upstream is re-initialized and the request retried transparently.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::counter::Replica;
use switchboard_tests::eventually::eventually;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(20);

/// One replica on 127.0.0.1 and a free port.
fn replica() -> Replica {
    Replica::start(SocketAddr::from(([127, 0, 0, 1], 0)), "r0")
}

/// `tools/call` of `name` through `url`: its response object.
async fn call(client: &McpClient, url: &str, id: u64, name: &str) -> Value {
    let reply = client.call_tool(url, id, name, json!({})).await;
    reply.answer(json!(id), T).await.response
}

/// The count a successful `increment`/`get` answered.
fn count(response: &Value) -> u64 {
    response["result"]["structuredContent"]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count in {response}"))
}

fn note(seq: u64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "logger": "counter", "data": {"seq": seq}}})
}

/// Reads `stream` until the notification `seq` arrives (at most `limit`).
async fn wait_note(stream: &mut switchboard_tests::sse::SseStream, seq: u64, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some((_, msg)) = stream.next_message(left).await else {
            panic!("notification {seq} did not reach the client's GET stream within {limit:?}");
        };
        if msg["params"]["data"]["seq"] == seq {
            return;
        }
    }
}

/// C06: after the upstream restarts, the call that finds its session gone re-initializes it (here
/// through node C, while node A holds the upstream's GET stream); the upstream's GET stream of
/// the new upstream session is open again within about a second, and a notification the
/// upstream sends 1 s after the re-initialization reaches the client's standalone GET stream on
/// node B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_get_stream_is_reopened_right_after_a_reinitialize() {
    let mut replica = replica();
    let upstream = Upstream::http("counter", &replica.url()).prefix("");
    let started = start_cluster(3, &[upstream], ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let mut stream = client.get_stream(&urls[1], None).await.sse();
    assert_eq!(count(&call(&client, &urls[0], 2, "increment").await), 1);
    let state = replica.state();
    eventually("the upstream's GET stream to open", T, || async {
        (state.open_streams() == 1).then_some(())
    })
    .await;
    assert_eq!(replica.notify(&note(1)), 1);
    wait_note(&mut stream, 1, T).await;

    replica.start_again();
    // The first call after the restart finds the session gone and re-initializes it, whatever
    // it answers (the loss policy's subject, tested elsewhere).
    let _ = call(&client, &urls[2], 3, "increment").await;
    let reinitialized = Instant::now();
    let state = replica.state();
    eventually(
        "the upstream's GET stream to reopen on the new session",
        Duration::from_millis(1500),
        || async { (state.open_streams() == 1).then_some(()) },
    )
    .await;
    let reopened = state.streams_opened()[0].1.duration_since(reinitialized);
    // The scenario: the upstream speaks 1 s after the re-initialization.
    tokio::time::sleep_until((reinitialized + Duration::from_secs(1)).into()).await;
    assert_eq!(replica.notify(&note(2)), 1, "one GET stream open upstream");
    wait_note(&mut stream, 2, Duration::from_secs(5)).await;
    eprintln!(
        "GET stream reopened {} ms after the re-initializing call answered",
        reopened.as_millis()
    );
    // Still exactly one listener cluster-wide.
    assert_eq!(state.open_streams(), 1);
}

/// A `stateless = true` upstream keeps nothing per session: after a restart the call that finds
/// its session gone is re-initialized and retried once, transparently (the count starts again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_upstream_is_reinitialized_and_the_request_retried_transparently() {
    let mut replica = replica();
    let upstream = Upstream::http("counter", &replica.url())
        .prefix("")
        .set("stateless", true);
    let started = start_cluster(2, &[upstream], ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    assert_eq!(count(&call(&client, &urls[0], 2, "increment").await), 1);
    assert_eq!(count(&call(&client, &urls[1], 3, "increment").await), 2);
    replica.start_again();
    let after = call(&client, &urls[1], 4, "increment").await;
    assert_eq!(
        count(&after),
        1,
        "retried in a new upstream session: {after}"
    );
    assert_eq!(count(&call(&client, &urls[0], 5, "get").await), 1);
    let inits = replica
        .state()
        .seen()
        .into_iter()
        .filter(|s| s.method == "initialize")
        .count();
    assert_eq!(inits, 1, "one re-initialization");
}

/// C06 with an upstream slow to answer its GET (300 ms): the call that re-initializes the
/// upstream session answers only once the upstream answered the new session's GET, so a
/// notification the upstream sends the moment that call has answered is on an open stream and
/// reaches the client. (The call used to answer first: the notification found no stream open
/// and was lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reinitializing_call_answers_after_the_new_get_stream_is_open() {
    let mut replica = replica();
    let upstream = Upstream::http("counter", &replica.url()).prefix("");
    let started = start_cluster(3, &[upstream], ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let mut stream = client.get_stream(&urls[1], None).await.sse();
    assert_eq!(count(&call(&client, &urls[0], 2, "increment").await), 1);
    let state = replica.state();
    eventually("the upstream's GET stream to open", T, || async {
        (state.open_streams() == 1).then_some(())
    })
    .await;

    replica.start_again();
    replica.state().set_get_delay(Duration::from_millis(300));
    let lost = call(&client, &urls[2], 3, "increment").await;
    assert_eq!(
        lost["error"]["data"]["reason"], "upstream_session_lost",
        "{lost}"
    );
    // At once, as the scenario: the upstream speaks right after the re-initializing call.
    assert_eq!(
        replica.notify(&note(7)),
        1,
        "the new session's GET stream is open when the call answers"
    );
    wait_note(&mut stream, 7, Duration::from_secs(5)).await;
}

/// Two requests on two nodes (one of them the holder of the upstream's GET stream) find the
/// upstream session lost at the same moment (the upstream restarted) and both initialize a new
/// one: one wins, the other uses the winner's. When both have answered, exactly one GET stream
/// of the new session is open at the upstream, and a notification reaches the client once.
/// (Both used to listen: the holder answered "mine" from its own view of the lease without
/// asking the store, the other claimed it there.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reinitializes_on_two_nodes_leave_one_get_stream() {
    let mut replica = replica();
    let upstream = Upstream::http("counter", &replica.url()).prefix("");
    let started = start_cluster(3, &[upstream], ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let mut stream = client.get_stream(&urls[2], None).await.sse();
    // Node B handles the first call and takes the upstream's GET stream.
    assert_eq!(count(&call(&client, &urls[1], 2, "increment").await), 1);
    let state = replica.state();
    eventually("the upstream's GET stream to open", T, || async {
        (state.open_streams() == 1).then_some(())
    })
    .await;

    replica.start_again();
    let (a, b) = tokio::join!(
        call(&client, &urls[0], 3, "increment"),
        call(&client, &urls[1], 4, "increment")
    );
    for answer in [&a, &b] {
        assert!(
            answer.get("error").is_some() || answer.get("result").is_some(),
            "{answer}"
        );
    }
    let state = replica.state();
    // Each call answered after the GET it started was answered: every stream is open now.
    assert_eq!(state.open_streams(), 1, "after {a} and {b}");
    assert_eq!(replica.notify(&note(9)), 1);
    wait_note(&mut stream, 9, Duration::from_secs(5)).await;
}

/// The initializes one replica has seen.
fn initializes(replica: &Replica) -> usize {
    replica
        .state()
        .seen()
        .iter()
        .filter(|s| s.method == "initialize")
        .count()
}

/// C08 towards the upstream: something in front of it (an ingress without a route for a moment)
/// answers one call `404 page not found` as plain text, with no JSON-RPC error. That is not the
/// server forgetting the session: the call is sent again 250 ms later and answers in the same
/// upstream session, with either `on_upstream_loss`; the session is neither re-initialized nor
/// ended. A 404 that is there again on the second try is a loss (here: ended). (The first 404
/// used to be taken for a lost session at once: the state was destroyed, or the client session
/// ended.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_text_404_in_front_of_the_upstream_is_confirmed_before_the_session_is_lost() {
    let (a, b) = (replica(), replica());
    let upstreams = [
        Upstream::http("a", &a.url()),
        Upstream::http("b", &b.url()).set("on_upstream_loss", "\"end_session\""),
    ];
    let started = start_cluster(2, &upstreams, ClusterOptions::new());
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let mut id = 1;
    for name in ["a", "b"] {
        let replica = if name == "a" { &a } else { &b };
        let tool = format!("{name}__increment");
        for n in 1..=2 {
            id += 1;
            assert_eq!(count(&call(&client, &urls[1], id, &tool).await), n);
        }
        let inits = initializes(replica);
        replica.state().plain_404_next(1);
        id += 1;
        let through = call(&client, &urls[0], id, &tool).await;
        assert_eq!(count(&through), 3, "{name}: the same upstream session");
        id += 1;
        assert_eq!(
            count(&call(&client, &urls[1], id, &tool).await),
            4,
            "{name}"
        );
        assert_eq!(initializes(replica), inits, "{name}: not initialized again");
    }
    b.state().plain_404_next(2);
    let lost = call(&client, &urls[0], 99, "b__increment").await;
    assert_eq!(
        lost["error"]["data"]["reason"], "upstream_session_lost",
        "{lost}"
    );
    let message = lost["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("answered HTTP 404 (with no JSON-RPC error in the body)"),
        "{message}"
    );
}

//! C02: a stateful HTTP upstream with several replicas that share nothing (the `counter`
//! fixture), behind three nodes. Every request of one upstream session must reach the replica
//! that created it, whichever node sends it, and when that replica is gone the session's state
//! is never split silently over two replicas.
//!
//! Two ways to have replicas: one name resolving to three addresses (replicas on 127.0.0.2,
//! 127.0.0.3 and 127.0.0.4, the same port, answered by a private dnsmasq the nodes are pointed
//! at with `nameservers`), and three replicas behind one HAProxy address (cookie affinity, or
//! plain round robin).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use switchboard_tests::balancer::{haproxy_binary, Balancer, BalancerOptions};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::counter::{replicas_on_one_port, Replica};
use switchboard_tests::dns::{dnsmasq_binary, Dns};
use switchboard_tests::eventually::eventually;
use switchboard_tests::expect::session_gone_everywhere;
use switchboard_tests::metrics::{counter, upstreamz};
use switchboard_tests::peers::available_or_skip;
use switchboard_tests::upstreams::{start_cluster, ConfiguredCluster, Upstream};

const T: Duration = Duration::from_secs(20);
const NAME: &str = "counter.test";

/// `tools/call` of `name` through `url`: its response object.
async fn call(client: &McpClient, url: &str, id: u64, name: &str) -> Value {
    let reply = client.call_tool(url, id, name, json!({})).await;
    reply.answer(json!(id), T).await.response
}

/// The count and the replica of a successful `increment`/`get`.
fn counted(response: &Value) -> (u64, String) {
    let out = &response["result"]["structuredContent"];
    match (out["count"].as_u64(), out["replica"].as_str()) {
        (Some(n), Some(r)) => (n, r.to_owned()),
        _ => panic!("not a counter answer: {response}"),
    }
}

/// The JSON-RPC error of `response` (panics when it is a result).
fn error(response: &Value) -> &Value {
    response
        .get("error")
        .unwrap_or_else(|| panic!("expected an error: {response}"))
}

fn ip(replica: &Replica) -> IpAddr {
    replica.addr().ip()
}

/// The DNS records of every replica but the one labelled `gone`.
fn records_without(replicas: &[Replica], gone: &str) -> Vec<(&'static str, IpAddr)> {
    replicas
        .iter()
        .filter(|r| r.label() != gone)
        .map(|r| (NAME, ip(r)))
        .collect()
}

/// How many `initialize` requests `replica` received.
fn initializes(replica: &Replica) -> usize {
    replica
        .state()
        .seen()
        .iter()
        .filter(|s| s.method == "initialize")
        .count()
}

/// Three replicas on 127.0.0.2-4 (one port), a dnsmasq answering `counter.test` with all three,
/// and three nodes whose upstream `counter` is `http://counter.test:<port>/mcp` with `extra`
/// settings. `None` (the test skipped) without dnsmasq.
fn three_endpoints(
    extra: &[(&'static str, &str)],
) -> Option<(Vec<Replica>, Dns, ConfiguredCluster)> {
    let present = dnsmasq_binary().is_some();
    if !available_or_skip("upstream_pinning", &[("dnsmasq", present)]) {
        return None;
    }
    let replicas = replicas_on_one_port(2, 3);
    let records: Vec<(&str, IpAddr)> = replicas.iter().map(|r| (NAME, ip(r))).collect();
    let dns = Dns::start(&records);
    let port = replicas[0].addr().port();
    let mut upstream = Upstream::http("counter", &format!("http://{NAME}:{port}/mcp"))
        .prefix("")
        .set("nameservers", format!("[\"{}\"]", dns.nameserver()));
    for (key, value) in extra {
        upstream = upstream.set(key, value);
    }
    let cluster = start_cluster(3, &[upstream], ClusterOptions::new());
    Some((replicas, dns, cluster))
}

/// `n` increments spread round robin over `urls` (ids from `first_id`); asserts they count
/// `from + 1`, `from + 2`, … on one replica, and returns it.
async fn increments(
    client: &McpClient,
    urls: &[String],
    first_id: u64,
    n: u64,
    from: u64,
) -> String {
    let mut replica = None;
    for i in 0..n {
        let url = &urls[i as usize % urls.len()];
        let response = call(client, url, first_id + i, "increment").await;
        let (count, served_by) = counted(&response);
        assert_eq!(
            count,
            from + i + 1,
            "increment {} through {url}: {response}",
            i + 1
        );
        let first = replica.get_or_insert_with(|| served_by.clone());
        assert_eq!(*first, served_by, "one replica serves the session");
    }
    replica.expect("n > 0")
}

/// The replica labelled `label`.
fn by_label<'a>(replicas: &'a mut [Replica], label: &str) -> &'a mut Replica {
    replicas
        .iter_mut()
        .find(|r| r.label() == label)
        .unwrap_or_else(|| panic!("no replica {label}"))
}

/// C02 step 2: one name with three endpoints, three nodes, thirty `increment` calls spread over
/// the nodes, then `get`: 30. Every request of the upstream session (`initialize`,
/// `notifications/initialized`, the calls, the upstream's GET stream, DELETE when the client
/// ends its session) reached one replica; the others saw none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_calls_through_three_nodes_stay_on_the_replica_that_made_the_session() {
    let Some((replicas, _dns, started)) = three_endpoints(&[]) else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    // With a standalone stream open, the node holding the lease opens the upstream's GET stream.
    let _stream = client.get_stream(&urls[2], None).await.sse();
    let pinned = increments(&client, &urls, 10, 30, 0).await;
    let (count, served_by) = counted(&call(&client, &urls[1], 99, "get").await);
    assert_eq!((count, served_by.as_str()), (30, pinned.as_str()));
    // Every node lists the three endpoints; the pinned one was reached and holds the session.
    let pinned_addr = replicas
        .iter()
        .find(|r| r.label() == pinned)
        .unwrap()
        .addr();
    for node in 0..3 {
        let doc = upstreamz(&started.cluster.node(node).base_url()).await;
        let endpoints = doc["upstreams"][0]["endpoints"].as_array().unwrap().clone();
        let addresses: Vec<&str> = endpoints
            .iter()
            .map(|e| e["address"].as_str().unwrap())
            .collect();
        let mut want: Vec<String> = replicas.iter().map(|r| r.addr().to_string()).collect();
        want.sort();
        assert_eq!(addresses, want, "node {node}: {doc}");
        let at_pin = endpoints
            .iter()
            .find(|e| e["address"] == pinned_addr.to_string())
            .unwrap();
        assert_eq!(at_pin["state"], "up", "node {node}: {doc}");
        assert_eq!(at_pin["resolved"], true);
        assert_eq!(at_pin["sessions"], 1, "node {node}: {doc}");
    }
    // The client ends its session on another node: the upstream session's DELETE goes to the
    // pinned replica too.
    assert_eq!(client.delete(&urls[1]).await.status, 204);
    let pinned_state = replicas
        .iter()
        .find(|r| r.label() == pinned)
        .unwrap()
        .state();
    let upstream_session = pinned_state
        .seen()
        .into_iter()
        .find(|s| s.method == "tools/call")
        .and_then(|s| s.session)
        .expect("the calls carried the upstream session");
    eventually("the DELETE to reach the pinned replica", T, || {
        let seen = pinned_state.seen();
        let deleted = seen
            .iter()
            .any(|s| s.http == "DELETE" && s.session.as_ref() == Some(&upstream_session));
        async move { deleted.then_some(()) }
    })
    .await;
    for replica in &replicas {
        let seen = replica.state().seen();
        // Every node's start-up probe makes a short upstream session of its own at some replica:
        // whatever a replica saw, none of it was for a session another replica made. (Each node
        // that served the client session sends its own DELETE when it ends, so the pinned
        // replica answers the second and third DELETE of its session with 404: done already.)
        assert!(
            seen.iter().all(|s| s.status != 404 || s.http == "DELETE"),
            "{} got a request of a session it did not make: {seen:?}",
            replica.label()
        );
        let calls: Vec<&Option<String>> = seen
            .iter()
            .filter(|s| s.method == "tools/call")
            .map(|s| &s.session)
            .collect();
        if replica.label() != pinned {
            assert!(calls.is_empty(), "{} saw calls: {seen:?}", replica.label());
            assert!(
                seen.iter().all(|s| s.http != "GET"),
                "{} saw a GET stream: {seen:?}",
                replica.label()
            );
            continue;
        }
        assert_eq!(calls.len(), 31, "every call reached {pinned}");
        let session = calls[0].clone().expect("calls carry the upstream session");
        assert!(calls.iter().all(|s| s.as_deref() == Some(session.as_str())));
        // The client's upstream session from its handshake to its DELETE, all at this replica.
        for (http, method) in [
            ("POST", "notifications/initialized"),
            ("GET", ""),
            ("DELETE", ""),
        ] {
            assert!(
                seen.iter().any(|s| s.http == http
                    && s.method == method
                    && s.session.as_deref() == Some(session.as_str())),
                "{pinned} saw no {http} {method} of {session}: {seen:?}"
            );
        }
    }
}

/// C02 step 3 with the default `on_upstream_loss = "reinitialize"`: the replica holding the
/// session is stopped and leaves the name after call 15. Call 16 fails with -32006 saying the
/// upstream's state was lost at that endpoint and the request was not run; the calls after it
/// run in a new upstream session on another replica, counting from 1 again: `get` is not the
/// old 15 silently continued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_pinned_replica_is_gone_the_next_call_says_the_state_was_lost() {
    let Some((mut replicas, dns, started)) = three_endpoints(&[]) else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let pinned = increments(&client, &urls, 10, 15, 0).await;
    let gone = by_label(&mut replicas, &pinned);
    let gone_addr = gone.addr();
    gone.stop();
    dns.set(&records_without(&replicas, &pinned));

    let response = call(&client, &urls[1], 16, "increment").await;
    let err = error(&response);
    assert_eq!(err["code"], -32006, "{response}");
    assert_eq!(err["data"]["reason"], "upstream_session_lost");
    assert_eq!(err["data"]["upstream"], "counter");
    assert_eq!(err["data"]["endpoint"], gone_addr.to_string());
    let message = err["message"].as_str().unwrap();
    for needle in [
        "lost this session's state",
        &gone_addr.to_string(),
        "the request was not run",
        "the next request runs in a new upstream session",
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    let again = increments(&client, &urls, 17, 5, 0).await;
    assert_ne!(again, pinned);
    let (count, served_by) = counted(&call(&client, &urls[0], 99, "get").await);
    assert_eq!(
        (count, served_by),
        (5, again),
        "a new upstream session, not 15 continued"
    );
}

/// C02 step 3 with `on_upstream_loss = "end_session"`: when the pinned replica is gone, call 16
/// fails saying the client session has ended, and from then on every node answers 404 for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_end_session_a_gone_replica_ends_the_client_session() {
    let Some((mut replicas, dns, started)) =
        three_endpoints(&[("on_upstream_loss", "\"end_session\"")])
    else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let pinned = increments(&client, &urls, 10, 15, 0).await;
    by_label(&mut replicas, &pinned).stop();
    let inits = |replicas: &[Replica]| -> Vec<usize> {
        replicas
            .iter()
            .filter(|r| r.label() != pinned)
            .map(initializes)
            .collect()
    };
    let inits_before = inits(&replicas);
    dns.set(&records_without(&replicas, &pinned));

    let response = call(&client, &urls[2], 16, "increment").await;
    let err = error(&response);
    assert_eq!(err["code"], -32006, "{response}");
    assert_eq!(err["data"]["reason"], "upstream_session_lost");
    assert_eq!(err["data"]["session_ended"], true);
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("the client session has ended"),
        "{message}"
    );
    eventually("every node to answer 404 for the session", T, || async {
        let reply = client
            .post(
                &urls[0],
                &json!({"jsonrpc": "2.0", "id": 98, "method": "tools/list"}),
            )
            .await;
        (reply.status == 404).then_some(())
    })
    .await;
    session_gone_everywhere(&client, &urls).await;
    assert_eq!(
        inits(&replicas),
        inits_before,
        "no new upstream session for it"
    );
}

/// Three replicas on 127.0.0.1 behind one HAProxy with `options`, and three nodes whose upstream
/// is the balancer. `None` (the test skipped) without haproxy.
fn behind_a_balancer(
    options: BalancerOptions,
) -> Option<(Vec<Replica>, Balancer, ConfiguredCluster)> {
    behind_a_balancer_with(options, &[])
}

/// [`behind_a_balancer`] with `extra` settings of the upstream.
fn behind_a_balancer_with(
    options: BalancerOptions,
    extra: &[(&'static str, &str)],
) -> Option<(Vec<Replica>, Balancer, ConfiguredCluster)> {
    let present = haproxy_binary().is_some();
    if !available_or_skip("upstream_pinning", &[("haproxy", present)]) {
        return None;
    }
    let replicas: Vec<Replica> = (0..3)
        .map(|i| Replica::start(SocketAddr::from(([127, 0, 0, 1], 0)), &format!("r{i}")))
        .collect();
    let backends: Vec<String> = replicas.iter().map(|r| r.addr().to_string()).collect();
    let balancer = Balancer::start_with(&backends, &options);
    let mut upstream = Upstream::http("counter", &balancer.url()).prefix("");
    for (key, value) in extra {
        upstream = upstream.set(key, value);
    }
    let cluster = start_cluster(3, &[upstream], ClusterOptions::new());
    Some((replicas, balancer, cluster))
}

/// C02 behind a balancer with cookie affinity (HAProxy `cookie SRV insert indirect nocache`):
/// the cookie the balancer sets on the `initialize` answer is kept for the upstream session and
/// sent on every later request from every node, so all 30 calls and `get` reach one replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_cookie_affinity_balancer_thirty_calls_stay_on_one_replica() {
    let options = BalancerOptions {
        cookie: Some("SRV".into()),
        ..BalancerOptions::default()
    };
    let Some((replicas, _balancer, started)) = behind_a_balancer(options) else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let pinned = increments(&client, &urls, 10, 30, 0).await;
    let (count, served_by) = counted(&call(&client, &urls[2], 99, "get").await);
    assert_eq!((count, served_by.as_str()), (30, pinned.as_str()));
    for replica in replicas.iter().filter(|r| r.label() != pinned) {
        let calls = replica
            .state()
            .seen()
            .into_iter()
            .filter(|s| s.method == "tools/call");
        assert_eq!(calls.count(), 0, "{} saw calls", replica.label());
    }
}

/// C02 behind a plain round-robin balancer (no affinity) in front of replicas that share
/// nothing: `initialize` and `notifications/initialized` reach different replicas. The error
/// names the real cause: `notifications/initialized` answered 404, at which endpoint, and what
/// to do about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_round_robin_balancer_the_error_names_the_initialized_404() {
    let Some((_replicas, balancer, started)) = behind_a_balancer(BalancerOptions::default()) else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let response = call(&client, &urls[1], 2, "increment").await;
    let err = error(&response);
    assert_eq!(err["code"], -32006, "{response}");
    let message = err["message"].as_str().unwrap();
    let endpoint = format!("127.0.0.1:{}", balancer.port());
    for needle in [
        "upstream `counter`",
        "`notifications/initialized` answered HTTP 404",
        endpoint.as_str(),
        "cookie affinity",
        "headless Service",
        "stateless = true",
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    assert!(!message.contains("it ended the session"), "{message}");
}

/// C02: the same round-robin balancer with `stateless = true` declared for the stateful
/// replicas. The error does not recommend setting what is already set: it says the upstream is
/// declared stateless but its replicas do not share sessions, so `stateless = true` must go and
/// sessions be pinned. Before, it ended "or set `stateless = true` if the upstream keeps nothing
/// per session".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_stateless_replicas_that_share_no_sessions_are_told_to_drop_stateless() {
    let declared = [("stateless", "true")];
    let Some((_replicas, _balancer, started)) =
        behind_a_balancer_with(BalancerOptions::default(), &declared)
    else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let response = call(&client, &urls[1], 2, "increment").await;
    let err = error(&response);
    assert_eq!(err["code"], -32006, "{response}");
    let message = err["message"].as_str().unwrap();
    for needle in [
        "`notifications/initialized` answered HTTP 404",
        "the upstream's replicas do not share sessions",
        "declared `stateless = true`, but replicas that do not share sessions make it stateful",
        "remove `stateless = true`",
        "cookie affinity",
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    assert!(!message.contains("or set `stateless = true`"), "{message}");
}

/// C02 step 3 behind a sticky balancer (HAProxy `balance source`, with `option redispatch`):
/// the replica holding the session is stopped after call 15, and the balancer sends call 16 to
/// another replica, which does not know the session. Call 16 fails saying the state was lost
/// (it used to be re-run silently in a new upstream session, counting 1, 2, … as if nothing
/// happened); the calls after it count from 1 in the new upstream session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_sticky_balancer_a_stopped_replica_is_reported_not_silently_restarted() {
    let options = BalancerOptions {
        balance: Some("source".into()),
        redispatch: true,
        ..BalancerOptions::default()
    };
    let Some((mut replicas, balancer, started)) = behind_a_balancer(options) else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let pinned = increments(&client, &urls, 10, 15, 0).await;
    by_label(&mut replicas, &pinned).stop();
    // Until its health check marks the replica down, the balancer answers 503 (the request
    // never reached a replica); then it sends the session's next call to another replica.
    let mut id = 15;
    let response = eventually("the balancer to send around the stopped replica", T, || {
        id += 1;
        let (client, url) = (&client, &urls[1]);
        async move {
            let response = call(client, url, id, "increment").await;
            let refused = response["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("HTTP 503"));
            (!refused).then_some(response)
        }
    })
    .await;
    let err = error(&response);
    assert_eq!(err["data"]["reason"], "upstream_session_lost", "{response}");
    assert_eq!(
        err["data"]["endpoint"],
        format!("127.0.0.1:{}", balancer.port())
    );
    let again = increments(&client, &urls, 100, 3, 0).await;
    assert_ne!(again, pinned);
    let (count, _) = counted(&call(&client, &urls[2], 99, "get").await);
    assert_eq!(count, 3, "a new upstream session, not 15 continued");
}

/// A pinned replica that refuses connections while its name still resolves to it may come
/// back: the call fails with the usual -32006 naming the endpoint and the message, and the
/// session is kept (no new upstream session anywhere). New client sessions meanwhile are
/// initialized on the replicas that answer (the one that refuses is skipped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_replica_that_still_resolves_is_unavailable_not_lost() {
    let Some((mut replicas, _dns, started)) = three_endpoints(&[]) else {
        return;
    };
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let pinned = increments(&client, &urls, 10, 3, 0).await;
    let down = by_label(&mut replicas, &pinned);
    let down_addr = down.addr();
    down.stop();
    let inits = |replicas: &[Replica]| -> usize { replicas.iter().map(initializes).sum() };
    let before = inits(&replicas);
    let response = call(&client, &urls[1], 20, "increment").await;
    let err = error(&response);
    assert_eq!(err["code"], -32006, "{response}");
    assert_eq!(err["data"]["endpoint"], down_addr.to_string());
    assert!(
        err["data"].get("reason").is_none(),
        "not a loss: {response}"
    );
    let message = err["message"].as_str().unwrap();
    let needle = format!("cannot connect to {down_addr} for `tools/call`");
    assert!(message.contains(&needle), "{needle:?} in {message}");
    assert_eq!(inits(&replicas), before, "no upstream session made for it");
    // Six new client sessions: every one is initialized on a replica that answers.
    for i in 0..6 {
        let mut other = McpClient::new();
        other.initialize(&urls[i % 3], "2025-11-25").await;
        let (count, served_by) = counted(&call(&other, &urls[(i + 1) % 3], 1, "increment").await);
        assert_eq!(count, 1);
        assert_ne!(served_by, pinned);
    }
}

/// A call of the old upstream session that answers after the session was re-initialized does
/// not touch the new session's binding. The replicas set a fresh cookie on every answer; a
/// `slow` call is in flight in the first upstream session when its replica forgets it; the next
/// call finds the session lost and initializes a new one (pinned); then the slow call answers,
/// with its cookie. Its cookie belongs to the superseded session and is dropped: the six calls
/// after it count 1…6 on the new session's replica. (It used to overwrite the binding with the
/// old session's, so the new session lost its pin: its calls spread over the replicas, 404ed
/// and made the client lose its state a second time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answering_after_a_reinitialize_leaves_the_new_sessions_pin_alone() {
    let Some((mut replicas, _dns, started)) = three_endpoints(&[]) else {
        return;
    };
    for replica in &replicas {
        replica.state().set_cookies(1, 16, true);
    }
    let urls = started.cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let pinned = increments(&client, &urls, 10, 1, 0).await;
    let old = by_label(&mut replicas, &pinned).state();
    let slow = call(&client, &urls[1], 20, "slow");
    let reinitialize = async {
        eventually("the slow call to reach the replica", T, || async {
            (old.slow_waiting() == 1).then_some(())
        })
        .await;
        old.forget_sessions();
        let response = call(&client, &urls[2], 21, "increment").await;
        assert_eq!(
            error(&response)["data"]["reason"],
            "upstream_session_lost",
            "{response}"
        );
        old.release_slow();
    };
    let (slow, ()) = tokio::join!(slow, reinitialize);
    assert_eq!(slow["result"]["content"][0]["text"], "slept", "{slow}");
    increments(&client, &urls, 30, 6, 0).await;
}

/// `stateless = true` over three endpoints, one of which refuses connections while the name
/// still resolves to it (a pod not yet removed from the Service): a request that is not pinned
/// and cannot connect certainly did not run, so it goes to the next endpoint. Thirty calls from
/// three new client sessions (each first initializing the upstream) all succeed, on the two
/// replicas that answer. (A third of them used to fail with "cannot connect to …".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_upstream_routes_around_an_endpoint_that_refuses() {
    let Some((mut replicas, _dns, started)) = three_endpoints(&[("stateless", "true")]) else {
        return;
    };
    for replica in &replicas {
        replica.state().set_stateless(true);
    }
    let dead = replicas[1].label().to_owned();
    replicas[1].stop();
    let urls = started.cluster.urls();
    let mut served = std::collections::BTreeMap::new();
    for k in 0..3 {
        let mut client = McpClient::new();
        client.initialize(&urls[k], "2025-11-25").await;
        for i in 0..10 {
            let response = call(&client, &urls[i % 3], 10 + i as u64, "increment").await;
            let (_, replica) = counted(&response);
            *served.entry(replica).or_insert(0) += 1;
        }
    }
    assert_eq!(served.values().sum::<i32>(), 30, "{served:?}");
    assert!(!served.contains_key(&dead), "{served:?}");
}

/// With `on_upstream_loss = "end_session"`, the client session is unknown to every node by the
/// time the client can read the error saying it ended: the request it sends right after, on
/// another node, gets 404 (six client sessions in a row, each losing its upstream session
/// when its replica forgets it; every other one asks for the error as an SSE stream, the rest
/// get it as JSON). (The session used to end only after the error went out: a request admitted
/// meanwhile on another node was cancelled with -32004 instead.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_end_session_the_request_right_after_the_error_gets_404_on_another_node() {
    let Some((mut replicas, _dns, started)) =
        three_endpoints(&[("on_upstream_loss", "\"end_session\"")])
    else {
        return;
    };
    let urls = started.cluster.urls();
    for round in 0..6 {
        let mut client = McpClient::new();
        client.initialize(&urls[round % 3], "2025-11-25").await;
        let pinned = increments(&client, &urls, 10, 1, 0).await;
        by_label(&mut replicas, &pinned).state().forget_sessions();
        let url = &urls[(round + 1) % 3];
        let response = if round % 2 == 0 {
            call(&client, url, 20, "increment").await
        } else {
            let sse_only = client.post_headers().set("Accept", "text/event-stream");
            let body = switchboard_tests::msg::call(20, "increment", json!({})).to_string();
            let reply = client.send(Method::POST, url, &sse_only, Some(body)).await;
            assert!(reply.is_sse(), "round {round}");
            reply.answer(json!(20), T).await.response
        };
        assert_eq!(
            error(&response)["data"]["session_ended"],
            true,
            "{response}"
        );
        let next = client
            .call_tool(&urls[(round + 2) % 3], 21, "increment", json!({}))
            .await;
        let status = next.status;
        assert_eq!(status, 404, "round {round}: {}", next.text().await);
    }
}

/// The `state` of `counter` in node `node`'s `/upstreamz`, with the document.
async fn counter_state(started: &ConfiguredCluster, node: usize) -> (String, Value) {
    let doc = upstreamz(&started.cluster.node(node).base_url()).await;
    let state = doc["upstreams"][0]["state"].as_str().unwrap_or_default();
    (state.to_owned(), doc)
}

/// C02 with C30: the health of a replicated upstream is its endpoints'. Three client sessions
/// through node 1 land on the three replicas; one replica stops (its address still resolves):
/// its session's call fails with -32006, and node 1 shows `counter` `degraded` (that endpoint
/// `down`, `switchboard_upstream_up` 1), also after another session's call succeeds. Only when
/// every replica is stopped and a new session could reach none is it `down` (gauge 0). Before,
/// the state was the last call's: `down` after the one failed call, `up` after the next good one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stopped_replica_of_three_makes_the_upstream_degraded_not_down() {
    let Some((mut replicas, _dns, started)) = three_endpoints(&[]) else {
        return;
    };
    let url = started.cluster.url(0);
    let base = started.cluster.node(0).base_url();
    let mut sessions: Vec<(String, McpClient)> = Vec::new();
    for _ in 0..9 {
        let mut client = McpClient::new();
        client.initialize(&url, "2025-11-25").await;
        let (_, served_by) = counted(&call(&client, &url, 1, "increment").await);
        if sessions.iter().all(|(r, _)| *r != served_by) {
            sessions.push((served_by, client));
        }
        if sessions.len() == 3 {
            break;
        }
    }
    assert_eq!(
        sessions.len(),
        3,
        "new sessions go round robin over the replicas"
    );
    let (state, doc) = counter_state(&started, 0).await;
    assert_eq!(state, "up", "{doc}");

    let (stopped, client) = &sessions[0];
    let stopped_addr = by_label(&mut replicas, stopped).addr();
    by_label(&mut replicas, stopped).stop();
    let failed = call(client, &url, 2, "increment").await;
    assert_eq!(
        error(&failed)["data"]["endpoint"],
        stopped_addr.to_string(),
        "{failed}"
    );
    let (state, doc) = counter_state(&started, 0).await;
    assert_eq!(state, "degraded", "{doc}");
    let endpoint = doc["upstreams"][0]["endpoints"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|e| e["address"] == stopped_addr.to_string())
        })
        .cloned()
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(endpoint["state"], "down", "{doc}");
    assert_eq!(
        counter(&base, r#"switchboard_upstream_up{upstream="counter"}"#).await,
        1
    );
    let (_, other) = &sessions[1];
    assert_eq!(counted(&call(other, &url, 2, "increment").await).0, 2);
    let (state, doc) = counter_state(&started, 0).await;
    assert_eq!(
        state, "degraded",
        "a good call does not hide the stopped replica: {doc}"
    );

    for replica in &mut replicas {
        replica.stop();
    }
    let mut late = McpClient::new();
    late.initialize(&url, "2025-11-25").await;
    let none = call(&late, &url, 1, "increment").await;
    assert_eq!(error(&none)["code"], -32006, "{none}");
    let (state, doc) = counter_state(&started, 0).await;
    assert_eq!(state, "down", "no replica can be reached: {doc}");
    assert_eq!(
        counter(&base, r#"switchboard_upstream_up{upstream="counter"}"#).await,
        0
    );
}

/// C02: an address that left the name stays in `/upstreamz` while a session this node knows is
/// pinned to it (`resolved: false`, `sessions: 1`), as docs/upstreams.md says; that session's calls
/// still go there. Before, the node listed only the last resolution's addresses and those a
/// request reached since, so the pinned address vanished from the list at the resolution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_that_left_the_name_is_listed_while_a_session_is_pinned_to_it() {
    let Some((replicas, dns, started)) = three_endpoints(&[("resolve_interval_ms", "100")]) else {
        return;
    };
    let url = started.cluster.url(0);
    let base = started.cluster.node(0).base_url();
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let pinned = increments(&client, std::slice::from_ref(&url), 10, 2, 0).await;
    let pinned_addr = by_label_ref(&replicas, &pinned).addr().to_string();
    dns.set(&records_without(&replicas, &pinned));

    // New sessions through node 1 make it resolve the name again (at most every 100 ms).
    let endpoints = eventually("node 1 to resolve the name again", T, || async {
        let mut other = McpClient::new();
        other.initialize(&url, "2025-11-25").await;
        let (_, served_by) = counted(&call(&other, &url, 1, "increment").await);
        let doc = upstreamz(&base).await;
        let endpoints = doc["upstreams"][0]["endpoints"].as_array()?.clone();
        let resolved_again = endpoints
            .iter()
            .all(|e| e["address"] != pinned_addr.as_str() || e["resolved"] == false);
        (served_by != pinned && resolved_again).then_some(endpoints)
    })
    .await;
    let listed = endpoints
        .iter()
        .find(|e| e["address"] == pinned_addr.as_str())
        .unwrap_or_else(|| panic!("{pinned_addr} is missing: {endpoints:?}"));
    assert_eq!(
        (listed["resolved"].clone(), listed["sessions"].clone()),
        (json!(false), json!(1)),
        "{listed}"
    );
    assert_eq!(
        endpoints.iter().filter(|e| e["resolved"] == true).count(),
        2,
        "{endpoints:?}"
    );

    let (count, served_by) = counted(&call(&client, &url, 20, "increment").await);
    assert_eq!((count, served_by.as_str()), (3, pinned.as_str()));
    // Read once the name was resolved again after that call (reading `/upstreamz` resolves
    // again when the view is older than 100 ms): what the call found is still shown.
    let called_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    let doc = eventually("a resolution after the pinned call", T, || async {
        let doc = upstreamz(&base).await;
        let at = doc["upstreams"][0]["resolved_at_ms"].as_u64()?;
        (at > called_ms).then_some(doc)
    })
    .await;
    let listed = doc["upstreams"][0]["endpoints"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["address"] == pinned_addr.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(
        (listed["state"].clone(), listed["resolved"].clone()),
        (json!("up"), json!(false)),
        "{doc}"
    );
}

/// The replica labelled `label` (shared borrow).
fn by_label_ref<'a>(replicas: &'a [Replica], label: &str) -> &'a Replica {
    replicas
        .iter()
        .find(|r| r.label() == label)
        .unwrap_or_else(|| panic!("no replica {label}"))
}

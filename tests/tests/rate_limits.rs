//! Rate limits (issue 16, "Rate limits, cluster-wide"; docs/limits.md) on real nodes sharing a
//! real Redis: the accuracy of a per-principal limit driven through three nodes, the 429 of an
//! `initialize` past it with its headers, and the JSON-RPC refusal of a call inside a session.
//!
//! Authorization is off, so every client is the `anonymous` principal: a per-principal limit is
//! the whole anonymous traffic's, which is what these tests drive.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions, RedisKind};
use switchboard_tests::metrics::counter;
use switchboard_tests::msg;

/// Nodes on one standalone Redis with `limits` set (`--set` pairs), every answer as plain JSON.
fn cluster(n: usize, limits: &[(&str, &str)]) -> Cluster {
    let mut options = ClusterOptions::new().set("http.sse_after", "30s");
    for (key, value) in limits {
        options = options.set(key, value);
    }
    Cluster::start(n, options)
}

/// What one call's answer was: a result, or a refusal by a rate limit (-32029 with an integer
/// `data.retryAfterMs`).
#[derive(Debug, PartialEq)]
enum Outcome {
    Passed,
    Limited,
}

fn outcome(body: &Value) -> Outcome {
    if body.get("result").is_some() {
        return Outcome::Passed;
    }
    let error = &body["error"];
    assert_eq!(
        error["code"], -32029,
        "neither a result nor a rate refusal: {body}"
    );
    assert!(error["data"]["retryAfterMs"].as_u64().is_some(), "{body}");
    assert_eq!(error["data"]["limit"], "principal", "{body}");
    Outcome::Limited
}

/// A limit of 20 calls/s for one principal, offered 60 calls/s for 10 s round robin over three
/// nodes, admits 200 ± 10 % (issue 16's accuracy test). Burst 2: with burst 1 (no tolerance) a
/// call that arrives a hair before its slot is refused and the next one comes 16.7 ms later, so
/// discrete arrivals lose up to one arrival interval per slot (167 admitted, measured); one
/// slot of tolerance absorbs that jitter and adds one call at the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_principal_limit_holds_across_three_nodes() {
    accuracy(RedisKind::Standalone).await;
}

/// The same on Redis Cluster, where the limit is a script of its own beside each admission.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_principal_limit_holds_across_three_nodes_on_redis_cluster() {
    accuracy(RedisKind::Cluster).await;
}

async fn accuracy(kind: RedisKind) {
    let options = ClusterOptions::new()
        .redis(kind)
        .set("http.sse_after", "30s")
        .set("rate_limits.principal", "{ rate = 20, burst = 2 }");
    let cluster = Cluster::start(3, options);
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    // The initialize took one of the principal's slots: wait it out (pacing, not a
    // synchronization), so the run starts from a full burst.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / 60));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut calls = Vec::new();
    let started = std::time::Instant::now();
    for i in 0..600u64 {
        tick.tick().await;
        let (client, url) = (client.clone(), urls[i as usize % 3].clone());
        calls.push(tokio::spawn(async move {
            let reply = client
                .call_tool(&url, i + 10, "echo", json!({"text": "x"}))
                .await;
            assert_eq!(reply.status.as_u16(), 200);
            outcome(&reply.json().await)
        }));
    }
    let offered_for = started.elapsed();
    let mut passed = 0;
    for call in calls {
        if call.await.unwrap() == Outcome::Passed {
            passed += 1;
        }
    }
    eprintln!("{kind:?}: admitted {passed} of 600 offered over {offered_for:?}");
    assert!(
        (180..=220).contains(&passed),
        "admitted {passed} of 600 calls offered at 60/s for {offered_for:?} against 20/s"
    );
}

/// Past the principal's limit `initialize` gets 429 with `Retry-After` and the IETF fields
/// (draft-ietf-httpapi-ratelimit-headers-10), exactly, and a JSON-RPC body naming the limit;
/// a request inside a session past its tool's limit gets -32029 in a 200 answer instead.
#[tokio::test]
async fn refusals_say_when_to_retry() {
    let limits = [
        ("rate_limits.principal", "{ rate = 0.1, burst = 2 }"),
        ("rate_limits.tools.echo", "{ rate = 0.1, burst = 1 }"),
    ];
    let cluster = cluster(2, &limits);
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), "2025-11-25").await;
    let first = client
        .call_tool(&cluster.url(1), 2, "echo", json!({"text": "x"}))
        .await;
    assert!(first.json().await.get("result").is_some());
    // Both slots of the principal are taken (initialize, the call): a new session is refused.
    let refused = McpClient::new()
        .post(&cluster.url(1), &msg::init("2025-11-25", json!({})))
        .await;
    assert_eq!(refused.status.as_u16(), 429);
    assert_eq!(refused.header("retry-after").as_deref(), Some("10"));
    assert_eq!(
        refused.header("ratelimit-policy").as_deref(),
        Some(r#""principal";q=2;w=20"#)
    );
    assert_eq!(
        refused.header("ratelimit").as_deref(),
        Some(r#""principal";r=0;t=10"#)
    );
    assert!(refused.session_id().is_none());
    let body = refused.json().await;
    assert_eq!(body["id"], Value::Null);
    assert_eq!(body["error"]["code"], -32029);
    assert_eq!(body["error"]["data"]["limit"], "principal");
    let wait = body["error"]["data"]["retryAfterMs"].as_u64().unwrap();
    assert!((9_000..=10_000).contains(&wait), "{body}");
}

/// Inside a session the refusal is a JSON-RPC error in a 200 answer, like a busy session's; the
/// tool's limit is the principal's own, so another tool still passes.
#[tokio::test]
async fn a_call_past_its_tool_limit_gets_a_jsonrpc_error() {
    let cluster = cluster(
        2,
        &[("rate_limits.tools.echo", "{ rate = 0.1, burst = 1 }")],
    );
    let mut client = McpClient::new();
    client.initialize(&cluster.url(0), "2025-11-25").await;
    let first = client
        .call_tool(&cluster.url(0), 2, "echo", json!({"text": "x"}))
        .await;
    assert!(first.json().await.get("result").is_some());
    let second = client
        .call_tool(&cluster.url(1), 3, "echo", json!({"text": "x"}))
        .await;
    assert_eq!(second.status.as_u16(), 200);
    let body = second.json().await;
    assert_eq!(body["id"], 3);
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "tool:echo");
    let wait = body["error"]["data"]["retryAfterMs"].as_u64().unwrap();
    assert!((9_000..=10_000).contains(&wait), "{body}");
    let other = client
        .post(&cluster.url(1), &msg::request(4, "tools/list", json!({})))
        .await;
    assert!(other.json().await.get("result").is_some());
    // Each node counts its own decisions.
    let decisions = |node: usize, decision: &str| {
        let base = cluster.node(node).base_url();
        let name = format!(
            "switchboard_rate_limit_decisions_total{{decision=\"{decision}\",limit=\"tool:echo\"}}"
        );
        async move { counter(&base, &name).await }
    };
    assert_eq!(decisions(0, "allowed").await, 1);
    assert_eq!(decisions(1, "limited").await, 1);
}

/// A per-upstream limit counts `tools/call` of that upstream's tools (known by their prefix at
/// admission), from every session together; another upstream's tools are not counted.
#[tokio::test]
async fn an_upstream_limit_counts_every_session_of_its_tools() {
    let toml = "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n\n\
                [[upstreams]]\nname = \"b\"\nkind = \"demo\"\n\n\
                [rate_limits.upstreams]\na = { rate = 0.1, burst = 2 }\n";
    let dir = switchboard_tests::temp::TempDir::new("sb-rate-upstream");
    let path = dir.path().join("switchboard.toml");
    std::fs::write(&path, toml).expect("write switchboard.toml");
    let options = ClusterOptions::new()
        .set("http.sse_after", "30s")
        .config_file(&path);
    let cluster = Cluster::start(2, options);
    let (mut one, mut two) = (McpClient::new(), McpClient::new());
    one.initialize(&cluster.url(0), "2025-11-25").await;
    two.initialize(&cluster.url(1), "2025-11-25").await;
    let call = |client: &McpClient, node: usize, id: u64, tool: &str| {
        let (client, url, tool) = (client.clone(), cluster.url(node), tool.to_owned());
        async move {
            let reply = client
                .call_tool(&url, id, &tool, json!({"text": "x"}))
                .await;
            reply.json().await
        }
    };
    assert!(call(&one, 0, 2, "a__echo").await.get("result").is_some());
    assert!(call(&two, 1, 2, "a__echo").await.get("result").is_some());
    let refused = call(&one, 1, 3, "a__echo").await;
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert_eq!(refused["error"]["data"]["limit"], "upstream:a");
    assert!(call(&two, 0, 3, "b__echo").await.get("result").is_some());
}

/// A legacy HTTP+SSE connect creates a session as `initialize` does on `/mcp`, so it takes the
/// principal's limit too: past it the GET gets the same 429, and no session is made. (Break 16:
/// connects were never counted, so a limited principal made sessions at any rate through
/// `/sse`.)
#[tokio::test]
async fn a_legacy_sse_connect_takes_the_principal_limit() {
    let cluster = cluster(1, &[("rate_limits.principal", "{ rate = 0.1, burst = 2 }")]);
    let base = cluster.node(0).base_url();
    let http = reqwest::Client::new();
    let connect = || {
        http.get(format!("{base}/sse"))
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(10))
            .send()
    };
    // Two connects take both slots (held open: a stream read to its end never ends).
    let first = connect().await.expect("GET /sse");
    let second = connect().await.expect("GET /sse");
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let refused = connect().await.expect("GET /sse");
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.expect("a JSON-RPC body");
    assert_eq!(body["error"]["code"], -32029, "{body}");
    assert_eq!(body["error"]["data"]["limit"], "principal", "{body}");
}

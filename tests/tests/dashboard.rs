//! The Grafana dashboard (`helm/switchboard/dashboards/switchboard.json`) reads only metrics the
//! node really exports: every `switchboard_*` name in every panel query must be a series of a
//! running node's `/metrics` (a metric family's `# TYPE` line, with its `_total`, `_bucket`,
//! `_sum` and `_count` samples). A family appears once it has a sample, so the test first makes
//! each happen on two nodes: a session, calls (one failing), a stream held on one node and fed
//! from the other (the bus), its resumption, and a store that fails.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::peers;

/// The series names a `/metrics` text holds.
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Every `switchboard_…` identifier in `expr`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("switchboard_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

async fn scrape(url: &str) -> String {
    let base = url.trim_end_matches("/mcp");
    let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap();
    metrics.text().await.unwrap()
}

#[tokio::test]
async fn every_dashboard_query_names_an_exported_metric() {
    let path = peers::tests_dir().join("../helm/switchboard/dashboards/switchboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the dashboard")).unwrap();
    let mut cluster = Cluster::start(2, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-11-25").await;
    let t = Duration::from_secs(10);
    let echoed = client
        .call_tool(&urls[0], 2, "echo", json!({"text": "dashboard"}))
        .await
        .answer(json!(2), t)
        .await;
    assert!(
        echoed.response.get("result").is_some(),
        "{}",
        echoed.response
    );
    // An unknown tool: an upstream error by code, a tool call that failed.
    client
        .call_tool(&urls[0], 3, "no_such_tool", json!({}))
        .await
        .answer(json!(3), t)
        .await;
    // The standalone stream held on node 1, its events appended on node 0: over the bus.
    let mut held = client.get_stream(&urls[1], None).await.sse();
    client
        .call_tool(
            &urls[0],
            4,
            "notify",
            json!({"count": 1, "interval_ms": 10}),
        )
        .await
        .answer(json!(4), t)
        .await;
    let got = held.until_method("notifications/message", t).await;
    assert!(
        got.matched.is_some(),
        "no notification on the held stream: {:?}",
        got.events
    );
    let first = got
        .events
        .iter()
        .find_map(|e| e.id.clone())
        .expect("an event id");
    drop(held);
    // Resumed from its first event on node 0: a replay.
    let resumed = client.get_stream(&urls[0], Some(&first)).await;
    assert_eq!(resumed.status.as_u16(), 200, "resume from {first}");
    let mut text = String::new();
    for url in &urls {
        text.push_str(&scrape(url).await);
    }
    drop(resumed);
    // A store that fails: Redis gone, one request refused, its operation counted as failed.
    cluster.backend_mut().server_mut().kill9();
    let _ = client
        .call_tool(&urls[0], 5, "echo", json!({"text": "x"}))
        .await;
    text.push_str(&scrape(&urls[0]).await);
    let names = exported(&text);
    // initialize counts as a request like any other.
    let init = "switchboard_request_duration_seconds_count{method=\"initialize\",upstream=\"\"} 1";
    assert!(text.contains(init), "{init} missing:\n{text}");
    let mut queries = 0;
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a PromQL expr");
            let used = metric_names(expr);
            assert!(
                !used.is_empty(),
                "a query without a switchboard metric: {expr}"
            );
            for name in used {
                assert!(
                    names.contains(&name),
                    "panel {:?} queries {name}, which /metrics does not export:\n{text}",
                    panel["title"]
                );
            }
            queries += 1;
        }
    }
    assert!(queries >= 20, "only {queries} queries");
    for title in [
        "Sessions",
        "Request latency",
        "Errors",
        "Upstream latency",
        "Redis",
        "Resumes",
        "streams",
        "Failovers",
    ] {
        assert!(
            panels
                .iter()
                .any(|p| p["title"].as_str().is_some_and(|t| t.contains(title))),
            "no panel about {title}"
        );
    }
}

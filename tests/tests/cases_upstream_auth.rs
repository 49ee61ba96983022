//! Case C33: credentials towards upstreams. An upstream's 401 or 403, whatever its kind
//! (Streamable HTTP of the session era, a 2026-07-28 server, a legacy SSE endpoint), reaches the
//! client as one documented JSON-RPC error that names the upstream, says its credentials were
//! refused, and carries the status, the `WWW-Authenticate` challenge as sent and the upstream's
//! own JSON-RPC error. The client's own `Authorization` and `Cookie` never reach an upstream,
//! which gets only the credentials configured for it.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use switchboard_tests::auth_upstream::{AuthUpstream, Policy};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::ClusterOptions;
use switchboard_tests::msg;
use switchboard_tests::upstreams::{start_cluster, Upstream};

const T: Duration = Duration::from_secs(15);
const CHALLENGE: &str = r#"Bearer realm="up", error="invalid_token""#;

fn refuse_401() -> Policy {
    Policy::Refuse {
        status: 401,
        www_authenticate: vec![CHALLENGE.to_owned()],
        body: "Unauthorized".to_owned(),
    }
}

fn refuse_403() -> Policy {
    Policy::Refuse {
        status: 403,
        www_authenticate: vec![
            r#"Bearer error="insufficient_scope", scope="tools""#.to_owned(),
            r#"Basic realm="up""#.to_owned(),
        ],
        body: json!({"jsonrpc": "2.0", "id": null,
                     "error": {"code": -32001, "message": "token lacks scope tools"}})
        .to_string(),
    }
}

/// The error of `tools/call` of `name`'s `echo` through `url`.
async fn call_error(client: &McpClient, url: &str, id: i64, name: &str) -> Value {
    let tool = format!("{name}__echo");
    let answer = client
        .call_tool(url, id, &tool, json!({"text": "hi", "s": "hi"}))
        .await
        .answer(json!(id), T)
        .await;
    assert!(
        answer.response.get("error").is_some(),
        "{tool}: {}",
        answer.response
    );
    answer.response["error"].clone()
}

/// C33 step 4: a 401 with `WWW-Authenticate: Bearer realm="up", error="invalid_token"` (and a
/// text body), and a 403 with two challenges and a JSON-RPC error body, from each network kind
/// of upstream: the client gets -32006 naming the upstream, the refusal and the message that was
/// refused at which endpoint, with exactly `data.upstream`, `data.status`, `data.www_authenticate`
/// (all values as sent), `data.endpoint` and, for the JSON body, `data.error`. Before, a 401 was `unavailable: HTTP 401 Unauthorized: …` with the
/// challenge dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c33_upstream_401_and_403_reach_the_client_with_status_and_challenge() {
    let h401 = AuthUpstream::start(refuse_401()).await;
    let h403 = AuthUpstream::start(refuse_403()).await;
    let m401 = AuthUpstream::start(refuse_401()).await;
    let s401 = AuthUpstream::start(refuse_401()).await;
    let s403 = AuthUpstream::start(refuse_403()).await;
    let upstreams = [
        Upstream::http("h401", &h401.url("/mcp")),
        Upstream::http("h403", &h403.url("/mcp")),
        Upstream::http("m401", &m401.url("/mcp")).revision("2026-07-28"),
        Upstream::sse("s401", &s401.url("/sse")),
        Upstream::sse("s403", &s403.url("/sse")),
    ];
    let configured = start_cluster(1, &upstreams, ClusterOptions::new());
    let url = configured.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let at_401 = [
        ("h401", "initialize", h401.endpoint()),
        ("m401", "tools/call", m401.endpoint()),
        ("s401", "GET", s401.endpoint()),
    ];
    for (i, (name, what, endpoint)) in at_401.into_iter().enumerate() {
        let error = call_error(&client, &url, 10 + i as i64, name).await;
        let expected = json!({
            "code": -32006,
            "message": format!("upstream `{name}` refused the credentials switchboard sent it \
                                (HTTP 401 Unauthorized to `{what}` at {endpoint}); check the \
                                `headers` configured for it"),
            "data": {"upstream": name, "status": 401, "www_authenticate": CHALLENGE,
                     "endpoint": endpoint},
        });
        assert_eq!(error, expected, "{name}");
    }
    let at_403 = [
        ("h403", "initialize", h403.endpoint()),
        ("s403", "GET", s403.endpoint()),
    ];
    for (i, (name, what, endpoint)) in at_403.into_iter().enumerate() {
        let error = call_error(&client, &url, 20 + i as i64, name).await;
        let expected = json!({
            "code": -32006,
            "message": format!("upstream `{name}` refused the credentials switchboard sent it \
                                (HTTP 403 Forbidden to `{what}` at {endpoint}): token lacks \
                                scope tools; check the `headers` configured for it"),
            "data": {
                "upstream": name,
                "status": 403,
                "www_authenticate": r#"Bearer error="insufficient_scope", scope="tools", Basic realm="up""#,
                "error": {"code": -32001, "message": "token lacks scope tools", "data": null},
                "endpoint": endpoint,
            },
        });
        assert_eq!(error, expected, "{name}");
    }
    assert!(
        !s401.seen().is_empty() && !m401.seen().is_empty(),
        "the refusals came from the fixtures"
    );
}

/// An HTTP 500 with a text body, from an upstream of the session era (refusing `initialize`) and
/// a 2026-07-28 one (refusing `tools/call`): the client gets -32006 whose message names the
/// message that failed and the endpoint, with `data.endpoint` as for a 401 (above) or a message
/// over `max_message_bytes` (`cases_upstream_sizes.rs`). Before, the endpoint was only in the
/// text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_500_names_the_message_and_carries_data_endpoint() {
    let fail = || Policy::Refuse {
        status: 500,
        www_authenticate: Vec::new(),
        body: "boom".to_owned(),
    };
    let h500 = AuthUpstream::start(fail()).await;
    let m500 = AuthUpstream::start(fail()).await;
    let upstreams = [
        Upstream::http("h500", &h500.url("/mcp")),
        Upstream::http("m500", &m500.url("/mcp")).revision("2026-07-28"),
    ];
    let configured = start_cluster(1, &upstreams, ClusterOptions::new());
    let url = configured.cluster.url(0);
    let mut client = McpClient::new();
    client.initialize(&url, "2025-11-25").await;
    let at = [
        ("h500", "initialize", h500.endpoint()),
        ("m500", "tools/call", m500.endpoint()),
    ];
    for (i, (name, what, endpoint)) in at.into_iter().enumerate() {
        let error = call_error(&client, &url, 30 + i as i64, name).await;
        let expected = json!({
            "code": -32006,
            "message": format!("upstream `{name}` is unavailable: `{what}` at {endpoint} \
                                answered HTTP 500 Internal Server Error: boom"),
            "data": {"upstream": name, "endpoint": endpoint},
        });
        assert_eq!(error, expected, "{name}");
    }
}

/// C33 steps 1–3 for a gateway without passthrough: the upstream gets only its configured
/// `Authorization` (a static credential), on the probe, `initialize` and every call, while the
/// client's own `Authorization` and `Cookie` headers (sent on every POST) reach it on no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c33_client_credentials_never_reach_an_upstream() {
    let fixture = AuthUpstream::start(Policy::Require("Bearer up-secret".into())).await;
    let upstream =
        Upstream::http("up", &fixture.url("/mcp")).header("Authorization", "Bearer up-secret");
    let configured = start_cluster(2, &[upstream], ClusterOptions::new());
    let urls = configured.cluster.urls();
    let mut client = McpClient::new();
    let with_credentials = |c: &McpClient| {
        c.post_headers()
            .set("Authorization", "Bearer client-token")
            .set("Cookie", "sid=client-cookie")
    };
    let init = msg::init("2025-11-25", json!({}));
    let reply = client
        .send(
            Method::POST,
            &urls[0],
            &with_credentials(&client),
            Some(init.to_string()),
        )
        .await;
    let sid = reply.session_id().expect("a session");
    client = client.with_session(Some(&sid), Some("2025-11-25"));
    client.post(&urls[0], &msg::inited()).await;
    for (i, url) in urls.iter().enumerate() {
        let call = msg::call(i + 2, "up__echo", json!({"text": format!("hi {i}")}));
        let answer = client
            .send(
                Method::POST,
                url,
                &with_credentials(&client),
                Some(call.to_string()),
            )
            .await
            .answer(json!(i + 2), T)
            .await;
        assert_eq!(
            msg::result_text(&answer.response),
            format!("hi {i}"),
            "{}",
            answer.response
        );
    }
    let seen = fixture.seen();
    assert!(
        seen.len() >= 4,
        "probes, initialize and both calls reached it: {}",
        seen.len()
    );
    for headers in &seen {
        assert_eq!(headers["authorization"], "Bearer up-secret", "{headers:?}");
        assert!(headers.get("cookie").is_none(), "{headers:?}");
        for value in headers.values() {
            let text = String::from_utf8_lossy(value.as_bytes());
            assert!(
                !text.contains("client-token") && !text.contains("client-cookie"),
                "{headers:?}"
            );
        }
    }
}

//! Issue 16, API keys through real nodes sharing a real Redis, with no JWT key configured:
//! keys (configured as SHA-256 hashes) authenticate as `Authorization: Bearer` and in
//! `auth.api_key_header`; a wrong key gets 401 `invalid_token`, a key without the required
//! scope 403 `insufficient_scope`; a session belongs to its key's principal (another key's gets
//! 404 on every node). And the binding hole: a session created with authorization off is not
//! found once the node restarts with it on (and is found again with it off: the refusal is
//! the binding, not a lost session).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use switchboard_tests::client::{Headers, McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::{expect, msg};

const T: Duration = Duration::from_secs(10);
const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const CI_KEY: &str = "sb_ci_4f1c9d0e7a6b5c4d3e2f1a0b";
const OPS_KEY: &str = "sb_ops_0a1b2c3d4e5f60718293a4b5";
const BOT_KEY: &str = "sb_bot_unscoped_77777777";

/// `printf %s "$KEY" | sha256sum`, as an operator makes it.
fn sha256sum(key: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(key.as_bytes())?;
            child.wait_with_output()
        })
        .expect("run sha256sum");
    String::from_utf8(out.stdout).expect("hex")[..64].to_owned()
}

/// `auth.api_keys` as a TOML value, and the settings that turn authorization on with it.
fn with_api_keys(options: ClusterOptions) -> ClusterOptions {
    let entry = |key: &str, principal: &str, scopes: &str| {
        format!(
            r#"{{sha256 = "{}", principal = "{principal}", scopes = [{scopes}]}}"#,
            sha256sum(key)
        )
    };
    let keys = [
        entry(CI_KEY, "ci", r#""mcp:tools""#),
        entry(OPS_KEY, "ops", r#""mcp:tools", "mcp:admin""#),
        entry(BOT_KEY, "bot", ""),
    ];
    options
        .set("auth.resource_url", GW)
        .set("auth.authorization_servers", ISSUER)
        .set("auth.required_scopes", "mcp:tools")
        .set("auth.api_key_header", "X-API-Key")
        .set("auth.api_keys", format!("[{}]", keys.join(", ")))
}

fn bearer(h: Headers, key: &str) -> Headers {
    h.set("Authorization", &format!("Bearer {key}"))
}

async fn post(c: &McpClient, url: &str, body: &serde_json::Value, h: Headers) -> Reply {
    c.send(Method::POST, url, &h, Some(body.to_string())).await
}

/// `initialize` + `notifications/initialized` with headers `h`; the client bound to it.
async fn open(url: &str, h: impl Fn(Headers) -> Headers) -> McpClient {
    let c = McpClient::new();
    let reply = post(
        &c,
        url,
        &msg::init("2025-11-25", json!({})),
        h(c.post_headers()),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "initialize");
    let sid = reply.session_id().expect("Mcp-Session-Id");
    let answer = reply.answer(json!(1), T).await;
    let revision = answer.response["result"]["protocolVersion"]
        .as_str()
        .expect("revision")
        .to_owned();
    let c = c.with_session(Some(&sid), Some(&revision));
    let inited = post(&c, url, &msg::inited(), h(c.post_headers())).await;
    expect::accepted(inited, "notifications/initialized").await;
    c
}

async fn tools_listed(reply: Reply, id: u64) {
    let answer = reply.answer(json!(id), T).await;
    assert!(
        answer.response["result"]["tools"].is_array(),
        "{:?}",
        answer.response
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_authenticate_and_bind_sessions_on_every_node() {
    let cluster = Cluster::start(2, with_api_keys(ClusterOptions::new()));
    let (a, b) = (cluster.url(0), cluster.url(1));
    let c = open(&a, |h| bearer(h, CI_KEY)).await;
    let list = msg::bare(2, "tools/list");
    // The same key in the configured header works on the other node.
    tools_listed(
        post(&c, &b, &list, c.post_headers().set("X-API-Key", CI_KEY)).await,
        2,
    )
    .await;
    tools_listed(
        post(&c, &a, &list, bearer(c.post_headers(), CI_KEY)).await,
        2,
    )
    .await;

    // A wrong key, in either place: 401 invalid_token, saying no more than "invalid".
    let fresh = McpClient::new();
    let init = msg::init("2025-11-25", json!({}));
    for h in [
        bearer(fresh.post_headers(), "sb_ci_wrong"),
        fresh.post_headers().set("X-API-Key", "sb_ci_wrong"),
        bearer(fresh.post_headers(), &sha256sum(CI_KEY)),
    ] {
        let reply = post(&fresh, &b, &init, h).await;
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        expect::refused(
            reply,
            StatusCode::UNAUTHORIZED,
            Some(expect::INVALID_REQUEST),
            "wrong key",
        )
        .await;
        assert!(
            challenge.contains(r#"error="invalid_token""#),
            "{challenge}"
        );
        assert!(
            challenge.contains("not valid") || challenge.contains("neither"),
            "{challenge}"
        );
    }
    // A key without the required scope: 403 insufficient_scope.
    let reply = post(&fresh, &a, &init, bearer(fresh.post_headers(), BOT_KEY)).await;
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    expect::refused(
        reply,
        StatusCode::FORBIDDEN,
        Some(expect::INVALID_REQUEST),
        "bot key",
    )
    .await;
    assert!(
        challenge.contains(r#"error="insufficient_scope""#),
        "{challenge}"
    );

    // Another key's principal does not find ci's session, on either node, either way.
    for url in [&a, &b] {
        let h = bearer(c.post_headers(), OPS_KEY);
        expect::session_not_found(post(&c, url, &list, h).await, "ops's POST").await;
        let h = c.post_headers().set("X-API-Key", OPS_KEY);
        expect::session_not_found(post(&c, url, &list, h).await, "ops's POST by header").await;
        let h = bearer(c.session_headers(), OPS_KEY);
        let deleted = c.send(Method::DELETE, url, &h, None).await;
        expect::session_not_found(deleted, "ops's DELETE").await;
    }
    // ci's session is intact.
    tools_listed(
        post(&c, &b, &list, bearer(c.post_headers(), CI_KEY)).await,
        2,
    )
    .await;
    // No key reached the logs.
    for i in 0..2 {
        let log = cluster.node(i).log_tail(100_000);
        for key in [CI_KEY, OPS_KEY, BOT_KEY, "sb_ci_wrong"] {
            assert!(!log.contains(key), "node {i} logged {key}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_from_before_authorization_is_not_found_after_it_is_on() {
    let mut cluster = Cluster::start(1, ClusterOptions::new());
    let url = cluster.url(0);
    let c = open(&url, |h| h).await;
    let list = msg::bare(2, "tools/list");
    tools_listed(post(&c, &url, &list, c.post_headers()).await, 2).await;

    // Restart with authorization on (same Redis): the anonymous session is not found, for
    // any valid key.
    cluster.kill9(0);
    for (key, value) in [
        ("auth.resource_url", GW),
        ("auth.authorization_servers", ISSUER),
        ("auth.required_scopes", "mcp:tools"),
    ] {
        cluster.set_for_new_nodes(key, value);
    }
    cluster.set_for_new_nodes(
        "auth.api_keys",
        format!(
            r#"[{{sha256 = "{}", principal = "ci", scopes = ["mcp:tools"]}}]"#,
            sha256sum(CI_KEY)
        ),
    );
    cluster.restart(0);
    let reply = post(&c, &url, &list, bearer(c.post_headers(), CI_KEY)).await;
    expect::session_not_found(reply, "the pre-authorization session").await;
    let unauthenticated = post(&c, &url, &list, c.post_headers()).await;
    assert_eq!(unauthenticated.status, StatusCode::UNAUTHORIZED);

    // Back off again: the session is still there (it was refused, not lost).
    cluster.kill9(0);
    cluster.set_for_new_nodes("auth.resource_url", "");
    for key in [
        "auth.authorization_servers",
        "auth.required_scopes",
        "auth.api_keys",
    ] {
        cluster.set_for_new_nodes(key, "[]");
    }
    cluster.restart(0);
    tools_listed(post(&c, &url, &list, c.post_headers()).await, 2).await;
}

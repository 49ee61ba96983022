//! Issue 16, JWKS: a node verifies tokens with the keys of a local JWKS provider that rotates
//! them in the middle of the test. Old tokens stay valid while their key is published; a new
//! `kid` verifies after exactly one refetch, shared by a burst of requests; unknown `kid`s
//! refetch at most once per `auth.jwks_refetch_interval`; a provider that answers 503 or stops
//! listening leaves the cached keys working; a withdrawn key's tokens fail after the next
//! refetch. Tokens are RS256 and ES256, the keys made at test time.

use std::time::{Duration, Instant};

use jsonwebtoken::get_current_timestamp;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::{McpClient, Reply};
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::eventually::eventually;
use switchboard_tests::jwks_server::{JwksServer, TestKey};
use switchboard_tests::msg;

const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
/// `auth.jwks_refetch_interval` of the test's node.
const INTERVAL: Duration = Duration::from_secs(3);
/// Slack past an interval's end before the test counts on it being over.
const SLACK: Duration = Duration::from_millis(300);

fn claims(sub: &str) -> Value {
    json!({
        "iss": ISSUER, "sub": sub, "aud": GW, "scope": "mcp:tools",
        "exp": get_current_timestamp() + 600,
    })
}

async fn initialize(c: &McpClient, url: &str, token: &str) -> Reply {
    let h = c
        .post_headers()
        .set("Authorization", &format!("Bearer {token}"));
    let body = msg::init("2025-11-25", json!({})).to_string();
    c.send(Method::POST, url, &h, Some(body)).await
}

/// The status of an `initialize` with `token`, and the `WWW-Authenticate` of a refusal.
async fn status(c: &McpClient, url: &str, token: &str) -> (StatusCode, String) {
    let reply = initialize(c, url, token).await;
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    (reply.status, challenge)
}

async fn assert_verifies(c: &McpClient, url: &str, token: &str, what: &str) {
    let (status, challenge) = status(c, url, token).await;
    assert_eq!(status, StatusCode::OK, "{what}: {challenge}");
}

async fn assert_refused(c: &McpClient, url: &str, token: &str, reason: &str, what: &str) {
    let (status, challenge) = status(c, url, token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}");
    assert!(
        challenge.contains(r#"error="invalid_token""#) && challenge.contains(reason),
        "{what}: {challenge}"
    );
}

/// Waits until `from + INTERVAL` has passed (with slack): the refetch interval is the
/// behaviour under test, so the test lets it run out.
async fn interval_over(from: Instant) {
    tokio::time::sleep_until((from + INTERVAL + SLACK).into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_rotate_refetch_once_per_interval_and_survive_an_outage() {
    let k1 = TestKey::es256("k1");
    let k2 = TestKey::rs256("k2");
    let k3 = TestKey::es256("k3");
    let k4 = TestKey::es256("k4");
    let mut jwks = JwksServer::start(vec![k1.jwk()], 3600).await;
    let cluster = Cluster::start(
        1,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.issuer", ISSUER)
            .set("auth.jwks_url", jwks.url())
            .set(
                "auth.jwks_refetch_interval",
                format!("{}s", INTERVAL.as_secs()),
            ),
    );
    let url = cluster.url(0);
    let c = McpClient::new();
    let t1 = k1.sign(&claims("alice"), true);
    let t2 = k2.sign(&claims("bob"), true);
    let t3 = k3.sign(&claims("carol"), true);

    // Start-up fetched the set once; k1's tokens verify, with or without a kid.
    eventually("the start-up fetch", Duration::from_secs(10), || async {
        (jwks.hits() == 1).then_some(())
    })
    .await;
    let loaded = Instant::now();
    assert_verifies(&c, &url, &t1, "k1 token").await;
    assert_verifies(
        &c,
        &url,
        &k1.sign(&claims("alice"), false),
        "k1 token without kid",
    )
    .await;
    assert_eq!(jwks.hits(), 1, "known keys need no fetch");

    // Rotation: k2 is published. Once the interval since the last fetch is over, a burst of
    // k2 tokens verifies after exactly one refetch.
    jwks.publish(vec![k1.jwk(), k2.jwk()]);
    interval_over(loaded).await;
    let burst_start = Instant::now();
    let burst = (0..8).map(|_| status(&c, &url, &t2));
    let answers = futures::future::join_all(burst).await;
    let burst_end = Instant::now();
    for (i, (status, challenge)) in answers.iter().enumerate() {
        assert_eq!(
            *status,
            StatusCode::OK,
            "k2 token {i} of the burst: {challenge}"
        );
    }
    assert_eq!(jwks.hits(), 2, "one refetch for the whole burst");
    assert_verifies(&c, &url, &t1, "k1 token after the rotation").await;

    // An unknown kid within the interval: refused, no fetch.
    assert!(
        burst_end - burst_start < INTERVAL,
        "the burst took {:?}",
        burst_end - burst_start
    );
    for _ in 0..3 {
        assert_refused(&c, &url, &t3, "kid", "k3 token within the interval").await;
    }
    assert_eq!(jwks.hits(), 2, "no refetch within the interval");

    // After the interval: k3 is published and k1 withdrawn; a k3 token refetches once.
    jwks.publish(vec![k2.jwk(), k3.jwk()]);
    interval_over(burst_end).await;
    assert_verifies(&c, &url, &t3, "k3 token after the interval").await;
    let refetched = Instant::now();
    assert_eq!(jwks.hits(), 3);
    // k1 is gone with that refetch: its tokens fail (and, within the interval, fetch nothing).
    assert_refused(&c, &url, &t1, "kid", "withdrawn k1 token").await;
    assert_eq!(jwks.hits(), 3);

    // The provider answers 503: the refetch an unknown kid makes fails, the keys are kept.
    jwks.set_failing(true);
    interval_over(refetched).await;
    let t4 = k4.sign(&claims("dave"), true);
    assert_refused(&c, &url, &t4, "kid", "k4 token, provider failing").await;
    let failed = Instant::now();
    assert_eq!(jwks.hits(), 4, "the refetch reached the provider");
    assert_verifies(&c, &url, &t2, "cached k2 token, provider failing").await;
    assert_verifies(&c, &url, &t3, "cached k3 token, provider failing").await;

    // The provider is unreachable: cached keys still verify, unknown kids are refused.
    jwks.stop();
    interval_over(failed).await;
    assert_refused(&c, &url, &t4, "kid", "k4 token, provider down").await;
    assert_verifies(&c, &url, &t2, "cached k2 token, provider down").await;
    assert_verifies(&c, &url, &t3, "cached k3 token, provider down").await;
    assert_eq!(jwks.hits(), 4, "nothing reached the stopped provider");
    let log = cluster.node(0).log_tail(100_000);
    assert!(
        log.matches("JWKS fetch failed; keeping the keys held")
            .count()
            >= 2,
        "the 503 and the refused connection are logged:\n{log}"
    );
    assert!(!log.contains(&t2), "a token was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_starts_while_the_provider_is_down_and_refuses_until_keys_load() {
    let k1 = TestKey::es256("k1");
    let jwks = JwksServer::start(vec![k1.jwk()], 3600).await;
    jwks.set_failing(true);
    // Ready (`/healthz` 200 within the harness's limit) although no fetch has succeeded.
    let cluster = Cluster::start(
        1,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.jwks_url", jwks.url())
            .set("auth.jwks_min_refresh", "2s")
            .set("auth.jwks_refetch_interval", "1h"),
    );
    let url = cluster.url(0);
    let c = McpClient::new();
    let t1 = k1.sign(&claims("alice"), true);
    assert_refused(&c, &url, &t1, "not loaded yet", "before any key loaded").await;
    // The background retries (1 s, then 2 s) pick the keys up once the provider recovers.
    jwks.set_failing(false);
    eventually(
        "keys loaded after the outage",
        Duration::from_secs(15),
        || async { (status(&c, &url, &t1).await.0 == StatusCode::OK).then_some(()) },
    )
    .await;
    assert!(jwks.hits() >= 2, "retried: {} fetches", jwks.hits());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_discovery_finds_the_key_set() {
    let k1 = TestKey::rs256("k1");
    let jwks = JwksServer::start(vec![k1.jwk()], 3600).await;
    let issuer = jwks.issuer();
    let cluster = Cluster::start(
        1,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", &issuer)
            .set("auth.issuer", &issuer)
            .set("auth.oidc_discovery", "true"),
    );
    let url = cluster.url(0);
    let c = McpClient::new();
    let mut claims = claims("alice");
    claims["iss"] = json!(issuer);
    let t1 = k1.sign(&claims, true);
    eventually("the start-up fetch", Duration::from_secs(10), || async {
        (jwks.hits() == 1).then_some(())
    })
    .await;
    assert_verifies(&c, &url, &t1, "k1 token found through discovery").await;
    assert_eq!((jwks.discovery_hits(), jwks.hits()), (1, 1));
}

//! Issue 16, hostile input: a table of hostile requests (rows in `hostile_input/rows.rs` and
//! `hostile_input/wire.rs`), each sent as raw HTTP/1.1 bytes to real nodes and checked for its
//! exact status and JSON-RPC error (code, a stable part of the message, the id). Afterwards no
//! node has panicked or exited, and a bystander's session, created before the table with a
//! streamed call whose events are logged, still works and replays its log exactly.
//!
//! Error ids (JSON-RPC 2.0 §5): the request's id when it was read, `null` when it could not be
//! (unparsable body, invalid id, or a refusal before the body is read: headers, size, token).

#[path = "hostile_input/rows.rs"]
mod rows;
#[path = "hostile_input/wire.rs"]
mod wire;

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{encode, get_current_timestamp, Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::modern;
use switchboard_tests::msg;
use switchboard_tests::raw_http::{exchange, RawResponse};
use switchboard_tests::sse::SseEvent;

use rows::{Ctx, Row, Target, Want};

const T: Duration = Duration::from_secs(10);
const GW: &str = "https://gw.example.test/mcp";
const ISSUER: &str = "https://as.example.test";
const SECRET: &str = "hostile-input-secret-0123456789abcdef";

/// An `initialize` body (id 1, 2025-06-18) the rows share.
fn rows_init_json() -> String {
    msg::init("2025-06-18", json!({})).to_string()
}

fn auth_node() -> Cluster {
    Cluster::start(
        1,
        ClusterOptions::new()
            .set("auth.resource_url", GW)
            .set("auth.authorization_servers", ISSUER)
            .set("auth.required_scopes", "mcp:tools")
            .set("auth.issuer", ISSUER)
            .set("auth.jwt_hs256_secrets", SECRET),
    )
}

fn claims(aud: &str, iss: &str, scope: &str, exp_in: i64) -> Value {
    json!({"iss": iss, "sub": "mallory", "aud": aud, "scope": scope,
           "exp": get_current_timestamp() as i64 + exp_in})
}

fn hs256(claims: &Value, secret: &str, kid: Option<&str>) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = kid.map(str::to_owned);
    let key = EncodingKey::from_secret(secret.as_bytes()).expect("key");
    encode(&header, claims, &key).expect("token")
}

/// A token with a hand-made header (e.g. `alg: none`) and `signature` as its third part.
fn handmade(header: &Value, claims: &Value, signature: &str) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.{signature}", part(header), part(claims))
}

/// Bearer tokens of every shape: (name, `Authorization` value, the status it gets).
fn tokens() -> Vec<(String, String, u16)> {
    let good = claims(GW, ISSUER, "mcp:tools", 300);
    let bearer = |t: String| format!("Bearer {t}");
    let hs_sig = hs256(&good, SECRET, None);
    let sig = hs_sig.rsplit('.').next().unwrap_or_default().to_owned();
    vec![
        ("absent".into(), String::new(), 401),
        ("empty".into(), "Bearer ".into(), 401),
        ("scheme only".into(), "Bearer".into(), 401),
        ("not a JWT".into(), bearer("not-a-jwt".into()), 401),
        ("three garbage parts".into(), bearer("a.b.c".into()), 401),
        (
            "alg none".into(),
            bearer(handmade(&json!({"alg": "none", "typ": "JWT"}), &good, "")),
            401,
        ),
        (
            "alg RS256 with an HMAC signature".into(),
            bearer(handmade(
                &json!({"alg": "RS256", "typ": "JWT"}),
                &good,
                &sig,
            )),
            401,
        ),
        (
            "wrong kid, other secret".into(),
            bearer(hs256(
                &good,
                "some-other-secret-0123456789abcdef",
                Some("rotated-away"),
            )),
            401,
        ),
        (
            "expired".into(),
            bearer(hs256(&claims(GW, ISSUER, "mcp:tools", -600), SECRET, None)),
            401,
        ),
        (
            "wrong audience".into(),
            bearer(hs256(
                &claims("https://other.example.test/mcp", ISSUER, "mcp:tools", 300),
                SECRET,
                None,
            )),
            401,
        ),
        (
            "wrong issuer".into(),
            bearer(hs256(
                &claims(GW, "https://evil.example.test", "mcp:tools", 300),
                SECRET,
                None,
            )),
            401,
        ),
        ("10 KB token".into(), bearer("x".repeat(10 * 1024)), 401),
        ("Basic scheme".into(), "Basic dXNlcjpwYXNz".into(), 401),
        (
            "missing scope".into(),
            bearer(hs256(&claims(GW, ISSUER, "mcp:other", 300), SECRET, None)),
            403,
        ),
    ]
}

/// Checks one answer against what its row wants; `Err` says what differs.
fn check(want: &Want, got: &RawResponse) -> Result<(), String> {
    let (status, body) = (got.status, got.message());
    let expect_status = match want {
        Want::Rpc(s, ..) | Want::Result(s, _) | Want::Empty(s) | Want::Http(s) => *s,
    };
    if status != expect_status {
        return Err(format!("status {status}, want {expect_status}"));
    }
    match want {
        Want::Http(_) => Ok(()),
        Want::Empty(_) if got.body.is_empty() => Ok(()),
        Want::Empty(_) => Err("a body where none belongs".into()),
        Want::Rpc(_, code, text, id) => {
            let body = body.ok_or("no JSON-RPC body")?;
            let message = body["error"]["message"].as_str().unwrap_or_default();
            if body["jsonrpc"] != "2.0" || body["error"]["code"] != json!(code) {
                return Err(format!("want code {code}"));
            }
            if !message.to_lowercase().contains(&text.to_lowercase()) {
                return Err(format!("message does not contain {text:?}"));
            }
            match body.get("id") {
                Some(got_id) if got_id == id => Ok(()),
                other => Err(format!("id {other:?}, want {id}")),
            }
        }
        Want::Result(_, Value::Array(ids)) => {
            let text = String::from_utf8_lossy(&got.body);
            let all: Vec<Value> =
                serde_json::from_slice::<Vec<Value>>(&got.body).unwrap_or_else(|_| {
                    text.lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                        .flat_map(|v| if let Value::Array(a) = v { a } else { vec![v] })
                        .collect()
                });
            let answered: Vec<&Value> = all
                .iter()
                .filter(|m| m.get("result").is_some())
                .map(|m| &m["id"])
                .collect();
            let want: Vec<&Value> = ids.iter().collect();
            (answered == want)
                .then_some(())
                .ok_or_else(|| format!("results for {answered:?}, want {want:?}"))
        }
        Want::Result(_, id) => {
            let body = body.ok_or("no JSON-RPC body")?;
            (body["id"] == *id && body.get("result").is_some())
                .then_some(())
                .ok_or_else(|| format!("want a result for {id}"))
        }
    }
}

fn shorten(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.chars().take(300).collect()
}

/// Sends every row and returns one line per row that did not get its answer.
async fn run_rows(rows: &[Row], cluster: &Cluster, auth: &Cluster) -> Vec<String> {
    let mut failures = Vec::new();
    for r in rows {
        let addr = match r.target {
            Target::Node(i) => cluster.node(i).addr(),
            Target::Auth => auth.node(0).addr(),
        };
        let outcome = exchange(&addr, &r.bytes, r.one_byte).await;
        let verdict = outcome
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|got| check(&r.want, got));
        // A CR LF in a header value can only end that header: what follows is another header,
        // and nothing of it may come back in the answer.
        let verdict = verdict.and_then(|()| match &outcome {
            Ok(got) if got.header("x-injected").is_some() => {
                Err("the injected header came back".into())
            }
            _ => Ok(()),
        });
        match (verdict, outcome) {
            (Ok(()), _) => {}
            (Err(e), Ok(got)) => failures.push(format!(
                "{}: {e}; got {} {}",
                r.name,
                got.status,
                shorten(&got.body)
            )),
            (Err(e), Err(_)) => failures.push(format!("{}: {e}", r.name)),
        }
    }
    failures
}

/// The bystander: a 2025-11-25 session whose countdown with progress was streamed and logged
/// before the table. Returns the client and the events of that stream.
async fn bystander(url: &str) -> (McpClient, Vec<SseEvent>) {
    let mut client = McpClient::new();
    client.initialize(url, "2025-11-25").await;
    let call = msg::call_with_progress(1, "countdown", json!({"n": 4, "interval_ms": 20}), "by");
    let reply = client.post(url, &call).await;
    assert!(reply.is_sse(), "the bystander's call streams");
    let mut stream = reply.sse();
    let got = stream.until_response(&json!(1), T).await;
    assert!(
        got.matched.is_some(),
        "bystander's countdown: {:?}",
        got.events
    );
    let events = got
        .events
        .into_iter()
        .filter(|e| e.id.is_some() && !e.is_priming())
        .collect();
    (client, events)
}

async fn session(url: &str, rev: &str) -> String {
    McpClient::new().initialize(url, rev).await.0
}

/// Two `subscriptions/listen` streams held on a node allowing two: a third is refused with 503
/// and -32003. Returns the failure, if any.
async fn listeners_over_the_cap(url: &str) -> Option<String> {
    let listen = || {
        modern::request(
            json!(60),
            "subscriptions/listen",
            // A filter the demo honours (its greeting can be subscribed to): a listen that
            // agrees to nothing ends at once and holds no slot (case C42).
            json!({"notifications": {"resourceSubscriptions": ["demo://greeting"]}}),
            json!({}),
        )
    };
    let first = modern::send(url, &listen()).await;
    let second = modern::send(url, &listen()).await;
    let held = [first.status, second.status];
    let third = modern::send(url, &listen()).await;
    let status = third.status;
    let body = third.text().await;
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    let ok = held == [StatusCode::OK, StatusCode::OK]
        && status == StatusCode::SERVICE_UNAVAILABLE
        && body["error"]["code"] == json!(-32003)
        && body["id"] == json!(60);
    (!ok).then(|| format!("listeners over the cap: held {held:?}, third {status} {body}"))
}

/// No node exited or panicked.
fn nodes_alive(clusters: &[&Cluster]) -> Vec<String> {
    let mut problems = Vec::new();
    for c in clusters {
        for i in 0..c.len() {
            let node = c.node(i);
            let alive = node
                .pid()
                .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
                .is_some_and(|stat| !stat.contains(") Z "));
            if !alive || node.healthz_status() != Some(200) {
                problems.push(format!("node {} is not alive and healthy", node.id()));
            }
            if node.log_tail(usize::MAX).contains("panicked") {
                problems.push(format!(
                    "node {} panicked:\n{}",
                    node.id(),
                    node.log_tail(40)
                ));
            }
        }
    }
    problems
}

/// The bystander's calls still work on both nodes and its log replays exactly.
async fn bystander_unaffected(
    client: &McpClient,
    urls: &[String],
    logged: &[SseEvent],
) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let id = 100 + i as i64;
        let echo = client
            .call_tool(url, id, "echo", json!({"text": "still mine"}))
            .await
            .answer(json!(id), T)
            .await;
        if !msg::result_text(&echo.response).contains("still mine") {
            problems.push(format!("bystander's echo on {url}: {}", echo.response));
        }
    }
    let first = logged[0].id.as_deref().expect("logged event id");
    let resumed = client.get_stream(&urls[1], Some(first)).await;
    let mut stream = resumed.sse();
    let got = stream.until_response(&json!(1), T).await;
    let replayed: Vec<(Option<String>, Option<String>)> = got
        .events
        .iter()
        .filter(|e| e.id.is_some() && !e.is_priming())
        .map(|e| (e.id.clone(), e.data.clone()))
        .collect();
    let want: Vec<(Option<String>, Option<String>)> = logged[1..]
        .iter()
        .map(|e| (e.id.clone(), e.data.clone()))
        .collect();
    if replayed != want {
        problems.push(format!(
            "bystander's replay differs:\n got {replayed:?}\nwant {want:?}"
        ));
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_exact_answers_and_disturb_no_one() {
    let cluster = Cluster::start(2, ClusterOptions::new().set("stateless.max_listeners", 2));
    let auth = auth_node();
    let urls = cluster.urls();
    let (by, logged) = bystander(&urls[0]).await;
    let ctx = Ctx {
        s0618: session(&urls[0], "2025-06-18").await,
        s0326: session(&urls[1], "2025-03-26").await,
        s1105: session(&urls[0], "2024-11-05").await,
        s1125: session(&urls[1], "2025-11-25").await,
        bystander: by.session_id.clone().expect("bystander session"),
        bystander_event: logged[0].id.clone().expect("event id"),
        tokens: tokens(),
    };
    let rows: Vec<Row> = [
        rows::malformed(&ctx),
        rows::ids(&ctx),
        rows::initialize(&ctx),
        rows::tools_call(&ctx),
        wire::headers(&ctx),
        wire::injection(&ctx),
        wire::sizes(&ctx),
        wire::protocol(&ctx),
        wire::tokens(&ctx),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(rows.len() >= 60, "the table has {} rows", rows.len());
    let mut failures = run_rows(&rows, &cluster, &auth).await;
    failures.extend(listeners_over_the_cap(&urls[0]).await);
    failures.extend(nodes_alive(&[&cluster, &auth]));
    failures.extend(bystander_unaffected(&by, &urls, &logged).await);
    eprintln!(
        "{} hostile rows sent, {} problems",
        rows.len() + 1,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

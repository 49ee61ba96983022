//! The HTTP face of the transport: cases C07 (GET and other methods), C17 (202 for
//! notifications and responses), C19 (batches by revision), C20 (version negotiation and the
//! `MCP-Protocol-Version` header) and C21 (lifecycle order, garbage bodies), plus the edge checks
//! (Accept, Content-Type, body size, Origin, Host).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use switchboard_tests::client::McpClient;
use switchboard_tests::cluster::{Cluster, ClusterOptions};
use switchboard_tests::expect;
use switchboard_tests::msg;

const T: Duration = Duration::from_secs(10);
const REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// C07: GET with a live session on another node is an SSE stream; GET without a session, with a
/// wrong Accept, or HEAD/OPTIONS/PUT/PATCH are refused without creating a session (an OPTIONS
/// that is a CORS preflight is answered, issue 35).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c07_get_is_sse_or_refused_and_other_methods_are_405() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    let (sid, _) = client.initialize(&urls[0], "2025-06-18").await;

    let get = client.get_stream(&urls[1], None).await;
    assert_eq!(get.status, StatusCode::OK, "GET on B with a live session");
    assert_eq!(
        get.header("content-type").as_deref(),
        Some("text/event-stream")
    );
    assert_eq!(
        get.header("content-length"),
        None,
        "an SSE stream has no Content-Length"
    );
    let mut stream = get.sse();
    assert!(
        stream
            .next_event(Duration::from_millis(300))
            .await
            .is_none(),
        "2025-06-18 gets no priming event"
    );
    assert!(!stream.is_ended(), "the GET stream stays open");

    let anonymous = McpClient::new();
    let reply = anonymous.get_stream(&urls[2], None).await;
    expect::refused_plain(reply, StatusCode::BAD_REQUEST, "GET without a session").await;
    let json_only = client.session_headers().set("Accept", "application/json");
    let reply = client.send(Method::GET, &urls[2], &json_only, None).await;
    expect::refused_plain(
        reply,
        StatusCode::NOT_ACCEPTABLE,
        "GET with Accept: application/json",
    )
    .await;

    let origin = format!("http://localhost:{}", cluster.node(1).port());
    for method in [Method::HEAD, Method::OPTIONS, Method::PUT, Method::PATCH] {
        for who in [&anonymous, &client] {
            for url in &urls {
                expect::method_not_allowed(who, method.clone(), url, None).await;
                // An OPTIONS with Origin and Access-Control-Request-Method is a CORS preflight,
                // answered 204 (issue 35, `cases_cors.rs`); it creates no session either.
                if method == Method::OPTIONS {
                    continue;
                }
                expect::method_not_allowed(who, method.clone(), url, Some(&origin)).await;
            }
        }
    }
    assert_eq!(
        cluster.session_ids_in_redis(),
        vec![sid],
        "refused requests must not create sessions"
    );
}

/// C17: notifications and client responses (to unknown server requests too) get exactly 202 with
/// an empty body, on every revision and every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c17_notifications_and_responses_get_202_with_empty_body() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let bodies = [
        msg::inited(),
        msg::notification("notifications/cancelled", json!({"requestId": 12345})),
        json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
        json!({"jsonrpc": "2.0", "id": "srv-1", "result": {}}),
        json!({"jsonrpc": "2.0", "id": "srv-2", "error": {"code": -1, "message": "no"}}),
    ];
    for revision in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut client = McpClient::new();
        client.initialize(&urls[0], revision).await;
        for (i, body) in bodies.iter().enumerate() {
            let url = &urls[i % 3];
            expect::accepted(
                client.post(url, body).await,
                &format!("{revision}: {body} on {url}"),
            )
            .await;
        }
        let listed = client
            .post(&urls[2], &msg::bare(2, "tools/list"))
            .await
            .answer(json!(2), T)
            .await;
        assert!(
            listed.response["result"]["tools"].is_array(),
            "{revision}: session still works"
        );
    }
}

/// C19 step 1: on 2025-03-26 a batch with a request gets its responses as an array (or over
/// SSE); a batch of notifications gets 202; `[]` gets 400 -32600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c19_batches_are_served_on_2025_03_26() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-03-26").await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 10, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    ]);
    let reply = client.post(&urls[1], &batch).await;
    assert_eq!(reply.status, StatusCode::OK, "batch with one request");
    let responses: Vec<Value> = if reply.is_json() {
        reply
            .json()
            .await
            .as_array()
            .expect("a batch answer as JSON is an array")
            .clone()
    } else {
        let mut stream = reply.sse();
        let got = stream
            .until(T, |m| {
                m.is_array() || switchboard_tests::sse::is_response(m, &json!(10))
            })
            .await;
        let matched = got.matched.expect("batch response over SSE");
        matched.as_array().cloned().unwrap_or_else(|| vec![matched])
    };
    assert_eq!(
        responses.len(),
        1,
        "one response for one request: {responses:?}"
    );
    assert_eq!(responses[0]["id"], 10);
    assert!(
        responses[0]["result"]["tools"].is_array(),
        "{}",
        responses[0]
    );

    let notes =
        json!([msg::inited(), {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]);
    expect::accepted(
        client.post(&urls[2], &notes).await,
        "batch of notifications",
    )
    .await;
    let reply = client.post(&urls[0], &json!([])).await;
    expect::refused(
        reply,
        StatusCode::BAD_REQUEST,
        Some(expect::INVALID_REQUEST),
        "empty batch",
    )
    .await;
}

/// C19 step 2: from 2025-06-18 on, any array is 400 -32600 with a null id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c19_batches_are_refused_from_2025_06_18() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    for revision in ["2025-06-18", "2025-11-25"] {
        let mut client = McpClient::new();
        client.initialize(&urls[0], revision).await;
        let bodies = [
            json!([{"jsonrpc": "2.0", "id": 10, "method": "tools/list"}, msg::inited()]),
            json!([msg::inited()]),
            json!([]),
        ];
        for (i, body) in bodies.iter().enumerate() {
            let what = format!("{revision}: batch {body}");
            let reply = client.post(&urls[(i + 1) % 3], body).await;
            expect::refused(
                reply,
                StatusCode::BAD_REQUEST,
                Some(expect::INVALID_REQUEST),
                &what,
            )
            .await;
        }
    }
}

/// C19 step 2: a refused batch reaches no upstream: a `notify` call inside it sends nothing to
/// the session's GET stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c19_refused_batch_reaches_no_upstream() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    let get = client.get_stream(&urls[0], None).await;
    assert_eq!(get.status, StatusCode::OK);
    let mut get = get.sse();
    let call = msg::call(3, "notify", json!({"count": 1, "interval_ms": 0}));
    let reply = client.post(&urls[1], &json!([call])).await;
    let what = "batch with a notify call";
    expect::refused(
        reply,
        StatusCode::BAD_REQUEST,
        Some(expect::INVALID_REQUEST),
        what,
    )
    .await;
    let leaked = get.next_event(Duration::from_millis(500)).await;
    assert!(leaked.is_none(), "a refused batch's call ran: {leaked:?}");
}

/// C20 steps 1–2: `initialize` echoes each supported revision and negotiates an unknown one down
/// to 2025-11-25 instead of refusing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_initialize_negotiates_inside_the_body() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    for revision in REVISIONS {
        let (_, negotiated) = McpClient::new().initialize(&urls[1], revision).await;
        assert_eq!(negotiated, revision, "a supported revision is echoed");
    }
    let client = McpClient::new().with_session(None, Some("2099-01-01"));
    let reply = client
        .post(&urls[2], &msg::init("2099-01-01", json!({})))
        .await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "initialize offering 2099-01-01 (also in the header)"
    );
    assert!(reply.session_id().is_some());
    let answer = reply.answer(json!(1), T).await;
    let result = &answer.response["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25", "{result}");
    for capability in ["tools", "resources", "prompts", "logging"] {
        assert!(
            result["capabilities"][capability].is_object(),
            "capability {capability} in {result}"
        );
    }
    assert!(
        result["serverInfo"]["name"].is_string(),
        "serverInfo in {result}"
    );
}

/// C20 step 3: after the handshake the header is checked on POST and GET: unknown or malformed is
/// 400; a missing header is accepted; a different revision we speak is accepted too (policy: the
/// session's negotiated revision still decides transport behaviour; the spec requires 400 only
/// for invalid or unsupported values, and the conformance suite sends 2025-03-26 on a 2025-11-25
/// session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_protocol_version_header_is_validated() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    for bad in ["1900-01-01", "not-a-version", "2099-01-01", ""] {
        let headers = client.post_headers().set("MCP-Protocol-Version", bad);
        let body = Some(msg::bare(2, "tools/list").to_string());
        let reply = client.send(Method::POST, &urls[1], &headers, body).await;
        expect::refused_plain(
            reply,
            StatusCode::BAD_REQUEST,
            &format!("POST with MCP-Protocol-Version {bad:?}"),
        )
        .await;
        let headers = client
            .session_headers()
            .set("MCP-Protocol-Version", bad)
            .set("Accept", "text/event-stream");
        let reply = client.send(Method::GET, &urls[2], &headers, None).await;
        expect::refused_plain(
            reply,
            StatusCode::BAD_REQUEST,
            &format!("GET with MCP-Protocol-Version {bad:?}"),
        )
        .await;
    }
    let headers = client.post_headers().remove("MCP-Protocol-Version");
    let reply = client
        .send(
            Method::POST,
            &urls[2],
            &headers,
            Some(msg::bare(3, "tools/list").to_string()),
        )
        .await;
    let answer = reply.answer(json!(3), T).await;
    assert!(
        answer.response["result"]["tools"].is_array(),
        "missing header is accepted: {}",
        answer.response
    );
    for (id, other) in [(4, "2025-11-25"), (5, "2025-03-26")] {
        let headers = client.post_headers().set("MCP-Protocol-Version", other);
        let body = Some(msg::bare(id, "tools/list").to_string());
        let reply = client.send(Method::POST, &urls[0], &headers, body).await;
        let answer = reply.answer(json!(id), T).await;
        assert!(
            answer.response["result"]["tools"].is_array(),
            "supported revision {other} is accepted: {}",
            answer.response
        );
    }
}

/// C21 steps 1, 2, 4 and 5: no session is 400; requests between `initialize` and
/// `notifications/initialized` are served (ping gets `{}`); truncated or non-JSON-RPC bodies get
/// 400 with -32700 / -32600 and a null id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c21_lifecycle_order_and_garbage_bodies() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    let reply = McpClient::new()
        .post(&urls[0], &msg::bare(1, "tools/list"))
        .await;
    // Refused once the body was read: with the request's id (JSON-RPC 2.0 §5).
    let what = "tools/list with no session";
    expect::refused_with_id(reply, StatusCode::BAD_REQUEST, None, &json!(1), what).await;
    assert!(
        cluster.all_session_keys().is_empty(),
        "a refused request made keys"
    );

    let mut client = McpClient::new();
    client
        .initialize_only(&urls[0], "2025-06-18", json!({}))
        .await;
    let pong = client
        .post(&urls[1], &msg::bare(2, "ping"))
        .await
        .answer(json!(2), T)
        .await;
    assert_eq!(
        pong.response["result"],
        json!({}),
        "ping before initialized"
    );
    let listed = client
        .post(&urls[2], &msg::bare(3, "tools/list"))
        .await
        .answer(json!(3), T)
        .await;
    assert!(
        listed.response["result"]["tools"].is_array(),
        "tools/list before initialized: {}",
        listed.response
    );

    // Unparsable: id null (C21 step 5). Invalid with a readable id: answered with it (JSON-RPC
    // 2.0 §5: null only when the id could not be detected).
    let cases = [
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"#,
            expect::PARSE_ERROR,
            Value::Null,
        ),
        ("{", expect::PARSE_ERROR, Value::Null),
        (r#"{"foo":1}"#, expect::INVALID_REQUEST, Value::Null),
        (
            r#"{"jsonrpc":"1.0","id":6,"method":"ping"}"#,
            expect::INVALID_REQUEST,
            json!(6),
        ),
        ("42", expect::INVALID_REQUEST, Value::Null),
    ];
    for (i, (body, code, id)) in cases.into_iter().enumerate() {
        let reply = client.post_raw(&urls[i % 3], body).await;
        let what = format!("body {body:?}");
        expect::refused_with_id(reply, StatusCode::BAD_REQUEST, Some(code), &id, &what).await;
    }
}

/// C21 step 3: `notifications/initialized` on A and `tools/list` on B at the same moment; both
/// succeed every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c21_initialized_racing_a_request_on_another_node() {
    let cluster = Cluster::start(3, ClusterOptions::new());
    let urls = cluster.urls();
    for round in 0..50 {
        let mut client = McpClient::new();
        client
            .initialize_only(&urls[0], "2025-06-18", json!({}))
            .await;
        let list = msg::bare(2, "tools/list");
        let inited = msg::inited();
        let (note, listed) =
            tokio::join!(client.post(&urls[0], &inited), client.post(&urls[1], &list));
        expect::accepted(note, &format!("round {round}: INITED")).await;
        let listed = listed.answer(json!(2), T).await;
        assert!(
            listed.response["result"]["tools"].is_array(),
            "round {round}: {}",
            listed.response
        );
    }
}

/// The edge checks of POST: Accept (`*/*` counts; one type alone is case C18's, in
/// `cases_accept.rs`), Content-Type (parameters allowed), body size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_accept_content_type_and_size_rules() {
    let cluster = Cluster::start(3, ClusterOptions::new().set("http.max_body", 4096));
    let urls = cluster.urls();
    let mut client = McpClient::new();
    client.initialize(&urls[0], "2025-06-18").await;
    let list = Some(msg::bare(2, "tools/list").to_string());
    for accept in [
        "*/*",
        "application/json, text/event-stream",
        "text/event-stream, application/json;q=0.9",
    ] {
        let headers = client.post_headers().set("Accept", accept);
        let reply = client
            .send(Method::POST, &urls[1], &headers, list.clone())
            .await;
        assert_eq!(reply.status, StatusCode::OK, "Accept: {accept}");
        reply.answer(json!(2), T).await;
    }
    for accept in ["text/html", "application/json;q=0, text/event-stream;q=0"] {
        let headers = client.post_headers().set("Accept", accept);
        let reply = client
            .send(Method::POST, &urls[1], &headers, list.clone())
            .await;
        expect::refused_plain(
            reply,
            StatusCode::NOT_ACCEPTABLE,
            &format!("Accept: {accept}"),
        )
        .await;
    }
    let headers = client
        .post_headers()
        .set("Content-Type", "application/json; charset=utf-8");
    let reply = client
        .send(Method::POST, &urls[2], &headers, list.clone())
        .await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "Content-Type with a charset parameter"
    );
    reply.answer(json!(2), T).await;
    for ctype in ["text/plain", "application/x-www-form-urlencoded"] {
        let headers = client.post_headers().set("Content-Type", ctype);
        let reply = client
            .send(Method::POST, &urls[2], &headers, list.clone())
            .await;
        expect::refused_plain(
            reply,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!("Content-Type: {ctype}"),
        )
        .await;
    }
    let big = msg::call(3, "echo", json!({"text": "x".repeat(8192)}));
    let reply = client.post(&urls[0], &big).await;
    expect::refused_plain(
        reply,
        StatusCode::PAYLOAD_TOO_LARGE,
        "an 8 KiB body over http.max_body 4096",
    )
    .await;
    let big_init = McpClient::new()
        .post(
            &urls[0],
            &msg::init("2025-06-18", json!({"pad": "x".repeat(8192)})),
        )
        .await;
    expect::refused_plain(
        big_init,
        StatusCode::PAYLOAD_TOO_LARGE,
        "an oversized initialize",
    )
    .await;
    assert_eq!(
        cluster.session_ids_in_redis().len(),
        1,
        "refusals created sessions"
    );
}

/// Origin (403 when present and neither loopback nor allowed) and Host (421 when not loopback on
/// a loopback-bound node); refusals create no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_and_host_are_checked() {
    let options = ClusterOptions::new().set("http.allowed_origins", r#"["https://app.example"]"#);
    let cluster = Cluster::start(3, options);
    let urls = cluster.urls();
    let port = cluster.node(0).port();
    let init = Some(msg::init("2025-11-25", json!({})).to_string());
    let anonymous = McpClient::new();
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example",
        "null",
    ] {
        let headers = anonymous.post_headers().set("Origin", origin);
        let reply = anonymous
            .send(Method::POST, &urls[0], &headers, init.clone())
            .await;
        expect::refused_plain(
            reply,
            StatusCode::FORBIDDEN,
            &format!("initialize with Origin {origin}"),
        )
        .await;
    }
    for host in ["evil.example", &format!("evil.example:{port}"), "10.0.0.1"] {
        let headers = anonymous.post_headers().set("Host", host);
        let reply = anonymous
            .send(Method::POST, &urls[0], &headers, init.clone())
            .await;
        expect::refused_plain(
            reply,
            StatusCode::MISDIRECTED_REQUEST,
            &format!("initialize with Host {host}"),
        )
        .await;
    }
    assert!(
        cluster.all_session_keys().is_empty(),
        "refused initializes made keys"
    );
    let loopback = format!("http://localhost:{port}");
    for origin in [loopback.as_str(), "http://127.0.0.1", "https://app.example"] {
        let headers = anonymous.post_headers().set("Origin", origin);
        let reply = anonymous
            .send(Method::POST, &urls[0], &headers, init.clone())
            .await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "initialize with allowed Origin {origin}"
        );
    }
    let localhost = format!("localhost:{port}");
    let headers = anonymous.post_headers().set("Host", &localhost);
    let reply = anonymous
        .send(Method::POST, &urls[0], &headers, init.clone())
        .await;
    assert_eq!(reply.status, StatusCode::OK, "Host {localhost}");

    let mut client = McpClient::new();
    client.initialize(&urls[1], "2025-11-25").await;
    let headers = client.post_headers().set("Origin", "http://evil.example");
    let reply = client
        .send(
            Method::POST,
            &urls[2],
            &headers,
            Some(msg::bare(2, "tools/list").to_string()),
        )
        .await;
    expect::refused_plain(
        reply,
        StatusCode::FORBIDDEN,
        "tools/list on a live session with a foreign Origin",
    )
    .await;
}

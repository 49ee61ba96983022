//! Rows about the HTTP framing and headers, event ids and session ids, sizes, batches, requests
//! before `initialize`, answers nobody asked for, and bearer tokens.

use serde_json::{json, Value};

use super::rows::{get_headers, http, post_headers, row, Ctx, Row, Target, Want};

const INVALID: i64 = -32600;
const NOT_FOUND: i64 = -32001;

const LIST: &str = r#"{"jsonrpc":"2.0","id":30,"method":"tools/list"}"#;

/// Headers sent twice, with conflicting values, or framing that could smuggle a request.
pub fn headers(ctx: &Ctx) -> Vec<Row> {
    let base = |extra: &[(&'static str, String)]| {
        let mut h = post_headers(&ctx.s0618, "2025-06-18");
        h.extend_from_slice(extra);
        h
    };
    let mut rows = Vec::new();
    let two_sids = base(&[("Mcp-Session-Id", ctx.bystander.clone())]);
    rows.push(row(
        "two Mcp-Session-Id",
        Target::Node(0),
        http("POST", &two_sids, LIST.as_bytes()),
        Want::Rpc(400, INVALID, "Mcp-Session-Id", json!(30)),
    ));
    let two_ct = base(&[("Content-Type", "text/plain".into())]);
    let two_last = get_headers(&ctx.s1125, Some("a_1-0"))
        .into_iter()
        .chain([("Last-Event-ID", ctx.bystander_event.clone())])
        .collect::<Vec<_>>();
    rows.push(row(
        "two Last-Event-ID",
        Target::Node(0),
        http("GET", &two_last, b""),
        Want::Rpc(400, INVALID, "Last-Event-ID", Value::Null),
    ));
    rows.push(row(
        "two Content-Type",
        Target::Node(1),
        http("POST", &two_ct, LIST.as_bytes()),
        Want::Rpc(400, INVALID, "Content-Type", Value::Null),
    ));
    let two_pv = base(&[("MCP-Protocol-Version", "2025-03-26".into())]);
    rows.push(row(
        "two MCP-Protocol-Version",
        Target::Node(0),
        http("POST", &two_pv, LIST.as_bytes()),
        Want::Rpc(400, INVALID, "MCP-Protocol-Version", json!(30)),
    ));
    let two_hosts = base(&[("Host", "evil.example".into())]);
    rows.push(row(
        "two Host (an allowed one, then a foreign one)",
        Target::Node(1),
        http("POST", &two_hosts, LIST.as_bytes()),
        Want::Rpc(400, INVALID, "Host", Value::Null),
    ));
    let two_origins = base(&[
        ("Origin", "http://localhost".into()),
        ("Origin", "http://evil.example".into()),
    ]);
    rows.push(row(
        "two Origin (an allowed one, then a foreign one)",
        Target::Node(0),
        http("POST", &two_origins, LIST.as_bytes()),
        Want::Rpc(400, INVALID, "Origin", Value::Null),
    ));
    let two_cl = base(&[
        ("Content-Length", LIST.len().to_string()),
        ("Content-Length", "5".into()),
    ]);
    rows.push(row(
        "Content-Length twice, different",
        Target::Node(1),
        http("POST", &two_cl, LIST.as_bytes()),
        Want::Http(400),
    ));
    // CL.TE: a front end reading Content-Length would pass the smuggled GET inside the body.
    let smuggled = "0\r\n\r\nGET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let cl_te = base(&[
        ("Content-Length", smuggled.len().to_string()),
        ("Transfer-Encoding", "chunked".into()),
    ]);
    rows.push(row(
        "CL+TE smuggling",
        Target::Node(0),
        http("POST", &cl_te, smuggled.as_bytes()),
        Want::Http(400),
    ));
    let te_odd = base(&[("Transfer-Encoding", "xchunked".into())]);
    rows.push(row(
        "Transfer-Encoding xchunked",
        Target::Node(1),
        http("POST", &te_odd, LIST.as_bytes()),
        Want::Http(400),
    ));
    let te_te = base(&[
        ("Transfer-Encoding", "chunked".into()),
        ("Transfer-Encoding", "identity".into()),
    ]);
    rows.push(row(
        "Transfer-Encoding chunked, identity",
        Target::Node(0),
        http("POST", &te_te, b"0\r\n\r\n"),
        Want::Http(400),
    ));
    let cl_neg = base(&[("Content-Length", "-1".into())]);
    rows.push(row(
        "Content-Length -1",
        Target::Node(1),
        http("POST", &cl_neg, LIST.as_bytes()),
        Want::Http(400),
    ));
    // Issue 35: a framing error is 400 naming it, not 413 (RFC 9112 §7.1).
    let chunked = base(&[("Transfer-Encoding", "chunked".into())]);
    let bad_chunk = format!("zz\r\n{LIST}\r\n0\r\n\r\n");
    rows.push(row(
        "malformed chunk size (zz)",
        Target::Node(1),
        http("POST", &chunked, bad_chunk.as_bytes()),
        Want::Rpc(400, INVALID, "not framed as HTTP/1.1 says", Value::Null),
    ));
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is 400; §3.2.2: an absolute-form target's
    // authority is the host checked, whatever Host says.
    let sent = http("POST", &base(&[]), LIST.as_bytes());
    let without_host = String::from_utf8(sent.clone())
        .unwrap()
        .replace("Host: 127.0.0.1\r\n", "");
    rows.push(row(
        "HTTP/1.1 without Host",
        Target::Node(0),
        without_host.into_bytes(),
        Want::Rpc(400, INVALID, "Host header", Value::Null),
    ));
    let absolute =
        String::from_utf8(sent)
            .unwrap()
            .replacen("POST /mcp", "POST http://evil.example/mcp", 1);
    rows.push(row(
        "absolute-form target on a foreign host",
        Target::Node(1),
        absolute.into_bytes(),
        Want::Rpc(421, INVALID, "evil.example", Value::Null),
    ));
    let cl_huge = base(&[("Content-Length", "99999999999999999999".into())]);
    rows.push(row(
        "Content-Length past u64",
        Target::Node(0),
        http("POST", &cl_huge, LIST.as_bytes()),
        Want::Http(400),
    ));
    rows
}

/// Header injection through `Mcp-Session-Id` and `Last-Event-ID`, and ids nobody issued.
pub fn injection(ctx: &Ctx) -> Vec<Row> {
    let with_sid = |sid: &str| {
        let mut h = post_headers("", "2025-06-18");
        h.push(("Mcp-Session-Id", sid.to_owned()));
        http("POST", &h, LIST.as_bytes())
    };
    let get = |last: &str| http("GET", &get_headers(&ctx.s1125, Some(last)), b"");
    // Refused once the body was read: with the request's id (JSON-RPC 2.0 §5).
    let nf = || Want::Rpc(404, NOT_FOUND, "", json!(30));
    let bad_last = || Want::Rpc(400, INVALID, "Last-Event-ID", Value::Null);
    let (stream, _) = ctx.bystander_event.split_once('_').expect("event id");
    vec![
        row(
            "Mcp-Session-Id with CR LF inside",
            Target::Node(0),
            with_sid(&format!("{}\r\nX-Injected: 1", ctx.s0618)),
            Want::Result(200, json!(30)),
        ),
        row(
            "Mcp-Session-Id with NUL",
            Target::Node(1),
            with_sid(&format!("{}\0x", ctx.s0618)),
            Want::Http(400),
        ),
        row(
            "Mcp-Session-Id with bare CR",
            Target::Node(0),
            with_sid(&format!("{}\rx", ctx.s0618)),
            Want::Http(400),
        ),
        row(
            "Mcp-Session-Id folded (obs-fold)",
            Target::Node(1),
            with_sid(&format!("{}\r\n x", ctx.s0618)),
            Want::Http(400),
        ),
        row(
            "Mcp-Session-Id of 12 KB",
            Target::Node(0),
            with_sid(&"s".repeat(12 * 1024)),
            nf(),
        ),
        row(
            "Mcp-Session-Id not ASCII",
            Target::Node(1),
            with_sid("s\u{e9}ssion"),
            nf(),
        ),
        row("Mcp-Session-Id empty", Target::Node(0), with_sid(""), nf()),
        row(
            "guessed session id (hex)",
            Target::Node(1),
            with_sid("0123456789abcdef0123456789abcdef"),
            nf(),
        ),
        row(
            "guessed session id (a sibling of a real one)",
            Target::Node(0),
            with_sid(&sibling(&ctx.s0618)),
            nf(),
        ),
        row(
            "Last-Event-ID with NUL",
            Target::Node(1),
            get("abc\0def"),
            Want::Http(400),
        ),
        row(
            "Last-Event-ID with CR LF inside",
            Target::Node(0),
            get("a_1-0\r\nX-Injected: 1"),
            bad_last(),
        ),
        row(
            "Last-Event-ID of 12 KB",
            Target::Node(1),
            get(&"e".repeat(12 * 1024)),
            bad_last(),
        ),
        row(
            "Last-Event-ID garbage",
            Target::Node(0),
            get("garbage"),
            bad_last(),
        ),
        row(
            "Last-Event-ID forged stream",
            Target::Node(1),
            get("zzzzzzzzzzzz_1-0"),
            bad_last(),
        ),
        row(
            "Last-Event-ID of another session",
            Target::Node(0),
            get(&ctx.bystander_event),
            bad_last(),
        ),
        row(
            "Last-Event-ID far in the future",
            Target::Node(1),
            http(
                "GET",
                &get_headers(&ctx.bystander, Some(&format!("{stream}_99999999999999-0"))),
                b"",
            ),
            bad_last(),
        ),
        row(
            "Last-Event-ID position past u64",
            Target::Node(0),
            get(&format!("{stream}_99999999999999999999999-0")),
            bad_last(),
        ),
    ]
}

/// A session id that differs from `sid` in its last character.
fn sibling(sid: &str) -> String {
    let mut s: Vec<char> = sid.chars().collect();
    if let Some(last) = s.last_mut() {
        *last = if *last == 'a' { 'b' } else { 'a' };
    }
    s.into_iter().collect()
}

/// Oversized heads and bodies, and a request sent one byte at a time.
pub fn sizes(ctx: &Ctx) -> Vec<Row> {
    let mut big_head = post_headers(&ctx.s0618, "2025-06-18");
    big_head.push(("X-Padding", "p".repeat(20 * 1024)));
    let many_headers: Vec<(&'static str, String)> = post_headers(&ctx.s0618, "2025-06-18")
        .into_iter()
        .chain((0..2000).map(|_| ("X-Many", "v".to_owned())))
        .collect();
    let big_body = format!(
        r#"{{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "b".repeat(5 << 20)
    );
    let mut declared = post_headers(&ctx.s0618, "2025-06-18");
    declared.push(("Content-Length", (64u64 << 20).to_string()));
    let h = post_headers(&ctx.s0618, "2025-06-18");
    let mut rows = vec![
        row(
            "head of 20 KB",
            Target::Node(0),
            http("POST", &big_head, LIST.as_bytes()),
            Want::Http(431),
        ),
        row(
            "2,000 headers",
            Target::Node(1),
            http("POST", &many_headers, LIST.as_bytes()),
            Want::Http(431),
        ),
        row(
            "body of 5 MB",
            Target::Node(0),
            http("POST", &h, big_body.as_bytes()),
            Want::Rpc(413, INVALID, "", Value::Null),
        ),
        row(
            "Content-Length 64 MB, no body",
            Target::Node(1),
            http("POST", &declared, b""),
            Want::Rpc(413, INVALID, "", Value::Null),
        ),
    ];
    let mut slow = row(
        "tools/list one byte per write",
        Target::Node(0),
        http("POST", &h, LIST.as_bytes()),
        Want::Result(200, json!(30)),
    );
    slow.one_byte = true;
    rows.push(slow);
    let mut slow_big = row(
        "head of 20 KB one byte per write",
        Target::Node(1),
        http("POST", &big_head, LIST.as_bytes()),
        Want::Http(431),
    );
    slow_big.one_byte = true;
    rows.push(slow_big);
    rows
}

/// Batches in every revision, requests before `initialize`, revisions that differ from the
/// session's, and answers to server requests that never happened.
pub fn protocol(ctx: &Ctx) -> Vec<Row> {
    let batch = r#"[{"jsonrpc":"2.0","id":50,"method":"tools/list"},{"jsonrpc":"2.0","id":51,"method":"ping"}]"#;
    let post =
        |sid: &str, rev: &str, body: &str| http("POST", &post_headers(sid, rev), body.as_bytes());
    let refused_batch = || Want::Rpc(400, INVALID, "batch", Value::Null);
    let answer = r#"{"jsonrpc":"2.0","id":"never-asked-1","result":{}}"#;
    let error_answer = r#"{"jsonrpc":"2.0","id":987654,"error":{"code":-1,"message":"no"}}"#;
    let init_batch = format!("[{}]", super::rows_init_json());
    vec![
        row(
            "batch in 2024-11-05",
            Target::Node(0),
            post(&ctx.s1105, "2024-11-05", batch),
            refused_batch(),
        ),
        row(
            "batch in 2025-03-26",
            Target::Node(1),
            post(&ctx.s0326, "2025-03-26", batch),
            Want::Result(200, json!([50, 51])),
        ),
        row(
            "empty batch in 2025-03-26",
            Target::Node(0),
            post(&ctx.s0326, "2025-03-26", "[]"),
            Want::Rpc(400, INVALID, "empty batch", Value::Null),
        ),
        row(
            "initialize inside a batch (2025-03-26)",
            Target::Node(1),
            post("", "2025-03-26", &init_batch),
            Want::Rpc(400, INVALID, "initialize", Value::Null),
        ),
        row(
            "batch in 2025-06-18",
            Target::Node(0),
            post(&ctx.s0618, "2025-06-18", batch),
            refused_batch(),
        ),
        row(
            "batch in 2025-11-25",
            Target::Node(1),
            post(&ctx.s1125, "2025-11-25", batch),
            refused_batch(),
        ),
        row(
            "tools/list before initialize",
            Target::Node(0),
            post("", "2025-06-18", LIST),
            Want::Rpc(400, INVALID, "Mcp-Session-Id", json!(30)),
        ),
        row(
            "notifications/initialized before initialize",
            Target::Node(1),
            post(
                "",
                "2025-06-18",
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            ),
            Want::Rpc(400, INVALID, "Mcp-Session-Id", Value::Null),
        ),
        row(
            "GET before initialize",
            Target::Node(0),
            http("GET", &[("Accept", "text/event-stream".into())], b""),
            Want::Rpc(400, INVALID, "Mcp-Session-Id", Value::Null),
        ),
        // A revision the node speaks is accepted on any session (400 is for an invalid or unsupported
        // one, MCP 2025-06-18; the conformance suite sends 2025-03-26 on a 2025-11-25 session); the
        // session's own revision keeps deciding its behaviour: this batch is still refused.
        row(
            "MCP-Protocol-Version older than the session's",
            Target::Node(1),
            post(&ctx.s0618, "2025-03-26", LIST),
            Want::Result(200, json!(30)),
        ),
        row(
            "batch under an older MCP-Protocol-Version than the session's",
            Target::Node(0),
            post(&ctx.s0618, "2025-03-26", batch),
            refused_batch(),
        ),
        row(
            "MCP-Protocol-Version unknown",
            Target::Node(0),
            post(&ctx.s0618, "1999-01-01", LIST),
            Want::Rpc(400, INVALID, "MCP-Protocol-Version", json!(30)),
        ),
        row(
            "answer to a server request that never happened",
            Target::Node(1),
            post(&ctx.s0618, "2025-06-18", answer),
            Want::Empty(202),
        ),
        row(
            "error answer to a server request that never happened",
            Target::Node(0),
            post(&ctx.s0618, "2025-06-18", error_answer),
            Want::Empty(202),
        ),
        row(
            "DELETE of a guessed session",
            Target::Node(1),
            http(
                "DELETE",
                &[("Mcp-Session-Id", "0123456789abcdef0123456789abcdef".into())],
                b"",
            ),
            Want::Rpc(404, NOT_FOUND, "", Value::Null),
        ),
    ]
}

/// Bearer tokens of every shape on the node with authorization on.
pub fn tokens(ctx: &Ctx) -> Vec<Row> {
    let init = super::rows_init_json();
    ctx.tokens
        .iter()
        .map(|(name, auth, status)| {
            let mut h = post_headers("", "");
            if !auth.is_empty() {
                h.push(("Authorization", auth.clone()));
            }
            row(
                format!("bearer: {name}"),
                Target::Auth,
                http("POST", &h, init.as_bytes()),
                Want::Rpc(*status, INVALID, "", Value::Null),
            )
        })
        .collect()
}

//! The hostile requests of `hostile_input.rs`, each with the answer it must get. Requests are raw
//! HTTP/1.1 bytes (`Connection: close`), so every row controls exactly what goes on the wire.

use serde_json::{json, Value};

/// Where a row is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Node `i` of the open cluster.
    Node(usize),
    /// The node with authorization on.
    Auth,
}

/// The answer a row must get.
#[derive(Clone, Debug)]
pub enum Want {
    /// This status and a JSON-RPC error body with this code, a message containing this text and
    /// exactly this id (`Value::Null` for `"id": null`).
    Rpc(u16, i64, &'static str, Value),
    /// This status and a JSON-RPC result (or, for a batch, an array of results) for this id.
    Result(u16, Value),
    /// This status and an empty body (a notification or response accepted).
    Empty(u16),
    /// This status, answered by the HTTP layer before any JSON-RPC (the body is not checked).
    Http(u16),
}

/// One hostile request.
pub struct Row {
    /// What it is.
    pub name: String,
    /// Where it goes.
    pub target: Target,
    /// The request bytes.
    pub bytes: Vec<u8>,
    /// Whether every byte is its own write.
    pub one_byte: bool,
    /// The answer it must get.
    pub want: Want,
}

/// What the rows refer to: sessions and event ids created before the table runs.
pub struct Ctx {
    /// A 2025-06-18 session the hostile rows use.
    pub s0618: String,
    /// A 2025-03-26 session (batches allowed).
    pub s0326: String,
    /// A 2024-11-05 session.
    pub s1105: String,
    /// A 2025-11-25 session.
    pub s1125: String,
    /// The bystander's session (2025-11-25).
    pub bystander: String,
    /// An event id of the bystander's streamed call.
    pub bystander_event: String,
    /// Bearer tokens for the auth node: (name, `Authorization` value, expected status).
    pub tokens: Vec<(String, String, u16)>,
}

/// A request: request line, `Host`, `Connection: close`, `headers`, `Content-Length` (unless a
/// header sets it or there is no body), then the body.
pub fn http(method: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    let sets_length = headers.iter().any(|(n, _)| {
        n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding")
    });
    if !sets_length && (method == "POST" || !body.is_empty()) {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// The POST headers of a client of session `sid` at `rev` (either may be empty: not sent).
pub fn post_headers(sid: &str, rev: &str) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
    ];
    if !sid.is_empty() {
        h.push(("Mcp-Session-Id", sid.to_owned()));
    }
    if !rev.is_empty() {
        h.push(("MCP-Protocol-Version", rev.to_owned()));
    }
    h
}

/// The GET headers of a client of session `sid` at 2025-11-25, resuming after `last` (when
/// given).
pub fn get_headers(sid: &str, last: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("Accept", "text/event-stream".to_owned()),
        ("Mcp-Session-Id", sid.to_owned()),
        ("MCP-Protocol-Version", "2025-11-25".to_owned()),
    ];
    if let Some(l) = last {
        h.push(("Last-Event-ID", l.to_owned()));
    }
    h
}

/// A row sent in one write.
pub fn row(name: impl Into<String>, target: Target, bytes: Vec<u8>, want: Want) -> Row {
    Row {
        name: name.into(),
        target,
        bytes,
        one_byte: false,
        want,
    }
}

const INVALID: i64 = -32600;
const PARSE: i64 = -32700;
const PARAMS: i64 = -32602;

/// A 2025-06-18 POST of `body` on the hostile session, to node `i % 2`.
fn on_session(ctx: &Ctx, i: usize, name: &str, body: &[u8], want: Want) -> Row {
    let h = post_headers(&ctx.s0618, "2025-06-18");
    row(name, Target::Node(i % 2), http("POST", &h, body), want)
}

/// Bodies that are not one readable JSON-RPC message.
pub fn malformed(ctx: &Ctx) -> Vec<Row> {
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_args = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"echo","arguments":{}1{}}}}}"#,
        r#"{"a":"#.repeat(10_000),
        "}".repeat(10_000)
    );
    let mut utf8 = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#.to_vec();
    utf8.extend_from_slice(b"\xff\xfe\xc3\x28");
    utf8.extend_from_slice(br#""}}}"#);
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(br#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#);
    let cases: Vec<(&str, Vec<u8>, Want)> = vec![
        ("truncated {", b"{".to_vec(), Want::Rpc(400, PARSE, "parse error", Value::Null)),
        (
            "truncated request",
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list""#.to_vec(),
            Want::Rpc(400, PARSE, "parse error", Value::Null),
        ),
        ("empty body", Vec::new(), Want::Rpc(400, PARSE, "parse error", Value::Null)),
        ("JSON null", b"null".to_vec(), Want::Rpc(400, INVALID, "", Value::Null)),
        ("JSON number", b"42".to_vec(), Want::Rpc(400, INVALID, "", Value::Null)),
        ("JSON string", br#""tools/list""#.to_vec(), Want::Rpc(400, INVALID, "", Value::Null)),
        ("invalid UTF-8 in a string", utf8, Want::Rpc(400, PARSE, "parse error", Value::Null)),
        (
            "lone surrogate escape",
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud800"}}}"#.to_vec(),
            Want::Rpc(400, PARSE, "parse error", Value::Null),
        ),
        ("byte-order mark first", bom, Want::Rpc(400, PARSE, "parse error", Value::Null)),
        (
            "trailing garbage",
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}x"#.to_vec(),
            Want::Rpc(400, PARSE, "parse error", Value::Null),
        ),
        ("10,000-deep array", deep_array.into_bytes(), Want::Rpc(400, PARSE, "recursion", Value::Null)),
        ("10,000-deep arguments", deep_args.into_bytes(), Want::Rpc(400, PARSE, "recursion", Value::Null)),
        (
            "no jsonrpc member",
            br#"{"id":8,"method":"tools/list"}"#.to_vec(),
            Want::Rpc(400, INVALID, "jsonrpc", json!(8)),
        ),
        (
            "jsonrpc 1.0",
            br#"{"jsonrpc":"1.0","id":9,"method":"tools/list"}"#.to_vec(),
            Want::Rpc(400, INVALID, "jsonrpc", json!(9)),
        ),
        (
            "method a number",
            br#"{"jsonrpc":"2.0","id":10,"method":42}"#.to_vec(),
            Want::Rpc(400, INVALID, "method", json!(10)),
        ),
        (
            "unknown method",
            br#"{"jsonrpc":"2.0","id":11,"method":"no/such"}"#.to_vec(),
            Want::Rpc(200, -32601, "", json!(11)),
        ),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (name, body, want))| on_session(ctx, i, name, &body, want))
        .collect()
}

/// Ids of every odd shape on `tools/list`.
pub fn ids(ctx: &Ctx) -> Vec<Row> {
    let long = "i".repeat(1 << 20);
    let cases: Vec<(&str, String, Want)> = vec![
        // JSON-RPC 2.0 §4: numbers SHOULD NOT have fractions; the schema's `RequestId` is any
        // number, and the node keeps fractions exactly: answered with the same id.
        ("float id", "1.5".into(), Want::Result(200, json!(1.5))),
        (
            "null id",
            "null".into(),
            Want::Rpc(400, INVALID, "id", Value::Null),
        ),
        (
            "object id",
            r#"{"a":1}"#.into(),
            Want::Rpc(400, INVALID, "id", Value::Null),
        ),
        (
            "array id",
            "[1]".into(),
            Want::Rpc(400, INVALID, "id", Value::Null),
        ),
        (
            "bool id",
            "true".into(),
            Want::Rpc(400, INVALID, "id", Value::Null),
        ),
        (
            "huge integer id",
            "123456789012345678901234567890".into(),
            Want::Rpc(400, INVALID, "id", Value::Null),
        ),
        ("negative id", "-1".into(), Want::Result(200, json!(-1))),
        // A string id of any length is valid (the body is within `http.max_body`).
        (
            "1 MB string id",
            format!("\"{long}\""),
            Want::Result(200, json!(long)),
        ),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (name, id, want))| {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            on_session(ctx, i, name, body.as_bytes(), want)
        })
        .collect()
}

/// `initialize` with a wrong type in every field it reads (no session yet).
pub fn initialize(ctx: &Ctx) -> Vec<Row> {
    let info = json!({"name": "hostile", "version": "0"});
    let init = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let full = |k: &str, v: Value| {
        let mut p =
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info});
        p[k] = v;
        init(p)
    };
    let without = |k: &str| {
        let mut p =
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info});
        p.as_object_mut().expect("object").remove(k);
        init(p)
    };
    let bad = |what: &'static str| Want::Rpc(200, PARAMS, what, json!(1));
    let mut cases: Vec<(String, Value, Want)> = vec![
        (
            "params a number".into(),
            init(json!(5)),
            Want::Rpc(400, INVALID, "params", json!(1)),
        ),
        (
            "params absent".into(),
            json!({"jsonrpc":"2.0","id":1,"method":"initialize"}),
            bad("protocolVersion"),
        ),
        (
            "protocolVersion a number".into(),
            full("protocolVersion", json!(20250618)),
            bad("protocolVersion"),
        ),
        (
            "protocolVersion absent".into(),
            without("protocolVersion"),
            bad("protocolVersion"),
        ),
        (
            "capabilities a string".into(),
            full("capabilities", json!("all")),
            bad("capabilities"),
        ),
        (
            "capabilities absent".into(),
            without("capabilities"),
            bad("capabilities"),
        ),
        (
            "clientInfo a number".into(),
            full("clientInfo", json!(7)),
            bad("clientInfo"),
        ),
        (
            "clientInfo absent".into(),
            without("clientInfo"),
            bad("clientInfo"),
        ),
        (
            "clientInfo.name a number".into(),
            full("clientInfo", json!({"name": 1, "version": "0"})),
            bad("name"),
        ),
        (
            "clientInfo.version an array".into(),
            full("clientInfo", json!({"name": "x", "version": []})),
            bad("version"),
        ),
    ];
    cases.push((
        "initialize as a notification".into(),
        json!({"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":info}}),
        Want::Rpc(400, INVALID, "initialize", Value::Null),
    ));
    let mut rows: Vec<Row> = cases
        .into_iter()
        .enumerate()
        .map(|(i, (name, body, want))| {
            let h = post_headers("", "");
            row(
                format!("initialize: {name}"),
                Target::Node(i % 2),
                http("POST", &h, body.to_string().as_bytes()),
                want,
            )
        })
        .collect();
    let second = msg_init(7, "2025-06-18");
    let h = post_headers(&ctx.s0618, "2025-06-18");
    rows.push(row(
        "second initialize on an existing session",
        Target::Node(1),
        http("POST", &h, second.to_string().as_bytes()),
        Want::Rpc(400, INVALID, "already initialized", json!(7)),
    ));
    rows
}

fn msg_init(id: i64, rev: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion": rev, "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}}})
}

/// `tools/call` with a wrong type in every field it reads.
pub fn tools_call(ctx: &Ctx) -> Vec<Row> {
    let call =
        |params: Value| json!({"jsonrpc":"2.0","id":20,"method":"tools/call","params":params});
    let bad = |what: &'static str| Want::Rpc(200, PARAMS, what, json!(20));
    let cases: Vec<(&str, Value, Want)> = vec![
        (
            "params absent",
            json!({"jsonrpc":"2.0","id":20,"method":"tools/call"}),
            bad(""),
        ),
        ("params an array", call(json!(["echo"])), bad("")),
        (
            "name a number",
            call(json!({"name": 5, "arguments": {}})),
            bad("name"),
        ),
        ("name absent", call(json!({"arguments": {}})), bad("name")),
        (
            "name unknown",
            call(json!({"name": "no-such-tool", "arguments": {}})),
            bad(""),
        ),
        (
            "name 1 MB",
            call(json!({"name": "n".repeat(1 << 20), "arguments": {}})),
            bad(""),
        ),
        (
            "arguments a string",
            call(json!({"name": "echo", "arguments": "text"})),
            bad("arguments"),
        ),
        (
            "arguments an array",
            call(json!({"name": "echo", "arguments": [1]})),
            bad("arguments"),
        ),
        (
            "_meta a string",
            call(json!({"name": "echo", "arguments": {"text": "x"}, "_meta": "m"})),
            bad("_meta"),
        ),
        (
            "progressToken an object",
            call(
                json!({"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": {"a": 1}}}),
            ),
            bad("progressToken"),
        ),
        (
            "progressToken a bool",
            call(
                json!({"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": true}}),
            ),
            bad("progressToken"),
        ),
        (
            "progressToken 1 KB",
            call(
                json!({"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": "p".repeat(1024)}}),
            ),
            bad("progressToken"),
        ),
    ];
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (name, body, want))| {
            on_session(
                ctx,
                i,
                &format!("tools/call: {name}"),
                body.to_string().as_bytes(),
                want,
            )
        })
        .collect()
}

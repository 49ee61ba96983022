//! # switchboard-fuzz
//!
//! What the fuzz targets (`fuzz_targets/*.rs`, run by `cargo fuzz run <target>`) do with one
//! input, as plain functions: the targets call them under libFuzzer, and the workspace test
//! `tests/tests/fuzz_corpus.rs` replays every file of `corpus/<target>/` through them (so the
//! corpus is a regression test without cargo-fuzz). Each function panics only when the code under
//! test panics or breaks one of the properties checked here.
//!
//! Targets ([`TARGETS`]):
//! - `jsonrpc_envelope`: a POST body through `Body::parse` (switchboard-protocol); request ids
//!   survive their store key.
//! - `sse_parser`: an upstream's `text/event-stream` body through the upstream crate's reader,
//!   cut into network reads by the input; the events do not depend on where the reads end.
//! - `event_id`: `Last-Event-ID` / `Mcp-Session-Id` text through the id parsers; a parsed event
//!   id prints back to itself.
//! - `param_headers`: `Mcp-Param-*` / `Mcp-Name` values (`=?base64?…?=`), `x-mcp-header`
//!   declarations of a tool schema, and the node's 2026-07-28 request checks on fuzzed headers.
//! - `mrtr_state`: a client's `requestState` opened by the MRTR key ring, and sealed payloads of
//!   any shape read back as a retry.
//! - `config_loader`: a TOML config file (and `--set` flags) through the binary's loader and
//!   everything a node builds from the config.

use serde_json::{json, Value};

/// The fuzz targets, by name (each has `fuzz_targets/<name>.rs` and `corpus/<name>/`).
pub const TARGETS: [&str; 6] = [
    "jsonrpc_envelope",
    "sse_parser",
    "event_id",
    "param_headers",
    "mrtr_state",
    "config_loader",
];

/// Runs target `name` on one input. Panics on an unknown name.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "jsonrpc_envelope" => jsonrpc_envelope(data),
        "sse_parser" => sse_parser(data),
        "event_id" => event_id(data),
        "param_headers" => param_headers(data),
        "mrtr_state" => mrtr_state(data),
        "config_loader" => config_loader(data),
        other => panic!("no fuzz target {other:?}"),
    }
}

/// A POST body: parsed, classified; every request id comes back from its store key.
pub fn jsonrpc_envelope(data: &[u8]) {
    use switchboard_protocol::jsonrpc::{error_response, Body, Message, RequestId};
    let Ok(body) = Body::parse(data) else {
        return;
    };
    for m in body.messages() {
        let _ = (m.method(), m.raw(), m.is_request());
        if let Message::Request { id, .. } | Message::Response { id: Some(id), .. } = m {
            let back = RequestId::from_key(&id.key());
            assert_eq!(
                back.as_ref(),
                Some(id),
                "id {} lost through its key",
                id.key()
            );
            let _ = error_response(Some(id), -32600, "x", None);
        }
    }
}

/// An event-stream body cut into reads as the first byte says; the events (and the error that
/// ends the stream) are the same as when the body comes in one read.
pub fn sse_parser(data: &[u8]) {
    use switchboard_upstream::fuzzing::read_all_events;
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(cut % 17) + 1;
    let max = 64 + usize::from(cut) * 16;
    let chunks: Vec<Vec<u8>> = body.chunks(step).map(<[u8]>::to_vec).collect();
    let cut_up = read_all_events(chunks, max);
    let whole = read_all_events(vec![body.to_vec()], max);
    assert_eq!(cut_up, whole, "reads of {step} bytes differ from one read");
}

/// Session, stream and event ids from a header: parsers never panic and a parsed event id
/// prints back to the text it came from.
pub fn event_id(data: &[u8]) {
    use switchboard_protocol::ids::{position_order, EventId, SessionId, StreamId};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(id) = EventId::parse(text) {
        assert_eq!(id.to_string(), text, "event id does not print back");
        let (ms, seq) = id.order();
        assert!(format!("{ms}-{seq}").len() <= id.position.len());
    }
    let _ = position_order(text);
    if let Some(s) = StreamId::parse(text) {
        assert_eq!(s.as_str(), text);
        let _ = s.is_standalone();
    }
    if let Some(s) = SessionId::parse(text) {
        assert_eq!(s.as_str(), text);
    }
    let _ = StreamId::is_standalone_answered(text);
}

/// Header value decoding, `x-mcp-header` declarations and the node's stateless request checks.
/// Input: `value \0 schema-json \0 arguments-json \0 header lines (name: value)`.
pub fn param_headers(data: &[u8]) {
    use switchboard_protocol::{header_value, param_headers as ph};
    let mut parts = data.splitn(4, |&b| b == 0);
    let value = parts.next().unwrap_or_default();
    if let Ok(text) = header_value::decode(value) {
        let again = header_value::decode(header_value::encode(&text).as_bytes());
        assert_eq!(
            again.as_ref(),
            Ok(&text),
            "encode then decode changes {text:?}"
        );
    }
    if let Ok(text) = std::str::from_utf8(value) {
        let enc = header_value::encode(text);
        assert_eq!(header_value::decode(enc.as_bytes()).as_deref(), Ok(text));
    }
    let schema: Value = json_or_null(parts.next());
    let arguments: Value = json_or_null(parts.next());
    let decls = ph::declarations(&schema);
    let sent: serde_json::Map<String, Value> = ph::headers_for(&decls, &arguments)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    // Arguments a header can carry (of the declared type; integers within JavaScript's safe
    // range) pass with the headers a client sends for them; others no client can mirror.
    let mirrorable = decls
        .iter()
        .all(|d| d.value(&arguments).is_none_or(|v| d.encode(v).is_some()));
    let checked = ph::check(&decls, &arguments, &sent);
    assert!(
        !mirrorable || checked.is_ok(),
        "the headers a client sends for the arguments are refused: {checked:?}"
    );
    let headers = header_map(parts.next().unwrap_or_default());
    let method = headers
        .get("mcp-method")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("tools/call")
        .to_owned();
    let params = json!({"name": "echo", "arguments": arguments, "_meta": schema});
    let _ = switchboard_node::fuzzing::stateless_checks(&headers, &method, &params);
    let _ = switchboard_node::fuzzing::stateless_checks(&headers, &method, &arguments);
}

fn json_or_null(bytes: Option<&[u8]>) -> Value {
    bytes
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null)
}

/// Header lines `name: value` (LF-separated) as a header map; lines that are no valid header
/// are skipped, repeated names are kept.
fn header_map(bytes: &[u8]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for line in bytes.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = line.split_at(colon);
        let value = value[1..].trim_ascii();
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    map
}

/// MRTR `requestState`: any text is opened without panic (and only a sealed one opens); any
/// payload sealed with the node's key is read back as a retry or refused, never a panic.
/// Input: first byte picks the case.
pub fn mrtr_state(data: &[u8]) {
    use switchboard_node::mrtr::{key_ring, Inputs};
    let ring = key_ring(&[[7u8; 32], [9u8; 32]]);
    let other = key_ring(&[[8u8; 32]]);
    let Some((&case, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match case % 3 {
        0 => {
            assert!(ring.open(&text).is_err() || other.open(&text).is_err());
        }
        1 => {
            let sealed = ring.seal(rest);
            assert_eq!(
                ring.open(&sealed).as_deref(),
                Ok(rest),
                "seal/open round trip"
            );
            assert!(other.open(&sealed).is_err(), "opened under a foreign key");
        }
        _ => {
            let sealed = ring.seal(rest);
            for state in [json!(sealed), json!(text), json!(null), json!(7)] {
                let params = json!({
                    "name": "echo", "arguments": {},
                    "requestState": state,
                    "inputResponses": {"q": {"action": "accept"}}
                });
                let _ = Inputs::from_request(&ring, "tools/call", &params, "anonymous", false);
                let _ = Inputs::from_request(&ring, "tools/call", &params, "alice", true);
            }
        }
    }
}

/// A config file (the input up to the first NUL) and `--set key=value` flags (the lines after
/// it) through the binary's loader; a config that loads also maps onto the node's, the store's
/// and the upstreams' configs, prints as TOML, and redacts without panicking.
pub fn config_loader(data: &[u8]) {
    use switchboard::load::{Override, Sources};
    let (file, flags) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let path = std::env::temp_dir().join(format!("switchboard-fuzz-{}.toml", std::process::id()));
    std::fs::write(&path, file).expect("write the fuzzed config file");
    let overrides = String::from_utf8_lossy(flags)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| Override {
            origin: format!("--set {k}={v}"),
            key: k.to_owned(),
            raw: v.to_owned(),
        })
        .collect();
    let sources = Sources {
        file: Some(path),
        env: Vec::new(),
        overrides,
    };
    if let Ok(config) = switchboard::load(&sources) {
        let _ = config.node_config(true);
        let _ = config.store_config();
        let _ = config.upstreams_config();
        let _ = config.redacted().to_toml();
    }
}

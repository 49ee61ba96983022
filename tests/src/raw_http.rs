//! A raw HTTP/1.1 exchange over one TCP connection, for requests an HTTP client library will not
//! send: a body that is not UTF-8, a header sent twice with different values, `Content-Length`
//! with `Transfer-Encoding` (request smuggling), bytes a header value may not hold, a head sent
//! one byte per write. The answer is read to the end of the connection (or until it is complete)
//! and parsed: status, headers, de-chunked body, and the JSON-RPC message in it (also from an SSE
//! body).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one exchange may take, from connecting to the end of the answer.
const LIMIT: Duration = Duration::from_secs(15);

/// A parsed answer.
#[derive(Clone, Debug)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// The headers in order, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked when it was chunked.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself when it is JSON, else the first SSE
    /// `data` that is a JSON-RPC response (has `result` or `error`). `None` when there is none.
    pub fn message(&self) -> Option<Value> {
        if let Ok(v) = serde_json::from_slice::<Value>(&self.body) {
            return Some(v);
        }
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
    }
}

/// Sends `request` (the whole request, head and body, as bytes) to `addr` (`host:port`) and
/// reads the first answer. With `one_byte_writes`, every byte of the request is its own write.
///
/// # Errors
/// The connection failed, closed before a whole status line and head arrived, or the exchange
/// took longer than 15 s (the text says which, with the bytes read).
pub async fn exchange(
    addr: &str,
    request: &[u8],
    one_byte_writes: bool,
) -> Result<RawResponse, String> {
    tokio::time::timeout(LIMIT, exchange_inner(addr, request, one_byte_writes))
        .await
        .map_err(|_| format!("no complete answer within {LIMIT:?}"))?
}

async fn exchange_inner(
    addr: &str,
    request: &[u8],
    one_byte_writes: bool,
) -> Result<RawResponse, String> {
    let mut tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    // A server may answer (and close) before the whole request is written: a failed write is
    // not the answer, the bytes read are.
    let written = if one_byte_writes {
        let mut result = Ok(());
        for b in request {
            result = tcp.write_all(std::slice::from_ref(b)).await;
            if result.is_err() {
                break;
            }
        }
        result
    } else {
        tcp.write_all(request).await
    };
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if let Some(done) = complete(&got) {
            return done;
        }
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    parse(&got).map_err(|e| {
        format!(
            "{e} (write: {written:?}); read {:?}",
            String::from_utf8_lossy(&got)
        )
    })
}

/// The answer, when `got` already holds a whole one (a body of `Content-Length` bytes, or the
/// last chunk); `None` while more is needed (or the body runs to the end of the connection).
fn complete(got: &[u8]) -> Option<Result<RawResponse, String>> {
    let end = find(got, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
    let rest = &got[end + 4..];
    if head.contains("transfer-encoding: chunked") {
        return find(rest, b"0\r\n\r\n").is_some().then(|| parse(got));
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())?;
    (rest.len() >= length).then(|| parse(got))
}

/// Parses a whole answer (status line, head, body).
fn parse(got: &[u8]) -> Result<RawResponse, String> {
    let end = find(got, b"\r\n\r\n").ok_or("no complete response head")?;
    let head = String::from_utf8_lossy(&got[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    let raw = &got[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(raw) } else { raw.to_vec() };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

/// The data of a chunked body (as much as is there).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = find(raw, b"\r\n") {
        let size = String::from_utf8_lossy(&raw[..line_end]);
        let Ok(size) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
        else {
            break;
        };
        let start = line_end + 2;
        if size == 0 || raw.len() < start + size {
            break;
        }
        out.extend_from_slice(&raw[start..start + size]);
        raw = raw.get(start + size + 2..).unwrap_or_default();
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

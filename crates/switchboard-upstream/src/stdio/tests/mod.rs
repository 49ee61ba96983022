//! Tests of the stdio upstream against a real child: `tests/fixtures/stdio_server.py` (Python 3,
//! standard library only), driven through [`Upstream::request`] with a fake client peer.
//!
//! - `framing`: the line reader and writer on their own (C27, C28).
//! - `lifecycle`: handshake, probe, exits, respawn, stopping and reaping (C21, C31).
//! - `restarts`: what counts as a failed start (C30, C32).
//! - `routing`: progress, sampling, cancellation, timeouts, notifications, ids (C22, C27–C29).
//! - `shared`: one child for several sessions (C03).

mod framing;
mod lifecycle;
mod restarts;
mod routing;
mod shared;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use switchboard_protocol::Revision;
use tokio_util::sync::CancellationToken;

use super::StdioUpstream;
use crate::upstream::{ClientPeer, PeerError, RequestContext, RpcError, Upstream};
use crate::LocalSession;

/// The real Python interpreter (not a version-manager shim, which needs more environment).
fn python() -> String {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = std::process::Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 is needed by the stdio tests");
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .clone()
}

/// The fixture server's path.
fn fixture() -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dir.join("tests/fixtures/stdio_server.py")
        .to_string_lossy()
        .into_owned()
}

/// A per-session upstream `fx` running the fixture with `opts`.
fn upstream(opts: &[&str]) -> StdioUpstream {
    build(opts, false, Duration::from_secs(20))
}

/// An upstream running the fixture with `opts`, shared or not, with `timeout`.
fn build(opts: &[&str], shared: bool, timeout: Duration) -> StdioUpstream {
    let mut args = vec!["-u".to_owned(), fixture()];
    args.extend(opts.iter().map(|s| s.to_string()));
    StdioUpstream::new(
        "fx",
        python(),
        args,
        Default::default(),
        None,
        shared,
        timeout,
    )
    .with_kill_grace(Duration::from_millis(300))
}

/// What the fake client received.
#[derive(Clone, Debug)]
struct Sent {
    /// `"request"` or `"standalone"`.
    route: &'static str,
    message: Value,
}

type Responder = Box<dyn Fn(&str, &Value) -> Result<Value, PeerError> + Send + Sync>;

/// A fake client: records notifications and requests, answers requests with a closure.
struct Peer {
    sent: Mutex<Vec<Sent>>,
    requests: Mutex<Vec<(String, Value)>>,
    responder: Responder,
}

impl Peer {
    fn new() -> Arc<Peer> {
        Peer::answering(|m, _| Err(PeerError::Delivery(format!("unexpected {m}"))))
    }

    fn answering(
        f: impl Fn(&str, &Value) -> Result<Value, PeerError> + Send + Sync + 'static,
    ) -> Arc<Peer> {
        Arc::new(Peer {
            sent: Mutex::default(),
            requests: Mutex::default(),
            responder: Box::new(f),
        })
    }

    fn sent(&self) -> Vec<Sent> {
        self.sent.lock().unwrap().clone()
    }

    fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ClientPeer for Peer {
    async fn notify(&self, message: Value) -> Result<(), PeerError> {
        let sent = Sent {
            route: "request",
            message,
        };
        self.sent.lock().unwrap().push(sent);
        Ok(())
    }

    async fn notify_standalone(&self, message: Value) -> Result<(), PeerError> {
        let sent = Sent {
            route: "standalone",
            message,
        };
        self.sent.lock().unwrap().push(sent);
        Ok(())
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        let answer = (self.responder)(method, &params);
        self.requests
            .lock()
            .unwrap()
            .push((method.to_owned(), params));
        answer
    }
}

/// The `initialize` params the test clients sent.
fn client_init() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "roots": {"listChanged": true}},
        "clientInfo": {"name": "test-client", "version": "0.1"}
    })
}

/// A request context of session `sid` on `peer`.
fn ctx(sid: &str, peer: &Arc<Peer>) -> RequestContext {
    RequestContext {
        session_id: sid.into(),
        revision: Revision::LATEST,
        client_capabilities: std::sync::Arc::new(client_init()["capabilities"].clone()),
        progress_token: None,
        cancel: CancellationToken::new(),
        peer: peer.clone(),
        session: Arc::new(LocalSession::new(sid, client_init())),
        principal: crate::Principal::anonymous(),
    }
}

/// `tools/call` of `tool` with `args`.
async fn call(
    up: &StdioUpstream,
    ctx: RequestContext,
    tool: &str,
    args: Value,
) -> Result<Value, RpcError> {
    let params = json!({"name": tool, "arguments": args});
    up.request("tools/call", params, ctx).await
}

/// The first text block of a tool result.
fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().expect("a text block")
}

/// The fixture's `info` tool: what the child received and its pid.
async fn info(up: &StdioUpstream, sid: &str) -> Value {
    let result = call(up, ctx(sid, &Peer::new()), "info", json!({})).await;
    result.expect("info")["info"].clone()
}

/// The state letter of process `pid` (`R`, `S`, `Z`, …) from `/proc/<pid>/stat`, or `None`
/// when no such process exists (it exited and was reaped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.trim_start().chars().next()
}

/// Waits (up to `limit`) until process `pid` is gone; false when it is still there (or a zombie).
async fn gone_within(pid: u32, limit: Duration) -> bool {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if proc_state(pid).is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

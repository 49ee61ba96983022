//! Starting the servers of a comparison: the two baselines (this binary's `serve-axum` and
//! `serve-rmcp`), a private Redis, and the Switchboard nodes of each scenario.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::procs::{accepts, free_port, http_get_status, redis_query, Procs};

/// Where every scenario's load goes, once everything has started.
#[derive(Debug, Clone)]
pub struct Servers {
    /// `serve-axum`.
    pub axum: String,
    /// `serve-rmcp`.
    pub rmcp: String,
    /// One node with the memory store.
    pub memory: String,
    /// One node with Redis.
    pub redis1: String,
    /// Three nodes sharing that Redis.
    pub redis3: Vec<String>,
    /// One node with Redis whose only upstream is the `serve-rmcp` server, unprefixed.
    pub proxy: String,
    /// HAProxy in front of the `serve-rmcp` server, when `haproxy` can be run.
    pub haproxy: Option<String>,
    /// Why there is no HAProxy (it cannot be run, or it did not start).
    pub haproxy_skipped: Option<String>,
    /// `serve-forward` in front of the `serve-rmcp` server.
    pub forward: String,
    /// The private Redis.
    pub redis: SocketAddr,
    /// agentgateway in front of the `serve-rmcp` server, with `--agentgateway`.
    pub agentgateway: Option<Agentgateway>,
    /// Why there is no agentgateway (no `--agentgateway`, or it did not start).
    pub agentgateway_skipped: Option<String>,
    /// The PIDs of the servers, for their CPU time.
    pub pids: Pids,
}

/// agentgateway, started in front of the `serve-rmcp` server.
#[derive(Debug, Clone)]
pub struct Agentgateway {
    /// Its MCP URL.
    pub url: String,
    /// The name it lists the upstream's `echo` tool under (`echo`, or prefixed with the
    /// target's name, `echo_echo`), found by `tools/list`.
    pub tool: String,
    /// Its PID.
    pub pid: u32,
}

/// The PIDs of the started servers.
#[derive(Debug, Clone, Default)]
pub struct Pids {
    /// `serve-axum`.
    pub axum: u32,
    /// `serve-rmcp`.
    pub rmcp: u32,
    /// `serve-forward`.
    pub forward: u32,
    /// The private Redis.
    pub redis: u32,
    /// The memory-store node.
    pub memory: u32,
    /// The one Redis node.
    pub redis1: u32,
    /// The three Redis nodes.
    pub redis3: Vec<u32>,
    /// The proxy node.
    pub proxy: u32,
    /// HAProxy, when it started.
    pub haproxy: Option<u32>,
}

/// The programs to start.
#[derive(Debug, Clone)]
pub struct Programs {
    /// This binary (for `serve-axum` and `serve-rmcp`).
    pub bench: PathBuf,
    /// The `switchboard` binary.
    pub switchboard: PathBuf,
    /// `redis-server`.
    pub redis_server: PathBuf,
    /// `haproxy`, when it can be run (the stateless-hop reference row is skipped otherwise).
    pub haproxy: Option<PathBuf>,
    /// A prebuilt `agentgateway`, when one was given (its rows are skipped otherwise).
    pub agentgateway: Option<PathBuf>,
}

/// The default `switchboard` binary: `$SWITCHBOARD_BIN`, else `release/switchboard` under
/// `$CARGO_TARGET_DIR` when set, else `target/release/switchboard` under the workspace root.
pub fn default_switchboard_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SWITCHBOARD_BIN") {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("release").join("switchboard");
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/release/switchboard")
        .components()
        .collect()
}

/// Fails with how to build it when `bin` is not a file.
pub fn check_switchboard_bin(bin: &Path) -> Result<(), String> {
    if bin.is_file() {
        return Ok(());
    }
    Err(format!(
        "switchboard binary not found at {}: build it with \
         `cargo build --release -p switchboard` (from the workspace root), \
         or name one with --switchboard-bin PATH or SWITCHBOARD_BIN",
        bin.display()
    ))
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn mcp_url(addr: SocketAddr) -> String {
    format!("http://{addr}/mcp")
}

/// Starts one of this binary's servers (`serve-axum`, `serve-rmcp`, `serve-forward`) with
/// `extra` arguments and waits until it accepts connections.
fn start_baseline(
    procs: &mut Procs,
    bench: &Path,
    mode: &str,
    extra: &[String],
) -> Result<(SocketAddr, u32), String> {
    let addr = loopback(free_port()?);
    let mut args = vec![mode.to_owned(), "--listen".into(), addr.to_string()];
    args.extend_from_slice(extra);
    let i = procs.spawn(mode, bench, &args)?;
    procs.wait_ready(i, || accepts(addr))?;
    Ok((addr, procs.pid(i)))
}

/// Starts `redis-server` on a free port, no persistence, and waits for `PING`.
fn start_redis(procs: &mut Procs, program: &Path) -> Result<(SocketAddr, u32), String> {
    let addr = loopback(free_port()?);
    let dir = procs.dir().display().to_string();
    let args: Vec<String> = [
        "--bind",
        "127.0.0.1",
        "--port",
        &addr.port().to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        &dir,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let i = procs.spawn("redis", program, &args)?;
    procs.wait_ready(i, || {
        redis_query::<String>(addr, &redis::cmd("PING")).is_ok_and(|r| r == "PONG")
    })?;
    Ok((addr, procs.pid(i)))
}

/// Starts one `switchboard serve` node (log level `warn`, then `extra` arguments) and waits
/// for `GET /readyz` 200; its URL and PID.
fn start_node(
    procs: &mut Procs,
    bin: &Path,
    id: &str,
    redis: Option<SocketAddr>,
    config: Option<&Path>,
    extra: &[String],
) -> Result<(String, u32), String> {
    let addr = loopback(free_port()?);
    let mut args: Vec<String> = vec!["serve".into(), "--listen".into(), addr.to_string()];
    args.extend([
        "--node-id".into(),
        id.into(),
        "--log-level".into(),
        "warn".into(),
    ]);
    if let Some(r) = redis {
        args.extend(["--redis-url".into(), format!("redis://{r}")]);
    }
    if let Some(c) = config {
        args.extend(["--config".into(), c.display().to_string()]);
    }
    args.extend_from_slice(extra);
    let i = procs.spawn(&format!("node-{id}"), bin, &args)?;
    procs.wait_ready(i, || http_get_status(addr, "/readyz") == Some(200))?;
    Ok((mcp_url(addr), procs.pid(i)))
}

/// A config file whose only upstream is the Streamable HTTP server at `url`, its tools
/// unprefixed (so the proxy scenario calls `echo` like every other).
fn proxy_config(dir: &Path, url: &str) -> Result<PathBuf, String> {
    let path = dir.join("proxy.toml");
    let text = format!(
        "[[upstreams]]\nname = \"rmcp\"\nkind = \"http\"\nprefix = \"\"\nurl = \"{url}\"\n"
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Starts HAProxy (one thread, HTTP mode, keep-alive both sides, server connections reused
/// across clients) on a free port in front of `backend`, and waits until it accepts.
fn start_haproxy(
    procs: &mut Procs,
    program: &Path,
    backend: SocketAddr,
) -> Result<(SocketAddr, u32), String> {
    let addr = loopback(free_port()?);
    let path = procs.dir().join("haproxy.cfg");
    let text = format!(
        "global\n  nbthread 1\n\ndefaults\n  mode http\n  option http-keep-alive\n  \
         timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n\n\
         frontend bench\n  bind {addr}\n  default_backend rmcp\n\n\
         backend rmcp\n  http-reuse always\n  server rmcp {backend}\n"
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    // `-db`: stay in the foreground, so the PID we hold is HAProxy's.
    let args = vec!["-db".into(), "-f".into(), path.display().to_string()];
    let i = procs.spawn("haproxy", program, &args)?;
    procs.wait_ready(i, || accepts(addr))?;
    Ok((addr, procs.pid(i)))
}

/// Tries `start` up to 3 times (attempt 0, 1, 2): a free port found by binding port 0 may be
/// taken by another process before the server binds it.
fn retry<T>(mut start: impl FnMut(usize) -> Result<T, String>) -> Result<T, String> {
    let mut last = String::new();
    for attempt in 0..3 {
        match start(attempt) {
            Ok(v) => return Ok(v),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Starts every server of a comparison: the baselines, a Redis, a memory-store node, a Redis
/// node, three more Redis nodes, a Redis node proxying to the rmcp baseline, `serve-forward` in
/// front of it, and HAProxy in front of it (when there is a `haproxy`).
pub fn start_all(procs: &mut Procs, programs: &Programs) -> Result<Servers, String> {
    let bench = &programs.bench;
    let (axum, axum_pid) = retry(|_| start_baseline(procs, bench, "serve-axum", &[]))?;
    let (rmcp, rmcp_pid) = retry(|_| start_baseline(procs, bench, "serve-rmcp", &[]))?;
    let upstream = ["--upstream".to_owned(), mcp_url(rmcp)];
    let (forward, forward_pid) =
        retry(|_| start_baseline(procs, bench, "serve-forward", &upstream))?;
    let (redis, redis_pid) = retry(|_| start_redis(procs, &programs.redis_server))?;
    let sb = &programs.switchboard;
    let config = proxy_config(procs.dir(), &mcp_url(rmcp))?;
    // A retried node gets a fresh id: the failed one may have registered it.
    let mut node = |id: &str, redis: Option<SocketAddr>, config: Option<&Path>| {
        retry(|a| start_node(procs, sb, &format!("{id}-{a}"), redis, config, &[]))
    };
    let (memory, memory_pid) = node("mem", None, None)?;
    let (redis1, redis1_pid) = node("r1", Some(redis), None)?;
    let (mut redis3, mut redis3_pids) = (Vec::new(), Vec::new());
    for id in ["c1", "c2", "c3"] {
        let (url, pid) = node(id, Some(redis), None)?;
        redis3.push(url);
        redis3_pids.push(pid);
    }
    let (proxy, proxy_pid) = node("proxy", Some(redis), Some(&config))?;
    // The reference row is optional: without HAProxy the comparison still runs.
    let (haproxy, haproxy_pid, haproxy_skipped) = match &programs.haproxy {
        Some(program) => match retry(|_| start_haproxy(procs, program, rmcp)) {
            Ok((addr, pid)) => (Some(mcp_url(addr)), Some(pid), None),
            Err(e) => {
                eprintln!("no HAProxy reference row: {e}");
                (None, None, Some(format!("HAProxy did not start: {e}")))
            }
        },
        None => (
            None,
            None,
            Some("haproxy cannot be run (install it, or pass --haproxy PATH)".into()),
        ),
    };
    Ok(Servers {
        axum: mcp_url(axum),
        rmcp: mcp_url(rmcp),
        memory,
        redis1,
        redis3,
        proxy,
        haproxy,
        haproxy_skipped,
        forward: mcp_url(forward),
        redis,
        agentgateway: None,
        agentgateway_skipped: Some(
            "no --agentgateway BIN given (a prebuilt agentgateway binary)".into(),
        ),
        pids: Pids {
            axum: axum_pid,
            rmcp: rmcp_pid,
            forward: forward_pid,
            redis: redis_pid,
            memory: memory_pid,
            redis1: redis1_pid,
            redis3: redis3_pids,
            proxy: proxy_pid,
            haproxy: haproxy_pid,
        },
    })
}

/// The log cap of the resume-storm nodes: room for the storm's 10,000 events per stream.
pub const STORM_MAX_EVENTS: u64 = 20_000;

/// Starts the two nodes of the resume storm on the private Redis, each with
/// `--set session.max_events_per_stream=20000`; their URLs.
pub fn start_storm_nodes(
    procs: &mut Procs,
    programs: &Programs,
    redis: SocketAddr,
) -> Result<Vec<String>, String> {
    let set = [
        "--set".to_owned(),
        format!("session.max_events_per_stream={STORM_MAX_EVENTS}"),
    ];
    let mut urls = Vec::new();
    for id in ["storm-a", "storm-b"] {
        let sb = &programs.switchboard;
        let (url, _) =
            retry(|a| start_node(procs, sb, &format!("{id}-{a}"), Some(redis), None, &set))?;
        urls.push(url);
    }
    Ok(urls)
}

/// The session key agentgateway encrypts its `Mcp-Session-Id`s with (AES-256-GCM, 64 hex
/// digits): a fixed one, as the measurement in the project's notes used.
const AGW_SESSION_KEY: &str = "5c1e0f4a9b3d7e21c8a6f0b2d4e6a8c0123456789abcdef0fedcba9876543210";

/// agentgateway's YAML config: every address on loopback, IPv6 off, a fixed session key, and
/// one listener on `port` routing to one stateful MCP target `echo` at `upstream`.
pub fn agentgateway_config(
    port: u16,
    admin: u16,
    stats: u16,
    ready: u16,
    upstream: &str,
) -> String {
    format!(
        "config:\n  enableIpv6: false\n  adminAddr: 127.0.0.1:{admin}\n  \
         statsAddr: 127.0.0.1:{stats}\n  readinessAddr: 127.0.0.1:{ready}\n  \
         session:\n    key: \"{AGW_SESSION_KEY}\"\n\
         binds:\n- port: {port}\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          \
         statefulMode: stateful\n          targets:\n          - name: echo\n            mcp:\n              \
         host: {upstream}\n"
    )
}

/// Starts `agentgateway -f <config>` in front of `upstream` (the `serve-rmcp` URL) on free
/// loopback ports and waits until its port accepts; its URL and PID. (Whether it answers an
/// `initialize`, and under which name it lists `echo`, is checked by
/// [`super::probe_agentgateway`].)
pub fn start_agentgateway(
    procs: &mut Procs,
    program: &Path,
    upstream: &str,
) -> Result<(String, u32), String> {
    let addr = loopback(free_port()?);
    let (admin, stats, ready) = (free_port()?, free_port()?, free_port()?);
    let path = procs.dir().join("agentgateway.yaml");
    let text = agentgateway_config(addr.port(), admin, stats, ready, upstream);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    let args = vec!["-f".into(), path.display().to_string()];
    let i = procs.spawn("agentgateway", program, &args)?;
    procs.wait_ready(i, || accepts(addr))?;
    Ok((mcp_url(addr), procs.pid(i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agentgateway_config_is_loopback_yaml_with_one_stateful_target() {
        let yaml = agentgateway_config(8201, 15000, 15020, 15021, "http://127.0.0.1:8101/mcp");
        let want = format!(
            "config:
  enableIpv6: false
  adminAddr: 127.0.0.1:15000
  statsAddr: 127.0.0.1:15020
  readinessAddr: 127.0.0.1:15021
  session:
    key: \"{AGW_SESSION_KEY}\"
binds:
- port: 8201
  listeners:
  - routes:
    - backends:
      - mcp:
          statefulMode: stateful
          targets:
          - name: echo
            mcp:
              host: http://127.0.0.1:8101/mcp
"
        );
        assert_eq!(yaml, want);
        assert_eq!(AGW_SESSION_KEY.len(), 64);
        assert!(AGW_SESSION_KEY.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}

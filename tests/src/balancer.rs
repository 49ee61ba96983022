//! A real load balancer in front of the nodes: Debian's HAProxy in HTTP mode, round robin per
//! request, no stickiness, streaming SSE answers unbuffered. Started in the foreground (`-db`) as a
//! child with its config in a temp dir, killed by PID on drop (see [`crate::daemon`]).

use std::path::PathBuf;

use crate::daemon::{find_binary, Daemon};

/// A running HAProxy on 127.0.0.1 spreading requests over backend ports.
pub struct Balancer {
    daemon: Daemon,
}

/// The `haproxy` binary: `$HAPROXY`, else `haproxy` on `PATH`, else Debian's `/usr/sbin/haproxy`
/// (not on a non-root `PATH`). `None` when none runs.
pub fn haproxy_binary() -> Option<String> {
    find_binary("HAPROXY", "haproxy", "-v")
}

/// How HAProxy spreads requests.
#[derive(Clone, Debug, Default)]
pub struct BalancerOptions {
    /// Cookie affinity: `cookie <NAME> insert indirect nocache`, each server with its own value
    /// (`n0`, `n1`, …). A request carrying the cookie goes to that server (the cookie is removed
    /// before it is forwarded); one without it is balanced and its answer sets the cookie.
    pub cookie: Option<String>,
    /// The `balance` algorithm (default `roundrobin`); `source` sends every request of one
    /// client address to the same server (all of this machine's nodes are 127.0.0.1).
    pub balance: Option<String>,
    /// Health checks every 100 ms (a server is down after one failure) and `option redispatch`
    /// with `retries 1`: once a server is down its clients go to another server, breaking
    /// persistence (what a balancer does when a replica is gone).
    pub redispatch: bool,
    /// With [`BalancerOptions::redispatch`]: the health check is `GET <path>` answered 2xx/3xx
    /// (`option httpchk`, e.g. `/readyz`: a node that lost its store leaves the rotation) instead
    /// of a TCP connect.
    pub health_path: Option<String>,
}

/// The HAProxy config: every request balanced on its own (`http-server-close` closes the server
/// side after each response, so no connection pins a client to a node), long server/client
/// timeouts so idle SSE streams between keep-alive comments are not cut, and no buffering. Each
/// answer names the backend that served it in `X-Served-By` (`n0`, `n1`, … in the given order).
fn config(port: u16, backends: &[String], options: &BalancerOptions) -> String {
    let mut cfg = format!(
        "global\n    maxconn 1024\n\n\
         defaults\n    mode http\n    option http-server-close\n    option http-no-delay\n    \
         timeout connect 5s\n    timeout client 10m\n    timeout server 10m\n    \
         timeout tunnel 10m\n    timeout http-request 30s\n\n\
         frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend nodes\n\n\
         backend nodes\n    balance {}\n    http-response set-header X-Served-By %[srv_name]\n",
        options.balance.as_deref().unwrap_or("roundrobin")
    );
    if options.redispatch {
        cfg.push_str("    option redispatch\n    retries 1\n");
        if let Some(path) = &options.health_path {
            cfg.push_str(&format!("    option httpchk GET {path}\n"));
        }
    }
    if let Some(name) = &options.cookie {
        cfg.push_str(&format!("    cookie {name} insert indirect nocache\n"));
    }
    for (i, addr) in backends.iter().enumerate() {
        let cookie = if options.cookie.is_some() {
            format!(" cookie n{i}")
        } else {
            String::new()
        };
        let check = if options.redispatch {
            " check inter 100 fall 1 rise 1"
        } else {
            ""
        };
        cfg.push_str(&format!("    server n{i} {addr}{cookie}{check}\n"));
    }
    cfg
}

impl Balancer {
    /// Starts HAProxy in front of `backend_ports` and waits until it accepts connections. Panics
    /// when `haproxy` is missing (see [`haproxy_binary`]) or never comes up (three free ports tried).
    pub fn start(backend_ports: &[u16]) -> Balancer {
        let backends: Vec<String> = backend_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        Balancer::start_with(&backends, &BalancerOptions::default())
    }

    /// Starts HAProxy in front of `backends` (`host:port` each) spreading requests as `options`
    /// say; panics like [`Balancer::start`].
    pub fn start_with(backends: &[String], options: &BalancerOptions) -> Balancer {
        let bin = haproxy_binary().expect("haproxy not found: apt-get install -y haproxy");
        let daemon = Daemon::start("haproxy", &bin, |port, dir| {
            let cfg_path = dir.join("haproxy.cfg");
            std::fs::write(&cfg_path, config(port, backends, options)).expect("write haproxy.cfg");
            vec!["-db".into(), "-f".into(), cfg_path.display().to_string()]
        });
        Balancer { daemon }
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port())
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.daemon.port()
    }

    /// HAProxy's own output (config warnings, alerts).
    pub fn log(&self) -> String {
        self.daemon.log()
    }

    /// The config file in use.
    pub fn config_path(&self) -> PathBuf {
        self.daemon.path("haproxy.cfg")
    }
}

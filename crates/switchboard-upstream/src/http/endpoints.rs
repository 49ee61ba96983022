//! The endpoints of a replicated upstream: the addresses its URL's host resolves to (a headless
//! Kubernetes Service, several A/AAAA records), each reached through its own connection pool.
//!
//! A new upstream session is initialized on one of the current endpoints (round robin; the next
//! one when it refuses the connection), and every later request of that upstream session
//! connects to exactly that address (the pin, see [`super::session`]), while `Host` and TLS keep
//! the URL's host name (each endpoint's `reqwest::Client` is built with `resolve()`, so only the
//! connection target changes). Requests that are not pinned (every request of a `stateless`
//! upstream) go round robin the same way, each to the next endpoint when one refuses.
//!
//! The host is resolved with `hickory-resolver`: the system configuration (`/etc/resolv.conf`,
//! `/etc/hosts`) unless the upstream names its own nameservers. It is resolved again at most
//! once per `resolve_interval_ms` when a session picks an endpoint or the status API is read
//! with an older view ([`Endpoints::refresh_if_stale`]), and at once (cache cleared)
//! when a pinned endpoint refuses a connection, to tell a replica that is gone from one that
//! fails for a moment. The last good resolution is kept when resolving fails or takes longer
//! than [`RERESOLVE_WAIT`] (the interval then counts from the failed attempt, so a nameserver
//! that stopped answering is asked once per interval, and only one request waits on it). At most
//! `max_endpoints` addresses are used (the resolution's first, sorted); the pools of addresses
//! that left the resolution are dropped at the next resolution, and a session still pinned to
//! one gets a pool built for it on demand (not kept).
//!
//! A URL whose host is an IP address is one endpoint and uses the process-wide client, as
//! before; so does an upstream without a resolver (legacy SSE, stateless revisions).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;
use parking_lot::Mutex;
use reqwest::Url;

use super::common::build_http_client;

/// The default of `resolve_interval_ms`.
pub const DEFAULT_RESOLVE_INTERVAL_MS: u64 = 5_000;
/// The default of `max_endpoints`.
pub const DEFAULT_MAX_ENDPOINTS: usize = 64;
/// How long a request waits for the host to be resolved again once its endpoints are known.
/// Past it the known endpoints are used and the attempt counts as failed (tried again after
/// `resolve_interval_ms`), so a nameserver that stopped answering (a resolver's own retries
/// take 10 s and more) costs a request at most this, not its whole `timeout_ms`. The first
/// resolution, with no endpoints to fall back on, waits as long as the resolver does.
pub const RERESOLVE_WAIT: Duration = Duration::from_secs(1);

/// How an upstream's host is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// Resolve again at most this often (when a session picks an endpoint, or the status is read
    /// with an older view).
    pub interval: Duration,
    /// DNS servers to ask; empty: the system configuration.
    pub nameservers: Vec<SocketAddr>,
    /// At most this many endpoints are used.
    pub max_endpoints: usize,
}

impl Default for Resolution {
    fn default() -> Self {
        Resolution {
            interval: Duration::from_millis(DEFAULT_RESOLVE_INTERVAL_MS),
            nameservers: Vec::new(),
            max_endpoints: DEFAULT_MAX_ENDPOINTS,
        }
    }
}

/// What the last resolution found.
#[derive(Default)]
struct Current {
    addrs: Vec<SocketAddr>,
    /// When the last resolution succeeded.
    at: Option<Instant>,
    /// When the last resolution was attempted (succeeded or not), and its error if it failed:
    /// the interval counts from here, so a failing nameserver is asked once per interval.
    tried: Option<Instant>,
    failure: Option<String>,
    clients: HashMap<SocketAddr, reqwest::Client>,
    /// Whether the last request to each address connected (kept for the resolved addresses and
    /// those requests went to since).
    reached: HashMap<SocketAddr, bool>,
    /// The same for addresses that left the name at a resolution (not listed by `status`, but
    /// a session may still be pinned to one: [`Endpoints::reached_of`]); at most
    /// `max_endpoints` entries, cleared when full.
    left: HashMap<SocketAddr, bool>,
}

/// The endpoints of one upstream whose URL names a host.
pub(crate) struct Endpoints {
    host: String,
    port: u16,
    settings: Resolution,
    resolver: TokioResolver,
    current: Mutex<Current>,
    /// One resolution at a time.
    resolving: tokio::sync::Mutex<()>,
    next: AtomicUsize,
}

impl Endpoints {
    /// The endpoints of `url`'s host, or `None` when the host is an IP address (one endpoint,
    /// the process-wide client), or when the system's resolver configuration cannot be read
    /// (logged; the URL is then used as it is, resolved by the operating system per connection).
    /// Errors when the configured nameservers give no resolver.
    pub fn for_url(url: &Url, settings: Resolution) -> Result<Option<Endpoints>, String> {
        let Some(host) = url.domain().map(str::to_owned) else {
            return Ok(None);
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let resolver = match resolver(&settings.nameservers) {
            Ok(r) => r,
            Err(e) if settings.nameservers.is_empty() => {
                tracing::warn!(host, error = %e, "cannot resolve the upstream's endpoints; its requests go to the URL as the system resolves it");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        Ok(Some(Endpoints {
            host,
            port,
            settings,
            resolver,
            current: Mutex::default(),
            resolving: tokio::sync::Mutex::new(()),
            next: AtomicUsize::new(rand::random::<u32>() as usize),
        }))
    }

    /// Every current endpoint, starting with the next in turn (round robin), resolved again
    /// first when the resolution is older than the interval: where a request that is not pinned
    /// goes (a new upstream session's `initialize`, every request of a stateless upstream), the
    /// next one tried when one cannot be reached. Errors naming the host when it resolves to
    /// nothing.
    pub async fn candidates(&self) -> Result<Vec<SocketAddr>, String> {
        let mut addrs = self.resolved(false).await?;
        let n = self.next.fetch_add(1, Ordering::Relaxed) % addrs.len();
        addrs.rotate_left(n);
        Ok(addrs)
    }

    /// Whether `addr` is still an endpoint after resolving again now (cache cleared): `false`
    /// means the replica is gone from the name. A failed resolution answers `true` (unknown:
    /// not taken for gone).
    pub async fn still_resolves(&self, addr: SocketAddr) -> bool {
        match self.resolved(true).await {
            Ok(addrs) => addrs.contains(&addr),
            Err(_) => true,
        }
    }

    /// The connection pool that reaches `addr` under the URL's host name.
    pub fn client(&self, addr: SocketAddr) -> Result<reqwest::Client, String> {
        let mut current = self.current.lock();
        if let Some(c) = current.clients.get(&addr) {
            return Ok(c.clone());
        }
        let client = build_http_client(|b| b.resolve(&self.host, addr))?;
        if current.addrs.contains(&addr) {
            current.clients.insert(addr, client.clone());
        }
        Ok(client)
    }

    /// Whether this node's last request to `addr` connected (`None`: no request yet), also for
    /// an address that left the name since.
    pub fn reached_of(&self, addr: SocketAddr) -> Option<bool> {
        let current = self.current.lock();
        current
            .reached
            .get(&addr)
            .or_else(|| current.left.get(&addr))
            .copied()
    }

    /// Records whether a request to `addr` could connect.
    pub fn reached(&self, addr: SocketAddr, connected: bool) {
        let mut current = self.current.lock();
        if current.reached.get(&addr) != Some(&connected) {
            current.reached.insert(addr, connected);
        }
    }

    /// Resolves again when the last resolution is older than the interval (for the status API,
    /// so that it does not show an old view as current); nothing before the first resolution
    /// (requests make that one). A failed resolution keeps the last one, older.
    pub async fn refresh_if_stale(&self) {
        let stale = self
            .current
            .lock()
            .tried
            .is_some_and(|at| at.elapsed() >= self.settings.interval);
        if stale {
            let _ = self.resolved(false).await;
        }
    }

    /// When the last resolution was made; `None` before the first.
    pub fn resolved_at(&self) -> Option<std::time::SystemTime> {
        let at = self.current.lock().at?;
        std::time::SystemTime::now().checked_sub(at.elapsed())
    }

    /// The endpoints for the status API: the last resolution's addresses and any other address
    /// a request went to since, each with whether it resolved and whether it was reached (`None`:
    /// no request yet), sorted.
    pub fn status(&self) -> Vec<(SocketAddr, bool, Option<bool>)> {
        let current = self.current.lock();
        let mut out: Vec<(SocketAddr, bool, Option<bool>)> = current
            .addrs
            .iter()
            .map(|a| (*a, true, current.reached.get(a).copied()))
            .collect();
        for (addr, connected) in &current.reached {
            if !current.addrs.contains(addr) {
                out.push((*addr, false, Some(*connected)));
            }
        }
        out.sort();
        out
    }

    /// The current addresses, resolving again when `now` or when the last attempt is older than
    /// the interval. With endpoints known, a request does not queue behind a resolution already
    /// running (it takes the known ones) and waits at most [`RERESOLVE_WAIT`] for its own; a
    /// failed resolution keeps them. Errors only when no endpoint was ever resolved.
    async fn resolved(&self, now: bool) -> Result<Vec<SocketAddr>, String> {
        let (kept, fresh) = {
            let c = self.current.lock();
            let fresh = c
                .tried
                .is_some_and(|t| t.elapsed() < self.settings.interval);
            (c.addrs.clone(), fresh)
        };
        if !now && fresh && !kept.is_empty() {
            return Ok(kept);
        }
        let started = Instant::now();
        let _one = if kept.is_empty() || now {
            self.resolving.lock().await
        } else {
            match self.resolving.try_lock() {
                Ok(one) => one,
                Err(_) => return Ok(kept),
            }
        };
        {
            // Someone tried while we waited for the lock.
            let current = self.current.lock();
            if current.tried.is_some_and(|t| t >= started) {
                return match (&current.failure, current.addrs.is_empty()) {
                    (Some(e), true) => Err(e.clone()),
                    _ => Ok(current.addrs.clone()),
                };
            }
        }
        if now {
            self.resolver.clear_cache();
        }
        let looked = if kept.is_empty() {
            self.lookup().await
        } else {
            tokio::time::timeout(RERESOLVE_WAIT, self.lookup())
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "resolving `{}` took longer than {} ms",
                        self.host,
                        RERESOLVE_WAIT.as_millis()
                    ))
                })
        };
        let mut current = self.current.lock();
        current.tried = Some(Instant::now());
        match looked {
            Ok(addrs) => {
                current.clients.retain(|a, _| addrs.contains(a));
                let gone: Vec<(SocketAddr, bool)> = current
                    .reached
                    .iter()
                    .filter(|(a, _)| !addrs.contains(a))
                    .map(|(a, r)| (*a, *r))
                    .collect();
                if current.left.len() + gone.len() > self.settings.max_endpoints {
                    current.left.clear();
                }
                current.left.extend(gone);
                current.left.retain(|a, _| !addrs.contains(a));
                current.reached.retain(|a, _| addrs.contains(a));
                if current.addrs != addrs {
                    tracing::info!(host = %self.host, endpoints = ?addrs, "resolved the upstream's endpoints");
                }
                current.addrs.clone_from(&addrs);
                current.at = current.tried;
                current.failure = None;
                Ok(addrs)
            }
            Err(e) => {
                current.failure = Some(e.clone());
                if current.addrs.is_empty() {
                    return Err(e);
                }
                tracing::warn!(host = %self.host, error = %e, kept = ?current.addrs,
                    "could not resolve the upstream's host again; keeping its last endpoints");
                Ok(current.addrs.clone())
            }
        }
    }

    /// The host's addresses: from the resolver, or (with the system's configuration, when the
    /// resolver finds nothing) from the operating system's own lookup (`getaddrinfo`, which
    /// also knows names from other sources than DNS and `/etc/hosts`).
    async fn lookup(&self) -> Result<Vec<SocketAddr>, String> {
        let mut addrs: Vec<SocketAddr> = match self.resolver.lookup_ip(self.host.as_str()).await {
            Ok(found) => found
                .iter()
                .map(|ip| SocketAddr::new(ip, self.port))
                .collect(),
            Err(e) if self.settings.nameservers.is_empty() => {
                tokio::net::lookup_host((self.host.as_str(), self.port))
                    .await
                    .map_err(|os| format!("cannot resolve `{}`: {e}; {os}", self.host))?
                    .collect()
            }
            Err(e) => return Err(format!("cannot resolve `{}`: {e}", self.host)),
        };
        addrs.sort();
        addrs.dedup();
        addrs.truncate(self.settings.max_endpoints);
        if addrs.is_empty() {
            return Err(format!("`{}` resolves to no address", self.host));
        }
        Ok(addrs)
    }
}

/// A resolver asking `nameservers` (UDP and TCP), or the system's when empty.
fn resolver(nameservers: &[SocketAddr]) -> Result<TokioResolver, String> {
    let provider = TokioRuntimeProvider::default();
    let builder = if nameservers.is_empty() {
        TokioResolver::builder(provider)
            .map_err(|e| format!("cannot read the system's resolver configuration: {e}"))?
    } else {
        let servers = nameservers
            .iter()
            .map(|addr| {
                let mut server = NameServerConfig::udp_and_tcp(addr.ip());
                for connection in &mut server.connections {
                    connection.port = addr.port();
                }
                server
            })
            .collect();
        TokioResolver::builder_with_config(ResolverConfig::from_name_servers(servers), provider)
    };
    builder
        .build()
        .map_err(|e| format!("cannot build the resolver: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_ip_literal_is_one_endpoint_without_a_resolver() {
        let url = Url::parse("http://127.0.0.1:9/mcp").unwrap();
        assert!(Endpoints::for_url(&url, Resolution::default())
            .unwrap()
            .is_none());
        let v6 = Url::parse("http://[::1]:9/mcp").unwrap();
        assert!(Endpoints::for_url(&v6, Resolution::default())
            .unwrap()
            .is_none());
    }
}

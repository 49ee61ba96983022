//! Which Redis the store talks to: one server, a Sentinel-managed primary, or a Redis Cluster.

use std::fmt;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;
use redis::{
    Client, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, RedisError, RedisResult,
    TlsCertificates,
};

/// How the Redis behind the store is deployed (`standalone`, `sentinel`, `cluster` in config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    /// One server (or one address in front of a primary that never moves).
    #[default]
    Standalone,
    /// A primary/replica group watched by Redis Sentinel: the primary's address is asked of the
    /// sentinels at start and again after every connection loss, so a promotion is followed.
    Sentinel,
    /// Redis Cluster (7.0 or later, for sharded pub/sub): keys are spread over shards by hash slot.
    Cluster,
}

impl RedisMode {
    /// `standalone`, `sentinel` or `cluster`.
    pub fn as_str(self) -> &'static str {
        match self {
            RedisMode::Standalone => "standalone",
            RedisMode::Sentinel => "sentinel",
            RedisMode::Cluster => "cluster",
        }
    }
}

impl fmt::Display for RedisMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the store's Redis is and how to log in to it.
///
/// URLs are `redis://[user[:password]@]host:port[/db]` or `rediss://…` (TLS); credentials given
/// in the fields below override those in URLs. In Sentinel mode `nodes` are the sentinels'
/// addresses and `username`/`password` (and the scheme and db of `url`, when set) apply to the
/// primary; the sentinels have their own `sentinel_username`/`sentinel_password`. In Cluster mode
/// `nodes` are seed URLs (any reachable subset of the cluster's nodes); Cluster has no database
/// numbers.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedisTopology {
    /// The deployment.
    pub mode: RedisMode,
    /// Standalone: the server's URL. Sentinel: optional, only its scheme (`rediss://` for TLS to
    /// the primary) and database number are used.
    pub url: String,
    /// Sentinel: the sentinels (`redis://host:port` or `rediss://…`); Cluster: seed node URLs.
    pub nodes: Vec<String>,
    /// Sentinel: the name the sentinels monitor the primary under (`sentinel monitor <name> …`).
    pub master_name: String,
    /// ACL user for the data servers (empty: from the URL, or the default user).
    pub username: String,
    /// Password for the data servers (empty: from the URL, or none).
    pub password: String,
    /// ACL user for the sentinels (empty: from the sentinels' URLs, or none).
    pub sentinel_username: String,
    /// Password for the sentinels (empty: from the sentinels' URLs, or none).
    pub sentinel_password: String,
    /// PEM file of the certificate authority that signs the servers' TLS certificates, for
    /// `rediss://` (empty: the system's roots).
    pub tls_ca_file: String,
}

impl fmt::Debug for RedisTopology {
    /// Everything but the passwords, which print as `***` when set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hide = |s: &str| if s.is_empty() { "" } else { "***" };
        f.debug_struct("RedisTopology")
            .field("mode", &self.mode)
            .field("url", &redact_url(&self.url))
            .field(
                "nodes",
                &self.nodes.iter().map(|n| redact_url(n)).collect::<Vec<_>>(),
            )
            .field("master_name", &self.master_name)
            .field("username", &self.username)
            .field("password", &hide(&self.password))
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &hide(&self.sentinel_password))
            .field("tls_ca_file", &self.tls_ca_file)
            .finish()
    }
}

impl RedisTopology {
    /// A standalone Redis at `url`.
    pub fn standalone(url: &str) -> RedisTopology {
        RedisTopology {
            url: url.to_owned(),
            ..RedisTopology::default()
        }
    }

    /// A Redis Cluster reached through the seed URLs `nodes`.
    pub fn cluster(nodes: &[String]) -> RedisTopology {
        RedisTopology {
            mode: RedisMode::Cluster,
            nodes: nodes.to_vec(),
            ..RedisTopology::default()
        }
    }

    /// The primary `master_name` as the sentinels at `nodes` report it.
    pub fn sentinel(nodes: &[String], master_name: &str) -> RedisTopology {
        RedisTopology {
            mode: RedisMode::Sentinel,
            nodes: nodes.to_vec(),
            master_name: master_name.to_owned(),
            ..RedisTopology::default()
        }
    }

    /// Connection settings for a data server at `url`, with this topology's credentials.
    pub(crate) fn data_info(&self, url: &str) -> RedisResult<ConnectionInfo> {
        let info = url.into_connection_info()?;
        let mut redis = info.redis_settings().clone();
        if !self.username.is_empty() {
            redis = redis.set_username(&self.username);
        }
        if !self.password.is_empty() {
            redis = redis.set_password(&self.password);
        }
        Ok(info.set_redis_settings(redis))
    }

    /// Clients of the sentinels at `nodes`, each with the sentinels' credentials
    /// (`sentinel_username`/`sentinel_password` when set, else its URL's) and the CA of
    /// `tls_ca_file`.
    pub(crate) fn sentinel_clients(&self) -> RedisResult<Vec<Client>> {
        let certs = self.tls_certs()?;
        self.node_infos()?
            .into_iter()
            .map(|info| {
                let mut redis = info.redis_settings().clone();
                if !self.sentinel_username.is_empty() {
                    redis = redis.set_username(&self.sentinel_username);
                }
                if !self.sentinel_password.is_empty() {
                    redis = redis.set_password(&self.sentinel_password);
                }
                let info = info.set_redis_settings(redis);
                match &certs {
                    Some(certs) => Client::build_with_tls(info, certs.clone()),
                    None => Client::open(info),
                }
            })
            .collect()
    }

    /// The certificate authority of `tls_ca_file`, if one is set. Fails when it cannot be read
    /// or holds no PEM certificate (before, any readable file was taken as the CA: a DER file
    /// or a key file too).
    pub(crate) fn tls_certs(&self) -> RedisResult<Option<TlsCertificates>> {
        if self.tls_ca_file.is_empty() {
            return Ok(None);
        }
        let pem = std::fs::read(&self.tls_ca_file).map_err(|e| {
            RedisError::from((
                ErrorKind::InvalidClientConfig,
                "cannot read redis.tls_ca_file",
                format!("{}: {e}", self.tls_ca_file),
            ))
        })?;
        if !pem
            .windows(CERTIFICATE.len())
            .any(|w| w == CERTIFICATE.as_bytes())
        {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "redis.tls_ca_file holds no PEM certificate",
                format!("{}: no `{CERTIFICATE}` line", self.tls_ca_file),
            )));
        }
        Ok(Some(TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        }))
    }

    /// A client of the data server at `url`, with this topology's credentials and CA.
    pub(crate) fn data_client(&self, url: &str) -> RedisResult<Client> {
        let info = self.data_info(url)?;
        match self.tls_certs()? {
            Some(certs) => Client::build_with_tls(info, certs),
            None => Client::open(info),
        }
    }

    /// Whether data connections use TLS: in Sentinel mode, when `url` is `rediss://`.
    pub(crate) fn primary_tls(&self) -> bool {
        self.url.starts_with("rediss://")
    }

    /// The addresses of `nodes` as connection settings (sentinels or cluster seeds).
    pub(crate) fn node_infos(&self) -> RedisResult<Vec<ConnectionInfo>> {
        self.nodes
            .iter()
            .map(|n| n.as_str().into_connection_info())
            .collect()
    }

    /// A short description for logs: the mode and the addresses, no credentials.
    pub fn describe(&self) -> String {
        match self.mode {
            RedisMode::Standalone => redact_url(&self.url),
            _ => {
                let name = if self.mode == RedisMode::Sentinel {
                    format!(" master {}", self.master_name)
                } else {
                    String::new()
                };
                format!("{} {}{name}", self.mode, self.describe_nodes())
            }
        }
    }

    /// The `host:port` of each of `nodes`, comma-separated, no credentials.
    pub(crate) fn describe_nodes(&self) -> String {
        let Ok(infos) = self.node_infos() else {
            return String::new();
        };
        infos
            .iter()
            .map(|i| match i.addr() {
                ConnectionAddr::Tcp(h, p)
                | ConnectionAddr::TcpTls {
                    host: h, port: p, ..
                } => format!("{h}:{p}"),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Why `url` is no Redis URL the client can use (an unknown scheme, a port that is no number,
/// no host), with its password hidden; `None` when it parses.
pub fn url_problem(url: &str) -> Option<String> {
    use redis::IntoConnectionInfo;
    url.into_connection_info()
        .err()
        .map(|e| format!("`{}` does not parse as a Redis URL: {e}", redact_url(url)))
}

/// `url` with any password replaced by `***`, fit for logs and error messages. The credentials
/// are everything before the last `@` (so a password holding an unescaped `/` or `@` is hidden
/// too), with or without a scheme; a URL without `@` is returned as it is.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    match rest.rfind('@') {
        Some(at) => {
            let user = rest[..at].split_once(':').map_or(&rest[..at], |(u, _)| u);
            format!("{scheme}{user}:***{}", &rest[at..])
        }
        None => url.to_owned(),
    }
}

/// The line that opens a PEM certificate (RFC 7468).
const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----";

/// How long one command may wait for its reply.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after a command's first sending ran a sending of it again may still run: the
/// cluster client sends every retry while its caller waits, at most [`RESPONSE_TIMEOUT`] (its
/// overall timeout; it drops a request nobody waits for, redis 1.8.1
/// `cluster_handling/async_connection/mod.rs`), and twice that leaves room for a sending held in
/// a server's queue. What makes a write safe to send again is remembered this long.
pub const RESEND_WINDOW: Duration = Duration::from_secs(2 * RESPONSE_TIMEOUT.as_secs());
/// How long connecting to one server may take.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// The reconnecting connection manager's settings: 3 quick retries, then the command fails (the
/// node answers 503) while the manager keeps reconnecting in the background.
pub(crate) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_connection_timeout(Some(CONNECTION_TIMEOUT))
        .set_number_of_retries(3)
}

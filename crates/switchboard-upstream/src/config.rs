//! The `[[upstreams]]` tables of the config file, and [`build`], which turns them into the
//! node's [`Upstream`].
//!
//! ```toml
//! tool_separator = "__"          # UpstreamsConfig::separator (the binary's key name)
//!
//! [[upstreams]]
//! name = "weather"               # [A-Za-z0-9_-]{1,64}, unique
//! kind = "http"                  # demo | stdio | http | sse
//! url = "https://weather.example/mcp"
//! headers = { Authorization = "Bearer ${WEATHER_TOKEN}" }
//! timeout_ms = 30000
//!
//! [[upstreams]]
//! name = "files"
//! kind = "stdio"
//! prefix = ""                    # no prefix: tools keep their own names
//! command = "mcp-server-filesystem"
//! args = ["/srv/data"]
//! env = { LOG_LEVEL = "warn" }
//! ```
//!
//! No `[[upstreams]]` at all means the built-in demo server alone, unprefixed. Otherwise every
//! listed upstream becomes a member of an [`Aggregate`], even a single one, so names always get
//! their prefix.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::aggregate::names::{check_member_name, check_separator};
use crate::aggregate::names::{check_prefix, Namespaces};
use crate::aggregate::{Aggregate, Member, DEFAULT_SEPARATOR};
use crate::demo::DemoUpstream;
use crate::placement::NodeBound;
use crate::tracked::Tracked;
use crate::upstream::Upstream;

/// Default per-upstream request timeout, in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// Default `max_line_bytes` of a stdio upstream: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// Default `max_message_bytes` of an http or sse upstream: 32 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 32 * 1024 * 1024;

/// What an upstream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamKind {
    /// The built-in demo server ([`DemoUpstream`]).
    Demo,
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout (MCP 2025-11-25,
    /// basic/transports, stdio).
    Stdio,
    /// A Streamable HTTP server (MCP 2025-03-26 … 2025-11-25, basic/transports).
    Http,
    /// A legacy HTTP+SSE server (MCP 2024-11-05, transports).
    Sse,
}

impl UpstreamKind {
    /// The kind as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamKind::Demo => "demo",
            UpstreamKind::Stdio => "stdio",
            UpstreamKind::Http => "http",
            UpstreamKind::Sse => "sse",
        }
    }
}

/// What a stateful HTTP upstream does when the upstream session a client session is pinned to
/// is gone (its endpoint answered 404 for it, or refuses connections and no longer resolves).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUpstreamLoss {
    /// Initialize a new upstream session (on a live endpoint) and end the request in flight with
    /// a JSON-RPC error saying the upstream's state was lost; the next request runs in the new
    /// upstream session. The client's session id does not change.
    #[default]
    Reinitialize,
    /// End the client's session cluster-wide (as a DELETE would); the request in flight gets a
    /// JSON-RPC error saying so, and every later request 404, so the client starts over.
    EndSession,
}

impl OnUpstreamLoss {
    /// The value as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OnUpstreamLoss::Reinitialize => "reinitialize",
            OnUpstreamLoss::EndSession => "end_session",
        }
    }
}

/// One `[[upstreams]]` table. Fields for other kinds than the upstream's are refused by
/// [`UpstreamConfig::problems`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Unique name, `[A-Za-z0-9_-]{1,64}`; appears in logs and errors, and is the default prefix.
    pub name: String,
    /// `demo`, `stdio`, `http` or `sse`.
    pub kind: UpstreamKind,
    /// Namespace of the upstream's tools and prompts (`<prefix><separator><name>`). Absent: the
    /// name. `""`: no prefix (names pass unchanged; the first unprefixed upstream listing a name
    /// owns it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How long one request may take, in ms (default 60000); then the client gets -32005 naming
    /// the upstream. Enforced by the upstream kinds that talk to a server (stdio, http, sse); for
    /// per-session stdio and sse it bounds the whole request wherever it runs (forwarded to the
    /// owner node, and run again on a live node after the owner stopped; see `placement`).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// stdio: the program to run (looked up in `PATH` when it has no `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// stdio: environment variables set for it, on top of the node's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// stdio: its working directory (default: the node's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// stdio: one child for all sessions instead of one per session (default false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared: bool,
    /// stdio: after the second failed start in a row, how long the next start waits, in ms
    /// (default 500, more than 0); each further failure doubles it, with jitter, up to
    /// `restart_backoff_max_ms`. Meanwhile calls that need a new child fail at once with -32006
    /// and `data.retry_after_ms` ([`crate::stdio`], restart back-off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_backoff_ms: Option<u64>,
    /// stdio: the longest wait between two starts of a crash-looping child, in ms (default
    /// 30000; at least `restart_backoff_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_backoff_max_ms: Option<u64>,
    /// stdio: how long a child must run before its start counts as a success, in ms (default
    /// 10000, more than 0). A child that exits on its own sooner is a failed start; one that ran
    /// this long resets the back-off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_stable_ms: Option<u64>,
    /// stdio with `shared = true`: the most client sessions attached to the shared child on one
    /// node (default 10000, more than 0), which receive its list changes and log messages
    /// outside calls; past it the least recently active session is detached (it gets no more
    /// of them until its next request there attaches it again, with the resource subscriptions
    /// it had made through the child, which are kept for at most this many detached sessions;
    /// logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attached_sessions: Option<u64>,
    /// stdio: the longest line the child may write on stdout, in bytes, its newline not counted
    /// (default [`DEFAULT_MAX_LINE_BYTES`], 16 MiB; at least 1). A longer line fails the calls in
    /// flight with -32006 naming the upstream and this limit, and stops the child (the stream
    /// cannot be resynchronised); the session's next request starts a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_line_bytes: Option<u64>,
    /// http/sse: the server's URL (`http://` or `https://`): the MCP endpoint (http) or the SSE
    /// endpoint (sse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// http/sse: headers sent with every request. A value may reference environment variables as
    /// `${VAR}`, expanded when the node starts ([`UpstreamConfig::expanded`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// http/sse: the largest message the server may send, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_BYTES`], 32 MiB; at least 1): a JSON answer body, one SSE event (its
    /// lines included), an error body. A larger one is not read further: the call fails with
    /// -32006 naming the upstream and this limit (a broken response stream is not resumed, since
    /// the same event would come again), and a legacy SSE connection is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u64>,
    /// http: the protocol revision the server speaks when it is not a session-era server:
    /// `"2026-07-28"` makes every request a self-contained stateless one
    /// ([`crate::http::modern::ModernHttpUpstream`]). Absent (default): the session era
    /// (`initialize`, `Mcp-Session-Id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// http: the server keeps nothing per session (or its replicas share it), so its requests
    /// may be spread over its endpoints freely (default false): no pin, no cookie binding, and a
    /// session it forgot (404) is initialized again and the request retried once, transparently.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stateless: bool,
    /// http (not `stateless`): what happens when a client session's upstream session is lost
    /// (its endpoint answered 404 for it, or refuses connections and no longer resolves):
    /// `"reinitialize"` (default) or `"end_session"` ([`OnUpstreamLoss`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_upstream_loss: Option<OnUpstreamLoss>,
    /// http: the URL's host is resolved again to its endpoints at most this often, in ms
    /// (default 5000), when a new upstream session picks one; at once when a pinned endpoint
    /// refuses a connection. Must be > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_interval_ms: Option<u64>,
    /// http: the DNS servers that resolve the URL's host (`"ip"` for port 53, or `"ip:port"`);
    /// empty (default): the system's configuration (`/etc/resolv.conf`, `/etc/hosts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// http: at most this many endpoints of a resolution are used (default 64; the lowest
    /// addresses); the rest get no session. Must be > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_endpoints: Option<usize>,
    /// http: at most this many bytes of cookies (the `Cookie` header's length) kept per upstream
    /// session for balancer affinity (default 4096); a cookie past it is not kept (a warning
    /// names the upstream). 0: no cookies are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cookie_bytes: Option<usize>,
}

/// A byte count as `usize` (saturating on a platform whose `usize` is narrower).
fn to_usize(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

fn default_timeout_ms() -> u64 {
    DEFAULT_TIMEOUT_MS
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Every upstream of a node and the separator of their namespaces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamsConfig {
    /// Between prefix and name (default `__`): 1–16 of `A-Z a-z 0-9 _ - .`.
    #[serde(default = "default_separator")]
    pub separator: String,
    /// The upstreams, in the order their entries appear in merged lists.
    #[serde(default)]
    pub upstreams: Vec<UpstreamConfig>,
}

fn default_separator() -> String {
    DEFAULT_SEPARATOR.to_owned()
}

impl Default for UpstreamsConfig {
    fn default() -> Self {
        UpstreamsConfig {
            separator: default_separator(),
            upstreams: Vec::new(),
        }
    }
}

impl UpstreamConfig {
    /// An upstream of `kind` named `name` with every other field at its default.
    pub fn new(name: &str, kind: UpstreamKind) -> UpstreamConfig {
        UpstreamConfig {
            name: name.to_owned(),
            kind,
            prefix: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            shared: false,
            restart_backoff_ms: None,
            restart_backoff_max_ms: None,
            restart_stable_ms: None,
            max_attached_sessions: None,
            max_line_bytes: None,
            url: None,
            headers: BTreeMap::new(),
            max_message_bytes: None,
            revision: None,
            stateless: false,
            on_upstream_loss: None,
            resolve_interval_ms: None,
            nameservers: Vec::new(),
            max_endpoints: None,
            max_cookie_bytes: None,
        }
    }

    /// The effective `max_line_bytes` (stdio).
    pub fn line_limit(&self) -> usize {
        to_usize(self.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES))
    }

    /// The effective `max_message_bytes` (http, sse).
    pub fn message_limit(&self) -> usize {
        to_usize(self.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES))
    }

    /// The effective prefix: the configured one, else the name; `None` for `""`.
    pub fn effective_prefix(&self) -> Option<&str> {
        let prefix = self.prefix.as_deref().unwrap_or(&self.name);
        (!prefix.is_empty()).then_some(prefix)
    }

    /// Every problem of this table alone, each message starting `upstream `NAME``: the name,
    /// the prefix's characters, `timeout_ms`, `max_line_bytes` and `max_message_bytes` > 0, the
    /// stdio restart settings, the fields its kind needs (stdio: `command`;
    /// http, sse: an `http(s)://` `url`) and refuses (another kind's fields), header names and
    /// the `${VAR}` syntax of header values.
    pub fn problems(&self, separator: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Err(e) = check_member_name(&self.name) {
            out.push(e);
        }
        let name = &self.name;
        if let Some(prefix) = self.effective_prefix() {
            out.extend(check_prefix(name, prefix, separator).err());
        }
        for (key, value) in [
            ("timeout_ms", Some(self.timeout_ms)),
            ("max_line_bytes", self.max_line_bytes),
            ("max_message_bytes", self.max_message_bytes),
        ] {
            if value == Some(0) {
                out.push(format!("upstream `{name}`: {key} must be greater than 0"));
            }
        }
        out.extend(self.replication_problems());
        let kind = self.kind.as_str();
        let stdio = self.kind == UpstreamKind::Stdio;
        let web = matches!(self.kind, UpstreamKind::Http | UpstreamKind::Sse);
        let set = [
            ("command", self.command.is_some(), stdio),
            ("args", !self.args.is_empty(), stdio),
            ("env", !self.env.is_empty(), stdio),
            ("cwd", self.cwd.is_some(), stdio),
            ("shared", self.shared, stdio),
            (
                "restart_backoff_ms",
                self.restart_backoff_ms.is_some(),
                stdio,
            ),
            (
                "restart_backoff_max_ms",
                self.restart_backoff_max_ms.is_some(),
                stdio,
            ),
            ("restart_stable_ms", self.restart_stable_ms.is_some(), stdio),
            (
                "max_attached_sessions",
                self.max_attached_sessions.is_some(),
                stdio,
            ),
            ("max_line_bytes", self.max_line_bytes.is_some(), stdio),
            ("url", self.url.is_some(), web),
            ("headers", !self.headers.is_empty(), web),
            ("max_message_bytes", self.max_message_bytes.is_some(), web),
            (
                "revision",
                self.revision.is_some(),
                self.kind == UpstreamKind::Http,
            ),
        ];
        for (field, present, allowed) in set {
            if present && !allowed {
                out.push(format!(
                    "upstream `{name}`: `{field}` does not apply to kind `{kind}`"
                ));
            }
        }
        if stdio && self.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
            out.push(format!("upstream `{name}`: kind `stdio` needs a `command`"));
        }
        if stdio {
            out.extend(self.stdio_problems());
        }
        if web {
            let url = self.url.as_deref().unwrap_or_default();
            let ok = ["http://", "https://"].iter().any(|s| {
                url.starts_with(s) && url.len() > s.len() && !url.contains(char::is_whitespace)
            });
            if !ok {
                out.push(format!(
                    "upstream `{name}`: kind `{kind}` needs a `url` starting with http:// or https://"
                ));
            }
        }
        if let Some(revision) = &self.revision {
            let stateless = switchboard_protocol::Revision::parse_stateless(revision).is_some();
            if self.kind == UpstreamKind::Http && !stateless {
                let served: Vec<&str> = switchboard_protocol::Revision::STATELESS
                    .iter()
                    .map(|r| r.as_str())
                    .collect();
                out.push(format!(
                    "upstream `{name}`: revision `{revision}` is not a stateless revision ({}); \
                     leave it out for a session-era server",
                    served.join(", ")
                ));
            }
        }
        for (header, value) in &self.headers {
            let token = !header.is_empty()
                && header
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
            if !token {
                out.push(format!(
                    "upstream `{name}`: `{header}` is not a valid header name"
                ));
            }
            if let Err(e) = expand(value, |_| Some(String::new())) {
                out.push(format!("upstream `{name}`: header `{header}`: {e}"));
            }
        }
        out
    }

    /// The stdio restart settings with their defaults.
    pub fn restart_policy(&self) -> crate::stdio::RestartPolicy {
        let defaults = crate::stdio::RestartPolicy::default();
        let ms = std::time::Duration::from_millis;
        crate::stdio::RestartPolicy {
            backoff: self.restart_backoff_ms.map_or(defaults.backoff, ms),
            backoff_max: self.restart_backoff_max_ms.map_or(defaults.backoff_max, ms),
            stable: self.restart_stable_ms.map_or(defaults.stable, ms),
        }
    }

    /// stdio, shared: the most sessions attached to the shared child (default
    /// [`crate::stdio::DEFAULT_MAX_ATTACHED_SESSIONS`]).
    pub fn max_attached_sessions(&self) -> usize {
        self.max_attached_sessions
            .map_or(crate::stdio::DEFAULT_MAX_ATTACHED_SESSIONS, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            })
    }

    /// `restart_backoff_ms` and `restart_stable_ms` > 0, `restart_backoff_max_ms` ≥
    /// `restart_backoff_ms` (each with its default when unset); `max_attached_sessions` > 0
    /// and only with `shared = true`.
    fn stdio_problems(&self) -> Vec<String> {
        let name = &self.name;
        let policy = self.restart_policy();
        let mut out = Vec::new();
        match self.max_attached_sessions {
            Some(0) => out.push(format!(
                "upstream `{name}`: max_attached_sessions must be greater than 0"
            )),
            Some(_) if !self.shared => out.push(format!(
                "upstream `{name}`: max_attached_sessions applies only with `shared = true`"
            )),
            _ => {}
        }
        for (field, value) in [
            ("restart_backoff_ms", policy.backoff),
            ("restart_stable_ms", policy.stable),
        ] {
            if value.is_zero() {
                out.push(format!("upstream `{name}`: {field} must be greater than 0"));
            }
        }
        if policy.backoff_max < policy.backoff {
            out.push(format!(
                "upstream `{name}`: restart_backoff_max_ms ({}) must be at least restart_backoff_ms ({})",
                policy.backoff_max.as_millis(),
                policy.backoff.as_millis()
            ));
        }
        out
    }

    /// The problems of the replication fields (`stateless`, `on_upstream_loss`,
    /// `resolve_interval_ms`, `nameservers`, `max_endpoints`, `max_cookie_bytes`): only a
    /// session-era http upstream has them, and their values must make sense.
    fn replication_problems(&self) -> Vec<String> {
        let name = &self.name;
        let session_http = self.kind == UpstreamKind::Http && self.revision.is_none();
        let set = [
            ("stateless", self.stateless),
            ("on_upstream_loss", self.on_upstream_loss.is_some()),
            ("resolve_interval_ms", self.resolve_interval_ms.is_some()),
            ("nameservers", !self.nameservers.is_empty()),
            ("max_endpoints", self.max_endpoints.is_some()),
            ("max_cookie_bytes", self.max_cookie_bytes.is_some()),
        ];
        let mut out = Vec::new();
        for (field, present) in set {
            if present && !session_http {
                out.push(format!(
                    "upstream `{name}`: `{field}` applies only to kind `http` without `revision`"
                ));
            }
        }
        if self.stateless && self.on_upstream_loss.is_some() {
            out.push(format!(
                "upstream `{name}`: `on_upstream_loss` does not apply to a `stateless` upstream \
                 (a session it forgot is initialized again and the request retried)"
            ));
        }
        if self.resolve_interval_ms == Some(0) {
            out.push(format!(
                "upstream `{name}`: resolve_interval_ms must be greater than 0"
            ));
        }
        if self.max_endpoints == Some(0) {
            out.push(format!(
                "upstream `{name}`: max_endpoints must be greater than 0"
            ));
        }
        for ns in &self.nameservers {
            if let Err(e) = crate::http::endpoints::parse_nameserver(ns) {
                out.push(format!("upstream `{name}`: {e}"));
            }
        }
        out
    }

    /// A copy with `${VAR}` in header values replaced by `lookup(VAR)`. Errors naming the upstream,
    /// the header and the variable when a variable is not set, and on malformed references.
    pub fn expanded(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<UpstreamConfig, String> {
        let mut out = self.clone();
        for (header, value) in out.headers.iter_mut() {
            *value = expand(value, &lookup)
                .map_err(|e| format!("upstream `{}`: header `{header}`: {e}", self.name))?;
        }
        Ok(out)
    }
}

/// Replaces each `${VAR}` (`VAR` = `[A-Za-z_][A-Za-z0-9_]*`) in `text` by `lookup(VAR)`; a `$`
/// not followed by `{` stays as is. Errors on an unset variable, an unclosed `${` or a bad name.
pub fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("unclosed `${{` in `{text}`"))?;
        let var = &after[..close];
        let valid = var
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "`${{{var}}}` is not a valid environment variable reference"
            ));
        }
        let value =
            lookup(var).ok_or_else(|| format!("environment variable `{var}` is not set"))?;
        out.push_str(&value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl UpstreamsConfig {
    /// Every problem: the separator's, then [`UpstreamsConfig::upstream_problems`]. Empty means
    /// valid.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = check_separator(&self.separator).err().into_iter().collect();
        out.extend(self.upstream_problems());
        out
    }

    /// The problems of the `[[upstreams]]` tables: each table's ([`UpstreamConfig::problems`]),
    /// names used twice, and (when the separator and every table are valid) prefixes whose
    /// namespaces overlap.
    pub fn upstream_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, upstream) in self.upstreams.iter().enumerate() {
            out.extend(upstream.problems(&self.separator));
            if self.upstreams[..i].iter().any(|u| u.name == upstream.name) {
                out.push(format!("upstream name `{}` is used twice", upstream.name));
            }
        }
        if out.is_empty() && check_separator(&self.separator).is_ok() {
            let spec: Vec<(&str, Option<&str>)> = self
                .upstreams
                .iter()
                .map(|u| (u.name.as_str(), u.effective_prefix()))
                .collect();
            out.extend(Namespaces::new(&spec, &self.separator).err());
        }
        out
    }
}

/// The node's upstream: the demo server alone when `config.upstreams` is empty, else an
/// [`Aggregate`] of every configured upstream. Header values are expanded from the process
/// environment here. Errors (naming the upstream) on any problem of [`UpstreamsConfig::problems`],
/// an unset variable, or a table its kind's constructor refuses.
pub fn build(config: &UpstreamsConfig) -> Result<Arc<dyn Upstream>, String> {
    if config.upstreams.is_empty() {
        let demo = Arc::new(DemoUpstream::new());
        return Ok(Arc::new(Tracked::new(
            "demo",
            UpstreamKind::Demo.as_str(),
            demo,
        )));
    }
    let problems = config.problems();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let members = config
        .upstreams
        .iter()
        .map(|u| {
            Ok(Member {
                name: u.name.clone(),
                prefix: u.effective_prefix().map(str::to_owned),
                upstream: build_one(u)?,
            })
        })
        .collect::<Result<Vec<Member>, String>>()?;
    Ok(Arc::new(Aggregate::new(members, &config.separator)?))
}

/// One upstream, its header values expanded from the process environment, inside the
/// [`Tracked`] wrapper that counts its calls.
pub fn build_one(config: &UpstreamConfig) -> Result<Arc<dyn Upstream>, String> {
    let config = config.expanded(|var| std::env::var(var).ok())?;
    let inner = build_kind(&config)?;
    Ok(Arc::new(Tracked::new(
        &config.name,
        config.kind.as_str(),
        inner,
    )))
}

/// The upstream of one (expanded) table, by kind.
fn build_kind(config: &UpstreamConfig) -> Result<Arc<dyn Upstream>, String> {
    let timeout = std::time::Duration::from_millis(config.timeout_ms);
    match config.kind {
        UpstreamKind::Demo => Ok(Arc::new(DemoUpstream::new())),
        UpstreamKind::Http if config.revision.is_some() => Ok(Arc::new(
            crate::http::modern::ModernHttpUpstream::from_config(config)?,
        )),
        UpstreamKind::Http => Ok(Arc::new(crate::http::HttpUpstream::from_config(config)?)),
        // A legacy SSE connection and a per-session stdio child live in one process: their
        // requests run on the node that owns them (see `placement`).
        UpstreamKind::Sse => {
            let sse = crate::sse::SseUpstream::from_config(config)?;
            Ok(Arc::new(NodeBound::new(Arc::new(sse), timeout)))
        }
        UpstreamKind::Stdio => {
            let stdio = crate::stdio::StdioUpstream::from_config(config)?;
            if stdio.is_shared() {
                // One child for every session: each node simply uses its own.
                Ok(Arc::new(stdio))
            } else {
                Ok(Arc::new(NodeBound::new(Arc::new(stdio), timeout)))
            }
        }
    }
}

#[cfg(test)]
mod tests;

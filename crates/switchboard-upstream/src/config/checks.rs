//! The checks of `[[upstreams]]` tables that serde cannot make: [`UpstreamsConfig::problems`]
//! (the separator, every table, names used twice, overlapping namespaces) and
//! [`UpstreamConfig::problems`] (one table: its name and prefix, limits > 0, the fields its kind
//! needs and refuses, and the per-kind settings). Every message names the upstream.

use switchboard_protocol::Revision;

/// The name of the built-in demo server when no `[[upstreams]]` table is configured.
pub const DEMO: &str = "demo";

use super::{expand, parse_nameserver, UpstreamConfig, UpstreamKind, UpstreamsConfig};
use crate::aggregate::names::{check_member_name, check_prefix, check_separator, Namespaces};

impl UpstreamsConfig {
    /// Every problem: the separator's, then [`UpstreamsConfig::upstream_problems`]. Empty means
    /// valid.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = check_separator(&self.separator).err().into_iter().collect();
        out.extend(self.upstream_problems());
        out.extend(self.policy.problems(&self.member_names()));
        out
    }

    /// The names `[policy]` rules may give upstreams: every table's, or `demo` (the built-in
    /// server) when there is none.
    pub fn member_names(&self) -> Vec<&str> {
        if self.upstreams.is_empty() {
            return vec![DEMO];
        }
        self.upstreams.iter().map(|u| u.name.as_str()).collect()
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

impl UpstreamConfig {
    /// Every problem of this table alone, each message starting `upstream `NAME``: the name,
    /// the prefix's characters, `timeout_ms`, `max_line_bytes` and `max_message_bytes` > 0, the
    /// stdio restart settings, the fields its kind needs (stdio: `command`;
    /// http, sse: an `http(s)://` `url`) and refuses (another kind's fields), header names and
    /// the `${VAR}` syntax of header values.
    pub fn problems(&self, separator: &str) -> Vec<String> {
        let mut out = self.name_problems(separator);
        out.extend(self.replication_problems());
        out.extend(self.misplaced_fields());
        match self.kind {
            UpstreamKind::Stdio => {
                if self.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
                    out.push(format!(
                        "upstream `{}`: kind `stdio` needs a `command`",
                        self.name
                    ));
                }
                out.extend(self.stdio_problems());
            }
            UpstreamKind::Http | UpstreamKind::Sse => out.extend(self.url_problem()),
            UpstreamKind::Demo => {}
        }
        out.extend(self.revision_problem());
        out.extend(self.header_problems());
        out
    }

    /// The name, the prefix's characters, and `timeout_ms`, `max_line_bytes` and
    /// `max_message_bytes` > 0.
    fn name_problems(&self, separator: &str) -> Vec<String> {
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
        out
    }

    /// The fields of another kind than this table's.
    fn misplaced_fields(&self) -> Vec<String> {
        let name = &self.name;
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
        set.into_iter()
            .filter(|(_, present, allowed)| *present && !allowed)
            .map(|(field, _, _)| {
                format!("upstream `{name}`: `{field}` does not apply to kind `{kind}`")
            })
            .collect()
    }

    /// http, sse: the `url` must be `http(s)://` and something, without whitespace.
    fn url_problem(&self) -> Option<String> {
        let url = self.url.as_deref().unwrap_or_default();
        let ok = ["http://", "https://"].iter().any(|s| {
            url.starts_with(s) && url.len() > s.len() && !url.contains(char::is_whitespace)
        });
        (!ok).then(|| {
            format!(
                "upstream `{}`: kind `{}` needs a `url` starting with http:// or https://",
                self.name,
                self.kind.as_str()
            )
        })
    }

    /// http: a `revision` must be a stateless one (another kind's is a misplaced field).
    fn revision_problem(&self) -> Option<String> {
        let revision = self.revision.as_ref()?;
        let stateless = Revision::parse_stateless(revision).is_some();
        if self.kind != UpstreamKind::Http || stateless {
            return None;
        }
        let served: Vec<&str> = Revision::STATELESS.iter().map(|r| r.as_str()).collect();
        Some(format!(
            "upstream `{}`: revision `{revision}` is not a stateless revision ({}); \
             leave it out for a session-era server",
            self.name,
            served.join(", ")
        ))
    }

    /// Header names (HTTP tokens) and the `${VAR}` syntax of header values.
    fn header_problems(&self) -> Vec<String> {
        let name = &self.name;
        let mut out = Vec::new();
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
            if let Err(e) = parse_nameserver(ns) {
                out.push(format!("upstream `{name}`: {e}"));
            }
        }
        if session_http && !self.nameservers.is_empty() {
            out.extend(self.ip_host().map(|host| {
                format!(
                    "upstream `{name}`: `nameservers` does nothing here: the `url`'s host {host} \
                     is an IP address, which is not resolved (remove `nameservers`, or give \
                     the host's name in `url`)"
                )
            }));
        }
        out
    }

    /// The `url`'s host when it is an IP address (`127.0.0.1`, `[::1]`).
    fn ip_host(&self) -> Option<String> {
        let url = reqwest::Url::parse(self.url.as_deref()?).ok()?;
        let host = url.host_str()?;
        url.domain().is_none().then(|| host.to_owned())
    }
}

//! Header checks that run before any session is touched (layers 2 and 5 of the stack in `app.rs`):
//! `Origin`, `Host`, `Content-Type`, `Accept` and the format of `MCP-Protocol-Version`.
//!
//! Sources: MCP 2025-11-25, basic/transports (Security Warning: validate `Origin`, 403 when
//! invalid; Protocol Version Header: 400 for an invalid or unsupported value).
//! `Host` allow-listing is not spec text: it is the DNS-rebinding protection the SDKs offer.
//!
//! ## The `Accept` policy: which answer forms a client takes
//!
//! MCP 2025-11-25 (basic/transports, Sending Messages to the Server item 2) makes the *client*
//! list both `application/json` and `text/event-stream` on every POST, and says nothing of what a
//! server does otherwise. Real clients send less (Anthropic's connector proxy sends only
//! `text/event-stream`, the simplest HTTP clients only `application/json`: case C18), so the node
//! is lenient and answers in a form the client accepts:
//!
//! | `Accept` of a POST | [`Answers`] | the answer |
//! |---|---|---|
//! | both types, a wildcard covering both (`*/*`), or none | [`Answers::Either`] | JSON or SSE, chosen per request (`http.sse_after`) |
//! | `text/event-stream` only | [`Answers::SseOnly`] | always an SSE stream, even when the answer is ready at once |
//! | `application/json` only | [`Answers::JsonOnly`] | exactly one JSON body, never a stream |
//! | neither (`text/html`) | refused | 406 with a JSON-RPC error body |
//!
//! Media ranges are matched as RFC 9110 §12.5.1 says: case-insensitively, the most specific
//! range that matches a type decides its quality, and a quality of 0 refuses it
//! (`text/event-stream;q=0, */*` accepts JSON only). Parameters other than `q` are ignored.
//! Which of two acceptable types the client prefers (`q=0.9` against `q=0.1`) does not matter:
//! the node still chooses per request. A GET must accept `text/event-stream`
//! ([`check_get`]).
//!
//! What JSON-only costs (a request has no stream of its own): notifications tied to it
//! (progress, log messages) go to the session's standalone stream instead (logged, so an open GET
//! stream or a resume with `Last-Event-ID` receives them; counted by
//! `switchboard_notifications_rerouted_total`), or, in 2026-07-28, which has no standalone
//! stream, are dropped and counted (`switchboard_notifications_dropped_total`); a server-to-client
//! request during it (sampling, elicitation, roots) is refused to the upstream at once with
//! [`JSON_ONLY_REQUESTS`], so the call ends with a clear error instead of waiting for an answer
//! that cannot come; `subscriptions/listen`, which is a stream, is refused with 406.

use http::{header, HeaderMap};
use switchboard_protocol::{headers, meta, Revision};

use crate::config::NodeConfig;
use crate::edge::error::HttpError;

/// Refuses a foreign `Origin` (403) or `Host` (421), and either sent twice (400). Requests
/// without `Origin` (non-browser clients) pass. The host checked is the authority the request
/// targets: the target's own in absolute form (`POST http://host/mcp`, RFC 9112 §3.2.2: the
/// `Host` header is then ignored), else `Host`; an HTTP/1.1 request with neither gets 400
/// (RFC 9112 §3.2), so none slips past the Host allow-list.
pub fn check_origin_and_host(
    cfg: &NodeConfig,
    version: http::Version,
    target: &http::Uri,
    h: &HeaderMap,
) -> Result<(), HttpError> {
    // One value each (RFC 9110 §5.3; RFC 9112 §3.2: more than one Host is 400); a second one
    // would be checked by nobody.
    let (origin, host) = (
        single(h, header::ORIGIN.as_str())?,
        single(h, header::HOST.as_str())?,
    );
    if let Some(origin) = origin {
        let origin = origin.to_str().unwrap_or("<non-ascii>");
        if !origin_allowed(cfg, origin) {
            return Err(HttpError::ForbiddenOrigin(origin.to_owned()));
        }
    }
    let host = match (target.authority(), host) {
        (Some(authority), _) => authority.as_str(),
        (None, Some(host)) => host.to_str().unwrap_or("<non-ascii>"),
        (None, None) if version == http::Version::HTTP_11 => return Err(HttpError::MissingHost),
        (None, None) => return Ok(()),
    };
    if !host_allowed(cfg, host) {
        return Err(HttpError::ForbiddenHost(host.to_owned()));
    }
    Ok(())
}

/// Whether `origin` passes the Origin check: listed in `http.allowed_origins` (or `*` listed),
/// or a loopback origin.
pub fn origin_allowed(cfg: &NodeConfig, origin: &str) -> bool {
    if cfg
        .allowed_origins
        .iter()
        .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && is_loopback_name(strip_port(rest))
}

fn host_allowed(cfg: &NodeConfig, host: &str) -> bool {
    let name = strip_port(host);
    if !cfg.allowed_hosts.is_empty() {
        return cfg
            .allowed_hosts
            .iter()
            .any(|h| h == "*" || h.eq_ignore_ascii_case(name));
    }
    !cfg.loopback_only || is_loopback_name(name)
}

/// `host[:port]` → `host`, keeping bracketed IPv6 literals whole.
fn strip_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or(authority);
    }
    authority
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(authority)
}

fn is_loopback_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name == "[::1]"
        || name.starts_with("127.") && name.parse::<std::net::Ipv4Addr>().is_ok()
}

/// The one value of header `name`, if sent: a header sent more than once is refused (400,
/// -32600). `Mcp-Session-Id`, `MCP-Protocol-Version`, `Content-Type` and `Last-Event-ID` hold
/// one value each (RFC 9110 §5.3: a sender MUST NOT repeat a field that is not a list), and
/// two that differ leave the request ambiguous: which session, revision or stream it means.
pub fn single<'a>(
    h: &'a HeaderMap,
    name: &str,
) -> Result<Option<&'a http::HeaderValue>, HttpError> {
    let mut values = h.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(HttpError::InvalidRequest(format!(
            "the {name} header is sent more than once"
        )));
    }
    Ok(first)
}

/// A POST body must be `application/json` (parameters such as `charset` allowed), else 415;
/// `Content-Type` sent twice is 400 ([`single`]).
pub fn check_content_type(h: &HeaderMap) -> Result<(), HttpError> {
    let ct = single(h, "Content-Type")?
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if media.eq_ignore_ascii_case(headers::APPLICATION_JSON) {
        Ok(())
    } else {
        Err(HttpError::UnsupportedMediaType)
    }
}

/// Reads `MCP-Protocol-Version`: `None` when absent, the revision when we speak it, 400 otherwise
/// (MCP 2025-06-18, basic/transports, Protocol Version Header: 400 for an invalid or unsupported
/// value). A revision we speak that differs from the session's negotiated one is accepted: the
/// negotiated revision keeps deciding the session's transport behaviour (batches, priming), and the
/// spec requires 400 only for invalid or unsupported values (the conformance suite's
/// `server-sse-multiple-streams` sends 2025-03-26 on a 2025-11-25 session).
pub fn protocol_version(h: &HeaderMap) -> Result<Option<Revision>, HttpError> {
    match single(h, headers::MCP_PROTOCOL_VERSION)? {
        None => Ok(None),
        Some(v) => {
            let s = v.to_str().unwrap_or("<non-ascii>");
            Revision::parse(s)
                .map(Some)
                .ok_or_else(|| HttpError::BadProtocolVersion(s.to_owned()))
        }
    }
}

/// Why a server-to-client request is refused during a call of a client that accepts only
/// `application/json` (the upstream gets it as the JSON-RPC error's message).
pub const JSON_ONLY_REQUESTS: &str = "the client accepts only application/json (its Accept \
     header lacks text/event-stream), so this call has no stream on which a request could be \
     sent to it";

/// The answer forms a POST's `Accept` allows (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answers {
    /// Both forms: the node chooses per request.
    Either,
    /// `application/json` only: one JSON body, never a stream.
    JsonOnly,
    /// `text/event-stream` only: always a stream.
    SseOnly,
}

impl Answers {
    /// The forms `h`'s `Accept` allows on a POST; 406 when it allows neither.
    pub fn of_post(h: &HeaderMap) -> Result<Answers, HttpError> {
        // What the SDKs send, in either order, decided without parsing media ranges (the
        // same answer `accepts` gives for it).
        let mut values = h.get_all(header::ACCEPT).iter();
        if let (Some(v), None) = (values.next(), values.next()) {
            if matches!(
                v.as_bytes(),
                b"application/json, text/event-stream" | b"text/event-stream, application/json"
            ) {
                return Ok(Answers::Either);
            }
        }
        let json = accepts(h, headers::APPLICATION_JSON);
        let sse = accepts(h, headers::TEXT_EVENT_STREAM);
        match (json, sse) {
            (true, true) => Ok(Answers::Either),
            (true, false) => Ok(Answers::JsonOnly),
            (false, true) => Ok(Answers::SseOnly),
            (false, false) => Err(HttpError::NotAcceptable(
                "Accept must allow application/json or text/event-stream",
            )),
        }
    }
}

/// A GET must accept `text/event-stream`, else 406.
pub fn check_get(h: &HeaderMap) -> Result<(), HttpError> {
    if accepts(h, headers::TEXT_EVENT_STREAM) {
        Ok(())
    } else {
        Err(HttpError::NotAcceptable(
            "Accept must allow text/event-stream",
        ))
    }
}

/// Whether `Accept` allows `media` (a lower-case `type/subtype`): the quality of the most
/// specific range that matches it (exact, then `type/*`, then `*/*`) is above 0. A missing
/// `Accept` allows anything (RFC 9110 §12.5.1); a range that does not parse is skipped.
pub fn accepts(h: &HeaderMap, media: &str) -> bool {
    let mut values = h
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .peekable();
    if values.peek().is_none() {
        return true;
    }
    let (main, sub) = media.split_once('/').unwrap_or((media, ""));
    // (specificity, quality) of the best match so far: 2 exact, 1 `type/*`, 0 `*/*`.
    let mut best: Option<(u8, f32)> = None;
    for range in values.flat_map(|v| v.split(',')) {
        let Ok(range) = range.trim().parse::<mime::Mime>() else {
            continue;
        };
        let specificity = match (range.type_().as_str(), range.subtype().as_str()) {
            (t, s) if t == main && s == sub => 2,
            (t, "*") if t == main => 1,
            ("*", "*") => 0,
            _ => continue,
        };
        let quality = range
            .get_param("q")
            .map_or(1.0, |q| q.as_str().parse::<f32>().unwrap_or(1.0));
        best = match best {
            Some((s, q)) if s > specificity || (s == specificity && q >= quality) => Some((s, q)),
            _ => Some((specificity, quality)),
        };
    }
    best.is_some_and(|(_, q)| q > 0.0)
}

// The revision a request speaks: the sessionless 2026-07-28 era or a session-era one.

/// Whether a POST belongs to the stateless era (MCP 2026-07-28: no `Mcp-Session-Id`, not
/// `initialize`, and the revision in `_meta` or in `MCP-Protocol-Version`; see
/// `transport::stateless`).
pub fn is_modern(h: &HeaderMap, body: &switchboard_protocol::Body) -> bool {
    if h.contains_key(headers::MCP_SESSION_ID) {
        return false;
    }
    let switchboard_protocol::Body::Single(m) = body else {
        return false;
    };
    if m.method() == Some("initialize") {
        return false;
    }
    let in_meta = m
        .raw()
        .pointer("/params/_meta")
        .and_then(|meta| meta.get(meta::PROTOCOL_VERSION))
        .is_some();
    in_meta || stateless_header(h)
}

/// Whether `MCP-Protocol-Version` names a stateless revision (for GET/DELETE: 405).
pub fn stateless_header(h: &HeaderMap) -> bool {
    h.get(headers::MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(Revision::parse_stateless)
        .is_some()
}

/// GET and DELETE of the stateless era: without `Mcp-Session-Id` and with a stateless
/// `MCP-Protocol-Version`, 405 (MCP 2026-07-28, basic/transports, Earlier Streamable HTTP
/// Revisions: no GET stream, no session to delete).
pub fn refuse_get_or_delete(h: &HeaderMap) -> Result<(), HttpError> {
    if !h.contains_key(headers::MCP_SESSION_ID) && stateless_header(h) {
        return Err(HttpError::MethodNotAllowed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use http::StatusCode;

    const V11: http::Version = http::Version::HTTP_11;
    static ORIGIN_FORM: std::sync::LazyLock<http::Uri> =
        std::sync::LazyLock::new(|| http::Uri::from_static("/mcp"));

    /// The check of an HTTP/1.1 request to `/mcp` with headers `h` (`Host: 127.0.0.1` added
    /// when `h` has none).
    fn check(cfg: &NodeConfig, h: &HeaderMap) -> Result<(), HttpError> {
        let mut h = h.clone();
        if !h.contains_key(header::HOST) {
            h.insert(header::HOST, HeaderValue::from_static("127.0.0.1"));
        }
        check_origin_and_host(cfg, V11, &ORIGIN_FORM, &h)
    }

    /// RFC 9112 §3.2 and §3.2.2: an HTTP/1.1 request needs a `Host`; in absolute form the
    /// target's authority is the one checked, whatever `Host` says.
    #[test]
    fn the_host_checked_is_the_one_targeted() {
        let cfg = NodeConfig::default();
        let none = HeaderMap::new();
        let e = check_origin_and_host(&cfg, V11, &ORIGIN_FORM, &none).unwrap_err();
        assert_eq!(e, HttpError::MissingHost);
        assert!(check_origin_and_host(&cfg, http::Version::HTTP_10, &ORIGIN_FORM, &none).is_ok());
        let absolute = http::Uri::from_static("http://evil.example/mcp");
        let local = hm(&[("host", "127.0.0.1:8080")]);
        let e = check_origin_and_host(&cfg, V11, &absolute, &local).unwrap_err();
        assert_eq!(e, HttpError::ForbiddenHost("evil.example".into()));
        let mine = http::Uri::from_static("http://127.0.0.1:8080/mcp");
        let foreign = hm(&[("host", "evil.example")]);
        assert!(check_origin_and_host(&cfg, V11, &mine, &foreign).is_ok());
    }

    fn hm(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origin_or_host_sent_twice_is_refused() {
        let cfg = NodeConfig::default();
        let two_origins = hm(&[
            ("origin", "http://localhost"),
            ("origin", "http://evil.example"),
        ]);
        let two_hosts = hm(&[("host", "127.0.0.1"), ("host", "evil.example")]);
        for h in [two_origins, two_hosts] {
            let e = check_origin_and_host(&cfg, V11, &ORIGIN_FORM, &h).unwrap_err();
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{h:?}");
        }
    }

    #[test]
    fn origins() {
        let cfg = NodeConfig::default();
        assert!(check(&cfg, &hm(&[("origin", "http://localhost:3000")])).is_ok());
        assert!(check(&cfg, &hm(&[("origin", "http://127.0.0.1")])).is_ok());
        assert!(check(&cfg, &hm(&[("origin", "https://[::1]:8443")])).is_ok());
        let e = check(&cfg, &hm(&[("origin", "https://evil.example")])).unwrap_err();
        assert_eq!(e.status(), http::StatusCode::FORBIDDEN);
        assert!(check(&cfg, &hm(&[("origin", "http://localhost.evil.example")])).is_err());
        let cfg = NodeConfig {
            allowed_origins: vec!["https://app.example".into()],
            ..NodeConfig::default()
        };
        assert!(check(&cfg, &hm(&[("origin", "https://app.example")])).is_ok());
    }

    #[test]
    fn hosts() {
        let cfg = NodeConfig::default();
        assert!(check(&cfg, &hm(&[("host", "127.0.0.1:8080")])).is_ok());
        assert!(check(&cfg, &hm(&[("host", "localhost")])).is_ok());
        let e = check(&cfg, &hm(&[("host", "evil.example:8080")])).unwrap_err();
        assert_eq!(e.status(), http::StatusCode::MISDIRECTED_REQUEST);
        let open = NodeConfig {
            loopback_only: false,
            ..NodeConfig::default()
        };
        assert!(check(&open, &hm(&[("host", "gw.example")])).is_ok());
        let listed = NodeConfig {
            allowed_hosts: vec!["gw.example".into()],
            ..NodeConfig::default()
        };
        assert!(check(&listed, &hm(&[("host", "gw.example:443")])).is_ok());
        assert!(check(&listed, &hm(&[("host", "other.example")])).is_err());
    }

    #[test]
    fn content_type_and_versions() {
        assert!(
            check_content_type(&hm(&[("content-type", "application/json; charset=utf-8")])).is_ok()
        );
        assert!(check_content_type(&hm(&[("content-type", "text/plain")])).is_err());
        assert!(check_content_type(&hm(&[])).is_err());
        assert_eq!(protocol_version(&hm(&[])).unwrap(), None);
        assert!(protocol_version(&hm(&[("mcp-protocol-version", "1900-01-01")])).is_err());
        assert!(protocol_version(&hm(&[("mcp-protocol-version", "not-a-version")])).is_err());
        let r = protocol_version(&hm(&[("mcp-protocol-version", "2025-06-18")])).unwrap();
        assert_eq!(r, Some(Revision::V2025_06_18));
    }
}

#[cfg(test)]
mod accept_tests {
    use super::*;
    use http::{HeaderValue, StatusCode};

    fn accept(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT, HeaderValue::from_static(v));
        }
        h
    }

    fn answers(values: &[&'static str]) -> Option<Answers> {
        Answers::of_post(&accept(values)).ok()
    }

    #[test]
    fn post_forms_by_accept() {
        use Answers::*;
        let cases: [(&[&'static str], Option<Answers>); 14] = [
            (&["application/json, text/event-stream"], Some(Either)),
            (&["text/event-stream", "application/json"], Some(Either)),
            (&["*/*"], Some(Either)),
            (&[], Some(Either)),
            (&["application/*, text/*"], Some(Either)),
            (&["text/event-stream"], Some(SseOnly)),
            (&["Text/Event-Stream; charset=utf-8"], Some(SseOnly)),
            (&["application/json"], Some(JsonOnly)),
            (
                &["application/json;q=0.5, text/event-stream;q=0"],
                Some(JsonOnly),
            ),
            (&["text/event-stream;q=0, */*"], Some(JsonOnly)),
            (&["*/*;q=0, text/event-stream"], Some(SseOnly)),
            (&["text/html"], None),
            (&["application/json;q=0, text/event-stream;q=0.000"], None),
            (&["not a media type"], None),
        ];
        for (values, expected) in cases {
            assert_eq!(answers(values), expected, "Accept: {values:?}");
        }
    }

    #[test]
    fn get_needs_an_event_stream() {
        assert!(check_get(&accept(&["text/event-stream"])).is_ok());
        assert!(check_get(&accept(&["text/*"])).is_ok());
        assert!(check_get(&accept(&[])).is_ok());
        assert!(check_get(&accept(&["application/json"])).is_err());
        assert!(check_get(&accept(&["text/event-stream;q=0"])).is_err());
        assert!(check_get(&accept(&["text/event-stream;q=0, */*"])).is_err());
        let e = check_get(&accept(&["text/html"])).unwrap_err();
        assert_eq!(e.status(), StatusCode::NOT_ACCEPTABLE);
    }
}

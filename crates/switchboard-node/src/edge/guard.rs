//! Header checks that run before any session is touched: `Origin`, `Host`, `Content-Type` and
//! the format of `MCP-Protocol-Version` (`Accept` is [`crate::edge::accept`]'s).
//!
//! Sources: MCP 2025-11-25, basic/transports (Security Warning: validate `Origin`, 403 when
//! invalid; Protocol Version Header: 400 for an invalid or unsupported value).
//! `Host` allow-listing is not spec text: it is the DNS-rebinding protection the SDKs offer.

use http::{header, HeaderMap};
use switchboard_protocol::{headers, Revision};

use crate::config::NodeConfig;
use crate::edge::error::HttpError;

/// Refuses a foreign `Origin` (403) or `Host` (421). Requests without `Origin` (non-browser
/// clients) pass.
pub fn check_origin_and_host(cfg: &NodeConfig, h: &HeaderMap) -> Result<(), HttpError> {
    if let Some(origin) = h.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("<non-ascii>");
        if !origin_allowed(cfg, origin) {
            return Err(HttpError::ForbiddenOrigin(origin.to_owned()));
        }
    }
    if let Some(host) = h.get(header::HOST) {
        let host = host.to_str().unwrap_or("<non-ascii>");
        if !host_allowed(cfg, host) {
            return Err(HttpError::ForbiddenHost(host.to_owned()));
        }
    }
    Ok(())
}

fn origin_allowed(cfg: &NodeConfig, origin: &str) -> bool {
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

/// A POST body must be `application/json` (parameters such as `charset` allowed), else 415.
pub fn check_content_type(h: &HeaderMap) -> Result<(), HttpError> {
    let ct = h
        .get(header::CONTENT_TYPE)
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
    match h.get(headers::MCP_PROTOCOL_VERSION) {
        None => Ok(None),
        Some(v) => {
            let s = v.to_str().unwrap_or("<non-ascii>");
            Revision::parse(s)
                .map(Some)
                .ok_or_else(|| HttpError::BadProtocolVersion(s.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn hm(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origins() {
        let cfg = NodeConfig::default();
        assert!(check_origin_and_host(&cfg, &hm(&[("origin", "http://localhost:3000")])).is_ok());
        assert!(check_origin_and_host(&cfg, &hm(&[("origin", "http://127.0.0.1")])).is_ok());
        assert!(check_origin_and_host(&cfg, &hm(&[("origin", "https://[::1]:8443")])).is_ok());
        let e =
            check_origin_and_host(&cfg, &hm(&[("origin", "https://evil.example")])).unwrap_err();
        assert_eq!(e.status(), http::StatusCode::FORBIDDEN);
        assert!(
            check_origin_and_host(&cfg, &hm(&[("origin", "http://localhost.evil.example")]))
                .is_err()
        );
        let cfg = NodeConfig {
            allowed_origins: vec!["https://app.example".into()],
            ..NodeConfig::default()
        };
        assert!(check_origin_and_host(&cfg, &hm(&[("origin", "https://app.example")])).is_ok());
    }

    #[test]
    fn hosts() {
        let cfg = NodeConfig::default();
        assert!(check_origin_and_host(&cfg, &hm(&[("host", "127.0.0.1:8080")])).is_ok());
        assert!(check_origin_and_host(&cfg, &hm(&[("host", "localhost")])).is_ok());
        let e = check_origin_and_host(&cfg, &hm(&[("host", "evil.example:8080")])).unwrap_err();
        assert_eq!(e.status(), http::StatusCode::MISDIRECTED_REQUEST);
        let open = NodeConfig {
            loopback_only: false,
            ..NodeConfig::default()
        };
        assert!(check_origin_and_host(&open, &hm(&[("host", "gw.example")])).is_ok());
        let listed = NodeConfig {
            allowed_hosts: vec!["gw.example".into()],
            ..NodeConfig::default()
        };
        assert!(check_origin_and_host(&listed, &hm(&[("host", "gw.example:443")])).is_ok());
        assert!(check_origin_and_host(&listed, &hm(&[("host", "other.example")])).is_err());
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

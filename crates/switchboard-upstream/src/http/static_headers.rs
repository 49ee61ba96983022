//! The static headers an upstream is configured with (`headers` of its `[[upstreams]]` table):
//! sent on every request to it, values marked sensitive (they are usually credentials). The
//! headers switchboard sets itself cannot be configured.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use switchboard_protocol::headers;

/// Headers we set ourselves; static headers from the configuration may not override them. A
/// configured `Cookie` is allowed: the cookies of an upstream session are added to it.
const RESERVED: [&str; 7] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    headers::MCP_SESSION_ID,
    headers::MCP_PROTOCOL_VERSION,
    headers::LAST_EVENT_ID,
];

/// The static headers as a header map (values marked sensitive: they are credentials).
pub(crate) fn parse<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<HeaderMap, String>
where
    K: AsRef<str>,
    V: AsRef<str>,
{
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        let (k, v) = (k.as_ref(), v.as_ref());
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("invalid header name {k:?}"))?;
        if RESERVED.contains(&name.as_str()) {
            return Err(format!(
                "header {k:?} is set by switchboard and cannot be configured"
            ));
        }
        let mut value =
            HeaderValue::from_str(v).map_err(|_| format!("invalid value for header {k:?}"))?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_and_invalid_headers_are_refused() {
        assert!(parse([("X-Api-Key", "k")]).is_ok());
        let reserved = parse([("Mcp-Session-Id", "x")]);
        assert!(reserved.err().unwrap().contains("cannot be configured"));
        assert!(parse([("bad header", "x")]).is_err());
        assert!(parse([("X-Api-Key", "bad\nvalue")]).is_err());
        let map = parse([("Authorization", "Bearer k")]).unwrap();
        assert!(map["authorization"].is_sensitive());
    }
}

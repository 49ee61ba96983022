//! The value encoding of MCP 2026-07-28 request headers (basic/transports, Value Encoding).
//!
//! A value that is not safe plain ASCII (non-ASCII, control characters, leading or trailing
//! whitespace), or that itself looks like the sentinel, is sent as `=?base64?<base64 of the UTF-8
//! bytes>?=`. The markers are case-sensitive (`=?BASE64?…?=` is a plain value). Servers MUST decode
//! before comparing with the body; a value that claims the encoding but does not decode to UTF-8
//! is a header mismatch.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Why a header value could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// The header bytes are not visible ASCII (HTTP allows obs-text; MCP values never need it).
    NotAscii,
    /// `=?base64?…?=` whose payload is not base64 of UTF-8 text.
    BadEncoding,
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ValueError::NotAscii => "it is not visible ASCII",
            ValueError::BadEncoding => "its =?base64?…?= payload is not base64 of UTF-8 text",
        })
    }
}

/// Decodes one header value: the `=?base64?…?=` form to its text, any other value as is.
pub fn decode(raw: &[u8]) -> Result<String, ValueError> {
    let text = std::str::from_utf8(raw)
        .ok()
        .filter(|s| s.is_ascii())
        .ok_or(ValueError::NotAscii)?;
    let Some(payload) = text
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
    else {
        return Ok(text.to_owned());
    };
    let bytes = STANDARD
        .decode(payload)
        .map_err(|_| ValueError::BadEncoding)?;
    String::from_utf8(bytes).map_err(|_| ValueError::BadEncoding)
}

/// Encodes a value for a header: plain when it is safe visible ASCII (spaces inside allowed) and
/// does not look like the sentinel, else `=?base64?…?=`.
pub fn encode(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with(PREFIX) && value.ends_with(SUFFIX));
    if plain {
        value.to_owned()
    } else {
        format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(value.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_pass_through() {
        assert_eq!(decode(b"echo").unwrap(), "echo");
        assert_eq!(decode(b"demo://greeting").unwrap(), "demo://greeting");
        assert_eq!(encode("echo"), "echo");
    }

    #[test]
    fn base64_values_decode_and_round_trip() {
        assert_eq!(decode(b"=?base64?ZWNobw==?=").unwrap(), "echo");
        for v in [
            "caf\u{e9} au lait",
            " padded ",
            "=?base64?x?=",
            "tab\there",
            "",
        ] {
            let e = encode(v);
            assert!(e.starts_with(PREFIX), "{v:?} → {e}");
            assert_eq!(decode(e.as_bytes()).unwrap(), v);
        }
    }

    #[test]
    fn markers_are_case_sensitive_and_bad_payloads_fail() {
        assert_eq!(
            decode(b"=?BASE64?ZWNobw==?=").unwrap(),
            "=?BASE64?ZWNobw==?="
        );
        assert_eq!(
            decode(b"=?base64?not base64!?="),
            Err(ValueError::BadEncoding)
        );
        assert_eq!(decode(b"=?base64?//79?="), Err(ValueError::BadEncoding));
        assert_eq!(decode("caf\u{e9}".as_bytes()), Err(ValueError::NotAscii));
    }
}

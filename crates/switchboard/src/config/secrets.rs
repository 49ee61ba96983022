//! What `switchboard config` hides in `[[upstreams]]`: credentials in header values, stdio
//! environment values, and the password in a URL's user info. (`[auth]` hides its HS256
//! secrets itself, [`switchboard_node::auth::AuthSettings::redacted`]; `[redis]` its
//! passwords, [`super::RedisConfig::redacted`].)
//!
//! A header or environment value is shown only when its secret part comes from `${VAR}`
//! references: what is left without them is empty or one word (an auth scheme, `Bearer `).
//! Every other value is shown as `***`, even ones that are not secret, since a literal value
//! cannot be told apart from a pasted token.

use std::collections::BTreeMap;

use switchboard_node::auth::REDACTED;
use switchboard_upstream::config::UpstreamConfig;

/// `upstream` with its credentials shown as `***`.
pub(super) fn redacted_upstream(upstream: &UpstreamConfig) -> UpstreamConfig {
    UpstreamConfig {
        headers: redacted_values(&upstream.headers),
        env: redacted_values(&upstream.env),
        url: upstream.url.as_deref().map(redacted_url),
        ..upstream.clone()
    }
}

fn redacted_values(values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    values
        .iter()
        .map(|(k, v)| (k.clone(), redacted_value(v)))
        .collect()
}

/// `value` when all it holds literally is at most one word besides `${VAR}` references, else
/// `***`.
fn redacted_value(value: &str) -> String {
    let mut literal = String::new();
    let mut rest = value;
    let mut references = 0;
    while let Some(start) = rest.find("${") {
        literal.push_str(&rest[..start]);
        match rest[start..].find('}') {
            Some(end) => {
                references += 1;
                rest = &rest[start + end + 1..];
            }
            None => {
                literal.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    literal.push_str(rest);
    let words = literal.split_whitespace().count();
    let scheme_only = literal
        .trim()
        .chars()
        .all(|c| c.is_ascii_alphabetic() || c == '-');
    if references > 0 && words <= 1 && scheme_only {
        value.to_owned()
    } else {
        REDACTED.to_owned()
    }
}

/// `url` with the password of its user info (`https://user:pw@host/…`) shown as `***`.
fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split_once(':').map_or(user_info, |(u, _)| u);
            format!("{scheme}://{user}:{REDACTED}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_credentials_are_hidden_and_references_shown() {
        for (value, shown) in [
            ("Bearer ${WEATHER_TOKEN}", "Bearer ${WEATHER_TOKEN}"),
            ("${TOKEN}", "${TOKEN}"),
            ("Basic ${USER_PASS}", "Basic ${USER_PASS}"),
            ("Bearer sk-live-abc", "***"),
            ("Bearer abc${X}", "***"),
            ("sk-live-abc", "***"),
            ("${UNCLOSED", "***"),
            ("a b ${X}", "***"),
            ("", "***"),
        ] {
            assert_eq!(redacted_value(value), shown, "{value}");
        }
    }

    #[test]
    fn url_passwords_are_hidden() {
        assert_eq!(
            redacted_url("https://u:pw@mcp.example/p@th?x=@"),
            "https://u:***@mcp.example/p@th?x=@"
        );
        assert_eq!(
            redacted_url("https://mcp.example/p@th"),
            "https://mcp.example/p@th"
        );
        assert_eq!(redacted_url("not a url"), "not a url");
    }
}

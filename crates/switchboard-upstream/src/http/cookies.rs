//! The cookies an upstream sets for one upstream session, kept with its binding in the client's
//! session record and sent back on every later request of that upstream session. This is how a
//! balancer in front of several replicas (one address, several backends) pins a session to one
//! of them: HAProxy `cookie SRV insert`, ingress-nginx session affinity, cloud balancers' own
//! cookies.
//!
//! Only `name=value` is kept (RFC 6265 §5.4: the `Cookie` header carries no attributes); every
//! request of the session goes to the same URL, so `Path` and `Domain` do not choose between
//! them. A `Set-Cookie` with `Max-Age` ≤ 0 or an `Expires` in the past removes its cookie. The
//! jar is kept at most `max_cookie_bytes` long (the `Cookie` header's length): a cookie that
//! would make it longer is not kept, with a warning naming the upstream. Cookies are learned
//! from the answers to POSTs (the `initialize` answer first of all); those on GET and DELETE
//! answers are not read. The client's own cookies are never forwarded (they never reach an
//! upstream).
//!
//! The cookie parsing is the `cookie` crate's.

use cookie::{Cookie, Expiration};

/// The default of `max_cookie_bytes`.
pub const DEFAULT_MAX_COOKIE_BYTES: usize = 4096;

/// The jar `current` (a `Cookie` header value) after the `Set-Cookie` values `set`, at most
/// `max_bytes` long. `None` when nothing changed. `upstream` names the upstream in warnings.
pub(crate) fn merge<'a>(
    current: Option<&str>,
    set: impl IntoIterator<Item = &'a str>,
    max_bytes: usize,
    upstream: &str,
) -> Option<Option<String>> {
    let mut jar: Vec<(String, String)> = current
        .unwrap_or("")
        .split(';')
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();
    let before = jar.clone();
    for text in set {
        let Ok(cookie) = Cookie::parse(text) else {
            tracing::debug!(upstream, "ignored a Set-Cookie that does not parse");
            continue;
        };
        let name = cookie.name().to_owned();
        jar.retain(|(n, _)| *n != name);
        if removes(&cookie) {
            continue;
        }
        let pair = (name, cookie.value().to_owned());
        if header_len(&jar) + pair_len(&pair) + 2 > max_bytes {
            tracing::warn!(upstream, cookie = %pair.0, max_cookie_bytes = max_bytes,
                "not keeping a cookie the upstream set: the session's cookies would pass max_cookie_bytes");
            continue;
        }
        jar.push(pair);
    }
    if jar == before {
        return None;
    }
    Some((!jar.is_empty()).then(|| join(&jar)))
}

/// Whether the cookie asks to be removed (`Max-Age` ≤ 0 or `Expires` in the past).
fn removes(cookie: &Cookie<'_>) -> bool {
    if let Some(age) = cookie.max_age() {
        return age.is_zero() || age.is_negative();
    }
    match cookie.expires() {
        Some(Expiration::DateTime(at)) => at <= cookie::time::OffsetDateTime::now_utc(),
        _ => false,
    }
}

fn join(jar: &[(String, String)]) -> String {
    jar.iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn pair_len((name, value): &(String, String)) -> usize {
    name.len() + 1 + value.len()
}

fn header_len(jar: &[(String, String)]) -> usize {
    jar.iter().map(pair_len).sum::<usize>() + 2 * jar.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_name_and_value_and_replaces_by_name() {
        let jar = merge(None, ["SRV=n1; path=/; HttpOnly"], 4096, "u");
        assert_eq!(jar, Some(Some("SRV=n1".into())));
        let jar = merge(Some("SRV=n1"), ["app=7; Secure", "SRV=n2"], 4096, "u");
        assert_eq!(jar, Some(Some("app=7; SRV=n2".into())));
        assert_eq!(merge(Some("SRV=n1"), ["SRV=n1"], 4096, "u"), None);
        assert_eq!(merge(Some("SRV=n1"), Vec::<&str>::new(), 4096, "u"), None);
    }

    #[test]
    fn max_age_zero_and_past_expiry_remove() {
        let jar = merge(Some("a=1; b=2"), ["a=; Max-Age=0"], 4096, "u");
        assert_eq!(jar, Some(Some("b=2".into())));
        let past = "b=x; Expires=Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(merge(Some("b=2"), [past], 4096, "u"), Some(None));
    }

    #[test]
    fn the_jar_is_bounded() {
        let big = format!("big={}", "x".repeat(100));
        let jar = merge(None, ["SRV=n1", big.as_str()], 20, "u");
        assert_eq!(jar, Some(Some("SRV=n1".into())));
        assert_eq!(merge(None, ["SRV=n1"], 0, "u"), None);
    }
}

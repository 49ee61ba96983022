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
//! would make it longer is not kept, with a warning naming the upstream, once per upstream
//! session on each node ([`Warned`]; later ones are debug: an upstream that sets the same
//! oversized cookies on every answer would otherwise warn on every answer). Cookies are learned
//! from the answers to POSTs (the `initialize` answer first of all); those on GET and DELETE
//! answers are not read. The client's own cookies are never forwarded (they never reach an
//! upstream).
//!
//! The cookie parsing is the `cookie` crate's.

use std::collections::HashSet;

use cookie::{Cookie, Expiration};
use parking_lot::Mutex;
use switchboard_telemetry::trace::logged_session;

/// The default of `max_cookie_bytes`.
pub const DEFAULT_MAX_COOKIE_BYTES: usize = 4096;

/// How many upstream sessions [`Warned`] remembers; past it, it forgets them all (each may warn
/// once more).
const WARNED_SESSIONS: usize = 4096;

/// The upstream sessions this node already warned about cookies it did not keep.
#[derive(Default)]
pub(crate) struct Warned {
    sessions: Mutex<HashSet<String>>,
}

impl Warned {
    /// Whether this is the first time upstream session `session` is warned about on this node
    /// (then remembered).
    pub(crate) fn first(&self, session: &str) -> bool {
        let mut sessions = self.sessions.lock();
        if sessions.contains(session) {
            return false;
        }
        if sessions.len() >= WARNED_SESSIONS {
            sessions.clear();
        }
        sessions.insert(session.to_owned())
    }

    /// Logs the cookies `dropped` of upstream session `session` of `upstream`, not kept for
    /// `max_cookie_bytes` = `max`: one line per answer, a warning the first time for this
    /// upstream session on this node, debug after.
    pub(crate) fn not_kept(&self, upstream: &str, session: &str, dropped: &[String], max: usize) {
        let cookies = dropped.join(", ");
        if self.first(session) {
            tracing::warn!(upstream = %upstream, upstream_session = %logged_session(session), cookies, max_cookie_bytes = max,
                "not keeping cookies the upstream set: the session's cookies would pass max_cookie_bytes (warned once per upstream session)");
        } else {
            tracing::debug!(upstream = %upstream, upstream_session = %logged_session(session), cookies, max_cookie_bytes = max,
                "not keeping cookies the upstream set: the session's cookies would pass max_cookie_bytes");
        }
    }
}

/// The jar after merging: `jar` is `None` when nothing changed (else the new `Cookie` value,
/// `None` inside when empty); `dropped` names the cookies not kept for `max_cookie_bytes`.
#[derive(Debug, PartialEq)]
pub(crate) struct Merged {
    /// The new jar, when it changed.
    pub jar: Option<Option<String>>,
    /// The names of the cookies not kept.
    pub dropped: Vec<String>,
}

/// The jar `current` (a `Cookie` header value) after the `Set-Cookie` values `set`, at most
/// `max_bytes` long. `upstream` names the upstream in debug logs.
pub(crate) fn merge<'a>(
    current: Option<&str>,
    set: impl IntoIterator<Item = &'a str>,
    max_bytes: usize,
    upstream: &str,
) -> Merged {
    let mut jar: Vec<(String, String)> = current
        .unwrap_or("")
        .split(';')
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();
    let before = jar.clone();
    let mut dropped = Vec::new();
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
            dropped.push(pair.0);
            continue;
        }
        jar.push(pair);
    }
    let jar = (jar != before).then(|| (!jar.is_empty()).then(|| join(&jar)));
    Merged { jar, dropped }
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

    fn jar<'a>(
        current: Option<&str>,
        set: impl IntoIterator<Item = &'a str>,
        max: usize,
    ) -> Option<Option<String>> {
        merge(current, set, max, "u").jar
    }

    #[test]
    fn keeps_name_and_value_and_replaces_by_name() {
        let kept = jar(None, ["SRV=n1; path=/; HttpOnly"], 4096);
        assert_eq!(kept, Some(Some("SRV=n1".into())));
        let kept = jar(Some("SRV=n1"), ["app=7; Secure", "SRV=n2"], 4096);
        assert_eq!(kept, Some(Some("app=7; SRV=n2".into())));
        assert_eq!(jar(Some("SRV=n1"), ["SRV=n1"], 4096), None);
        assert_eq!(jar(Some("SRV=n1"), Vec::<&str>::new(), 4096), None);
    }

    #[test]
    fn max_age_zero_and_past_expiry_remove() {
        let kept = jar(Some("a=1; b=2"), ["a=; Max-Age=0"], 4096);
        assert_eq!(kept, Some(Some("b=2".into())));
        let past = "b=x; Expires=Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(jar(Some("b=2"), [past], 4096), Some(None));
    }

    #[test]
    fn the_jar_is_bounded() {
        let big = format!("big={}", "x".repeat(100));
        let kept = jar(None, ["SRV=n1", big.as_str()], 20);
        assert_eq!(kept, Some(Some("SRV=n1".into())));
        assert_eq!(jar(None, ["SRV=n1"], 0), None);
    }

    /// Finding 7: the cookies not kept are named (for one log line per answer, not one per
    /// cookie), including when the jar did not change (the same oversized cookies set again).
    #[test]
    fn the_cookies_not_kept_are_named() {
        let big = format!("big={}", "x".repeat(100));
        let merged = merge(Some("SRV=n1"), ["SRV=n1", big.as_str()], 20, "u");
        assert_eq!(
            merged,
            Merged {
                jar: None,
                dropped: vec!["big".to_owned()]
            }
        );
    }

    /// Finding 7 (`exp14_cookie_flood.py`: 484 warnings for 21 answers): an upstream session is
    /// warned about once; another session is warned about once too; past [`WARNED_SESSIONS`]
    /// the memory starts over rather than growing.
    #[test]
    fn each_upstream_session_is_warned_about_once() {
        let warned = Warned::default();
        assert!(warned.first("s1"));
        assert!(!warned.first("s1"));
        assert!(!warned.first("s1"));
        assert!(warned.first("s2"));
        for i in 0..WARNED_SESSIONS * 2 {
            warned.first(&format!("x{i}"));
        }
        assert!(warned.sessions.lock().len() <= WARNED_SESSIONS);
    }
}

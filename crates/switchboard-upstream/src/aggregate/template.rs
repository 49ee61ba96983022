//! Matching a URI against an RFC 6570 URI template, for routing `resources/read` of a URI that
//! no member lists exactly to the member whose `resourceTemplates` entry could have produced it.
//!
//! A simple reading of RFC 6570 §3.2: literals match themselves; an expression `{...}` matches
//! what its operator could expand to, whatever the variable list inside:
//! - `{var}` (simple string): one or more characters other than `/ ? #`;
//! - `{+var}` (reserved): one or more characters of any kind;
//! - `{#var}`: nothing, or `#` and anything;
//! - `{/var}`: nothing, or one or more `/segment`s;
//! - `{.var}`: nothing, or one or more `.label`s;
//! - `{;var}`: nothing, or one or more `;param`s;
//! - `{?var}`, `{&var}`: nothing, or `?…` / `&…` up to a `#`.
//!
//! Percent-encoding is not decoded: a template and a URI are compared as written.

/// Longest URI matched against templates; longer ones match no template.
const MAX_URI_LEN: usize = 8192;

/// Most expressions in a template; a template with more matches nothing.
const MAX_EXPRESSIONS: usize = 32;

/// One piece of a parsed template.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    /// Literal text.
    Literal(String),
    /// An expression, by its operator (`None` for a simple string expansion).
    Expr(Option<char>),
}

/// What an expression can expand to, from a position `s` of the URI: `s` itself (nothing) when
/// `empty`; and, when the byte at `s` is `lead` (or there is no lead), every end up to the longest
/// run of bytes not in `excluded` that follows.
struct Shape {
    empty: bool,
    lead: Option<u8>,
    excluded: &'static [u8],
}

impl Shape {
    fn of(op: Option<char>) -> Shape {
        let (empty, lead, excluded): (bool, Option<u8>, &'static [u8]) = match op {
            Some('+') => (false, None, b""),
            Some('#') => (true, Some(b'#'), b""),
            Some('/') => (true, Some(b'/'), b"?#"),
            Some('.') => (true, Some(b'.'), b"/?#"),
            Some(';') => (true, Some(b';'), b"/?#"),
            Some('?') => (true, Some(b'?'), b"#"),
            Some('&') => (true, Some(b'&'), b"#"),
            _ => (false, None, b"/?#"),
        };
        Shape {
            empty,
            lead,
            excluded,
        }
    }
}

/// Whether `uri` is an expansion of `template`. A malformed template (an unclosed `{`) matches
/// nothing. Linear in the URI's length per template part.
pub fn matches(template: &str, uri: &str) -> bool {
    let Some(parts) = parse(template) else {
        return false;
    };
    if uri.len() > MAX_URI_LEN {
        return false;
    }
    // reach[p]: the parts so far can expand to exactly uri[..p].
    let mut reach = vec![false; uri.len() + 1];
    reach[0] = true;
    for part in &parts {
        reach = match part {
            Part::Literal(text) => step_literal(&reach, uri, text),
            Part::Expr(op) => step_expr(&reach, uri, &Shape::of(*op)),
        };
    }
    reach[uri.len()]
}

/// Positions reachable after a literal.
fn step_literal(reach: &[bool], uri: &str, text: &str) -> Vec<bool> {
    let mut next = vec![false; reach.len()];
    for (s, _) in reach.iter().enumerate().filter(|(_, r)| **r) {
        if uri[s..].starts_with(text) {
            next[s + text.len()] = true;
        }
    }
    next
}

/// Positions reachable after an expression: marks intervals with a difference array, then keeps
/// character boundaries.
fn step_expr(reach: &[bool], uri: &str, shape: &Shape) -> Vec<bool> {
    let bytes = uri.as_bytes();
    let n = bytes.len();
    // run[s]: how many bytes from s on are not excluded.
    let mut run = vec![0usize; n + 1];
    for s in (0..n).rev() {
        run[s] = if shape.excluded.contains(&bytes[s]) {
            0
        } else {
            run[s + 1] + 1
        };
    }
    let mut next = vec![false; n + 1];
    let mut diff = vec![0i64; n + 2];
    for (s, _) in reach.iter().enumerate().filter(|(_, r)| **r) {
        if shape.empty {
            next[s] = true;
        }
        let body = match shape.lead {
            Some(lead) if bytes.get(s) == Some(&lead) => s + 1,
            Some(_) => continue,
            None => s,
        };
        let (first, last) = (s + 1, body + run[body]);
        if first <= last {
            diff[first] += 1;
            diff[last + 1] -= 1;
        }
    }
    let mut open = 0;
    for (p, slot) in next.iter_mut().enumerate() {
        open += diff[p];
        *slot = (*slot || open > 0) && uri.is_char_boundary(p);
    }
    next
}

/// Splits a template into literals and expressions.
fn parse(template: &str) -> Option<Vec<Part>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let close = rest.find('}')?;
                let op = rest[1..close]
                    .chars()
                    .next()
                    .filter(|c| "+#./;?&".contains(*c));
                parts.push(Part::Expr(op));
                rest = &rest[close + 1..];
            }
            Some(open) => {
                parts.push(Part::Literal(rest[..open].to_owned()));
                rest = &rest[open..];
            }
            None => {
                parts.push(Part::Literal(rest.to_owned()));
                rest = "";
            }
        }
    }
    let expressions = parts.iter().filter(|p| matches!(p, Part::Expr(_))).count();
    (expressions <= MAX_EXPRESSIONS).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn simple_variables_match_one_segment() {
        let t = "weather://{city}/current";
        assert!(matches(t, "weather://paris/current"));
        assert!(!matches(t, "weather:///current"), "empty value");
        assert!(
            !matches(t, "weather://a/b/current"),
            "a slash is not in {{var}}"
        );
        assert!(!matches(t, "weather://paris/forecast"));
        assert!(matches("file:///{dir}/{name}.txt", "file:///docs/a.b.txt"));
        assert!(matches("users://{id}", "users://ünïcødé"));
        assert!(!matches("users://{id}", "users://"));
    }

    #[test]
    fn operators() {
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches("http://x{/seg}", "http://x/a/b"));
        assert!(matches("http://x{/seg}", "http://x"));
        assert!(matches(
            "search://q{?term,lang}",
            "search://q?term=a&lang=b"
        ));
        assert!(matches("search://q{?term}", "search://q"));
        assert!(matches("doc://a{#frag}", "doc://a#top"));
        assert!(matches("doc://a{.ext}", "doc://a.tar.gz"));
        assert!(!matches("doc://a{.ext}", "doc://a/x"));
        assert!(matches("literal://exact", "literal://exact"));
        assert!(!matches("literal://exact", "literal://exactly"));
    }

    #[test]
    fn malformed_or_huge_inputs_match_nothing() {
        assert!(!matches("x://{open", "x://open"));
        let many = "{a}".repeat(40);
        assert!(!matches(&many, "abc"));
        let t = "x://{a}{b}{c}{d}{e}{f}{g}{h}!";
        let uri = format!("x://{}", "a".repeat(3000));
        assert!(!matches(t, &uri), "no `!`: fails, and quickly");
        assert!(!matches("x://{a}", &format!("x://{}", "a".repeat(9000))));
        assert!(
            matches("x://{a}{b}{c}{d}{e}{f}{g}{h}", &uri),
            "and succeeds quickly"
        );
    }
}

//! Namespacing of tool and prompt names: `<prefix><separator><name>`.
//!
//! MCP 2025-11-25, server/tools, Tool Names: a tool name SHOULD be 1 to 128 characters of
//! `A-Z a-z 0-9 _ - .`. Prefix and separator are held to that alphabet so that a member's valid
//! names stay valid once prefixed; the checks here run when the config is validated and again
//! when an [`super::Aggregate`] is built.

/// Longest tool name MCP recommends (2025-11-25, server/tools, Tool Names).
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// Longest separator accepted.
pub const MAX_SEPARATOR_LEN: usize = 16;

/// Longest member name accepted.
pub const MAX_MEMBER_NAME_LEN: usize = 64;

/// Whether `c` may appear in an MCP tool name: `A-Z a-z 0-9 _ - .`.
pub fn is_tool_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Whether `name` is a valid MCP tool name: 1 to 128 characters of `A-Z a-z 0-9 _ - .`.
pub fn is_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&name.len()) && name.chars().all(is_tool_name_char)
}

/// Checks a member (upstream) name: 1 to 64 characters of `A-Z a-z 0-9 _ -`. Names appear in
/// logs, errors, cursors and as keys of upstream session ids in the session record.
pub fn check_member_name(name: &str) -> Result<(), String> {
    let ok = (1..=MAX_MEMBER_NAME_LEN).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "upstream name `{name}` must be 1 to {MAX_MEMBER_NAME_LEN} characters of A-Z a-z 0-9 _ -"
        ))
    }
}

/// Checks the separator between prefix and name: 1 to 16 tool-name characters.
pub fn check_separator(separator: &str) -> Result<(), String> {
    let ok = (1..=MAX_SEPARATOR_LEN).contains(&separator.len())
        && separator.chars().all(is_tool_name_char);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tool separator `{separator}` must be 1 to {MAX_SEPARATOR_LEN} characters of \
             A-Z a-z 0-9 _ - . (MCP tool-name characters)"
        ))
    }
}

/// Checks a non-empty prefix of member `member`: tool-name characters only, and short enough
/// that `prefix + separator` leaves room for at least one character of a 128-character name.
pub fn check_prefix(member: &str, prefix: &str, separator: &str) -> Result<(), String> {
    if !prefix.chars().all(is_tool_name_char) {
        return Err(format!(
            "upstream `{member}`: prefix `{prefix}` must use only A-Z a-z 0-9 _ - . (MCP \
             tool-name characters)"
        ));
    }
    let room = MAX_TOOL_NAME_LEN - 1;
    if prefix.len() + separator.len() > room {
        return Err(format!(
            "upstream `{member}`: prefix `{prefix}` plus separator `{separator}` is longer than \
             {room} characters, leaving no room for a name within MCP's {MAX_TOOL_NAME_LEN}"
        ));
    }
    Ok(())
}

/// The namespaces of an aggregate's members: `Some("<prefix><separator>")` per prefixed member,
/// `None` per unprefixed one, in member order.
#[derive(Clone, Debug)]
pub struct Namespaces {
    heads: Vec<Option<String>>,
}

impl Namespaces {
    /// Checks and builds the namespaces of members given as `(name, prefix)`; `None` or `""` is
    /// no prefix. Errors on a bad separator or prefix, and when one member's
    /// `prefix + separator` starts another's (a name could then belong to both).
    pub fn new(members: &[(&str, Option<&str>)], separator: &str) -> Result<Namespaces, String> {
        check_separator(separator)?;
        let mut heads: Vec<Option<String>> = Vec::with_capacity(members.len());
        for (name, prefix) in members {
            let head = match prefix.filter(|p| !p.is_empty()) {
                None => None,
                Some(prefix) => {
                    check_prefix(name, prefix, separator)?;
                    Some(format!("{prefix}{separator}"))
                }
            };
            heads.push(head);
        }
        for (i, a) in heads.iter().enumerate() {
            for (j, b) in heads.iter().enumerate() {
                if let (Some(a), Some(b), true) = (a, b, i != j) {
                    if b.starts_with(a.as_str()) {
                        return Err(format!(
                            "upstreams `{}` and `{}` have overlapping prefixes (`{a}…` and `{b}…`): \
                             a name could belong to both",
                            members[i].0, members[j].0
                        ));
                    }
                }
            }
        }
        Ok(Namespaces { heads })
    }

    /// `name` as member `member` publishes it: `<prefix><separator><name>`, or `name` unchanged
    /// for an unprefixed member.
    pub fn qualify(&self, member: usize, name: &str) -> String {
        match &self.heads[member] {
            Some(head) => format!("{head}{name}"),
            None => name.to_owned(),
        }
    }

    /// The prefixed member whose namespace `name` is in, with the name stripped of it. `None`
    /// when no prefix matches or nothing follows the prefix.
    pub fn split<'a>(&self, name: &'a str) -> Option<(usize, &'a str)> {
        self.heads.iter().enumerate().find_map(|(i, head)| {
            let rest = name.strip_prefix(head.as_deref()?)?;
            (!rest.is_empty()).then_some((i, rest))
        })
    }

    /// The unprefixed members, in member order.
    pub fn unprefixed(&self) -> Vec<usize> {
        (0..self.heads.len())
            .filter(|&i| self.heads[i].is_none())
            .collect()
    }

    /// `<prefix><separator>` of member `member`, if it has a prefix.
    pub fn head(&self, member: usize) -> Option<&str> {
        self.heads[member].as_deref()
    }
}

//! Opaque pagination cursors of merged lists (MCP 2025-11-25, server/utilities/pagination).
//!
//! A cursor is URL-safe base64 (no padding) of `{"m": <member index>, "u": "<member name>",
//! "c": "<member's own cursor>", "n": <pages of the member read>, "h": [<hashes>]}`, `c` absent
//! when the walk starts at the member's first page; `n` and `h` (the FNV-1a hashes of the
//! member's cursors met so far, the last [`SEEN_CURSORS`]) let a walk tell a member whose
//! cursors go round in circles ([`Position::seen`]).
//! The name guards against a cursor minted by a node with a different member list (a rolling
//! config change): the member is found by name, and by index only when the names agree.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::upstream::RpcError;

/// How many of a member's past cursors a merged cursor remembers: a member whose cursors go
/// round a circle this short or shorter is caught at its first repeat; a longer circle runs
/// into the page bound (`list_max_pages`).
pub const SEEN_CURSORS: usize = 16;

/// Where a merged list continues: a member, and that member's cursor (`None`: its first page).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Index of the member in the aggregate.
    pub member: usize,
    /// The member's own cursor.
    pub cursor: Option<String>,
    /// Pages of the member read before this one in the walk.
    pub pages: u32,
    /// Hashes ([`hash`]) of the member's cursors met earlier in the walk, oldest first, at most
    /// [`SEEN_CURSORS`].
    pub seen: Vec<u64>,
}

impl Position {
    /// The position after this one's page, whose `nextCursor` is `next`; `Err(())` when the
    /// member has given `next` before in this walk (its cursors go round in a circle).
    pub fn next(&self, next: String) -> Result<Position, ()> {
        let mut seen = self.seen.clone();
        if let Some(c) = &self.cursor {
            seen.push(hash(c));
        }
        if seen.contains(&hash(&next)) {
            return Err(());
        }
        let over = seen.len().saturating_sub(SEEN_CURSORS);
        seen.drain(..over);
        Ok(Position {
            member: self.member,
            cursor: Some(next),
            pages: self.pages.saturating_add(1),
            seen,
        })
    }
}

/// FNV-1a (64 bits) of a member's cursor: stable across processes and builds, so a cursor minted
/// by one node is checked the same on any other.
pub fn hash(cursor: &str) -> u64 {
    cursor.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The JSON inside a cursor.
#[derive(Serialize, Deserialize)]
struct Wire {
    /// The list it pages (`tools`, `prompts`, `resources`, `resourceTemplates`).
    #[serde(default)]
    k: String,
    m: usize,
    u: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    c: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    n: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    h: Vec<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Longest cursor accepted (a member's own cursor plus a little framing).
const MAX_CURSOR_LEN: usize = 16 * 1024;

/// The cursor for `position` of list `list`, whose member is named `name`.
pub fn encode(position: &Position, name: &str, list: &str) -> String {
    let wire = Wire {
        k: list.to_owned(),
        m: position.member,
        u: name.to_owned(),
        c: position.cursor.clone(),
        n: position.pages,
        h: position.seen.clone(),
    };
    // A struct of an integer and strings always serializes.
    let json = serde_json::to_vec(&wire).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// Reads a cursor minted by [`encode`] against the member names of this aggregate. A cursor
/// that is not ours, or names a member this aggregate does not have, is -32602 (MCP 2025-11-25,
/// server/utilities/pagination, Error Handling: invalid cursors SHOULD be -32602).
/// A cursor of another list (a `tools/list` cursor sent to `prompts/list`) is refused too.
pub fn decode(text: &str, names: &[&str], list: &str) -> Result<Position, RpcError> {
    let invalid = || RpcError::invalid_params(format!("invalid cursor: {text:?}"));
    if text.len() > MAX_CURSOR_LEN {
        return Err(RpcError::invalid_params("invalid cursor: too long"));
    }
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
    let wire: Wire = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if !wire.k.is_empty() && wire.k != list {
        return Err(RpcError::invalid_params(format!(
            "invalid cursor: it pages `{}`, not `{list}`",
            wire.k
        )));
    }
    let member = if names.get(wire.m) == Some(&wire.u.as_str()) {
        wire.m
    } else {
        names
            .iter()
            .position(|n| *n == wire.u)
            .ok_or_else(invalid)?
    };
    if wire.h.len() > SEEN_CURSORS {
        return Err(invalid());
    }
    Ok(Position {
        member,
        cursor: wire.c,
        pages: wire.n,
        seen: wire.h,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_strangers() {
        let names = ["a", "b"];
        for position in [
            Position {
                member: 0,
                ..Position::default()
            },
            Position {
                member: 1,
                cursor: Some("page=2&x=\"y\"".into()),
                pages: 3,
                seen: vec![hash("a"), hash("b")],
            },
        ] {
            let text = encode(&position, names[position.member], "tools");
            assert!(text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)));
            assert_eq!(decode(&text, &names, "tools").unwrap(), position);
            let other = decode(&text, &names, "prompts").unwrap_err();
            assert_eq!(
                other.code,
                switchboard_protocol::codes::INVALID_PARAMS,
                "bound to its list"
            );
        }
        for bad in [
            "",
            "!!!",
            "bm90IGpzb24",
            &encode(&Position::default(), "z", "tools"),
        ] {
            let err = decode(bad, &names, "tools").unwrap_err();
            assert_eq!(
                err.code,
                switchboard_protocol::codes::INVALID_PARAMS,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_moved_member_is_found_by_name() {
        let text = encode(
            &Position {
                cursor: Some("c".into()),
                ..Position::default()
            },
            "b",
            "tools",
        );
        let got = decode(&text, &["a", "x", "b"], "tools").unwrap();
        assert_eq!(got.member, 2);
        assert_eq!(got.cursor.as_deref(), Some("c"));
    }

    #[test]
    fn a_cursor_met_before_is_a_circle() {
        let first = Position::default();
        let a = first.next("a".into()).unwrap();
        let b = a.next("b".into()).unwrap();
        assert_eq!((b.pages, b.seen.clone()), (2, vec![hash("a")]));
        assert!(b.next("b".into()).is_err(), "the cursor it was asked with");
        assert!(b.next("a".into()).is_err(), "an earlier one");
        let mut at = b;
        for i in 0..40 {
            at = at.next(format!("c{i}")).unwrap();
        }
        assert_eq!(at.seen.len(), SEEN_CURSORS, "bounded");
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c, "FNV-1a, stable");
    }
}

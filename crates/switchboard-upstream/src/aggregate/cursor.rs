//! Opaque pagination cursors of merged lists (MCP 2025-11-25, server/utilities/pagination).
//!
//! A cursor is URL-safe base64 (no padding) of `{"m": <member index>, "u": "<member name>",
//! "c": "<member's own cursor>"}`, `c` absent when the walk starts at the member's first page.
//! The name guards against a cursor minted by a node with a different member list (a rolling
//! config change): the member is found by name, and by index only when the names agree.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::upstream::RpcError;

/// Where a merged list continues: a member, and that member's cursor (`None`: its first page).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    /// Index of the member in the aggregate.
    pub member: usize,
    /// The member's own cursor.
    pub cursor: Option<String>,
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
    Ok(Position {
        member,
        cursor: wire.c,
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
                cursor: None,
            },
            Position {
                member: 1,
                cursor: Some("page=2&x=\"y\"".into()),
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
            &encode(
                &Position {
                    member: 0,
                    cursor: None,
                },
                "z",
                "tools",
            ),
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
                member: 0,
                cursor: Some("c".into()),
            },
            "b",
            "tools",
        );
        let got = decode(&text, &["a", "x", "b"], "tools").unwrap();
        assert_eq!(got.member, 2);
        assert_eq!(got.cursor.as_deref(), Some("c"));
    }
}

//! The bus's wire format: a [`BusMessage`] as JSON, with an envelope of a few `_`-prefixed fields
//! spliced in front of its own.
//!
//! Format 2 (this release): `{"_v":2,"_m":"<message id>","_x":<deadline>,"t":…}`, where
//! - `_v` is the format version;
//! - `_m` is the message's id (16 hex digits, random), the same however often it is sent or
//!   read: a receiver takes each id once ([`Seen`]);
//! - `_x` is the deadline, in wall-clock milliseconds since the Unix epoch, after which the
//!   receiver drops the message unread (counted as expired);
//! - `_q` is added by the script that posts it, in the doorbell only: the message's mailbox id
//!   (`0-<n>`, `n` counting the mailbox's messages from 1), which tells the receiver whether it
//!   missed one.
//!
//! Live events, whose durable copy is the event log, carry `"_v":2` at the end and nothing else.
//! Format 1 (the releases before) is the same JSON without any `_` field, and is read as such
//! (nothing to deduplicate, no deadline). A node of format 1 reads a format 2 message as one of
//! its own: serde ignores the fields it does not know, and every message kind it knows kept its
//! shape. So nodes of both releases share a Redis during a rolling upgrade without either
//! writing for the other.

use std::collections::HashMap;

use serde::Deserialize;

use crate::error::StoreError;
use crate::model::BusMessage;
use crate::traits::StoreResult;

/// The bus format this release writes.
pub(crate) use crate::FORMAT;

/// A message as it travels: its envelope and the message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Letter {
    /// The format version (1 when it had none).
    pub version: u32,
    /// Its id (format 2), the key of deduplication.
    pub id: Option<String>,
    /// Its deadline (ms since the Unix epoch).
    pub deadline_ms: Option<u64>,
    /// Its mailbox id (`0-<n>`), in a doorbell.
    pub entry: Option<String>,
    /// What it says; `None` for this node's own probe.
    pub msg: Option<BusMessage>,
}

/// The envelope's fields (every other field is the message's).
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "_v", default)]
    v: Option<u32>,
    #[serde(rename = "_m", default)]
    m: Option<String>,
    #[serde(rename = "_x", default)]
    x: Option<u64>,
    #[serde(rename = "_q", default)]
    q: Option<String>,
    #[serde(default)]
    t: Option<String>,
}

/// `msg` in format 2, with a new message id, to be dropped unread after `deadline_ms`.
pub(crate) fn encode(msg: &BusMessage, deadline_ms: u64) -> StoreResult<String> {
    let body = serde_json::to_string(msg)?;
    let rest = body
        .strip_prefix('{')
        .ok_or_else(|| StoreError::Corrupt("a bus message is not a JSON object".into()))?;
    Ok(format!(
        "{{\"_v\":{FORMAT},\"_m\":\"{:016x}\",\"_x\":{deadline_ms},{rest}",
        rand::random::<u64>()
    ))
}

/// The probe a node sends itself through its inbox channel (never to another node: the nodes
/// of format 1 would log it as unreadable).
pub(crate) fn probe(n: u64) -> String {
    format!("{{\"_v\":{FORMAT},\"t\":\"probe\",\"n\":{n}}}")
}

/// The probe number in `payload`, if it is a probe.
pub(crate) fn probe_number(payload: &[u8]) -> Option<u64> {
    #[derive(Deserialize)]
    struct Probe {
        t: String,
        n: u64,
    }
    if !payload.starts_with(b"{\"_v\"") {
        return None;
    }
    serde_json::from_slice::<Probe>(payload)
        .ok()
        .filter(|p| p.t == "probe")
        .map(|p| p.n)
}

/// Reads a message in either format. A payload that starts with an envelope field is read
/// twice (envelope, then message); any other (format 1, live events) once.
///
/// # Errors
/// Not JSON, or not a message this release knows.
pub(crate) fn decode(payload: &[u8]) -> StoreResult<Letter> {
    if !payload.starts_with(b"{\"_") {
        return Ok(Letter {
            version: 1,
            id: None,
            deadline_ms: None,
            entry: None,
            msg: Some(serde_json::from_slice(payload)?),
        });
    }
    let envelope: Envelope = serde_json::from_slice(payload)?;
    let msg = if envelope.t.as_deref() == Some("probe") {
        None
    } else {
        Some(serde_json::from_slice(payload)?)
    };
    Ok(Letter {
        version: envelope.v.unwrap_or(1),
        id: envelope.m,
        deadline_ms: envelope.x,
        entry: envelope.q,
        msg,
    })
}

/// The count `n` of a mailbox id `0-<n>` (0 for anything else).
pub(crate) fn seq(entry: &str) -> u64 {
    entry
        .strip_prefix("0-")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The ids of the messages this node has taken, each kept until its deadline, so that a message
/// read twice (its doorbell and its mailbox, or two copies a resent command posted) is taken
/// once. Bounded by [`Seen::CAP`]: past it the entries closest to their deadline go first.
#[derive(Default)]
pub(crate) struct Seen {
    ids: HashMap<String, u64>,
}

impl Seen {
    /// The most ids kept (at 16 hex digits and a deadline each, a few MB).
    pub const CAP: usize = 100_000;

    /// Records `id` (until `deadline_ms`); `false` when it was already taken.
    pub fn take(&mut self, id: &str, deadline_ms: u64) -> bool {
        if self.ids.contains_key(id) {
            return false;
        }
        if self.ids.len() >= Self::CAP {
            self.forget_until(crate::rules::now_ms());
            if self.ids.len() >= Self::CAP {
                let mut deadlines: Vec<u64> = self.ids.values().copied().collect();
                let cut = Self::CAP / 10;
                deadlines.select_nth_unstable(cut);
                let below = deadlines[cut];
                self.ids.retain(|_, d| *d > below);
            }
        }
        self.ids.insert(id.to_owned(), deadline_ms);
        true
    }

    /// Whether `id` was taken.
    pub fn has(&self, id: &str) -> bool {
        self.ids.contains_key(id)
    }

    /// Forgets the ids whose deadline is before `now_ms` (their messages are dropped unread
    /// anyway).
    pub fn forget_until(&mut self, now_ms: u64) {
        self.ids.retain(|_, d| *d >= now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply() -> BusMessage {
        BusMessage::Reply {
            sid: "s".into(),
            request_key: "1".into(),
            message: json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            trace: None,
        }
    }

    #[test]
    fn format_2_round_trips_and_names_its_envelope() {
        let text = encode(&reply(), 1234).unwrap();
        assert!(text.starts_with("{\"_v\":2,\"_m\":\""), "{text}");
        let letter = decode(text.as_bytes()).unwrap();
        assert_eq!(letter.version, 2);
        assert_eq!(letter.deadline_ms, Some(1234));
        assert_eq!(letter.id.as_deref().map(str::len), Some(16));
        assert_eq!(letter.msg, Some(reply()));
        // The doorbell: the script splices the mailbox id in front.
        let rung = format!("{{\"_q\":\"0-7\",{}", &text[1..]);
        let letter = decode(rung.as_bytes()).unwrap();
        assert_eq!(letter.entry.as_deref(), Some("0-7"));
        assert_eq!(seq("0-7"), 7);
        assert_eq!(letter.msg, Some(reply()));
    }

    #[test]
    fn format_1_is_read_and_reads_format_2() {
        let old = serde_json::to_string(&reply()).unwrap();
        let letter = decode(old.as_bytes()).unwrap();
        assert_eq!((letter.version, letter.id.clone()), (1, None));
        assert_eq!(letter.msg, Some(reply()));
        // What a format 1 node does with a format 2 message: parse it as a `BusMessage`.
        let new = encode(&reply(), 1).unwrap();
        assert_eq!(serde_json::from_str::<BusMessage>(&new).unwrap(), reply());
    }

    #[test]
    fn events_with_a_trailing_version_parse_once() {
        let event = r#"{"t":"event","sid":"s","stream":"get","holder":"a/1","position":"1-0","data":"x","end":false,"_v":2}"#;
        let letter = decode(event.as_bytes()).unwrap();
        assert!(matches!(letter.msg, Some(BusMessage::Event(_))));
    }

    #[test]
    fn probes_are_recognised() {
        assert_eq!(probe_number(probe(9).as_bytes()), Some(9));
        assert_eq!(decode(probe(9).as_bytes()).unwrap().msg, None);
        assert_eq!(probe_number(encode(&reply(), 1).unwrap().as_bytes()), None);
    }

    #[test]
    fn seen_ids_are_taken_once_and_forgotten_at_their_deadline() {
        let mut seen = Seen::default();
        assert!(seen.take("a", 10));
        assert!(!seen.take("a", 10));
        seen.forget_until(11);
        assert!(!seen.has("a"));
        assert!(seen.take("a", 20));
    }
}

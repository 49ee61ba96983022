//! Session ids, stream ids and event ids.
//!
//! - A session id is 32 lower-case hex digits (128 bits from a CSPRNG). Anything else cannot be
//!   one of ours, so it is answered 404 without a store lookup. MCP 2025-11-25, basic/transports,
//!   Session Management: visible ASCII only, cryptographically secure.
//! - A stream id names one SSE stream inside a session: [`StreamId::STANDALONE`] for the GET
//!   stream, 12 random base-32 characters for each POST response stream.
//! - An event id is `<stream id>_<position>`, where the position is the event's entry id in the
//!   stream's event log (`<ms>-<seq>`, as Redis Streams number entries). `Last-Event-ID` alone thus
//!   names the stream to replay and where to start (MCP 2025-11-25, basic/transports, Resumability:
//!   event ids SHOULD encode their stream). It is only ever honoured inside the session that owns
//!   it, because the log is keyed by session.

use std::fmt;

const HEX: &[u8; 16] = b"0123456789abcdef";
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A session id: 32 lower-case hex characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// A fresh id from 128 bits of the thread-local CSPRNG (ChaCha, seeded from the OS).
    pub fn generate() -> SessionId {
        let bytes: [u8; 16] = rand::random();
        let mut s = String::with_capacity(32);
        for b in bytes {
            s.push(HEX[(b >> 4) as usize] as char);
            s.push(HEX[(b & 15) as usize] as char);
        }
        SessionId(s)
    }

    /// Accepts exactly the shape [`SessionId::generate`] makes; `None` otherwise.
    pub fn parse(s: &str) -> Option<SessionId> {
        let ok = s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| SessionId(s.to_owned()))
    }

    /// The id as sent in `Mcp-Session-Id`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A stream id, unique within its session: `get` or 12 base-32 characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(String);

/// The start of [`StreamId::generate_standalone_answered`] ids.
const STANDALONE_ANSWERED: &str = "standalone";

impl StreamId {
    /// The id of the session's standalone GET stream.
    pub const STANDALONE: &'static str = "get";

    /// The standalone GET stream of a session.
    pub fn standalone() -> StreamId {
        StreamId(Self::STANDALONE.to_owned())
    }

    /// A fresh id for a POST response stream (60 random bits).
    pub fn generate() -> StreamId {
        let bytes: [u8; 12] = rand::random();
        StreamId(
            bytes
                .iter()
                .map(|b| BASE32[(b & 31) as usize] as char)
                .collect(),
        )
    }

    /// A fresh id naming the in-flight registration of a request whose answer goes to the
    /// session's standalone stream (a request sent on the legacy HTTP+SSE transport, MCP
    /// 2024-11-05, or over a WebSocket): `standalone` and 12 random characters (22 in all, so
    /// never equal to a [`StreamId::generate`] id, which has 12).
    pub fn generate_standalone_answered() -> StreamId {
        StreamId(format!("{STANDALONE_ANSWERED}{}", StreamId::generate().0))
    }

    /// Whether this names such a registration ([`StreamId::generate_standalone_answered`]).
    pub fn is_standalone_answered(s: &str) -> bool {
        s.len() == STANDALONE_ANSWERED.len() + 12 && s.starts_with(STANDALONE_ANSWERED)
    }

    /// Accepts `get` or 1–32 characters of `[a-z2-7]`; `None` otherwise.
    pub fn parse(s: &str) -> Option<StreamId> {
        let ok = !s.is_empty()
            && s.len() <= 32
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b));
        ok.then(|| StreamId(s.to_owned()))
    }

    /// Whether this is the standalone GET stream.
    pub fn is_standalone(&self) -> bool {
        self.0 == Self::STANDALONE
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An SSE event id: the stream it belongs to and its position in that stream's event log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EventId {
    /// The stream the event was sent on.
    pub stream: StreamId,
    /// The log position, `<ms>-<seq>`; [`EventId::START`] for a priming event.
    pub position: String,
}

impl EventId {
    /// Position of the priming event: "before every logged event".
    pub const START: &'static str = "0-0";

    /// Builds an event id from its parts.
    pub fn new(stream: StreamId, position: impl Into<String>) -> EventId {
        EventId {
            stream,
            position: position.into(),
        }
    }

    /// Parses `<stream>_<ms>-<seq>`; `None` when it is not of that shape.
    pub fn parse(s: &str) -> Option<EventId> {
        let (stream, position) = s.split_once('_')?;
        let stream = StreamId::parse(stream)?;
        let (ms, seq) = position.split_once('-')?;
        // Digits only (no sign), and within u64 so positions order exactly.
        let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u64>().is_ok();
        (digits(ms) && digits(seq)).then(|| EventId {
            stream,
            position: position.to_owned(),
        })
    }

    /// `(ms, seq)` of the position, for ordering events within one stream.
    pub fn order(&self) -> (u64, u64) {
        position_order(&self.position)
    }
}

/// Orders two log positions (`<ms>-<seq>`); unparsable positions sort first.
pub fn position_order(position: &str) -> (u64, u64) {
    let (ms, seq) = position.split_once('-').unwrap_or(("0", "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.stream, self.position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standalone_answered_ids_are_told_apart() {
        let marked = StreamId::generate_standalone_answered();
        assert!(StreamId::parse(marked.as_str()).is_some(), "{marked}");
        assert!(
            StreamId::is_standalone_answered(marked.as_str()),
            "{marked}"
        );
        for _ in 0..100 {
            let post = StreamId::generate();
            assert!(!StreamId::is_standalone_answered(post.as_str()), "{post}");
        }
        assert!(!StreamId::is_standalone_answered("standaloneab"));
        assert!(!StreamId::is_standalone_answered(StreamId::STANDALONE));
    }

    #[test]
    fn session_ids_are_128_bit_hex_and_distinct() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert_eq!(SessionId::parse(a.as_str()), Some(a));
        assert_eq!(
            SessionId::parse("00000000-dead-beef-0000-000000000000"),
            None
        );
        assert_eq!(SessionId::parse("{x}"), None);
    }

    #[test]
    fn event_ids_round_trip_and_reject_garbage() {
        let s = StreamId::generate();
        let e = EventId::new(s.clone(), "1700000000000-3");
        let parsed = EventId::parse(&e.to_string()).unwrap();
        assert_eq!(parsed, e);
        assert_eq!(parsed.order(), (1_700_000_000_000, 3));
        assert!(EventId::parse("_GET_stream:1").is_none());
        assert!(EventId::parse("get_12").is_none());
        assert!(EventId::parse("GET_1-1").is_none());
        assert_eq!(
            EventId::parse("get_0-0").unwrap().stream,
            StreamId::standalone()
        );
        assert!(
            EventId::parse("get_99999999999999999999-0").is_none(),
            "beyond u64"
        );
        assert!(EventId::parse("get_-1-0").is_none());
        assert!(EventId::parse("get_+1-0").is_none());
    }
}

//! Rules both backends share, so their observable behaviour stays identical: inbox capacity,
//! stream-registry pruning, append ids, and log-position arithmetic.

use switchboard_protocol::ids::position_order;
use switchboard_protocol::StreamId;

/// Capacity of the receiver returned by [`crate::Bus::subscribe`]. A full receiver applies
/// backpressure to the reader feeding it; messages are never dropped by the store itself.
pub const INBOX_CAPACITY: usize = 4096;

/// The stream registry of a session is pruned when a request registers a new stream and the
/// registry holds at least this many streams…
pub(crate) const PRUNE_AT: usize = 64;

/// …and its size is a multiple of this (so a session with many live streams pays for a scan only
/// once every few registrations).
pub(crate) const PRUNE_EVERY: usize = 16;

/// Whether a registry of `len` streams is pruned before a new stream is registered. Pruning drops
/// every stream that is no longer known (not the standalone one, no running request, no retained
/// log: its log expired `idle_ttl` after its last event), so pruning is never observable.
pub(crate) fn should_prune(len: usize) -> bool {
    len >= PRUNE_AT && len.is_multiple_of(PRUNE_EVERY)
}

/// A new append id ([`crate::EventLog::append_once`]): 64 random bits as 16 hex digits. Two
/// events of one log with the same id would be taken for one (the second not stored); with at
/// most a few thousand events retained per log, that chance is below one in 10^11.
pub fn new_append_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Whether `stream` is the standalone GET stream, which is always known.
pub(crate) fn is_standalone(stream: &str) -> bool {
    stream == StreamId::STANDALONE
}

/// Whether the store itself delivers a new event of `stream` held by `holder` (to the holder's
/// node inbox): when it is held, and either held on another node than `me` or the stream is the
/// standalone one (several nodes write it; one ordered path to its connection).
pub(crate) fn delivers_event(holder: &str, stream: &str, me: &str) -> bool {
    !holder.is_empty() && (is_standalone(stream) || crate::traits::holder_node(holder) != me)
}

/// `(ms, seq)` of a log position; unparsable positions count as the start.
pub(crate) fn order(position: &str) -> (u64, u64) {
    position_order(position)
}

/// Whether `after` is the start position (`0-0`, or anything unparsable).
pub(crate) fn is_start(after: &str) -> bool {
    order(after) == (0, 0)
}

/// The effective holder of a stream: `None` for the released (empty) token.
pub(crate) fn some_holder(token: String) -> Option<String> {
    (!token.is_empty()).then_some(token)
}

/// The caps a config asks for, clamped to sane minimums (a log keeps at least one event).
pub(crate) fn max_events(config: &crate::StoreConfig) -> u64 {
    config.max_events_per_stream.max(1)
}

/// Whether a request's admission touches the session (extends every core key's expiry to the
/// idle TTL): only once the record's remaining `pttl_ms` has fallen more than 1/64 of `ttl_ms`
/// below it, so idle expiry is exact to that much and most requests skip seven `PEXPIRE`s. A
/// record without expiry (`PTTL` -1) is always due. The `BEGIN` script's `touch_due` is the same
/// rule in Lua.
pub(crate) fn touch_due(pttl_ms: i64, ttl_ms: u64) -> bool {
    pttl_ms < touch_floor(ttl_ms)
}

/// How long until a touch falls due for a record with `pttl_ms` left (zero when it is due or
/// about to be).
pub(crate) fn until_touch_due(pttl_ms: i64, ttl_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis((pttl_ms - touch_floor(ttl_ms)).max(0) as u64)
}

/// The longest a touch can be from due right after an admission (which touched it if it was
/// due): 1/64 of the idle TTL.
pub(crate) fn touch_window(ttl_ms: u64) -> std::time::Duration {
    std::time::Duration::from_millis(ttl_ms / 64)
}

/// The remaining time below which a touch is due.
fn touch_floor(ttl_ms: u64) -> i64 {
    let ttl = ttl_ms as i64;
    ttl - ttl / 64
}

/// Milliseconds of a duration, at least 1 (Redis rejects `PX 0`).
pub(crate) fn millis(d: std::time::Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_is_amortized() {
        assert!(!should_prune(0));
        assert!(!should_prune(63));
        assert!(should_prune(64));
        assert!(!should_prune(65));
        assert!(should_prune(80));
    }

    #[test]
    fn touch_is_due_below_one_64th_of_the_ttl() {
        assert!(!touch_due(64_000, 64_000));
        assert!(!touch_due(63_000, 64_000));
        assert!(touch_due(62_999, 64_000));
        assert!(touch_due(-1, 64_000));
        let ms = std::time::Duration::from_millis;
        assert_eq!(until_touch_due(64_000, 64_000), ms(1_000));
        assert_eq!(until_touch_due(63_500, 64_000), ms(500));
        assert_eq!(until_touch_due(62_000, 64_000), ms(0));
        assert_eq!(touch_window(64_000), ms(1_000));
    }

    #[test]
    fn start_positions() {
        assert!(is_start("0-0"));
        assert!(is_start("garbage"));
        assert!(!is_start("1-0"));
    }
}

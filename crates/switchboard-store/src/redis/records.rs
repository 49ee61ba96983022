//! This node's cache of session records, validated on every use.
//!
//! `begin` sends the version of the record it holds (the `ver` field every record write bumps,
//! see `scripts::PRELUDE`'s `changed`); Redis answers with the whole record only when that
//! version is not current. A cached record is therefore never used stale: the check is part of
//! the same atomic script (or, for a request that registers nothing, the same `MULTI`/`EXEC`)
//! that admits the request. What the cache saves is the record's transfer
//! and decoding on every request (`HGETALL` was ~6 µs of the ~13 µs the admission script cost
//! Redis, and decoding ~5% of a node's CPU; BENCHMARKS.md).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use parking_lot::Mutex;

use crate::model::SessionRecord;

/// A cached record: the version it was read at, and when this node expects the session's next
/// touch to fall due (see `RedisStore::begin`: before then an admission that registers nothing
/// needs no script; from then on it runs the script, which touches in the same round trip).
#[derive(Clone)]
pub(crate) struct Cached {
    pub version: String,
    pub record: SessionRecord,
    pub touch_due_at: Instant,
}

/// At most `cap` records, keyed by session id. When full, the record cached longest ago makes
/// room (first in, first out; the next request of that session reads its record whole again).
/// An arbitrary victim (the first key of the map, as before) was mostly the newest record: new
/// keys landing in the table's front, which evictions had emptied, were the next to go. At
/// 20,000 sessions created in a row 64% of the handshakes then found their record evicted
/// between `initialize` and `notifications/initialized`.
pub(crate) struct RecordCache {
    cap: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    map: HashMap<String, Entry>,
    /// Keys in the order they were cached, with the sequence number of that caching: an entry
    /// whose key was forgotten (or forgotten and cached again since, under a new number) is
    /// skipped. Compacted when it grows past twice the cap.
    order: VecDeque<(String, u64)>,
    next: u64,
}

struct Entry {
    seq: u64,
    cached: Cached,
}

impl RecordCache {
    /// A cache of at most `cap` records; 0 disables it.
    pub(crate) fn new(cap: usize) -> RecordCache {
        RecordCache {
            cap,
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                order: VecDeque::new(),
                next: 0,
            }),
        }
    }

    /// The cached entry of `sid`.
    pub(crate) fn get(&self, sid: &str) -> Option<Cached> {
        self.inner.lock().map.get(sid).map(|e| e.cached.clone())
    }

    /// Remembers `record` at `version`, its touch expected at `touch_due_at` (an empty version is
    /// never cached: records written before versions existed carry none).
    pub(crate) fn put(
        &self,
        sid: &str,
        version: &str,
        record: &SessionRecord,
        touch_due_at: Instant,
    ) {
        if self.cap == 0 || version.is_empty() {
            return;
        }
        let cached = Cached {
            version: version.to_owned(),
            record: record.clone(),
            touch_due_at,
        };
        let mut inner = self.inner.lock();
        let Inner { map, order, next } = &mut *inner;
        if let Some(entry) = map.get_mut(sid) {
            entry.cached = cached;
            return;
        }
        while map.len() >= self.cap {
            let Some((key, seq)) = order.pop_front() else {
                break;
            };
            if map.get(&key).is_some_and(|e| e.seq == seq) {
                map.remove(&key);
            }
        }
        let seq = *next;
        *next += 1;
        order.push_back((sid.to_owned(), seq));
        map.insert(sid.to_owned(), Entry { seq, cached });
        if order.len() > 2 * self.cap.max(16) {
            order.retain(|(key, seq)| map.get(key).is_some_and(|e| e.seq == *seq));
        }
    }

    /// Moves the expected touch of `sid`'s cached record (if cached) to `at`.
    pub(crate) fn expect_touch(&self, sid: &str, at: Instant) {
        if let Some(entry) = self.inner.lock().map.get_mut(sid) {
            entry.cached.touch_due_at = at;
        }
    }

    /// Forgets `sid` (the session is gone, or this node changed its record).
    pub(crate) fn forget(&self, sid: &str) {
        self.inner.lock().map.remove(sid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.to_owned(),
            revision: "2025-11-25".into(),
            initialize_params: serde_json::json!({}).into(),
            initialized: true,
            log_level: None,
            subscriptions: Vec::new(),
            subscription_upstreams: Default::default(),
            principal: "anonymous".into(),
            upstream_sessions: Default::default(),
            owners: Default::default(),
            created_ms: 0,
        }
    }

    #[test]
    fn holds_at_most_cap_records_and_skips_unversioned_ones() {
        let now = Instant::now();
        let cache = RecordCache::new(2);
        cache.put("a", "1", &record("a"), now);
        cache.put("b", "1", &record("b"), now);
        cache.put("c", "3", &record("c"), now);
        assert_eq!(cache.inner.lock().map.len(), 2);
        assert_eq!(
            cache.get("c").map(|c| (c.version, c.record.id)),
            Some(("3".into(), "c".into()))
        );
        cache.put("d", "", &record("d"), now);
        assert!(cache.get("d").is_none());
        cache.forget("c");
        assert!(cache.get("c").is_none());
        let off = RecordCache::new(0);
        off.put("a", "1", &record("a"), now);
        assert!(off.get("a").is_none());
    }

    #[test]
    fn the_record_cached_longest_ago_makes_room() {
        let now = Instant::now();
        let cache = RecordCache::new(3);
        for id in ["a", "b", "c"] {
            cache.put(id, "1", &record(id), now);
        }
        // A new version of a cached record keeps its place; a forgotten one cached again gets
        // a new place, its old one is skipped.
        cache.put("a", "2", &record("a"), now);
        cache.forget("b");
        cache.put("b", "2", &record("b"), now);
        cache.put("d", "1", &record("d"), now);
        let held = |c: &RecordCache| {
            let mut ids: Vec<String> = c.inner.lock().map.keys().cloned().collect();
            ids.sort();
            ids
        };
        assert_eq!(held(&cache), ["b", "c", "d"]);
        cache.put("e", "1", &record("e"), now);
        assert_eq!(held(&cache), ["b", "d", "e"]);
        // Churn below the cap leaves the order queue bounded.
        let churned = RecordCache::new(4);
        churned.put("keep", "1", &record("keep"), now);
        for i in 0..1000 {
            let id = format!("x{i}");
            churned.put(&id, "1", &record(&id), now);
            churned.forget(&id);
        }
        assert!(churned.inner.lock().order.len() <= 2 * 16 + 1);
        assert_eq!(held(&churned), ["keep"]);
    }

    #[test]
    fn the_expected_touch_moves_only_for_cached_records() {
        let now = Instant::now();
        let later = now + std::time::Duration::from_secs(5);
        let cache = RecordCache::new(4);
        cache.put("a", "1", &record("a"), now);
        cache.expect_touch("a", later);
        cache.expect_touch("b", later);
        assert_eq!(cache.get("a").map(|c| c.touch_due_at), Some(later));
        assert!(cache.get("b").is_none());
    }
}

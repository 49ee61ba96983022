//! A request's admission on a session in the memory backend (`begin`, `check`, `begin_rated`,
//! `register`), each under the store's one lock like the `BEGIN` script.

use tokio::time::Instant;

use super::state::Shared;
use crate::model::*;

impl Shared {
    /// [`crate::SessionStore::begin`].
    pub fn begin(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        inflight: Option<&InflightRequest>,
        now: Instant,
    ) -> BeginOutcome {
        let Some(req) = inflight else {
            return match self.live(sid, now) {
                Some(s) => {
                    s.touch(now + cfg.idle_ttl);
                    BeginOutcome::Ready(s.record.clone())
                }
                None => BeginOutcome::Missing,
            };
        };
        if let Some(again) = self.registered_already(cfg, sid, req, now) {
            return again;
        }
        let outcome = self.check(cfg, sid, &req.request_key, now);
        if let BeginOutcome::Ready(_) = outcome {
            self.register(cfg, sid, req, now);
        }
        outcome
    }

    /// [`crate::SessionStore::check`] and [`crate::SessionStore::begin_rated`]: the session's
    /// checks, then `rates`, then (only when all passed) the registration of `register`.
    pub fn admit(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        request_key: &str,
        rates: &[crate::Rate],
        register: Option<&InflightRequest>,
        now: Instant,
    ) -> BeginOutcome {
        if let Some(again) = register.and_then(|req| self.registered_already(cfg, sid, req, now)) {
            return again;
        }
        let outcome = self.check(cfg, sid, request_key, now);
        let BeginOutcome::Ready(record) = outcome else {
            return outcome;
        };
        if let crate::RateDecision::Limited {
            limit,
            retry_after_ms,
        } = self.rates.take(rates, now)
        {
            return BeginOutcome::Limited {
                record,
                limit,
                retry_after_ms,
            };
        }
        if let Some(inflight) = register {
            self.register(cfg, sid, inflight, now);
        }
        BeginOutcome::Ready(record)
    }

    /// A registration of `req` made already (its in-flight entry is its own: same node and
    /// stream, and a stream id is one request's), so sent again: the session is touched and
    /// `Ready`, nothing taken or registered again. `None` otherwise.
    fn registered_already(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        req: &InflightRequest,
        now: Instant,
    ) -> Option<BeginOutcome> {
        let s = self.live(sid, now)?;
        let (node, stream) = s.inflight.get(&req.request_key)?;
        if req.stream.is_empty() || *node != req.node || *stream != req.stream {
            return None;
        }
        s.touch(now + cfg.idle_ttl);
        Some(BeginOutcome::Ready(s.record.clone()))
    }

    /// [`crate::SessionStore::check`].
    pub fn check(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        request_key: &str,
        now: Instant,
    ) -> BeginOutcome {
        let Some(s) = self.live(sid, now) else {
            return BeginOutcome::Missing;
        };
        s.touch(now + cfg.idle_ttl);
        let record = s.record.clone();
        if let Some((node, _)) = s.inflight.get(request_key) {
            return BeginOutcome::DuplicateId {
                record,
                node: node.clone(),
            };
        }
        if s.inflight.len() as u64 >= cfg.max_inflight_per_session {
            return BeginOutcome::Busy(record);
        }
        BeginOutcome::Ready(record)
    }

    /// [`crate::SessionStore::register`].
    pub fn register(
        &mut self,
        cfg: &StoreConfig,
        sid: &str,
        req: &InflightRequest,
        now: Instant,
    ) -> bool {
        let Some(s) = self.live(sid, now) else {
            return false;
        };
        s.touch(now + cfg.idle_ttl);
        s.prune_streams(now);
        s.inflight
            .entry(req.request_key.clone())
            .or_insert_with(|| (req.node.clone(), req.stream.clone()));
        let run = RunningRequest {
            node: req.node.clone(),
            request_key: req.request_key.clone(),
        };
        s.running.insert(req.stream.clone(), run);
        s.streams.insert(req.stream.clone(), req.holder.clone());
        true
    }
}

//! Latency percentiles and the JSON report of a run.

use serde::Serialize;

/// Latency samples in microseconds; sorted once when summarised.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    micros: Vec<u32>,
}

impl Latencies {
    /// An empty set of samples.
    pub fn new() -> Latencies {
        Latencies::default()
    }

    /// Records one latency, saturating at `u32::MAX` microseconds (~71 minutes).
    pub fn record(&mut self, d: std::time::Duration) {
        self.micros
            .push(u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
    }

    /// Moves every sample of `other` into `self`.
    pub fn merge(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// `true` when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.micros.is_empty()
    }

    /// p50/p95/p99/max/mean in milliseconds (all 0 without samples).
    pub fn summary(mut self) -> LatencySummary {
        self.micros.sort_unstable();
        let s = &self.micros;
        let ms = |us: u32| f64::from(us) / 1000.0;
        let mean = if s.is_empty() {
            0.0
        } else {
            s.iter().map(|&u| u64::from(u)).sum::<u64>() as f64 / s.len() as f64 / 1000.0
        };
        LatencySummary {
            p50: percentile(s, 50.0).map_or(0.0, ms),
            p95: percentile(s, 95.0).map_or(0.0, ms),
            p99: percentile(s, 99.0).map_or(0.0, ms),
            max: s.last().copied().map_or(0.0, ms),
            mean,
        }
    }
}

/// Nearest-rank percentile `p` (0–100) of an ascending slice: the smallest sample such that at
/// least `p`% of the samples are ≤ it. `None` for an empty slice.
pub fn percentile(sorted: &[u32], p: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Latency percentiles of the successful requests, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest request.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

/// Errors by kind.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct ErrorCounts {
    /// Answers with a non-2xx HTTP status.
    pub http: u64,
    /// JSON-RPC error responses (and tool results with `isError: true`).
    pub jsonrpc: u64,
    /// Requests that hit the per-request timeout.
    pub timeout: u64,
    /// Connection failures, malformed answers, streams ending without our response.
    pub transport: u64,
}

impl ErrorCounts {
    /// Sum of every kind.
    pub fn total(&self) -> u64 {
        self.http + self.jsonrpc + self.timeout + self.transport
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &ErrorCounts) {
        self.http += other.http;
        self.jsonrpc += other.jsonrpc;
        self.timeout += other.timeout;
        self.transport += other.transport;
    }
}

/// The result of `switchboard-bench run`, printed and written as JSON by `--report`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Always `"run"`.
    pub mode: &'static str,
    /// Node URLs, used round robin per request.
    pub urls: Vec<String>,
    /// Virtual clients.
    pub clients: usize,
    /// The tool called.
    pub tool: String,
    /// Requested duration of the measured phase, in seconds.
    pub duration_secs: f64,
    /// Measured wall time from the first call to the last answer (or the drain limit).
    pub elapsed_secs: f64,
    /// Clients whose handshake succeeded.
    pub sessions: usize,
    /// Successful `tools/call` requests.
    pub requests: u64,
    /// `requests / elapsed_secs`.
    pub requests_per_sec: f64,
    /// Failed requests (handshakes included), all kinds.
    pub errors: u64,
    /// Failed requests by kind.
    pub errors_by_kind: ErrorCounts,
    /// Latency of the successful calls.
    pub latency_ms: LatencySummary,
}

impl RunReport {
    /// The one-line human summary.
    pub fn line(&self) -> String {
        format!(
            "clients={} requests={} rps={:.1} p50={:.3}ms p95={:.3}ms p99={:.3}ms errors={}",
            self.clients,
            self.requests,
            self.requests_per_sec,
            self.latency_ms.p50,
            self.latency_ms.p95,
            self.latency_ms.p99,
            self.errors
        )
    }
}

/// The result of `switchboard-bench idle-sessions`.
#[derive(Debug, Clone, Serialize)]
pub struct IdleReport {
    /// Always `"idle-sessions"`.
    pub mode: &'static str,
    /// Node URLs, used round robin per request.
    pub urls: Vec<String>,
    /// Sessions asked for.
    pub count: usize,
    /// Sessions created.
    pub created: usize,
    /// Wall time of the creation phase, in seconds.
    pub create_secs: f64,
    /// `created / create_secs`.
    pub sessions_per_sec: f64,
    /// Latency of one handshake (initialize + initialized).
    pub handshake_ms: LatencySummary,
    /// Sessions deleted with 2xx at the end.
    pub deleted: usize,
    /// Failures while creating or deleting.
    pub errors: u64,
    /// Node RSS before and after creating the sessions (with `--node-pid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_rss: Option<crate::memory::RssDelta>,
    /// Redis memory of a sample of the sessions (with `--redis-url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_memory: Option<crate::memory::RedisMemory>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 95.0), Some(95));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        let small = [10, 20, 30, 40];
        assert_eq!(percentile(&small, 50.0), Some(20));
        assert_eq!(percentile(&small, 51.0), Some(30));
        assert_eq!(percentile(&small, 99.0), Some(40));
    }

    #[test]
    fn summary_sorts_and_converts_to_ms() {
        let mut l = Latencies::new();
        for us in [3000u64, 1000, 2000, 4000] {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.p50, 2.0);
        assert_eq!(s.p99, 4.0);
        assert_eq!(s.max, 4.0);
        assert_eq!(s.mean, 2.5);
        assert_eq!(Latencies::new().summary(), LatencySummary::default());
    }
}

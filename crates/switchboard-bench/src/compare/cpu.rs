//! CPU time of the servers a run loads, from `/proc/<pid>/stat` (`utime` + `stime`, fields 14
//! and 15, in clock ticks: every thread of the process), sampled when the measured phase of a
//! run begins and when it ends, and divided by the run's successful calls.

use std::sync::OnceLock;

use serde::Serialize;

/// Clock ticks per second (`getconf CLK_TCK`; 100, Linux's value, when that cannot be run).
pub fn clk_tck() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// `utime + stime` of the text of a `/proc/<pid>/stat` (the command name, field 2, is in
/// parentheses and may hold spaces or parentheses: fields are counted after the last `)`).
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (state): utime (14) and stime (15) are its 12th and 13th.
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `utime + stime` of process `pid`, in clock ticks.
pub fn ticks(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    parse_stat_ticks(&text).ok_or_else(|| format!("{path}: cannot read utime and stime"))
}

/// A named process whose CPU time is counted.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Watched {
    /// What it is (`rmcp`, `node`, `redis`, `haproxy`, `agentgateway`, ...).
    pub name: String,
    /// Its PID.
    pub pid: u32,
    /// `true` for the upstream a proxy scenario forwards to (rmcp), counted apart.
    pub upstream: bool,
}

/// The ticks of every watched process at one moment (`None` for one that cannot be read).
pub fn sample(watched: &[Watched]) -> Vec<Option<u64>> {
    watched.iter().map(|w| ticks(w.pid).ok()).collect()
}

/// CPU time per successful call of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CpuPerCall {
    /// Each process's CPU time over the measured phase, in µs per successful call, in the order
    /// of `processes`.
    pub per_process_us: Vec<f64>,
    /// The processes.
    pub processes: Vec<Watched>,
    /// The sum over the scenario's own processes (the server, or the hop and its Redis), µs per
    /// call.
    pub own_us: f64,
    /// The sum over the upstream (rmcp behind a proxy), µs per call; `None` without one.
    pub upstream_us: Option<f64>,
}

/// CPU per call from the samples before and after a run of `calls` successful calls; `None`
/// when nothing is watched, there were no calls, or a process could not be read.
pub fn per_call(
    watched: &[Watched],
    before: &[Option<u64>],
    after: &[Option<u64>],
    calls: u64,
) -> Option<CpuPerCall> {
    if watched.is_empty() || calls == 0 {
        return None;
    }
    let us_per_tick = 1e6 / clk_tck() as f64;
    let mut per = Vec::with_capacity(watched.len());
    for (b, a) in before.iter().zip(after) {
        let d = a.as_ref()?.checked_sub(*b.as_ref()?)?;
        per.push(d as f64 * us_per_tick / calls as f64);
    }
    let sum = |upstream: bool| -> f64 {
        watched
            .iter()
            .zip(&per)
            .filter(|(w, _)| w.upstream == upstream)
            .map(|(_, us)| us)
            .sum()
    };
    let has_upstream = watched.iter().any(|w| w.upstream);
    Some(CpuPerCall {
        own_us: sum(false),
        upstream_us: has_upstream.then(|| sum(true)),
        per_process_us: per,
        processes: watched.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    150 25 0 0 20 0 4 0 12345 100000 500 18446744073709551615";
        assert_eq!(parse_stat_ticks(stat), Some(175));
        assert_eq!(parse_stat_ticks("1 (x) S 1 2"), None);
        assert!(ticks(std::process::id()).is_ok());
        assert!(clk_tck() > 0);
    }

    #[test]
    fn per_call_splits_own_and_upstream() {
        let w = |name: &str, upstream| Watched {
            name: name.into(),
            pid: 1,
            upstream,
        };
        let watched = [w("node", false), w("redis", false), w("rmcp", true)];
        let tick_us = 1e6 / clk_tck() as f64;
        let c = per_call(
            &watched,
            &[Some(10), Some(5), Some(0)],
            &[Some(30), Some(15), Some(40)],
            1000,
        )
        .unwrap();
        assert!((c.own_us - 30.0 * tick_us / 1000.0).abs() < 1e-9);
        assert!((c.upstream_us.unwrap() - 40.0 * tick_us / 1000.0).abs() < 1e-9);
        assert!(per_call(&watched[..1], &[Some(1)], &[None], 10).is_none());
        assert!(per_call(&watched[..1], &[Some(1)], &[Some(2)], 0).is_none());
        assert!(per_call(&[], &[], &[], 10).is_none());
        let alone = per_call(&watched[..1], &[Some(0)], &[Some(1)], 1).unwrap();
        assert_eq!(alone.upstream_us, None);
    }
}

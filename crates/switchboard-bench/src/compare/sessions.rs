//! The sessions phase of a comparison: after the request rounds, each round creates N sessions
//! `idle-sessions`-style ([`crate::run::idle_sessions`], in process: at most `concurrency`
//! handshakes in flight, no hold) on the rmcp baseline and then on the one node with Redis
//! (A B), and DELETEs them again so the next round starts clean. The target is the ratio of
//! sessions created per second.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use super::procs::redis_query;
use super::setup::Servers;
use super::table::{median, Check, TargetResult};
use crate::run::{idle_sessions, IdleConfig};
use crate::stats::IdleReport;

/// The nodes' default `session.max_sessions`: the live sessions the cluster admits (counted in
/// the Redis index `sb:sessions`, shared by every node of the comparison).
pub const MAX_SESSIONS: u64 = 100_000;

/// How the phase is run.
#[derive(Debug, Clone)]
pub struct SessionsPlan {
    /// Sessions created per server and round.
    pub count: usize,
    /// Handshakes (and DELETEs) in flight at once.
    pub concurrency: usize,
    /// Rounds (A B each).
    pub rounds: usize,
    /// Limit on every request.
    pub request_timeout: Duration,
}

/// One creation of `count` sessions on one server.
#[derive(Debug, Clone, Serialize)]
pub struct SessionsRun {
    /// Round, from 1.
    pub round: usize,
    /// `rmcp` or `switchboard`.
    pub server: &'static str,
    /// Sessions left in the cluster's index before the creation (Switchboard only).
    pub index_before: Option<u64>,
    /// Sessions left in the index after the DELETEs (Switchboard only).
    pub index_after: Option<u64>,
    /// The `idle-sessions` report (created, sessions/s, handshake latency, deleted, errors).
    pub report: IdleReport,
}

/// The whole phase.
#[derive(Debug, Clone, Serialize)]
pub struct SessionsPhase {
    /// Sessions per server and round.
    pub count: usize,
    /// Handshakes in flight at once.
    pub concurrency: usize,
    /// Every creation, in order.
    pub runs: Vec<SessionsRun>,
    /// Per round: Switchboard's sessions/s ÷ rmcp's.
    pub ratio_rounds: Vec<f64>,
}

fn index_size(redis: SocketAddr) -> Result<u64, String> {
    redis_query(redis, redis::cmd("ZCARD").arg("sb:sessions"))
        .map_err(|e| format!("ZCARD sb:sessions: {e}"))
}

/// Runs the phase, one progress line per creation on stderr.
pub async fn run(servers: &Servers, plan: &SessionsPlan) -> Result<SessionsPhase, String> {
    let mut runs = Vec::new();
    let mut ratio_rounds = Vec::new();
    for round in 1..=plan.rounds {
        let mut rates = [0.0f64; 2];
        for (k, (server, url)) in [("rmcp", &servers.rmcp), ("switchboard", &servers.redis1)]
            .into_iter()
            .enumerate()
        {
            let on_node = k == 1;
            let index_before = on_node.then(|| index_size(servers.redis)).transpose()?;
            if let Some(n) = index_before {
                if n + plan.count as u64 > MAX_SESSIONS {
                    return Err(format!(
                        "sessions phase: {n} sessions are still in the index and {} more would \
                         pass session.max_sessions ({MAX_SESSIONS}): lower --sessions",
                        plan.count
                    ));
                }
            }
            let cfg = IdleConfig {
                urls: vec![url.clone()],
                count: plan.count,
                concurrency: plan.concurrency,
                request_timeout: plan.request_timeout,
                node_pids: Vec::new(),
                redis_url: None,
                key_prefix: "sb".into(),
                redis_sample: 0,
                settle: Duration::ZERO,
            };
            let report = idle_sessions(cfg, |_| async {})
                .await
                .map_err(|e| format!("sessions phase on {server}: {e}"))?;
            let index_after = on_node.then(|| index_size(servers.redis)).transpose()?;
            eprintln!(
                "[sessions round {round}/{}] {server}: created={}/{} sessions_per_sec={:.1} \
                 handshake_p50={:.3}ms deleted={} errors={}",
                plan.rounds,
                report.created,
                report.count,
                report.sessions_per_sec,
                report.handshake_ms.p50,
                report.deleted,
                report.errors
            );
            rates[k] = report.sessions_per_sec;
            runs.push(SessionsRun {
                round,
                server,
                index_before,
                index_after,
                report,
            });
        }
        if rates[0] > 0.0 {
            ratio_rounds.push(rates[1] / rates[0]);
        }
    }
    Ok(SessionsPhase {
        count: plan.count,
        concurrency: plan.concurrency,
        runs,
        ratio_rounds,
    })
}

/// Issue 17's target: sessions created per second ≥ 2 × rmcp.
pub fn target(phase: Option<&SessionsPhase>, skipped: Option<&str>) -> TargetResult {
    let what = "switchboard 1 node, Redis: sessions created per second × rmcp".to_owned();
    let rounds = phase.map_or(Vec::new(), |p| p.ratio_rounds.clone());
    TargetResult::new(
        17,
        what,
        Check::AtLeast,
        2.0,
        rounds,
        skipped.map(str::to_owned),
    )
}

/// The phase as Markdown: one line per round and server, then the medians.
pub fn markdown(p: &SessionsPhase) -> String {
    let mut md = format!(
        "Sessions created per second (`idle-sessions`-style: {} sessions per server and round, \
         {} handshakes in flight, then DELETEd):\n\n\
         | round | server | created | sessions/s | handshake p50 ms | p99 ms | deleted | errors |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|\n",
        p.count, p.concurrency
    );
    for r in &p.runs {
        let x = &r.report;
        md.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} |\n",
            r.round,
            r.server,
            x.created,
            x.sessions_per_sec,
            x.handshake_ms.p50,
            x.handshake_ms.p99,
            x.deleted,
            x.errors
        ));
    }
    let med = |server: &str| {
        median(
            p.runs
                .iter()
                .filter(|r| r.server == server)
                .map(|r| r.report.sessions_per_sec)
                .collect(),
        )
    };
    md.push_str(&format!(
        "\nMedians: rmcp {:.0} sessions/s, switchboard {:.0} sessions/s.\n",
        med("rmcp"),
        med("switchboard")
    ));
    md
}

//! The measured runs of a comparison: for each client count, `rounds` rounds in which every
//! candidate scenario runs right after its own run of the rmcp baseline (A B A B ...), so each
//! candidate has a baseline taken side by side with it.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::setup::Servers;
use crate::run::{run_load, RunConfig};
use crate::stats::RunReport;

/// What a run is loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// The plain axum handler.
    Axum,
    /// The rmcp server, direct.
    Rmcp,
    /// One Switchboard node, memory store.
    Memory,
    /// One Switchboard node, Redis.
    Redis1,
    /// Three Switchboard nodes, one Redis, URLs round robin.
    Redis3,
    /// The rmcp server behind one Switchboard node with Redis.
    Proxy,
    /// The rmcp server behind HAProxy (HTTP mode, no state): what one proxy hop costs on this
    /// machine before any session work. Only when `haproxy` can be run.
    Haproxy,
    /// The rmcp server behind `serve-forward` (axum server + reqwest client, the HTTP stack a
    /// node uses, no state): what one hop costs in that stack before any session work.
    Forward,
}

impl Scenario {
    /// The candidates, in the order each round runs them (each after an rmcp run).
    pub const CANDIDATES: [Scenario; 7] = [
        Scenario::Axum,
        Scenario::Memory,
        Scenario::Redis1,
        Scenario::Redis3,
        Scenario::Proxy,
        Scenario::Haproxy,
        Scenario::Forward,
    ];

    /// Its name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Scenario::Axum => "axum fixed JSON (HTTP ceiling)",
            Scenario::Rmcp => "rmcp 3.11 direct (baseline)",
            Scenario::Memory => "switchboard 1 node, memory store",
            Scenario::Redis1 => "switchboard 1 node, Redis",
            Scenario::Redis3 => "switchboard 3 nodes, Redis",
            Scenario::Proxy => "rmcp behind 1 node, Redis (proxy)",
            Scenario::Haproxy => "rmcp behind HAProxy (stateless hop, reference)",
            Scenario::Forward => "rmcp behind axum + reqwest (stateless hop, reference)",
        }
    }

    /// The URLs its load goes to; none when its server was not started (no `haproxy`).
    pub fn urls(self, s: &Servers) -> Vec<String> {
        match self {
            Scenario::Axum => vec![s.axum.clone()],
            Scenario::Rmcp => vec![s.rmcp.clone()],
            Scenario::Memory => vec![s.memory.clone()],
            Scenario::Redis1 => vec![s.redis1.clone()],
            Scenario::Redis3 => s.redis3.clone(),
            Scenario::Proxy => vec![s.proxy.clone()],
            Scenario::Haproxy => s.haproxy.iter().cloned().collect(),
            Scenario::Forward => vec![s.forward.clone()],
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// What was loaded.
    pub scenario: Scenario,
    /// For an rmcp run: the candidate it is the baseline of.
    pub paired_with: Option<Scenario>,
    /// Virtual clients.
    pub clients: usize,
    /// Round, from 1.
    pub round: usize,
    /// The load generator's report.
    pub report: RunReport,
}

/// How the runs are made.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Client counts, each measured in full before the next.
    pub client_counts: Vec<usize>,
    /// Rounds per client count.
    pub rounds: usize,
    /// Length of each run.
    pub duration: Duration,
    /// Limit on each request.
    pub request_timeout: Duration,
}

async fn one_run(
    scenario: Scenario,
    servers: &Servers,
    clients: usize,
    plan: &Plan,
) -> Result<RunReport, String> {
    let cfg = RunConfig {
        urls: scenario.urls(servers),
        clients,
        duration: plan.duration,
        tool: "echo".into(),
        args: json!({"text": "x"}),
        request_timeout: plan.request_timeout,
    };
    run_load(cfg)
        .await
        .map_err(|e| format!("{}: {e}", scenario.label()))
}

/// Runs the whole plan, printing one progress line per run to stderr.
pub async fn run_plan(servers: &Servers, plan: &Plan) -> Result<Vec<RunRecord>, String> {
    let mut records = Vec::new();
    for &clients in &plan.client_counts {
        for round in 1..=plan.rounds {
            for cand in Scenario::CANDIDATES {
                if cand.urls(servers).is_empty() {
                    continue;
                }
                for (scenario, paired_with) in [(Scenario::Rmcp, Some(cand)), (cand, None)] {
                    let report = one_run(scenario, servers, clients, plan).await?;
                    eprintln!(
                        "[clients={clients} round {round}/{}] {}: {}",
                        plan.rounds,
                        scenario.label(),
                        report.line()
                    );
                    records.push(RunRecord {
                        scenario,
                        paired_with,
                        clients,
                        round,
                        report,
                    });
                }
            }
        }
    }
    Ok(records)
}

//! The measured runs of a comparison: for each client count, `rounds` rounds in which every
//! candidate scenario runs right after its own run of the rmcp baseline (A B A B ...), so each
//! candidate has a baseline taken side by side with it.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::cpu::{self, CpuPerCall, Watched};
use super::setup::Servers;
use crate::run::{run_load_with, RunConfig};
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
    /// The rmcp server behind agentgateway (the closest Rust MCP gateway, stateful mode). Only
    /// with `--agentgateway BIN`.
    Agentgateway,
}

impl Scenario {
    /// The candidates, in the order each round runs them (each after an rmcp run).
    /// The proxy and `serve-forward` run next to each other (the proxy target is read
    /// against that hop), agentgateway after them.
    pub const CANDIDATES: [Scenario; 8] = [
        Scenario::Axum,
        Scenario::Memory,
        Scenario::Redis1,
        Scenario::Redis3,
        Scenario::Proxy,
        Scenario::Forward,
        Scenario::Haproxy,
        Scenario::Agentgateway,
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
            Scenario::Agentgateway => "rmcp behind agentgateway (stateful, peer)",
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
            Scenario::Agentgateway => s.agentgateway.iter().map(|a| a.url.clone()).collect(),
        }
    }

    /// The tool its load calls: `echo`, or the name agentgateway lists it under.
    pub fn tool(self, s: &Servers) -> String {
        match (self, &s.agentgateway) {
            (Scenario::Agentgateway, Some(a)) => a.tool.clone(),
            _ => "echo".into(),
        }
    }

    /// The processes whose CPU time a run of it is charged: its own server(s) (a node with
    /// its Redis, a hop), and the rmcp upstream behind a proxy (counted apart).
    pub fn watched(self, s: &Servers) -> Vec<Watched> {
        let own = |name: &str, pid: u32| Watched {
            name: name.into(),
            pid,
            upstream: false,
        };
        let rmcp = Watched {
            name: "rmcp".into(),
            pid: s.pids.rmcp,
            upstream: true,
        };
        let redis = own("redis", s.pids.redis);
        match self {
            Scenario::Axum => vec![own("axum", s.pids.axum)],
            Scenario::Rmcp => vec![own("rmcp", s.pids.rmcp)],
            Scenario::Memory => vec![own("node", s.pids.memory)],
            Scenario::Redis1 => vec![own("node", s.pids.redis1), redis],
            Scenario::Redis3 => {
                let mut v: Vec<Watched> = s.pids.redis3.iter().map(|&p| own("node", p)).collect();
                v.push(redis);
                v
            }
            Scenario::Proxy => vec![own("node", s.pids.proxy), redis, rmcp],
            Scenario::Forward => vec![own("serve-forward", s.pids.forward), rmcp],
            Scenario::Haproxy => match s.pids.haproxy {
                Some(p) => vec![own("haproxy", p), rmcp],
                None => Vec::new(),
            },
            Scenario::Agentgateway => match &s.agentgateway {
                Some(a) => vec![own("agentgateway", a.pid), rmcp],
                None => Vec::new(),
            },
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
    /// CPU time of the servers over the measured phase, per successful call (`None` when
    /// `/proc` could not be read).
    pub cpu: Option<CpuPerCall>,
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
) -> Result<(RunReport, Option<CpuPerCall>), String> {
    let cfg = RunConfig {
        urls: scenario.urls(servers),
        clients,
        duration: plan.duration,
        tool: scenario.tool(servers),
        args: json!({"text": "x"}),
        request_timeout: plan.request_timeout,
    };
    let watched = scenario.watched(servers);
    let mut before = Vec::new();
    let report = run_load_with(cfg, || before = cpu::sample(&watched))
        .await
        .map_err(|e| format!("{}: {e}", scenario.label()))?;
    let after = cpu::sample(&watched);
    let cpu = cpu::per_call(&watched, &before, &after, report.requests);
    Ok((report, cpu))
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
                    let (report, cpu) = one_run(scenario, servers, clients, plan).await?;
                    let cpu_text = cpu
                        .as_ref()
                        .map_or(String::new(), |c| format!(" cpu={:.1}us/call", c.own_us));
                    eprintln!(
                        "[clients={clients} round {round}/{}] {}: {}{cpu_text}",
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
                        cpu,
                    });
                }
            }
        }
    }
    Ok(records)
}

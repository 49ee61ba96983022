//! `compare`: the one command that runs the whole comparison on loopback and prints the
//! table. It starts the baselines (`serve-axum`, `serve-rmcp`), a private Redis and the
//! Switchboard nodes of each scenario ([`setup`]; agentgateway too with `--agentgateway`), runs
//! the load generator in process ([`measure`]: each candidate right after its own rmcp run, A B
//! A B, `--rounds` times, at `--clients` and at 1 client, with the servers' CPU time from
//! `/proc`, [`cpu`]), then `redis-benchmark` ([`redis_bench`]), the sessions phase
//! ([`sessions`]) and the resume storm ([`storm`]), and prints medians, ratios and the targets
//! of issues 4 and 17 ([`table`]). Every process it started is killed by PID when it ends,
//! fails, or gets Ctrl-C or SIGTERM ([`procs`]).

pub mod cpu;
pub mod measure;
pub mod procs;
pub mod redis_bench;
pub mod sessions;
pub mod setup;
pub mod storm;
pub mod table;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::client::{McpClient, Target};
use crate::modes::resume::ResumeReport;
use measure::{Plan, RunRecord};
use procs::{can_run, Procs};
use redis_bench::RedisBench;
use sessions::{SessionsPhase, SessionsPlan};
use setup::{Agentgateway, Programs};
use storm::StormPlan;
use table::{Row, TargetResult};

/// The options of `compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// One round of 2 s runs (for tests); --duration-secs still applies when given.
    #[arg(long)]
    pub quick: bool,
    /// Rounds of A B pairs per scenario and client count.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Length of each run, in seconds (default 5, or 2 with --quick).
    #[arg(long)]
    pub duration_secs: Option<u64>,
    /// The high client count (every scenario also runs at 1 client).
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Limit on every request, in ms.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// The switchboard binary (default: $SWITCHBOARD_BIN, else $CARGO_TARGET_DIR/release/switchboard,
    /// else target/release/switchboard).
    #[arg(long)]
    pub switchboard_bin: Option<PathBuf>,
    /// The redis-server program.
    #[arg(long, env = "REDIS_SERVER", default_value = "redis-server")]
    pub redis_server: PathBuf,
    /// The redis-benchmark program (skipped when it cannot be run).
    #[arg(long, default_value = "redis-benchmark")]
    pub redis_benchmark: PathBuf,
    /// The haproxy program, for the stateless-hop reference row (skipped when it cannot be run).
    #[arg(long, default_value = "haproxy")]
    pub haproxy: PathBuf,
    /// A prebuilt agentgateway binary: adds its rows (in front of the same `serve-rmcp`) and the
    /// CPU-per-call target against it (skipped without it).
    #[arg(long)]
    pub agentgateway: Option<PathBuf>,
    /// Sessions created per server and round in the sessions phase (default 20000, or 300
    /// with --quick).
    #[arg(long)]
    pub sessions: Option<usize>,
    /// Handshakes in flight at once in the sessions phase (idle-sessions' default).
    #[arg(long, default_value_t = 64)]
    pub session_concurrency: usize,
    /// Skip the sessions phase (its target is then reported as skipped).
    #[arg(long)]
    pub skip_sessions: bool,
    /// Clients of the resume storm (default 100, or 10 with --quick).
    #[arg(long)]
    pub storm_clients: Option<usize>,
    /// Progress events per storm client (default 10000, or 500 with --quick; at most 20000,
    /// the storm nodes' log cap).
    #[arg(long)]
    pub storm_events: Option<u64>,
    /// The longest wait for the storm's calls to finish on the server before the resume, in ms.
    #[arg(long, default_value_t = 300_000)]
    pub storm_wait_ms: u64,
    /// Limit on each storm request and on each whole replay, in ms.
    #[arg(long, default_value_t = 30_000)]
    pub storm_timeout_ms: u64,
    /// Skip the resume storm (its targets are then reported as skipped).
    #[arg(long)]
    pub skip_storm: bool,
    /// Do not pin processes to cores with taskset.
    #[arg(long)]
    pub no_pin: bool,
    /// Also write the table as Markdown to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write every raw number as JSON to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Everything a comparison measured, written by `--report`.
#[derive(Debug, Serialize)]
pub struct CompareReport {
    /// Always `"compare"`.
    pub mode: &'static str,
    /// Rounds per scenario and client count.
    pub rounds: usize,
    /// Seconds per run.
    pub duration_secs: u64,
    /// Client counts measured.
    pub client_counts: Vec<usize>,
    /// Core the servers (and Redis) were pinned to, if any; the load generator then ran on 0.
    pub server_core: Option<usize>,
    /// The switchboard binary used.
    pub switchboard_bin: String,
    /// Medians and ratios.
    pub rows: Vec<Row>,
    /// The targets of issues 4 and 17.
    pub targets: Vec<TargetResult>,
    /// `redis-benchmark` figures (empty when it was not run).
    pub redis_benchmark: Vec<RedisBench>,
    /// Why `redis-benchmark` figures are missing, if they are.
    pub redis_benchmark_skipped: Option<String>,
    /// Why the HAProxy reference row is missing, if it is.
    pub haproxy_skipped: Option<String>,
    /// The tool name agentgateway listed `echo` under, when it ran.
    pub agentgateway_tool: Option<String>,
    /// Why the agentgateway rows are missing, if they are.
    pub agentgateway_skipped: Option<String>,
    /// The sessions phase, when it ran.
    pub sessions: Option<SessionsPhase>,
    /// Why the sessions phase did not run, if it did not.
    pub sessions_skipped: Option<String>,
    /// The resume storm, when it ran to the end.
    pub storm: Option<ResumeReport>,
    /// Why the resume storm did not run (skipped) or did not finish (an error), if so.
    pub storm_skipped: Option<String>,
    /// Every run, in order.
    pub runs: Vec<RunRecord>,
}

/// Pins this process (all its threads) to core 0 and returns `Some(1)`, the core for the
/// servers, when taskset exists and there are at least 2 cores; else `None` (nothing pinned).
fn pin_cores(no_pin: bool) -> Option<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if no_pin || cores < 2 || !can_run("taskset".as_ref()) {
        return None;
    }
    let pid = std::process::id().to_string();
    let ok = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", "0", &pid])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(1)
}

/// Runs the comparison, prints the table, writes `--out` and `--report`.
pub async fn compare(args: CompareArgs) -> Result<(), String> {
    let bench = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let switchboard = args
        .switchboard_bin
        .clone()
        .unwrap_or_else(setup::default_switchboard_bin);
    setup::check_switchboard_bin(&switchboard)?;
    if !can_run(&args.redis_server) {
        return Err(format!(
            "cannot run {} (install redis-server or pass --redis-server PATH)",
            args.redis_server.display()
        ));
    }
    let programs = Programs {
        bench,
        switchboard,
        redis_server: args.redis_server.clone(),
        haproxy: can_run(&args.haproxy).then(|| args.haproxy.clone()),
        agentgateway: args.agentgateway.clone(),
    };
    let storm_events = args
        .storm_events
        .unwrap_or(if args.quick { 500 } else { 10_000 });
    if !args.skip_storm && storm_events > setup::STORM_MAX_EVENTS {
        return Err(format!(
            "--storm-events {storm_events} is above the storm nodes' log cap ({})",
            setup::STORM_MAX_EVENTS
        ));
    }
    let pin = pin_cores(args.no_pin);
    let dir = std::env::temp_dir().join(format!("sb-compare-{}", std::process::id()));
    let mut procs = Procs::new(dir.clone(), pin)?;
    let result = tokio::select! {
        r = run_all(&args, &programs, &mut procs, pin) => r,
        s = interrupted() => Err(format!("{s}: stopping")),
    };
    drop(procs);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        eprintln!("logs of the started processes: {}", dir.display());
    }
    result
}

/// Starts agentgateway in front of `rmcp`, waits (at most [`procs::READY_LIMIT`]) until an
/// `initialize` through it answers, finds the name it lists `echo` under with `tools/list`, and
/// checks that one call of it answers.
async fn start_agentgateway(
    procs: &mut Procs,
    program: &std::path::Path,
    rmcp: &str,
    timeout_ms: u64,
) -> Result<Agentgateway, String> {
    let (url, pid) = setup::start_agentgateway(procs, program, rmcp)?;
    let target = Target::new(vec![url.clone()], 1, Duration::from_millis(timeout_ms))
        .map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + procs::READY_LIMIT;
    let mut client = loop {
        match McpClient::connect(&target).await {
            Ok(c) => break c,
            Err(e) if std::time::Instant::now() > deadline => {
                return Err(format!("no answer to initialize at {url}: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let listed = client
        .request("tools/list", serde_json::json!({}))
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let tool = pick_echo(&listed)?;
    client
        .call_tool(&tool, &serde_json::json!({"text": "x"}))
        .await
        .map_err(|e| format!("tools/call {tool}: {e}"))?;
    let _ = client.close().await;
    Ok(Agentgateway { url, tool, pid })
}

/// The name a `tools/list` result gives rmcp's `echo`: `echo`, else the one prefixed with the
/// target's name (`echo_echo`), else any ending in `echo`.
fn pick_echo(listed: &serde_json::Value) -> Result<String, String> {
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    ["echo", "echo_echo"]
        .into_iter()
        .find(|n| names.contains(n))
        .or_else(|| names.iter().copied().find(|n| n.ends_with("echo")))
        .map(str::to_owned)
        .ok_or_else(|| format!("no echo tool in tools/list: {names:?}"))
}

/// Completes on Ctrl-C or SIGTERM, naming it.
async fn interrupted() -> &'static str {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return "Ctrl-C";
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = term.recv() => "SIGTERM",
    }
}

async fn run_all(
    args: &CompareArgs,
    programs: &Programs,
    procs: &mut Procs,
    pin: Option<usize>,
) -> Result<(), String> {
    let rounds = if args.quick { 1 } else { args.rounds.max(1) };
    let duration_secs = args.duration_secs.unwrap_or(if args.quick { 2 } else { 5 });
    let many = args.clients.max(1);
    let client_counts = if many == 1 { vec![1] } else { vec![many, 1] };
    eprintln!("starting servers (logs in {})", procs.dir().display());
    let mut servers = setup::start_all(procs, programs)?;
    if let Some(program) = &programs.agentgateway {
        match start_agentgateway(procs, program, &servers.rmcp, args.timeout_ms).await {
            Ok(a) => {
                eprintln!("agentgateway at {} lists echo as {:?}", a.url, a.tool);
                servers.agentgateway = Some(a);
                servers.agentgateway_skipped = None;
            }
            Err(e) => {
                eprintln!("no agentgateway rows: {e}");
                servers.agentgateway_skipped = Some(format!("agentgateway did not start: {e}"));
            }
        }
    }
    let plan = Plan {
        client_counts: client_counts.clone(),
        rounds,
        duration: Duration::from_secs(duration_secs),
        request_timeout: Duration::from_millis(args.timeout_ms),
    };
    let runs = measure::run_plan(&servers, &plan).await?;
    let (redis_benchmark, redis_benchmark_skipped) = if can_run(&args.redis_benchmark) {
        let n = if args.quick { 20_000 } else { 200_000 };
        // The benchmark client takes the load generator's core.
        let core = pin.map(|_| 0);
        match redis_bench::run(&args.redis_benchmark, servers.redis, n, core).await {
            Ok(v) => (v, None),
            Err(e) => (Vec::new(), Some(e)),
        }
    } else {
        let why = format!("{} cannot be run", args.redis_benchmark.display());
        (Vec::new(), Some(why))
    };
    let (sessions, sessions_skipped) = if args.skip_sessions {
        (None, Some("--skip-sessions".to_owned()))
    } else {
        let count = args
            .sessions
            .unwrap_or(if args.quick { 300 } else { 20_000 });
        let plan = SessionsPlan {
            count,
            concurrency: args.session_concurrency.max(1),
            rounds,
            request_timeout: Duration::from_millis(args.timeout_ms),
        };
        (Some(sessions::run(&servers, &plan).await?), None)
    };
    let (storm, storm_skipped, storm_failed) = if args.skip_storm {
        (None, Some("--skip-storm".to_owned()), None)
    } else {
        let plan = StormPlan {
            clients: args
                .storm_clients
                .unwrap_or(if args.quick { 10 } else { 100 })
                .max(1),
            events: args
                .storm_events
                .unwrap_or(if args.quick { 500 } else { 10_000 }),
            wait: Duration::from_millis(args.storm_wait_ms),
            request_timeout: Duration::from_millis(args.storm_timeout_ms),
        };
        let urls = setup::start_storm_nodes(procs, programs, servers.redis)?;
        eprintln!(
            "resume storm: {} clients x {} events on {urls:?}",
            plan.clients, plan.events
        );
        match storm::run(urls, servers.redis, &plan).await {
            Ok(r) => {
                eprintln!("{}", r.lines());
                (Some(r), None, None)
            }
            Err(e) => {
                eprintln!("resume storm failed: {e}");
                let why = format!("the storm did not finish: {e}");
                (None, Some(why.clone()), Some(why))
            }
        }
    };
    let rows = table::rows(&runs, &client_counts);
    let mut targets = table::targets(&runs, many, servers.agentgateway_skipped.as_deref());
    targets.push(sessions::target(
        sessions.as_ref(),
        sessions_skipped.as_deref(),
    ));
    targets.extend(storm::targets(
        storm.as_ref(),
        storm_skipped.as_deref(),
        storm_failed.as_deref(),
    ));
    // One table, issue 4's targets first.
    targets.sort_by_key(|t| t.issue);
    let report = CompareReport {
        mode: "compare",
        rounds,
        duration_secs,
        client_counts,
        server_core: pin,
        switchboard_bin: programs.switchboard.display().to_string(),
        rows,
        targets,
        redis_benchmark,
        redis_benchmark_skipped,
        haproxy_skipped: servers.haproxy_skipped.clone(),
        agentgateway_tool: servers.agentgateway.as_ref().map(|a| a.tool.clone()),
        agentgateway_skipped: servers.agentgateway_skipped.clone(),
        sessions,
        sessions_skipped,
        storm,
        storm_skipped,
        runs,
    };
    let md = markdown(&report);
    println!("{md}");
    if let Some(path) = &args.out {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The whole comparison as Markdown: settings, the table, the targets, `redis-benchmark`.
pub fn markdown(r: &CompareReport) -> String {
    let pinning = match r.server_core {
        Some(c) => {
            format!("servers and Redis pinned to core {c} (taskset), load generator on core 0")
        }
        None => "nothing pinned".into(),
    };
    let mut md = format!(
        "### switchboard-bench compare\n\n{} round(s) of {} s runs per scenario and client \
         count, each candidate right after its own rmcp run (A B A B); medians over rounds; \
         ratios are medians of the per-round ratios to the paired rmcp run. `tools/call` of \
         `echo` `{{\"text\":\"x\"}}`; {pinning}; switchboard binary `{}`.\n\n",
        r.rounds, r.duration_secs, r.switchboard_bin
    );
    md.push_str(&table::markdown_rows(&r.rows));
    md.push_str(
        "\nCPU µs/call: `utime + stime` (`/proc/<pid>/stat`) over the measured phase of each run, \
         per successful call, median over rounds, of the scenario's own processes (the server; a \
         node and its Redis; the hop); `+ rmcp`: the rmcp upstream behind a hop, apart.\n",
    );
    if let Some(why) = &r.haproxy_skipped {
        md.push_str(&format!("\nNo HAProxy reference row: {why}.\n"));
    }
    match (&r.agentgateway_skipped, &r.agentgateway_tool) {
        (Some(why), _) => md.push_str(&format!("\nNo agentgateway rows: {why}.\n")),
        (None, Some(tool)) => md.push_str(&format!(
            "\nagentgateway (`--agentgateway`) lists rmcp's `echo` as `{tool}`; its load calls that.\n"
        )),
        (None, None) => {}
    }
    md.push_str(
        "\nTargets (issue 4's and issue 17's; value = median over rounds; proxy × `serve-forward`: \
         per round, the proxy's ratio to its rmcp run ÷ `serve-forward`'s ratio to its rmcp run; \
         CPU: per round, node + Redis µs/call ÷ agentgateway's):\n\n",
    );
    md.push_str(&table::markdown_targets(&r.targets));
    match (&r.sessions, &r.sessions_skipped) {
        (Some(p), _) => md.push_str(&format!("\n{}", sessions::markdown(p))),
        (None, Some(why)) => md.push_str(&format!("\nNo sessions phase: {why}.\n")),
        (None, None) => {}
    }
    match (&r.storm, &r.storm_skipped) {
        (Some(s), _) => md.push_str(&format!("\n{}", storm::markdown(s))),
        (None, Some(why)) => md.push_str(&format!("\nNo resume storm: {why}.\n")),
        (None, None) => {}
    }
    md.push_str("\n`redis-benchmark` against the same private Redis (50 connections):\n\n");
    if let Some(why) = &r.redis_benchmark_skipped {
        md.push_str(&format!("- not run: {why}\n"));
    }
    for b in &r.redis_benchmark {
        let p50 = b
            .p50_ms
            .map_or(String::new(), |p| format!(", p50 {p:.3} ms"));
        md.push_str(&format!("- {}: {:.0} req/s{p50}\n", b.name, b.rps));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_reference_row_is_explained() {
        let report = CompareReport {
            mode: "compare",
            rounds: 1,
            duration_secs: 1,
            client_counts: vec![1],
            server_core: None,
            switchboard_bin: "switchboard".into(),
            rows: Vec::new(),
            targets: Vec::new(),
            redis_benchmark: Vec::new(),
            redis_benchmark_skipped: None,
            haproxy_skipped: Some("haproxy cannot be run".into()),
            agentgateway_tool: None,
            agentgateway_skipped: Some("no --agentgateway BIN given".into()),
            sessions: None,
            sessions_skipped: Some("--skip-sessions".into()),
            storm: None,
            storm_skipped: Some("--skip-storm".into()),
            runs: Vec::new(),
        };
        let md = markdown(&report);
        assert!(
            md.contains("No HAProxy reference row: haproxy cannot be run."),
            "{md}"
        );
        assert!(md.contains("No agentgateway rows: no --agentgateway BIN given."));
        assert!(md.contains("No sessions phase: --skip-sessions."));
        assert!(md.contains("No resume storm: --skip-storm."));
        let shown = CompareReport {
            haproxy_skipped: None,
            ..report
        };
        assert!(!markdown(&shown).contains("No HAProxy"));
    }

    #[test]
    fn the_echo_tool_is_found_under_its_listed_name() {
        let list = |names: &[&str]| {
            let tools: Vec<_> = names
                .iter()
                .map(|n| serde_json::json!({"name": n}))
                .collect();
            serde_json::json!({ "tools": tools })
        };
        assert_eq!(pick_echo(&list(&["echo"])).unwrap(), "echo");
        assert_eq!(
            pick_echo(&list(&["other", "echo_echo"])).unwrap(),
            "echo_echo"
        );
        assert_eq!(pick_echo(&list(&["rmcp_echo"])).unwrap(), "rmcp_echo");
        assert!(pick_echo(&list(&["add"])).is_err());
        assert!(pick_echo(&serde_json::json!({})).is_err());
    }
}

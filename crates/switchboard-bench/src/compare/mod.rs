//! `compare`: the one command that runs the whole comparison on loopback and prints the
//! table. It starts the baselines (`serve-axum`, `serve-rmcp`), a private Redis and the
//! Switchboard nodes of each scenario ([`setup`]), runs the load generator in process
//! ([`measure`]: each candidate right after its own rmcp run, A B A B, `--rounds` times, at
//! `--clients` and at 1 client), then `redis-benchmark` ([`redis_bench`]), and prints medians
//! and ratios ([`table`]). Every process it started is killed by PID when it ends, fails, or
//! gets Ctrl-C or SIGTERM ([`procs`]).

pub mod measure;
pub mod procs;
pub mod redis_bench;
pub mod setup;
pub mod table;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use measure::{Plan, RunRecord};
use procs::{can_run, Procs};
use redis_bench::RedisBench;
use setup::Programs;
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
    /// The targets.
    pub targets: Vec<TargetResult>,
    /// `redis-benchmark` figures (empty when it was not run).
    pub redis_benchmark: Vec<RedisBench>,
    /// Why `redis-benchmark` figures are missing, if they are.
    pub redis_benchmark_skipped: Option<String>,
    /// Why the HAProxy reference row is missing, if it is.
    pub haproxy_skipped: Option<String>,
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
    };
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
    let servers = setup::start_all(procs, programs)?;
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
    let rows = table::rows(&runs, &client_counts);
    let targets = table::targets(&rows, many);
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
    md.push_str(&table::markdown_rows(&r.rows, &r.targets));
    if let Some(why) = &r.haproxy_skipped {
        md.push_str(&format!("\nNo HAProxy reference row: {why}.\n"));
    }
    md.push_str("\nTargets:\n\n");
    for t in &r.targets {
        md.push_str(&format!(
            "- {} at {} client(s): {}\n",
            t.scenario.label(),
            t.clients,
            t.text()
        ));
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
            runs: Vec::new(),
        };
        let md = markdown(&report);
        assert!(
            md.contains("No HAProxy reference row: haproxy cannot be run."),
            "{md}"
        );
        let shown = CompareReport {
            haproxy_skipped: None,
            ..report
        };
        assert!(!markdown(&shown).contains("No HAProxy"));
    }
}

//! # chaos: the fault-tolerance suite (issue 14)
//!
//! Starts a Redis, `--nodes` switchboard nodes and HAProxy (round robin) in front, runs
//! `--clients` MCP clients through HAProxy for `--duration-secs`, injects the faults of each
//! `--scenario`, and prints one markdown table row per scenario: events lost, duplicated and out
//! of order, sessions lost, requests ended with -32004, other client-visible errors by kind, and
//! recovery times. See RELIABILITY.md for what is counted how, and the measured tables.
//!
//! ```sh
//! cargo run --release -p switchboard-tests --bin chaos -- --scenario kill9 --nodes 3 --clients 8 --duration-secs 60
//! ```
//!
//! Modules:
//! - `args`: the command line, the scenarios and the Redis topology hook.
//! - `rig`: the processes (through the harness) and the fault schedules.
//! - `primary`: the primary-kill fault (Sentinel and Cluster failovers).
//! - `ops`: the operations managed Redis performs (slot moves, graceful failovers, a shard added
//!   and removed, pub/sub connections dropped).
//! - `pressure`: the eviction scenario (refusal, ballast, Redis held at its memory limit).
//! - `client`: one client's session and call loop.
//! - `workload`: the extended workload (sampling, cancellation, forwarded calls) and its judging.
//! - `call`: one request followed to its end, its stream resumed with `Last-Event-ID`.
//! - `standalone`: the session's standalone `GET` stream, held and resumed.
//! - `replay`: the end-of-run check that every event received live is still in the log.
//! - `check`: the sequence checks (lost, duplicated, out of order).
//! - `report`: the counts, the targets and the table.
//!
//! Exit status: 0; 1 with `--check` when a scenario misses its targets; 2 on a bad argument.

mod args;
mod call;
mod check;
mod client;
mod ops;
mod pressure;
mod primary;
mod replay;
mod report;
mod rig;
mod standalone;
mod workload;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use args::{Args, Scenario};
use client::ClientRun;
use report::{Counts, Row};
use rig::{FaultLog, Rig};

/// How long a client may take to stop after the run: its last calls, then the standalone stream
/// settling, plus slack.
const STOP_LIMIT: Duration = Duration::from_secs(60);

fn main() {
    let args = Args::from_env();
    if let Some(bin) = &args.switchboard_bin {
        switchboard_tests::node::use_binary(bin.clone());
    }
    eprintln!(
        "chaos: node binary {}",
        switchboard_tests::node::binary().display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rows: Vec<Row> = args
        .scenarios
        .iter()
        .map(|&scenario| rt.block_on(run_scenario(&args, scenario)))
        .collect();
    let table = report::table(&rows);
    println!("{table}");
    let mut missed = false;
    for row in &rows {
        for e in &row.counts.examples {
            println!("- {} evidence: {e}", row.scenario.name());
        }
        for f in &row.facts {
            println!("- {} measured: {f}", row.scenario.name());
        }
        if row.counts.cancels.made > 0 {
            println!(
                "- {} slowest cancellation: {} ms from its 202 to the end of its stream",
                row.scenario.name(),
                row.counts.cancel_effect_max.as_millis()
            );
        }
        println!(
            "- {} slowest call ({} ms): {}",
            row.scenario.name(),
            row.counts.slowest.as_millis(),
            row.counts.slowest_trail
        );
        for m in row.misses() {
            missed = true;
            println!("- {} MISSES ITS TARGET: {m}", row.scenario.name());
        }
    }
    if let Some(path) = &args.out {
        if let Err(e) = std::fs::write(path, &table) {
            eprintln!("chaos: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
    }
    if args.check && missed {
        std::process::exit(1);
    }
}

/// Runs one scenario from start to teardown.
async fn run_scenario(args: &Args, scenario: Scenario) -> Row {
    eprintln!("chaos: scenario {} starting", scenario.name());
    let mut rig = tokio::task::block_in_place(|| Rig::start(args, scenario))
        .unwrap_or_else(|e| panic!("scenario {}: cannot set up: {e}", scenario.name()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..args.clients)
        .map(|k| {
            let stop = Arc::clone(&stop);
            tokio::spawn(client::run(k, rig.url(), args.workload, stop))
        })
        .collect();
    let until = Instant::now() + args.duration;
    let faults = FaultLog::default();
    tokio::task::block_in_place(|| {
        rig.inject(args, scenario, until, &faults);
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
    });
    stop.store(true, Ordering::SeqCst);
    let faults = faults.into_inner().expect("fault log");
    // primary-kill measures recovery from each promotion, the others from each fault.
    let promotions = rig.promotions().to_vec();
    let since = if scenario == Scenario::PrimaryKill {
        &promotions
    } else {
        &faults
    };
    let mut counts = Counts::default();
    for handle in clients {
        match tokio::time::timeout(STOP_LIMIT, handle).await {
            Ok(Ok(run)) => merge_client(&mut counts, run, since),
            Ok(Err(e)) => counts.error(format!("client task failed: {e}")),
            Err(_) => counts.error("client did not stop in 60 s"),
        }
    }
    let outcome = std::mem::take(&mut rig.outcome);
    tokio::task::block_in_place(|| {
        if let Some(dir) = &args.logs {
            let dir = dir.join(scenario.name());
            if let Err(e) = rig.keep_logs(&dir) {
                eprintln!("chaos: cannot copy the logs to {}: {e}", dir.display());
            }
        }
        drop(rig);
    });
    Row {
        scenario,
        faults: faults.len() as u64,
        promotions: promotions.len() as u64,
        clients: args.clients as u64,
        min_replicas_acked: args.min_replicas_acked,
        schedule_notes: outcome.notes,
        facts: outcome.facts,
        workload: args.workload,
        counts,
    }
}

/// Adds one client's counts and its recovery times: for each fault (primary-kill: each
/// promotion), the end of the first call sent at or after it that succeeded.
fn merge_client(counts: &mut Counts, run: ClientRun, faults: &[Instant]) {
    let mut c = run.counts;
    for &fault in faults {
        if let Some((_, done)) = run.successes.iter().find(|(sent, _)| *sent >= fault) {
            c.recovery.push(done.duration_since(fault));
        }
    }
    counts.merge(c);
}

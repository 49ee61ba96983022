//! `switchboard-bench`: the command line over [`switchboard_bench::run`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use switchboard_bench::baseline::{self, Baseline, ServeArgs};
use switchboard_bench::compare::{compare, CompareArgs};
use switchboard_bench::modes::{OpenStreamsArgs, ResumeStormArgs, SamplingArgs};
use switchboard_bench::run::{idle_sessions, run_load, IdleConfig, RunConfig};

#[derive(Parser)]
#[command(version, about = "Load generator for MCP Streamable HTTP servers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Baseline: a plain axum handler answering every POST on /mcp with a fixed JSON-RPC result.
    ServeAxum(ServeArgs),
    /// Baseline: an rmcp stateful Streamable HTTP server on /mcp with one `echo` tool.
    ServeRmcp(ServeArgs),
    /// Reference: the smallest Rust proxy hop (axum + reqwest, no session work) to --upstream.
    ServeForward {
        #[command(flatten)]
        serve: ServeArgs,
        /// The URL every request is sent on to.
        #[arg(long)]
        upstream: String,
    },
    /// Baselines vs Switchboard side by side (A B A B, medians, ratios), one table.
    Compare(CompareArgs),
    /// V clients, each opening a session and looping `tools/call` for D seconds.
    Run {
        /// MCP endpoint URL; repeat for several nodes (round robin per request).
        #[arg(long = "url", required = true)]
        urls: Vec<String>,
        /// Virtual clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Length of the measured phase, in seconds.
        #[arg(long, default_value_t = 10)]
        duration_secs: u64,
        /// Tool to call.
        #[arg(long, default_value = "echo")]
        tool: String,
        /// Tool arguments, as JSON.
        #[arg(long, default_value = r#"{"text":"x"}"#)]
        args: String,
        /// Limit on every request, in ms.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// Create N sessions, hold them (Ctrl-C or --hold-secs), then DELETE them.
    IdleSessions {
        /// MCP endpoint URL; repeat for several nodes (round robin per request).
        #[arg(long = "url", required = true)]
        urls: Vec<String>,
        /// Sessions to create.
        #[arg(long)]
        count: usize,
        /// Handshakes (and deletes) in flight at once.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Hold the sessions this long; without it, until Ctrl-C.
        #[arg(long)]
        hold_secs: Option<u64>,
        /// PID of a node whose RSS is sampled before and after; repeat for several nodes.
        #[arg(long = "node-pid")]
        node_pids: Vec<u32>,
        /// The cluster's Redis: report the memory of a sample of the sessions.
        #[arg(long)]
        redis_url: Option<String>,
        /// The cluster's `redis.key_prefix`.
        #[arg(long, default_value = "sb")]
        key_prefix: String,
        /// Sessions whose Redis keys are measured.
        #[arg(long, default_value_t = 200)]
        redis_sample: usize,
        /// Pause before the memory is sampled, in ms.
        #[arg(long, default_value_t = 2000)]
        settle_ms: u64,
        /// Limit on every request, in ms.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        report: Option<PathBuf>,
    },
    /// N sessions each holding an idle standalone GET stream; node RSS per stream.
    OpenStreams(OpenStreamsArgs),
    /// N clients resume a stream of E logged events on another node, all at once.
    ResumeStorm(ResumeStormArgs),
    /// Sampling round trips answered on the calling node vs. on the other node.
    Sampling(SamplingArgs),
}

fn write_report(path: Option<&PathBuf>, json: &impl serde::Serialize) -> Result<(), String> {
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

async fn main_inner(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::ServeAxum(args) => baseline::serve(Baseline::Axum, args).await,
        Command::ServeRmcp(args) => baseline::serve(Baseline::Rmcp, args).await,
        Command::ServeForward { serve, upstream } => {
            baseline::serve(Baseline::Forward(upstream), serve).await
        }
        Command::Compare(args) => compare(args).await,
        Command::OpenStreams(args) => args.main().await,
        Command::ResumeStorm(args) => args.main().await,
        Command::Sampling(args) => args.main().await,
        Command::Run {
            urls,
            clients,
            duration_secs,
            tool,
            args,
            timeout_ms,
            report,
        } => {
            let args = serde_json::from_str(&args).map_err(|e| format!("--args: {e}"))?;
            let cfg = RunConfig {
                urls,
                clients: clients.max(1),
                duration: Duration::from_secs(duration_secs),
                tool,
                args,
                request_timeout: Duration::from_millis(timeout_ms),
            };
            let r = run_load(cfg).await.map_err(|e| e.to_string())?;
            println!("{}", r.line());
            println!("errors_by_kind: {:?}", r.errors_by_kind);
            write_report(report.as_ref(), &r)
        }
        Command::IdleSessions {
            urls,
            count,
            concurrency,
            hold_secs,
            node_pids,
            redis_url,
            key_prefix,
            redis_sample,
            settle_ms,
            timeout_ms,
            report,
        } => {
            let cfg = IdleConfig {
                urls,
                count,
                concurrency,
                request_timeout: Duration::from_millis(timeout_ms),
                node_pids,
                redis_url,
                key_prefix,
                redis_sample,
                settle: Duration::from_millis(settle_ms),
            };
            let r = idle_sessions(cfg, |r| async move {
                println!(
                    "created={}/{} sessions_per_sec={:.1} handshake_p50={:.3}ms p99={:.3}ms errors={}",
                    r.created, r.count, r.sessions_per_sec, r.handshake_ms.p50, r.handshake_ms.p99, r.errors
                );
                if let Some(m) = &r.node_rss {
                    println!(
                        "node_rss_kib before={:?} after={:?} per_session_kib={:.3}",
                        m.before_kib, m.after_kib, m.per_item_kib
                    );
                }
                if let Some(m) = &r.redis_memory {
                    println!(
                        "redis bytes_per_session={:.1} (keys {:.1} + index {:.1}; {} sessions sampled) used_memory_delta_per_session={:.1}",
                        m.bytes_per_session, m.keys_bytes_per_session, m.index_bytes_per_session,
                        m.sampled_sessions, m.used_memory_delta_per_session.unwrap_or(0.0)
                    );
                }
                match hold_secs {
                    Some(s) => {
                        println!("holding for {s} s");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(s)) => {}
                            _ = tokio::signal::ctrl_c() => {}
                        }
                    }
                    None => {
                        println!("holding until Ctrl-C");
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            })
            .await
            .map_err(|e| e.to_string())?;
            println!("deleted={} errors={}", r.deleted, r.errors);
            write_report(report.as_ref(), &r)
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match main_inner(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switchboard-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! `switchboard`: parse the command line, load the config, then print it (`config`) or run a node
//! (`serve`, the default) until SIGTERM or Ctrl-C. See the library crate for the parts.

use std::process::ExitCode;

use clap::Parser;
use switchboard::cli::{Cli, Command};
use switchboard::startup::{init_tracing, run, shutdown_signal};

/// jemalloc instead of the system allocator. Measured side by side on a loaded node (BENCHMARKS.md):
/// glibc's malloc and free took about 18% of its CPU samples; jemalloc and mimalloc both cut the
/// node's CPU per request by 15-30%, and jemalloc held 24.9 KiB per open idle SSE stream against
/// mimalloc's 32.2 KiB.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long the exit waits for the last spans to be exported (a collector that accepts
/// connections and never answers would hold it for the SDK's export timeout per batch).
const TRACE_FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let config = match switchboard::load(&cli.config.sources(env)) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("switchboard: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.command == Some(Command::Config) {
        let shown = config.redacted();
        if shown != config {
            println!(
                "# Secrets are shown as \"***\": set them again (file, SWITCHBOARD_* variable or flag)\n\
                 # before using this as a config."
            );
        }
        print!("{}", shown.to_toml());
        return ExitCode::SUCCESS;
    }
    let traces = init_tracing(&config);
    let shutdown = match shutdown_signal() {
        Ok(shutdown) => shutdown,
        Err(e) => {
            tracing::error!(error = %e, "cannot install signal handlers");
            return ExitCode::FAILURE;
        }
    };
    let code = match run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "node stopped");
            ExitCode::FAILURE
        }
    };
    if let Some(traces) = traces {
        traces.shutdown_within(TRACE_FLUSH_LIMIT).await;
    }
    code
}

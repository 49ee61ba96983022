//! `redis-benchmark` against the comparison's private Redis, for the command shapes the
//! Switchboard hot path uses: `EVALSHA` of a small script, and a pipeline of 3 commands per
//! round trip (`-P 3`), each at 50 connections. The Redis ceiling of the machine.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use super::procs::redis_query;

/// The script: two writes on one key, as the hot path's scripts do (small, one key).
const SCRIPT: &str = "redis.call('INCR', KEYS[1]) return redis.call('PEXPIRE', KEYS[1], 60000)";

/// One `redis-benchmark` figure.
#[derive(Debug, Clone, Serialize)]
pub struct RedisBench {
    /// What was run.
    pub name: String,
    /// The `redis-benchmark` command line.
    pub command: String,
    /// Requests (commands) per second, as `redis-benchmark` reports them.
    pub rps: f64,
    /// Its p50 latency in ms, when reported.
    pub p50_ms: Option<f64>,
}

/// The `rps` and `p50` of `redis-benchmark --csv` output (header line, then one line per test).
pub fn parse_csv(out: &str) -> Option<(f64, Option<f64>)> {
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = split_csv(lines.next()?);
    let values: Vec<String> = split_csv(lines.next()?);
    let col = |name: &str| header.iter().position(|h| h == name);
    let rps = values.get(col("rps").unwrap_or(1))?.parse().ok()?;
    let p50 = col("p50_latency_ms").and_then(|i| values.get(i)?.parse().ok());
    Some((rps, p50))
}

fn split_csv(line: &str) -> Vec<String> {
    line.split("\",\"")
        .map(|f| f.trim().trim_matches('"').to_owned())
        .collect()
}

/// Runs both benchmarks (`requests` commands each, at most 120 s each) with `program`,
/// pinned to core `pin` when set. Errors name what failed.
pub async fn run(
    program: &Path,
    redis: SocketAddr,
    requests: u64,
    pin: Option<usize>,
) -> Result<Vec<RedisBench>, String> {
    let sha: String = redis_query(redis, redis::cmd("SCRIPT").arg("LOAD").arg(SCRIPT))?;
    let evalsha = ["EVALSHA", &sha, "1", "sb-bench:k", "x"].map(String::from);
    let hset = ["HSET", "sb-bench:h", "f", "x"].map(String::from);
    let cases: [(&str, &str, &[String]); 2] = [
        ("EVALSHA, small script, 1 key", "1", &evalsha),
        ("HSET, 3 per round trip (-P 3)", "3", &hset),
    ];
    let mut out = Vec::new();
    for (name, pipeline, command) in cases {
        let mut args: Vec<String> = ["-h", "127.0.0.1", "-p", &redis.port().to_string()]
            .map(String::from)
            .to_vec();
        args.extend(
            [
                "-c",
                "50",
                "-n",
                &requests.to_string(),
                "-P",
                pipeline,
                "--csv",
            ]
            .map(String::from),
        );
        args.extend(command.iter().cloned());
        let mut cmd = match pin {
            Some(core) => {
                let mut c = tokio::process::Command::new("taskset");
                c.args(["-c", &core.to_string()]).arg(program);
                c
            }
            None => tokio::process::Command::new(program),
        };
        cmd.args(&args).kill_on_drop(true);
        let line = format!("{} {}", program.display(), args.join(" "));
        let result = tokio::time::timeout(Duration::from_secs(120), cmd.output())
            .await
            .map_err(|_| format!("{line}: no result within 120 s"))?
            .map_err(|e| format!("{line}: {e}"))?;
        let stdout = String::from_utf8_lossy(&result.stdout);
        let (rps, p50_ms) = parse_csv(&stdout).ok_or_else(|| {
            format!(
                "{line}: unexpected output: {stdout}{}",
                String::from_utf8_lossy(&result.stderr)
            )
        })?;
        out.push(RedisBench {
            name: name.into(),
            command: line,
            rps,
            p50_ms,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_redis_7_csv() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\"\n\
                   \"EVALSHA abc 1 k x\",\"81234.56\",\"0.600\",\"0.100\",\"0.551\"\n";
        assert_eq!(parse_csv(out), Some((81234.56, Some(0.551))));
        assert_eq!(
            parse_csv("\"test\",\"rps\"\n\"SET\",\"100.5\"\n"),
            Some((100.5, None))
        );
        assert_eq!(parse_csv(""), None);
    }
}

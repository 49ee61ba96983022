//! The `eviction` scenario (case C38): a standalone Redis with a small `maxmemory`
//! (`--maxmemory-mb`) under an evicting `maxmemory-policy` (`--eviction-policy`, default
//! `volatile-ttl`), and ballast that never expires (`SET chaos:ballast:<i>` of 1 KiB, no TTL).
//! With `--eviction-policy noeviction` the same pressure meets Redis refusing writes at its limit
//! (`OOM`): the nodes need no opt-in, and no refusal is checked.
//!
//! The protocol:
//! 1. Before any node runs, a node started without `redis.allow_eviction` must refuse: exit
//!    non-zero within [`REFUSAL_LIMIT`] with a log naming the policy,
//!    `maxmemory-policy noeviction` and `redis.allow_eviction` (else a schedule note: a miss).
//! 2. The nodes start with `redis.allow_eviction = true`; ballast fills Redis up to
//!    [`HEADROOM`] below its limit before the clients start.
//! 3. Each fault fills the rest: ballast until Redis evicts a key or reports `used_memory` at
//!    `maxmemory`, holds it there for `--restart-after` while the clients write (each of their
//!    writes then makes Redis evict), checking every 100 ms that each node's heartbeat key
//!    `sb:node:*` is there, then deletes that fault's ballast.
//!
//! Against the targets: whatever Redis evicts must not show up as a loss to a client.

use std::time::{Duration, Instant};

use redis::Connection;
use switchboard_tests::node::Node;
use switchboard_tests::redis_process::info_field;
use switchboard_tests::redis_server::{Persistence, RedisServer};
use switchboard_tests::temp::TempDir;

use crate::args::Args;
use crate::ops::Outcome;
use crate::primary::say;

/// How long the refused node may take to exit.
const REFUSAL_LIMIT: Duration = Duration::from_secs(20);

/// What the ballast leaves free between faults.
const HEADROOM: u64 = 4 << 20;

/// One ballast value.
const VALUE: usize = 1024;

/// Ballast keys written per pipeline.
const BATCH: usize = 64;

/// The most ballast keys one fill writes (a bound, should memory never be reached).
const MAX_KEYS: usize = 200_000;

/// Starts the scenario's Redis: no persistence, `maxmemory` and the evicting policy.
pub fn start_redis(args: &Args) -> RedisServer {
    let maxmemory = format!("{}mb", args.maxmemory_mb);
    RedisServer::start_with_args(
        Persistence::None,
        &[
            "--maxmemory",
            &maxmemory,
            "--maxmemory-policy",
            &args.eviction_policy,
        ],
    )
}

/// Whether the scenario's policy evicts (every one but `noeviction`): then the nodes need the
/// opt-in, and a node without it must refuse the Redis.
pub fn evicting(args: &Args) -> bool {
    args.eviction_policy != "noeviction"
}

/// Step 1: a node without the opt-in must refuse this Redis (an evicting policy). Under
/// `noeviction` there is nothing to refuse: the nodes run without the opt-in, and Redis refuses
/// writes at its limit (`OOM`) instead of evicting.
pub fn check_refusal(redis: &RedisServer, args: &Args, out: &mut Outcome) {
    if !evicting(args) {
        out.facts
            .push("noeviction: the nodes run without redis.allow_eviction".into());
        return;
    }
    let logs = TempDir::new("sb-chaos-refused");
    let started = Instant::now();
    let mut node = Node::spawn("refused", Some(&redis.url()), &[], logs.path());
    let code = node.wait_exit(REFUSAL_LIMIT);
    let log = node.log_tail(200);
    let policy = format!("maxmemory-policy {}", args.eviction_policy);
    let named = [
        policy.as_str(),
        "maxmemory-policy noeviction",
        "redis.allow_eviction",
    ]
    .iter()
    .all(|needle| log.contains(needle));
    match code {
        Some(code) if code != 0 && named => out.facts.push(format!(
            "a node without redis.allow_eviction exited with {code} after {} ms, naming \
             {policy}, `maxmemory-policy noeviction` and redis.allow_eviction",
            started.elapsed().as_millis()
        )),
        other => {
            node.kill9();
            let tail: String = log.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
            out.notes.push(format!(
                "a node without redis.allow_eviction did not refuse {policy} (exit {other:?}, \
                 log: {tail})"
            ));
        }
    }
}

/// The ballast writer.
pub struct Ballast {
    conn: Connection,
    maxmemory: u64,
    next: u64,
    heartbeats: usize,
}

impl Ballast {
    /// Connects to `redis` and fills it up to [`HEADROOM`] below its `maxmemory`; `nodes`
    /// heartbeat keys are expected during the faults.
    pub fn fill(redis: &RedisServer, args: &Args, nodes: usize) -> Result<Ballast, String> {
        let conn = redis::Client::open(redis.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .map_err(|e| format!("ballast connection: {e}"))?;
        let mut ballast = Ballast {
            conn,
            maxmemory: args.maxmemory_mb << 20,
            next: 0,
            heartbeats: nodes,
        };
        let target = ballast.maxmemory.saturating_sub(HEADROOM);
        let written = ballast.write_until(|used, _| used >= target)?;
        say(format!(
            "ballast: {written} keys, used_memory {} of {}",
            ballast.used()?,
            ballast.maxmemory
        ));
        Ok(ballast)
    }

    /// Step 3: one fault.
    pub fn pressure(&mut self, hold: Duration, out: &mut Outcome) {
        if let Err(e) = self.round(hold, out) {
            out.notes.push(format!("eviction: {e}"));
        }
    }

    /// Deletes every ballast key, the first fill's too (after the last fault: the clients'
    /// end-of-run log check reads and resumes their streams, which a full Redis under
    /// `noeviction` refused with 503).
    pub fn clear(&mut self, out: &mut Outcome) {
        let keys: Vec<String> = (0..self.next).map(key).collect();
        for chunk in keys.chunks(1000) {
            if let Err(e) = redis::cmd("DEL").arg(chunk).query::<i64>(&mut self.conn) {
                out.notes.push(format!("eviction: DEL ballast: {e}"));
                return;
            }
        }
    }

    fn round(&mut self, hold: Duration, out: &mut Outcome) -> Result<(), String> {
        let first = self.next;
        let before = self.evicted()?;
        let maxmemory = self.maxmemory;
        let written = self.write_until(|used, evicted| used >= maxmemory || evicted > before)?;
        let at_limit = self.evicted()?;
        say(format!(
            "ballast +{written} keys: at the limit, {} keys evicted by the fill",
            at_limit - before
        ));
        let (checks, missing) = self.watch_heartbeats(hold)?;
        let during = self.evicted()? - at_limit;
        let keys: Vec<String> = (first..self.next).map(key).collect();
        for chunk in keys.chunks(1000) {
            redis::cmd("DEL")
                .arg(chunk)
                .query::<i64>(&mut self.conn)
                .map_err(|e| format!("DEL ballast: {e}"))?;
        }
        out.facts.push(format!(
            "{written} ballast keys; evicted: {} by the fill, {during} while held at the limit; \
             heartbeat keys missing in {missing} of {checks} checks",
            at_limit - before
        ));
        Ok(())
    }

    /// Counts, every 100 ms for `hold`, the checks where fewer heartbeat keys than nodes were
    /// there.
    fn watch_heartbeats(&mut self, hold: Duration) -> Result<(u64, u64), String> {
        let end = Instant::now() + hold;
        let (mut checks, mut missing) = (0, 0);
        while Instant::now() < end {
            let (_, found): (String, Vec<String>) = redis::cmd("SCAN")
                .arg(0)
                .arg("MATCH")
                .arg("sb:node:*")
                .arg("COUNT")
                .arg(100_000)
                .query(&mut self.conn)
                .map_err(|e| format!("SCAN: {e}"))?;
            checks += 1;
            if found.len() < self.heartbeats {
                missing += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok((checks, missing))
    }

    /// Writes ballast in pipelines until `done(used_memory, evicted_keys)`; an `OOM` refusal
    /// (nothing left to evict) also ends it. Returns the keys written.
    fn write_until(&mut self, done: impl Fn(u64, u64) -> bool) -> Result<usize, String> {
        let value = vec![b'x'; VALUE];
        let mut written = 0;
        while written < MAX_KEYS {
            if done(self.used()?, self.evicted()?) {
                break;
            }
            let mut pipe = redis::pipe();
            for _ in 0..BATCH {
                pipe.cmd("SET").arg(key(self.next)).arg(&value).ignore();
                self.next += 1;
            }
            match pipe.query::<()>(&mut self.conn) {
                Ok(()) => written += BATCH,
                Err(e) if e.to_string().contains("OOM") => break,
                Err(e) => return Err(format!("ballast SET: {e}")),
            }
        }
        Ok(written)
    }

    fn info(&mut self, section: &str, field: &str) -> Result<u64, String> {
        let info: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut self.conn)
            .map_err(|e| format!("INFO {section}: {e}"))?;
        info_field(&info, field)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {field} in INFO {section}"))
    }

    fn used(&mut self) -> Result<u64, String> {
        self.info("memory", "used_memory")
    }

    /// `evicted_keys` of `INFO stats`.
    pub fn evicted(&mut self) -> Result<u64, String> {
        self.info("stats", "evicted_keys")
    }
}

/// Ballast key `i`.
fn key(i: u64) -> String {
    format!("chaos:ballast:{i}")
}

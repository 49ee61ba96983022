//! The Sentinel group's bounded waits: ready (every sentinel sees the whole group), a new
//! primary promoted, a data node back as a replica that every sentinel sees.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::SentinelGroup;
use crate::eventually::eventually_ok;
use crate::redis_process::is_primary;

/// A flat `[field, value, field, value, …]` reply (`SENTINEL MASTER`, one of `SENTINEL
/// REPLICAS`) as a map.
fn fields(flat: Vec<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut items = flat.into_iter();
    while let (Some(k), Some(v)) = (items.next(), items.next()) {
        map.insert(k, v);
    }
    map
}

impl SentinelGroup {
    /// Waits (at most `limit`) until [`Self::check_ready`] passes; panics with the last reason
    /// otherwise (the drop of a panicking group prints the logs).
    pub fn wait_ready(&self, limit: Duration) {
        eventually_ok("a ready Sentinel group", limit, || self.check_ready());
    }

    /// `Ok` when every running sentinel's `SENTINEL MASTER` says `flags` `master`,
    /// `num-slaves` the configured replicas (1 by default) and `num-other-sentinels` 2.
    ///
    /// # Errors
    /// The first sentinel and field that does not hold yet, as text.
    pub fn check_ready(&self) -> Result<(), String> {
        let name = self.master_name();
        let replicas = self.options().replicas.to_string();
        for sentinel in self.running_sentinels() {
            let master = self
                .query_port::<Vec<String>>(sentinel, &["SENTINEL", "MASTER", name])
                .map_err(|e| format!("sentinel:{sentinel}: {e}"))?;
            let master = fields(master);
            for (field, want) in [
                ("flags", "master"),
                ("num-slaves", replicas.as_str()),
                ("num-other-sentinels", "2"),
            ] {
                let got = master.get(field).map(String::as_str);
                if got != Some(want) {
                    return Err(format!(
                        "sentinel:{sentinel}: {field} is {got:?}, not {want}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Waits (at most `limit`) until every running sentinel names the same primary other than
    /// `old_primary`, and that node runs and answers `ROLE` as `master`; returns its port and the
    /// time from the kill (when `old_primary` was killed through [`Self::kill`]; otherwise from
    /// this call). Panics at the limit.
    pub fn wait_promotion(&self, old_primary: u16, limit: Duration) -> (u16, Duration) {
        let since = self
            .member(old_primary)
            .killed_at
            .unwrap_or_else(Instant::now);
        let what = format!("the sentinels to promote a replica of redis:{old_primary}");
        let new = eventually_ok(&what, limit, || {
            let mut named = Vec::new();
            for sentinel in self.running_sentinels() {
                let port = self
                    .primary_named_by(sentinel)
                    .map_err(|e| format!("sentinel:{sentinel}: {e}"))?;
                named.push(port);
            }
            named.sort_unstable();
            named.dedup();
            match named[..] {
                [port] if port != old_primary => {}
                _ => return Err(format!("the sentinels name {named:?}")),
            }
            let port = named[0];
            if !self.is_up(port) || !is_primary(port, self.password()) {
                return Err(format!("redis:{port} does not answer ROLE as master"));
            }
            Ok(port)
        });
        (new, since.elapsed())
    }

    /// Waits (at most `limit`) until the data node on `port` replicates `primary` with its link
    /// up and every running sentinel names `primary` and lists the node among its replicas with no `s_down`,
    /// `o_down` or `disconnected` flag; returns the time this took. A restarted former primary
    /// needs about 8–11 s: a sentinel waits 8 s (four hello periods) after seeing a replica
    /// report role master before it sends `REPLICAOF`, and it reads a replica's `INFO` every
    /// 10 s. Panics at the limit.
    pub fn wait_replica_of(&self, port: u16, primary: u16, limit: Duration) -> Duration {
        let started = Instant::now();
        let name = self.master_name();
        let what = format!("redis:{port} to be a replica of redis:{primary}");
        eventually_ok(&what, limit, || {
            for sentinel in self.running_sentinels() {
                if self.primary_named_by(sentinel).ok() == Some(port) {
                    return Err(format!(
                        "sentinel:{sentinel} names redis:{port} itself as primary: the sentinels \
                         failed over again, onto the restarted node"
                    ));
                }
            }
            let linked = self.linked_primary_of(port);
            if linked != Some(primary) {
                return Err(format!("redis:{port} has a link up to {linked:?}"));
            }
            for sentinel in self.running_sentinels() {
                let named = self.primary_named_by(sentinel).ok();
                if named != Some(primary) {
                    return Err(format!("sentinel:{sentinel} names {named:?} as primary"));
                }
                let replicas = self
                    .query_port::<Vec<Vec<String>>>(sentinel, &["SENTINEL", "REPLICAS", name])
                    .map_err(|e| format!("sentinel:{sentinel}: {e}"))?;
                let seen = replicas
                    .into_iter()
                    .map(fields)
                    .find(|r| r.get("port").map(String::as_str) == Some(port.to_string().as_str()));
                let flags = seen
                    .and_then(|r| r.get("flags").cloned())
                    .unwrap_or_default();
                let healthy = flags.split(',').any(|f| f == "slave")
                    && !flags
                        .split(',')
                        .any(|f| matches!(f, "s_down" | "o_down" | "disconnected"));
                if !healthy {
                    return Err(format!("sentinel:{sentinel} flags it {flags:?}"));
                }
            }
            Ok(())
        });
        started.elapsed()
    }
}

//! The cluster's bounded waits: healthy (every running node agrees the cluster is whole), a
//! killed primary's replica promoted, a restarted node back as a linked replica.

use std::time::{Duration, Instant};

use super::nodes::NodeLine;
use super::RedisCluster;
use crate::eventually::eventually_ok;
use crate::redis_process::{info_field, is_primary, linked_primary_of};

impl RedisCluster {
    /// Waits (at most `limit`) until [`Self::check_healthy`] passes; panics with the last
    /// reason otherwise (the drop of a panicking cluster prints the nodes' logs).
    pub fn wait_healthy(&self, limit: Duration) {
        eventually_ok("a healthy Redis Cluster", limit, || self.check_healthy());
    }

    /// `Ok` when every running node says `cluster_state:ok`, `cluster_slots_assigned:16384`
    /// and `cluster_known_nodes:<all nodes>`, its `CLUSTER NODES` agrees on the roles (see
    /// `check_view`: the configured number of primaries serve slots, every running node is a
    /// healthy primary or a replica of one), and — when it is a replica — it has
    /// `master_link_status:up`.
    ///
    /// # Errors
    /// The first node and condition that does not hold yet, as text.
    pub fn check_healthy(&self) -> Result<(), String> {
        self.check_states_ok()?;
        let total = self.options.node_count().to_string();
        for port in self.up_ports() {
            let info: String = self
                .query_port(port, &["CLUSTER", "INFO"])
                .map_err(|e| format!("redis:{port}: {e}"))?;
            for (field, want) in [
                ("cluster_slots_assigned", "16384"),
                ("cluster_known_nodes", total.as_str()),
            ] {
                let got = info_field(&info, field);
                if got != Some(want) {
                    return Err(format!("redis:{port}: {field} is {got:?}, not {want}"));
                }
            }
            let seen = self
                .nodes_seen_by(port)
                .map_err(|e| format!("redis:{port}: {e}"))?;
            self.check_view(port, &seen)?;
            let me = seen.iter().find(|n| n.has_flag("myself"));
            if me.is_some_and(|n| n.has_flag("slave"))
                && linked_primary_of(port, self.password()).is_none()
            {
                return Err(format!("redis:{port}: a replica whose link is not up"));
            }
        }
        Ok(())
    }

    /// `Ok` when the view of the node on `port` has the configured number of primaries serving
    /// slots and lists every running node without a `fail`, `fail?`, `handshake` or `noaddr`
    /// flag, as a primary serving slots or as a replica of such a primary.
    fn check_view(&self, port: u16, seen: &[NodeLine]) -> Result<(), String> {
        let serving = |n: &NodeLine| n.is_healthy_primary() && n.has_slots;
        let primaries = seen.iter().filter(|n| serving(n)).count();
        if primaries != self.options.primaries {
            return Err(format!("redis:{port} sees {primaries} primaries"));
        }
        for up in self.up_ports() {
            let line = seen
                .iter()
                .find(|n| n.port == up)
                .ok_or_else(|| format!("redis:{port} does not list redis:{up}"))?;
            let bad = ["fail", "fail?", "handshake", "noaddr"];
            if let Some(flag) = bad.iter().find(|f| line.has_flag(f)) {
                return Err(format!("redis:{port} flags redis:{up} {flag}"));
            }
            let replica_of_serving = line.has_flag("slave")
                && seen
                    .iter()
                    .any(|p| Some(&p.id) == line.primary_id.as_ref() && serving(p));
            if !serving(line) && !replica_of_serving {
                return Err(format!("redis:{port} sees redis:{up} as {:?}", line.flags));
            }
        }
        Ok(())
    }

    /// `Ok` when every running node answers `CLUSTER INFO` with `cluster_state:ok`.
    ///
    /// # Errors
    /// The first node that does not, as text.
    pub fn check_states_ok(&self) -> Result<(), String> {
        for port in self.up_ports() {
            let info: String = self
                .query_port(port, &["CLUSTER", "INFO"])
                .map_err(|e| format!("redis:{port}: {e}"))?;
            let state = info_field(&info, "cluster_state");
            if state != Some("ok") {
                return Err(format!("redis:{port}: cluster_state is {state:?}"));
            }
        }
        Ok(())
    }

    /// Waits (at most `limit`) until a replica of `old_primary` answers `ROLE` as `master` and every
    /// running node says `cluster_state:ok` again; returns that replica's port and the time
    /// from the kill (when `old_primary` was killed through [`Self::kill`]; otherwise from this
    /// call) to the moment both were seen.
    ///
    /// The candidates are the replicas `old_primary` had when it was killed (else those
    /// `CLUSTER NODES` lists now). Panics when it had none, or at the limit.
    pub fn wait_failover(&self, old_primary: u16, limit: Duration) -> (u16, Duration) {
        let (since, candidates) = match &self.node(old_primary).killed {
            Some(killed) => (killed.at, killed.replicas.clone()),
            None => (Instant::now(), self.replicas_of(old_primary)),
        };
        assert!(
            !candidates.is_empty(),
            "redis:{old_primary} had no replica to promote"
        );
        let what = format!("a replica of redis:{old_primary} ({candidates:?}) promoted");
        let new = eventually_ok(&what, limit, || {
            let promoted = candidates
                .iter()
                .copied()
                .find(|&p| self.is_up(p) && is_primary(p, self.password()))
                .ok_or_else(|| "no candidate answers ROLE as master".to_owned())?;
            self.check_states_ok()?;
            Ok(promoted)
        });
        (new, since.elapsed())
    }

    /// Waits (at most `limit`) until the node on `port` is a replica with `master_link_status:up`
    /// and the cluster is healthy again ([`Self::check_healthy`]: every running node sees it as
    /// a replica of a serving primary); returns the port of its primary and the time this took.
    /// Panics at the limit.
    pub fn wait_rejoined(&self, port: u16, limit: Duration) -> (u16, Duration) {
        let started = Instant::now();
        let what = format!("redis:{port} back as a linked replica");
        let primary = eventually_ok(&what, limit, || {
            let primary = linked_primary_of(port, self.password())
                .ok_or_else(|| format!("redis:{port} is no linked replica yet"))?;
            self.check_healthy()?;
            Ok(primary)
        });
        (primary, started.elapsed())
    }
}

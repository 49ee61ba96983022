//! A network namespace (`ip netns`, needs root) joined to the test's own namespace by two veth
//! pairs, so that a node running in it can be cut off from Redis while its clients still reach
//! it. With the [`Layout`] `net` of `10.231`:
//!
//! - the Redis link: `10.231.1.1` (our side) ↔ `10.231.1.2` (in the namespace); the cluster's
//!   Redis also binds `10.231.1.1` ([`Netns::add_node`]);
//! - the client link: `10.231.2.1` ↔ `10.231.2.2`; the node listens on `10.231.2.2` and clients
//!   (and HAProxy) reach it there.
//!
//! Cutting the Redis link sets the namespace's end down (its routes go with it); restoring sets it
//! up again. Dropping the namespace deletes it, and both veth pairs with it.
//!
//! Each user of a namespace has its own [`Layout`] (names and subnet), so that runs of them in
//! parallel (the chaos binary's partition scenario, `tests/partition_leases.rs`) cannot collide;
//! the names also carry the process id.

use std::process::Command;

use crate::cluster::Cluster;
use crate::node::Place;
use crate::ports::free_port;

/// The names and addresses of one kind of namespace.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// The namespace is `<name><pid>`.
    pub name: &'static str,
    /// The veth interfaces are `<links>r<pid>h` / `<links>r<pid>n` (Redis link) and
    /// `<links>c<pid>h` / `<links>c<pid>n` (client link): at most 15 characters, so at most 3 here.
    pub links: &'static str,
    /// The first two octets: the Redis link is `<net>.1.0/24`, the client link `<net>.2.0/24`.
    pub net: &'static str,
}

/// The chaos binary's partition scenario: `sbchaos<pid>`, `10.231.x`.
pub const CHAOS: Layout = Layout {
    name: "sbchaos",
    links: "sb",
    net: "10.231",
};

impl Layout {
    /// Our end of the Redis link (`<net>.1.1`), where Redis also listens.
    pub fn redis_side(&self) -> String {
        format!("{}.1.1", self.net)
    }

    /// The node's address on the client link (`<net>.2.2`).
    pub fn node_host(&self) -> String {
        format!("{}.2.2", self.net)
    }
}

/// A namespace with its two links, deleted on drop.
pub struct Netns {
    name: String,
    layout: Layout,
    redis_link: String,
}

/// Runs `ip <args>`; the error names the command and what it printed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// Whether this process may create network namespaces: root, with `ip netns` working.
pub fn can_make_netns() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    root && Command::new("ip")
        .args(["netns", "list"])
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Netns {
    /// Creates the namespace `<layout.name><pid>` and its two links, up.
    ///
    /// # Errors
    /// An `ip` command failed (not root, no `iproute2`, or the names or addresses are taken).
    pub fn create(layout: Layout) -> Result<Netns, String> {
        let pid = std::process::id() % 100_000;
        let name = format!("{}{pid}", layout.name);
        let links = layout.links;
        ip(&["netns", "add", &name])?;
        // From here on, drop deletes the namespace (and the links moved into it) on any error.
        let ns = Netns {
            name,
            layout,
            redis_link: format!("{links}r{pid}n"),
        };
        let net = layout.net;
        ns.link(
            &format!("{links}r{pid}h"),
            &ns.redis_link,
            &format!("{net}.1"),
        )?;
        ns.link(
            &format!("{links}c{pid}h"),
            &format!("{links}c{pid}n"),
            &format!("{net}.2"),
        )?;
        ns.exec(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A veth pair `ours` ↔ `theirs` (moved into the namespace), `<net>.1/24` ↔ `<net>.2/24`.
    fn link(&self, ours: &str, theirs: &str, net: &str) -> Result<(), String> {
        ip(&["link", "add", ours, "type", "veth", "peer", "name", theirs])?;
        ip(&["link", "set", theirs, "netns", &self.name])?;
        ip(&["addr", "add", &format!("{net}.1/24"), "dev", ours])?;
        ip(&["link", "set", ours, "up"])?;
        self.exec(&["addr", "add", &format!("{net}.2/24"), "dev", theirs])?;
        self.exec(&["link", "set", theirs, "up"])
    }

    /// `ip netns exec <name> ip <args>`.
    fn exec(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["netns", "exec", &self.name, "ip"];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// The namespace's name (for `ip netns exec`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its names and addresses.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Cuts (`false`) or restores (`true`) the Redis link.
    ///
    /// # Errors
    /// The `ip` command failed.
    pub fn set_redis_link(&self, up: bool) -> Result<(), String> {
        let state = if up { "up" } else { "down" };
        self.exec(&["link", "set", &self.redis_link, state])
    }

    /// Makes the cluster's (standalone) Redis listen on our end of the Redis link too, and starts
    /// one more node of `cluster` inside the namespace, listening on the client link
    /// ([`Layout::node_host`]) and reaching Redis over the Redis link; returns its index once it
    /// is ready.
    ///
    /// # Errors
    /// Redis refused the `CONFIG SET`s.
    pub fn add_node(&self, cluster: &mut Cluster) -> Result<usize, String> {
        let redis = cluster.redis();
        // Protected mode refuses every non-loopback client of a Redis without a password.
        redis
            .query::<()>(&["CONFIG", "SET", "protected-mode", "no"])
            .map_err(|e| format!("CONFIG SET protected-mode no: {e}"))?;
        let side = self.layout.redis_side();
        let bind = format!("127.0.0.1 {side}");
        redis
            .query::<()>(&["CONFIG", "SET", "bind", &bind])
            .map_err(|e| format!("CONFIG SET bind {bind}: {e}"))?;
        let url = format!("redis://{side}:{}/", redis.port());
        let place = Place {
            host: self.layout.node_host(),
            netns: Some(self.name.clone()),
            program: None,
            env: Vec::new(),
        };
        Ok(cluster.add_node(&place, free_port(), &url))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

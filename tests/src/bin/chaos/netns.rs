//! The partition scenario's network: a namespace (`ip netns`, needs root) joined to the test's
//! own namespace by two veth pairs, so one link can be cut without the other.
//!
//! - the Redis link: `10.231.1.1` (our side) ↔ `10.231.1.2` (in the namespace); Redis also
//!   binds `10.231.1.1`;
//! - the client link: `10.231.2.1` ↔ `10.231.2.2`; the node listens on `10.231.2.2` and HAProxy
//!   reaches it there.
//!
//! Cutting the Redis link sets the namespace's end down (its routes go with it); restoring sets it
//! up again. Dropping the namespace deletes it, and both veth pairs with it.

use std::process::Command;

/// Our end of the Redis link.
pub const REDIS_SIDE: &str = "10.231.1.1";
/// The node's address on the client link.
pub const NODE_HOST: &str = "10.231.2.2";

/// A namespace with its two links, deleted on drop.
pub struct Netns {
    name: String,
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

impl Netns {
    /// Creates the namespace `sbchaos<pid>` and its two links, up.
    ///
    /// # Errors
    /// An `ip` command failed (not root, no `iproute2`, or the names or addresses are taken).
    pub fn create() -> Result<Netns, String> {
        let pid = std::process::id() % 100_000;
        let name = format!("sbchaos{pid}");
        ip(&["netns", "add", &name])?;
        let ns = Netns {
            name: name.clone(),
            redis_link: format!("sbr{pid}n"),
        };
        ns.link(&format!("sbr{pid}h"), &ns.redis_link, "10.231.1")?;
        ns.link(&format!("sbc{pid}h"), &format!("sbc{pid}n"), "10.231.2")?;
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

    /// Cuts (`false`) or restores (`true`) the Redis link.
    ///
    /// # Errors
    /// The `ip` command failed.
    pub fn set_redis_link(&self, up: bool) -> Result<(), String> {
        let state = if up { "up" } else { "down" };
        self.exec(&["link", "set", &self.redis_link, state])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

//! A real DNS server for one test: Debian's `dnsmasq` on 127.0.0.1 and a free port, answering
//! only from a hosts file this test writes (no upstream servers, no system hosts file, TTL 0).
//! [`Dns::set`] rewrites the file and sends SIGHUP, on which dnsmasq reads it again. Started in
//! the foreground as a child, killed by PID on drop (see [`crate::daemon`]).

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::daemon::{find_binary, Daemon, READY_LIMIT};

/// The `dnsmasq` binary: `$DNSMASQ`, else `dnsmasq` on `PATH`, else Debian's `/usr/sbin/dnsmasq`.
/// `None` when none runs.
pub fn dnsmasq_binary() -> Option<String> {
    find_binary("DNSMASQ", "dnsmasq", "--version")
}

/// A running dnsmasq.
pub struct Dns {
    daemon: Daemon,
}

impl Dns {
    /// Starts dnsmasq answering `records` (name, address) and waits until it accepts TCP
    /// connections. Panics when dnsmasq is missing or never comes up (three free ports tried).
    pub fn start(records: &[(&str, IpAddr)]) -> Dns {
        let bin = dnsmasq_binary().expect("dnsmasq not found: apt-get install -y dnsmasq-base");
        let daemon = Daemon::start("dnsmasq", &bin, |port, dir| {
            let hosts = dir.join("hosts");
            std::fs::write(&hosts, hosts_file(records)).expect("write hosts");
            let mut args: Vec<String> = vec![
                "--keep-in-foreground".into(),
                "--conf-file=/dev/null".into(),
                "--no-resolv".into(),
                "--no-hosts".into(),
                format!("--addn-hosts={}", hosts.display()),
                "--listen-address=127.0.0.1".into(),
                "--bind-interfaces".into(),
                format!("--port={port}"),
                "--pid-file=".into(),
                "--local-ttl=0".into(),
                "--log-queries".into(),
                "--log-facility=-".into(),
            ];
            if is_root() {
                // Keep reading the hosts file in our temp dir after start-up.
                args.push("--user=root".into());
            }
            args
        });
        Dns { daemon }
    }

    /// `127.0.0.1:<port>`: the nameserver to configure.
    pub fn nameserver(&self) -> String {
        format!("127.0.0.1:{}", self.daemon.port())
    }

    /// Answers `records` from now on: the hosts file is rewritten, then SIGHUP, and this returns
    /// once dnsmasq logged that it read the file again (at most [`READY_LIMIT`]).
    pub fn set(&self, records: &[(&str, IpAddr)]) {
        let reads = |log: &str| log.matches("read ").count();
        let before = reads(&self.log());
        std::fs::write(self.daemon.path("hosts"), hosts_file(records)).expect("rewrite hosts");
        let pid = self.daemon.pid();
        let status = Command::new("kill")
            .arg("-HUP")
            .arg(pid.to_string())
            .status()
            .expect("kill -HUP");
        assert!(status.success(), "kill -HUP {pid}");
        let deadline = Instant::now() + READY_LIMIT;
        while reads(&self.log()) <= before {
            assert!(
                Instant::now() < deadline,
                "dnsmasq did not read its hosts file again:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGSTOP by PID: dnsmasq stops answering (queries wait unanswered, as with a
    /// nameserver that hangs) until [`Dns::resume`]. A stopped dnsmasq still dies on drop.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Sends SIGCONT by PID after [`Dns::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.daemon.pid();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// dnsmasq's own output (queries, reloads).
    pub fn log(&self) -> String {
        self.daemon.log()
    }
}

fn hosts_file(records: &[(&str, IpAddr)]) -> String {
    records
        .iter()
        .map(|(name, ip)| format!("{ip} {name}\n"))
        .collect()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

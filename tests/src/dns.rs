//! A real DNS server for one test: Debian's `dnsmasq` on 127.0.0.1 and a free port, answering
//! only from a hosts file this test writes (no upstream servers, no system hosts file, TTL 0).
//! [`Dns::set`] rewrites the file and sends SIGHUP, on which dnsmasq reads it again. Started in
//! the foreground as a child, killed by PID on drop.

use std::fs::File;
use std::net::{IpAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;
use crate::temp::TempDir;

/// How long dnsmasq may take to answer on its port.
const READY_LIMIT: Duration = Duration::from_secs(10);

/// The `dnsmasq` binary: `$DNSMASQ`, else `dnsmasq` on `PATH`, else Debian's `/usr/sbin/dnsmasq`.
/// `None` when none runs.
pub fn dnsmasq_binary() -> Option<String> {
    let candidates = [
        std::env::var("DNSMASQ").ok(),
        Some("dnsmasq".to_owned()),
        Some("/usr/sbin/dnsmasq".to_owned()),
    ];
    candidates.into_iter().flatten().find(|bin| {
        Command::new(bin)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// A running dnsmasq.
pub struct Dns {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
}

impl Dns {
    /// Starts dnsmasq answering `records` (name, address) and waits until it accepts TCP
    /// connections. Panics when dnsmasq is missing or never comes up (three free ports tried).
    pub fn start(records: &[(&str, IpAddr)]) -> Dns {
        let bin = dnsmasq_binary().expect("dnsmasq not found: apt-get install -y dnsmasq-base");
        for _attempt in 0..3 {
            let dir = TempDir::new("sb-dns");
            let port = free_port();
            let hosts = dir.path().join("hosts");
            std::fs::write(&hosts, hosts_file(records)).expect("write hosts");
            let log = File::create(dir.path().join("dnsmasq.log")).expect("dnsmasq log");
            let mut cmd = Command::new(&bin);
            cmd.arg("--keep-in-foreground")
                .arg("--conf-file=/dev/null")
                .arg("--no-resolv")
                .arg("--no-hosts")
                .arg(format!("--addn-hosts={}", hosts.display()))
                .arg("--listen-address=127.0.0.1")
                .arg("--bind-interfaces")
                .arg(format!("--port={port}"))
                .arg("--pid-file=")
                .arg("--local-ttl=0")
                .arg("--log-queries")
                .arg("--log-facility=-");
            if is_root() {
                // Keep reading the hosts file in our temp dir after start-up.
                cmd.arg("--user=root");
            }
            let child = cmd
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("clone log"))
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
            let mut dns = Dns {
                child: Some(child),
                port,
                dir,
            };
            if dns.wait_ready() {
                return dns;
            }
            dns.kill();
            eprintln!("dnsmasq did not come up on {port}:\n{}", dns.log());
        }
        panic!("dnsmasq did not come up on any free port");
    }

    /// `127.0.0.1:<port>`: the nameserver to configure.
    pub fn nameserver(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Answers `records` from now on: the hosts file is rewritten, then SIGHUP, and this returns
    /// once dnsmasq logged that it read the file again (at most [`READY_LIMIT`]).
    pub fn set(&self, records: &[(&str, IpAddr)]) {
        let reads = |log: &str| log.matches("read ").count();
        let before = reads(&self.log());
        std::fs::write(self.hosts_path(), hosts_file(records)).expect("rewrite hosts");
        let pid = self.child.as_ref().map(Child::id).expect("dnsmasq runs");
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

    /// dnsmasq's own output (queries, reloads).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dnsmasq.log")).unwrap_or_default()
    }

    fn hosts_path(&self) -> PathBuf {
        self.dir.path().join("hosts")
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + READY_LIMIT;
        while Instant::now() < deadline {
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited {
                return false;
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        false
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.kill();
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

//! Free loopback ports.

use std::net::TcpListener;

/// A port that was free on 127.0.0.1 a moment ago (bind to port 0, read it, release it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

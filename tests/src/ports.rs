//! Free loopback ports.

use std::net::TcpListener;

/// A port that was free on 127.0.0.1 a moment ago (bind to port 0, read it, release it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// `count` distinct ports `p`, each with `p + offset` free too, for servers that also listen on a
/// second port at a fixed offset (a Redis Cluster node's bus is `p + 10000`). Every port is held
/// bound until all are chosen, so no two picks collide (neither `p` nor `p + offset` of one pick
/// is a port of another), then all are released together. Panics when `offset` leaves no room
/// below 65536 or too many tries fail.
pub fn free_ports_with_offset(count: usize, offset: u16) -> Vec<u16> {
    let highest = u16::MAX - offset;
    let mut held = Vec::new();
    let mut ports = Vec::new();
    for _try in 0..count * 200 {
        if ports.len() == count {
            break;
        }
        let Ok(low) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let port = low.local_addr().expect("local addr").port();
        if port > highest {
            held.push(low);
            continue;
        }
        if let Ok(high) = TcpListener::bind(("127.0.0.1", port + offset)) {
            ports.push(port);
            held.push(low);
            held.push(high);
        }
    }
    assert_eq!(
        ports.len(),
        count,
        "found only {} ports p with p + {offset} free",
        ports.len()
    );
    drop(held);
    ports
}

/// `count` distinct ports that were free on 127.0.0.1 a moment ago: each is held bound until all
/// are chosen (so none repeats), then all are released together.
pub fn free_ports(count: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect()
}

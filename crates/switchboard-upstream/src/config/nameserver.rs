//! [`parse_nameserver`]: one entry of an http upstream's `nameservers` list. Read both by the
//! config checks (a bad entry is a load-time problem naming the upstream) and by the http
//! upstream that resolves its host through them (`http::endpoints`).

use std::net::{IpAddr, SocketAddr};

/// Reads a `nameservers` entry: an IP address (port 53) or `ip:port`. The error is a sentence
/// naming the entry.
pub fn parse_nameserver(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("nameserver `{text}` is not an IP address or `ip:port`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nameservers_are_ip_or_ip_and_port() {
        assert_eq!(
            parse_nameserver("127.0.0.1:5353").unwrap(),
            "127.0.0.1:5353".parse().unwrap()
        );
        assert_eq!(
            parse_nameserver("10.0.0.10").unwrap(),
            "10.0.0.10:53".parse().unwrap()
        );
        assert_eq!(
            parse_nameserver("[::1]:53").unwrap(),
            "[::1]:53".parse().unwrap()
        );
        assert!(parse_nameserver("dns.example").is_err());
    }
}

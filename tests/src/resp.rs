//! A small RESP2/RESP3 reply parser, enough to inspect Redis from tests (SCAN, DBSIZE, TTL, TYPE).

use std::io::{self, BufRead};

/// One Redis reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK` and other simple strings.
    Simple(String),
    /// `-ERR ...`.
    Error(String),
    /// `:42`.
    Integer(i64),
    /// `$n` bulk string; `None` for the null bulk string.
    Bulk(Option<String>),
    /// `*n` array (also RESP3 sets and pushes); `None` for the null array.
    Array(Option<Vec<Reply>>),
    /// RESP3 `_` null.
    Null,
}

impl Reply {
    /// The text of a simple or bulk string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Reply::Simple(s) | Reply::Bulk(Some(s)) => Some(s),
            _ => None,
        }
    }

    /// The value of an integer reply.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The elements of an array reply (empty for a null array).
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(Some(items)) => Some(items),
            Reply::Array(None) => Some(&[]),
            _ => None,
        }
    }
}

/// Reads exactly one reply from `r`.
pub fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at(1.min(line.len()));
    match kind {
        "+" => Ok(Reply::Simple(rest.to_owned())),
        "-" => Ok(Reply::Error(rest.to_owned())),
        ":" => Ok(Reply::Integer(parse_int(rest)?)),
        "_" => Ok(Reply::Null),
        "$" => read_bulk(r, parse_int(rest)?),
        "*" | "~" | ">" => {
            let n = parse_int(rest)?;
            if n < 0 {
                return Ok(Reply::Array(None));
            }
            let items = (0..n)
                .map(|_| read_reply(r))
                .collect::<io::Result<Vec<_>>>()?;
            Ok(Reply::Array(Some(items)))
        }
        other => Err(invalid(format!(
            "unexpected RESP type byte {other:?} in {line:?}"
        ))),
    }
}

fn read_bulk(r: &mut impl BufRead, len: i64) -> io::Result<Reply> {
    if len < 0 {
        return Ok(Reply::Bulk(None));
    }
    let mut buf = vec![0u8; len as usize + 2];
    r.read_exact(&mut buf)?;
    buf.truncate(len as usize);
    String::from_utf8(buf)
        .map(|s| Reply::Bulk(Some(s)))
        .map_err(|e| invalid(e.to_string()))
}

fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "redis closed the connection",
        ));
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

fn parse_int(s: &str) -> io::Result<i64> {
    s.parse()
        .map_err(|_| invalid(format!("bad RESP integer {s:?}")))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_scan_reply() {
        let raw = b"*2\r\n$1\r\n0\r\n*2\r\n$6\r\nsb:{a}\r\n$0\r\n\r\n";
        let reply = read_reply(&mut &raw[..]).unwrap();
        let items = reply.as_array().unwrap();
        assert_eq!(items[0].as_str(), Some("0"));
        let keys: Vec<_> = items[1]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(keys, ["sb:{a}", ""]);
    }

    #[test]
    fn parses_scalars_and_nulls() {
        assert_eq!(
            read_reply(&mut &b":12\r\n"[..]).unwrap(),
            Reply::Integer(12)
        );
        assert_eq!(read_reply(&mut &b"$-1\r\n"[..]).unwrap(), Reply::Bulk(None));
        assert_eq!(
            read_reply(&mut &b"*-1\r\n"[..]).unwrap(),
            Reply::Array(None)
        );
        assert_eq!(
            read_reply(&mut &b"-ERR x\r\n"[..]).unwrap(),
            Reply::Error("ERR x".into())
        );
    }
}

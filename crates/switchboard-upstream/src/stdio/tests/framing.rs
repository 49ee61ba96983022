//! The line reader and writer on their own.

use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, BufReader, ReadBuf};

use crate::stdio::framing::{decode, encode, truncate, Decoded, FrameError, LineReader};

/// A reader that hands out one byte per read, like a child writing byte by byte.
struct OneByte(Vec<u8>, usize);

impl AsyncRead for OneByte {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.1 < self.0.len() {
            let b = self.0[self.1];
            buf.put_slice(&[b]);
            self.1 += 1;
        }
        Poll::Ready(Ok(()))
    }
}

async fn lines(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, FrameError>> {
    let mut reader = LineReader::new(BufReader::new(OneByte(input.to_vec(), 0)), max);
    let mut out = Vec::new();
    loop {
        match reader.next_line().await {
            Ok(Some(line)) => out.push(Ok(line)),
            Ok(None) => return out,
            Err(e) => {
                out.push(Err(e));
                return out;
            }
        }
    }
}

#[tokio::test]
async fn multi_byte_characters_split_across_reads_survive() {
    let text = "naïve café — 日本語 🎉 Ω";
    let line = json!({"jsonrpc": "2.0", "id": 1, "result": {"text": text}});
    let bytes = format!("{}\n", serde_json::to_string(&line).unwrap());
    let got = lines(bytes.as_bytes(), 1024).await;
    assert_eq!(got.len(), 1);
    let Decoded::Json(value) = decode(got[0].as_ref().unwrap().clone()) else {
        panic!("not JSON");
    };
    assert_eq!(value["result"]["text"], text);
    assert!(!value.to_string().contains('\u{FFFD}'));
}

#[tokio::test]
async fn crlf_blank_lines_and_a_last_line_without_newline() {
    let got = lines(b"one\r\n\r\n   \n\ntwo\nthree", 100).await;
    let got: Vec<Vec<u8>> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        got,
        vec![b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]
    );
}

#[tokio::test]
async fn a_line_over_the_limit_is_an_error() {
    let got = lines(b"short\n0123456789abcdef\nnext\n", 10).await;
    assert_eq!(got[0].as_ref().unwrap(), b"short");
    assert_eq!(got[1].as_ref().unwrap_err(), &FrameError::TooLong(10));
    // Exactly at the limit is fine.
    assert_eq!(
        lines(b"0123456789\n", 10).await[0].as_ref().unwrap(),
        b"0123456789"
    );
}

#[test]
fn decoding_sorts_json_noise_and_bad_utf8() {
    assert!(matches!(decode(b"{\"a\":1}".to_vec()), Decoded::Json(_)));
    assert_eq!(
        decode(b"[WebSocket] Closed".to_vec()),
        Decoded::Noise("[WebSocket] Closed".into())
    );
    // A JSON array or scalar is not a message either.
    assert!(matches!(decode(b"[1,2]".to_vec()), Decoded::Noise(_)));
    assert!(matches!(decode(b"42".to_vec()), Decoded::Noise(_)));
    let bad = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"\xff\"}".to_vec();
    let Decoded::BadUtf8(Some(v)) = decode(bad) else {
        panic!("expected bad UTF-8 with JSON")
    };
    assert_eq!(v["id"], 7);
    assert_eq!(decode(b"\xfe\xff".to_vec()), Decoded::BadUtf8(None));
}

#[test]
fn written_messages_are_one_compact_line() {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), "2.0".into());
    m.insert(
        "params".into(),
        json!({"s": "a\nb\tc", "nested": {"x": [1, 2]}}),
    );
    let bytes = encode(&m);
    assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
    assert_eq!(bytes.last(), Some(&b'\n'));
    assert!(!bytes.contains(&b'\r') && !bytes.contains(&b'\t'));
    let back: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back["params"]["s"], "a\nb\tc");
    assert_eq!(back["jsonrpc"], "2.0");
}

#[test]
fn truncation_respects_character_boundaries() {
    assert_eq!(truncate("short", 10), "short");
    let cut = truncate("ééééé", 3);
    assert!(cut.starts_with('é') && cut.contains("10 bytes"), "{cut}");
}

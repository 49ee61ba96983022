//! The event reader over chunked bodies: WHATWG's rules (§9.2.6) as sse-stream and the
//! [`super::lines`] adapter apply them together, the size limit, and where sse-stream alone
//! differs from WHATWG.

use bytes::Bytes;
use futures::stream::{self, StreamExt};

use super::lines::{Lines, KEEP_LINE_BUFFER};
use super::*;

/// The default `max_message_bytes`, as a connection has it.
fn max() -> usize {
    usize::try_from(crate::config::DEFAULT_MAX_MESSAGE_BYTES).unwrap()
}

/// A body of these chunks, then its end.
fn body(chunks: &[&[u8]]) -> BoxStream<'static, Result<Bytes, String>> {
    let chunks: Vec<_> = chunks
        .iter()
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    stream::iter(chunks).boxed()
}

/// Every event of a body of these chunks (the reader must end without an error).
async fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut reader = EventReader::from_body(body(chunks), max());
    let mut events = Vec::new();
    while let Some(next) = reader.next().await {
        events.push(next.unwrap());
    }
    events
}

#[tokio::test]
async fn joins_data_lines_and_reads_fields() {
    let events =
        parse_all(&[b"event: message\nid: s1:4\nretry: 1500\ndata: {\"a\":\ndata: 1}\n\n"]).await;
    assert_eq!(
        events,
        vec![SseEvent {
            event: Some("message".into()),
            data: "{\"a\":\n1}".into(),
            id: Some("s1:4".into()),
            retry: Some(1500),
        }]
    );
    assert!(events[0].is_message());
}

#[tokio::test]
async fn handles_every_line_ending_and_splits_anywhere() {
    let text = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n";
    let whole = parse_all(&[text]).await;
    let datas: Vec<_> = whole.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(datas, ["one", "two", "three"]);
    for cut in 0..text.len() {
        let (a, b) = text.split_at(cut);
        assert_eq!(parse_all(&[a, b]).await, whole, "cut at {cut}");
    }
}

#[tokio::test]
async fn a_line_cut_over_several_reads_is_whole_and_leaves_nothing_behind() {
    let events = parse_all(&[b"data: ab", b"cd", b"ef\nid: 7\n", b"\ndata: x", b"\n\n"]).await;
    let datas: Vec<_> = events.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(datas, ["abcdef", "x"]);
    assert_eq!(events[0].id.as_deref(), Some("7"));
    assert_eq!(events[1].id, None);
}

/// The adapter's line buffer: freed after a long line, kept after a short one. (sse-stream's
/// own line buffer stays empty: it is only handed whole lines.)
#[tokio::test]
async fn a_long_cut_line_does_not_keep_its_buffer() {
    let long = vec![b'x'; 4 * KEEP_LINE_BUFFER];
    let mut long_event = b"data: ".to_vec();
    long_event.extend_from_slice(&long);
    let chunks: Vec<&[u8]> = vec![b"data: ", &long, b"\n\n", b"data: ab", b"c\n\n"];
    let mut lines = Lines::new(body(&chunks), max());
    assert_eq!(
        lines.next().await.unwrap().unwrap().len(),
        long_event.len() + 1
    );
    assert_eq!(
        lines.partial.capacity(),
        0,
        "the long line's buffer was kept"
    );
    assert_eq!(&lines.next().await.unwrap().unwrap()[..], b"\n");
    assert_eq!(&lines.next().await.unwrap().unwrap()[..], b"data: abc\n");
    assert!(
        lines.partial.capacity() > 0,
        "a short line's buffer is kept for the next one"
    );
    let events = parse_all(&chunks).await;
    assert_eq!(events[0].data.len(), long.len());
    assert_eq!(events[1].data, "abc");
}

#[tokio::test]
async fn a_byte_order_mark_cut_over_reads_is_skipped() {
    let text: &[u8] = b"\xEF\xBB\xBFdata: x\n\n";
    for cut in 1..3 {
        let events = parse_all(&[&text[..cut], &text[cut..]]).await;
        assert_eq!(events.len(), 1, "cut at {cut}: {events:?}");
        assert_eq!(events[0].data, "x");
    }
    let events = parse_all(&[b"", b"\xEF", b"\xBB", b"\xBF", b"data: y\n\n"]).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].data, "y");
    // Not a mark after all: the held byte is the start of the first line, whose field is
    // then not `data`.
    let events = parse_all(&[b"\xEF", b"data: z\n\n"]).await;
    assert!(events.iter().all(|e| e.data.is_empty()), "{events:?}");
}

#[tokio::test]
async fn an_empty_event_type_is_a_message() {
    let events = parse_all(&[b"event: tick\nevent:\ndata: {\"a\":1}\n\n"]).await;
    assert_eq!(events[0].event, None);
    assert!(events[0].is_message());
}

#[tokio::test]
async fn multibyte_characters_survive_a_split_read() {
    let text = "data: {\"t\":\"héllo → ✓\"}\n\n".as_bytes();
    let cut = text.iter().position(|&b| b == 0xE2).unwrap() + 1;
    let events = parse_all(&[&text[..cut], &text[cut..]]).await;
    assert_eq!(events[0].data, "{\"t\":\"héllo → ✓\"}");
}

#[tokio::test]
async fn comments_priming_events_and_bad_retry() {
    let events =
        parse_all(&[b"\xEF\xBB\xBF: keep-alive\n\nid: p0\ndata:\n\nretry: soon\ndata: x\n\n"])
            .await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].id.as_deref(), Some("p0"));
    assert_eq!(events[0].data, "");
    assert!(!events[0].is_message());
    assert_eq!(events[1].retry, None);
    let other = parse_all(&[b"event: endpoint\ndata: /m?x=1\n\n"]).await;
    assert!(!other[0].is_message());
}

/// WHATWG's rules where sse-stream alone differs: the last `event`/`id`/`retry` wins, an `id`
/// with NUL and a `retry` of anything but digits are ignored (an earlier valid one stays), a
/// line without a colon is a field with an empty value, unknown fields are ignored, invalid
/// UTF-8 is U+FFFD; an event with only `id` or `retry` is dispatched (priming).
#[tokio::test]
async fn whatwg_rules_sse_stream_alone_lacks() {
    let text = b"event: a\nevent: b\nid: 1\nid: 2\nid: 3\0\nretry: 10\nretry: +5\nretry:  7\n\
                 data: x\ndata\nfoo: bar\ndata: \xFF!\n\n";
    let events = parse_all(&[text]).await;
    assert_eq!(
        events,
        vec![SseEvent {
            event: Some("b".into()),
            data: "x\n\n\u{FFFD}!".into(),
            id: Some("2".into()),
            retry: Some(10),
        }]
    );
    let events = parse_all(&[b"retry: 3000\n\nid: 9\n\n"]).await;
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].retry, events[1].id.as_deref()),
        (Some(3000), Some("9"))
    );
}

/// What sse-stream 0.2 does on its own with those lines (measured, so a new version that
/// changes them is noticed): it refuses them with an error, keeps the first `event`, and reads
/// `retry: +5` as 5 and an empty `event` as `Some("")`.
#[tokio::test]
async fn sse_stream_alone_differs_from_whatwg() {
    async fn raw(text: &'static [u8]) -> Vec<Result<sse_stream::Sse, String>> {
        let chunks = stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(text))]);
        let events = sse_stream::SseStream::from_bytes_stream(chunks);
        events.map(|e| e.map_err(|e| e.to_string())).collect().await
    }
    let refused = [
        (
            &b"event: a\nevent: b\ndata: x\n\n"[..],
            "duplicated event line",
        ),
        (b"id: 1\nid: 2\ndata: x\n\n", "duplicated id line"),
        (b"data\n\n", "invalid line"),
        (b"foo: bar\n\n", "invalid line"),
    ];
    for (text, error) in refused {
        let got = raw(text).await;
        assert_eq!(got[0].as_ref().unwrap_err(), error, "{got:?}");
    }
    let got = raw(b"retry: soon\n\n").await;
    assert!(
        got[0].as_ref().unwrap_err().starts_with("int parse error"),
        "{got:?}"
    );
    let got = raw(b"data: \xFF\n\n").await;
    assert!(
        got[0].as_ref().unwrap_err().starts_with("utf8 parse error"),
        "{got:?}"
    );
    let got = raw(b"retry: +5\nevent:\n\n").await;
    let sse = got[0].as_ref().unwrap();
    assert_eq!((sse.retry, sse.event.as_deref()), (Some(5), Some("")));
}

/// An event over the limit ends the stream with an error and `over_limit`; so does a line
/// that never ends (after `max` bytes, not buffered further); comment lines do not count.
#[tokio::test]
async fn the_size_limit_holds_for_events_and_endless_lines() {
    let mut reader = EventReader::from_body(body(&[b"data: 12345\n\ndata: 1234\ndata: 5\n\n"]), 16);
    assert_eq!(reader.next().await.unwrap().unwrap().data, "12345");
    let e = reader.next().await.unwrap().unwrap_err();
    assert_eq!(e, "an SSE event exceeds 16 bytes");
    assert_eq!(reader.over_limit(), Some(16));
    assert!(reader.next().await.is_none(), "the stream ended there");

    let endless = stream::once(async { Ok(Bytes::from_static(b"data: ")) })
        .chain(stream::repeat_with(|| Ok(Bytes::from_static(b"xxxxxxxx"))));
    let mut reader = EventReader::from_body(endless.boxed(), 1024);
    assert!(reader.next().await.unwrap().is_err());
    assert_eq!(reader.over_limit(), Some(1024));

    let pings: Vec<&[u8]> = std::iter::repeat_n(&b": ping\n"[..], 100)
        .chain([&b"data: ok\n\n"[..]])
        .collect();
    let mut reader = EventReader::from_body(body(&pings), 16);
    assert_eq!(reader.next().await.unwrap().unwrap().data, "ok");
    assert_eq!(reader.over_limit(), None);
}

/// A failed connection is an error without `over_limit`.
#[tokio::test]
async fn a_body_error_is_not_over_the_limit() {
    let failing = stream::iter([
        Ok(Bytes::from_static(b"data: a\n\n")),
        Err("reset".to_owned()),
    ]);
    let mut reader = EventReader::from_body(failing.boxed(), 1024);
    assert_eq!(reader.next().await.unwrap().unwrap().data, "a");
    assert_eq!(reader.next().await.unwrap().unwrap_err(), "reset");
    assert_eq!(reader.over_limit(), None);
}

/// A comment longer than the limit, or a first line of exactly the limit after a byte-order
/// mark, passes whether it comes in one read or in many: where the reads end does not decide
/// (found by fuzzing, fuzz/corpus/sse_parser/crash-long-comment-cut-reads), and an endless
/// comment keeps only its colon.
#[tokio::test]
async fn the_size_limit_does_not_depend_on_where_reads_end() {
    let long = [&b": "[..], &[b'c'; 100][..], b"\ndata: ok\n\n"].concat();
    let bom = [&b"\xEF\xBB\xBF"[..], b"data:1234567890a\n\n"].concat();
    for text in [long, bom] {
        for step in [1, 3, 8, text.len()] {
            let chunks: Vec<&[u8]> = text.chunks(step).collect();
            let mut reader = EventReader::from_body(body(&chunks), 16);
            let first = reader.next().await.unwrap();
            assert!(first.is_ok(), "reads of {step}: {first:?}");
            assert_eq!(reader.over_limit(), None);
        }
    }
    let endless = stream::once(async { Ok(Bytes::from_static(b": ")) })
        .chain(stream::repeat_with(|| Ok(Bytes::from_static(b"xxxxxxxx"))).take(10_000));
    let mut lines = Lines::new(endless.boxed(), 16);
    while let Some(line) = lines.next().await {
        line.unwrap();
    }
    assert!(
        lines.partial.len() <= 1,
        "{} bytes kept",
        lines.partial.len()
    );
}

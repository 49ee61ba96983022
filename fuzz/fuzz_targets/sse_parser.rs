//! Fuzz target `sse_parser`: see `switchboard_fuzz::sse_parser`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchboard_fuzz::sse_parser(data));

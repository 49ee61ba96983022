//! Fuzz target `jsonrpc_envelope`: see `switchboard_fuzz::jsonrpc_envelope`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchboard_fuzz::jsonrpc_envelope(data));

//! Fuzz target `param_headers`: see `switchboard_fuzz::param_headers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchboard_fuzz::param_headers(data));

//! Fuzz target `mrtr_state`: see `switchboard_fuzz::mrtr_state`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchboard_fuzz::mrtr_state(data));

//! Fuzz target `event_id`: see `switchboard_fuzz::event_id`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchboard_fuzz::event_id(data));

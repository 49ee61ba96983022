//! Fuzz target `config_loader`: see `switchboard_fuzz::config_loader`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| switchboard_fuzz::config_loader(data));

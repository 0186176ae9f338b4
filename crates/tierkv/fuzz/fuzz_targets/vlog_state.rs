//! libFuzzer target: see `tierkv_fuzz::drivers::vlog_state` for what it checks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv_fuzz::drivers::vlog_state(data));

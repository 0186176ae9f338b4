//! libFuzzer target: see `tierkv_fuzz::drivers::sst_block` for what it checks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv_fuzz::drivers::sst_block(data));

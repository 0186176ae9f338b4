//! libFuzzer target: see `tierkv_fuzz::drivers::hot_partitions` for what it checks.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tierkv_fuzz::drivers::hot_partitions(data));

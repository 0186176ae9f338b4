//! Fuzz drivers for tierkv's decoders: one function per libFuzzer target, shared with the
//! stable regression test (`crates/tierkv/tests/fuzz_regressions.rs` includes `drivers.rs`).

pub mod drivers;

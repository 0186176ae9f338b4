//! Helpers shared by the fast-tier room tests (`flush_reserve`, `replicas`).

use std::time::{Duration, Instant};

/// The key of record `i`: `key` and eight digits.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// 1000 bytes determined by `i`.
pub fn value(i: u32) -> Vec<u8> {
    (0..1000u32)
        .map(|j| (i.wrapping_mul(31) ^ j.wrapping_mul(7)) as u8)
        .collect()
}

/// Polls `f` every 50 ms until it returns `Some` or `limit` passes.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

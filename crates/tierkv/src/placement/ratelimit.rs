//! A token bucket for background writes to the fast tier, so WAL writes keep priority.
//!
//! Flush, compaction and migration writes to tier 0 go out in requests of at most
//! [`REQUEST_BYTES`], each taking its bytes from the bucket first. The rate can change at any
//! time (the head thread lowers it while foreground requests flow and lifts it when they stop);
//! `None` means unlimited, which costs one atomic load per request.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Largest write a background job issues to a rate-limited tier.
pub const REQUEST_BYTES: usize = 64 << 10;

/// Rate value meaning "no limit".
const UNLIMITED: u64 = 0;

/// A shared token bucket; see the module docs.
#[derive(Debug)]
pub struct RateLimiter {
    /// Bytes per second, or `UNLIMITED`.
    rate: AtomicU64,
    bucket: Mutex<Bucket>,
    /// Time spent waiting for tokens, for stats.
    waited_micros: AtomicU64,
}

#[derive(Debug)]
struct Bucket {
    /// Bytes that may be written now (negative: owed).
    tokens: f64,
    refilled: Instant,
}

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter {
            rate: AtomicU64::new(UNLIMITED),
            bucket: Mutex::new(Bucket {
                tokens: 0.0,
                refilled: Instant::now(),
            }),
            waited_micros: AtomicU64::new(0),
        }
    }
}

impl RateLimiter {
    /// Sets the rate in bytes per second (`None`: unlimited).
    pub fn set_rate(&self, bytes_per_sec: Option<u64>) {
        let rate = bytes_per_sec.map_or(UNLIMITED, |r| r.max(1));
        self.rate.store(rate, Ordering::Release);
    }

    /// The current rate, `None` if unlimited.
    pub fn rate(&self) -> Option<u64> {
        match self.rate.load(Ordering::Acquire) {
            UNLIMITED => None,
            r => Some(r),
        }
    }

    /// Microseconds writers have waited for tokens.
    pub fn waited_micros(&self) -> u64 {
        self.waited_micros.load(Ordering::Relaxed)
    }

    /// Takes `bytes` from the bucket, sleeping until the rate allows them.
    pub fn acquire(&self, bytes: usize) {
        let Some(rate) = self.rate() else {
            return;
        };
        let wait = self.take(bytes as f64, rate as f64, Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
            self.waited_micros
                .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
        }
    }

    /// Books `bytes` at `rate` as of `now`; returns how long the caller must wait first.
    fn take(&self, bytes: f64, rate: f64, now: Instant) -> Duration {
        let mut b = self.bucket.lock();
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.refilled = now;
        // NB: at most a tenth of a second of burst accumulates while idle.
        b.tokens = (b.tokens + elapsed * rate).min(rate / 10.0);
        b.tokens -= bytes;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_never_waits() {
        let r = RateLimiter::default();
        assert_eq!(r.rate(), None);
        r.acquire(1 << 30);
        assert_eq!(r.waited_micros(), 0);
    }

    #[test]
    fn bookings_pace_to_the_rate() {
        let r = RateLimiter::default();
        r.set_rate(Some(1 << 20));
        let t0 = Instant::now();
        // A fresh bucket holds (almost) nothing; each 64 KiB then costs 1/16 s.
        let mut waits = Vec::new();
        for i in 0..4 {
            waits.push(r.take(65536.0, (1 << 20) as f64, t0 + Duration::from_millis(i)));
        }
        assert!(waits[3] > Duration::from_millis(180), "{waits:?}");
        // After a long idle stretch, at most a tenth of a second's worth is saved up.
        let later = t0 + Duration::from_secs(10);
        assert!(r.take(100_000.0, (1 << 20) as f64, later).is_zero());
        assert!(!r.take(100_000.0, (1 << 20) as f64, later).is_zero());
        assert!(waits.windows(2).all(|w| w[0] <= w[1]), "{waits:?}");
        r.set_rate(None);
        assert_eq!(r.rate(), None);
    }
}

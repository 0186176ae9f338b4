//! Lending the fast tier's flush reserve while writes are quiet (`placement = auto`).
//!
//! The flush reserve (`Options::flush_reserve`) keeps room on tier 0 that only memtable
//! flushes may fill, so a write burst finds the upper levels' room free. On a read-mostly
//! workload that room sits empty: a 95%-read run in the lab flushed twice in twenty seconds
//! while 112 MiB of the fast tier held nothing and deep tables were read from the throttled
//! capacity tier. Holding 32 MiB instead raised the fast tier's share of table reads from 29% to
//! 32% and cut the run's p99 read latency by a fifth (BENCHMARKS.md).
//!
//! [`ReserveLender`] decides how much of the reserve to hold from the WAL's write rate: all of
//! it while writes flow; only `floor` (room for two flushes) once writes have been quiet for
//! [`QUIET_HOLD`]. Quiet means a memtable takes longer than [`QUIET_FILL`] to fill: long enough
//! for migration to move a table down before the next flush needs its room. Writes picking up
//! (a memtable filling within [`BUSY_FILL`]) take the whole reserve back at the next reading.
//! Taking it back costs no I/O: the placement budget shrinks, the controller sees the tier past
//! its watermark, and migration moves the coldest tables down, while flushes, which may use
//! the reserve, still find room.
//!
//! Pure policy, like `autoplace`: readings in, a reserve out; time comes in as `Instant`s.

use std::time::{Duration, Instant};

/// Writes count as quiet while a memtable would take longer than this to fill.
pub const QUIET_FILL: Duration = Duration::from_secs(5);
/// Writes count as busy again once a memtable would fill faster than this (the gap to
/// [`QUIET_FILL`] keeps a rate near the threshold from lending and reclaiming in turn).
pub const BUSY_FILL: Duration = Duration::from_millis(2500);
/// How long writes must stay quiet before the reserve is lent.
pub const QUIET_HOLD: Duration = Duration::from_secs(5);

/// Decides how much of tier 0's flush reserve to hold.
#[derive(Debug, Clone)]
pub struct ReserveLender {
    full: u64,
    floor: u64,
    quiet_below: f64,
    busy_above: f64,
    quiet_since: Option<Instant>,
    lending: bool,
}

impl ReserveLender {
    /// A lender of a reserve of `full` bytes for memtables of `write_buffer_size` bytes. It
    /// always holds two memtables' worth (or `full`, if smaller).
    pub fn new(full: u64, write_buffer_size: u64) -> ReserveLender {
        let per_sec = |fill: Duration| write_buffer_size as f64 / fill.as_secs_f64();
        ReserveLender {
            full,
            floor: (2 * write_buffer_size).min(full),
            quiet_below: per_sec(QUIET_FILL),
            busy_above: per_sec(BUSY_FILL),
            quiet_since: None,
            lending: false,
        }
    }

    /// The reserve to hold after a reading of the WAL's bytes/s at `now`.
    pub fn step(&mut self, wal_bytes_per_sec: f64, now: Instant) -> u64 {
        if wal_bytes_per_sec > self.busy_above {
            self.lending = false;
        }
        if wal_bytes_per_sec < self.quiet_below {
            let since = *self.quiet_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= QUIET_HOLD {
                self.lending = true;
            }
        } else {
            self.quiet_since = None;
        }
        self.held()
    }

    /// The reserve held now.
    pub fn held(&self) -> u64 {
        if self.lending {
            self.floor
        } else {
            self.full
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn secs(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    #[test]
    fn lends_after_quiet_hold_and_reclaims_at_once() {
        let t0 = Instant::now();
        let mut l = ReserveLender::new(112 * MIB, 16 * MIB);
        let quiet = 1.0 * MIB as f64; // a memtable every 16 s
        assert_eq!(
            l.step(quiet, t0),
            112 * MIB,
            "holds until quiet long enough"
        );
        assert_eq!(l.step(quiet, secs(t0, 4.9)), 112 * MIB);
        assert_eq!(
            l.step(quiet, secs(t0, 5.0)),
            32 * MIB,
            "lends all but two memtables"
        );
        let burst = 20.0 * MIB as f64;
        assert_eq!(
            l.step(burst, secs(t0, 5.1)),
            112 * MIB,
            "a burst takes it back"
        );
        assert_eq!(l.step(quiet, secs(t0, 5.2)), 112 * MIB, "and waits again");
        assert_eq!(l.step(quiet, secs(t0, 10.2)), 32 * MIB);
    }

    #[test]
    fn a_rate_between_the_thresholds_changes_nothing() {
        let t0 = Instant::now();
        let mut l = ReserveLender::new(112 * MIB, 16 * MIB);
        let between = 4.0 * MIB as f64; // a memtable every 4 s: neither quiet nor busy
        for s in 0..20 {
            assert_eq!(
                l.step(between, secs(t0, s as f64)),
                112 * MIB,
                "never lends"
            );
        }
        for s in 20..26 {
            l.step(0.0, secs(t0, s as f64));
        }
        assert_eq!(l.held(), 32 * MIB);
        for s in 26..40 {
            assert_eq!(
                l.step(between, secs(t0, s as f64)),
                32 * MIB,
                "keeps lending"
            );
        }
    }

    #[test]
    fn a_small_reserve_is_never_lent_below_itself() {
        let t0 = Instant::now();
        let mut l = ReserveLender::new(16 * MIB, 16 * MIB);
        l.step(0.0, t0);
        assert_eq!(l.step(0.0, secs(t0, 6.0)), 16 * MIB);
    }
}

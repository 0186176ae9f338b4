//! Lending the fast tier's flush reserve to replicas while writes are quiet (`placement =
//! auto`).
//!
//! The flush reserve (`Options::flush_reserve`) keeps room on tier 0 that only memtable
//! flushes may fill, so a write burst finds the upper levels' room free. On a read-mostly
//! workload that room sits empty, flushed into rarely, while deep tables are read from the
//! throttled capacity tier (BENCHMARKS.md).
//!
//! [`ReserveLender`] decides how much of the reserve to hold from what writes do: all of it
//! while writes flow; only `floor` (room for two flushes) once writes have been quiet for
//! [`QUIET_HOLD`]. Quiet means no write stalled and a memtable takes longer than [`QUIET_FILL`]
//! to fill. Writes picking up (a memtable filling within [`BUSY_FILL`], or a write stall) take
//! the whole reserve back at the next reading. A stall counts as busy because a stalled writer
//! is slow only because it is held back: a load short of compaction dipped under the quiet
//! rate for seconds at a time.
//!
//! What is lent is only ever used by replicas (`db::replica`), which give it back at once, so
//! an idle pause may lend too. (Lent to tables, it would take migration seconds to give back:
//! room lent in the pause after a load fills with deep tables, and the next write burst finds
//! L1's room taken and its writes wait.)
//!
//! Pure policy, like `auto`: readings in, a reserve out; time comes in as `Instant`s.

use std::time::{Duration, Instant};

/// Writes count as quiet while a memtable would take longer than this to fill.
pub const QUIET_FILL: Duration = Duration::from_secs(5);
/// Writes count as busy again once a memtable would fill faster than this (the gap to
/// [`QUIET_FILL`] keeps a rate near the threshold from lending and reclaiming in turn).
pub const BUSY_FILL: Duration = Duration::from_millis(2500);
/// How long writes must stay quiet before the reserve is lent (beyond the monitor's one-second
/// window the rate is read over). Short, because on a read-mostly run each second without the
/// loan is a second with less of the tree on the fast tier.
pub const QUIET_HOLD: Duration = Duration::from_secs(2);

/// What the lender reads every sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activity {
    /// The WAL's bytes/s over the monitor's window.
    pub wal_bytes_per_sec: f64,
    /// A write stalled since the last sample.
    pub stalled: bool,
}

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

    /// The reserve to hold after reading `a` at `now`.
    pub fn step(&mut self, a: Activity, now: Instant) -> u64 {
        if a.stalled || a.wal_bytes_per_sec > self.busy_above {
            self.lending = false;
        }
        if !a.stalled && a.wal_bytes_per_sec < self.quiet_below {
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

    /// `wal_mib` MiB/s of WAL writes, no stall.
    fn reads(wal_mib: f64) -> Activity {
        Activity {
            wal_bytes_per_sec: wal_mib * MIB as f64,
            stalled: false,
        }
    }

    fn lender() -> ReserveLender {
        ReserveLender::new(112 * MIB, 16 * MIB)
    }

    #[test]
    fn lends_after_quiet_hold_and_reclaims_at_once() {
        let t0 = Instant::now();
        let mut l = lender();
        let quiet = reads(1.0); // a memtable every 16 s
        assert_eq!(
            l.step(quiet, t0),
            112 * MIB,
            "holds until quiet long enough"
        );
        assert_eq!(l.step(quiet, secs(t0, 1.9)), 112 * MIB);
        assert_eq!(
            l.step(quiet, secs(t0, 2.0)),
            32 * MIB,
            "lends all but two memtables"
        );
        assert_eq!(
            l.step(reads(20.0), secs(t0, 2.1)),
            112 * MIB,
            "a burst takes it back"
        );
        assert_eq!(l.step(quiet, secs(t0, 2.2)), 112 * MIB, "and waits again");
        assert_eq!(l.step(quiet, secs(t0, 4.2)), 32 * MIB);
    }

    #[test]
    fn a_rate_between_the_thresholds_changes_nothing() {
        let t0 = Instant::now();
        let mut l = lender();
        let between = reads(4.0); // a memtable every 4 s: neither quiet nor busy
        for s in 0..20 {
            assert_eq!(
                l.step(between, secs(t0, s as f64)),
                112 * MIB,
                "never lends"
            );
        }
        for s in 20..26 {
            l.step(reads(0.0), secs(t0, s as f64));
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
    fn an_idle_pause_lends_and_stalls_never_do() {
        let t0 = Instant::now();
        let mut l = lender();
        let held_back = Activity {
            stalled: true,
            ..reads(1.0)
        };
        for s in 0..20 {
            assert_eq!(
                l.step(held_back, secs(t0, s as f64)),
                112 * MIB,
                "stalled writes are not quiet"
            );
        }
        for s in 20..=23 {
            l.step(reads(0.0), secs(t0, s as f64));
        }
        assert_eq!(l.held(), 32 * MIB, "an idle pause lends");
        assert_eq!(
            l.step(held_back, secs(t0, 24.0)),
            112 * MIB,
            "a stall ends it"
        );
    }

    #[test]
    fn a_small_reserve_is_never_lent_below_itself() {
        let t0 = Instant::now();
        let mut l = ReserveLender::new(16 * MIB, 16 * MIB);
        l.step(reads(0.0), t0);
        assert_eq!(l.step(reads(0.0), secs(t0, 6.0)), 16 * MIB);
    }
}

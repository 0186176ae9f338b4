//! Pacing writes while L0 is past the slowdown trigger, and while the hot store demotes.
//!
//! While L0 holds `l0_slowdown_trigger` tables or more, writes are spaced to a rate. The rate
//! starts at `delayed_write_rate` and follows L0: every table L0 gains while writes are slowed
//! lowers it (by more when L0 is two tables from the stop trigger), every time L0 shrinks and
//! is still past the trigger raises it again, never above `delayed_write_rate`. Once L0 falls
//! below the trigger writes run free and the next slowdown starts again from the top.
//!
//! Why: a fixed rate only helps while compaction drains L0 faster than it. When compaction runs
//! slower (a long L1 compaction, a throttled tier), L0 still grows at the fixed rate, reaches
//! the stop trigger, and every writer waits until that compaction ends: measured loads stopped
//! writes for up to 15 s at a time. Lowering the rate as L0 grows finds the pace compaction can
//! take, so writes slow down for longer but stop far less.
//!
//! [`DemotionPacer`]: while the hot store runs a demotion because it would pass its high
//! watermark, writes are spaced at `delayed_write_rate`. A flush waits for that demotion
//! before it can take its memtable, so writers that run on at full speed meanwhile only fill
//! the next memtables and meet a stall (too many immutable memtables) later; slowing them a
//! little while the demotion runs spreads that wait over many writes.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// Rate kept per table L0 gains while writes are slowed.
const FALL: f64 = 0.8;
/// Rate kept per table L0 gains within two tables of the stop trigger.
const FALL_NEAR_STOP: f64 = 0.6;
/// Rate gained each time L0 shrinks while writes are still slowed.
const RISE: f64 = 1.25;
/// Slowest pace (or `delayed_write_rate`, if lower): writes still trickle, so a slowdown never
/// becomes a stop by itself.
const MIN_RATE: f64 = 16.0 * 1024.0;
/// Waits shorter than this are carried over to the next write rather than slept.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// When writes may go next, and at what rate; see the module docs.
#[derive(Debug)]
pub(super) struct WritePacer {
    max_rate: f64,
    min_rate: f64,
    triggers: L0Triggers,
    state: Mutex<PacerState>,
}

#[derive(Debug)]
struct PacerState {
    /// When the next slowed write may start (`None`: writes are not slowed).
    next_write_at: Option<Instant>,
    /// Bytes per second slowed writes go at now.
    rate: f64,
    /// L0 tables when the rate was last set.
    l0: usize,
}

/// L0 thresholds of the write path (`Options::l0_slowdown_trigger`, `l0_stop_trigger`).
#[derive(Debug, Clone, Copy)]
pub(super) struct L0Triggers {
    pub slowdown: usize,
    pub stop: usize,
}

impl WritePacer {
    /// A pacer whose slowed writes go at most `max_rate` bytes per second.
    pub fn new(max_rate: u64, triggers: L0Triggers) -> Self {
        let max_rate = max_rate as f64;
        WritePacer {
            max_rate,
            min_rate: MIN_RATE.min(max_rate),
            triggers,
            state: Mutex::new(PacerState {
                next_write_at: None,
                rate: max_rate,
                l0: 0,
            }),
        }
    }

    /// How long a write of `bytes` waits now, with `l0` tables in L0: zero while L0 is below
    /// the slowdown trigger, and while the wait owed is under a millisecond (it is carried).
    pub fn delay(&self, l0: usize, bytes: u64, now: Instant) -> Duration {
        let mut s = self.state.lock();
        if l0 < self.triggers.slowdown {
            s.next_write_at = None;
            return Duration::ZERO;
        }
        if s.next_write_at.is_none() {
            // A slowdown starts at the configured rate, however many tables L0 has.
            s.rate = self.max_rate;
            s.l0 = l0;
        } else {
            self.follow_l0(&mut s, l0);
        }
        let rate = s.rate;
        book(&mut s.next_write_at, rate, bytes, now)
    }

    /// Slowed writes' rate in bytes per second (`None` while writes are not slowed).
    pub fn rate(&self) -> Option<u64> {
        let s = self.state.lock();
        s.next_write_at.map(|_| s.rate as u64)
    }

    fn follow_l0(&self, s: &mut PacerState, l0: usize) {
        if l0 > s.l0 {
            let fall = if l0 + 2 >= self.triggers.stop {
                FALL_NEAR_STOP
            } else {
                FALL
            };
            s.rate = (s.rate * fall.powi((l0 - s.l0) as i32)).max(self.min_rate);
        } else if l0 < s.l0 {
            s.rate = (s.rate * RISE).min(self.max_rate);
        }
        s.l0 = l0;
    }
}

/// Spaces writes at a fixed rate while the hot store demotes (see the module docs).
#[derive(Debug)]
pub(super) struct DemotionPacer {
    rate: f64,
    /// When the next paced write may start (`None`: no demotion is pacing writes).
    next_write_at: Mutex<Option<Instant>>,
}

impl DemotionPacer {
    /// A pacer whose paced writes go at `rate` bytes per second.
    pub fn new(rate: u64) -> Self {
        DemotionPacer {
            rate: rate.max(1) as f64,
            next_write_at: Mutex::new(None),
        }
    }

    /// How long a write of `bytes` waits now: zero unless `demoting`, and while the wait
    /// owed is under a millisecond (it is carried to the next write).
    pub fn delay(&self, demoting: bool, bytes: u64, now: Instant) -> Duration {
        let mut next = self.next_write_at.lock();
        if !demoting {
            *next = None;
            return Duration::ZERO;
        }
        book(&mut next, self.rate, bytes, now)
    }
}

/// Books a paced write of `bytes` at `rate` bytes per second after the one `next_write_at`
/// names (or now) and returns how long it waits: zero while the wait owed is under
/// [`MIN_SLEEP`], which is carried to the next write instead.
fn book(next_write_at: &mut Option<Instant>, rate: f64, bytes: u64, now: Instant) -> Duration {
    let start = next_write_at.map_or(now, |n| n.max(now));
    *next_write_at = Some(start + Duration::from_secs_f64(bytes.max(1) as f64 / rate));
    let wait = start.saturating_duration_since(now);
    if wait < MIN_SLEEP {
        Duration::ZERO
    } else {
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const TRIGGERS: L0Triggers = L0Triggers {
        slowdown: 20,
        stop: 36,
    };

    fn rate_after(pacer: &WritePacer, l0s: &[usize]) -> Option<u64> {
        let now = Instant::now();
        for &l0 in l0s {
            pacer.delay(l0, 1, now);
        }
        pacer.rate()
    }

    #[test]
    fn writes_below_the_slowdown_trigger_never_wait() {
        let pacer = WritePacer::new(16 * MIB, TRIGGERS);
        let now = Instant::now();
        for _ in 0..1000 {
            assert_eq!(pacer.delay(19, MIB, now), Duration::ZERO);
        }
        assert_eq!(pacer.rate(), None);
    }

    #[test]
    fn slowed_writes_are_spaced_at_the_rate() {
        let pacer = WritePacer::new(16 * MIB, TRIGGERS);
        let now = Instant::now();
        // The first write goes at once and books 1/16 s; the next waits for it.
        assert_eq!(pacer.delay(20, MIB, now), Duration::ZERO);
        let wait = pacer.delay(20, MIB, now);
        assert_eq!(wait.as_millis(), 62);
        // A later write that finds the booked time passed goes at once.
        let later = now + Duration::from_secs(1);
        assert_eq!(pacer.delay(20, MIB, later), Duration::ZERO);
    }

    #[test]
    fn rate_falls_with_each_table_l0_gains() {
        let pacer = WritePacer::new(16 * MIB, TRIGGERS);
        assert_eq!(rate_after(&pacer, &[20]), Some(16 * MIB));
        let r1 = rate_after(&pacer, &[21]).unwrap();
        assert_eq!(r1, (16.0 * MIB as f64 * FALL) as u64);
        let r3 = rate_after(&pacer, &[23]).unwrap();
        assert_eq!(r3, (16.0 * MIB as f64 * FALL.powi(3)) as u64);
    }

    #[test]
    fn rate_falls_faster_near_the_stop_trigger() {
        let pacer = WritePacer::new(16 * MIB, TRIGGERS);
        let before = rate_after(&pacer, &[20, 33]).unwrap() as f64;
        let after = rate_after(&pacer, &[34]).unwrap() as f64;
        assert!(
            (after / before - FALL_NEAR_STOP).abs() < 1e-6,
            "{after} / {before}"
        );
    }

    #[test]
    fn rate_rises_as_l0_shrinks_but_never_past_the_configured_rate() {
        let pacer = WritePacer::new(16 * MIB, TRIGGERS);
        let low = rate_after(&pacer, &[20, 24]).unwrap();
        let risen = rate_after(&pacer, &[22]).unwrap();
        assert!(
            risen.abs_diff((low as f64 * RISE) as u64) <= 1,
            "{risen} from {low}"
        );
        let top = rate_after(&pacer, &[21, 20, 20, 20]).unwrap();
        assert!(top <= 16 * MIB);
        // Shrinking many times in a row caps at the configured rate.
        let pacer = WritePacer::new(16 * MIB, TRIGGERS);
        assert_eq!(rate_after(&pacer, &[30, 29, 28, 27, 26]), Some(16 * MIB));
    }

    #[test]
    fn rate_has_a_floor_and_resets_below_the_trigger() {
        let pacer = WritePacer::new(64 << 10, TRIGGERS);
        let l0s: Vec<usize> = (20..=35).collect();
        assert_eq!(rate_after(&pacer, &l0s), Some(MIN_RATE as u64));
        assert_eq!(rate_after(&pacer, &[3]), None);
        assert_eq!(rate_after(&pacer, &[20]), Some(64 << 10));
    }

    #[test]
    fn a_configured_rate_below_the_floor_is_kept() {
        let pacer = WritePacer::new(4 << 10, TRIGGERS);
        assert_eq!(rate_after(&pacer, &[20, 25]), Some(4 << 10));
    }

    #[test]
    fn writes_are_paced_only_while_a_demotion_runs() {
        let pacer = DemotionPacer::new(MIB);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(pacer.delay(false, MIB, now), Duration::ZERO);
        }
        // The first paced write goes at once and books a second; the next waits for it.
        assert_eq!(pacer.delay(true, MIB, now), Duration::ZERO);
        assert_eq!(pacer.delay(true, MIB, now), Duration::from_secs(1));
        // The demotion ends: writes run free, and the next demotion starts afresh.
        assert_eq!(pacer.delay(false, MIB, now), Duration::ZERO);
        assert_eq!(pacer.delay(true, MIB, now), Duration::ZERO);
    }

    #[test]
    fn small_paced_writes_carry_their_wait_until_it_is_worth_a_sleep() {
        // 600 bytes at 1 MiB/s book about 0.57 ms each: the third write owes over 1 ms.
        let pacer = DemotionPacer::new(MIB);
        let now = Instant::now();
        let waits: Vec<Duration> = (0..4).map(|_| pacer.delay(true, 600, now)).collect();
        assert_eq!(&waits[..2], &[Duration::ZERO, Duration::ZERO]);
        assert!(waits[2] >= MIN_SLEEP, "{waits:?}");
        assert!(waits[3] > waits[2], "{waits:?}");
    }
}

//! I/O monitor: per-tier bytes/s and IOPS over a sliding window, split by kind of I/O.
//!
//! The `placement = auto` controller (`auto`) needs to know how busy the fast tier is; this
//! module turns byte and operation counts into rates. It is pure bookkeeping: no I/O, no threads,
//! no clock. Every time-dependent call takes an `Instant`, so tests drive time by hand.
//!
//! Two ways to feed it (use one per tier and kind, or the bytes are counted twice):
//! - `IoMonitor::record` (tests feed it this way): cheap relaxed atomic adds from any thread;
//!   the counts wait in a per-tier pending slot until the next [`IoMonitor::sample`] moves them
//!   into the window.
//! - [`IoMonitor::observe_cumulative`]: the engine already keeps cumulative per-tier counters
//!   (`tier::TierCounters`); the sampler passes their totals and the monitor takes the deltas.
//!
//! The window is `buckets` buckets of `window / buckets` each. Bucket `k` holds the I/O seen in
//! the time slice `(k * len, (k + 1) * len]` after the monitor's start. A rate is the sum of the
//! live buckets divided by the time they cover, so a half-elapsed current bucket does not dilute
//! the rate and a young monitor is not averaged over time before it existed.
//!
//! Bandwidth ceilings (bytes/s per tier) are inputs: measuring them (a probe at open, or a
//! configured figure) is the caller's job. `None` means unknown, and then no utilisation is
//! reported for that tier.
//!
//! INVARIANT: a bucket's `epoch` is the index of the time slice it holds; buckets whose epoch is
//! older than `current - buckets + 1` are dead and are reset before reuse.

use crate::tier::TierId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What an I/O was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// Reads of table data on behalf of user requests (get, scan, multi-get).
    ForegroundRead,
    /// Write-ahead log writes.
    Wal,
    /// Tables written by memtable flushes.
    Flush,
    /// Compaction reads and writes.
    Compaction,
    /// Files moved between tiers by background migration.
    Migration,
}

impl IoKind {
    /// Number of kinds; the length of per-kind arrays.
    pub const COUNT: usize = 5;

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Default window length: long enough to smooth bursts of single large writes, short enough
/// that the controller reacts within a couple of its dwell periods. A starting point.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(1);
/// Default number of buckets in the window: expiry granularity of a tenth of the window.
pub const DEFAULT_BUCKETS: usize = 10;

/// Shape of the sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowConfig {
    /// Total length of the window.
    pub window: Duration,
    /// Number of buckets the window is cut into (at least 1).
    pub buckets: usize,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            window: DEFAULT_WINDOW,
            buckets: DEFAULT_BUCKETS,
        }
    }
}

impl WindowConfig {
    /// Bucket count clamped to at least 1, so a zero in the options cannot divide by zero.
    fn bucket_count(&self) -> u64 {
        self.buckets.max(1) as u64
    }

    /// Length of one bucket in nanoseconds, at least 1.
    fn bucket_nanos(&self) -> u64 {
        let nanos = u64::try_from(self.window.as_nanos()).unwrap_or(u64::MAX);
        (nanos / self.bucket_count()).max(1)
    }
}

/// A rate: bytes and operations per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rate {
    /// Bytes per second.
    pub bytes_per_sec: f64,
    /// Operations per second (IOPS).
    pub ops_per_sec: f64,
}

/// What one tier did over the window, as of the last [`IoMonitor::sample`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TierWindow {
    /// Time the window actually covers (shorter than the configured window while young).
    pub covered: Duration,
    /// Rates by kind, indexed by [`IoKind::index`].
    pub by_kind: [Rate; IoKind::COUNT],
    /// Sum over all kinds.
    pub total: Rate,
    /// Configured bandwidth ceiling in bytes/s, if known.
    pub ceiling: Option<u64>,
    /// `total.bytes_per_sec / ceiling`; `None` when the ceiling is unknown or zero.
    /// May exceed 1.0 when the ceiling was measured low.
    pub utilisation: Option<f64>,
}

impl TierWindow {
    /// The rate of one kind.
    pub fn kind(&self, kind: IoKind) -> Rate {
        self.by_kind[kind.index()]
    }
}

/// Counts waiting for the next sample, written by `record` from any thread.
#[derive(Debug, Default)]
struct Pending {
    bytes: [AtomicU64; IoKind::COUNT],
    ops: [AtomicU64; IoKind::COUNT],
}

impl Pending {
    /// Takes and zeroes the counts of one kind.
    fn take(&self, kind: usize) -> (u64, u64) {
        let bytes = self.bytes[kind].swap(0, Ordering::Relaxed);
        let ops = self.ops[kind].swap(0, Ordering::Relaxed);
        (bytes, ops)
    }
}

/// One time slice of one tier.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Index of the time slice held; `None` = never used.
    epoch: Option<u64>,
    bytes: [u64; IoKind::COUNT],
    ops: [u64; IoKind::COUNT],
}

/// Last cumulative totals seen by `observe_cumulative`, per kind.
#[derive(Debug, Clone, Copy, Default)]
struct Baseline {
    bytes: Option<u64>,
    ops: Option<u64>,
}

/// Window state of one tier, guarded by the monitor's lock.
#[derive(Debug, Clone)]
struct TierState {
    buckets: Vec<Bucket>,
    baselines: [Baseline; IoKind::COUNT],
    ceiling: Option<u64>,
    last: TierWindow,
}

/// State touched only by the sampler; behind one lock, never held across I/O (there is none).
#[derive(Debug)]
struct Inner {
    /// Latest time seen; earlier `now`s are clamped to it so time never runs backwards.
    latest: Instant,
    tiers: Vec<TierState>,
}

/// Per-tier I/O rates over a sliding window. See the module docs.
#[derive(Debug)]
pub struct IoMonitor {
    config: WindowConfig,
    start: Instant,
    pending: Vec<Pending>,
    inner: Mutex<Inner>,
}

impl IoMonitor {
    /// A monitor for `num_tiers` tiers whose window starts at `start`; ceilings all unknown.
    pub fn new(num_tiers: usize, config: WindowConfig, start: Instant) -> IoMonitor {
        let tier = TierState {
            buckets: vec![Bucket::default(); config.bucket_count() as usize],
            baselines: [Baseline::default(); IoKind::COUNT],
            ceiling: None,
            last: TierWindow::default(),
        };
        IoMonitor {
            config,
            start,
            pending: (0..num_tiers).map(|_| Pending::default()).collect(),
            inner: Mutex::new(Inner {
                latest: start,
                tiers: vec![tier; num_tiers],
            }),
        }
    }

    /// Sets a tier's bandwidth ceiling in bytes/s (`None` = unknown). Takes effect at the next
    /// sample. Out-of-range tiers are ignored.
    pub fn set_ceiling(&self, tier: TierId, bytes_per_sec: Option<u64>) {
        if let Some(t) = self.lock().tiers.get_mut(tier.index()) {
            t.ceiling = bytes_per_sec;
        }
    }

    /// Counts `bytes` in `ops` operations of `kind` on `tier`. Lock-free (two relaxed adds), for
    /// hot paths. Out-of-range tiers are ignored: a monitor must never fail an I/O.
    #[cfg(test)]
    pub fn record(&self, tier: TierId, kind: IoKind, bytes: u64, ops: u64) {
        if let Some(p) = self.pending.get(tier.index()) {
            p.bytes[kind.index()].fetch_add(bytes, Ordering::Relaxed);
            p.ops[kind.index()].fetch_add(ops, Ordering::Relaxed);
        }
    }

    /// Feeds the engine's cumulative totals of `kind` on `tier`; the growth since the previous
    /// call is counted at `now`. The first call only sets the baseline, so history from before
    /// the monitor existed is not read as a burst. A total that went down (counters reset by a
    /// restart) counts as growth from zero, never as a huge spike.
    pub fn observe_cumulative(
        &self,
        tier: TierId,
        kind: IoKind,
        total_bytes: u64,
        total_ops: u64,
        now: Instant,
    ) {
        let mut inner = self.lock();
        let epoch = self.advance(&mut inner, now);
        let Some(t) = inner.tiers.get_mut(tier.index()) else {
            return;
        };
        let base = &mut t.baselines[kind.index()];
        let bytes = delta(&mut base.bytes, total_bytes);
        let ops = delta(&mut base.ops, total_ops);
        let bucket = self.bucket_mut(t, epoch);
        bucket.bytes[kind.index()] += bytes;
        bucket.ops[kind.index()] += ops;
    }

    /// Moves pending `record`ed counts into the window at `now`, recomputes every tier's rates
    /// and returns them (also kept for [`IoMonitor::window`]). Call it periodically, e.g. once
    /// per bucket length; counts recorded since the previous sample land in `now`'s bucket.
    pub fn sample(&self, now: Instant) -> Vec<TierWindow> {
        let mut inner = self.lock();
        let epoch = self.advance(&mut inner, now);
        let elapsed = self.elapsed_nanos(inner.latest);
        for (i, t) in inner.tiers.iter_mut().enumerate() {
            self.drain_pending(i, t, epoch);
            t.last = self.compute(t, epoch, elapsed);
        }
        inner.tiers.iter().map(|t| t.last.clone()).collect()
    }

    /// The rates of `tier` as of the last sample (all zero before the first, or when out of
    /// range).
    pub fn window(&self, tier: TierId) -> TierWindow {
        self.lock()
            .tiers
            .get(tier.index())
            .map(|t| t.last.clone())
            .unwrap_or_default()
    }

    /// The lock; a panic elsewhere while holding it leaves only counters behind, so poisoning
    /// is ignored rather than propagated into the engine.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Clamps `now` to never run backwards and returns the epoch (bucket index) it falls in.
    fn advance(&self, inner: &mut Inner, now: Instant) -> u64 {
        if now > inner.latest {
            inner.latest = now;
        }
        self.epoch_of(self.elapsed_nanos(inner.latest))
    }

    /// Nanoseconds from the monitor's start to `at` (0 if earlier).
    fn elapsed_nanos(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.start);
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Slice `k` is `(k * len, (k + 1) * len]`: a sample exactly on a boundary closes the
    /// slice that just ended instead of opening an empty one.
    fn epoch_of(&self, elapsed: u64) -> u64 {
        elapsed.saturating_sub(1) / self.config.bucket_nanos()
    }

    /// The bucket for `epoch`, reset first if it held an older slice.
    fn bucket_mut<'a>(&self, t: &'a mut TierState, epoch: u64) -> &'a mut Bucket {
        let slot = (epoch % self.config.bucket_count()) as usize;
        let b = &mut t.buckets[slot];
        if b.epoch != Some(epoch) {
            *b = Bucket {
                epoch: Some(epoch),
                ..Bucket::default()
            };
        }
        b
    }

    /// Moves tier `i`'s pending counts into the bucket for `epoch`.
    fn drain_pending(&self, i: usize, t: &mut TierState, epoch: u64) {
        let bucket = self.bucket_mut(t, epoch);
        for k in 0..IoKind::COUNT {
            let (bytes, ops) = self.pending[i].take(k);
            bucket.bytes[k] += bytes;
            bucket.ops[k] += ops;
        }
    }

    /// Rates of one tier from its live buckets.
    fn compute(&self, t: &TierState, epoch: u64, elapsed: u64) -> TierWindow {
        let covered = self.covered_nanos(epoch, elapsed);
        let mut w = TierWindow {
            covered: Duration::from_nanos(covered),
            ceiling: t.ceiling,
            ..TierWindow::default()
        };
        let oldest = (epoch + 1).saturating_sub(self.config.bucket_count());
        let live = t
            .buckets
            .iter()
            .filter(|b| b.epoch.is_some_and(|e| e >= oldest && e <= epoch));
        for b in live {
            for k in 0..IoKind::COUNT {
                w.by_kind[k].bytes_per_sec += b.bytes[k] as f64;
                w.by_kind[k].ops_per_sec += b.ops[k] as f64;
            }
        }
        self.finish_rates(&mut w, covered);
        w
    }

    /// Time covered by the live buckets: full older buckets plus the elapsed part of the
    /// current one, but no more than the monitor has existed.
    fn covered_nanos(&self, epoch: u64, elapsed: u64) -> u64 {
        let len = self.config.bucket_nanos();
        let older = (self.config.bucket_count() - 1).saturating_mul(len);
        let partial = elapsed - epoch * len;
        elapsed.min(older.saturating_add(partial))
    }

    /// Turns the summed counts in `w` into per-second rates, totals and utilisation.
    fn finish_rates(&self, w: &mut TierWindow, covered: u64) {
        let secs = covered as f64 / 1e9;
        for r in w.by_kind.iter_mut() {
            r.bytes_per_sec = if secs > 0.0 {
                r.bytes_per_sec / secs
            } else {
                0.0
            };
            r.ops_per_sec = if secs > 0.0 {
                r.ops_per_sec / secs
            } else {
                0.0
            };
            w.total.bytes_per_sec += r.bytes_per_sec;
            w.total.ops_per_sec += r.ops_per_sec;
        }
        w.utilisation = match w.ceiling {
            Some(c) if c > 0 => Some(w.total.bytes_per_sec / c as f64),
            _ => None,
        };
    }
}

/// Growth of a cumulative counter since `base`, updating `base`. First sight: 0. A decrease is
/// read as a reset (the engine restarted, counters began again at 0): growth = `total`. It
/// could also be a u64 wrap, but that takes centuries at device speeds, and the wrap reading
/// (`total + 2^64 - base`) is always the larger one, so taking `total` never invents a spike.
fn delta(base: &mut Option<u64>, total: u64) -> u64 {
    let d = match *base {
        None => 0,
        Some(b) if total >= b => total - b,
        Some(_) => total,
    };
    *base = Some(total);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn monitor(tiers: usize) -> (IoMonitor, Instant) {
        let t0 = Instant::now();
        (IoMonitor::new(tiers, WindowConfig::default(), t0), t0)
    }

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn rate_over_full_window() {
        let (m, t0) = monitor(2);
        for i in 1..=10 {
            m.record(TierId::FAST, IoKind::Wal, 1000, 2);
            m.sample(t0 + 100 * MS * i);
        }
        let w = m.window(TierId::FAST);
        assert_eq!(w.covered, Duration::from_secs(1));
        assert!(approx(w.kind(IoKind::Wal).bytes_per_sec, 10_000.0));
        assert!(approx(w.kind(IoKind::Wal).ops_per_sec, 20.0));
        assert_eq!(
            m.window(TierId::CAPACITY).total,
            Rate::default(),
            "other tier untouched"
        );
    }

    #[test]
    fn young_window_is_not_diluted() {
        let (m, t0) = monitor(1);
        m.record(TierId::FAST, IoKind::Flush, 500, 1);
        let w = &m.sample(t0 + 250 * MS)[0];
        assert_eq!(w.covered, 250 * MS);
        assert!(approx(w.total.bytes_per_sec, 2000.0));
        assert_eq!(
            m.sample(t0)[0].covered,
            250 * MS,
            "time never runs backwards"
        );
    }

    #[test]
    fn partial_current_bucket() {
        let (m, t0) = monitor(1);
        for i in 1..=20 {
            m.record(TierId::FAST, IoKind::Wal, 100, 1);
            m.sample(t0 + 100 * MS * i);
        }
        // 50 ms into a new bucket: 9 full buckets + 50 ms, 9 * 100 bytes + the new 100.
        m.record(TierId::FAST, IoKind::Wal, 100, 1);
        let w = &m.sample(t0 + 2050 * MS)[0];
        assert_eq!(w.covered, 950 * MS);
        assert!(approx(w.total.bytes_per_sec, 1000.0 / 0.95));
    }

    #[test]
    fn buckets_expire() {
        let (m, t0) = monitor(1);
        m.record(TierId::FAST, IoKind::Compaction, 1_000_000, 10);
        let w = &m.sample(t0 + 100 * MS)[0];
        assert!(approx(w.total.bytes_per_sec, 10_000_000.0));
        let w = &m.sample(t0 + 1000 * MS)[0];
        assert!(
            approx(w.total.bytes_per_sec, 1_000_000.0),
            "still inside 1 s"
        );
        let w = &m.sample(t0 + 1100 * MS)[0];
        assert_eq!(w.total, Rate::default(), "first bucket slid out");
        // A long idle gap: the ring slot is reused for a much later epoch, old data gone.
        m.record(TierId::FAST, IoKind::Wal, 10, 1);
        let w = &m.sample(t0 + 60_000 * MS)[0];
        assert!(approx(w.total.bytes_per_sec, 10.0));
    }

    #[test]
    fn kinds_are_split_and_summed() {
        let (m, t0) = monitor(1);
        m.record(TierId::FAST, IoKind::ForegroundRead, 4096, 1);
        m.record(TierId::FAST, IoKind::ForegroundRead, 4096, 1);
        m.record(TierId::FAST, IoKind::Wal, 1000, 1);
        m.record(TierId::FAST, IoKind::Migration, 3000, 3);
        let w = &m.sample(t0 + 1000 * MS)[0];
        assert!(approx(w.kind(IoKind::ForegroundRead).bytes_per_sec, 8192.0));
        assert!(approx(w.kind(IoKind::ForegroundRead).ops_per_sec, 2.0));
        assert!(approx(w.kind(IoKind::Migration).ops_per_sec, 3.0));
        assert_eq!(w.kind(IoKind::Flush), Rate::default());
        assert!(approx(w.total.bytes_per_sec, 12192.0));
        assert!(approx(w.total.ops_per_sec, 6.0));
    }

    #[test]
    fn utilisation_needs_a_ceiling() {
        let (m, t0) = monitor(2);
        m.set_ceiling(TierId::FAST, Some(100_000));
        m.set_ceiling(TierId::CAPACITY, Some(0));
        m.record(TierId::FAST, IoKind::Wal, 50_000, 5);
        m.record(TierId::CAPACITY, IoKind::Wal, 50_000, 5);
        let ws = m.sample(t0 + 1000 * MS);
        assert_eq!(ws[0].ceiling, Some(100_000));
        assert!(approx(ws[0].utilisation.unwrap(), 0.5));
        assert_eq!(ws[1].utilisation, None, "zero ceiling is unknown");
        m.set_ceiling(TierId::FAST, None);
        assert_eq!(m.sample(t0 + 1000 * MS)[0].utilisation, None);
    }

    #[test]
    fn cumulative_counters_take_deltas() {
        let (m, t0) = monitor(1);
        let obs = |b, o, ms| m.observe_cumulative(TierId::FAST, IoKind::Flush, b, o, t0 + ms * MS);
        obs(1_000_000_000, 100, 0); // history before the monitor: baseline only
        obs(1_000_010_000, 110, 500);
        obs(1_000_030_000, 120, 1000);
        let w = &m.sample(t0 + 1000 * MS)[0];
        assert!(approx(w.total.bytes_per_sec, 30_000.0));
        assert!(approx(w.total.ops_per_sec, 20.0));
    }

    #[test]
    fn cumulative_reset_and_wrap_are_sane() {
        let mut base = None;
        assert_eq!(delta(&mut base, 500), 0);
        assert_eq!(delta(&mut base, 700), 200);
        assert_eq!(delta(&mut base, 50), 50, "restart: counted from zero");
        let mut base = Some(u64::MAX - 9);
        assert_eq!(delta(&mut base, 5), 5, "wrap: read as a reset");
        assert_eq!(
            delta(&mut base, 8),
            3,
            "then counting goes on from the new base"
        );
    }

    #[test]
    fn cumulative_restart_counts_from_zero() {
        let (m, t0) = monitor(1);
        let obs = |b, ms| m.observe_cumulative(TierId::FAST, IoKind::Wal, b, b / 100, t0 + ms * MS);
        obs(5_000_000, 0);
        obs(5_001_000, 300);
        obs(2_000, 600); // counters restarted at 0 and reached 2,000
        let w = &m.sample(t0 + 1000 * MS)[0];
        assert!(approx(w.total.bytes_per_sec, 3_000.0), "no spike");
        assert!(approx(w.total.ops_per_sec, 30.0));
    }

    #[test]
    fn record_ignores_unknown_tier() {
        let (m, t0) = monitor(1);
        m.record(TierId::new(7), IoKind::Wal, 1, 1);
        m.observe_cumulative(TierId::new(7), IoKind::Wal, 1, 1, t0);
        m.set_ceiling(TierId::new(7), Some(1));
        assert_eq!(m.sample(t0 + MS).len(), 1);
        assert_eq!(m.window(TierId::new(7)), TierWindow::default());
    }

    #[test]
    fn record_from_many_threads() {
        let (m, t0) = monitor(1);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| (0..1000).for_each(|_| m.record(TierId::FAST, IoKind::Wal, 10, 1)));
            }
        });
        let w = &m.sample(t0 + 1000 * MS)[0];
        assert!(approx(w.total.bytes_per_sec, 40_000.0));
        assert!(approx(w.total.ops_per_sec, 4000.0));
    }

    #[test]
    fn zero_buckets_clamped() {
        let cfg = WindowConfig {
            window: Duration::ZERO,
            buckets: 0,
        };
        let t0 = Instant::now();
        let m = IoMonitor::new(1, cfg, t0);
        m.record(TierId::FAST, IoKind::Wal, 10, 1);
        let w = &m.sample(t0 + MS)[0];
        assert!(w.total.bytes_per_sec.is_finite());
    }
}

//! Promotions: popular objects the LSM served are copied back into the hot store.
//!
//! Two parts, both free of I/O:
//! - [`Epochs`], the schedule: promotions run in epochs of `promotion_epoch_ops` point reads.
//!   At the end of each epoch the store's share of the reads in it is compared with the share
//!   of the window before; if it rose by less than `promotion_min_gain`, promoting no longer
//!   pays and promotions pause for `promotion_cooldown_ops` reads, after which a new epoch
//!   starts (the workload may have moved on).
//! - [`Promoter`]'s queue: objects a read found in a table below L0, or a compaction into the
//!   capacity tier merged, whose key the tracker holds at the hottest clock value, each with
//!   the sequence number it was found at. The
//!   promotion job checks every candidate against the newest version before copying it, so a
//!   queued candidate that a later write superseded is dropped, never promoted.

use crate::key::SeqNo;
use crate::options::HotTierOptions;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Candidates that make a promotion job worth its journal write and syncs.
pub(crate) const BATCH: usize = 32;
/// Most candidates queued; later ones are dropped until a job drains the queue.
pub(crate) const MAX_QUEUED: usize = 4096;

/// Where the schedule stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    /// Promoting, in an epoch that started at `start` reads.
    Epoch { start: u64 },
    /// Not promoting until `until` reads.
    Cooling { until: u64 },
}

/// The promotion schedule, a pure function of the read counts it is given.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Epochs {
    epoch_ops: u64,
    cooldown_ops: u64,
    min_gain: f64,
    pub phase: Phase,
    /// Reads and store-served reads when the current window (epoch or cool-down) began.
    window_reads: u64,
    window_hot: u64,
    /// The store's share of the reads in the window before the current one.
    last_share: Option<f64>,
}

impl Epochs {
    /// A schedule starting with an epoch at read 0.
    pub fn new(opts: &HotTierOptions) -> Epochs {
        Epochs {
            epoch_ops: opts.promotion_epoch_ops.max(1),
            cooldown_ops: opts.promotion_cooldown_ops,
            min_gain: opts.promotion_min_gain,
            phase: Phase::Epoch { start: 0 },
            window_reads: 0,
            window_hot: 0,
            last_share: None,
        }
    }

    /// Whether candidates are taken now.
    pub fn promoting(&self) -> bool {
        matches!(self.phase, Phase::Epoch { .. })
    }

    /// The read count at which [`Epochs::advance`] has something to decide.
    pub fn next_boundary(&self) -> u64 {
        match self.phase {
            Phase::Epoch { start } => start + self.epoch_ops,
            Phase::Cooling { until } => until,
        }
    }

    /// Moves the schedule to `reads` point reads so far, `hot` of them served by the store.
    /// Returns true if it switched between promoting and cooling down.
    pub fn advance(&mut self, reads: u64, hot: u64) -> bool {
        if reads < self.next_boundary() {
            return false;
        }
        let window = reads - self.window_reads;
        let share = if window == 0 {
            0.0
        } else {
            (hot - self.window_hot) as f64 / window as f64
        };
        let before = self.phase;
        self.phase = match self.phase {
            Phase::Epoch { .. } => {
                let gained = self.last_share.is_none_or(|s| share - s >= self.min_gain);
                if gained {
                    Phase::Epoch { start: reads }
                } else {
                    Phase::Cooling {
                        until: reads + self.cooldown_ops,
                    }
                }
            }
            Phase::Cooling { .. } => Phase::Epoch { start: reads },
        };
        self.last_share = Some(share);
        self.window_reads = reads;
        self.window_hot = hot;
        std::mem::discriminant(&before) != std::mem::discriminant(&self.phase)
    }
}

/// One candidate: the user key, the sequence and value the read found.
pub(crate) type Candidate = (Vec<u8>, SeqNo, Vec<u8>);

/// Queued candidates: user key -> the sequence and value its latest read found.
type Queue = BTreeMap<Vec<u8>, (SeqNo, Vec<u8>)>;

/// The schedule and the candidate queue, shared by readers and the promotion job.
pub(crate) struct Promoter {
    epochs: Mutex<Epochs>,
    /// Mirrors `epochs.promoting()`, so readers need no lock.
    promoting: AtomicBool,
    /// Mirrors `epochs.next_boundary()`.
    boundary: AtomicU64,
    /// Candidates by key (a key read twice is queued once, with its latest read).
    queue: Mutex<Queue>,
}

impl Promoter {
    /// A promoter whose schedule follows `opts`.
    pub fn new(opts: &HotTierOptions) -> Promoter {
        let epochs = Epochs::new(opts);
        Promoter {
            promoting: AtomicBool::new(epochs.promoting()),
            boundary: AtomicU64::new(epochs.next_boundary()),
            epochs: Mutex::new(epochs),
            queue: Mutex::new(Queue::new()),
        }
    }

    /// Whether candidates are taken now.
    pub fn promoting(&self) -> bool {
        self.promoting.load(Ordering::Relaxed)
    }

    /// Tells the schedule the read counts; cheap unless an epoch or cool-down just ended.
    pub fn observe(&self, reads: u64, hot: u64) {
        if reads < self.boundary.load(Ordering::Relaxed) {
            return;
        }
        let mut epochs = self.epochs.lock();
        epochs.advance(reads, hot);
        self.promoting.store(epochs.promoting(), Ordering::Relaxed);
        self.boundary
            .store(epochs.next_boundary(), Ordering::Relaxed);
        if !epochs.promoting() {
            // NB: what an epoch that did not pay queued is not worth a job either.
            self.queue.lock().clear();
        }
    }

    /// Queues a candidate; returns true once a batch is waiting for the promotion job.
    pub fn offer(&self, user_key: &[u8], seq: SeqNo, value: &[u8]) -> bool {
        let mut queue = self.queue.lock();
        if queue.len() < MAX_QUEUED || queue.contains_key(user_key) {
            queue.insert(user_key.to_vec(), (seq, value.to_vec()));
        }
        queue.len() >= BATCH
    }

    /// Whether a batch is waiting.
    pub fn batch_ready(&self) -> bool {
        self.queue.lock().len() >= BATCH
    }

    /// Takes every queued candidate, in key order.
    pub fn take(&self) -> Vec<Candidate> {
        std::mem::take(&mut *self.queue.lock())
            .into_iter()
            .map(|(k, (seq, v))| (k, seq, v))
            .collect()
    }

    /// The schedule's phase now.
    #[cfg(test)]
    pub fn phase(&self) -> Phase {
        self.epochs.lock().phase
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(epoch: u64, cooldown: u64) -> HotTierOptions {
        HotTierOptions {
            promotion_epoch_ops: epoch,
            promotion_cooldown_ops: cooldown,
            ..HotTierOptions::default()
        }
    }

    #[test]
    fn epochs_go_on_while_the_hot_share_rises_and_cool_down_when_it_stalls() {
        let mut e = Epochs::new(&opts(100, 1000));
        assert!(e.promoting());
        assert!(!e.advance(99, 10), "nothing to decide inside an epoch");
        // First epoch: 20% served by the store; no window before it, so the next one runs.
        assert!(!e.advance(100, 20));
        assert_eq!(e.phase, Phase::Epoch { start: 100 });
        // Second: 50% (+30 points): go on.
        e.advance(200, 70);
        assert_eq!(e.phase, Phase::Epoch { start: 200 });
        // Third: 50.5% (+0.5 points, under 1 point): cool down for 1000 reads.
        assert!(e.advance(400, 171));
        assert_eq!(e.phase, Phase::Cooling { until: 1400 });
        assert!(!e.promoting());
        assert_eq!(e.next_boundary(), 1400);
        assert!(!e.advance(1399, 800));
        // The cool-down ends: a new epoch, measured against the cool-down's share.
        assert!(e.advance(1400, 671));
        assert_eq!(e.phase, Phase::Epoch { start: 1400 });
        assert!(e.promoting());
        // An epoch that does not beat the cool-down's share by a point stops again.
        e.advance(1500, 721);
        assert_eq!(e.phase, Phase::Cooling { until: 2500 });
    }

    #[test]
    fn a_late_check_closes_the_window_where_it_is() {
        let mut e = Epochs::new(&opts(100, 50));
        // Checked only at 250 reads: one window of 250, 40% from the store.
        e.advance(250, 100);
        assert_eq!(e.phase, Phase::Epoch { start: 250 });
        assert_eq!(e.next_boundary(), 350);
        // No gain at all: cool down.
        e.advance(350, 140);
        assert_eq!(e.phase, Phase::Cooling { until: 400 });
    }

    #[test]
    fn min_gain_zero_promotes_while_the_share_does_not_fall() {
        let mut o = opts(10, 100);
        o.promotion_min_gain = 0.0;
        let mut e = Epochs::new(&o);
        e.advance(10, 5);
        e.advance(20, 10);
        assert!(e.promoting(), "an equal share is a gain of 0");
        e.advance(30, 14);
        assert!(!e.promoting());
    }

    #[test]
    fn the_queue_keeps_one_latest_read_per_key_and_signals_a_batch() {
        let p = Promoter::new(&opts(1000, 1000));
        for i in 0..BATCH - 1 {
            assert!(!p.offer(format!("k{i:03}").as_bytes(), i as SeqNo, b"v"));
        }
        // A key read again replaces its entry: still one short of a batch.
        assert!(!p.offer(b"k000", 99, b"newer"));
        assert!(!p.batch_ready());
        assert!(p.offer(b"zz", 7, b"w"));
        let taken = p.take();
        assert_eq!(taken.len(), BATCH);
        assert_eq!(taken[0], (b"k000".to_vec(), 99, b"newer".to_vec()));
        assert!(p.take().is_empty());
    }

    #[test]
    fn a_cool_down_empties_the_queue_and_stops_taking_candidates() {
        let p = Promoter::new(&opts(10, 100));
        p.observe(10, 0);
        p.offer(b"a", 1, b"v");
        assert!(p.promoting());
        p.observe(20, 0);
        assert_eq!(p.phase(), Phase::Cooling { until: 120 });
        assert!(!p.promoting());
        assert!(p.take().is_empty());
        p.observe(119, 0);
        assert!(!p.promoting());
        p.observe(120, 0);
        assert!(p.promoting());
    }
}

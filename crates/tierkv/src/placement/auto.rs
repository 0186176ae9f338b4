//! `placement = auto`: the controller that decides how many LSM levels live on the fast tier.
//!
//! SpanDB (section 4.3) keeps a pointer over the levels: new tables of covered levels are
//! created on the fast tier, the rest on the capacity tier. A monitor watches the fast tier's
//! bandwidth; while its utilisation is below `BW_L` and space allows, the pointer moves down
//! (more levels on fast); above `BW_H`, or when space passes a high watermark, it moves up. The
//! pointer only redirects *new* files (flush and compaction outputs), so a move is cheap and the
//! tree follows it as compaction rewrites levels.
//!
//! Here the pointer moves in steps of a fraction of a level ([`Pointer`]), so it can settle at,
//! say, 75% of L4; each new file of a partly covered level is sent to the fast tier or not by a
//! deterministic per-level sequence whose share converges to the fraction ([`AutoPlace::wants_fast`]).
//!
//! This module is pure policy: it reads [`Reading`]s, returns [`Decision`]s and
//! [`MigrationHint`]s, and touches no files, threads or clocks (time comes in as `Instant`s).
//!
//! INVARIANT: the pointer's position is an integer count of steps in `0..=num_levels * steps`,
//! where `steps` = steps per level; position 0 is "WAL only" (PL), the maximum puts every level
//! on the fast tier. Integer steps keep repeated moves free of floating-point drift.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// Default low utilisation threshold (`BW_L`): below it the fast tier has bandwidth to spare
/// and the pointer may move down. Chosen with `BW_H` by a sweep of both thresholds
/// (`scripts/sweep-placement.sh`; results in BENCHMARKS.md): lower pairs keep the pointer
/// too shallow and leave the fast tier's bandwidth unused.
pub const DEFAULT_BW_LOW: f64 = 0.5;
/// Default high utilisation threshold (`BW_H`): above it the fast tier is busy enough that
/// table I/O may delay the WAL, so the pointer moves up. Chosen with `BW_L` (see there). The
/// gap to `BW_L` is the hysteresis band in which the pointer holds still.
pub const DEFAULT_BW_HIGH: f64 = 0.8;
/// Default high space watermark, as a share of the fast tier's table budget (budget minus the
/// WAL and flush reserves): above it the pointer moves up and the coldest files should move
/// down. Chosen with the target by a sweep (BENCHMARKS.md). Lower pairs leave fast space
/// unused; pairs closer to full copy tables back and forth as flushes cross the watermark.
/// The budget already leaves out the flush reserve, so the watermark can sit close to it.
/// Not higher: a compaction output reserves up to 1.125 tables, and the watermark must be
/// reached before outputs stop fitting, or the controller never sees a full tier.
pub const DEFAULT_SPACE_HIGH: f64 = 0.95;
/// Default space target of a move-down migration, as a share of the budget: migrating to
/// below the watermark, not just to it, keeps the next table from crossing it again at once.
/// Chosen with the watermark (see there).
pub const DEFAULT_SPACE_TARGET: f64 = 0.88;
/// Default pace of a migration while foreground requests flow, bytes/s (unpaced when they
/// stop): a trickle, because its reads share the slower tier with foreground reads. A faster
/// pace cost foreground throughput without leaving more on the fast tier (BENCHMARKS.md).
pub const DEFAULT_MIGRATION_BUSY_RATE: u64 = 16 << 20;
/// Default pointer step, as a share of a level: a quarter level per move lets the pointer
/// settle inside a level (SpanDB's best configuration holds about 72% of L4) without
/// crawling. Not swept.
pub const DEFAULT_STEP: f64 = 0.25;
/// How far below `space_target` usage must fall before a tier that hit the watermark may
/// have tables copied up, or the pointer move down, again. NB: without it, copies up refill
/// the tier to the watermark, copies down empty it to the target, and the same tables go
/// back and forth.
const SPACE_BOUND_RELEASE: f64 = 0.2;

/// Utilisation at which the fast tier counts as saturated: its bandwidth ceiling is reached,
/// so WAL writes queue behind table I/O. A bandwidth move up from there covers a whole level
/// at once ([`AutoPlace::step`]).
pub const SATURATED: f64 = 1.0;

/// Default minimum time between pointer moves: at least one monitor window, so each move is
/// judged on readings taken after the previous one took effect. Not swept.
pub const DEFAULT_DWELL: Duration = Duration::from_secs(1);
/// Default number of decisions kept for stats.
pub const DEFAULT_HISTORY: usize = 64;
/// Cap on the down-move back-off multiplier (see [`AutoPlace::step`]): after repeated
/// down-then-up flips, down moves wait up to this many dwell periods.
pub const MAX_DOWN_BACKOFF: u32 = 16;

/// Tuning of the controller. Build with [`AutoPlaceConfig::new`] and adjust fields.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoPlaceConfig {
    /// Number of LSM levels; the pointer never goes past the last.
    pub num_levels: usize,
    /// `BW_L`: move down only while fast-tier utilisation is below this.
    pub bw_low: f64,
    /// `BW_H`: move up while fast-tier utilisation is above this.
    pub bw_high: f64,
    /// High space watermark, share of the table budget.
    pub space_high: f64,
    /// Where a move-down migration aims, share of the table budget.
    pub space_target: f64,
    /// Pointer step as a share of a level; rounded to `1 / n` for a whole `n`.
    pub step: f64,
    /// Minimum time between moves.
    pub dwell: Duration,
    /// Decisions kept in the history.
    pub history: usize,
}

impl AutoPlaceConfig {
    /// Defaults for a tree of `num_levels` levels.
    pub fn new(num_levels: usize) -> AutoPlaceConfig {
        AutoPlaceConfig {
            num_levels,
            bw_low: DEFAULT_BW_LOW,
            bw_high: DEFAULT_BW_HIGH,
            space_high: DEFAULT_SPACE_HIGH,
            space_target: DEFAULT_SPACE_TARGET,
            step: DEFAULT_STEP,
            dwell: DEFAULT_DWELL,
            history: DEFAULT_HISTORY,
        }
    }

    /// Steps per level: `1 / step` rounded, at least 1 (a step of a whole level or more, or a
    /// nonsense value, means whole levels).
    pub fn steps_per_level(&self) -> usize {
        if self.step.is_finite() && self.step > 0.0 && self.step < 1.0 {
            (1.0 / self.step).round().max(1.0) as usize
        } else {
            1
        }
    }
}

/// Where the fast tier ends: levels `< level` are fully on it, and `fraction` (in `[0, 1)`) of
/// the new files of `level` go there too.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pointer {
    /// First level not fully on the fast tier.
    pub level: usize,
    /// Share of new files of `level` placed on the fast tier.
    pub fraction: f64,
}

impl Pointer {
    /// "PL": the fast tier holds only the WAL (and MANIFEST).
    #[cfg(test)]
    pub const WAL_ONLY: Pointer = Pointer {
        level: 0,
        fraction: 0.0,
    };
}

/// `L{level}+{percent}%`: e.g. `L2+40%` = L0 and L1 on fast, 40% of new L2 files on fast.
impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "L{}+{:.0}%", self.level, self.fraction * 100.0)
    }
}

/// What the controller is told at each step about the fast tier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Total bytes/s over the fast tier's bandwidth ceiling (0 = idle, may exceed 1).
    pub utilisation: f64,
    /// Bytes of tables on the fast tier.
    pub space_used: u64,
    /// Bytes tables may use on the fast tier: its budget minus the WAL reserve.
    pub space_budget: u64,
    /// Whether writes are being slowed or stopped right now.
    pub stalled: bool,
}

impl Reading {
    /// Space used as a share of the budget; a zero budget with anything on it counts as full.
    pub fn space_share(&self) -> f64 {
        if self.space_budget > 0 {
            self.space_used as f64 / self.space_budget as f64
        } else if self.space_used > 0 {
            f64::INFINITY
        } else {
            1.0
        }
    }
}

/// Why the pointer moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Utilisation below `BW_L` and space below the watermark: use the idle bandwidth.
    BandwidthLow,
    /// Utilisation above `BW_H`: table I/O competes with the WAL.
    BandwidthHigh,
    /// Space above the high watermark.
    SpaceHigh,
}

/// One pointer move, kept in the history for stats.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// When it was taken.
    pub at: Instant,
    /// Pointer before.
    pub from: Pointer,
    /// Pointer after.
    pub to: Pointer,
    /// Why.
    pub reason: Reason,
    /// The reading's utilisation.
    pub utilisation: f64,
    /// The reading's space used.
    pub space_used: u64,
    /// The reading's space budget.
    pub space_budget: u64,
}

/// What background migration should do now (the policy; moving files is the caller's job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationHint {
    /// Nothing to do.
    None,
    /// The fast tier is over its watermark: move about `bytes` of its coldest tables down.
    MoveColdestDown {
        /// Bytes to move to get back to the space target.
        bytes: u64,
    },
    /// The fast tier is idle: move tables of `level` (the deepest level the pointer covers) or
    /// above that still sit on the capacity tier up, if one fits in `room`. Keeps being
    /// returned while the conditions hold; the caller stops when nothing is left to move.
    MoveUp {
        /// Level whose tables to promote.
        level: usize,
        /// Bytes a promoted table may take: the distance to the space target, so that a copy
        /// never lands past it (a table larger than the gap to the watermark would cross it
        /// and be sent straight back down).
        room: u64,
    },
}

/// The `placement = auto` controller. See the module docs.
#[derive(Debug)]
pub struct AutoPlace {
    config: AutoPlaceConfig,
    steps: usize,
    position: usize,
    last_move: Instant,
    last_was_down: bool,
    down_backoff: u32,
    /// Space used at the last move up for space: another waits until usage grows past it.
    space_at_last_space_move: Option<u64>,
    /// The fast tier reached the space watermark and has not emptied much since: the covered
    /// levels do not fit, so the pointer does not move down (see `wants_down`).
    space_bound: bool,
    history: VecDeque<Decision>,
    moves: u64,
    file_counters: Vec<u64>,
}

impl AutoPlace {
    /// A controller at "WAL only", created at `now` (the first move waits one dwell, so it is
    /// judged on a full monitor window).
    pub fn new(config: AutoPlaceConfig, now: Instant) -> AutoPlace {
        let steps = config.steps_per_level();
        AutoPlace {
            file_counters: vec![0; config.num_levels],
            config,
            steps,
            position: 0,
            last_move: now,
            last_was_down: false,
            down_backoff: 1,
            space_at_last_space_move: None,
            space_bound: false,
            history: VecDeque::new(),
            moves: 0,
        }
    }

    /// Starts from `pointer` instead (e.g. the configured `levels_on_fast`), rounded to the
    /// nearest step and clamped to the valid range.
    pub fn with_pointer(mut self, pointer: Pointer) -> AutoPlace {
        let within = (pointer.fraction.clamp(0.0, 1.0) * self.steps as f64).round() as usize;
        let pos = pointer
            .level
            .saturating_mul(self.steps)
            .saturating_add(within);
        self.position = pos.min(self.max_position());
        self
    }

    /// The configuration.
    #[cfg(test)]
    pub fn config(&self) -> &AutoPlaceConfig {
        &self.config
    }

    /// The current pointer.
    pub fn pointer(&self) -> Pointer {
        self.pointer_at(self.position)
    }

    /// Levels fully on the fast tier, as a fixed `levels_on_fast` would say.
    pub fn full_levels(&self) -> usize {
        self.position / self.steps
    }

    /// The last decisions, oldest first, at most `config.history`.
    pub fn history(&self) -> impl Iterator<Item = &Decision> {
        self.history.iter()
    }

    /// Moves made since creation (the history may have dropped older ones).
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Feeds one reading; moves the pointer by at most one step and returns the move, if any.
    ///
    /// Up moves (space over the watermark, utilisation over `BW_H`) win over down moves. Down
    /// moves need utilisation below `BW_L`, space below the watermark, no write stall, and a
    /// tier that is not space-bound (see `wants_down`). Between `BW_L` and `BW_H` nothing
    /// moves (the hysteresis band). Any move waits `dwell` after the previous one; a down
    /// move waits `dwell * backoff`, where the back-off doubles each time an up move reverses
    /// a down move (a flip-flop) and halves on each down move that follows another.
    pub fn step(&mut self, reading: Reading, now: Instant) -> Option<Decision> {
        if reading.space_share() < self.config.space_target - SPACE_BOUND_RELEASE {
            self.space_bound = false;
        }
        let since = now.saturating_duration_since(self.last_move);
        if since < self.config.dwell {
            return None;
        }
        if let Some(reason) = self.up_reason(&reading) {
            let to = self.up_target(reason, &reading)?;
            return self.move_to(to, reason, reading, now);
        }
        let down_wait = self.config.dwell.saturating_mul(self.down_backoff);
        if self.wants_down(&reading) && since >= down_wait && self.position < self.max_position() {
            return self.move_to(self.position + 1, Reason::BandwidthLow, reading, now);
        }
        None
    }

    /// Whether a new table of `level`, the `file_seq`-th created at that level (0, 1, 2, ...),
    /// goes to the fast tier. Deterministic: with fraction `k / n` exactly `k` of every `n`
    /// consecutive sequence numbers say yes (Bresenham), so the share converges to the
    /// fraction. NB: `file_seq` must count files *of that level*; global file numbers,
    /// interleaved across levels, would not spread evenly.
    pub fn wants_fast(&self, level: usize, file_seq: u64) -> bool {
        let full = self.full_levels();
        if level != full {
            return level < full;
        }
        let k = (self.position % self.steps) as u128;
        let n = self.steps as u128;
        let seq = file_seq as u128;
        (seq + 1) * k / n > seq * k / n
    }

    /// [`AutoPlace::wants_fast`] with the per-level sequence kept here: call once per new
    /// table. Levels beyond `num_levels` share the last counter.
    pub fn next_file_wants_fast(&mut self, level: usize) -> bool {
        let Some(last) = self.file_counters.len().checked_sub(1) else {
            return self.wants_fast(level, 0);
        };
        let slot = &mut self.file_counters[level.min(last)];
        let seq = *slot;
        *slot += 1;
        self.wants_fast(level, seq)
    }

    /// What background migration should do given `reading` (pure policy).
    pub fn migration_hint(&self, reading: &Reading) -> MigrationHint {
        let target = (reading.space_budget as f64 * self.config.space_target) as u64;
        if reading.space_share() > self.config.space_high {
            let bytes = reading.space_used.saturating_sub(target);
            if bytes > 0 {
                return MigrationHint::MoveColdestDown { bytes };
            }
        }
        // NB: tables of covered levels go up whenever the tier is idle and has room below the
        // space target, not only after a move down: once compaction has deleted its inputs,
        // a tier that passed the watermark during a load is often well below the target, and
        // waiting for the pointer to move left a fifth of the budget unused through a whole
        // read-heavy run. A copy must fit below the target, and the watermark above it keeps
        // the tables compactions add from sending copies straight back.
        // NB: an idle tier with no room below the target still gets the hint: migration may
        // then move a deep table down to make room for an upper level's (see `db::migrate`).
        let idle = reading.utilisation < self.config.bw_low / 2.0;
        let room = target.saturating_sub(reading.space_used);
        if idle && !reading.stalled {
            if let Some(level) = self.deepest_covered() {
                return MigrationHint::MoveUp { level, room };
            }
        }
        MigrationHint::None
    }

    /// The reason to move up, if any.
    ///
    /// NB: a move up does not free space, it only sends later tables elsewhere; migration
    /// frees it. So once the pointer moved up for space, it moves up for space again only if
    /// usage still grows (tables keep arriving); a full but steady tier is left to migration.
    /// (Stepping on each second of a full tier would walk the pointer up several levels and
    /// back while migration catches up, and the churn costs read throughput.)
    fn up_reason(&self, r: &Reading) -> Option<Reason> {
        let still_filling = self
            .space_at_last_space_move
            .is_none_or(|last| r.space_used > last);
        if r.space_share() > self.config.space_high && still_filling {
            Some(Reason::SpaceHigh)
        } else if r.utilisation > self.config.bw_high && self.position > self.steps {
            // NB: bandwidth never uncovers L0 (only space does). The WAL's own load does not
            // move with the pointer, so on a tier the WAL nearly fills, stepping on past L1
            // would only send flushes to the slower tier and slow every write.
            Some(Reason::BandwidthHigh)
        } else {
            // NB: a write stall alone is no reason to move up. Stalls come from compaction
            // falling behind; sending the top levels' outputs to the slower tier only slows
            // compaction further, even with fast bandwidth and space to spare. A saturated
            // tier shows as `BW_H`.
            None
        }
    }

    /// Where an up move for `reason` goes: one step; a whole level (not past L1+0%) for
    /// bandwidth on a tier at or past its ceiling.
    ///
    /// NB: a quarter step a second is too slow for a saturated tier: on a write-only load the
    /// pointer spends half of a short run walking one level up a step at a time, while the
    /// WAL queues behind table I/O. Whole levels get there in two moves (the measured gain is
    /// not yet clear; see BENCHMARKS.md). Below the ceiling, single steps keep the pointer able
    /// to settle inside a level.
    fn up_target(&self, reason: Reason, r: &Reading) -> Option<usize> {
        let one_step = self.position.checked_sub(1)?;
        if reason == Reason::BandwidthHigh && r.utilisation >= SATURATED {
            let level_up = self.position.saturating_sub(self.steps).max(self.steps);
            return Some(level_up.min(one_step));
        }
        Some(one_step)
    }

    /// Whether the reading allows moving down.
    ///
    /// NB: not while the tier is space-bound. The covered levels did not fit, so covering more
    /// only sends tables that migration must copy back down; moving down as soon as migration
    /// brought usage under the watermark flipped the pointer once a second at the watermark.
    fn wants_down(&self, r: &Reading) -> bool {
        r.utilisation < self.config.bw_low
            && r.space_share() < self.config.space_high
            && !r.stalled
            && !self.space_bound
    }

    /// Applies a move to `position`, updating back-off and history.
    fn move_to(
        &mut self,
        position: usize,
        reason: Reason,
        r: Reading,
        now: Instant,
    ) -> Option<Decision> {
        let down = position > self.position;
        self.update_backoff(down, reason);
        self.space_at_last_space_move = (reason == Reason::SpaceHigh).then_some(r.space_used);
        self.space_bound |= reason == Reason::SpaceHigh;
        let decision = Decision {
            at: now,
            from: self.pointer(),
            to: self.pointer_at(position),
            reason,
            utilisation: r.utilisation,
            space_used: r.space_used,
            space_budget: r.space_budget,
        };
        self.position = position;
        self.last_move = now;
        self.last_was_down = down;
        self.moves += 1;
        self.remember(decision.clone());
        Some(decision)
    }

    /// Doubles the down-move back-off when an up move for bandwidth reverses a down move (the
    /// step down overloaded the tier); halves it when down moves follow each other (the tier
    /// absorbed the last one). Space moves say nothing about bandwidth and leave it alone.
    fn update_backoff(&mut self, down: bool, reason: Reason) {
        if down && self.last_was_down {
            self.down_backoff = (self.down_backoff / 2).max(1);
        } else if !down && self.last_was_down && reason != Reason::SpaceHigh {
            self.down_backoff = (self.down_backoff * 2).min(MAX_DOWN_BACKOFF);
        }
    }

    /// Appends to the bounded history.
    fn remember(&mut self, decision: Decision) {
        if self.config.history == 0 {
            return;
        }
        while self.history.len() >= self.config.history {
            self.history.pop_front();
        }
        self.history.push_back(decision);
    }

    /// The pointer for a position.
    fn pointer_at(&self, position: usize) -> Pointer {
        Pointer {
            level: position / self.steps,
            fraction: (position % self.steps) as f64 / self.steps as f64,
        }
    }

    /// Every level on fast.
    fn max_position(&self) -> usize {
        self.config.num_levels * self.steps
    }

    /// The deepest level with new files going to fast, if any.
    fn deepest_covered(&self) -> Option<usize> {
        let p = self.pointer();
        if p.fraction > 0.0 {
            Some(p.level)
        } else {
            p.level.checked_sub(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn reading(utilisation: f64, used: u64) -> Reading {
        Reading {
            utilisation,
            space_used: used,
            space_budget: 10 * GIB,
            stalled: false,
        }
    }

    /// A controller with the space thresholds these tests' figures assume (0.9/0.8).
    fn ctl(levels: usize) -> (AutoPlace, Instant) {
        let t0 = Instant::now();
        let mut config = AutoPlaceConfig::new(levels);
        config.space_high = 0.9;
        config.space_target = 0.8;
        (AutoPlace::new(config, t0), t0)
    }

    fn sec(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    #[test]
    fn display() {
        let p = Pointer {
            level: 2,
            fraction: 0.4,
        };
        assert_eq!(p.to_string(), "L2+40%");
        assert_eq!(Pointer::WAL_ONLY.to_string(), "L0+0%");
    }

    #[test]
    fn moves_down_when_idle() {
        let (mut c, t0) = ctl(4);
        assert!(c.step(reading(0.1, 0), t0).is_none(), "waits one dwell");
        let d = c.step(reading(0.1, 0), sec(t0, 1)).unwrap();
        assert_eq!(
            (d.from, d.reason),
            (Pointer::WAL_ONLY, Reason::BandwidthLow)
        );
        assert_eq!(d.to.to_string(), "L0+25%");
        assert!(c.step(reading(0.1, 0), sec(t0, 1)).is_none(), "dwell");
        for s in 2..=5 {
            c.step(reading(0.1, 0), sec(t0, s));
        }
        assert_eq!(c.pointer().to_string(), "L1+25%");
        assert_eq!(c.full_levels(), 1);
    }

    #[test]
    fn never_past_the_last_level() {
        let (mut c, t0) = ctl(2);
        for s in 1..=20 {
            c.step(reading(0.0, 0), sec(t0, s));
        }
        assert_eq!(c.pointer().to_string(), "L2+0%");
        assert_eq!(c.moves(), 8);
        assert!(
            c.wants_fast(0, 3) && c.wants_fast(1, 0),
            "everything on fast"
        );
    }

    #[test]
    fn never_above_wal_only() {
        let (mut c, t0) = ctl(4);
        assert!(c.step(reading(0.99, 0), sec(t0, 1)).is_none());
        assert_eq!(c.pointer(), Pointer::WAL_ONLY);
        assert!(!c.wants_fast(0, 0));
    }

    #[test]
    fn stops_at_space_watermark() {
        let (mut c, t0) = ctl(6);
        let mut used = 0;
        for s in 1..=30 {
            c.step(reading(0.1, used), sec(t0, s));
            used += GIB; // the fast tier fills as levels move onto it
            if used > 9 * GIB {
                used = 9 * GIB; // exactly the watermark: no further growth allowed
            }
        }
        let at = c.pointer();
        assert!(
            c.step(reading(0.1, 9 * GIB), sec(t0, 31)).is_none(),
            "at watermark"
        );
        let d = c.step(reading(0.1, 9 * GIB + 1), sec(t0, 32)).unwrap();
        assert_eq!((d.from, d.reason), (at, Reason::SpaceHigh));
        assert_ne!(c.pointer(), at);
    }

    #[test]
    fn a_full_but_steady_fast_tier_moves_the_pointer_once() {
        let (c, t0) = ctl(6);
        let mut c = c.with_pointer(Pointer {
            level: 4,
            fraction: 0.0,
        });
        let full = 9 * GIB + GIB / 2;
        let d = c.step(reading(0.0, full), sec(t0, 1)).unwrap();
        assert_eq!(d.reason, Reason::SpaceHigh);
        let after = c.pointer();
        for s in 2..20 {
            assert!(
                c.step(reading(0.0, full), sec(t0, s)).is_none(),
                "second {s}"
            );
        }
        assert_eq!(c.pointer(), after);
        // Tables still arriving: another step up.
        let d = c.step(reading(0.0, full + GIB / 4), sec(t0, 21)).unwrap();
        assert_eq!(d.reason, Reason::SpaceHigh);
        // Migration brought usage back to the target: the pointer holds (the covered levels
        // do not fit, so moving down would only refill the tier).
        let after = c.pointer();
        for s in 22..30 {
            assert!(c.step(reading(0.0, 8 * GIB), sec(t0, s)).is_none());
        }
        assert_eq!(c.pointer(), after);
        // Usage fell well below the target (data deleted or compacted away): down moves resume.
        let d = c.step(reading(0.0, 5 * GIB), sec(t0, 31)).unwrap();
        assert_eq!(d.reason, Reason::BandwidthLow);
    }

    #[test]
    fn moves_up_under_high_utilisation() {
        let (c, t0) = ctl(4);
        let mut c = c.with_pointer(Pointer {
            level: 2,
            fraction: 0.5,
        });
        let d = c.step(reading(0.95, 0), sec(t0, 1)).unwrap();
        assert_eq!(d.reason, Reason::BandwidthHigh);
        assert_eq!(d.to.to_string(), "L2+25%");
        c.step(reading(0.95, 0), sec(t0, 2));
        c.step(reading(0.95, 0), sec(t0, 3));
        assert_eq!(c.pointer().to_string(), "L1+75%");
        for s in 4..20 {
            c.step(reading(0.95, 0), sec(t0, s));
        }
        assert_eq!(
            c.pointer().to_string(),
            "L1+0%",
            "bandwidth keeps L0 on the fast tier"
        );
        let full = reading(0.95, 10 * GIB);
        assert_eq!(c.step(full, sec(t0, 20)).unwrap().reason, Reason::SpaceHigh);
        assert_eq!(c.pointer().to_string(), "L0+75%", "space may uncover L0");
    }

    #[test]
    fn a_saturated_tier_moves_the_pointer_a_whole_level() {
        let (c, t0) = ctl(4);
        let mut c = c.with_pointer(Pointer {
            level: 3,
            fraction: 0.5,
        });
        let d = c.step(reading(1.2, 0), sec(t0, 1)).unwrap();
        assert_eq!(d.reason, Reason::BandwidthHigh);
        assert_eq!(d.to.to_string(), "L2+50%");
        let d = c.step(reading(2.5, 0), sec(t0, 2)).unwrap();
        assert_eq!(d.to.to_string(), "L1+50%");
        let d = c.step(reading(2.5, 0), sec(t0, 3)).unwrap();
        assert_eq!(d.to.to_string(), "L1+0%", "not past L1+0%");
        assert!(
            c.step(reading(2.5, 0), sec(t0, 4)).is_none(),
            "bandwidth keeps L0 on the fast tier"
        );
        // Just below the ceiling: single steps again.
        let mut c = c.with_pointer(Pointer {
            level: 3,
            fraction: 0.0,
        });
        let d = c.step(reading(0.99, 0), sec(t0, 5)).unwrap();
        assert_eq!(d.to.to_string(), "L2+75%");
    }

    #[test]
    fn a_stall_blocks_down_moves_but_does_not_move_up() {
        let (c, t0) = ctl(4);
        let mut c = c.with_pointer(Pointer {
            level: 2,
            fraction: 0.0,
        });
        let mut r = reading(0.3, 0);
        r.stalled = true;
        assert!(c.step(r, sec(t0, 1)).is_none(), "stall while idle: hold");
        r.utilisation = 0.6;
        assert!(c.step(r, sec(t0, 2)).is_none(), "stall while busy: hold");
        r.utilisation = 0.9;
        let d = c.step(r, sec(t0, 3)).unwrap();
        assert_eq!(
            d.reason,
            Reason::BandwidthHigh,
            "a saturated tier still moves up"
        );
        r.stalled = false;
        r.utilisation = 0.1;
        let d = c.step(r, sec(t0, 40)).unwrap();
        assert_eq!(d.reason, Reason::BandwidthLow, "no stall: down again");
    }

    #[test]
    fn hysteresis_band_holds_still() {
        let (mut c, t0) = ctl(4);
        c = c.with_pointer(Pointer {
            level: 1,
            fraction: 0.5,
        });
        let start = c.pointer();
        for s in 1..=100 {
            let u = if s % 2 == 0 { 0.51 } else { 0.79 };
            assert!(c.step(reading(u, 0), sec(t0, s)).is_none());
        }
        assert_eq!(c.pointer(), start);
    }

    #[test]
    fn flip_flop_backs_off_down_moves() {
        let (mut c, t0) = ctl(6);
        // Each step down overloads the tier, each step up idles it: a 2-cycle without back-off.
        let mut t = sec(t0, 0);
        let mut downs = 0;
        for _ in 0..200 {
            t += Duration::from_millis(500);
            let busy = c.moves() % 2 == 1; // just moved down -> overloaded
            if let Some(d) = c.step(reading(if busy { 0.9 } else { 0.2 }, 0), t) {
                downs += u32::from(d.reason == Reason::BandwidthLow);
            }
        }
        // 100 s: without back-off ~50 down moves; with it capped at 16 dwell periods, far fewer.
        assert!(downs < 15, "downs = {downs}");
        assert!(c.position <= 1);
    }

    #[test]
    fn dwell_between_moves() {
        let (c, t0) = ctl(4);
        let mut c = c.with_pointer(Pointer {
            level: 2,
            fraction: 0.0,
        });
        let ms = |m| t0 + Duration::from_millis(m);
        assert!(c.step(reading(0.1, 0), ms(999)).is_none());
        assert!(c.step(reading(0.1, 0), ms(1000)).is_some());
        assert!(c.step(reading(0.95, 0), ms(1999)).is_none());
        assert!(c.step(reading(0.95, 0), ms(2000)).is_some());
    }

    #[test]
    fn per_file_decisions_converge() {
        let (c, _) = ctl(6);
        for (level, fraction) in [(3, 0.25), (3, 0.5), (4, 0.75), (2, 0.0)] {
            let c = AutoPlace::new(c.config().clone(), Instant::now())
                .with_pointer(Pointer { level, fraction });
            let fast = (0..1000).filter(|&s| c.wants_fast(level, s)).count();
            assert_eq!(fast as f64, 1000.0 * fraction, "{level} {fraction}");
            // Any window of 4 consecutive files holds exactly 4 * fraction fast ones.
            let w = (17..21).filter(|&s| c.wants_fast(level, s)).count();
            assert_eq!(w as f64, 4.0 * fraction);
            assert!(c.wants_fast(level - 1, 5) && !c.wants_fast(level + 1, 5));
        }
    }

    #[test]
    fn per_file_counter_follows_pointer_changes() {
        let (c, _) = ctl(4);
        let mut c = c.with_pointer(Pointer {
            level: 1,
            fraction: 0.75,
        });
        let fast = (0..400).filter(|_| c.next_file_wants_fast(1)).count();
        assert_eq!(fast, 300);
        assert!((0..10).all(|_| c.next_file_wants_fast(0)));
        assert!((0..10).all(|_| !c.next_file_wants_fast(9)));
    }

    #[test]
    fn odd_step_rounds() {
        let mut cfg = AutoPlaceConfig::new(3);
        cfg.step = 0.3;
        assert_eq!(cfg.steps_per_level(), 3);
        cfg.step = 0.0;
        assert_eq!(cfg.steps_per_level(), 1);
        cfg.step = f64::NAN;
        assert_eq!(cfg.steps_per_level(), 1);
        let c = AutoPlace::new(cfg, Instant::now()).with_pointer(Pointer {
            level: 99,
            fraction: 0.0,
        });
        assert_eq!(c.pointer().to_string(), "L3+0%", "clamped");
    }

    #[test]
    fn history_is_bounded() {
        let mut cfg = AutoPlaceConfig::new(12);
        cfg.history = 5;
        let t0 = Instant::now();
        let mut c = AutoPlace::new(cfg, t0);
        for s in 1..=20 {
            c.step(reading(0.0, 0), sec(t0, s));
        }
        assert_eq!(c.moves(), 20);
        let h: Vec<_> = c.history().collect();
        assert_eq!(h.len(), 5);
        assert_eq!(h[4].to, c.pointer());
        assert_eq!(h[0].at, sec(t0, 16));
        assert!(h.windows(2).all(|w| w[0].to == w[1].from));
    }

    #[test]
    fn migration_hints() {
        let (mut c, t0) = ctl(4);
        assert_eq!(c.migration_hint(&reading(0.0, 0)), MigrationHint::None);
        let over = reading(0.5, 9 * GIB + GIB / 2);
        let want = over.space_used - 8 * GIB;
        let got = c.migration_hint(&over);
        let MigrationHint::MoveColdestDown { bytes } = got else {
            panic!("{got:?}");
        };
        assert!(bytes.abs_diff(want) <= 1);
        c.step(reading(0.1, 0), sec(t0, 1));
        assert_eq!(c.pointer().to_string(), "L0+25%");
        let target = (10 * GIB) as f64 * 0.8;
        assert_eq!(
            c.migration_hint(&reading(0.1, 0)),
            MigrationHint::MoveUp {
                level: 0,
                room: target as u64
            }
        );
        assert_eq!(
            c.migration_hint(&reading(0.1, 7 * GIB)),
            MigrationHint::MoveUp {
                level: 0,
                room: target as u64 - 7 * GIB
            },
            "room is what is left below the target"
        );
        assert_eq!(
            c.migration_hint(&reading(0.3, 0)),
            MigrationHint::None,
            "busy"
        );
        for s in 2..=4 {
            c.step(reading(0.1, 0), sec(t0, s));
        }
        assert!(
            matches!(
                c.migration_hint(&reading(0.1, 0)),
                MigrationHint::MoveUp { level: 0, .. }
            ),
            "L1+0%: L0 is the deepest covered"
        );
        c.step(reading(0.1, 0), sec(t0, 5));
        assert_eq!(c.pointer().to_string(), "L1+25%");
        c.step(reading(0.9, 0), sec(t0, 6));
        assert_eq!(c.pointer().to_string(), "L1+0%");
        assert!(
            matches!(
                c.migration_hint(&reading(0.1, 0)),
                MigrationHint::MoveUp { level: 0, .. }
            ),
            "after a move up, covered levels still go up into room"
        );
        assert_eq!(
            c.migration_hint(&reading(0.1, 8 * GIB)),
            MigrationHint::MoveUp { level: 0, room: 0 },
            "at the space target: no room, but migration may still make room for upper levels"
        );
    }

    #[test]
    fn after_the_watermark_the_pointer_holds_but_room_is_refilled() {
        let (c, t0) = ctl(4);
        let mut c = c.with_pointer(Pointer {
            level: 2,
            fraction: 0.0,
        });
        let full = 9 * GIB + GIB / 2;
        assert_eq!(
            c.step(reading(0.0, full), sec(t0, 1)).unwrap().reason,
            Reason::SpaceHigh
        );
        // Migration brings usage to the target; the levels the pointer covers did not fit, so
        // it holds still and there is no room to copy up into.
        let at_target = reading(0.0, 8 * GIB);
        assert!(c.step(at_target, sec(t0, 2)).is_none());
        assert_eq!(
            c.migration_hint(&at_target),
            MigrationHint::MoveUp { level: 1, room: 0 }
        );
        // Compaction deletes its inputs and usage drops below the target: the pointer still
        // holds, but the room is refilled with tables of the covered levels.
        let below = reading(0.0, 7 * GIB);
        assert!(c.step(below, sec(t0, 3)).is_none());
        assert!(matches!(
            c.migration_hint(&below),
            MigrationHint::MoveUp { level: 1, .. }
        ));
        // Well below the target (data deleted or compacted away): the pointer moves down.
        let emptied = reading(0.0, 5 * GIB);
        assert_eq!(
            c.step(emptied, sec(t0, 4)).unwrap().reason,
            Reason::BandwidthLow
        );
        assert!(matches!(
            c.migration_hint(&emptied),
            MigrationHint::MoveUp { .. }
        ));
    }

    #[test]
    fn zero_budget_counts_as_full() {
        let r = Reading {
            utilisation: 0.0,
            space_used: 1,
            space_budget: 0,
            stalled: false,
        };
        assert!(r.space_share() > DEFAULT_SPACE_HIGH);
        let (mut c, t0) = ctl(4);
        assert!(
            c.step(r, sec(t0, 1)).is_none(),
            "cannot move down into no room"
        );
    }
}

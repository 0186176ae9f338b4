//! Feeding the per-tier I/O monitor and the automatic placement controller.
//!
//! The head thread calls [`DbInner::sample_io_if_due`] on each tick. Every `SAMPLE_EVERY` it
//! hands the tiers' cumulative byte counters to the monitor (no hot-path cost: the counters
//! exist anyway), takes a window sample, and, with `placement = auto`, gives the controller a
//! reading of the fast tier: utilisation against its bandwidth ceiling, table space against
//! its budget, and whether writes stalled since the last sample. It also lets the reserve
//! lender (`reserve`) set how much of the flush reserve tier 0 holds, from the WAL's rate and
//! whether writes stalled, and keeps replicas (`replica`) within their room.

use super::DbInner;
use crate::options::Options;
use crate::placement::auto::{MigrationHint, Reading};
use crate::placement::iomon::{IoKind, TierWindow};
use crate::placement::reserve::{Activity, ReserveLender};
use crate::placement::Placer;
use crate::stats;
use crate::tier::{TierId, Tiers, WriteKind};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often the monitor is sampled (a tenth of its window).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The head thread's sampling state.
#[derive(Debug)]
pub(super) struct IoSampler {
    last: Option<Instant>,
    last_stall_micros: u64,
    /// With `placement = auto` and two or more tiers: lends the flush reserve to replicas
    /// while writes are quiet (fixed placements have none).
    lender: Option<ReserveLender>,
}

impl IoSampler {
    pub(super) fn new(opts: &Options, placer: &Placer, tiers: &Tiers) -> IoSampler {
        let auto = matches!(placer, Placer::Auto(_));
        let lender = (auto && tiers.flush_reserve_full() > 0).then(|| {
            ReserveLender::new(
                tiers.flush_reserve_full(),
                opts.memtable.write_buffer_size as u64,
            )
        });
        IoSampler {
            last: None,
            last_stall_micros: 0,
            lender,
        }
    }
}

impl DbInner {
    /// Samples the monitor and steps the placement controller when a sample is due.
    pub(super) fn sample_io_if_due(&self) {
        let now = Instant::now();
        let mut sampler = self.io_sampler.lock();
        if sampler
            .last
            .is_some_and(|t| now.duration_since(t) < SAMPLE_EVERY)
        {
            return;
        }
        sampler.last = Some(now);
        self.observe_counters(now);
        let windows = self.iomon.sample(now);
        let fast = windows.first();
        let stall = stats::load(&self.counters.stall_micros);
        let stalled = stall > sampler.last_stall_micros;
        sampler.last_stall_micros = stall;
        self.step_reserve_lender(&mut sampler, fast, stalled, now);
        drop(sampler);
        self.step_replicas();
        self.pace_background(fast.and_then(|w| w.ceiling));
        if let Placer::Auto(ctl) = &self.placer {
            let reading = Reading {
                utilisation: fast.and_then(|w| w.utilisation).unwrap_or(0.0),
                // NB: the share placement governs, without the flush reserve: with it, the
                // watermark would sit above what compactions may fill, and the pointer and
                // migration would never react to a full tier.
                space_used: self.fast_space_placed(),
                space_budget: self.tiers.table_budget(TierId::FAST, WriteKind::Compaction),
                stalled,
            };
            let hint = {
                let mut ctl = ctl.lock();
                ctl.step(reading, now);
                ctl.migration_hint(&reading)
            };
            let mut state = self.state.lock();
            state.migration = hint;
            drop(state);
            if hint != MigrationHint::None {
                self.bg_cv.notify_one();
            }
        }
    }

    /// Lets the reserve lender, if any, set how much of the flush reserve tier 0 holds, from
    /// the fast tier's WAL rate and whether a write stalled.
    fn step_reserve_lender(
        &self,
        sampler: &mut IoSampler,
        fast: Option<&TierWindow>,
        stalled: bool,
        now: Instant,
    ) {
        let Some(lender) = &mut sampler.lender else {
            return;
        };
        let activity = Activity {
            wal_bytes_per_sec: fast.map_or(0.0, |w| w.kind(IoKind::Wal).bytes_per_sec),
            stalled,
        };
        self.tiers.hold_flush_reserve(lender.step(activity, now));
    }

    /// Drops the coldest replicas while they take more than their room, and wakes a worker to
    /// make one while they are welcome and none is being copied.
    fn step_replicas(&self) {
        if !self.replicas_enabled() {
            return;
        }
        self.fit_replicas();
        if self.replicas_welcome() && !self.state.lock().replica_running {
            self.bg_cv.notify_one();
        }
    }

    /// Bytes of tables on the fast tier that count against the placement budget: all of them
    /// but the L0 tables inside the flush reserve. (The budget leaves the reserve out, so
    /// counting those would let a growing L0 push the reading past full and send deep tables
    /// down for room only flushes may use.)
    fn fast_space_placed(&self) -> u64 {
        let l0_on_fast: u64 = self.versions.current().levels[0]
            .iter()
            .filter(|f| f.tier.is_fast())
            .map(|f| f.size)
            .sum();
        let in_reserve = l0_on_fast.min(self.tiers.flush_reserve());
        self.tiers.fast().used().saturating_sub(in_reserve)
    }

    /// WAL priority on the fast tier: while foreground requests flow and L0 is not close to
    /// slowing writes, background writes to tier 0 are held to half its bandwidth ceiling (when
    /// the ceiling is known: configured or probed); otherwise they are not limited. Migration
    /// copies trickle while the foreground is busy.
    fn pace_background(&self, ceiling: Option<u64>) {
        let foreground = self.pipeline.foreground_busy.load(Ordering::Acquire);
        let l0 = self.versions.current().levels[0].len();
        let busy = foreground && l0 < self.opts.compaction.l0_slowdown_trigger / 2;
        let rate = ceiling.filter(|_| busy).map(|c| c / 2);
        self.tiers.background_limiter().set_rate(rate);
        let migration = foreground.then_some(self.opts.placement.auto_migration_busy_rate);
        self.migration_limiter.set_rate(migration);
    }

    /// Hands every tier's cumulative counters to the monitor. Operation counts: point reads
    /// served by the tier, WAL writes (tier 0: groups or runs), and table write requests.
    fn observe_counters(&self, now: Instant) {
        let c = &self.counters;
        let wal_ops = stats::load(&c.write_groups) + stats::load(&c.wal_runs);
        let tables = [
            (WriteKind::Flush, IoKind::Flush),
            (WriteKind::Compaction, IoKind::Compaction),
            (WriteKind::Migration, IoKind::Migration),
        ];
        for (t, tier) in self.tiers.iter() {
            let tc = &tier.counters;
            let written = |k: WriteKind| tc.written[k as usize].load(Ordering::Relaxed);
            let ops = |k: WriteKind| tc.write_ops[k as usize].load(Ordering::Relaxed);
            let reads = tc.read.load(Ordering::Relaxed);
            let served = tc.reads_served.load(Ordering::Relaxed);
            let mon = &self.iomon;
            let wal = written(WriteKind::Wal) + written(WriteKind::Meta);
            mon.observe_cumulative(t, IoKind::ForegroundRead, reads, served, now);
            mon.observe_cumulative(
                t,
                IoKind::Wal,
                wal,
                if t.is_fast() { wal_ops } else { 0 },
                now,
            );
            for (kind, io) in tables {
                mon.observe_cumulative(t, io, written(kind), ops(kind), now);
            }
        }
    }

    /// Per-tier rates for stats, one line each.
    pub(super) fn io_report(&self) -> Vec<stats::TierIo> {
        self.tiers
            .iter()
            .map(|(t, tier)| {
                let w = self.iomon.window(t);
                let bps = |k: IoKind| w.kind(k).bytes_per_sec;
                stats::TierIo {
                    name: tier.name.clone(),
                    read_bytes_per_sec: bps(IoKind::ForegroundRead),
                    wal_bytes_per_sec: bps(IoKind::Wal),
                    flush_bytes_per_sec: bps(IoKind::Flush),
                    compaction_bytes_per_sec: bps(IoKind::Compaction),
                    migration_bytes_per_sec: bps(IoKind::Migration),
                    ops_per_sec: w.total.ops_per_sec,
                    ceiling: w.ceiling,
                    utilisation: w.utilisation,
                }
            })
            .collect()
    }

    /// The placement mode and, for `auto`, its recent decisions (newest last).
    pub(super) fn placement_report(&self) -> (String, Vec<String>) {
        let history = match &self.placer {
            Placer::Auto(ctl) => ctl
                .lock()
                .history()
                .map(|d| {
                    format!(
                        "{} -> {} ({:?}, utilisation {:.2}, space {}/{})",
                        d.from,
                        d.to,
                        d.reason,
                        d.utilisation,
                        stats::human_bytes(d.space_used),
                        stats::human_bytes(d.space_budget)
                    )
                })
                .collect(),
            Placer::Fixed { .. } => Vec::new(),
        };
        (self.placer.describe(), history)
    }
}

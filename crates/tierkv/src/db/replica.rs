//! Replicas: copies on the fast tier of the slower tiers' most-read tables, kept in room no
//! table needs (`placement = auto`, `Options::auto_replicas`).
//!
//! Why: on a read-mostly load, tier 0's flush reserve and the headroom automatic placement
//! keeps below its space target sit empty while deep tables are read from the throttled
//! capacity tier. Lending that room to tables (a copy up that becomes the table) pays off, but
//! giving it back means moving tables down, which takes seconds a write burst does not have: a
//! burst after a pause finds the room full of deep tables and its writes wait (BENCHMARKS.md).
//! A replica gives its room back with an unlink.
//!
//! - **Which**: chosen by [`crate::placement::replica::pick`]: the table on a slower tier read
//!   most per byte, or with no reads yet the deepest level's oldest; never an L0 table or a
//!   compaction's input.
//! - **When**: one copy at a time, on any background worker no flush, compaction or migration
//!   wants (not only in a compaction slot: after a load, compactions hold the slot until the
//!   read-mostly run begins), while the flush reserve is lent (writes are quiet: `reserve`) and
//!   tier 0 has room for it besides tables, the WAL reserve, the held part of the flush
//!   reserve and a table's slack (`Tiers::charge_replica`). A copy stops at the next 64 KiB
//!   piece once either ends or a flush waits, and is not counted as a compaction
//!   (`wait_for_compactions` does not wait for it).
//! - **Given back**: a table placed on tier 0 first drops the coldest replicas it needs room
//!   from (`OutputCtx::place`); the monitor drops the coldest while replicas take more than
//!   their room (the lender took the reserve back); a deleted table drops its replica
//!   (`TableCache::evict`).
//! - **Reads** go to the replica once its copy is complete (`TableCache`), with the blocks the
//!   table had cached.
//! - **Durability**: none is needed. Replicas are never in the MANIFEST; a copy is
//!   byte-for-byte and every block read from it is checksummed like the table's own; open
//!   deletes every replica file it finds (they are unregistered).

use super::table_cache::TableCache;
use super::{DbInner, State};
use crate::error::Result;
use crate::placement::{replica, Placer};
use crate::tier::{FileKind, TierId};
use crate::version::{FileMeta, Version};
use std::sync::Arc;

/// One table to replicate on tier 0.
pub(super) struct ReplicaJob {
    pub file: Arc<FileMeta>,
}

impl DbInner {
    /// Replicas are kept: automatic placement over two or more tiers, the option on, and a
    /// database open for writes (a read-only open deletes no file, replicas included).
    pub(super) fn replicas_enabled(&self) -> bool {
        self.opts.placement.auto_replicas
            && !self.opts.read_only
            && matches!(self.placer, Placer::Auto(_))
            && self.tiers.count() > 1
    }

    /// New replicas are welcome while the flush reserve is lent: writes are quiet.
    pub(super) fn replicas_welcome(&self) -> bool {
        self.replicas_enabled() && self.tiers.flush_reserve() < self.tiers.flush_reserve_full()
    }

    /// Drops the coldest replicas while they take more than their room (see
    /// `Tiers::replicas_over_room`).
    pub(super) fn fit_replicas(&self) {
        let over = self.tiers.replicas_over_room();
        if over > 0 {
            drop_coldest(&self.table_cache, over);
        }
    }
}

/// Picks (and registers) the next table to replicate, if replicas are welcome, none is being
/// copied and the hottest candidate fits.
pub(super) fn pick(db: &DbInner, state: &mut State, version: &Version) -> Option<ReplicaJob> {
    if state.replica_running || !db.replicas_welcome() {
        return None;
    }
    let reads = |number| db.table_cache.unreplicated_reads(number);
    let file = replica::pick(version, &state.busy_files, reads)?;
    if !db.table_cache.begin_replica(&file) {
        return None;
    }
    state.replica_running = true;
    Some(ReplicaJob { file })
}

/// Copies the table to its replica file and lets reads use it. A copy that fails or is no
/// longer wanted is dropped; neither is an error of the database (the table is intact).
pub(super) fn run(db: &DbInner, job: &ReplicaJob) -> Result<()> {
    let f = &job.file;
    let from = db.tiers.path(f.tier, FileKind::Table, f.number);
    let to = db.tiers.path(TierId::FAST, FileKind::Replica, f.number);
    // NB: a copy stops for a waiting flush (it may hold the worker flushes would use) and
    // for a close.
    let wanted = || {
        let idle = {
            let state = db.state.lock();
            state.imm.is_empty() && !state.shutting_down
        };
        idle && db.replicas_welcome() && db.table_cache.has_replica(f.number)
    };
    // NB: a replica lives until its table is compacted away or its room is wanted.
    let copied = super::migrate::copy_file(
        db,
        (f.tier, &from),
        (TierId::FAST, &to),
        crate::env::Lifetime::Medium,
        &wanted,
    );
    let installed = match copied {
        Ok(true) => db.table_cache.finish_replica(f).unwrap_or(false),
        Ok(false) | Err(_) => false,
    };
    if !installed {
        db.table_cache.drop_replica(f.number);
        let _ = db.tiers.fs().remove_file(&to);
    }
    Ok(())
}

/// Drops replicas, least read per byte first, until `bytes` are given back (or none is left).
pub(super) fn drop_coldest(cache: &TableCache, bytes: u64) {
    let mut replicas = cache.replicas();
    replica::coldest_first(&mut replicas);
    let mut freed = 0;
    for r in replicas {
        if freed >= bytes {
            break;
        }
        freed += cache.drop_replica(r.number);
    }
}

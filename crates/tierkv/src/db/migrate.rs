//! Background migration of tables between tiers, for `placement = auto`.
//!
//! The head thread leaves the controller's [`MigrationHint`] in `State::migration`; an idle
//! background worker turns it into one [`Migration`] at a time:
//! - `MoveColdestDown`: the fast tier passed its space watermark. The coldest table on it goes
//!   to the capacity tier: the deepest level first (deeper data is read less per byte), the
//!   oldest file of that level first; never an L0 table.
//! - `MoveUp { level, room }`: the fast tier is idle. A table of a level the pointer covers
//!   that still sits on the capacity tier goes up, shallowest level first, if it fits in
//!   `room` (what is left below the space target), in the fast tier's budget and in its
//!   level's allowance (`placement::policy::deep_allowance`: deep levels leave upper ones room). If
//!   none does and deep levels hold more than their allowance, the coldest table goes down
//!   instead, making room for the upper levels (after a load, L1 waited on the capacity tier
//!   while L2 filled the fast one).
//!
//! A move is a copy under a new file number, synced with its directory, then one MANIFEST edit
//! that deletes the old number and adds the new one at the same level; the old file becomes
//! obsolete and is deleted like any compaction input. A crash at any point leaves either the
//! old table listed (the copy is an unlisted file, removed at the next open) or the new one.

use super::{DbInner, State};
use crate::error::Result;
use crate::placement::auto::MigrationHint;
use crate::placement::Placer;
use crate::stats::Counters;
use crate::tier::{FileKind, TierId, WriteKind};
use crate::version::{FileMeta, Version, VersionEdit};
use std::path::Path;
use std::sync::Arc;

/// Bytes copied per read and write.
///
/// NB: small, because copies run beside foreground reads. A throttled device passes a request
/// only when its byte budget allows, and reads queued behind it wait: a 1 MiB request holds a
/// 200 MB/s tier for 5 ms. With copies up running through a read-mostly run, 1 MiB pieces left
/// tierkv's p99 read latency above RocksDB's in the lab (BENCHMARKS.md, session 8).
const COPY_CHUNK: usize = 64 << 10;

/// One table to move.
pub(super) struct Migration {
    pub level: usize,
    pub file: Arc<FileMeta>,
    pub to_tier: TierId,
}

/// Picks (and claims as busy) the next table to move, or clears a hint with nothing to do.
pub(super) fn pick(db: &DbInner, state: &mut State, version: &Version) -> Option<Migration> {
    if !matches!(db.placer, Placer::Auto(_)) || db.tiers.count() < 2 {
        return None;
    }
    let candidate = match state.migration {
        MigrationHint::None => None,
        MigrationHint::MoveColdestDown { .. } => coldest_on_fast(version, state),
        MigrationHint::MoveUp { level, room } => promotable(db, version, state, level, room)
            .or_else(|| make_room_for_upper_levels(db, version, state)),
    };
    let Some(m) = candidate else {
        state.migration = MigrationHint::None;
        return None;
    };
    // One table per hint: the next sample decides whether more should move.
    state.migration = MigrationHint::None;
    state.busy_files.insert(m.file.number);
    state.compactions_running += 1;
    Some(m)
}

/// The deepest, oldest table on tier 0 that no job is using. L0 tables stay: compaction is
/// about to rewrite them anyway, and flushes have their own reserve.
fn coldest_on_fast(version: &Version, state: &State) -> Option<Migration> {
    let levels = version.levels.iter().enumerate().skip(1).rev();
    levels
        .flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
        .filter(|(_, f)| f.tier.is_fast() && !state.busy_files.contains(&f.number))
        .min_by_key(|(level, f)| (std::cmp::Reverse(*level), f.number))
        .map(|(level, f)| Migration {
            level,
            file: Arc::clone(f),
            to_tier: TierId::CAPACITY,
        })
}

/// A table of a level at or above `level` (covered by the pointer) on a slower tier, that fits
/// `room`, the fast tier's budget and its level's allowance (upper levels first: the
/// shallowest level's tables go first).
fn promotable(
    db: &DbInner,
    version: &Version,
    state: &State,
    level: usize,
    room: u64,
) -> Option<Migration> {
    let ctx = db.output_ctx();
    let room = db
        .tiers
        .table_budget(TierId::FAST, WriteKind::Migration)
        .saturating_sub(db.tiers.fast().used())
        .min(room);
    version
        .levels
        .iter()
        .enumerate()
        .take(level + 1)
        .flat_map(|(l, files)| files.iter().map(move |f| (l, f)))
        .find(|(l, f)| {
            !f.tier.is_fast()
                && f.size < room
                && !state.busy_files.contains(&f.number)
                && f.size <= ctx.deep_room(version, *l)
        })
        .map(|(level, f)| Migration {
            level,
            file: Arc::clone(f),
            to_tier: TierId::FAST,
        })
}

/// The coldest table on the fast tier, if deep levels hold room there that the levels above
/// should have ([`crate::placement::policy::deep_levels_over_allowance`]).
fn make_room_for_upper_levels(db: &DbInner, version: &Version, state: &State) -> Option<Migration> {
    if !db.output_ctx().deep_levels_over_allowance(version) {
        return None;
    }
    coldest_on_fast(version, state)
}

/// Copies the table to its new tier and swaps it in with one MANIFEST edit.
pub(super) fn run(db: &DbInner, m: &Migration) -> Result<()> {
    let reservation = db
        .output_ctx()
        .place(m.to_tier, m.file.size, WriteKind::Migration)?;
    if reservation.tier() != m.to_tier {
        // The target tier has no room after all: leave the table where it is.
        return Ok(());
    }
    let number = db.allocate_output();
    let result = copy_and_install(db, m, number);
    db.clear_pending(std::iter::once(number));
    drop(reservation);
    result
}

fn copy_and_install(db: &DbInner, m: &Migration, number: u64) -> Result<()> {
    let from = db.tiers.path(m.file.tier, FileKind::Table, m.file.number);
    let to = db.tiers.path(m.to_tier, FileKind::Table, number);
    let copied = copy_table(db, (m.file.tier, &from), (m.to_tier, &to));
    if let Err(e) = copied {
        let _ = db.tiers.fs().remove_file(&to);
        return Err(e);
    }
    let moved = FileMeta {
        number,
        tier: m.to_tier,
        ..(*m.file).clone()
    };
    let mut edit = VersionEdit::default();
    edit.deleted_files.push((m.level, m.file.number));
    edit.new_files.push(db.output_ctx().record(m.level, &moved));
    db.versions.log_and_apply(edit)?;
    Counters::add(&db.counters.migrations, 1);
    Ok(())
}

/// Copies table `from` to a new file `to`, synced with its directory (each with its tier).
fn copy_table(db: &DbInner, from: (TierId, &Path), to: (TierId, &Path)) -> Result<()> {
    copy_file(db, from, to, &|| true)?;
    db.tiers.fs().sync_dir(&db.tiers.get(to.0).dir)
}

/// Copies file `from` to a new file `to` (each with its tier) in [`COPY_CHUNK`] pieces paced
/// by the migration limiter, and syncs it; stops early, returning false, once `keep_going`
/// says so (it is asked before each piece).
pub(super) fn copy_file(
    db: &DbInner,
    from: (TierId, &Path),
    to: (TierId, &Path),
    keep_going: &dyn Fn() -> bool,
) -> Result<bool> {
    let ((from_tier, from), (tier, to)) = (from, to);
    let src = db.tiers.open_read(from_tier, from)?;
    let mut dst = db
        .tiers
        .create(tier, to, WriteKind::Migration, COPY_CHUNK)?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut offset = 0;
    while offset < src.size() {
        if !keep_going() {
            return Ok(false);
        }
        let n = (src.size() - offset).min(COPY_CHUNK as u64) as usize;
        db.migration_limiter.acquire(n);
        src.read_exact_at(offset, &mut buf[..n])?;
        dst.append(&buf[..n])?;
        offset += n as u64;
    }
    dst.sync()?;
    dst.close()?;
    // NB: the source is about to be deleted (a move) or read through the copy (a replica).
    src.drop_cache();
    Ok(true)
}

//! Running background migrations between tiers, for `placement = auto`.
//!
//! The head thread leaves the controller's hint in `State::migration`; an idle background
//! worker in a compaction slot asks [`crate::placement::migrate::pick`] for one table to move
//! (which table, and why, is documented there), claims it as busy, and runs the move here.
//!
//! A move is a copy under a new file number, synced with its directory, then one MANIFEST edit
//! that deletes the old number and adds the new one at the same level; the old file becomes
//! obsolete and is deleted like any compaction input. A crash at any point leaves either the
//! old table listed (the copy is an unlisted file, removed at the next open) or the new one.

use super::{DbInner, State};
use crate::env::Lifetime;
use crate::error::Result;
use crate::placement::auto::MigrationHint;
use crate::placement::migrate::{self, FastRoom, Migration};
use crate::placement::Placer;
use crate::stats::Counters;
use crate::tier::{FileKind, TierId, WriteKind};
use crate::version::{FileMeta, Version, VersionEdit};
use std::path::Path;

/// Bytes copied per read and write.
///
/// NB: small, because copies run beside foreground reads. A throttled device passes a request
/// only when its byte budget allows, and reads queued behind it wait: a 1 MiB request holds a
/// 200 MB/s tier for 5 ms, enough to lift the p99 latency of reads on a read-mostly run
/// (BENCHMARKS.md).
const COPY_CHUNK: usize = 64 << 10;

/// Takes the pending hint and picks (and claims as busy) the table to move for it, if any.
/// One table per hint: the next sample decides whether more should move.
pub(super) fn pick(db: &DbInner, state: &mut State, version: &Version) -> Option<Migration> {
    if !matches!(db.placer, Placer::Auto(_)) || db.tiers.count() < 2 {
        return None;
    }
    let hint = std::mem::replace(&mut state.migration, MigrationHint::None);
    if hint == MigrationHint::None {
        return None;
    }
    let m = migrate::pick(version, hint, &fast_room(db), &state.busy_files)?;
    state.busy_files.insert(m.file.number);
    state.compactions_running += 1;
    Some(m)
}

/// What a copy up must fit in now: tier 0's budget for migrations less what its tables use,
/// and the upper-levels-first budget.
fn fast_room(db: &DbInner) -> FastRoom {
    let free = db
        .tiers
        .table_budget(TierId::FAST, WriteKind::Migration)
        .saturating_sub(db.tiers.fast().used());
    FastRoom {
        free,
        budget: db.output_ctx().fast_budget(),
    }
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
    copy_and_install(db, m, number)
}

/// Copies the table to `number` on its new tier and swaps it in. The copy stays pending
/// (never deleted as obsolete) if the MANIFEST write fails: the edit may still have reached
/// the disk, as with a flush's or a compaction's outputs, and the failure stops writes until
/// the database is reopened.
fn copy_and_install(db: &DbInner, m: &Migration, number: u64) -> Result<()> {
    let from = db.tiers.path(m.file.tier, FileKind::Table, m.file.number);
    let to = db.tiers.path(m.to_tier, FileKind::Table, number);
    let copied = copy_table(db, (m.file.tier, &from), (m.to_tier, &to), m.level);
    if let Err(e) = copied {
        let _ = db.tiers.fs().remove_file(&to);
        db.clear_pending(std::iter::once(number));
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
    db.clear_pending(std::iter::once(number));
    Counters::add(&db.counters.migrations, 1);
    Ok(())
}

/// Copies table `from` of `level` to a new file `to`, synced with its directory (each with its
/// tier).
fn copy_table(
    db: &DbInner,
    from: (TierId, &Path),
    to: (TierId, &Path),
    level: usize,
) -> Result<()> {
    copy_file(db, from, to, Lifetime::for_level(level), &|| true)?;
    db.tiers.fs().sync_dir(&db.tiers.get(to.0).dir)
}

/// Copies file `from` to a new file `to` (each with its tier) in [`COPY_CHUNK`] pieces paced
/// by the migration limiter, and syncs it; stops early, returning false, once `keep_going`
/// says so (it is asked before each piece).
pub(super) fn copy_file(
    db: &DbInner,
    from: (TierId, &Path),
    to: (TierId, &Path),
    lifetime: Lifetime,
    keep_going: &dyn Fn() -> bool,
) -> Result<bool> {
    let ((from_tier, from), (tier, to)) = (from, to);
    let src = db.tiers.open_read(from_tier, from)?;
    let mut dst = db
        .tiers
        .create(tier, to, WriteKind::Migration, COPY_CHUNK, lifetime)?;
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

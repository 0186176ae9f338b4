//! Recovery of the group-commit WAL: replays the live log files in number order.
//!
//! Records must continue each other's sequence numbers, across files too. A damaged record or
//! a gap ends the history quietly when a crash can explain it (no later record proves that the
//! bytes were synced, see [`super::set`]); otherwise it is corruption, as the recovery mode
//! decides.

use crate::batch::WriteBatch;
use crate::env::Fs;
use crate::error::{Error, Result};
use crate::tier::{self, FileKind};
use crate::wal::log::{LogReader, RecoveryMode};
use crate::wal::{ReplayCtx, ReplaySink};
use std::path::{Path, PathBuf};

/// Replays the log files at or above the context's log number into `sink`.
pub(crate) fn replay(ctx: &ReplayCtx<'_>, sink: &mut dyn ReplaySink) -> Result<()> {
    let wals = live_wals(ctx)?;
    // Every log number is taken, also those after a point where replay stops: a new file must
    // never reuse the number of a log still on disk.
    if let Some(&last) = wals.last() {
        sink.mark_number_used(last);
    }
    let mut next_seq: Option<u64> = None;
    // Salvage keeps every intact batch, so it does not check for gaps.
    let check_gaps = ctx.mode != RecoveryMode::SkipAnyCorruptedRecords;
    'wals: for i in 0..wals.len() {
        let path = wal_path(ctx, wals[i]);
        let mut reader = LogReader::open(ctx.fs, &path, ctx.mode)?;
        let mut first_in_file = true;
        while let Some((offset, payload)) = reader.next_record()? {
            let defect = match WriteBatch::decode(payload) {
                None => Some(Defect::Undecodable),
                Some((seq, _)) if check_gaps && next_seq.is_some_and(|n| n != seq) => {
                    Some(Defect::Gap {
                        expected: next_seq.unwrap_or_default(),
                        found: seq,
                        at_file_start: first_in_file,
                    })
                }
                Some((seq, batch)) => {
                    sink.apply(seq, &batch)?;
                    next_seq = Some(seq + batch.len() as u64);
                    None
                }
            };
            first_in_file = false;
            if let Some(defect) = defect {
                match on_defect(ctx, &wals, i, &path, offset, &defect)? {
                    Flow::Skip => continue,
                    Flow::Stop => break 'wals,
                }
            }
        }
        if let Some((offset, what)) = reader.tail().damage {
            match on_defect(ctx, &wals, i, &path, offset, &Defect::Damaged(what))? {
                Flow::Skip => {}
                Flow::Stop => break,
            }
        }
    }
    Ok(())
}

fn wal_path(ctx: &ReplayCtx<'_>, number: u64) -> PathBuf {
    ctx.dir.join(tier::file_name(FileKind::Wal, number))
}

/// Log numbers in the directory at or above the MANIFEST's log number, ascending.
fn live_wals(ctx: &ReplayCtx<'_>) -> Result<Vec<u64>> {
    let mut wals: Vec<u64> = ctx
        .fs
        .list_dir(ctx.dir)?
        .iter()
        .filter_map(|n| match tier::parse_file_name(n) {
            Some((FileKind::Wal, num)) if num >= ctx.log_number => Some(num),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    Ok(wals)
}

/// Something wrong met while replaying a log.
enum Defect {
    /// The log reader found damage it did not already turn into an error.
    Damaged(String),
    /// A record with intact checksums whose payload is not a write batch.
    Undecodable,
    /// A record that does not continue the sequence numbers of the one before it.
    Gap {
        expected: u64,
        found: u64,
        at_file_start: bool,
    },
}

/// What replay does after a defect.
enum Flow {
    /// Leave the record out and go on (salvage mode).
    Skip,
    /// History ends here; later records and logs are not replayed.
    Stop,
}

/// Decides about a defect in log `wals[i]` at `offset`, by recovery mode and by whether a
/// crash can explain it.
fn on_defect(
    ctx: &ReplayCtx<'_>,
    wals: &[u64],
    i: usize,
    path: &Path,
    offset: u64,
    defect: &Defect,
) -> Result<Flow> {
    let (what, crash_explains) = match defect {
        // Bytes lost past this point, or an older log's unsynced tail lost: explainable unless
        // a later record proves those bytes had been synced.
        Defect::Damaged(what) => (what.clone(), !has_sync_evidence(ctx, &wals[i + 1..])?),
        Defect::Gap {
            expected,
            found,
            at_file_start: true,
        } => (
            format!("sequence gap: this WAL starts at {found}, the previous one ended before {expected}"),
            !has_sync_evidence(ctx, &wals[i..])?,
        ),
        Defect::Gap { expected, found, .. } => {
            (format!("sequence gap: expected {expected}, found {found}"), false)
        }
        Defect::Undecodable => ("WAL record is not a valid write batch".to_string(), false),
    };
    match ctx.mode {
        RecoveryMode::SkipAnyCorruptedRecords => Ok(Flow::Skip),
        RecoveryMode::PointInTime => Ok(Flow::Stop),
        RecoveryMode::TolerateCorruptedTail if crash_explains => Ok(Flow::Stop),
        _ => Err(Error::corruption(path, offset, what)),
    }
}

/// True if any record of the logs `numbers` was written after a sync of its file: then every
/// older log was complete on stable storage (see [`super::set`]).
fn has_sync_evidence(ctx: &ReplayCtx<'_>, numbers: &[u64]) -> Result<bool> {
    for &number in numbers {
        let fs: &dyn Fs = ctx.fs;
        let mut reader = LogReader::open(fs, &wal_path(ctx, number), RecoveryMode::PointInTime)?;
        while reader.next_record()?.is_some() {}
        if reader.max_synced_through() > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

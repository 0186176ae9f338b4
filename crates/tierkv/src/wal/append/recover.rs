//! Recovery of the append WAL: replays the live `.alog` files in number order, each from its
//! start, record by record, up to the first record that is missing, damaged or out of
//! sequence. Such a stop is a crash's lost unsynced tail unless a later intact record (in this
//! file, found by resynchronizing on the record alignment, or in a later one) says every write
//! below the stop had been durable: then it is corruption, as the recovery mode decides. A stop
//! at the very first record misses the write after the last one the database held before
//! replay (the MANIFEST's last sequence, [`ReplaySink::last_sequence`]).
//! `PointInTime` always stops quietly; `AbsoluteConsistency` also refuses a damaged (non-zero)
//! record; `SkipAnyCorruptedRecords` cannot skip what it cannot delimit, and stops like
//! `TolerateCorruptedTail`.

use super::{file_name, record_len, ALIGN, EXT, HEADER};
use crate::batch::WriteBatch;
use crate::coding;
use crate::env::{read_file, Fs};
use crate::error::{Error, Result};
use crate::wal::log::RecoveryMode;
use crate::wal::{ReplayCtx, ReplaySink};
use std::path::{Path, PathBuf};

/// An intact record: where it is, its claim and its batch.
pub(crate) struct Record {
    pub offset: u64,
    /// Bytes of the record, padding included.
    pub len: u64,
    /// The log file the record says it belongs to.
    pub log: u64,
    pub synced: u64,
    pub seq: u64,
    pub batch: WriteBatch,
}

/// Parses the record at `offset` of log `log`; `None` if it is not an intact one.
fn parse(data: &[u8], offset: u64, log: u64) -> Option<Record> {
    let record = parse_record(data.get(offset as usize..)?).ok()?;
    (record.log == log).then_some(Record { offset, ..record })
}

/// Parses the record at the start of `data` (its offset is left 0), or says what is wrong.
pub(crate) fn parse_record(data: &[u8]) -> std::result::Result<Record, &'static str> {
    let header = data
        .get(..HEADER)
        .ok_or("append-WAL record shorter than its header")?;
    let len = coding::get_u32(&header[4..]).unwrap_or_default() as usize;
    let body = data
        .get(4..HEADER + len)
        .ok_or("append-WAL record payload runs past the data")?;
    if coding::get_u32(header) != Some(coding::crc(body)) {
        return Err("append-WAL record checksum mismatch");
    }
    let (seq, batch) = WriteBatch::decode(&body[HEADER - 4..])
        .ok_or("append-WAL record payload is not a batch")?;
    // Replay numbers the batch's writes from `seq` on: a range past the last sequence number
    // was never written by this engine.
    seq.checked_add(batch.len() as u64)
        .ok_or("append-WAL record's sequence numbers overflow")?;
    Ok(Record {
        offset: 0,
        len: record_len(len),
        log: coding::get_u64(&header[8..]).unwrap_or_default(),
        synced: coding::get_u64(&header[16..]).unwrap_or_default(),
        seq,
        batch,
    })
}

/// Live log numbers (at or above the MANIFEST's log number), ascending.
fn live_logs(fs: &dyn Fs, dir: &Path, min: u64) -> Result<Vec<u64>> {
    let mut logs: Vec<u64> = fs
        .list_dir(dir)?
        .iter()
        .filter_map(|n| n.strip_suffix(&format!(".{EXT}"))?.parse().ok())
        .filter(|&n| n >= min)
        .collect();
    logs.sort_unstable();
    Ok(logs)
}

/// Removes the logs numbered below `log_number`: their memtables are in tables.
pub(crate) fn remove_below(fs: &dyn Fs, dir: &Path, log_number: u64) -> Result<()> {
    for n in live_logs(fs, dir, 0)? {
        if n < log_number {
            fs.remove_file(&dir.join(file_name(n)))?;
        }
    }
    Ok(())
}

/// Where replay stopped: the file, the offset, and the sequence number expected there.
struct Stop {
    path: PathBuf,
    offset: u64,
    expected: Option<u64>,
    what: &'static str,
}

/// Replays the live append logs into `sink`.
pub(crate) fn replay(ctx: &ReplayCtx<'_>, sink: &mut dyn ReplaySink) -> Result<()> {
    let logs = live_logs(ctx.fs, ctx.dir, ctx.log_number)?;
    if let Some(&last) = logs.last() {
        sink.mark_number_used(last);
    }
    // NB: the first live log's first write follows the writes the database already holds; if
    // that record is the one missing, this is the write whose durability a later claim proves.
    let first = sink.last_sequence().map(|last| last + 1);
    let mut next: Option<u64> = None;
    // The first live log, while every live log so far held no record.
    let mut empty_log: Option<u64> = None;
    for (i, &log) in logs.iter().enumerate() {
        let path = ctx.dir.join(file_name(log));
        let data = read_file(ctx.fs, &path)?;
        let mut offset = 0;
        let stop = loop {
            let Some(r) = parse(&data, offset, log) else {
                let rest = data.get(offset as usize..).unwrap_or_default();
                if is_zero(rest) {
                    break None;
                }
                let header = &rest[..HEADER.min(rest.len())];
                break Some(if is_zero(header) {
                    "missing record"
                } else {
                    "damaged record"
                });
            };
            if next.is_some_and(|n| n != r.seq) {
                break Some("sequence gap");
            }
            if next.is_none() && empty_log.is_some() {
                // NB: a switch removes a log it leaves empty (`AppendWal::rotate`), so a live
                // log without records lost them to a crash; the write before this record is
                // the last one it held.
                next = Some(r.seq.saturating_sub(1));
                break Some("sequence gap after a live log without records");
            }
            sink.apply(r.seq, &r.batch)?;
            next = Some(r.seq + r.batch.len() as u64);
            offset += r.len;
        };
        let Some(what) = stop else {
            if next.is_none() && empty_log.is_none() {
                empty_log = Some(log);
            }
            continue;
        };
        let stop = Stop {
            path,
            offset,
            expected: next.or(first),
            what,
        };
        if ctx.mode == RecoveryMode::PointInTime {
            return Ok(());
        }
        if ctx.mode == RecoveryMode::AbsoluteConsistency && what == "damaged record" {
            return Err(Error::corruption(
                &stop.path,
                stop.offset,
                "append WAL: damaged record",
            ));
        }
        if let Some(expected) = stop.expected {
            if proves_durable(ctx, &logs[i..], &data, &stop, expected)? {
                return Err(Error::corruption(
                    &stop.path,
                    stop.offset,
                    format!(
                        "append WAL: {} where write {expected} was proven durable by a later record",
                        stop.what
                    ),
                ));
            }
        }
        return Ok(());
    }
    Ok(())
}

/// True if an intact record after `stop` (later in its file, or in a later log) says write
/// `expected` was durable before it was written.
fn proves_durable(
    ctx: &ReplayCtx<'_>,
    logs: &[u64],
    data: &[u8],
    stop: &Stop,
    expected: u64,
) -> Result<bool> {
    // NB: from the stop itself: a record out of sequence is intact and its claim counts.
    let mut offset = stop.offset;
    while (offset as usize) + HEADER <= data.len() {
        if parse(data, offset, logs[0]).is_some_and(|r| r.synced > expected) {
            return Ok(true);
        }
        offset += ALIGN;
    }
    for &log in &logs[1..] {
        let data = read_file(ctx.fs, &ctx.dir.join(file_name(log)))?;
        let mut offset = 0;
        while let Some(r) = parse(&data, offset, log) {
            if r.synced > expected {
                return Ok(true);
            }
            offset = r.offset + r.len;
        }
    }
    Ok(false)
}

fn is_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::super::encode_record;
    use super::*;
    use crate::env::FaultFs;
    use crate::wal::CollectSink as Sink;
    use std::sync::Arc;

    const DIR: &str = "/db";

    fn batch_bytes(seq: u64, ops: usize) -> Vec<u8> {
        let mut b = WriteBatch::new();
        for i in 0..ops {
            b.put(format!("k{seq}-{i}"), b"v");
        }
        b.encode_with_seq(seq).to_vec()
    }

    /// Writes log `log` holding records (first seq, ops, synced claim) back to back, with the
    /// records whose index is in `holes` left as zeros, padded with zeros to 64 KiB.
    fn write_log(
        fs: &FaultFs,
        log: u64,
        records: &[(u64, usize, u64)],
        holes: &[usize],
    ) -> Vec<u64> {
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        let mut rec = Vec::new();
        for (i, &(seq, ops, synced)) in records.iter().enumerate() {
            encode_record(&mut rec, log, synced, &batch_bytes(seq, ops));
            offsets.push(data.len() as u64);
            if holes.contains(&i) {
                rec.fill(0);
            }
            data.extend_from_slice(&rec);
        }
        data.resize(64 << 10, 0);
        fs.write_raw(&Path::new(DIR).join(file_name(log)), &data);
        offsets
    }

    fn replay_all(fs: &Arc<FaultFs>, mode: RecoveryMode) -> Result<Vec<(u64, usize)>> {
        replay_after(fs, mode, None)
    }

    /// Replays into a database whose last sequence number is `last`, when given.
    fn replay_after(
        fs: &Arc<FaultFs>,
        mode: RecoveryMode,
        last: Option<u64>,
    ) -> Result<Vec<(u64, usize)>> {
        let ctx = ReplayCtx {
            fs: fs.as_ref(),
            dir: Path::new(DIR),
            log_number: 0,
            mode,
        };
        let mut sink = Sink(Vec::new(), last);
        replay(&ctx, &mut sink)?;
        Ok(sink.0)
    }

    fn fresh() -> Arc<FaultFs> {
        let fs = FaultFs::new(1);
        fs.create_dir_all(Path::new(DIR)).unwrap();
        fs
    }

    #[test]
    fn a_batch_numbered_past_the_last_sequence_is_damage_not_an_overflow() {
        let fs = fresh();
        write_log(&fs, 5, &[(1, 2, 0), (u64::MAX - 1, 2, 0)], &[]);
        // History: the first record, then the bad one stops it as a gap would.
        let got = replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap();
        assert_eq!(got, vec![(1, 2)]);
        let mut rec = Vec::new();
        encode_record(&mut rec, 5, 0, &batch_bytes(u64::MAX - 1, 2));
        assert_eq!(
            parse_record(&rec).err(),
            Some("append-WAL record's sequence numbers overflow")
        );
        write_log(&fs, 5, &[(u64::MAX - 1, 2, 0)], &[]);
        assert_eq!(
            replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
            vec![]
        );
    }

    #[test]
    fn record_layout_is_pinned() {
        let mut rec = Vec::new();
        encode_record(&mut rec, 7, 3, b"abc");
        assert_eq!(rec.len(), 32, "24-byte header, payload, padding to 8");
        assert_eq!(&rec[4..8], &3u32.to_le_bytes());
        assert_eq!(&rec[8..16], &7u64.to_le_bytes());
        assert_eq!(&rec[16..24], &3u64.to_le_bytes());
        assert_eq!(&rec[24..27], b"abc");
        assert_eq!(&rec[27..], &[0u8; 5]);
        assert_eq!(&rec[..4], &coding::crc(&rec[4..27]).to_le_bytes());
    }

    #[test]
    fn replays_logs_in_order_across_files() {
        let fs = fresh();
        write_log(&fs, 5, &[(1, 2, 0), (3, 1, 0)], &[]);
        write_log(&fs, 9, &[(4, 3, 4), (7, 1, 4)], &[]);
        assert_eq!(
            replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
            vec![(1, 2), (3, 1), (4, 3), (7, 1)]
        );
    }

    #[test]
    fn an_unsynced_hole_ends_history_quietly() {
        let fs = fresh();
        // Record 1 (seq 2) never reached the media; record 2 claims only seq < 2 durable.
        write_log(&fs, 5, &[(1, 1, 0), (2, 1, 1), (3, 1, 2)], &[1]);
        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::AbsoluteConsistency,
        ] {
            assert_eq!(replay_all(&fs, mode).unwrap(), vec![(1, 1)]);
        }
    }

    #[test]
    fn a_hole_below_a_record_proven_durable_is_corruption() {
        let fs = fresh();
        // Record 2 was written once every write below 3 was durable: seq 2 cannot be missing.
        let offsets = write_log(&fs, 5, &[(1, 1, 0), (2, 1, 1), (3, 1, 3)], &[1]);
        let err = replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap_err();
        match err {
            Error::Corruption { file, offset, what } => {
                assert_eq!(file, Path::new(DIR).join("000005.alog"));
                assert_eq!(offset, offsets[1]);
                assert!(what.contains("write 2 was proven durable"), "{what}");
            }
            other => panic!("expected corruption, got {other}"),
        }
        // The proof may sit in a later log too.
        let fs = fresh();
        write_log(&fs, 5, &[(1, 1, 0), (2, 1, 1)], &[1]);
        write_log(&fs, 6, &[(3, 1, 3)], &[]);
        assert!(replay_all(&fs, RecoveryMode::TolerateCorruptedTail)
            .unwrap_err()
            .is_corruption());
        assert_eq!(
            replay_all(&fs, RecoveryMode::PointInTime).unwrap(),
            vec![(1, 1)]
        );
    }

    #[test]
    fn a_lost_first_record_below_a_record_proven_durable_is_corruption() {
        // The database held writes up to 10; the log's first record (seq 11) is gone, and the
        // third was written once every write below 13 was durable.
        let fs = fresh();
        write_log(&fs, 5, &[(11, 1, 11), (12, 1, 12), (13, 1, 13)], &[0]);
        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::AbsoluteConsistency,
            RecoveryMode::SkipAnyCorruptedRecords,
        ] {
            match replay_after(&fs, mode, Some(10)).unwrap_err() {
                Error::Corruption { file, offset, what } => {
                    assert_eq!(file, Path::new(DIR).join("000005.alog"));
                    assert_eq!(offset, 0);
                    assert!(what.contains("write 11 was proven durable"), "{what}");
                }
                other => panic!("expected corruption, got {other}"),
            }
        }
        assert_eq!(
            replay_after(&fs, RecoveryMode::PointInTime, Some(10)).unwrap(),
            vec![]
        );
    }

    #[test]
    fn a_lost_first_record_nothing_proves_durable_ends_history_quietly() {
        // No record claims more than the writes the database already held.
        let fs = fresh();
        write_log(&fs, 5, &[(11, 1, 11), (12, 1, 11), (13, 1, 11)], &[0]);
        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::AbsoluteConsistency,
        ] {
            assert_eq!(replay_after(&fs, mode, Some(10)).unwrap(), vec![]);
        }
    }

    #[test]
    fn a_damaged_record_is_refused_under_absolute_consistency() {
        let fs = fresh();
        let offsets = write_log(&fs, 5, &[(1, 1, 0), (2, 1, 1)], &[]);
        fs.flip_bit(&Path::new(DIR).join(file_name(5)), offsets[1] + 30, 0);
        assert_eq!(
            replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
            vec![(1, 1)]
        );
        assert!(replay_all(&fs, RecoveryMode::AbsoluteConsistency)
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn a_sequence_gap_between_logs_ends_history() {
        let fs = fresh();
        write_log(&fs, 5, &[(1, 1, 0)], &[]);
        write_log(&fs, 6, &[(5, 1, 0)], &[]);
        assert_eq!(
            replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
            vec![(1, 1)]
        );
    }

    #[test]
    fn a_live_log_left_without_records_ends_history_before_newer_logs() {
        // A power loss took every record of log 5; log 6 kept its unsynced ones.
        let fs = fresh();
        write_log(&fs, 5, &[(1, 2, 0)], &[0]);
        write_log(&fs, 6, &[(3, 1, 0), (4, 1, 0)], &[]);
        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::AbsoluteConsistency,
            RecoveryMode::PointInTime,
        ] {
            assert_eq!(replay_all(&fs, mode).unwrap(), vec![]);
        }
        // Log 6's second record was written once every write below 3 was durable: log 5
        // cannot have lost its records to a crash.
        let fs = fresh();
        write_log(&fs, 5, &[(1, 2, 0)], &[0]);
        let offsets = write_log(&fs, 6, &[(3, 1, 0), (4, 1, 3)], &[]);
        match replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap_err() {
            Error::Corruption { file, offset, what } => {
                assert_eq!(file, Path::new(DIR).join("000006.alog"));
                assert_eq!(offset, offsets[0]);
                assert!(what.contains("without records"), "{what}");
            }
            other => panic!("expected corruption, got {other}"),
        }
        // The last live log may be empty: a crash right after it was created.
        let fs = fresh();
        write_log(&fs, 5, &[(1, 2, 0)], &[]);
        write_log(&fs, 6, &[], &[]);
        assert_eq!(
            replay_all(&fs, RecoveryMode::AbsoluteConsistency).unwrap(),
            vec![(1, 2)]
        );
    }

    #[test]
    fn logs_below_the_log_number_are_removed() {
        let fs = fresh();
        write_log(&fs, 5, &[(1, 1, 0)], &[]);
        write_log(&fs, 9, &[(2, 1, 0)], &[]);
        remove_below(fs.as_ref(), Path::new(DIR), 9).unwrap();
        assert_eq!(
            fs.list_dir(Path::new(DIR)).unwrap(),
            vec!["000009.alog".to_string()]
        );
    }
}

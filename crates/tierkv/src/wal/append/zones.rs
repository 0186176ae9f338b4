//! `wal = "zoned"`: the append WAL's records zone-appended to an emulated zoned device
//! (`WALZONES` on tier 0) through a [`ZoneLog`], whose zone manager keeps zone work out of
//! the write path.
//!
//! Records have the append WAL's layout, each padded to whole LBAs and appended at once (so at
//! most the device's append limit). A batch too large for one append is split over several
//! *part* records (flag [`SPLIT`] in the length field), each naming the batch's first sequence
//! number, its index and the number of parts; recovery applies the batch only when every part
//! is intact, so it is applied whole or not at all. Where a record lands is the device's choice, so offset order
//! is not sequence order: each memtable's log starts with a durable *marker* record (an empty
//! batch numbered like the memtable's first write), and recovery collects every intact record
//! of the live logs from every zone, orders them by sequence number, and replays from the
//! oldest live log's marker up to the first gap.
//!
//! INVARIANT: a zone is reset only once every log it holds a record of is below the MANIFEST's
//! log number (each append is tagged with its log number), and only after the manager
//! finished it.

use super::leader::Leader;
use super::{encode_record, record_len, HEADER};
use crate::batch::WriteBatch;
use crate::coding;
use crate::env::AlignedBuf;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::tier::Tiers;
use crate::wal::log::RecoveryMode;
use crate::wal::{ReplayCtx, ReplaySink};
use crate::zoned::emulator::EmulatedZoned;
use crate::zoned::log::ZoneLog;
use crate::zoned::{Geometry, ZoneState, ZonedDevice};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The device file on tier 0.
pub(crate) const DEVICE: &str = "WALZONES";
/// Set in a record's length field when the record is one part of a split batch.
const SPLIT: u32 = 1 << 31;
/// Bytes a part record's payload starts with: the batch's first sequence u64 | part index u32
/// | parts u32.
const PART_HEADER: usize = 16;
/// Share of a zone (percent) below which the active zone is replaced.
const REPLACE_PCT: f64 = 1.0;

/// The zoned side of an append WAL.
pub(crate) struct ZoneWal {
    dev: Arc<EmulatedZoned>,
    log: Arc<ZoneLog>,
    path: PathBuf,
    /// Padded record bytes one memtable's log may take before the memtable switches, so
    /// that the logs of the memtables not yet flushed never pin every zone.
    log_budget: u64,
    manager: Mutex<Option<JoinHandle<()>>>,
    /// Records go through a group-commit leader (the ablation's `wal.zoned_leader`).
    leader: Option<Leader>,
    /// Records are zone-appended; false: written at the write pointer (by the leader).
    by_append: bool,
}

impl ZoneWal {
    /// Opens (formatting if missing) the device of `opts` on tier 0 and empties its zones:
    /// recovery has replayed and flushed what they held.
    pub fn open(opts: &Options, tiers: &Tiers) -> Result<ZoneWal> {
        let path = tiers.fast().dir.join(DEVICE);
        // NB: `Db::open` checked the options (`check_options`) before recovery wrote anything.
        let g = Geometry::new(opts.wal.zone_size, opts.wal.zones);
        let dev = Arc::new(EmulatedZoned::open(
            tiers.fs().as_ref(),
            &path,
            g,
            opts.wal.zone_power_loss_protection,
        )?);
        let mut usable = Vec::new();
        for z in dev.report() {
            if matches!(z.state, ZoneState::ReadOnly | ZoneState::Offline) {
                continue;
            }
            dev.reset(z.id).map_err(|e| e.into_error(&path))?;
            usable.push(z.id);
        }
        let spare = usable.len().saturating_sub(crate::zoned::log::RESERVED + 1) as u64;
        let logs = opts.memtable.max_immutable_memtables as u64 + 2;
        let log_budget = (spare * filled_at_least(&g) / logs).max(g.append_limit);
        let device: Arc<dyn ZonedDevice> = dev.clone();
        let reserve = opts.wal.reserved_zones as usize;
        let log = ZoneLog::new(device, path.clone(), usable, REPLACE_PCT, reserve)?;
        Ok(ZoneWal {
            leader: opts.wal.zoned_leader.then(Leader::default),
            by_append: opts.wal.zoned_append,
            log_budget,
            dev,
            log,
            path,
            manager: Mutex::new(None),
        })
    }

    /// `record` padded to whole LBAs, aligned for `O_DIRECT`; an error if it is larger than one
    /// append may be.
    pub fn pad(&self, record: &[u8]) -> Result<AlignedBuf> {
        let g = self.dev.geometry();
        let len = (record.len() as u64).div_ceil(g.lba) * g.lba;
        if len > g.append_limit {
            return Err(Error::invalid(format!(
                "zoned WAL: a record of {} bytes is larger than the zone-append limit {} of {}; \
                 write smaller batches",
                record.len(),
                g.append_limit,
                self.path.display()
            )));
        }
        let mut buf = AlignedBuf::zeroed(len as usize);
        buf.as_mut_slice()[..record.len()].copy_from_slice(record);
        Ok(buf)
    }

    /// Bytes `record_len` takes on the device, padding included.
    pub fn padded(&self, record_len: u64) -> u64 {
        let lba = self.dev.geometry().lba;
        record_len.div_ceil(lba) * lba
    }

    /// See `log_budget`.
    pub fn log_budget(&self) -> u64 {
        self.log_budget
    }

    /// Bytes the records of a batch encoding of `payload_len` bytes take on the device.
    pub fn device_bytes(&self, payload_len: usize) -> u64 {
        let g = self.dev.geometry();
        let whole = self.padded(record_len(payload_len));
        if whole <= g.append_limit {
            return whole;
        }
        let per_part = part_bytes(g.append_limit);
        let parts = payload_len.div_ceil(per_part) as u64;
        parts * g.append_limit
    }

    /// Writes the batch encoding `payload` (first sequence `first`) of log `log_number`: one
    /// record, or parts of at most one append each when it does not fit one. With `fua` each
    /// append is durable when it returns.
    pub fn write_batch(
        &self,
        log_number: u64,
        synced: u64,
        first: u64,
        payload: &[u8],
        fua: bool,
    ) -> Result<()> {
        let limit = self.dev.geometry().append_limit;
        let mut rec = Vec::new();
        if self.padded(record_len(payload.len())) <= limit {
            encode_record(&mut rec, log_number, synced, payload);
            return self.append(log_number, &self.pad(&rec)?, fua);
        }
        let chunks: Vec<&[u8]> = payload.chunks(part_bytes(limit)).collect();
        for (index, chunk) in chunks.iter().enumerate() {
            encode_part(
                &mut rec,
                log_number,
                synced,
                (first, index, chunks.len()),
                chunk,
            );
            self.append(log_number, &self.pad(&rec)?, fua)?;
        }
        Ok(())
    }

    /// Writes a padded record of log `log_number`: appends it, or, with a leader, queues it
    /// for the leader's next group.
    pub fn append(&self, log_number: u64, record: &AlignedBuf, fua: bool) -> Result<()> {
        let Some(leader) = &self.leader else {
            return self.write_group(record.as_slice(), fua, log_number);
        };
        let limit = self.dev.geometry().append_limit as usize;
        let write = |bytes: &[u8], fua: bool, tag: u64| self.write_group(bytes, fua, tag);
        leader.write(log_number, record.as_slice(), fua, limit, &write)
    }

    /// Writes `bytes` (whole padded records) by zone append or at the write pointer.
    fn write_group(&self, bytes: &[u8], fua: bool, tag: u64) -> Result<()> {
        if self.by_append {
            self.log.append(bytes, fua, tag)?;
        } else {
            self.log.write_at_pointer(bytes, fua, tag)?;
        }
        Ok(())
    }

    /// Makes every completed append durable.
    pub fn flush(&self) -> Result<()> {
        self.dev.flush().map_err(|e| e.into_error(&self.path))
    }

    /// Gives the finished zones holding only logs below `log_number` back for reuse.
    pub fn release_below(&self, log_number: u64) {
        self.log.release_below(log_number);
    }

    /// The zone manager's work so far.
    pub fn stats(&self) -> crate::stats::ZonedWalStats {
        self.log.stats().report()
    }

    /// Starts the zone manager.
    pub fn spawn(&self) -> JoinHandle<()> {
        self.log.spawn_manager()
    }

    /// Stops the zone manager.
    pub fn stop(&self) {
        self.log.stop();
        if let Some(h) = self.manager.lock().take() {
            let _ = h.join();
        }
    }

    /// Writes the marker starting log `log_number` at sequence `first`, durably.
    pub fn mark(&self, log_number: u64, first: u64, synced: u64) -> Result<()> {
        let mut empty = WriteBatch::new();
        let mut rec = Vec::new();
        encode_record(&mut rec, log_number, synced, empty.encode_with_seq(first));
        let buf = self.pad(&rec)?;
        self.append(log_number, &buf, true)
    }
}

/// Removes the device of a database opened in another mode (after replay).
pub(crate) fn remove(tiers: &Tiers) -> Result<()> {
    let path = tiers.fast().dir.join(DEVICE);
    if tiers.fs().exists(&path) {
        tiers.fs().remove_file(&path)?;
    }
    Ok(())
}

/// Payload bytes of a batch each part record carries when one append holds `limit` bytes.
fn part_bytes(limit: u64) -> usize {
    limit as usize - HEADER - PART_HEADER
}

/// Checks the device options (`wal.zone_size`, `wal.zones`) of the WAL's device at `device`,
/// which `Db::open` does before recovery writes anything: a geometry no device can have, too
/// few zones for an active one and the reserved ones, or zones whose share for each memtable's
/// log holds no batch, so that every write would be refused.
pub(crate) fn check_options(opts: &Options, device: &Path) -> Result<()> {
    let (zone_size, zones) = (opts.wal.zone_size, opts.wal.zones);
    Geometry::new(zone_size, zones).validate(&format!(
        "zoned WAL device {} (options wal.zone_size, wal.zones)",
        device.display()
    ))?;
    let least = crate::zoned::log::RESERVED + 1;
    if (zones as usize) < least {
        return Err(Error::invalid(format!(
            "zoned device {}: the WAL needs at least {least} zones (one active, {} reserved \
             empty); option wal.zones is {zones}",
            device.display(),
            crate::zoned::log::RESERVED
        )));
    }
    if opts.max_batch_bytes() == 0 {
        return Err(Error::invalid(format!(
            "zoned WAL device {}: options wal.zones = {zones} and wal.zone_size = {zone_size} \
             leave the {} memtables' logs no room for a batch beside the active and reserved \
             zones; give more or larger zones",
            device.display(),
            opts.wal_groups()
        )));
    }
    Ok(())
}

/// The largest batch encoding `wal = "zoned"` accepts with zones of `zone_size` bytes, `zones`
/// zones and `max_immutable` immutable memtables: one log's share of the zones not active or
/// reserved, less the part records' headers, so that a batch never needs more zones than the
/// log may take.
pub(crate) fn largest_batch(zone_size: u64, zones: u32, max_immutable: usize) -> usize {
    let spare = u64::from(zones).saturating_sub(crate::zoned::log::RESERVED as u64 + 1);
    let g = Geometry::new(zone_size, zones);
    let share = spare * filled_at_least(&g) / (max_immutable as u64 + 2);
    (share / g.append_limit) as usize * part_bytes(g.append_limit)
}

/// Bytes of records a zone holds at least when it is replaced: an append that finds too
/// little room moves to the next zone and leaves the rest unused, less than one record (at
/// most one append, and records in zones smaller than two appends are smaller than half a
/// zone). Log budgets count zones by this, so that the logs of the memtables not yet flushed
/// never need more zones than there are, however large their records.
fn filled_at_least(g: &Geometry) -> u64 {
    g.zone_capacity - g.append_limit.min(g.zone_capacity / 2)
}

/// Encodes part `index` of `parts` of the batch starting at sequence `first` into `out`: a
/// record whose payload is the part header and `chunk`, flagged [`SPLIT`].
fn encode_part(
    out: &mut Vec<u8>,
    log: u64,
    synced: u64,
    (first, index, parts): (u64, usize, usize),
    chunk: &[u8],
) {
    let mut payload = Vec::with_capacity(PART_HEADER + chunk.len());
    coding::put_u64(&mut payload, first);
    coding::put_u32(&mut payload, index as u32);
    coding::put_u32(&mut payload, parts as u32);
    payload.extend_from_slice(chunk);
    encode_record(out, log, synced, &payload);
    let len = payload.len() as u32 | SPLIT;
    out[4..8].copy_from_slice(&len.to_le_bytes());
    let crc = coding::crc(&out[4..HEADER + payload.len()]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
}

/// Where a record lies: zone and offset.
type Place = (u32, u64);

/// One intact batch found on the device (a whole record, or every part of a split one).
struct Found {
    seq: u64,
    log: u64,
    synced: u64,
    place: Place,
    batch: WriteBatch,
}

/// One intact part record of a split batch.
struct Part {
    log: u64,
    synced: u64,
    place: Place,
    first: u64,
    index: u32,
    parts: u32,
    bytes: Vec<u8>,
}

/// What an intact record holds.
enum Parsed {
    Whole { seq: u64, batch: WriteBatch },
    Part(Part),
}

/// Replays the live records of the device, if there is one.
pub(crate) fn replay(ctx: &ReplayCtx<'_>, sink: &mut dyn ReplaySink) -> Result<()> {
    let path = ctx.dir.join(DEVICE);
    if !ctx.fs.exists(&path) {
        return Ok(());
    }
    let dev = EmulatedZoned::open_existing(ctx.fs, &path, false)?;
    let (mut found, parts) = scan(&dev, ctx.log_number)?;
    // A part's `synced` claim is evidence whether or not its batch is whole.
    let claims: Vec<(u64, Place)> = parts.iter().map(|p| (p.synced, p.place)).collect();
    found.extend(assemble(parts));
    let Some(max_log) = found.iter().map(|f| f.log).max() else {
        return Ok(());
    };
    sink.mark_number_used(max_log);
    found.sort_by_key(|f| (f.seq, !f.batch.is_empty()));
    let min_log = found.iter().map(|f| f.log).min().unwrap_or_default();
    let start = found
        .iter()
        .filter(|f| f.log == min_log && f.batch.is_empty())
        .map(|f| f.seq)
        .min();
    let mut next = start;
    if let Some(mut n) = next {
        let from = n;
        for f in found
            .iter()
            .filter(|f| !f.batch.is_empty() && f.seq >= from)
        {
            if f.seq != n {
                break;
            }
            sink.apply(f.seq, &f.batch)?;
            n += f.batch.len() as u64;
        }
        next = Some(n);
    }
    let expected = next.unwrap_or(0);
    if ctx.mode == RecoveryMode::PointInTime {
        return Ok(());
    }
    let proof = found
        .iter()
        .map(|f| (f.synced, f.place))
        .chain(claims)
        .find(|&(synced, _)| synced > expected);
    if let Some((synced, (zone, offset))) = proof {
        return Err(Error::corruption(
            &path,
            dev.geometry().zone_size * u64::from(zone) + offset,
            format!(
                "zoned WAL: write {expected} is missing, but the record at zone {zone} offset \
                 {offset} was written once every write below {synced} was durable"
            ),
        ));
    }
    Ok(())
}

/// The split batches whose every part is intact, joined; the others are dropped (a batch
/// with a part missing was not all written: it is a gap).
fn assemble(parts: Vec<Part>) -> Vec<Found> {
    let mut batches: std::collections::BTreeMap<(u64, u64), Vec<Part>> = Default::default();
    for part in parts {
        batches
            .entry((part.log, part.first))
            .or_default()
            .push(part);
    }
    let mut out = Vec::new();
    for (_, mut group) in batches {
        group.sort_by_key(|p| p.index);
        group.dedup_by_key(|p| p.index);
        let parts = group[0].parts as usize;
        let complete = group.len() == parts
            && group
                .iter()
                .enumerate()
                .all(|(i, p)| p.index as usize == i && p.parts as usize == parts);
        if !complete {
            continue;
        }
        let bytes: Vec<u8> = group.iter().flat_map(|p| p.bytes.iter().copied()).collect();
        let Some((seq, batch)) = WriteBatch::decode(&bytes) else {
            continue;
        };
        // A range past the last sequence number was never written: not a batch.
        if seq != group[0].first || seq.checked_add(batch.len() as u64).is_none() {
            continue;
        }
        out.push(Found {
            seq,
            log: group[0].log,
            synced: group[0].synced,
            place: group[0].place,
            batch,
        });
    }
    out
}

/// Every intact record of a log at or above `min_log`, from every zone: whole batches, and
/// the parts of split ones.
fn scan(dev: &EmulatedZoned, min_log: u64) -> Result<(Vec<Found>, Vec<Part>)> {
    let g = *dev.geometry();
    let (mut found, mut parts) = (Vec::new(), Vec::new());
    let mut data = vec![0u8; g.zone_capacity as usize];
    for z in dev.report() {
        if z.state == ZoneState::Offline || z.write_pointer == 0 {
            continue;
        }
        dev.read(z.id, 0, &mut data)
            .map_err(|e| e.into_error(dev.path()))?;
        let mut offset = 0u64;
        while offset + HEADER as u64 <= g.zone_capacity {
            let place = (z.id, offset);
            let Some((log, synced, parsed, len)) = parse(&data[offset as usize..], place) else {
                offset += g.lba;
                continue;
            };
            offset += record_len(len).div_ceil(g.lba) * g.lba;
            if log < min_log {
                continue;
            }
            match parsed {
                Parsed::Whole { seq, batch } => found.push(Found {
                    seq,
                    log,
                    synced,
                    place,
                    batch,
                }),
                Parsed::Part(part) => parts.push(part),
            }
        }
    }
    Ok((found, parts))
}

/// The record at the start of `data`, found at `place`: log, synced, what it holds, payload
/// length.
fn parse(data: &[u8], place: Place) -> Option<(u64, u64, Parsed, usize)> {
    let raw_len = coding::get_u32(data.get(4..8)?)?;
    let len = (raw_len & !SPLIT) as usize;
    let body = data.get(4..HEADER + len)?;
    if coding::get_u32(data)? != coding::crc(body) || len == 0 {
        return None;
    }
    let log = coding::get_u64(&data[8..])?;
    let synced = coding::get_u64(&data[16..])?;
    let payload = &body[HEADER - 4..];
    let parsed = if raw_len & SPLIT == 0 {
        let (seq, batch) = WriteBatch::decode(payload)?;
        // A range past the last sequence number was never written: not a record.
        seq.checked_add(batch.len() as u64)?;
        Parsed::Whole { seq, batch }
    } else {
        Parsed::Part(Part {
            log,
            synced,
            place,
            first: coding::get_u64(payload)?,
            index: coding::get_u32(payload.get(8..)?)?,
            parts: coding::get_u32(payload.get(12..)?)?,
            bytes: payload.get(PART_HEADER..)?.to_vec(),
        })
    };
    Some((log, synced, parsed, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{FaultFs, Fs};
    use crate::wal::log::RecoveryMode;
    use std::path::Path;

    #[derive(Default)]
    struct Sink(Vec<u64>);

    impl ReplaySink for Sink {
        fn mark_number_used(&mut self, _: u64) {}
        fn apply(&mut self, seq: u64, _: &WriteBatch) -> Result<()> {
            self.0.push(seq);
            Ok(())
        }
    }

    /// A device holding log 5's marker at sequence 1, then one-operation writes `seqs`, each
    /// with its `synced` claim, appended in the order given; returns where each landed.
    fn device(fs: &Arc<FaultFs>, writes: &[(u64, u64)]) -> Vec<(u32, u64)> {
        fs.create_dir_all(Path::new("/db")).unwrap();
        let g = Geometry::new(64 << 10, 4);
        let dev =
            EmulatedZoned::open(fs.as_ref(), &Path::new("/db").join(DEVICE), g, false).unwrap();
        let mut rec = Vec::new();
        let mut put = |seq: u64, synced: u64, ops: usize| {
            let mut b = WriteBatch::new();
            for i in 0..ops {
                b.put(format!("k{seq}-{i}"), b"v");
            }
            encode_record(&mut rec, 5, synced, b.encode_with_seq(seq));
            let mut buf = AlignedBuf::zeroed(4096);
            buf.as_mut_slice()[..rec.len()].copy_from_slice(&rec);
            let zone = if seq > 2 { 1 } else { 0 };
            (zone, dev.append(zone, buf.as_slice(), false).unwrap())
        };
        put(1, 1, 0);
        writes
            .iter()
            .map(|&(seq, synced)| put(seq, synced, 1))
            .collect()
    }

    fn replay_all(fs: &Arc<FaultFs>, mode: RecoveryMode) -> Result<Vec<u64>> {
        let ctx = ReplayCtx {
            fs: fs.as_ref(),
            dir: Path::new("/db"),
            log_number: 5,
            mode,
        };
        let mut sink = Sink::default();
        replay(&ctx, &mut sink)?;
        Ok(sink.0)
    }

    #[test]
    fn a_batch_numbered_past_the_last_sequence_is_not_a_record() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v");
        b.put(b"k2", b"v");
        let mut rec = Vec::new();
        encode_record(&mut rec, 5, 0, b.encode_with_seq(u64::MAX - 1));
        assert!(parse(&rec, (0, 0)).is_none());
        encode_record(&mut rec, 5, 0, b.encode_with_seq(u64::MAX - 2));
        assert!(parse(&rec, (0, 0)).is_some());
    }

    #[test]
    fn records_replay_in_sequence_order_whatever_their_place() {
        let fs = FaultFs::new(1);
        // Seq 3 and 4 land in zone 1, seq 1 and 2 in zone 0, appended out of order.
        device(&fs, &[(4, 1), (2, 1), (1, 1), (3, 1)]);
        let got = replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap();
        assert_eq!(got, vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_hole_ends_history_unless_a_later_record_proves_it_durable() {
        let fs = FaultFs::new(1);
        device(&fs, &[(1, 1), (3, 2)]);
        assert_eq!(
            replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
            vec![1]
        );

        let fs = FaultFs::new(1);
        let at = device(&fs, &[(1, 1), (3, 3)]);
        let err = replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap_err();
        let msg = err.to_string();
        assert!(err.is_corruption(), "{msg}");
        let (zone, offset) = at[1];
        assert!(
            msg.contains(&format!("zone {zone} offset {offset}")),
            "{msg}"
        );
        assert!(
            msg.contains("write 2 is missing") && msg.contains("WALZONES"),
            "{msg}"
        );
        assert_eq!(replay_all(&fs, RecoveryMode::PointInTime).unwrap(), vec![1]);
    }

    /// Log 5's marker at sequence 1, then a 300 KiB batch at sequence 1 split into parts, of
    /// which `keep` are appended (in reverse order, as concurrent appends may land); then a
    /// one-operation batch at sequence 2.
    fn device_with_split_batch(fs: &Arc<FaultFs>, keep: &dyn Fn(usize) -> bool) -> usize {
        fs.create_dir_all(Path::new("/db")).unwrap();
        let g = Geometry::new(1 << 20, 4);
        let dev =
            EmulatedZoned::open(fs.as_ref(), &Path::new("/db").join(DEVICE), g, false).unwrap();
        let append = |rec: &[u8]| {
            let len = (rec.len() as u64).div_ceil(g.lba) * g.lba;
            let mut buf = AlignedBuf::zeroed(len as usize);
            buf.as_mut_slice()[..rec.len()].copy_from_slice(rec);
            dev.append(0, buf.as_slice(), false).unwrap();
        };
        let mut rec = Vec::new();
        encode_record(&mut rec, 5, 0, WriteBatch::new().encode_with_seq(1));
        append(&rec);
        let mut big = WriteBatch::new();
        big.put(b"big", vec![7u8; 300 << 10]);
        let payload = big.encode_with_seq(1).to_vec();
        let chunks: Vec<&[u8]> = payload.chunks(part_bytes(g.append_limit)).collect();
        for (index, chunk) in chunks.iter().enumerate().rev() {
            if keep(index) {
                encode_part(&mut rec, 5, 0, (1, index, chunks.len()), chunk);
                append(&rec);
            }
        }
        let mut small = WriteBatch::new();
        small.put(b"small", b"v");
        encode_record(&mut rec, 5, 0, small.encode_with_seq(2));
        append(&rec);
        chunks.len()
    }

    #[test]
    fn a_split_batch_replays_whole_or_not_at_all() {
        let fs = FaultFs::new(1);
        let parts = device_with_split_batch(&fs, &|_| true);
        assert_eq!(parts, 3, "300 KiB takes three 128 KiB appends");
        assert_eq!(
            replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
            vec![1, 2]
        );
        for missing in 0..parts {
            let fs = FaultFs::new(1);
            device_with_split_batch(&fs, &|i| i != missing);
            assert_eq!(
                replay_all(&fs, RecoveryMode::TolerateCorruptedTail).unwrap(),
                Vec::<u64>::new(),
                "part {missing} lost: the batch is a gap, and what follows it is dropped"
            );
        }
    }
}

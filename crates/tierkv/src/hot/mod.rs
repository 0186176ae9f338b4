//! The hot store (PrismDB, `hot_tier = "slab"`): the popular small objects, kept in slab files
//! on the fast tier between the memtables and the LSM tree, with a DRAM index.
//!
//! Design (the full argument is in `docs/hot-tier.md`):
//! - A flush hands each key of the memtable either to the hot store (a key already in it, or a
//!   new one that fits a slot while the store is below its budget) or to L0. A key in the hot
//!   store takes all its later versions: a value too large for a slot goes to L0 and the store
//!   records an `InLsm` marker at its sequence. So for every key in the store, every LSM
//!   version is older than every hot version, and a read may stop at the hot store.
//! - Versions are written out of place; the version they supersede is freed once the flush
//!   that wrote its successor is in the MANIFEST, or kept while a live snapshot needs it.
//! - Crash safety: before a flush writes slots, an in-flight marker (`HOT-INFLIGHT`: the
//!   MANIFEST's log number and the flush's lowest sequence) is made durable. If recovery finds
//!   the log number unchanged, that flush never committed: its slots (sequence at or above the
//!   lowest) are ignored, since the WAL replays them, and damaged slots are torn writes of it.
//!   Otherwise a damaged slot is corruption.
//! - Demotion writes the demoted objects into an L0 table, installs it, then clears their
//!   slots; every hot version is older than any unflushed write, so the table is ordered
//!   correctly among L0's (by largest sequence).

pub(crate) mod msc;
pub(crate) mod slab;
pub(crate) mod tracker;

use crate::env::Fs;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::options::HotTierOptions;
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use slab::{SlabFile, SlotKind, CLASS_SIZES};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tracker::{Mapper, Tracker};

/// The hot store's directory under tier 0.
pub(crate) const DIR: &str = "hot";
/// The in-flight marker's file name (in [`DIR`]).
const MARKER: &str = "HOT-INFLIGHT";
/// Demotion starts above this share of the budget...
const HIGH_WATERMARK: f64 = 0.98;
/// ...and stops at this one.
const LOW_WATERMARK: f64 = 0.95;
/// Smallest tracker.
const MIN_TRACKED: usize = 64 << 10;

/// Where a version lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub class: usize,
    pub slot: u64,
}

/// One version of a key in the store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HotVersion {
    pub seq: SeqNo,
    pub kind: SlotKind,
    pub loc: Loc,
}

/// The DRAM index and slot allocation.
#[derive(Default)]
struct Index {
    /// Versions of each key, newest first.
    map: BTreeMap<Vec<u8>, Vec<HotVersion>>,
    /// Free slots per class (reused most recently freed first).
    free: Vec<Vec<u64>>,
    /// Slots per class ever handed out (the next never-used slot).
    next: Vec<u64>,
    /// Bytes of the slots in use.
    bytes: u64,
    /// Versions in the store.
    objects: u64,
}

impl Index {
    fn alloc(&mut self, class: usize) -> Loc {
        let slot = self.free[class].pop().unwrap_or_else(|| {
            self.next[class] += 1;
            self.next[class] - 1
        });
        self.bytes += CLASS_SIZES[class] as u64;
        self.objects += 1;
        Loc { class, slot }
    }

    /// Forgets a version's slot for accounting; the slot itself is freed by the caller.
    fn drop_version(&mut self, loc: Loc) {
        self.bytes -= CLASS_SIZES[loc.class] as u64;
        self.objects -= 1;
    }
}

/// What only the flush/demotion job touches.
#[derive(Default)]
struct Pending {
    /// Slots of superseded versions, freed when the writing job commits.
    to_free: Vec<Loc>,
    /// Free slots whose old contents are still on disk: cleared (zero header) by the next job
    /// before it writes, so a stale version can never outlive its key's demotion.
    clears: Vec<Loc>,
    /// Keys holding versions older than their newest (kept for snapshots).
    retained: BTreeSet<Vec<u8>>,
    /// Round-robin position of the MSC policy.
    cursor: usize,
}

/// The hot store's counters.
#[derive(Debug, Default)]
pub(crate) struct HotCounters {
    pub reads_hot: AtomicU64,
    pub reads_lsm: AtomicU64,
    pub demoted_objects: AtomicU64,
    pub demotion_rounds: AtomicU64,
    pub demotion_micros: AtomicU64,
    pub promotions: AtomicU64,
}

/// A memtable entry of one key: sequence, kind, value.
type MemVersion = (SeqNo, ValueKind, Vec<u8>);

/// Objects handed to the LSM by a flush or a demotion: internal key and value, sorted.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A planned demotion: the table entries to write and the versions they replace.
pub(crate) struct Demotion {
    pub entries: Entries,
    victims: Vec<(Vec<u8>, SeqNo, Loc)>,
}

/// The hot store.
pub(crate) struct HotStore {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
    slabs: Vec<SlabFile>,
    index: RwLock<Index>,
    pending: Mutex<Pending>,
    /// Per-key popularity.
    pub tracker: Tracker,
    opts: HotTierOptions,
    pub counters: HotCounters,
    /// The in-flight marker last written: `(log_number, lowest sequence)`.
    marker: Mutex<Option<(u64, SeqNo)>>,
}

impl HotStore {
    /// Opens the store in tier 0's directory `dir0`: scans every slab and rebuilds the index
    /// (newest sequence wins). `log_number` is the MANIFEST's; `lsm_entries` sizes the
    /// tracker. Returns the store and the highest sequence in it.
    pub fn open(
        fs: &Arc<dyn Fs>,
        dir0: &Path,
        opts: &HotTierOptions,
        log_number: u64,
        lsm_entries: u64,
        read_only: bool,
    ) -> Result<(HotStore, SeqNo)> {
        let dir = dir0.join(DIR);
        if !read_only {
            fs.create_dir_all(&dir)?;
        }
        let marker = read_marker(fs.as_ref(), &dir.join(MARKER))?;
        let uncommitted = marker.filter(|&(l, _)| l == log_number).map(|(_, lo)| lo);
        let mut slabs = Vec::with_capacity(CLASS_SIZES.len());
        let mut index = Index {
            free: vec![Vec::new(); CLASS_SIZES.len()],
            next: vec![0; CLASS_SIZES.len()],
            ..Index::default()
        };
        let mut pending = Pending::default();
        let mut wipe = Vec::new();
        let mut max_seq = 0;
        #[allow(clippy::needless_range_loop)] // NB: `class` also names files and free lists.
        for class in 0..CLASS_SIZES.len() {
            let slab = if read_only && !fs.exists(&dir.join(slab::file_name(class))) {
                None
            } else {
                Some(SlabFile::open(fs, &dir, class)?)
            };
            if let Some(slab) = &slab {
                let capacity = slab.capacity();
                index.next[class] = capacity;
                for slot in 0..capacity {
                    let loc = Loc { class, slot };
                    let buf = slab.read(slot)?;
                    match slab::decode_slot(&buf) {
                        Err(what) => {
                            if uncommitted.is_none() {
                                return Err(slab.corruption(slot, what));
                            }
                            // A torn write of the uncommitted job: its WAL replays it.
                            index.free[class].push(slot);
                            wipe.push(loc);
                        }
                        Ok(None) => index.free[class].push(slot),
                        Ok(Some(s)) if uncommitted.is_some_and(|lo| s.seq >= lo) => {
                            index.free[class].push(slot);
                            wipe.push(loc);
                        }
                        Ok(Some(s)) => {
                            max_seq = max_seq.max(s.seq);
                            let v = HotVersion {
                                seq: s.seq,
                                kind: s.kind,
                                loc,
                            };
                            let versions = index.map.entry(s.key).or_default();
                            // NB: after a restart no snapshot is live: only the newest counts.
                            let stale = match versions.first_mut() {
                                None => {
                                    versions.push(v);
                                    index.bytes += CLASS_SIZES[class] as u64;
                                    index.objects += 1;
                                    continue;
                                }
                                Some(cur) if cur.seq >= v.seq => v,
                                Some(cur) => std::mem::replace(cur, v),
                            };
                            index.free[stale.loc.class].push(stale.loc.slot);
                            pending.clears.push(stale.loc);
                        }
                    }
                }
                // NB: lowest slots first, so the store stays compact.
                index.free[class].reverse();
            }
            if let Some(slab) = slab {
                slabs.push(slab);
            }
        }
        if !read_only {
            // NB: the slab files' names must survive a power loss.
            fs.sync_dir(&dir)?;
        }
        if slabs.len() < CLASS_SIZES.len() {
            // A read-only open of a database whose store was never written: nothing to read.
            slabs.clear();
            index.map.clear();
        }
        if !read_only && !wipe.is_empty() {
            for loc in &wipe {
                slabs[loc.class].clear(loc.slot)?;
            }
            for slab in &slabs {
                slab.sync()?;
            }
        }
        let tracked = ((lsm_entries + index.map.len() as u64) as f64 * opts.tracker_share) as usize;
        let store = HotStore {
            dir,
            fs: Arc::clone(fs),
            slabs,
            index: RwLock::new(index),
            pending: Mutex::new(pending),
            tracker: Tracker::new(tracked.max(MIN_TRACKED)),
            opts: opts.clone(),
            counters: HotCounters::default(),
            marker: Mutex::new(marker),
        };
        Ok((store, max_seq))
    }

    /// The store's answer for `user_key` at `seq`: `Some(value, or None for a delete)`, or
    /// `None` if the LSM must answer (the key is not here, only newer versions are, or its
    /// newest visible version is in the LSM).
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> Result<Option<Option<Vec<u8>>>> {
        let index = self.index.read();
        let Some(v) = index
            .map
            .get(user_key)
            .and_then(|vs| vs.iter().find(|v| v.seq <= seq))
        else {
            return Ok(None);
        };
        let answer = match v.kind {
            SlotKind::InLsm => return Ok(None),
            SlotKind::Deletion => None,
            SlotKind::Value => Some(self.read_value(user_key, v)?),
        };
        drop(index);
        self.tracker.touch(user_key);
        self.counters.reads_hot.fetch_add(1, Ordering::Relaxed);
        Ok(Some(answer))
    }

    /// Reads version `v` of `user_key` (the index lock held, so its slot is not reused).
    fn read_value(&self, user_key: &[u8], v: &HotVersion) -> Result<Vec<u8>> {
        let slab = &self.slabs[v.loc.class];
        let slot = slab
            .read_slot(v.loc.slot)?
            .ok_or_else(|| slab.corruption(v.loc.slot, "indexed slot is free"))?;
        if slot.seq != v.seq || slot.key != user_key {
            return Err(slab.corruption(v.loc.slot, "slot holds another version"));
        }
        Ok(slot.value)
    }

    /// The sequence of the newest version of `user_key` here, if it has one.
    pub fn latest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        self.index
            .read()
            .map
            .get(user_key)
            .and_then(|vs| vs.first())
            .map(|v| v.seq)
    }

    /// Every key's newest version at or below `seq` in `[lower, upper)`, as internal-key
    /// entries for an iterator (`InLsm` versions are left to the LSM, which holds them).
    pub fn collect(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        seq: SeqNo,
    ) -> Result<Entries> {
        use std::ops::Bound;
        let mut out = Vec::new();
        if let (Some(l), Some(u)) = (lower, upper) {
            if l >= u {
                return Ok(out);
            }
        }
        let index = self.index.read();
        let lo = lower.map_or(Bound::Unbounded, Bound::Included);
        let hi = upper.map_or(Bound::Unbounded, Bound::Excluded);
        for (k, vs) in index.map.range::<[u8], _>((lo, hi)) {
            let Some(v) = vs.iter().find(|v| v.seq <= seq) else {
                continue;
            };
            match v.kind {
                SlotKind::InLsm => {}
                SlotKind::Deletion => {
                    out.push((key::internal_key(k, v.seq, ValueKind::Deletion), Vec::new()))
                }
                SlotKind::Value => out.push((
                    key::internal_key(k, v.seq, ValueKind::Value),
                    self.read_value(k, v)?,
                )),
            }
        }
        Ok(out)
    }

    /// Starts a job that writes slots: makes the in-flight marker `(log_number, lowest)`
    /// durable, then clears (durably) the free slots whose old contents are still on disk.
    fn begin(&self, log_number: u64, lowest: SeqNo) -> Result<()> {
        let mut marker = self.marker.lock();
        // NB: recovery flushes several memtables under one log number: the marker covers all.
        let lowest = match *marker {
            Some((l, lo)) if l == log_number => lo.min(lowest),
            _ => lowest,
        };
        *marker = Some((log_number, lowest));
        let text = format!("{log_number} {lowest}\n");
        crate::env::write_file_atomic(self.fs.as_ref(), &self.dir.join(MARKER), text.as_bytes())?;
        let clears = std::mem::take(&mut self.pending.lock().clears);
        if !clears.is_empty() {
            // NB: under the index lock: a cleared slot must not be handed out meanwhile.
            let _index = self.index.write();
            for loc in &clears {
                self.slabs[loc.class].clear(loc.slot)?;
            }
            self.sync_all()?;
        }
        Ok(())
    }

    fn sync_all(&self) -> Result<()> {
        for slab in &self.slabs {
            slab.sync()?;
        }
        Ok(())
    }

    /// Takes the part of a flushed memtable (`iter`, internal-key order) that belongs in the
    /// store: writes it to slabs and indexes it, and returns the rest for L0. `log_number` is
    /// the MANIFEST's now; `needed(lo, hi)` says whether a live snapshot reads in
    /// `[lo, hi)`. The slots are synced when this returns; [`HotStore::commit`] follows once
    /// the flush is in the MANIFEST.
    pub fn absorb(
        &self,
        iter: &mut dyn InternalIterator,
        log_number: u64,
        needed: &dyn Fn(SeqNo, SeqNo) -> bool,
    ) -> Result<Entries> {
        // Group the entries by user key, newest first within a key.
        let mut groups: Vec<(Vec<u8>, Vec<MemVersion>)> = Vec::new();
        let mut lowest = SeqNo::MAX;
        iter.seek_to_first();
        while iter.valid() {
            let p = key::parse_internal_key(iter.key())
                .ok_or_else(|| Error::corruption("memtable", 0, "bad internal key"))?;
            lowest = lowest.min(p.seq);
            if groups
                .last()
                .is_none_or(|(k, _)| k.as_slice() != p.user_key)
            {
                groups.push((p.user_key.to_vec(), Vec::new()));
            }
            let group = &mut groups.last_mut().expect("pushed").1;
            group.push((p.seq, p.kind, iter.value().to_vec()));
            iter.next();
        }
        iter.status()?;
        let mut lsm = Vec::new();
        if groups.is_empty() {
            return Ok(lsm);
        }
        self.begin(log_number, lowest)?;
        let budget = (self.opts.budget as f64 * HIGH_WATERMARK) as u64;
        for (user_key, versions) in groups {
            self.tracker.touch(&user_key);
            let (_, newest_kind, newest_value) = &versions[0];
            let in_store = self.index.read().map.contains_key(&user_key);
            let admit = in_store
                || (*newest_kind == ValueKind::Value
                    && slab::class_for(user_key.len(), newest_value.len()).is_some_and(|c| {
                        self.index.read().bytes + CLASS_SIZES[c] as u64 <= budget
                    }));
            if !admit {
                for (seq, kind, value) in versions {
                    lsm.push((key::internal_key(&user_key, seq, kind), value));
                }
                continue;
            }
            // Oldest first; an older memtable version only if a snapshot reads it.
            let seqs: Vec<SeqNo> = versions.iter().map(|v| v.0).collect();
            for (i, (seq, kind, value)) in versions.into_iter().enumerate().rev() {
                if i > 0 && !needed(seq, seqs[i - 1]) {
                    continue;
                }
                let slot_kind = match kind {
                    ValueKind::Deletion => SlotKind::Deletion,
                    ValueKind::Value if slab::class_for(user_key.len(), value.len()).is_some() => {
                        SlotKind::Value
                    }
                    ValueKind::Value => {
                        lsm.push((key::internal_key(&user_key, seq, kind), value.clone()));
                        SlotKind::InLsm
                    }
                };
                let bytes = if slot_kind == SlotKind::Value {
                    &value[..]
                } else {
                    &[][..]
                };
                self.put_version(&user_key, seq, slot_kind, bytes, needed)?;
            }
        }
        self.sync_all()?;
        lsm.sort_by(|a, b| key::compare_internal(&a.0, &b.0));
        Ok(lsm)
    }

    /// Writes one version of `user_key` to a fresh slot and indexes it; older versions no
    /// snapshot reads are freed when the job commits.
    fn put_version(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        kind: SlotKind,
        value: &[u8],
        needed: &dyn Fn(SeqNo, SeqNo) -> bool,
    ) -> Result<()> {
        let class = slab::class_for(user_key.len(), value.len()).ok_or_else(|| {
            Error::invalid(format!(
                "key of {} bytes too long for the hot store",
                user_key.len()
            ))
        })?;
        let bytes = slab::encode_slot(seq, kind, user_key, value);
        let loc = self.index.write().alloc(class);
        self.slabs[class].write(loc.slot, &bytes)?;
        let mut index = self.index.write();
        let versions = index.map.entry(user_key.to_vec()).or_default();
        versions.insert(0, HotVersion { seq, kind, loc });
        let freed = gc_versions(versions, needed);
        let retained = versions.len() > 1;
        for loc in &freed {
            index.drop_version(*loc);
        }
        drop(index);
        let mut pending = self.pending.lock();
        pending.to_free.extend(freed);
        if retained {
            pending.retained.insert(user_key.to_vec());
        } else {
            pending.retained.remove(user_key);
        }
        Ok(())
    }

    /// Frees what the committed job superseded, and the retained versions no snapshot reads
    /// any more (they are superseded by committed versions).
    pub fn commit(&self, needed: &dyn Fn(SeqNo, SeqNo) -> bool) {
        let mut pending = self.pending.lock();
        let mut index = self.index.write();
        let retained = std::mem::take(&mut pending.retained);
        for k in retained {
            let Some(versions) = index.map.get_mut(&k) else {
                continue;
            };
            let freed = gc_versions(versions, needed);
            let still = versions.len() > 1;
            for loc in &freed {
                index.drop_version(*loc);
            }
            pending.to_free.extend(freed);
            if still {
                pending.retained.insert(k);
            }
        }
        let to_free = std::mem::take(&mut pending.to_free);
        for loc in to_free {
            index.free[loc.class].push(loc.slot);
            pending.clears.push(loc);
        }
    }

    /// Whether the store has passed its high watermark.
    pub fn over_budget(&self) -> bool {
        self.index.read().bytes as f64 > self.opts.budget as f64 * HIGH_WATERMARK
    }

    /// Plans a demotion down to the low watermark. `ranges` are the candidates: the upper
    /// bounds (inclusive) of the capacity tier's tables in key order, with their entry
    /// counts; the last range is unbounded above. Popular keys stay, unless nothing else
    /// can go. Keys with versions kept for snapshots stay.
    pub fn plan_demotion(&self, bounds: &[(Vec<u8>, u64)]) -> Result<Option<Demotion>> {
        // NB: ranges must be non-empty: strictly increasing bounds only.
        let mut sorted: Vec<(Vec<u8>, u64)> = Vec::with_capacity(bounds.len());
        for b in bounds {
            if sorted.last().is_none_or(|l| l.0 < b.0) {
                sorted.push(b.clone());
            }
        }
        let bounds = &sorted[..];
        let index = self.index.read();
        let target = (self.opts.budget as f64 * LOW_WATERMARK) as u64;
        if index.bytes <= target {
            return Ok(None);
        }
        let mapper = self.mapper(&index);
        let mut rng = rand::thread_rng();
        // Range i: keys above bound i-1, up to bound i (the last one unbounded).
        let n = bounds.len() + 1;
        let range_of = |i: usize| {
            use std::ops::Bound;
            let lo = if i == 0 {
                Bound::Unbounded
            } else {
                Bound::Excluded(bounds[i - 1].0.as_slice())
            };
            let hi = bounds
                .get(i)
                .map_or(Bound::Unbounded, |b| Bound::Included(b.0.as_slice()));
            (lo, hi)
        };
        let mut popular_of = |k: &[u8]| mapper.is_popular(self.tracker.clock(k), rng.gen());
        let mut victims = Vec::new();
        let mut freed = 0u64;
        let mut taken = BTreeSet::new();
        let mut pending = self.pending.lock();
        for keep_popular in [true, false] {
            for _ in 0..n {
                if index.bytes - freed <= target {
                    break;
                }
                let mut stats = |i: usize| {
                    let mut r = msc::RangeStats {
                        flash_objects: bounds.get(i).map_or(0, |b| b.1),
                        ..Default::default()
                    };
                    for (k, vs) in index.map.range::<[u8], _>(range_of(i)) {
                        r.fast_objects += 1;
                        let clock = self.tracker.clock(k);
                        r.coldness += tracker::coldness(clock);
                        if keep_popular && vs.len() == 1 && mapper.is_popular(clock, 0.5) {
                            r.popular += 1;
                        }
                    }
                    r
                };
                let mut rng2 = rand::thread_rng();
                let Some(i) = msc::choose(
                    self.opts.msc_policy,
                    n,
                    &mut stats,
                    &mut pending.cursor,
                    &mut rng2,
                ) else {
                    break;
                };
                if !taken.insert((i, keep_popular)) {
                    continue;
                }
                for (k, vs) in index.map.range::<[u8], _>(range_of(i)) {
                    if index.bytes - freed <= target {
                        break;
                    }
                    if vs.len() != 1 || (keep_popular && popular_of(k)) {
                        continue;
                    }
                    freed += CLASS_SIZES[vs[0].loc.class] as u64;
                    victims.push((k.clone(), vs[0]));
                }
            }
        }
        drop(pending);
        if victims.is_empty() {
            return Ok(None);
        }
        victims.sort_by(|a, b| a.0.cmp(&b.0));
        let mut entries = Vec::new();
        for (k, v) in &victims {
            match v.kind {
                SlotKind::InLsm => {}
                SlotKind::Deletion => {
                    entries.push((key::internal_key(k, v.seq, ValueKind::Deletion), Vec::new()))
                }
                SlotKind::Value => entries.push((
                    key::internal_key(k, v.seq, ValueKind::Value),
                    self.read_value(k, v)?,
                )),
            }
        }
        Ok(Some(Demotion {
            entries,
            victims: victims
                .into_iter()
                .map(|(k, v)| (k, v.seq, v.loc))
                .collect(),
        }))
    }

    /// Starts a demotion: the marker (so a torn clear is not taken for corruption) and the
    /// pending clears.
    pub fn begin_demotion(&self, log_number: u64) -> Result<()> {
        self.begin(log_number, SeqNo::MAX)
    }

    /// Ends a demotion whose table is installed: drops the victims from the index and
    /// clears their slots, durably.
    pub fn finish_demotion(&self, demotion: Demotion) -> Result<()> {
        let mut index = self.index.write();
        let mut cleared = Vec::new();
        for (k, seq, loc) in demotion.victims {
            // NB: the job is the store's only writer, so the version is still the newest.
            let same = index
                .map
                .get(&k)
                .is_some_and(|vs| vs.len() == 1 && vs[0].seq == seq);
            if !same {
                continue;
            }
            index.map.remove(&k);
            index.drop_version(loc);
            cleared.push(loc);
        }
        for loc in &cleared {
            self.slabs[loc.class].clear(loc.slot)?;
        }
        self.sync_all()?;
        for loc in &cleared {
            index.free[loc.class].push(loc.slot);
        }
        let c = &self.counters;
        c.demoted_objects
            .fetch_add(cleared.len() as u64, Ordering::Relaxed);
        c.demotion_rounds.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The mapper for the store as it is: pins the hottest `pinned_share` of its objects.
    fn mapper(&self, index: &Index) -> Mapper {
        let pinned = (index.map.len() as f64 * self.opts.pinned_share) as u64;
        Mapper::from_histogram(self.tracker.histogram(), pinned)
    }

    /// The store's report.
    pub fn stats(&self) -> crate::stats::HotTierStats {
        let index = self.index.read();
        let mut by_class: Vec<(u64, u64, u64)> =
            CLASS_SIZES.iter().map(|&s| (s as u64, 0, 0)).collect();
        for vs in index.map.values() {
            for v in vs {
                by_class[v.loc.class].1 += 1;
                by_class[v.loc.class].2 += CLASS_SIZES[v.loc.class] as u64;
            }
        }
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        crate::stats::HotTierStats {
            objects: index.objects,
            bytes: index.bytes,
            by_class,
            reads_hot: load(&c.reads_hot),
            reads_lsm: load(&c.reads_lsm),
            demoted_objects: load(&c.demoted_objects),
            demotion_rounds: load(&c.demotion_rounds),
            demotion_micros: load(&c.demotion_micros),
            promotions: load(&c.promotions),
            pin_threshold: self.mapper(&index).threshold,
        }
    }
}

/// Drops from `versions` (newest first) each older version no snapshot reads: version i is
/// read by a snapshot in `[seq_i, seq_{i-1})`. Returns their slots.
fn gc_versions(versions: &mut Vec<HotVersion>, needed: &dyn Fn(SeqNo, SeqNo) -> bool) -> Vec<Loc> {
    let mut freed = Vec::new();
    let mut i = 1;
    while i < versions.len() {
        if needed(versions[i].seq, versions[i - 1].seq) {
            i += 1;
        } else {
            freed.push(versions.remove(i).loc);
        }
    }
    freed
}

/// Reads the in-flight marker: `(log_number, lowest sequence)`.
fn read_marker(fs: &dyn Fs, path: &Path) -> Result<Option<(u64, SeqNo)>> {
    if !fs.exists(path) {
        return Ok(None);
    }
    let text = crate::env::read_file(fs, path)?;
    let text = String::from_utf8_lossy(&text);
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>());
    match (it.next(), it.next()) {
        (Some(Ok(l)), Some(Ok(lo))) => Ok(Some((l, lo))),
        _ => Err(Error::Corruption {
            file: path.to_path_buf(),
            offset: 0,
            what: "bad hot-store marker".into(),
        }),
    }
}

/// An iterator over sorted internal-key entries.
pub(crate) struct VecIter {
    entries: Entries,
    pos: usize,
}

impl VecIter {
    /// Iterates `entries`, which are sorted by internal key.
    pub fn new(entries: Entries) -> VecIter {
        let pos = entries.len();
        VecIter { entries, pos }
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().saturating_sub(1);
        if self.entries.is_empty() {
            self.pos = 0;
        }
    }
    fn seek(&mut self, target: &[u8]) {
        self.pos = self
            .entries
            .partition_point(|e| key::compare_internal(&e.0, target) == std::cmp::Ordering::Less);
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn prev(&mut self) {
        self.pos = if self.pos == 0 {
            self.entries.len()
        } else {
            self.pos - 1
        };
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

//! The hot store (PrismDB, `hot_tier = "slab"`): the popular small objects, kept in slab files
//! on the fast tier between the memtables and the LSM tree, with a DRAM index.
//!
//! Design (the full argument is in `docs/hot-tier.md`):
//! - A flush first makes room (a demotion, `admit`), then hands each key of the memtable
//!   either to the hot store (a key already in it, or a new one whose newest version is a
//!   value that fits a slot) or to L0 (a delete of a key not in the store). A key in the hot
//!   store takes all its later versions: a value too large for a slot goes to L0 and the store
//!   records an `InLsm` marker at its sequence. So for every key in the store, every LSM
//!   version is older than every hot version, and a read may stop at the hot store.
//! - Versions are written out of place; the version they supersede is freed once the flush
//!   that wrote its successor is in the MANIFEST, or kept while a live snapshot needs it.
//!   A freed slot is reused as it is (recovery keeps a key's newest version only), and
//!   cleared only if its key leaves the store first (`Index::ghosts`).
//! - Crash safety: before a flush writes slots, an in-flight marker (`HOT-INFLIGHT`: the
//!   MANIFEST's log number and the flush's lowest sequence) is made durable. If recovery finds
//!   the log number unchanged, that flush never committed: its slots (sequence at or above the
//!   lowest) are ignored, since the WAL replays them, and damaged slots are torn writes of it.
//!   Otherwise a damaged slot is corruption.
//! - Demotion merges the demoted objects whose keys have no version above the bottom run into
//!   that run (`db::hot_bottom`), writes the rest into an L0 table, installs both, then clears
//!   their slots; every hot version is older than any unflushed write, so the table is ordered
//!   correctly among L0's (by largest sequence).
//! - Eviction: MSC (PrismDB, `msc`) or hotness migration (SplitKV, `weights`) picks the
//!   objects that leave; both hand them to the same demotion job below, so crash safety is
//!   shared.
//! - Promotion copies popular objects read from below L0 back into the store at their own
//!   sequence numbers, once checked to be their key's newest version (`promote`, and
//!   `db::hot`); its job is journalled like a flush's.

pub(crate) mod admit;
pub(crate) mod buckets;
pub(crate) mod iter;
pub(crate) mod msc;
pub(crate) mod partitioned;
pub(crate) mod promote;
pub(crate) mod sketch;
pub(crate) mod slab;
pub(crate) mod tracker;
pub(crate) mod weights;

use crate::env::Fs;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::options::{HotAdmission, HotEviction, HotTierOptions};
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use slab::{SlabFile, SlotKind, CLASS_SIZES};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tracker::{Mapper, Tracker};

pub(crate) use partitioned::HotPartitions;

/// The hot store's directory under tier 0.
pub(crate) const DIR: &str = "hot";
/// The job journal's file name (in [`DIR`]): the in-flight marker and the page images of the
/// last job that wrote slabs.
const JOURNAL: &str = "HOT-JOURNAL";
/// The journal's first bytes.
const JOURNAL_MAGIC: &[u8; 8] = b"TKVHOTJ1";
/// A free slot's header.
const CLEAR: [u8; slab::HEADER] = [0; slab::HEADER];
/// Most slot writes one journalled job takes: its journal holds at most this many 4 KiB
/// pages.
const WRITES_PER_JOB: usize = 1024;
/// Demotion starts above this share of the budget...
const HIGH_WATERMARK: f64 = 0.98;
/// ...and stops at this one.
const LOW_WATERMARK: f64 = 0.95;
/// Smallest tracker.
const MIN_TRACKED: usize = 64 << 10;

/// Where a version lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Whether the key also has a version in the capacity tier's tables (as far as known
    /// when it entered the store; the same for all its versions). In memory only.
    pub overlaps: bool,
}

/// The store's answer for a point read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HotRead {
    /// The version the read sees: a value, or `None` for a delete.
    Found(Option<Vec<u8>>),
    /// The LSM answers: the key is not here, or the version the read sees is an `InLsm`
    /// marker.
    Lsm,
    /// Only versions newer than the read's sequence are here. At a snapshot the LSM answers
    /// (versions a snapshot reads are kept, so the key entered the store after it). A read at
    /// no snapshot may have lost the race with a flush that superseded and freed the version
    /// it sees: it reads again at a newer sequence. Such a read gets this answer whenever the
    /// key's newest version is newer than its sequence, even if an older version kept for a
    /// snapshot is visible to it: that one may be older than the version the flush freed.
    OnlyNewer,
}

/// A key's versions in the store, newest first: nearly always one, kept inline (a key's
/// own allocation for it would take as much memory again as the version).
pub(crate) type Versions = smallvec::SmallVec<[HotVersion; 1]>;

/// The DRAM index and slot allocation.
#[derive(Default)]
struct Index {
    /// Versions of each key, newest first.
    map: BTreeMap<Vec<u8>, Versions>,
    /// Free slots per class (reused most recently freed first).
    free: Vec<Vec<u64>>,
    /// Free slots that still hold a superseded version of a key with a newer version here,
    /// by the key's hash ([`tracker::hash_key`]): reused without a clear, since recovery keeps
    /// only a key's newest version, but cleared before their key leaves the store
    /// ([`HotStore::finish_demotion`]), which would leave them its newest.
    ghosts: std::collections::HashMap<Loc, u64>,
    /// Slots per class ever handed out (the next never-used slot).
    next: Vec<u64>,
    /// Bytes of the slots in use.
    bytes: u64,
    /// Versions in the store.
    objects: u64,
}

impl Index {
    /// A slot of `class` for a job that clears `reusable` (freed slots whose old contents
    /// are still on disk, by class): one of those first, so its clear and its new contents
    /// are one page write, else a free slot, else a never-used one.
    fn alloc(&mut self, class: usize, reusable: &mut [Vec<u64>]) -> Loc {
        let slot = reusable[class]
            .pop()
            .or_else(|| {
                let slot = self.free[class].pop()?;
                self.ghosts.remove(&Loc { class, slot });
                Some(slot)
            })
            .unwrap_or_else(|| {
                self.next[class] += 1;
                self.next[class] - 1
            });
        self.bytes += CLASS_SIZES[class] as u64;
        self.objects += 1;
        Loc { class, slot }
    }

    /// Hands slots a job cleared and did not reuse to the free lists.
    fn free_cleared(&mut self, cleared: SlotsByClass) {
        for (class, slots) in cleared.into_iter().enumerate() {
            self.free[class].extend(slots);
        }
    }

    /// Forgets a version's slot for accounting; the slot itself is freed by the caller.
    fn drop_version(&mut self, loc: Loc) {
        self.bytes -= CLASS_SIZES[loc.class] as u64;
        self.objects -= 1;
    }

    /// Frees the slot of a superseded version of the key hashed `key_hash` (its newer
    /// version is here): on the free list at once, uncleared, as a ghost of its key.
    fn free_superseded(&mut self, loc: Loc, key_hash: u64) {
        self.free[loc.class].push(loc.slot);
        self.ghosts.insert(loc, key_hash);
    }

    /// Takes the ghosts of the keys hashed `gone` (keys leaving the store) for clearing;
    /// they stay on the free lists. A hash shared with another key only clears a ghost of
    /// that one too, which is as safe.
    fn take_ghosts(&mut self, gone: &std::collections::HashSet<u64>) -> Vec<Loc> {
        let mut taken = Vec::new();
        self.ghosts.retain(|&loc, key_hash| {
            let keep = !gone.contains(key_hash);
            if !keep {
                taken.push(loc);
            }
            keep
        });
        taken
    }
}

/// What only the flush/demotion job touches.
#[derive(Default)]
struct Pending {
    /// Slots of superseded versions and their keys' hashes, freed (as ghosts:
    /// [`Index::ghosts`]) when the writing job commits.
    to_free: Vec<(Loc, u64)>,
    /// Slots of demoted objects whose clears ride on the next job (`Clears::WithNextJob`):
    /// cleared (zero header) by it before it writes. Not on the free lists until then (only
    /// that job may reuse them: [`Index::alloc`]).
    clears: Vec<Loc>,
    /// Keys holding versions older than their newest (kept for snapshots).
    retained: BTreeSet<Vec<u8>>,
    /// Round-robin position of the MSC policy.
    cursor: usize,
}

impl Pending {
    /// Queues the slots of `key`'s superseded versions, freed when the writing job commits.
    fn supersede(&mut self, key: &[u8], freed: Vec<Loc>) {
        if freed.is_empty() {
            return;
        }
        let key_hash = tracker::hash_key(key);
        self.to_free
            .extend(freed.into_iter().map(|loc| (loc, key_hash)));
    }
}

/// The hot store's counters.
#[derive(Debug, Default)]
pub(crate) struct HotCounters {
    pub reads_hot: AtomicU64,
    pub reads_lsm: AtomicU64,
    pub demoted_objects: AtomicU64,
    /// Of those, objects merged straight into the capacity tier's bottom run.
    pub demoted_into_bottom: AtomicU64,
    pub demotion_rounds: AtomicU64,
    pub demotion_micros: AtomicU64,
    pub promotions: AtomicU64,
    /// Objects, entry bytes and rounds of the weight policy's migrations.
    pub migrated_objects: AtomicU64,
    pub migrated_bytes: AtomicU64,
    pub migration_rounds: AtomicU64,
    /// Where flushes placed values (items, value bytes): the store's slots, the LSM inline,
    /// the LSM as value-log pointers.
    pub placed_hot: [AtomicU64; 2],
    pub placed_lsm_inline: [AtomicU64; 2],
    pub placed_value_log: [AtomicU64; 2],
    /// Writes delayed while a demotion ran past the high watermark, and their waits.
    pub paced_writes: AtomicU64,
    pub paced_micros: AtomicU64,
    /// Slots iterators read.
    pub iterator_slot_reads: AtomicU64,
    /// Journalled jobs run, the slot writes (clears included) they made and the slab pages
    /// they wrote in place (each also written once to the journal): the store's own I/O on
    /// tier 0.
    pub jobs: AtomicU64,
    pub job_slot_writes: AtomicU64,
    pub job_pages: AtomicU64,
    /// Superseded versions' slots cleared because their key was demoted.
    pub ghost_clears: AtomicU64,
}

/// Slot writes of a job: each slot and the bytes written at its start.
type SlotWrites = Vec<(Loc, Vec<u8>)>;

/// Slot numbers per class index.
type SlotsByClass = Vec<Vec<u64>>;

/// `slots` grouped by class.
fn by_class(slots: Vec<Loc>) -> SlotsByClass {
    let mut out = vec![Vec::new(); CLASS_SIZES.len()];
    for loc in slots {
        out[loc.class].push(loc.slot);
    }
    out
}

/// A memtable entry of one key: sequence, kind, value.
type MemVersion = (SeqNo, ValueKind, Vec<u8>);

/// Objects handed to the LSM by a flush or a demotion: internal key and value, sorted.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A range of user keys.
pub(crate) type KeyRange = (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>);

/// When a demotion clears the slots of the objects it moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clears {
    /// In a job of its own, before it returns.
    Now,
    /// In the job that follows it within the same flush (the flush's slot writes). The slots
    /// are free at once, and a reused one is cleared and rewritten in that job's one page
    /// image. Until that job's journal is durable a crash finds the moved versions in both
    /// their slots and the demotion's table: the same sequence and value twice, and no newer
    /// version of those keys in any table (only a flush writes one, after that job), so the
    /// store's rule that its versions are the newest still holds after recovery.
    WithNextJob,
}

/// A planned demotion: the table entries to write and the versions they replace.
pub(crate) struct Demotion {
    pub entries: Entries,
    victims: Vec<(Vec<u8>, SeqNo, Loc)>,
    /// A weight-policy migration's average weight, taken off the kept objects once it is
    /// done; `None` for an MSC demotion.
    average: Option<u32>,
    /// The key ranges MSC took objects from (empty for a migration).
    pub ranges: Vec<KeyRange>,
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
    /// The promotion schedule and its candidates.
    pub promoter: promote::Promoter,
    /// MSC's per-bucket counters (locked after `index`, never before).
    buckets: Mutex<buckets::Buckets>,
    opts: HotTierOptions,
    pub counters: HotCounters,
    read_only: bool,
    /// Bumped each time a demotion drops objects from the index (under the index lock).
    epoch: AtomicU64,
    /// Live iterators and the demoted objects they may still need (locked after `index`).
    readers: Mutex<iter::Readers>,
    /// A demotion runs because the store would pass its high watermark: writes are paced.
    demoting: std::sync::atomic::AtomicBool,
    /// The in-flight marker last written: `(log_number, lowest sequence)`.
    marker: Mutex<Option<(u64, SeqNo)>>,
    /// Per-key access counts, with the weight eviction policy only.
    weights: Option<weights::Weights>,
    /// The database's values are tagged (`values = "split"`): value-log pointers stay in
    /// the LSM, where the value log counts their garbage.
    split_values: bool,
}

impl HotStore {
    /// Opens the store whose slabs and journal live in `dir` (tier 0's [`DIR`], or one
    /// partition's directory under it: `partitioned`): scans every slab and rebuilds the
    /// index (newest sequence wins). `log_number` is the MANIFEST's; `lsm_entries` sizes the
    /// tracker; `split_values` says the database's values are tagged (`values = "split"`).
    /// Returns the store and the highest sequence in it.
    pub fn open(
        fs: &Arc<dyn Fs>,
        dir: &Path,
        opts: &HotTierOptions,
        log_number: u64,
        lsm_entries: u64,
        read_only: bool,
        split_values: bool,
    ) -> Result<(HotStore, SeqNo)> {
        let dir = dir.to_path_buf();
        if !read_only {
            // NB: durably, or a power loss can take the directory with every slab in it.
            crate::env::create_dir_all_durable(fs.as_ref(), &dir)?;
        }
        // Finish the last job first: its journal holds every page it wrote in place.
        let journal = read_journal(fs.as_ref(), &dir.join(JOURNAL))?;
        let marker = journal.as_ref().map(|j| (j.log_number, j.lowest));
        let uncommitted = marker.filter(|&(l, _)| l == log_number).map(|(_, lo)| lo);
        let mut slabs = Vec::with_capacity(CLASS_SIZES.len());
        for class in 0..CLASS_SIZES.len() {
            if read_only && !fs.exists(&dir.join(slab::file_name(class))) {
                // A read-only open of a database whose store was never written.
                slabs.clear();
                break;
            }
            slabs.push(SlabFile::open(fs, &dir, class)?);
        }
        let mut overlay = std::collections::HashMap::new();
        for (class, page, image) in journal.map(|j| j.pages).unwrap_or_default() {
            let Some(slab) = slabs.get(class) else {
                continue;
            };
            if read_only {
                overlay.insert((class, page), image);
            } else {
                slab.write_page(page, &image)?;
            }
        }
        if !read_only {
            for slab in &slabs {
                slab.sync()?;
            }
            // NB: the slab files' names must survive a power loss.
            fs.sync_dir(&dir)?;
        }
        let mut index = Index {
            free: vec![Vec::new(); CLASS_SIZES.len()],
            next: vec![0; CLASS_SIZES.len()],
            ..Index::default()
        };
        let mut wipe = Vec::new();
        let mut max_seq = 0;
        for (class, slab) in slabs.iter().enumerate() {
            let capacity = slab.capacity();
            index.next[class] = capacity;
            let per_page = (slab::PAGE / slab.slot_size) as u64;
            let mut page_buf = Vec::new();
            for slot in 0..capacity {
                let page = slot / per_page;
                if slot % per_page == 0 {
                    page_buf = match overlay.get(&(class, page)) {
                        Some(image) => image.clone(),
                        None => slab.read_page(page)?,
                    };
                }
                let at = (slab::slot_offset(slab.slot_size, slot) % slab::PAGE as u64) as usize;
                let loc = Loc { class, slot };
                match slab::decode_slot(&page_buf[at..at + slab.slot_size]) {
                    Err(what) => return Err(slab.corruption(slot, what)),
                    Ok(None) => index.free[class].push(slot),
                    Ok(Some(s)) if uncommitted.is_some_and(|lo| s.seq >= lo) => {
                        // Written by a flush the MANIFEST never recorded: its WAL replays it.
                        index.free[class].push(slot);
                        wipe.push(loc);
                    }
                    Ok(Some(s)) => {
                        max_seq = max_seq.max(s.seq);
                        let v = HotVersion {
                            seq: s.seq,
                            kind: s.kind,
                            loc,
                            // NB: not known after a restart; counted as no overlap.
                            overlaps: false,
                        };
                        // NB: after a restart no snapshot is live: only the newest counts.
                        let mut seen = match index.map.entry(s.key) {
                            Entry::Occupied(seen) => seen,
                            Entry::Vacant(new) => {
                                new.insert(smallvec::smallvec![v]);
                                index.bytes += CLASS_SIZES[class] as u64;
                                index.objects += 1;
                                continue;
                            }
                        };
                        let key_hash = tracker::hash_key(seen.key());
                        let cur = &mut seen.get_mut()[0];
                        let stale = if cur.seq >= v.seq {
                            v
                        } else {
                            std::mem::replace(cur, v)
                        };
                        if stale.loc != loc {
                            // The newer version took the counted one's place: count its class.
                            index.bytes -= CLASS_SIZES[stale.loc.class] as u64;
                            index.bytes += CLASS_SIZES[class] as u64;
                        }
                        // NB: a ghost, as if its successor's flush had just committed.
                        index.free_superseded(stale.loc, key_hash);
                    }
                }
            }
            // NB: lowest slots first, so the store stays compact.
            index.free[class].reverse();
        }
        let tracked = tracked_keys(opts, lsm_entries + index.map.len() as u64);
        // The recovered keys, counted as no overlap (not known after a restart); the first
        // demotion round recounts them over the capacity tier's bounds of the day.
        let recovered = buckets::Buckets::count(
            Vec::new(),
            index
                .map
                .iter()
                .map(|(k, vs)| (k.as_slice(), vs[0].overlaps)),
        );
        let store = HotStore {
            dir,
            fs: Arc::clone(fs),
            slabs,
            index: RwLock::new(index),
            pending: Mutex::default(),
            tracker: Tracker::new(tracked),
            promoter: promote::Promoter::new(opts),
            buckets: Mutex::new(recovered),
            opts: opts.clone(),
            counters: HotCounters::default(),
            read_only,
            epoch: AtomicU64::new(0),
            readers: Mutex::default(),
            demoting: std::sync::atomic::AtomicBool::new(false),
            marker: Mutex::new(marker),
            // NB: in memory only: after a restart every object starts at weight 0.
            weights: (opts.eviction == HotEviction::Weight).then(weights::Weights::new),
            split_values,
        };
        if !wipe.is_empty() && !store.read_only() {
            // NB: before the log number moves on, after which they would look committed.
            let clears: Vec<_> = wipe.iter().map(|&loc| (loc, CLEAR.to_vec())).collect();
            store.run_job(log_number, uncommitted.unwrap_or(SeqNo::MAX), clears)?;
        }
        Ok((store, max_seq))
    }

    /// The store's answer for a point read of `user_key` at `seq` ([`HotRead`]).
    ///
    /// The slot is read without the index lock, so a read that waits on the device holds up
    /// no flush (a writer waiting for the lock would hold up every reader behind it). The
    /// slot may have been freed and reused meanwhile, or be read while a job rewrites its
    /// page: the version is checked (key, sequence, checksum), and a read that fails the
    /// check is done again under the lock, where no slot it indexes can change.
    /// `at_snapshot`: the read is at a snapshot its caller holds ([`HotRead::OnlyNewer`]).
    pub fn get(&self, user_key: &[u8], seq: SeqNo, at_snapshot: bool) -> Result<HotRead> {
        let v = match self.visible_version(&self.index.read(), user_key, seq, at_snapshot, true) {
            Ok(v) => v,
            Err(answer) => return Ok(answer),
        };
        let value = match v.kind {
            SlotKind::InLsm => return Ok(HotRead::Lsm),
            SlotKind::Deletion => None,
            SlotKind::Value => match self.read_unlocked(user_key, &v) {
                Some(value) => Some(value),
                None => return self.get_locked(user_key, seq, at_snapshot),
            },
        };
        Ok(self.counted_read(user_key, value))
    }

    /// [`HotStore::get`] with the slot read under the index lock (the read's weight is
    /// counted already).
    fn get_locked(&self, user_key: &[u8], seq: SeqNo, at_snapshot: bool) -> Result<HotRead> {
        let index = self.index.read();
        let v = match self.visible_version(&index, user_key, seq, at_snapshot, false) {
            Ok(v) => v,
            Err(answer) => return Ok(answer),
        };
        let value = match v.kind {
            SlotKind::InLsm => return Ok(HotRead::Lsm),
            SlotKind::Deletion => None,
            SlotKind::Value => Some(self.read_value(user_key, &v)?),
        };
        drop(index);
        Ok(self.counted_read(user_key, value))
    }

    /// The version of `user_key` a read at `seq` sees (a copy), or the answer when it sees
    /// none: [`HotRead::Lsm`] if the key is not here, [`HotRead::OnlyNewer`] if only newer
    /// versions are (or, for a read not `at_snapshot`, if the newest one is newer than `seq`).
    /// Under the weight policy a read the store answers counts in the key's weight if `count`
    /// (once per read), under the index lock (`index`), so a demotion cannot drop the key in
    /// between.
    fn visible_version(
        &self,
        index: &Index,
        user_key: &[u8],
        seq: SeqNo,
        at_snapshot: bool,
        count: bool,
    ) -> std::result::Result<HotVersion, HotRead> {
        let versions = index.map.get(user_key).ok_or(HotRead::Lsm)?;
        let v = version_at(versions, seq).ok_or(HotRead::OnlyNewer)?;
        // NB: a read at no snapshot sees only the newest version. Nothing keeps the version
        // it sees once a flush supersedes it, while an older one may stay for a snapshot
        // (`gc_versions` drops the versions between): that one would answer in its place.
        if !at_snapshot && v.seq != versions[0].seq {
            return Err(HotRead::OnlyNewer);
        }
        // NB: a marker sends the read to the LSM: the store did not answer it.
        if let (Some(w), true) = (&self.weights, count && v.kind != SlotKind::InLsm) {
            w.add(user_key, 1);
        }
        Ok(v)
    }

    /// The value of `v` read without the index lock, or `None` if the slot no longer holds
    /// exactly that version (freed and reused, or torn by a rewrite of its page) or could not
    /// be read: the caller reads again under the lock, which reports real damage.
    fn read_unlocked(&self, user_key: &[u8], v: &HotVersion) -> Option<Vec<u8>> {
        let slot = self.slabs[v.loc.class].read_slot(v.loc.slot).ok()??;
        (slot.seq == v.seq && slot.key == user_key).then_some(slot.value)
    }

    /// Counts a read the store answered with `value` (`None`: a delete).
    fn counted_read(&self, user_key: &[u8], value: Option<Vec<u8>>) -> HotRead {
        self.tracker.touch(user_key);
        self.counters.reads_hot.fetch_add(1, Ordering::Relaxed);
        self.observe_reads();
        HotRead::Found(value)
    }

    /// Counts a point read the LSM answered.
    pub fn count_lsm_read(&self) {
        self.counters.reads_lsm.fetch_add(1, Ordering::Relaxed);
        self.observe_reads();
    }

    /// Feeds the read counts to the promotion schedule.
    fn observe_reads(&self) {
        let c = &self.counters;
        let hot = c.reads_hot.load(Ordering::Relaxed);
        let reads = hot + c.reads_lsm.load(Ordering::Relaxed);
        self.promoter.observe(reads, hot);
    }

    /// Offers an object a point read found in a table below L0 for promotion: taken while an
    /// epoch runs if it fits a slot and the tracker holds its key at the hottest clock value
    /// and read more often lately than the objects demotions evict
    /// ([`Tracker::beats_evicted`]; checked again in the job). Returns true once a batch
    /// waits for the job.
    pub fn offer_promotion(&self, user_key: &[u8], seq: SeqNo, value: &[u8]) -> bool {
        self.wants_promotion(user_key, value) && self.promoter.offer(user_key, seq, value)
    }

    /// Whether an object would be taken as a promotion candidate now (see
    /// [`HotStore::offer_promotion`]).
    pub fn wants_promotion(&self, user_key: &[u8], value: &[u8]) -> bool {
        !self.read_only
            && self.promoter.promoting()
            && slab::class_for(user_key.len(), value.len()).is_some()
            && self.tracker.promotable(user_key)
    }

    /// Copies `objects` (user key, sequence, value: each the newest version of its key, which
    /// the caller checked against the memtables' flush order and the LSM) into the store as
    /// single versions at their own sequence numbers, for those with no version here that
    /// still beat what demotions evict, while the store is within its budget. Runs as a job
    /// like a flush's (the journal first), with the marker's lowest sequence at its maximum:
    /// the copies are of durable data, so recovery keeps them whatever the MANIFEST says.
    /// Returns how many were promoted.
    pub fn promote(&self, objects: Vec<promote::Candidate>, log_number: u64) -> Result<u64> {
        let (mut writes, mut reusable) = self.take_clears();
        let mut publish = Vec::new();
        {
            let mut index = self.index.write();
            for (user_key, seq, value) in objects {
                let popular = self.tracker.beats_evicted(&user_key);
                let Some(class) = slab::class_for(user_key.len(), value.len()) else {
                    continue;
                };
                let fits = index.bytes + CLASS_SIZES[class] as u64 <= self.opts.budget;
                if !popular || !fits || index.map.contains_key(&user_key) {
                    continue;
                }
                let loc = index.alloc(class, &mut reusable);
                writes.push((
                    loc,
                    slab::encode_slot(seq, SlotKind::Value, &user_key, &value),
                ));
                let kind = SlotKind::Value;
                let overlaps = true;
                publish.push((
                    user_key,
                    HotVersion {
                        seq,
                        kind,
                        loc,
                        overlaps,
                    },
                ));
            }
        }
        if publish.is_empty() {
            // Nothing allocated, so `writes` holds only the clears: they wait for the next job.
            let clears = writes.into_iter().map(|(loc, _)| loc);
            self.pending.lock().clears.extend(clears);
            return Ok(0);
        }
        self.run_job(log_number, SeqNo::MAX, writes)?;
        let promoted = publish.len() as u64;
        let mut index = self.index.write();
        index.free_cleared(reusable);
        let mut buckets = self.buckets.lock();
        for (user_key, v) in publish {
            buckets.add(&user_key, v.overlaps);
            index.map.insert(user_key, smallvec::smallvec![v]);
        }
        drop(buckets);
        drop(index);
        self.counters
            .promotions
            .fetch_add(promoted, Ordering::Relaxed);
        Ok(promoted)
    }

    /// Reads version `v` of `user_key` (the index lock held, so its slot is not reused).
    fn read_value(&self, user_key: &[u8], v: &HotVersion) -> Result<Vec<u8>> {
        let slab = &self.slabs[v.loc.class];
        checked_value(slab, user_key, v, slab.read_slot(v.loc.slot)?)
    }

    /// The value of each of `versions` (empty for a version that is not a `Value`), read
    /// many at a time, a slab file at a time in slot order ([`SlabFile::read_slots`]);
    /// checked like [`HotStore::read_value`]'s.
    fn read_values(&self, versions: &[(Vec<u8>, HotVersion)]) -> Result<Vec<Vec<u8>>> {
        let loc = |i: usize| versions[i].1.loc;
        let mut order: Vec<usize> = (0..versions.len())
            .filter(|&i| versions[i].1.kind == SlotKind::Value)
            .collect();
        order.sort_unstable_by_key(|&i| (loc(i).class, loc(i).slot));
        let mut values = vec![Vec::new(); versions.len()];
        for group in order.chunk_by(|&a, &b| loc(a).class == loc(b).class) {
            let slab = &self.slabs[loc(group[0]).class];
            let slots: Vec<u64> = group.iter().map(|&i| loc(i).slot).collect();
            for (&i, slot) in group.iter().zip(slab.read_slots(&slots)) {
                let (user_key, v) = &versions[i];
                values[i] = checked_value(slab, user_key, v, slot?)?;
            }
        }
        Ok(values)
    }

    /// Bytes of the slab files on tier 0 (they grow in steps of 64 pages, never shrink).
    pub fn file_bytes(&self) -> u64 {
        self.slabs.iter().map(SlabFile::file_bytes).sum()
    }

    /// The demotion epoch: readers that missed the store after it moved take a new view.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
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

    /// Takes the pending clears for a job: their writes (a zero header each, first in the
    /// job so a reused slot then gets its new contents), and the slots by class, for the
    /// job's allocations to reuse first ([`Index::alloc`]); the job hands those it did not
    /// reuse to the free lists once it wrote them ([`Index::free_cleared`]).
    fn take_clears(&self) -> (SlotWrites, SlotsByClass) {
        let clears = std::mem::take(&mut self.pending.lock().clears);
        let writes = clears.iter().map(|&loc| (loc, CLEAR.to_vec())).collect();
        (writes, by_class(clears))
    }

    /// Runs slot writes (`(slot, bytes)`, those of one slot applied in order) crash-safely,
    /// as journalled jobs ([`HotStore::run_one_job`]) of at most `WRITES_PER_JOB` writes
    /// each, so a job's journal (which holds its pages) stays a few MiB however large a flush
    /// is. Each job is atomic on its own, under the same in-flight marker: a crash between
    /// two leaves the first one's slots, which recovery treats as it treats any slot of the
    /// marker's flush (ignored if that flush never committed: the WAL replays it), and clears
    /// or promoted copies, which are safe alone (see `docs/hot-tier.md`, "Crash safety").
    ///
    /// The writes are taken in slot order (a stable sort, so one slot's clear still comes
    /// before its new contents): a freed slot's clear and its reuse, and slots sharing a
    /// page, then land in one job and one page write. In the order they came (clears first),
    /// a flush larger than a job cleared its reused slots in one job and rewrote them in
    /// another: two writes of each page (BENCHMARKS.md, "PrismDB: what ycsb-a waits for in
    /// the lab").
    fn run_job(
        &self,
        log_number: u64,
        lowest: SeqNo,
        mut writes: Vec<(Loc, Vec<u8>)>,
    ) -> Result<()> {
        writes.sort_by_key(|(loc, _)| (loc.class, loc.slot));
        let mut writes = writes.into_iter().peekable();
        loop {
            let job: Vec<(Loc, Vec<u8>)> = writes.by_ref().take(WRITES_PER_JOB).collect();
            self.run_one_job(log_number, lowest, job)?;
            if writes.peek().is_none() {
                return Ok(());
            }
        }
    }

    /// Runs one job's slot writes crash-safely. The pages they touch are composed in memory
    /// and written, with the in-flight marker `(log_number, lowest)`, to the journal
    /// (atomically and durably) before any is written in place; then the slabs are synced. A
    /// crash can tear or drop in-place page writes (and with them neighbouring slots of
    /// committed data); recovery rewrites the journal's pages first, so the job is either not
    /// started or complete.
    fn run_one_job(
        &self,
        log_number: u64,
        lowest: SeqNo,
        writes: Vec<(Loc, Vec<u8>)>,
    ) -> Result<()> {
        let mut marker = self.marker.lock();
        // NB: recovery flushes several memtables under one log number: the marker covers all.
        let lowest = match *marker {
            Some((l, lo)) if l == log_number => lo.min(lowest),
            _ => lowest,
        };
        *marker = Some((log_number, lowest));
        // Where each touched page's image starts in the journal, in (class, page) order: the
        // pages are composed in the journal's own buffer, so a job holds its pages once.
        let mut images: BTreeMap<(usize, u64), usize> = BTreeMap::new();
        // Each write's page and offset in it.
        let mut targets = Vec::with_capacity(writes.len());
        for (loc, _) in &writes {
            let slab = &self.slabs[loc.class];
            slab.ensure(loc.slot + 1)?;
            let offset = slab::slot_offset(slab.slot_size, loc.slot);
            let page = (loc.class, offset / slab::PAGE as u64);
            images.insert(page, 0);
            targets.push((page, (offset % slab::PAGE as u64) as usize));
        }
        let mut journal = Vec::with_capacity(28 + images.len() * (14 + slab::PAGE));
        journal.extend_from_slice(JOURNAL_MAGIC);
        journal.extend_from_slice(&log_number.to_le_bytes());
        journal.extend_from_slice(&lowest.to_le_bytes());
        journal.extend_from_slice(&(images.len() as u32).to_le_bytes());
        // Many page reads in flight at once, the cache holding at most a window of them.
        let pages: Vec<(usize, u64)> = images.keys().copied().collect();
        let hinted = slab::hinted_ahead(pages.len(), |i| {
            let (class, page) = pages[i];
            self.slabs[class].prefetch_page(page);
        });
        for (((class, page), at), _) in images.iter_mut().zip(hinted) {
            journal.extend_from_slice(&(*class as u16).to_le_bytes());
            journal.extend_from_slice(&page.to_le_bytes());
            journal.extend_from_slice(&[0; 4]); // the image's CRC, once composed
            *at = journal.len();
            journal.resize(*at + slab::PAGE, 0);
            self.slabs[*class].read_page_into(*page, &mut journal[*at..])?;
        }
        for ((_, bytes), (page, in_page)) in writes.iter().zip(targets) {
            let at = images[&page] + in_page;
            journal[at..at + bytes.len()].copy_from_slice(bytes);
        }
        for &at in images.values() {
            let crc = crc32c::crc32c(&journal[at..at + slab::PAGE]);
            journal[at - 4..at].copy_from_slice(&crc.to_le_bytes());
        }
        crate::env::write_file_atomic(self.fs.as_ref(), &self.dir.join(JOURNAL), &journal)?;
        let c = &self.counters;
        c.jobs.fetch_add(1, Ordering::Relaxed);
        c.job_slot_writes
            .fetch_add(writes.len() as u64, Ordering::Relaxed);
        c.job_pages
            .fetch_add(images.len() as u64, Ordering::Relaxed);
        let mut touched = BTreeSet::new();
        for (&(class, page), &at) in &images {
            self.slabs[class].write_page(page, &journal[at..at + slab::PAGE])?;
            touched.insert(class);
        }
        for class in touched {
            self.slabs[class].sync()?;
        }
        Ok(())
    }

    /// Clears the headers of `slots` (freed, their objects committed elsewhere), in slot
    /// order. A crash between two of its jobs ([`HotStore::run_job`]) leaves slots whose
    /// objects also live in tables, which recovery accepts as it accepts clears deferred to
    /// the next job.
    fn clear_slots(&self, log_number: u64, slots: impl Iterator<Item = Loc>) -> Result<()> {
        let mut slots: Vec<Loc> = slots.collect();
        slots.sort_unstable_by_key(|l| (l.class, l.slot));
        slots.dedup();
        let writes = slots.into_iter().map(|loc| (loc, CLEAR.to_vec())).collect();
        self.run_job(log_number, SeqNo::MAX, writes)
    }

    /// Takes `batch` (a flushed memtable's entries): every key already in the store, and
    /// every new key whose newest version is a value that fits a slot while the store's
    /// slots, less the versions this batch supersedes, stay within the budget; writes them
    /// to slabs, indexes them and returns the rest for L0. `log_number` is the MANIFEST's
    /// now; `needed(lo, hi)` says whether a live snapshot reads in `[lo, hi)`;
    /// `on_capacity(key)` whether a key new to the store may also have a version in the
    /// capacity tier's tables (for MSC's overlap counters). The slots are synced when this
    /// returns; [`HotStore::commit`] follows once the flush is in the MANIFEST. A running
    /// database makes room first (`admit`), so the budget turns keys away only when a
    /// memtable holds more than a demotion could free, and in recovery's flushes.
    pub fn absorb_batch(
        &self,
        batch: admit::FlushBatch,
        log_number: u64,
        needed: &dyn Fn(SeqNo, SeqNo) -> bool,
        on_capacity: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Entries> {
        let admit::FlushBatch {
            keys: groups,
            lowest,
        } = batch;
        let mut lsm = Vec::new();
        if groups.is_empty() {
            return Ok(lsm);
        }
        let (mut writes, mut reusable) = self.take_clears();
        let mut publish = Vec::new();
        // Keys taken, with how many writes of each the memtable held (their weight).
        let mut written: Vec<(Vec<u8>, u32)> = Vec::new();
        // Bytes of the versions this batch supersedes: still counted in the index until the
        // batch is published, but not once the flush commits.
        let mut superseded = 0u64;
        for (user_key, versions) in groups {
            let seen = self.tracker.touch(&user_key);
            let current = self
                .index
                .read()
                .map
                .get(&user_key)
                .and_then(|vs| vs.first())
                .map(|v| CLASS_SIZES[v.loc.class] as u64);
            let admit = match current {
                Some(bytes) => {
                    superseded += bytes;
                    true
                }
                None => self
                    .admissible_class(&user_key, &versions[0])
                    .is_some_and(|c| {
                        let net = self.index.read().bytes.saturating_sub(superseded);
                        net + CLASS_SIZES[c] as u64 <= self.admission_limit(seen)
                    }),
            };
            let in_store = current.is_some();
            if !admit {
                for (seq, kind, value) in versions {
                    self.count_placement(false, &user_key, kind, &value);
                    lsm.push((key::internal_key(&user_key, seq, kind), value));
                }
                continue;
            }
            written.push((user_key.clone(), versions.len() as u32));
            let overlaps = !in_store && on_capacity(&user_key);
            // Oldest first; an older memtable version only if a snapshot reads it.
            let seqs: Vec<SeqNo> = versions.iter().map(|v| v.0).collect();
            for (i, (seq, kind, value)) in versions.into_iter().enumerate().rev() {
                if i > 0 && !needed(seq, seqs[i - 1]) {
                    continue;
                }
                let to_slot = self.slot_class(&user_key, &value).is_some();
                self.count_placement(to_slot, &user_key, kind, &value);
                let slot_kind = match kind {
                    ValueKind::Deletion => SlotKind::Deletion,
                    ValueKind::Value if to_slot => SlotKind::Value,
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
                let class = slab::class_for(user_key.len(), bytes.len()).ok_or_else(|| {
                    Error::invalid(format!(
                        "key of {} bytes too long for the hot store",
                        user_key.len()
                    ))
                })?;
                let loc = self.index.write().alloc(class, &mut reusable);
                writes.push((loc, slab::encode_slot(seq, slot_kind, &user_key, bytes)));
                let v = HotVersion {
                    seq,
                    kind: slot_kind,
                    loc,
                    overlaps,
                };
                publish.push((user_key.clone(), v));
            }
        }
        self.run_job(log_number, lowest, writes)?;
        self.index.write().free_cleared(reusable);
        for (user_key, v) in publish {
            self.publish(user_key, v, needed);
        }
        self.add_write_weights(written);
        lsm.sort_by(|a, b| key::compare_internal(&a.0, &b.0));
        Ok(lsm)
    }

    /// Indexes a written version of `user_key`; older versions no snapshot reads are freed
    /// when the job commits.
    fn publish(&self, user_key: Vec<u8>, v: HotVersion, needed: &dyn Fn(SeqNo, SeqNo) -> bool) {
        let mut index = self.index.write();
        let versions = index.map.entry(user_key.clone()).or_default();
        let mut v = v;
        match versions.first() {
            Some(newest) => v.overlaps = newest.overlaps,
            None => self.buckets.lock().add(&user_key, v.overlaps),
        }
        versions.insert(0, v);
        let freed = gc_versions(versions, needed);
        let retained = versions.len() > 1;
        for loc in &freed {
            index.drop_version(*loc);
        }
        drop(index);
        let mut pending = self.pending.lock();
        pending.supersede(&user_key, freed);
        if retained {
            pending.retained.insert(user_key);
        } else {
            pending.retained.remove(&user_key);
        }
    }

    /// The slab class a value of `user_key` takes, or `None` if it stays in the LSM: too
    /// large for any slot, or (split values) a value-log pointer, whose garbage the value log
    /// counts only when the LSM drops it.
    fn slot_class(&self, user_key: &[u8], value: &[u8]) -> Option<usize> {
        if self.split_values && value.first() == Some(&crate::vlog::TAG_POINTER) {
            return None;
        }
        slab::class_for(user_key.len(), value.len())
    }

    /// Counts where a flush placed a version: a value in a slot (`to_slot`), or in the LSM,
    /// inline or (split values) as a pointer to its value-log record.
    fn count_placement(&self, to_slot: bool, user_key: &[u8], kind: ValueKind, value: &[u8]) {
        if kind != ValueKind::Value {
            return;
        }
        let c = &self.counters;
        let inline = if to_slot {
            &c.placed_hot
        } else {
            &c.placed_lsm_inline
        };
        let (path, bytes) = match self.split_values.then(|| crate::vlog::decode_stored(value)) {
            Some(Some(crate::vlog::Stored::Pointer(p))) => {
                let record = p.len as usize;
                let value_len = record.saturating_sub(crate::vlog::RECORD_HEADER + user_key.len());
                (&c.placed_value_log, value_len)
            }
            // NB: a tagged inline value: its first byte is the tag.
            Some(_) => (inline, value.len().saturating_sub(1)),
            None => (inline, value.len()),
        };
        path[0].fetch_add(1, Ordering::Relaxed);
        path[1].fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Adds each flushed key's writes to its weight (weight policy only).
    fn add_write_weights(&self, written: Vec<(Vec<u8>, u32)>) {
        let Some(w) = &self.weights else {
            return;
        };
        // NB: under the index lock, as every weight change (see `weights::Weights`).
        let index = self.index.read();
        for (user_key, writes) in written {
            if index.map.contains_key(&user_key) {
                w.add(&user_key, writes);
            }
        }
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
            pending.supersede(&k, freed);
            if still {
                pending.retained.insert(k);
            }
        }
        // NB: no clears: the newer version outranks them in recovery until the key leaves.
        for (loc, key_hash) in std::mem::take(&mut pending.to_free) {
            index.free_superseded(loc, key_hash);
        }
    }

    /// Bytes of slots this store may hold (with partitions, its share of `hot_budget`).
    pub fn budget(&self) -> u64 {
        self.opts.budget
    }

    /// Whether a demotion runs because the store would pass its high watermark.
    pub fn demoting(&self) -> bool {
        self.demoting.load(Ordering::Relaxed)
    }

    /// Marks a demotion running (`true`) or done; the write path paces writes meanwhile.
    pub fn set_demoting(&self, running: bool) {
        self.demoting.store(running, Ordering::Relaxed);
    }

    /// Bytes of slots the store may hold after taking a key new to it in a flush; `seen`:
    /// the tracker saw the key before this flush (read or written lately). The whole budget
    /// under `make-room` admission (the flush made room for every key first), under the
    /// weight policy (SplitKV's fast area takes every small item it has room for), and for a
    /// key seen before; under `when-free`, for a key seen for the first time, only up to
    /// where a demotion stops, the low watermark.
    ///
    /// Why: a flush that filled the store to its budget with keys written once and never
    /// read passed the high watermark, and the demotion that followed sent as many objects to
    /// the capacity tier, most of them those same keys: a load of a million keys into a full
    /// store demoted 394 000 objects in 60 rounds. Keys accessed before (updates of keys
    /// that are read, in a run) still take the room above the low watermark, and the
    /// demotion then evicts colder objects for them. (Keeping that room for keys as popular
    /// as promotion candidates alone halved ycsb-a's throughput: the updates it turned away
    /// went to L0.)
    fn admission_limit(&self, seen: bool) -> u64 {
        let budget = self.opts.budget;
        let when_free = self.opts.admission == HotAdmission::WhenFree;
        if !when_free || self.weights.is_some() || seen {
            return budget;
        }
        (budget as f64 * LOW_WATERMARK) as u64
    }

    /// Whether the store has passed its high watermark.
    pub fn over_budget(&self) -> bool {
        self.over_budget_with(0)
    }

    /// Whether the store would pass its high watermark with `room` more bytes: 98% of the
    /// budget for MSC, 80% for the weight policy.
    pub fn over_budget_with(&self, room: u64) -> bool {
        let watermark = match self.weights {
            Some(_) => weights::TRIGGER,
            None => HIGH_WATERMARK,
        };
        (self.index.read().bytes + room) as f64 > self.opts.budget as f64 * watermark
    }

    /// Bytes of slots promoting `objects` would take (the ones not in the store).
    pub fn promotion_room(&self, objects: &[promote::Candidate]) -> u64 {
        let index = self.index.read();
        objects
            .iter()
            .filter(|(k, _, _)| !index.map.contains_key(k))
            .filter_map(|(k, _, v)| slab::class_for(k.len(), v.len()))
            .map(|class| CLASS_SIZES[class] as u64)
            .sum()
    }

    /// Plans a demotion down to the low watermark, less `room` bytes kept free for a
    /// promotion. `ranges` are the candidates: the upper
    /// bounds (inclusive) of the capacity tier's tables in key order, with their entry
    /// counts; the last range is unbounded above. Popular keys stay, unless nothing else
    /// can go. Keys with versions kept for snapshots stay.
    ///
    /// With the weight policy, plans a migration instead ([`HotStore::plan_migration`]).
    pub fn plan_demotion(&self, bounds: &[(Vec<u8>, u64)], room: u64) -> Result<Option<Demotion>> {
        if self.weights.is_some() {
            return self.plan_migration(room);
        }
        // NB: ranges must be non-empty: strictly increasing bounds only.
        let mut sorted: Vec<(Vec<u8>, u64)> = Vec::with_capacity(bounds.len());
        for b in bounds {
            if sorted.last().is_none_or(|l| l.0 < b.0) {
                sorted.push(b.clone());
            }
        }
        let bounds = &sorted[..];
        // NB: the cursor is copied out: `pending` is never locked inside `index` here, as
        // `commit` takes them the other way round.
        let mut cursor = self.pending.lock().cursor;
        let index = self.index.read();
        let target = ((self.opts.budget as f64 * LOW_WATERMARK) as u64).saturating_sub(room);
        if index.bytes <= target {
            return Ok(None);
        }
        let mapper = self.mapper(&index);
        let bucket_bounds: Vec<Vec<u8>> = bounds.iter().map(|b| b.0.clone()).collect();
        let mut buckets = self.buckets.lock();
        if !buckets.has_bounds(&bucket_bounds) {
            // Compaction changed the capacity tier's tables: recount in one pass.
            let keys = index
                .map
                .iter()
                .map(|(k, vs)| (k.as_slice(), vs[0].overlaps));
            *buckets = buckets::Buckets::count(bucket_bounds, keys);
        } else if cfg!(debug_assertions) {
            // The counters moved with every key in and out: they match a recount.
            let keys = index
                .map
                .iter()
                .map(|(k, vs)| (k.as_slice(), vs[0].overlaps));
            assert_eq!(*buckets, buckets::Buckets::count(bucket_bounds, keys));
        }
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
        let mut popular_of = |k: &[u8]| self.pinned(&mapper, k, rng.gen());
        let mut victims = Vec::new();
        let mut freed = 0u64;
        let mut taken = BTreeSet::new();
        let mut chosen: BTreeSet<&[u8]> = BTreeSet::new();
        for keep_popular in [true, false] {
            for _ in 0..n {
                if index.bytes.saturating_sub(freed) <= target {
                    break;
                }
                let mut stats = |i: usize| {
                    // F's denominator and o from the bucket's counters; the clocks change
                    // with every read, so benefit and p are read off the range's keys.
                    let (fast_objects, overlap) = buckets.counts(i);
                    let mut r = msc::RangeStats {
                        flash_objects: bounds.get(i).map_or(0, |b| b.1),
                        fast_objects,
                        overlap,
                        ..Default::default()
                    };
                    for (k, vs) in index.map.range::<[u8], _>(range_of(i)) {
                        let clock = self.tracker.clock(k);
                        r.coldness += tracker::coldness(clock);
                        if keep_popular && vs.len() == 1 && self.pinned(&mapper, k, 0.5) {
                            r.popular += 1;
                        }
                    }
                    r
                };
                let mut rng2 = rand::thread_rng();
                let Some(i) =
                    msc::choose(self.opts.msc_policy, n, &mut stats, &mut cursor, &mut rng2)
                else {
                    break;
                };
                if !taken.insert((i, keep_popular)) {
                    continue;
                }
                // The range's objects that may go, least read lately first (key order
                // among equals). NB: the second pass walks ranges the first one took from.
                let mut eligible: Vec<(u8, &Vec<u8>, HotVersion)> = index
                    .map
                    .range::<[u8], _>(range_of(i))
                    .filter(|(k, vs)| vs.len() == 1 && !chosen.contains(k.as_slice()))
                    .filter(|(k, _)| !(keep_popular && popular_of(k)))
                    .map(|(k, vs)| (self.tracker.frequency(k), k, vs[0]))
                    .collect();
                eligible.sort_by_key(|e| e.0);
                for (_, k, v) in eligible {
                    if index.bytes.saturating_sub(freed) <= target {
                        break;
                    }
                    chosen.insert(k.as_slice());
                    freed += CLASS_SIZES[v.loc.class] as u64;
                    victims.push((k.clone(), v));
                }
            }
        }
        drop(buckets);
        drop(index);
        self.pending.lock().cursor = cursor;
        // NB: the slots are read under the index lock, so none is reused meanwhile.
        let _index = self.index.read();
        if victims.is_empty() {
            return Ok(None);
        }
        self.tracker
            .note_evicted(victims.iter().map(|(k, _)| k.as_slice()));
        victims.sort_by(|a, b| a.0.cmp(&b.0));
        let ranges = taken
            .iter()
            .map(|&(i, _)| i)
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .map(|i| owned_range(range_of(i)))
            .collect();
        let mut demotion = self.demotion_of(victims, None)?;
        demotion.ranges = ranges;
        Ok(Some(demotion))
    }

    /// A demotion of this store's unpinned objects in `ranges` (another partition's MSC
    /// choice, see `db::hot::plan_aligned`), so one table takes each range's cold objects
    /// from every partition; `None` if there are none, or under the weight policy.
    pub fn plan_demotion_in(&self, ranges: &[KeyRange]) -> Result<Option<Demotion>> {
        if self.weights.is_some() {
            return Ok(None);
        }
        let mut rng = rand::thread_rng();
        // NB: the slots are read under the index lock, so none is reused meanwhile.
        let index = self.index.read();
        let mapper = self.mapper(&index);
        let mut victims = Vec::new();
        for (lo, hi) in ranges {
            let range = (borrowed(lo), borrowed(hi));
            for (k, vs) in index.map.range::<[u8], _>(range) {
                // NB: the mapper alone: a partition that has not led a demotion yet has no
                // bar, and every object it read would beat it.
                let pinned = mapper.is_popular(self.tracker.clock(k), rng.gen());
                if vs.len() == 1 && !pinned {
                    victims.push((k.clone(), vs[0]));
                }
            }
        }
        if victims.is_empty() {
            return Ok(None);
        }
        victims.sort_by(|a, b| a.0.cmp(&b.0));
        victims.dedup_by(|a, b| a.0 == b.0);
        self.demotion_of(victims, None).map(Some)
    }

    /// Plans a round of the weight policy: the objects weighing less than the average move
    /// to the LSM (see `weights`). If every weight is equal (after a restart, say), objects
    /// go in key order until the store is at [`weights::TIE_TARGET`] of its budget, less
    /// `room`. Keys with versions kept for snapshots stay, as in MSC.
    fn plan_migration(&self, room: u64) -> Result<Option<Demotion>> {
        let weights = self.weights.as_ref().expect("weight policy");
        let index = self.index.read();
        let candidates: Vec<(&Vec<u8>, &HotVersion)> = index
            .map
            .iter()
            .filter(|(_, vs)| vs.len() == 1)
            .map(|(k, vs)| (k, &vs[0]))
            .collect();
        let of_candidates: Vec<u32> = candidates.iter().map(|(k, _)| weights.get(k)).collect();
        let round = weights::plan_round(&of_candidates);
        let mut victims: Vec<(Vec<u8>, HotVersion)> = round
            .migrate
            .iter()
            .map(|&i| (candidates[i].0.clone(), *candidates[i].1))
            .collect();
        if victims.is_empty() {
            let target =
                ((self.opts.budget as f64 * weights::TIE_TARGET) as u64).saturating_sub(room);
            let mut left = index.bytes;
            for (k, v) in &candidates {
                if left <= target {
                    break;
                }
                left -= CLASS_SIZES[v.loc.class] as u64;
                victims.push(((*k).clone(), **v));
            }
        }
        if victims.is_empty() {
            return Ok(None);
        }
        // NB: the slots are read under the index lock, so none is reused meanwhile.
        self.demotion_of(victims, Some(round.average)).map(Some)
    }

    /// The demotion of `victims` (sorted by key; the index lock held by the caller): the
    /// table entries to write for them.
    fn demotion_of(
        &self,
        victims: Vec<(Vec<u8>, HotVersion)>,
        average: Option<u32>,
    ) -> Result<Demotion> {
        let values = self.read_values(&victims)?;
        let mut entries = Vec::new();
        for ((k, v), value) in victims.iter().zip(values) {
            match v.kind {
                SlotKind::InLsm => {}
                SlotKind::Deletion => {
                    entries.push((key::internal_key(k, v.seq, ValueKind::Deletion), Vec::new()))
                }
                SlotKind::Value => {
                    entries.push((key::internal_key(k, v.seq, ValueKind::Value), value))
                }
            }
        }
        Ok(Demotion {
            ranges: Vec::new(),
            entries,
            victims: victims
                .into_iter()
                .map(|(k, v)| (k, v.seq, v.loc))
                .collect(),
            average,
        })
    }

    /// Ends a demotion whose table is installed: drops the victims from the index, then
    /// clears their slots (and the pending clears) in one job, or with `Clears::WithNextJob`
    /// leaves them to the job that follows at once. `log_number` is the MANIFEST's. A
    /// weight-policy migration then takes its average off the weights of the objects kept.
    pub fn finish_demotion(
        &self,
        demotion: Demotion,
        log_number: u64,
        clears: Clears,
    ) -> Result<()> {
        let Demotion {
            entries,
            victims,
            average,
            ..
        } = demotion;
        let moved_bytes: u64 = entries
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        let mut cleared = Vec::new();
        let mut gone = std::collections::HashSet::new();
        let ghosts = {
            let mut index = self.index.write();
            for (k, seq, loc) in victims {
                // NB: a flush since the plan may have written a newer version (a demotion in
                // the background lets flushes run while it writes its tables): kept.
                let same = index
                    .map
                    .get(&k)
                    .is_some_and(|vs| vs.len() == 1 && vs[0].seq == seq);
                if !same {
                    continue;
                }
                if let Some(vs) = index.map.remove(&k) {
                    self.buckets.lock().remove(&k, vs[0].overlaps);
                }
                if let Some(w) = &self.weights {
                    w.remove(&k);
                }
                index.drop_version(loc);
                cleared.push(loc);
                gone.insert(tracker::hash_key(&k));
            }
            let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
            // Iterators that started before the demotion may lack its table.
            self.readers.lock().demoted(epoch, entries);
            if let (Some(w), Some(average)) = (&self.weights, average) {
                w.age(average);
            }
            index.take_ghosts(&gone)
        };
        // NB: the ghosts first, in jobs of their own: a crash that kept one after its key's
        // slot was cleared would bring back its older version.
        if !ghosts.is_empty() {
            let n = ghosts.len() as u64;
            self.clear_slots(log_number, ghosts.into_iter())?;
            self.counters.ghost_clears.fetch_add(n, Ordering::Relaxed);
        }
        match clears {
            Clears::Now => {
                let pending = std::mem::take(&mut self.pending.lock().clears);
                let all: Vec<Loc> = pending.into_iter().chain(cleared.iter().copied()).collect();
                self.clear_slots(log_number, all.iter().copied())?;
                self.index.write().free_cleared(by_class(all));
            }
            Clears::WithNextJob => {
                self.pending.lock().clears.extend(cleared.iter().copied());
            }
        }
        let c = &self.counters;
        if average.is_some() {
            c.migrated_objects
                .fetch_add(cleared.len() as u64, Ordering::Relaxed);
            c.migrated_bytes.fetch_add(moved_bytes, Ordering::Relaxed);
            c.migration_rounds.fetch_add(1, Ordering::Relaxed);
        } else {
            c.demoted_objects
                .fetch_add(cleared.len() as u64, Ordering::Relaxed);
            c.demotion_rounds.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether MSC keeps `key`'s object while it has others to take: the mapper pins it
    /// (`draw`, uniform in [0, 1), decides at the threshold), or it is read more often lately
    /// than the last demotion's victims, so a promotion would soon bring it back. (When the
    /// clocks of most objects sit at the top, the mapper pins a random share of them.)
    fn pinned(&self, mapper: &Mapper, key: &[u8], draw: f64) -> bool {
        mapper.is_popular(self.tracker.clock(key), draw) || self.tracker.beats_evicted(key)
    }

    /// The mapper for the store as it is: pins the hottest `pinned_share` of its objects.
    fn mapper(&self, index: &Index) -> Mapper {
        let pinned = (index.map.len() as f64 * self.opts.pinned_share) as u64;
        Mapper::from_histogram(self.tracker.histogram(), pinned)
    }

    /// Sizes the tracker to the data: `lsm_entries` in the tables beside this store's objects.
    /// It only grows (see [`Tracker::grow`]).
    pub fn size_tracker(&self, lsm_entries: u64) {
        let objects = self.index.read().map.len() as u64;
        self.tracker
            .grow(tracked_keys(&self.opts, lsm_entries + objects));
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
            promotion_bar: self.tracker.admission_bar(),
            eviction: self.opts.eviction.name().to_string(),
            migrated_objects: load(&c.migrated_objects),
            migrated_bytes: load(&c.migrated_bytes),
            migration_rounds: load(&c.migration_rounds),
            placed_hot: (load(&c.placed_hot[0]), load(&c.placed_hot[1])),
            placed_lsm_inline: (load(&c.placed_lsm_inline[0]), load(&c.placed_lsm_inline[1])),
            placed_value_log: (load(&c.placed_value_log[0]), load(&c.placed_value_log[1])),
            paced_writes: load(&c.paced_writes),
            paced_micros: load(&c.paced_micros),
            demoted_into_bottom: load(&c.demoted_into_bottom),
            iterator_slot_reads: load(&c.iterator_slot_reads),
            jobs: load(&c.jobs),
            job_slot_writes: load(&c.job_slot_writes),
            job_pages: load(&c.job_pages),
            free_slots: index.free.iter().map(|f| f.len() as u64).sum(),
            ghost_slots: index.ghosts.len() as u64,
            ghost_clears: load(&c.ghost_clears),
            partitions: vec![(index.objects, index.bytes)],
        }
    }

    /// True for a store opened read-only.
    fn read_only(&self) -> bool {
        self.read_only
    }
}

/// Keys the tracker holds for a store among `keys` keys in all (`tracker_share` of them).
fn tracked_keys(opts: &HotTierOptions, keys: u64) -> usize {
    ((keys as f64 * opts.tracker_share) as usize).max(MIN_TRACKED)
}

/// `range` with owned bounds.
fn owned_range((lo, hi): (std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>)) -> KeyRange {
    (lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec))
}

/// A bound on borrowed bytes.
pub(crate) fn borrowed(b: &std::ops::Bound<Vec<u8>>) -> std::ops::Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Drops from `versions` (newest first) each older version no snapshot reads: version i is
/// read by a snapshot in `[seq_i, seq_{i-1})`. Returns their slots.
fn gc_versions(versions: &mut Versions, needed: &dyn Fn(SeqNo, SeqNo) -> bool) -> Vec<Loc> {
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

/// The newest of a key's `versions` (newest first) a read at `seq` sees.
fn version_at(versions: &[HotVersion], seq: SeqNo) -> Option<HotVersion> {
    versions.iter().find(|v| v.seq <= seq).copied()
}

/// The value of version `v` of `user_key` from its decoded `slot` of `slab`; a free slot or
/// one holding another version is corruption naming the slot.
fn checked_value(
    slab: &SlabFile,
    user_key: &[u8],
    v: &HotVersion,
    slot: Option<slab::Slot>,
) -> Result<Vec<u8>> {
    let slot = slot.ok_or_else(|| slab.corruption(v.loc.slot, "indexed slot is free"))?;
    if slot.seq != v.seq || slot.key != user_key {
        return Err(slab.corruption(v.loc.slot, "slot holds another version"));
    }
    Ok(slot.value)
}

/// The last job's journal: its marker and the pages it wrote in place.
pub(crate) struct Journal {
    pub log_number: u64,
    pub lowest: SeqNo,
    pub pages: Vec<(usize, u64, Vec<u8>)>,
}

/// Reads the journal; a damaged one is corruption (it is written atomically).
pub(crate) fn read_journal(fs: &dyn Fs, path: &Path) -> Result<Option<Journal>> {
    if !fs.exists(path) {
        return Ok(None);
    }
    let bytes = crate::env::read_file(fs, path)?;
    let bad = |offset: usize, what: &str| Error::Corruption {
        file: path.to_path_buf(),
        offset: offset as u64,
        what: what.to_string(),
    };
    if bytes.len() < 28 || &bytes[..8] != JOURNAL_MAGIC {
        return Err(bad(0, "bad hot-store journal header"));
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let count = u32::from_le_bytes(bytes[24..28].try_into().unwrap()) as usize;
    // The count is read from the file: reserve no more entries than its bytes can hold.
    let mut pages = Vec::with_capacity(count.min((bytes.len() - 28) / (14 + slab::PAGE)));
    let mut at = 28;
    for _ in 0..count {
        let end = at + 14 + slab::PAGE;
        if end > bytes.len() {
            return Err(bad(at, "hot-store journal truncated"));
        }
        let class = u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()) as usize;
        let page = u64_at(at + 2);
        let crc = u32::from_le_bytes(bytes[at + 10..at + 14].try_into().unwrap());
        let image = bytes[at + 14..end].to_vec();
        if class >= CLASS_SIZES.len() || crc32c::crc32c(&image) != crc {
            return Err(bad(at, "hot-store journal page damaged"));
        }
        pages.push((class, page, image));
        at = end;
    }
    Ok(Some(Journal {
        log_number: u64_at(8),
        lowest: u64_at(16),
        pages,
    }))
}

/// True if `dir0` has no hot store with data (its directory missing, or only empty files,
/// in it and in every partition's directory).
pub(crate) fn is_empty_store(fs: &dyn Fs, dir0: &Path) -> bool {
    partitioned::holds_no_data(fs, &dir0.join(DIR))
}

/// True if the store directory `dir` (one partition's, or the whole store's with one
/// partition) has no data: missing, or only empty files other than the journal. Names
/// `skip` says belong to something else (the partitions' record and directories) are not
/// looked at, nor are temporary files: an atomic write (the journal, the partitions'
/// record) that a crash cut short before its rename, never data.
pub(crate) fn dir_holds_no_data(fs: &dyn Fs, dir: &Path, skip: &dyn Fn(&str) -> bool) -> bool {
    let Ok(names) = fs.list_dir(dir) else {
        return true;
    };
    names
        .iter()
        .filter(|n| !skip(n) && !n.ends_with(".tmp"))
        .all(|n| n != JOURNAL && fs.file_size(&dir.join(n)).is_ok_and(|s| s == 0))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::FaultFs;

    #[test]
    fn clears_of_more_slots_than_one_job_takes_run_in_bounded_jobs_and_clear_every_slot() {
        let fault = FaultFs::new(0);
        let fs: Arc<dyn Fs> = fault.clone();
        let dir = Path::new("/hot");
        let opts = HotTierOptions {
            mode: crate::options::HotTier::Slab,
            ..HotTierOptions::default()
        };
        let open = || {
            HotStore::open(&fs, dir, &opts, 1, 0, false, false)
                .unwrap()
                .0
        };
        // The largest class holds one slot per page: a job's journal holds a page per slot.
        let class = CLASS_SIZES.len() - 1;
        let n = 2 * WRITES_PER_JOB + 7;
        let slots = || (0..n as u64).map(|slot| Loc { class, slot });
        let store = open();
        let writes = slots()
            .map(|loc| {
                let key = format!("key{:06}", loc.slot);
                let slot = slab::encode_slot(loc.slot + 1, SlotKind::Value, key.as_bytes(), b"v");
                (loc, slot)
            })
            .collect();
        store.run_job(1, SeqNo::MAX, writes).unwrap();
        drop(store);
        let store = open();
        assert_eq!(store.stats().objects, n as u64);
        store.clear_slots(1, slots().rev()).unwrap();
        let journal = fs.file_size(&dir.join(JOURNAL)).unwrap();
        assert_eq!(
            journal,
            28 + 7 * (14 + slab::PAGE as u64),
            "the last job: 7 pages"
        );
        drop(store);
        assert_eq!(open().stats().objects, 0, "every slot cleared");
    }

    /// Key `i` of the small-store tests.
    fn key(i: u64) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    /// The slab class of a [`key`] with a one-byte value, and a store's options whose
    /// budget is 100 such slots.
    fn hundred_slots() -> (usize, HotTierOptions) {
        let class = slab::class_for(key(0).len(), 1).unwrap();
        let opts = HotTierOptions {
            mode: crate::options::HotTier::Slab,
            budget: 100 * CLASS_SIZES[class] as u64,
            ..HotTierOptions::default()
        };
        (class, opts)
    }

    #[test]
    fn a_demotion_takes_the_least_read_objects_of_its_range_and_sets_the_promotion_bar() {
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let dir = Path::new("/hot");
        let (class, opts) = hundred_slots();
        let open = || {
            HotStore::open(&fs, dir, &opts, 1, 0, false, false)
                .unwrap()
                .0
        };
        let writes = (0..200u64)
            .map(|slot| {
                let bytes = slab::encode_slot(slot + 1, SlotKind::Value, &key(slot), b"v");
                (Loc { class, slot }, bytes)
            })
            .collect();
        open().run_job(1, SeqNo::MAX, writes).unwrap();
        // Reopened, the index holds all 200 (twice the budget).
        let store = open();
        // Every key read twice (all at the top clock value, so the mapper cannot tell them
        // apart), the first 50 in key order ten times.
        for i in 0..200 {
            for _ in 0..if i < 50 { 10 } else { 2 } {
                store.tracker.touch(&key(i));
            }
        }
        let demotion = store.plan_demotion(&[], 0).unwrap().unwrap();
        // Down to the low watermark: 95 objects stay. With no bar yet every object read
        // counts as pinned, so the second pass takes them, the least read first.
        assert_eq!(demotion.victims.len(), 105);
        assert!(
            demotion
                .victims
                .iter()
                .all(|(k, _, _)| k.as_slice() >= &key(50)[..]),
            "a frequently read object was demoted"
        );
        // The victims were read twice each: a candidate must be read more often than that.
        assert_eq!(store.tracker.admission_bar(), 2);
    }

    #[test]
    fn a_flush_fills_the_store_with_new_keys_to_the_low_watermark_and_keys_seen_before_beyond() {
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let (_, opts) = hundred_slots();
        let (store, _) = HotStore::open(&fs, Path::new("/hot"), &opts, 1, 0, false, false).unwrap();
        let flush = |seq: SeqNo, keys: &mut dyn Iterator<Item = u64>| {
            let mem = Arc::new(crate::memtable::MemTable::new(0));
            keys.for_each(|i| mem.add(seq + i, ValueKind::Value, &key(i), b"v"));
            let batch = admit::FlushBatch::read(&mut mem.iter()).unwrap();
            let lsm = store
                .absorb_batch(batch, 1, &|_, _| false, &|_| false)
                .unwrap();
            store.commit(&|_, _| false);
            lsm.len()
        };
        // 120 keys nobody read or wrote before: the store takes them up to the low
        // watermark, no further.
        assert_eq!(flush(1, &mut (0..120)), 25);
        assert_eq!(store.stats().objects, 95);
        assert!(!store.over_budget(), "no demotion follows");
        // Keys read before fill the rest.
        let popular = 200..203;
        for i in popular.clone() {
            store.tracker.touch(&key(i));
        }
        assert_eq!(flush(1000, &mut popular.chain(300..303)), 3);
        assert_eq!(store.stats().objects, 98);
        assert!(store.get(&key(201), 2000, false).unwrap() != HotRead::Lsm);
        assert_eq!(store.get(&key(301), 2000, false).unwrap(), HotRead::Lsm);
    }

    #[test]
    fn a_flush_larger_than_one_job_torn_between_its_jobs_leaves_nothing_of_it_after_recovery() {
        let opts = HotTierOptions {
            mode: crate::options::HotTier::Slab,
            ..HotTierOptions::default()
        };
        let dir = Path::new("/hot");
        let class = CLASS_SIZES.len() - 1;
        let n = 2 * WRITES_PER_JOB + 7;
        // A flush under MANIFEST log number 1 writing sequences 100.. (its lowest is 100).
        let writes = || -> Vec<(Loc, Vec<u8>)> {
            (0..n as u64)
                .map(|slot| {
                    let key = format!("key{slot:06}");
                    let bytes =
                        slab::encode_slot(100 + slot, SlotKind::Value, key.as_bytes(), b"v");
                    (Loc { class, slot }, bytes)
                })
                .collect()
        };
        let open = |fs: &Arc<dyn Fs>| HotStore::open(fs, dir, &opts, 1, 0, false, false);
        // The operations the whole flush takes, to fail it at points spread across its jobs.
        let fault = FaultFs::new(0);
        let fs: Arc<dyn Fs> = fault.clone();
        let store = open(&fs).unwrap().0;
        let before = fault.op_count();
        store.run_job(1, 100, writes()).unwrap();
        let ops = fault.op_count() - before;
        assert_eq!(
            fs.file_size(&dir.join(JOURNAL)).unwrap(),
            28 + 7 * (14 + slab::PAGE as u64),
            "the flush ran as three jobs, the last of 7 pages"
        );
        for fail_at in (0..ops).step_by((ops / 16).max(1) as usize) {
            let fault = FaultFs::new(fail_at);
            let fs: Arc<dyn Fs> = fault.clone();
            let store = open(&fs).unwrap().0;
            fault.fail_after(fail_at, crate::env::FaultKind::Io, false);
            let _ = store.run_job(1, 100, writes());
            drop(store);
            fault.clear_faults();
            fault.crash(crate::env::CrashPolicy::KeepRandomPages);
            // The MANIFEST still names log 1: the flush never committed, the WAL replays it.
            let (store, _) = open(&fs).unwrap();
            assert_eq!(store.stats().objects, 0, "failed after {fail_at} of {ops}");
        }
    }

    #[test]
    fn a_read_below_every_version_left_says_so_and_a_reused_slot_is_read_again_not_reported() {
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let opts = HotTierOptions {
            mode: crate::options::HotTier::Slab,
            ..HotTierOptions::default()
        };
        let (store, _) = HotStore::open(&fs, Path::new("/hot"), &opts, 1, 0, false, false).unwrap();
        let flush = |seq, k: &[u8], v: &[u8]| {
            let mem = Arc::new(crate::memtable::MemTable::new(0));
            mem.add(seq, ValueKind::Value, k, v);
            let batch = admit::FlushBatch::read(&mut mem.iter()).unwrap();
            store
                .absorb_batch(batch, 1, &|_, _| false, &|_| false)
                .unwrap();
            store.commit(&|_, _| false);
        };
        flush(7, b"a", b"old");
        let old = store.index.read().map[&b"a"[..]][0];
        // Version 9 supersedes 7 and frees its slot; key b's version takes the slot.
        flush(9, b"a", b"new");
        flush(11, b"b", b"bbb");
        assert_eq!(store.index.read().map[&b"b"[..]][0].loc, old.loc);
        assert_eq!(store.read_unlocked(b"a", &old), None, "another version now");
        // A read at 8 (no snapshot kept version 7) finds only a newer version.
        assert_eq!(store.get(b"a", 8, false).unwrap(), HotRead::OnlyNewer);
        assert_eq!(
            store.get(b"a", 9, false).unwrap(),
            HotRead::Found(Some(b"new".to_vec()))
        );
        assert_eq!(store.get(b"c", 20, false).unwrap(), HotRead::Lsm);
    }

    #[test]
    fn a_journal_announcing_more_pages_than_it_holds_is_corruption_not_an_allocation() {
        let fs = FaultFs::new(0);
        let dir = Path::new("/hot");
        fs.create_dir_all(dir).unwrap();
        let path = dir.join(JOURNAL);
        let mut bytes = JOURNAL_MAGIC.to_vec();
        bytes.extend_from_slice(&4u64.to_le_bytes());
        bytes.extend_from_slice(&9u64.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        fs.write_raw(&path, &bytes);
        match read_journal(fs.as_ref(), &path) {
            Err(Error::Corruption { offset, what, .. }) => {
                assert_eq!(offset, 28);
                assert!(what.contains("truncated"), "{what}");
            }
            other => panic!("expected corruption, got {:?}", other.map(|j| j.is_some())),
        }
    }
}

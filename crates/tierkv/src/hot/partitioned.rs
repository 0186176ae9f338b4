//! Partitions of the hot store (`hot_partitions = N`): N shared-nothing [`HotStore`]s, each
//! key owned by the one a fixed hash of it picks.
//!
//! Each partition has its own slabs, journal, index, tracker, promotion schedule, MSC
//! buckets and a 1/N share of the budget, so a flush, a demotion or a promotion in one never
//! waits for another's locks, and recovery's rules hold per partition: a partition's journal
//! and marker speak only of its own slots.
//!
//! Layout (`docs/hot-tier.md`, "Partitions"): with one partition the store is tier 0's `hot/`
//! as it always was. With N > 1, partition i lives in `hot/part-II/` and `hot/PARTITIONS`
//! records N. The count is fixed once the store holds data: a key's partition is its hash
//! modulo N, so another count would look for keys in the wrong partition; an open with
//! another count is refused, naming the option and the count the store was created with.

use super::admit::FlushBatch;
use super::{dir_holds_no_data, Entries, HotCounters, HotRead, HotStore, SeqNo, DIR};
use crate::env::Fs;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key;
use crate::options::HotTierOptions;
use crate::stats::HotTierStats;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Most partitions a store may have (`hot_partitions`).
pub(crate) const MAX_PARTITIONS: usize = 64;
/// The file in the store's directory recording its partition count (only when N > 1).
pub(crate) const RECORD: &str = "PARTITIONS";
/// Each partition's directory name starts with this, followed by its two-digit number.
const PART_PREFIX: &str = "part-";

/// The partition owning `user_key` among `n`: its CRC32C modulo `n`. A fixed function (not
/// the standard hasher, which is seeded per process), so a key stays in its partition across
/// restarts and builds.
pub(crate) fn partition_of(user_key: &[u8], n: usize) -> usize {
    crc32c::crc32c(user_key) as usize % n
}

/// The directories of the partitions of the store in `hot_dir`, in partition order.
pub(crate) fn store_dirs(hot_dir: &Path, n: usize) -> Vec<PathBuf> {
    if n == 1 {
        // NB: one partition keeps the layout stores had before partitions existed.
        return vec![hot_dir.to_path_buf()];
    }
    (0..n)
        .map(|i| hot_dir.join(format!("{PART_PREFIX}{i:02}")))
        .collect()
}

/// Whether `name` (in the store's directory) is a partition's directory.
fn is_part_dir(name: &str) -> bool {
    name.strip_prefix(PART_PREFIX)
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// True if the store in `hot_dir` holds no data under any layout: no journal and only empty
/// slab files, in it and in every partition's directory.
pub(crate) fn holds_no_data(fs: &dyn Fs, hot_dir: &Path) -> bool {
    let own = |n: &str| n == RECORD || is_part_dir(n);
    if !dir_holds_no_data(fs, hot_dir, &own) {
        return false;
    }
    let names = fs.list_dir(hot_dir).unwrap_or_default();
    names
        .iter()
        .filter(|n| is_part_dir(n))
        .all(|n| dir_holds_no_data(fs, &hot_dir.join(n), &|_| false))
}

/// The partition count recorded for the store in `hot_dir`: 1 without a record.
fn recorded_partitions(fs: &dyn Fs, hot_dir: &Path) -> Result<usize> {
    let path = hot_dir.join(RECORD);
    if !fs.exists(&path) {
        return Ok(1);
    }
    let bytes = crate::env::read_file(fs, &path)?;
    parse_record(&bytes).ok_or_else(|| Error::Corruption {
        file: path,
        offset: 0,
        what: format!("hot-store partition record is not a count in 2..={MAX_PARTITIONS}"),
    })
}

/// The record of `n` partitions: the count in ASCII decimal and a newline.
fn encode_record(n: usize) -> Vec<u8> {
    format!("{n}\n").into_bytes()
}

/// The count a record holds: only the bytes [`encode_record`] writes for a count in
/// `2..=MAX_PARTITIONS` (no sign, no leading zeros), so any other bytes are damage.
fn parse_record(bytes: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let n = text.parse::<usize>().ok()?;
    let canonical = (2..=MAX_PARTITIONS).contains(&n) && encode_record(n) == bytes;
    canonical.then_some(n)
}

/// The partition count recorded in the hot store's directory `hot_dir` (1 without a record),
/// or `Corruption` naming the record; for tools and fuzzing.
pub(crate) fn read_record(fs: &dyn Fs, hot_dir: &Path) -> Result<usize> {
    recorded_partitions(fs, hot_dir)
}

/// Checks that the store in `hot_dir` is laid out for `n` partitions. A store with data laid
/// out for another count is refused; an empty one takes `n` (its record written or removed,
/// unless `read_only`). The record is durable before any partition writes a slot.
fn settle_layout(fs: &dyn Fs, hot_dir: &Path, n: usize, read_only: bool) -> Result<()> {
    let recorded = recorded_partitions(fs, hot_dir)?;
    if recorded == n {
        return Ok(());
    }
    if !holds_no_data(fs, hot_dir) {
        return Err(Error::invalid(format!(
            "option hot_partitions = {n} does not match the hot store in {}, created with \
             hot_partitions = {recorded} (each key lives in the partition its hash picks among \
             {recorded}); open it with hot_partitions = {recorded}",
            hot_dir.display()
        )));
    }
    if read_only {
        return Ok(());
    }
    let path = hot_dir.join(RECORD);
    if n == 1 {
        fs.remove_file(&path)?;
        fs.sync_dir(hot_dir)
    } else {
        crate::env::write_file_atomic(fs, &path, &encode_record(n))
    }
}

/// One partition's options: its share of the budget, and a promotion schedule paced by its
/// share of the point reads (so epochs last as many database reads as without partitions).
fn partition_options(opts: &HotTierOptions) -> HotTierOptions {
    let n = opts.partitions.max(1);
    HotTierOptions {
        budget: opts.budget / n as u64,
        promotion_epoch_ops: (opts.promotion_epoch_ops / n as u64).max(1),
        promotion_cooldown_ops: opts.promotion_cooldown_ops / n as u64,
        ..opts.clone()
    }
}

/// The hot store as the database sees it: its partitions, and the routing of each per-key
/// call to the partition owning the key.
pub(crate) struct HotPartitions {
    parts: Vec<Arc<HotStore>>,
}

impl HotPartitions {
    /// Opens the store in tier 0's directory `dir0` with `opts.partitions` partitions
    /// (arguments as [`HotStore::open`]'s; `lsm_entries` is shared out among them). Returns
    /// the store and the highest sequence in any partition.
    pub fn open(
        fs: &Arc<dyn Fs>,
        dir0: &Path,
        opts: &HotTierOptions,
        log_number: u64,
        lsm_entries: u64,
        read_only: bool,
        split_values: bool,
    ) -> Result<(HotPartitions, SeqNo)> {
        let n = opts.partitions.max(1);
        let hot_dir = dir0.join(DIR);
        if !read_only {
            // NB: durably, or a power loss can take the directory with every slab in it.
            crate::env::create_dir_all_durable(fs.as_ref(), &hot_dir)?;
        }
        settle_layout(fs.as_ref(), &hot_dir, n, read_only)?;
        let part_opts = partition_options(opts);
        let mut parts = Vec::with_capacity(n);
        let mut max_seq = 0;
        for dir in store_dirs(&hot_dir, n) {
            let (part, seq) = HotStore::open(
                fs,
                &dir,
                &part_opts,
                log_number,
                lsm_entries / n as u64,
                read_only,
                split_values,
            )?;
            max_seq = max_seq.max(seq);
            parts.push(Arc::new(part));
        }
        Ok((HotPartitions { parts }, max_seq))
    }

    /// The partitions, in partition order.
    pub fn parts(&self) -> &[Arc<HotStore>] {
        &self.parts
    }

    /// The partition owning `user_key`.
    pub fn part_for(&self, user_key: &[u8]) -> &HotStore {
        &self.parts[partition_of(user_key, self.parts.len())]
    }

    /// [`HotStore::get`] in the key's partition.
    pub fn get(&self, user_key: &[u8], seq: SeqNo, at_snapshot: bool) -> Result<HotRead> {
        self.part_for(user_key).get(user_key, seq, at_snapshot)
    }

    /// Counts a point read of `user_key` the LSM answered, in the key's partition.
    pub fn count_lsm_read(&self, user_key: &[u8]) {
        self.part_for(user_key).count_lsm_read();
    }

    /// [`HotStore::latest_seq`] in the key's partition.
    pub fn latest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        self.part_for(user_key).latest_seq(user_key)
    }

    /// [`HotStore::offer_promotion`] to the key's partition.
    pub fn offer_promotion(&self, user_key: &[u8], seq: SeqNo, value: &[u8]) -> bool {
        self.part_for(user_key)
            .offer_promotion(user_key, seq, value)
    }

    /// [`HotStore::wants_promotion`] of the key's partition.
    pub fn wants_promotion(&self, user_key: &[u8], value: &[u8]) -> bool {
        self.part_for(user_key).wants_promotion(user_key, value)
    }

    /// Whether any partition runs a promotion epoch.
    pub fn promoting(&self) -> bool {
        self.parts.iter().any(|p| p.promoter.promoting())
    }

    /// Whether any partition has a batch of promotion candidates waiting.
    pub fn promotion_due(&self) -> bool {
        self.parts.iter().any(|p| p.promoter.batch_ready())
    }

    /// The demotion epoch of the whole store: the sum of the partitions', so a demotion in
    /// any of them moves it (a reader retries a little more often than it must, never less).
    pub fn epoch(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |sum, p| sum.wrapping_add(p.epoch()))
    }

    /// Whether any partition runs a demotion past its high watermark (writes are paced).
    pub fn demoting(&self) -> bool {
        self.parts.iter().any(|p| p.demoting())
    }

    /// The counters a paced write is charged to: a demoting partition's (the first one's
    /// when none is).
    pub fn pacing_counters(&self) -> &HotCounters {
        let part = self.parts.iter().find(|p| p.demoting());
        &part.unwrap_or(&self.parts[0]).counters
    }

    /// Bytes of every partition's slab files on tier 0.
    pub fn file_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.file_bytes()).sum()
    }

    /// Splits a flushed memtable's entries by partition: one batch per partition, in
    /// partition order, each with its own lowest sequence (that partition's job marker).
    pub fn split(&self, batch: FlushBatch) -> Vec<FlushBatch> {
        let n = self.parts.len();
        if n == 1 {
            return vec![batch];
        }
        let mut out: Vec<FlushBatch> = (0..n)
            .map(|_| FlushBatch {
                keys: Vec::new(),
                lowest: SeqNo::MAX,
            })
            .collect();
        for (user_key, versions) in batch.keys {
            let part = &mut out[partition_of(&user_key, n)];
            let oldest = versions.iter().map(|v| v.0).min().unwrap_or(SeqNo::MAX);
            part.lowest = part.lowest.min(oldest);
            part.keys.push((user_key, versions));
        }
        out
    }

    /// Recovery's flush of a replayed memtable (`iter`): each partition absorbs its keys
    /// (no snapshot is live); returns the rest for L0, in internal-key order.
    pub fn absorb(&self, iter: &mut dyn InternalIterator, log_number: u64) -> Result<Entries> {
        let batch = FlushBatch::read(iter)?;
        let mut rest = Vec::new();
        for (part, batch) in self.parts.iter().zip(self.split(batch)) {
            rest.extend(part.absorb_batch(batch, log_number, &|_, _| false, &|_| false)?);
        }
        sort_entries(&mut rest);
        Ok(rest)
    }

    /// [`HotStore::commit`] in every partition.
    pub fn commit(&self, needed: &dyn Fn(SeqNo, SeqNo) -> bool) {
        for part in &self.parts {
            part.commit(needed);
        }
    }

    /// Sizes each partition's tracker to the data ([`HotStore::size_tracker`]); the
    /// tables' `lsm_entries` are shared out among them.
    pub fn size_trackers(&self, lsm_entries: u64) {
        for part in &self.parts {
            part.size_tracker(lsm_entries / self.parts.len() as u64);
        }
    }

    /// The store's report: the partitions' counters summed, and per partition its objects
    /// and bytes.
    pub fn stats(&self) -> HotTierStats {
        let mut parts = self.parts.iter().map(|p| p.stats());
        let first = parts
            .next()
            .expect("a hot store has at least one partition");
        parts.fold(first, sum_stats)
    }
}

/// Sorts entries several partitions handed back (each sorted, keys disjoint) into one run.
pub(crate) fn sort_entries(entries: &mut Entries) {
    entries.sort_by(|a, b| key::compare_internal(&a.0, &b.0));
}

/// `total` with `part`'s report added: counts summed, the pinning threshold the highest,
/// the partition rows appended.
fn sum_stats(mut total: HotTierStats, part: HotTierStats) -> HotTierStats {
    let pair = |a: (u64, u64), b: (u64, u64)| (a.0 + b.0, a.1 + b.1);
    total.objects += part.objects;
    total.bytes += part.bytes;
    for (t, p) in total.by_class.iter_mut().zip(&part.by_class) {
        t.1 += p.1;
        t.2 += p.2;
    }
    total.reads_hot += part.reads_hot;
    total.reads_lsm += part.reads_lsm;
    total.demoted_objects += part.demoted_objects;
    total.demotion_rounds += part.demotion_rounds;
    total.demotion_micros += part.demotion_micros;
    total.promotions += part.promotions;
    total.pin_threshold = total.pin_threshold.max(part.pin_threshold);
    total.promotion_bar = total.promotion_bar.max(part.promotion_bar);
    total.migrated_objects += part.migrated_objects;
    total.migrated_bytes += part.migrated_bytes;
    total.migration_rounds += part.migration_rounds;
    total.placed_hot = pair(total.placed_hot, part.placed_hot);
    total.placed_lsm_inline = pair(total.placed_lsm_inline, part.placed_lsm_inline);
    total.placed_value_log = pair(total.placed_value_log, part.placed_value_log);
    total.paced_writes += part.paced_writes;
    total.paced_micros += part.paced_micros;
    total.demoted_into_bottom += part.demoted_into_bottom;
    total.iterator_slot_reads += part.iterator_slot_reads;
    total.jobs += part.jobs;
    total.job_slot_writes += part.job_slot_writes;
    total.job_pages += part.job_pages;
    total.free_slots += part.free_slots;
    total.ghost_slots += part.ghost_slots;
    total.ghost_clears += part.ghost_clears;
    total.partitions.extend(part.partitions);
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::FaultFs;

    #[test]
    fn a_keys_partition_is_its_crc32c_modulo_the_count() {
        // Fixed values: a change of hash would misroute every existing store's keys.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(partition_of(b"123456789", 4), 0xe306_9283 % 4);
        assert_eq!(partition_of(b"anything", 1), 0);
        let mut seen = [0usize; 8];
        for i in 0..8000u32 {
            seen[partition_of(format!("key{i:06}").as_bytes(), 8)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 700), "uneven: {seen:?}");
    }

    #[test]
    fn one_partition_keeps_the_store_directory_more_get_numbered_subdirectories() {
        let hot = Path::new("/db/hot");
        assert_eq!(store_dirs(hot, 1), vec![hot.to_path_buf()]);
        let dirs = store_dirs(hot, 3);
        assert_eq!(dirs[0], hot.join("part-00"));
        assert_eq!(dirs[2], hot.join("part-02"));
        assert!(is_part_dir("part-17") && !is_part_dir("part-") && !is_part_dir("slab-00"));
    }

    #[test]
    fn a_split_batch_puts_each_key_in_its_partition_with_that_partitions_lowest_sequence() {
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let opts = HotTierOptions {
            partitions: 4,
            ..HotTierOptions::default()
        };
        let (tier, _) =
            HotPartitions::open(&fs, Path::new("/db"), &opts, 1, 0, false, false).unwrap();
        let keys: Vec<(Vec<u8>, Vec<super::super::MemVersion>)> = (0..64u64)
            .map(|i| {
                let k = format!("k{i:03}").into_bytes();
                (k, vec![(100 + i, key::ValueKind::Value, b"v".to_vec())])
            })
            .collect();
        let parts = tier.split(FlushBatch {
            keys: keys.clone(),
            lowest: 100,
        });
        assert_eq!(parts.len(), 4);
        let total: usize = parts.iter().map(|b| b.keys.len()).sum();
        assert_eq!(total, keys.len());
        for (i, part) in parts.iter().enumerate() {
            for (k, _) in &part.keys {
                assert_eq!(partition_of(k, 4), i);
            }
            let lowest = part.keys.iter().map(|(_, v)| v[0].0).min();
            assert_eq!(Some(part.lowest), lowest.or(Some(SeqNo::MAX)));
        }
    }

    #[test]
    fn the_count_is_recorded_once_and_another_count_is_refused_once_data_exists() {
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let dir0 = Path::new("/db");
        let hot_dir = dir0.join(DIR);
        let opts = |n| HotTierOptions {
            partitions: n,
            ..HotTierOptions::default()
        };
        // An empty store takes whatever count it is opened with.
        HotPartitions::open(&fs, dir0, &opts(1), 1, 0, false, false).unwrap();
        assert!(!fs.exists(&hot_dir.join(RECORD)));
        let (tier, _) = HotPartitions::open(&fs, dir0, &opts(4), 1, 0, false, false).unwrap();
        assert_eq!(recorded_partitions(fs.as_ref(), &hot_dir).unwrap(), 4);
        assert_eq!(tier.parts().len(), 4);
        // Data in one partition fixes the count.
        let mem = Arc::new(crate::memtable::MemTable::new(0));
        mem.add(7, key::ValueKind::Value, b"key", b"value");
        tier.absorb(&mut mem.iter(), 1).unwrap();
        tier.commit(&|_, _| false);
        drop(tier);
        assert!(!holds_no_data(fs.as_ref(), &hot_dir));
        for other in [1, 2, 8] {
            let err = HotPartitions::open(&fs, dir0, &opts(other), 1, 0, false, false)
                .err()
                .expect("another count is refused");
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("hot_partitions = 4")),
                "{err}"
            );
        }
        // NB: the MANIFEST's log number moved on: the flush that wrote the slot committed.
        let (tier, max_seq) = HotPartitions::open(&fs, dir0, &opts(4), 2, 0, false, false).unwrap();
        assert_eq!(max_seq, 7);
        assert_eq!(
            tier.get(b"key", 7, false).unwrap(),
            HotRead::Found(Some(b"value".to_vec()))
        );
        assert_eq!(tier.part_for(b"key").latest_seq(b"key"), Some(7));
        let holders = tier
            .parts()
            .iter()
            .filter(|p| p.latest_seq(b"key").is_some())
            .count();
        assert_eq!(holders, 1);
    }

    #[test]
    fn a_demotion_in_given_ranges_takes_only_single_version_objects_inside_them() {
        use std::ops::Bound;
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let opts = HotTierOptions::default();
        let (tier, _) =
            HotPartitions::open(&fs, Path::new("/db"), &opts, 1, 0, false, false).unwrap();
        let mem = Arc::new(crate::memtable::MemTable::new(0));
        for (seq, k) in (b'a'..=b'z').enumerate() {
            mem.add(seq as u64 + 1, key::ValueKind::Value, &[k], b"value");
        }
        tier.absorb(&mut mem.iter(), 1).unwrap();
        tier.commit(&|_, _| false);
        let ranges = vec![
            (
                Bound::Excluded(b"c".to_vec()),
                Bound::Included(b"f".to_vec()),
            ),
            (Bound::Included(b"x".to_vec()), Bound::Unbounded),
        ];
        let part = &tier.parts()[0];
        let inside =
            |k: &[u8]| (b"d".as_slice()..=b"f".as_slice()).contains(&k) || k >= b"x".as_slice();
        // NB: which objects the mapper pins is random; several tries see some taken.
        let mut taken = std::collections::BTreeSet::new();
        for _ in 0..20 {
            let Some(plan) = part.plan_demotion_in(&ranges).unwrap() else {
                continue;
            };
            for (ikey, _) in &plan.entries {
                let user = key::user_key(ikey).to_vec();
                assert!(inside(&user), "{user:?} lies outside the ranges");
                taken.insert(user);
            }
        }
        assert!(
            !taken.is_empty(),
            "unpinned objects in the ranges are taken"
        );
    }

    #[test]
    fn recovery_counts_the_class_of_the_version_it_keeps_when_a_key_has_two_slots() {
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let dir0 = Path::new("/db");
        let opts = HotTierOptions::default();
        let (tier, _) = HotPartitions::open(&fs, dir0, &opts, 1, 0, false, false).unwrap();
        // A small version, then a larger one of the same key; no commit, so the small one's
        // slot still holds it on disk, as after a crash before its slot was cleared.
        for (seq, len) in [(1, 10), (2, 900)] {
            let mem = Arc::new(crate::memtable::MemTable::new(0));
            mem.add(seq, key::ValueKind::Value, b"key", &vec![b'v'; len]);
            tier.absorb(&mut mem.iter(), 1).unwrap();
        }
        drop(tier);
        let (tier, max_seq) = HotPartitions::open(&fs, dir0, &opts, 2, 0, false, false).unwrap();
        assert_eq!(max_seq, 2);
        let stats = tier.stats();
        let indexed: u64 = stats.by_class.iter().map(|c| c.2).sum();
        assert_eq!(stats.objects, 1);
        assert_eq!(
            stats.bytes, indexed,
            "bytes count the kept version's class: {stats:?}"
        );
    }

    #[test]
    fn the_partition_record_is_pinned_byte_for_byte() {
        // Golden: `docs/hot-tier.md`, "Layout"; a change here is a format change.
        assert_eq!(encode_record(4), b"4\n");
        assert_eq!(encode_record(64), b"64\n");
        let fs: Arc<dyn Fs> = FaultFs::new(0);
        let opts = HotTierOptions {
            partitions: 12,
            ..HotTierOptions::default()
        };
        HotPartitions::open(&fs, Path::new("/db"), &opts, 1, 0, false, false).unwrap();
        let on_disk = crate::env::read_file(fs.as_ref(), Path::new("/db/hot/PARTITIONS"));
        assert_eq!(on_disk.unwrap(), b"12\n");
        assert_eq!(parse_record(b"12\n"), Some(12));
        for damaged in [
            &b"12"[..],
            b"012\n",
            b"+12\n",
            b"1\n",
            b"65\n",
            b"12\n\n",
            b" 12\n",
        ] {
            assert_eq!(
                parse_record(damaged),
                None,
                "{:?}",
                damaged.escape_ascii().to_string()
            );
        }
    }

    #[test]
    fn a_damaged_partition_record_is_corruption_naming_the_file() {
        let fs = FaultFs::new(0);
        let hot_dir = Path::new("/db/hot");
        fs.create_dir_all(hot_dir).unwrap();
        fs.write_raw(&hot_dir.join(RECORD), b"99\n");
        match recorded_partitions(fs.as_ref(), hot_dir) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (hot_dir.join(RECORD), 0));
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}

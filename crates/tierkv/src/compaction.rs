//! Leveled compaction policy: pure functions over a [`Version`] that choose what to compact, and
//! the rule deciding which entries survive a merge.
//!
//! Scores: L0 is `files / l0_compaction_trigger` (into a last sorted run, see [`l0_score`]);
//! Ln (n >= 1) is `bytes / target(n)` where
//! `target(1) = max_bytes_for_level_base` and each deeper level is `level_size_multiplier` times
//! larger. The level with the highest score >= 1 is compacted into the next one. In Ln the input
//! file is the one whose overlap with Ln+1 is smallest relative to its size (least rewriting).
//! L0 inputs are closed under overlap so that no older L0 entry is left above a newer one.
//! Levels from the bottom one (`placement::runs::bottom_level`, set by `capacity_levels`)
//! down are never compacted: the bottom level is the last sorted run.

use crate::key::{self, SeqNo, ValueKind};
use crate::options::Options;
use crate::version::{FileMeta, Version};
use std::collections::HashSet;
use std::sync::Arc;

/// A compaction to run: `inputs` of `level` merged with `next_inputs` of `level + 1`, or, for
/// a merge within L0 (`within_l0`), L0 tables merged into one L0 table.
#[derive(Debug, Clone)]
pub struct CompactionTask {
    /// Source level.
    pub level: usize,
    /// Files of the source level.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Overlapping files of the next level.
    pub next_inputs: Vec<Arc<FileMeta>>,
    /// The inputs are the newest L0 tables, merged into one L0 table ([`within_l0_task`]).
    pub within_l0: bool,
}

impl CompactionTask {
    /// The level outputs go to.
    pub fn output_level(&self) -> usize {
        if self.within_l0 {
            0
        } else {
            self.level + 1
        }
    }

    /// The L0 order of a merge within L0's output: the least of its inputs' (see
    /// [`FileMeta::l0_seq`]).
    pub fn merged_l0_seq(&self) -> Option<SeqNo> {
        self.within_l0
            .then(|| self.inputs.iter().map(|f| f.l0_seq).min())
            .flatten()
    }

    /// Every input file.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(self.next_inputs.iter())
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.size).sum()
    }
}

/// Compaction score of every level that can be compacted (those above the bottom level).
pub fn level_scores(version: &Version, opts: &Options) -> Vec<f64> {
    let bottom = crate::placement::runs::bottom_level(version, opts);
    (0..bottom)
        .map(|level| {
            if level == 0 {
                l0_score(version, opts, bottom)
            } else {
                version.level_bytes(level) as f64 / opts.level_target_bytes(level) as f64
            }
        })
        .collect()
}

/// The share of the last sorted run's bytes L0 gathers before it merges into the run: each
/// merge rewrites the run, about three bytes per byte L0 takes in. (A tenth, as between two
/// levels, rewrote ten: in the lab, synced ycsb-a with the store at a fifth of the data wrote
/// 3.0 capacity bytes per user byte against 1.4 at a third, and ran 6-19% slower.)
const L0_RUN_SHARE: f64 = 1.0 / 3.0;

/// L0's score: its file count over `l0_compaction_trigger`, unless L0 merges straight into
/// the last sorted run (`bottom` is L1, holding data). Such a merge rewrites every run table
/// its inputs overlap, which is nearly all of them (L0's tables span the key space), however
/// little L0 holds: with a hot store L0's tables are a flush's leftovers and a demotion's
/// objects, a few MiB each, and four of them rewrote a 200 MiB run for 7 MiB of input. So
/// L0 there also waits until it holds [`L0_RUN_SHARE`] of the run's bytes, or until its file
/// count reaches three quarters of `l0_slowdown_trigger`, which bounds the tables a read may
/// check before writes would slow down.
fn l0_score(version: &Version, opts: &Options, bottom: usize) -> f64 {
    let c = &opts.compaction;
    let files = version.levels[0].len() as f64;
    let by_count = files / c.l0_compaction_trigger as f64;
    let Some(by_share) = l0_share_of_run(version, bottom) else {
        return by_count;
    };
    let ceiling = (c.l0_slowdown_trigger * 3 / 4).max(c.l0_compaction_trigger);
    by_count.min(by_share).max(files / ceiling as f64)
}

/// L0's bytes over [`L0_RUN_SHARE`] of the last sorted run's, when L0 merges straight into
/// that run (`bottom` is L1, holding data); `None` otherwise.
fn l0_share_of_run(version: &Version, bottom: usize) -> Option<f64> {
    let run = version.level_bytes(1);
    (bottom == 1 && run > 0).then(|| version.level_bytes(0) as f64 / (run as f64 * L0_RUN_SHARE))
}

/// Chooses the most urgent compaction whose files are not `busy`, if any level needs one.
pub fn pick(version: &Version, opts: &Options, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let mut scores: Vec<(usize, f64)> = level_scores(version, opts)
        .into_iter()
        .enumerate()
        .collect();
    scores.sort_by(|a, b| b.1.total_cmp(&a.1));
    scores
        .into_iter()
        .take_while(|&(_, s)| s >= 1.0)
        .find_map(|(level, _)| {
            let within = (level == 0)
                .then(|| within_l0_task(version, opts, busy))
                .flatten();
            within.or_else(|| pick_level(version, level, busy))
        })
}

/// A merge of L0's newest small tables into one L0 table, when L0 would otherwise merge into
/// the last sorted run (L1) by its file count alone, holding less than [`L0_RUN_SHARE`] of the
/// run's bytes. `None` unless at least `l0_compaction_trigger` such tables lead L0.
///
/// Why: with a hot store, most of a flush goes to the store, and L0 gets small tables (a
/// flush's leftovers, a demotion's objects). They reached the file-count ceiling long before
/// the share, and each merge then rewrote the whole run for a few MiB: in the lab at a
/// million keys, 15 tables of about 1.4 MiB merged into a 900 MiB run, and ycsb-a's run phase
/// wrote 7 capacity-tier bytes per user byte (ycsb-b's 27). Merged among themselves, they cost
/// one more write, and the run is rewritten once L0 holds its share.
///
/// Small: at most two memtables' bytes, which a flush never passes and a merge of the
/// trigger's count of full flushes does, so such a merge's output is not merged again (one of
/// small leftovers may be, at a cost as small as they are). The inputs are a prefix of L0's
/// order, free tables only: the output then sorts where its oldest input did (its `l0_seq`,
/// the least of theirs), after every table newer than its inputs and before every older one.
fn within_l0_task(
    version: &Version,
    opts: &Options,
    busy: &HashSet<u64>,
) -> Option<CompactionTask> {
    let bottom = crate::placement::runs::bottom_level(version, opts);
    if l0_share_of_run(version, bottom)? >= 1.0 {
        return None;
    }
    let small = 2 * opts.memtable.write_buffer_size as u64;
    let inputs: Vec<Arc<FileMeta>> = version.levels[0]
        .iter()
        .take_while(|f| f.size <= small && !busy.contains(&f.number))
        .cloned()
        .collect();
    (inputs.len() >= opts.compaction.l0_compaction_trigger.max(2)).then_some(CompactionTask {
        level: 0,
        inputs,
        next_inputs: Vec::new(),
        within_l0: true,
    })
}

fn pick_level(version: &Version, level: usize, busy: &HashSet<u64>) -> Option<CompactionTask> {
    let task = if level == 0 {
        with_next_inputs(version, 0, version.levels[0].clone())
    } else {
        version.levels[level]
            .iter()
            .filter(|f| !busy.contains(&f.number))
            .map(|f| with_next_inputs(version, level, vec![f.clone()]))
            .min_by(|a, b| overlap_ratio(a).total_cmp(&overlap_ratio(b)))?
    };
    let is_free = task.all_inputs().all(|f| !busy.contains(&f.number));
    (is_free && !task.inputs.is_empty()).then_some(task)
}

fn overlap_ratio(task: &CompactionTask) -> f64 {
    let next: u64 = task.next_inputs.iter().map(|f| f.size).sum();
    let own: u64 = task.inputs.iter().map(|f| f.size).sum();
    next as f64 / own.max(1) as f64
}

fn user_range(files: &[Arc<FileMeta>]) -> (Vec<u8>, Vec<u8>) {
    let lo = files
        .iter()
        .map(|f| f.smallest_user())
        .min()
        .unwrap_or_default();
    let hi = files
        .iter()
        .map(|f| f.largest_user())
        .max()
        .unwrap_or_default();
    (lo.to_vec(), hi.to_vec())
}

/// Adds the files of `level + 1` that overlap `inputs`.
fn with_next_inputs(version: &Version, level: usize, inputs: Vec<Arc<FileMeta>>) -> CompactionTask {
    let (lo, hi) = user_range(&inputs);
    let next_inputs = version.overlapping(level + 1, Some(&lo), Some(&hi));
    CompactionTask {
        level,
        inputs,
        next_inputs,
        within_l0: false,
    }
}

/// L0 files overlapping `[begin, end]`, closed under overlap among L0 files.
fn l0_closure(version: &Version, begin: Option<&[u8]>, end: Option<&[u8]>) -> Vec<Arc<FileMeta>> {
    let mut files = version.overlapping(0, begin, end);
    loop {
        if files.is_empty() {
            return files;
        }
        let (lo, hi) = user_range(&files);
        let grown = version.overlapping(0, Some(&lo), Some(&hi));
        if grown.len() == files.len() {
            return files;
        }
        files = grown;
    }
}

/// The compaction of `level` restricted to `[begin, end]` (for `compact_range`); `None` if the
/// level has no file there. The caller waits while any input is busy.
pub fn manual_task(
    version: &Version,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<CompactionTask> {
    let inputs = if level == 0 {
        l0_closure(version, begin, end)
    } else {
        version.overlapping(level, begin, end)
    };
    (!inputs.is_empty()).then(|| with_next_inputs(version, level, inputs))
}

/// Decides, entry by entry in internal-key order, which entries a merge keeps.
///
/// An entry is dropped when a newer entry of the same user key is visible to every reader (its
/// sequence is at or below the oldest snapshot), or when it is a tombstone visible to every
/// reader at the bottom of the tree for its key, where nothing older can exist to be hidden.
pub struct EntryFilter {
    oldest_snapshot: SeqNo,
    current_key: Option<Vec<u8>>,
    newer_seq_for_key: SeqNo,
}

impl EntryFilter {
    /// `oldest_snapshot` is the oldest live snapshot, or the last sequence if there is none.
    pub fn new(oldest_snapshot: SeqNo) -> Self {
        EntryFilter {
            oldest_snapshot,
            current_key: None,
            newer_seq_for_key: key::MAX_SEQNO,
        }
    }

    /// Whether to keep `ikey`; `is_bottom(user_key)` tells whether no deeper data may hold it.
    pub fn keep(&mut self, ikey: &[u8], is_bottom: impl Fn(&[u8]) -> bool) -> bool {
        let Some(p) = key::parse_internal_key(ikey) else {
            return true;
        };
        if self.current_key.as_deref() != Some(p.user_key) {
            self.current_key = Some(p.user_key.to_vec());
            self.newer_seq_for_key = key::MAX_SEQNO;
        }
        // NB: an entry equal to the one before it is a duplicate a chunked compaction left
        // behind when it crashed (its outputs and its source inputs both listed; see
        // `db::background::Chunks`): one copy is enough, whatever the snapshots.
        let duplicate = self.newer_seq_for_key == p.seq;
        let shadowed = self.newer_seq_for_key <= self.oldest_snapshot;
        self.newer_seq_for_key = p.seq;
        if shadowed || duplicate {
            return false;
        }
        let dead_tombstone =
            p.kind == ValueKind::Deletion && p.seq <= self.oldest_snapshot && is_bottom(p.user_key);
        !dead_tombstone
    }

    /// True if `user_key` differs from the key of the last entry seen (a safe output cut point).
    pub fn is_new_key(&self, user_key: &[u8]) -> bool {
        self.current_key.as_deref() != Some(user_key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;
    use crate::version::tests::meta;

    fn opts() -> Options {
        let mut opts = Options::default();
        opts.compaction.l0_compaction_trigger = 2;
        opts.compaction.max_bytes_for_level_base = 1000;
        opts
    }

    /// Options with L1 the last sorted run (`capacity_levels = 1`, no level on the fast
    /// tier), the default triggers otherwise.
    fn one_run_opts() -> Options {
        let mut opts = Options::default();
        opts.placement.capacity_levels = crate::options::CapacityLevels::Fixed(1);
        opts.placement.levels_on_fast = 0;
        opts
    }

    /// `l0` files of `l0_size` bytes each (file `i + 1` written at sequence `10 + i`) over one
    /// L1 table of `run` bytes, L1 the last sorted run.
    fn l0_over_one_run(l0: u64, l0_size: u64, run: u64) -> Version {
        let mut files = vec![(1, meta(1000, b"a", b"z", run, 1))];
        files.extend((0..l0).map(|i| (0, meta(i + 1, b"a", b"z", l0_size, 10 + i))));
        let v = Version::empty(4).apply(&[], &files).unwrap();
        assert_eq!(crate::placement::runs::bottom_level(&v, &one_run_opts()), 1);
        v
    }

    /// Whether L0 is picked (into the run or within L0) with `l0` files of `l0_size` bytes
    /// over a run of `run` bytes.
    fn l0_into_one_run_picked(l0: u64, l0_size: u64, run: u64) -> bool {
        let v = l0_over_one_run(l0, l0_size, run);
        pick(&v, &one_run_opts(), &HashSet::new()).is_some_and(|t| t.level == 0)
    }

    #[test]
    fn small_l0_tables_at_the_file_ceiling_merge_within_l0_newest_first_and_free_only() {
        let opts = one_run_opts();
        let run = 100_000;
        let numbers = |t: &CompactionTask| t.inputs.iter().map(|f| f.number).collect::<Vec<_>>();
        // Fifteen small tables (the ceiling): all fifteen merge into one L0 table, which
        // sorts where the oldest did.
        let v = l0_over_one_run(15, 10, run);
        let t = pick(&v, &opts, &HashSet::new()).unwrap();
        assert!(t.within_l0 && t.next_inputs.is_empty());
        assert_eq!(t.output_level(), 0);
        assert_eq!(numbers(&t), (1..=15).rev().collect::<Vec<_>>());
        assert_eq!(t.merged_l0_seq(), Some(10));
        // A busy table ends the prefix: the three newest are fewer than the trigger (four),
        // so nothing is picked (the merge into the run needs every L0 table free).
        let busy: HashSet<u64> = [12].into();
        assert!(pick(&v, &opts, &busy).is_none());
        let busy: HashSet<u64> = [10].into();
        assert_eq!(
            numbers(&pick(&v, &opts, &busy).unwrap()),
            [15, 14, 13, 12, 11]
        );
        // A table larger than two memtables (an earlier merge's) ends it too.
        let memtable = opts.memtable.write_buffer_size as u64;
        let v = l0_over_one_run(15, 10, 20 * memtable);
        let mut big = (*v.levels[0][5]).clone();
        big.size = 2 * memtable + 1;
        let v2 = v.apply(&[(0, big.number)], &[(0, Arc::new(big))]).unwrap();
        assert_eq!(
            numbers(&pick(&v2, &opts, &HashSet::new()).unwrap()),
            [15, 14, 13, 12, 11]
        );
        // L0 at a third of the run merges into it, however small its tables.
        let t = pick(&l0_over_one_run(15, 2_300, run), &opts, &HashSet::new()).unwrap();
        assert!(!t.within_l0 && t.next_inputs.len() == 1 && t.output_level() == 1);
        // Not without a one-run capacity tier: L0 then merges into L1 as always.
        let v = l0_over_one_run(15, 10, run);
        let t = pick(&v, &Options::default(), &HashSet::new()).unwrap();
        assert!(!t.within_l0);
    }

    #[test]
    fn l0_waits_for_a_share_of_the_last_run_or_three_quarters_of_the_slowdown_trigger() {
        let run = 100_000;
        // Four files (the trigger) of 1% of the run, or of 8% (a tenth in all): not yet.
        assert!(!l0_into_one_run_picked(4, 1_000, run));
        assert!(!l0_into_one_run_picked(4, 2_500, run));
        // A third of the run (`L0_RUN_SHARE`) in four files: merged.
        assert!(!l0_into_one_run_picked(4, 8_300, run));
        assert!(l0_into_one_run_picked(4, 8_400, run));
        // Never before the file-count trigger, however large.
        assert!(!l0_into_one_run_picked(3, 50_000, run));
        // Fifteen small files (3/4 of the slowdown trigger of 20): merged anyway.
        assert!(!l0_into_one_run_picked(14, 10, run));
        assert!(l0_into_one_run_picked(15, 10, run));
        // An empty run: the file count alone, as between any two levels.
        assert!(l0_into_one_run_picked(4, 10, 0));
    }

    #[test]
    fn l0_over_trigger_takes_all_l0_and_overlapping_l1() {
        let v = Version::empty(4)
            .apply(
                &[],
                &[
                    (0, meta(1, b"a", b"c", 10, 5)),
                    (0, meta(2, b"b", b"d", 10, 6)),
                    (1, meta(3, b"a", b"b", 10, 1)),
                    (1, meta(4, b"x", b"z", 10, 1)),
                ],
            )
            .unwrap();
        let t = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!(t.level, 0);
        assert_eq!(t.inputs.len(), 2);
        assert_eq!(
            t.next_inputs.iter().map(|f| f.number).collect::<Vec<_>>(),
            [3]
        );
        let busy: HashSet<u64> = [3].into();
        assert!(pick(&v, &opts(), &busy).is_none());
    }

    #[test]
    fn level_pick_minimises_overlap() {
        let v = Version::empty(4)
            .apply(
                &[],
                &[
                    (1, meta(1, b"a", b"c", 600, 1)),
                    (1, meta(2, b"m", b"p", 600, 1)),
                    (2, meta(3, b"a", b"c", 5000, 1)),
                    (2, meta(4, b"n", b"n", 10, 1)),
                ],
            )
            .unwrap();
        let t = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!((t.level, t.inputs[0].number), (1, 2));
        assert_eq!(t.next_inputs[0].number, 4);
    }

    #[test]
    fn nothing_to_do_below_targets() {
        let v = Version::empty(4)
            .apply(
                &[],
                &[
                    (0, meta(1, b"a", b"c", 10, 5)),
                    (1, meta(2, b"a", b"c", 10, 1)),
                ],
            )
            .unwrap();
        assert!(pick(&v, &opts(), &HashSet::new()).is_none());
    }

    #[test]
    fn manual_l0_inputs_are_closed_under_overlap() {
        let v = Version::empty(3)
            .apply(
                &[],
                &[
                    (0, meta(1, b"a", b"z", 10, 9)),
                    (0, meta(2, b"m", b"n", 10, 5)),
                ],
            )
            .unwrap();
        let t = manual_task(&v, 0, Some(b"a"), Some(b"b")).unwrap();
        assert_eq!(t.inputs.len(), 2);
        assert!(manual_task(&v, 1, None, None).is_none());
    }

    #[test]
    fn filter_keeps_snapshot_versions_and_drops_bottom_tombstones() {
        let k = |seq, kind| internal_key(b"k", seq, kind);
        // Snapshot at 5: the newest entry <= 5 must survive, older ones may go.
        let mut f = EntryFilter::new(5);
        assert!(f.keep(&k(9, ValueKind::Value), |_| false));
        assert!(f.keep(&k(4, ValueKind::Value), |_| false));
        assert!(!f.keep(&k(3, ValueKind::Value), |_| false));
        // A tombstone visible to all, at the bottom: dropped, and everything below it.
        let mut f = EntryFilter::new(10);
        assert!(!f.keep(&k(8, ValueKind::Deletion), |_| true));
        assert!(!f.keep(&k(2, ValueKind::Value), |_| true));
        // Not at the bottom: the tombstone must stay to hide older data below.
        let mut f = EntryFilter::new(10);
        assert!(f.keep(&k(8, ValueKind::Deletion), |_| false));
        assert!(!f.keep(&k(2, ValueKind::Value), |_| false));
    }

    #[test]
    fn filter_keeps_one_copy_of_a_duplicated_entry() {
        let k = |key: &[u8], seq| internal_key(key, seq, ValueKind::Value);
        // A snapshot older than both copies would keep every version; one copy is enough.
        let mut f = EntryFilter::new(1);
        assert!(f.keep(&k(b"a", 7), |_| false));
        assert!(!f.keep(&k(b"a", 7), |_| false), "the duplicate");
        assert!(
            f.keep(&k(b"a", 5), |_| false),
            "an older version under the snapshot"
        );
        assert!(
            f.keep(&k(b"b", 7), |_| false),
            "the same sequence on another key"
        );
    }
}

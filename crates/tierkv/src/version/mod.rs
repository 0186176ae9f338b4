//! Versions: immutable snapshots of the LSM shape (which table files are in which level).
//!
//! The current [`Version`] is an `Arc` swapped by the [`VersionSet`]; readers and iterators
//! clone the `Arc` and keep using their version across flushes and compactions. A table file is
//! deleted only when no live version lists it.
//!
//! INVARIANT: L0 files are ordered newest first (by [`FileMeta::l0_seq`]: the largest
//! sequence, or for a table merged from L0 tables the least of theirs); files of L1 and deeper
//! are ordered by smallest key and their user-key ranges do not overlap.

pub mod edit;
mod set;

pub use edit::{NewFile, VersionEdit, DB_FORMAT_VERSION};
pub use set::{RecoveredManifest, VersionSet, CURRENT_FILE};

use crate::error::{Error, Result};
use crate::key::{self, SeqNo};
use crate::tier::TierId;
use std::cmp::Ordering;
use std::sync::Arc;

/// A live table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number.
    pub number: u64,
    /// The tier the file is on.
    pub tier: TierId,
    /// Size in bytes.
    pub size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number.
    pub smallest_seq: SeqNo,
    /// Largest sequence number.
    pub largest_seq: SeqNo,
    /// The sequence L0 orders this table by, newest first: its largest sequence, except for a
    /// table merged from L0 tables within L0, which takes the least of theirs
    /// (ARCHITECTURE.md, "Merges within L0"). It sorts where its oldest input did, so
    /// a table that later joins L0 holding newer versions of its keys (a hot-store demotion's)
    /// still sorts before it.
    pub l0_seq: SeqNo,
    /// Entries.
    pub num_entries: u64,
    /// Tombstones.
    pub num_deletions: u64,
}

impl FileMeta {
    /// Smallest user key.
    pub fn smallest_user(&self) -> &[u8] {
        key::user_key(&self.smallest)
    }

    /// Largest user key.
    pub fn largest_user(&self) -> &[u8] {
        key::user_key(&self.largest)
    }

    /// True if the file's user-key range intersects `[begin, end]` (`None` = unbounded).
    pub fn overlaps(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        let after_end = end.is_some_and(|e| self.smallest_user() > e);
        let before_begin = begin.is_some_and(|b| self.largest_user() < b);
        !(after_end || before_begin)
    }

    /// True if `user_key` is within the file's range.
    pub fn contains(&self, user_key: &[u8]) -> bool {
        self.smallest_user() <= user_key && user_key <= self.largest_user()
    }

    /// The MANIFEST record of this file at `level` on the tier named `tier`.
    pub fn to_new_file(&self, level: usize, tier: &str) -> NewFile {
        NewFile {
            level,
            number: self.number,
            tier: tier.to_string(),
            size: self.size,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
            smallest_seq: self.smallest_seq,
            largest_seq: self.largest_seq,
            l0_seq: self.l0_seq,
            num_entries: self.num_entries,
            num_deletions: self.num_deletions,
        }
    }
}

/// An immutable LSM shape.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Files per level.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
}

fn l0_order(a: &Arc<FileMeta>, b: &Arc<FileMeta>) -> Ordering {
    b.l0_seq.cmp(&a.l0_seq).then(b.number.cmp(&a.number))
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn empty(num_levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); num_levels],
        }
    }

    /// The deepest non-empty level below L0 (with a hot store, the capacity tier's large
    /// sorted run); `None` when every table is in L0 or there is none.
    pub fn deepest_non_empty_level(&self) -> Option<usize> {
        (1..self.levels.len())
            .rev()
            .find(|&l| !self.levels[l].is_empty())
    }

    /// Total bytes of a level.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.size).sum()
    }

    /// Every file with its level.
    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, files)| files.iter().map(move |f| (l, f)))
    }

    /// Entries in all its tables (versions and tombstones counted alike).
    pub fn num_entries(&self) -> u64 {
        self.all_files().map(|(_, f)| f.num_entries).sum()
    }

    /// Files of `level` whose range intersects `[begin, end]`, in level order.
    pub fn overlapping(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.levels[level]
            .iter()
            .filter(|f| f.overlaps(begin, end))
            .cloned()
            .collect()
    }

    /// The files that may hold `user_key`, in the order a point read must consult them.
    pub fn files_for_key(&self, user_key: &[u8]) -> Vec<(usize, Arc<FileMeta>)> {
        let mut out = Vec::new();
        for (level, files) in self.levels.iter().enumerate() {
            if level == 0 {
                out.extend(
                    files
                        .iter()
                        .filter(|f| f.contains(user_key))
                        .map(|f| (0, f.clone())),
                );
                continue;
            }
            let i = files.partition_point(|f| f.largest_user() < user_key);
            if let Some(f) = files.get(i).filter(|f| f.contains(user_key)) {
                out.push((level, f.clone()));
            }
        }
        out
    }

    /// True if no level deeper than `level` has a file that may hold `user_key`.
    pub fn is_bottom_for_key(&self, level: usize, user_key: &[u8]) -> bool {
        self.levels[level + 1..]
            .iter()
            .all(|files| files.iter().all(|f| !f.contains(user_key)))
    }

    /// This version with only the levels deeper than `level` (the others empty): enough for
    /// [`Version::is_bottom_for_key`] at `level`, without keeping the files of the levels a
    /// compaction into `level` rewrites alive.
    pub fn deeper_than(&self, level: usize) -> Version {
        let levels = self
            .levels
            .iter()
            .enumerate()
            .map(|(l, files)| if l > level { files.clone() } else { Vec::new() })
            .collect();
        Version { levels }
    }

    /// A new version with `edit` applied; `files` resolves each new file's metadata.
    pub fn apply(
        &self,
        deleted: &[(usize, u64)],
        added: &[(usize, Arc<FileMeta>)],
    ) -> Result<Version> {
        let mut next = self.clone();
        next.apply_unsorted(deleted, added)?;
        next.sort_levels();
        Ok(next)
    }

    /// Removes `deleted` and adds `added` in place, leaving the level order to
    /// [`Version::sort_levels`] (replay applies many edits and sorts once).
    pub(crate) fn apply_unsorted(
        &mut self,
        deleted: &[(usize, u64)],
        added: &[(usize, Arc<FileMeta>)],
    ) -> Result<()> {
        for &(level, number) in deleted {
            let files = self.levels.get_mut(level).ok_or_else(|| bad_level(level))?;
            files.retain(|f| f.number != number);
        }
        for (level, f) in added {
            self.levels
                .get_mut(*level)
                .ok_or_else(|| bad_level(*level))?
                .push(f.clone());
        }
        Ok(())
    }

    /// Restores the level order of the module invariant.
    pub(crate) fn sort_levels(&mut self) {
        self.levels[0].sort_by(l0_order);
        for files in self.levels.iter_mut().skip(1) {
            files.sort_by(|a, b| key::compare_internal(&a.smallest, &b.smallest));
        }
    }

    /// Checks the level invariants (used after recovery and in debug builds).
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                if pair[0].largest_user() >= pair[1].smallest_user() {
                    return Err(format!(
                        "level {level}: tables {} and {} overlap",
                        pair[0].number, pair[1].number
                    ));
                }
            }
        }
        Ok(())
    }
}

fn bad_level(level: usize) -> Error {
    Error::invalid(format!(
        "the database has a table at level {level}, beyond num_levels; reopen with a larger num_levels"
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    /// A table of `size` bytes on tier 0 holding `lo..=hi`, all written at `seq`.
    pub(crate) fn meta(number: u64, lo: &[u8], hi: &[u8], size: u64, seq: SeqNo) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number,
            tier: TierId::FAST,
            size,
            smallest: internal_key(lo, seq, ValueKind::Value),
            largest: internal_key(hi, seq, ValueKind::Value),
            smallest_seq: seq,
            largest_seq: seq,
            l0_seq: seq,
            num_entries: 1,
            num_deletions: 0,
        })
    }

    #[test]
    fn point_read_order_is_l0_newest_first_then_levels() {
        let v = Version::empty(3)
            .apply(
                &[],
                &[
                    (0, meta(1, b"a", b"m", 100, 5)),
                    (0, meta(2, b"c", b"z", 100, 9)),
                    (1, meta(3, b"a", b"f", 100, 1)),
                    (1, meta(4, b"g", b"p", 100, 1)),
                    (2, meta(5, b"a", b"z", 100, 1)),
                ],
            )
            .unwrap();
        let order: Vec<u64> = v
            .files_for_key(b"d")
            .iter()
            .map(|(_, f)| f.number)
            .collect();
        assert_eq!(order, [2, 1, 3, 5]);
        assert!(v.is_bottom_for_key(2, b"d"));
        assert!(!v.is_bottom_for_key(1, b"d"));
        assert!(!v.deeper_than(1).is_bottom_for_key(1, b"d"));
        assert!(v.deeper_than(1).levels[..=1].iter().all(Vec::is_empty));
        v.check_invariants().unwrap();
    }

    #[test]
    fn a_table_merged_within_l0_sorts_where_its_oldest_input_did() {
        // Merged from tables whose largest sequences were 10..=24.
        let mut merged = (*meta(7, b"a", b"z", 100, 24)).clone();
        merged.l0_seq = 10;
        let v = Version::empty(2)
            .apply(
                &[],
                &[
                    (0, Arc::new(merged)),
                    // Joined L0 later: a demotion's table of versions up to 15, and a flush.
                    (0, meta(8, b"a", b"z", 100, 15)),
                    (0, meta(9, b"a", b"z", 100, 30)),
                    // Older than every input.
                    (0, meta(3, b"a", b"z", 100, 9)),
                ],
            )
            .unwrap();
        let order: Vec<u64> = v.levels[0].iter().map(|f| f.number).collect();
        assert_eq!(order, [9, 8, 7, 3]);
    }

    #[test]
    fn overlap_check_finds_violations() {
        let v = Version::empty(2)
            .apply(
                &[],
                &[
                    (1, meta(1, b"a", b"m", 100, 1)),
                    (1, meta(2, b"k", b"z", 100, 1)),
                ],
            )
            .unwrap();
        assert!(v.check_invariants().is_err());
    }
}

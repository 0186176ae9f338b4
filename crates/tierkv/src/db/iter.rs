//! Iterators: [`LevelIter`] walks the sorted, disjoint tables of one level opening each lazily;
//! [`DbIterator`] turns the merged stream of internal entries into the user's view: the newest
//! version of each key at the read sequence, tombstones hidden, within the bounds.
//!
//! A `DbIterator` holds `Arc`s of its memtables and version, so the files it reads are not
//! deleted while it lives: it stays valid across flushes and compactions.

use super::table_cache::TableCache;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIter};
use crate::key::{self, SeqNo, ValueKind};
use crate::memtable::MemTable;
use crate::options::ReadOptions;
use crate::sst::TableIter;
use crate::version::{FileMeta, Version};
use crate::vlog::ValueLog;
use std::sync::Arc;

/// Cursors over `files` of `level` for a merge: one per table in L0, whose tables overlap,
/// and one [`LevelIter`] for a deeper level, whose tables are sorted and disjoint. A merge
/// then holds one open table (and one read-ahead window) per deeper level, not per table:
/// a compaction into a last sorted run of a hundred tables otherwise fills a hundred
/// windows at once and compares a hundred cursors per entry.
pub(crate) fn level_cursors(
    cache: &Arc<TableCache>,
    level: usize,
    files: &[Arc<FileMeta>],
    fill_cache: bool,
) -> Result<Vec<Box<dyn InternalIterator>>> {
    if level > 0 {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let level = LevelIter::new(files.to_vec(), Arc::clone(cache), fill_cache);
        return Ok(vec![Box::new(level)]);
    }
    files
        .iter()
        .map(|f| -> Result<Box<dyn InternalIterator>> {
            Ok(Box::new(cache.get(f)?.iter(fill_cache)))
        })
        .collect()
}

/// A cursor over one level (L1 or deeper): tables are sorted and disjoint.
pub(crate) struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    cache: Arc<TableCache>,
    fill_cache: bool,
    index: usize,
    current: Option<TableIter>,
    error: Option<Error>,
}

impl LevelIter {
    pub fn new(files: Vec<Arc<FileMeta>>, cache: Arc<TableCache>, fill_cache: bool) -> Self {
        LevelIter {
            files,
            cache,
            fill_cache,
            index: 0,
            current: None,
            error: None,
        }
    }

    fn open(&mut self, index: usize) -> bool {
        self.index = index;
        self.current = None;
        let Some(file) = self.files.get(index) else {
            return false;
        };
        match self.cache.get(file) {
            Ok(t) => {
                self.current = Some(t.iter(self.fill_cache));
                true
            }
            Err(e) => {
                self.error.get_or_insert(e);
                false
            }
        }
    }

    fn skip_forward(&mut self) {
        while self
            .current
            .as_ref()
            .is_some_and(|c| !c.valid() && c.status().is_ok())
        {
            if !self.open(self.index + 1) {
                return;
            }
            self.current.as_mut().expect("opened").seek_to_first();
        }
    }

    fn skip_backward(&mut self) {
        while self
            .current
            .as_ref()
            .is_some_and(|c| !c.valid() && c.status().is_ok())
        {
            if self.index == 0 || !self.open(self.index - 1) {
                self.current = None;
                return;
            }
            self.current.as_mut().expect("opened").seek_to_last();
        }
    }

    fn cur(&self) -> &TableIter {
        self.current.as_ref().expect("level iterator is not valid")
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) {
        if self.open(0) {
            self.current.as_mut().expect("opened").seek_to_first();
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        if !self.files.is_empty() && self.open(self.files.len() - 1) {
            self.current.as_mut().expect("opened").seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self
            .files
            .partition_point(|f| key::compare_internal(&f.largest, target).is_lt());
        if self.open(i) {
            self.current.as_mut().expect("opened").seek(target);
        }
        self.skip_forward();
    }

    fn next(&mut self) {
        self.current
            .as_mut()
            .expect("next on invalid iterator")
            .next();
        self.skip_forward();
    }

    fn prev(&mut self) {
        self.current
            .as_mut()
            .expect("prev on invalid iterator")
            .prev();
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.cur().key()
    }

    fn value(&self) -> &[u8] {
        self.cur().value()
    }

    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.current.as_ref().map_or(Ok(()), |c| c.status())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the user's keys and values.
///
/// Position it with [`seek_to_first`](Self::seek_to_first), [`seek`](Self::seek) or
/// [`seek_to_last`](Self::seek_to_last), then move with `next`/`prev` while `valid()`. After the
/// cursor becomes invalid, check [`status`](Self::status): a read error or corruption stops the
/// iteration and is reported there. [`entries`](Self::entries) gives a standard Rust iterator.
pub struct DbIterator {
    inner: MergingIter,
    seq: SeqNo,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Forward: unused. Reverse: the current entry (found by scanning backwards).
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    _version: Arc<Version>,
    _mems: Vec<Arc<MemTable>>,
    /// Split values: the value log, the current entry's user value, and the first error met
    /// resolving one.
    vlog: Option<Arc<ValueLog>>,
    /// Keeps value-log files this iterator may read from garbage collection.
    _value_pin: Option<crate::snapshot::Snapshot>,
    resolved: Vec<u8>,
    split_error: Option<Error>,
}

impl DbIterator {
    pub(crate) fn new(
        inner: MergingIter,
        seq: SeqNo,
        opts: ReadOptions,
        version: Arc<Version>,
        mems: Vec<Arc<MemTable>>,
    ) -> Self {
        DbIterator {
            inner,
            seq,
            lower: opts.lower_bound,
            upper: opts.upper_bound,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            _version: version,
            _mems: mems,
            vlog: None,
            _value_pin: None,
            resolved: Vec::new(),
            split_error: None,
        }
    }

    /// Resolves stored values through `vlog` (split values), holding `pin` (see
    /// `ValueLog::pin_reads`) while it lives.
    pub(crate) fn with_value_log(
        mut self,
        vlog: Option<Arc<ValueLog>>,
        pin: Option<crate::snapshot::Snapshot>,
    ) -> Self {
        self.vlog = vlog;
        self._value_pin = pin;
        self
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key. Panics if not `valid()`.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "key() on an invalid iterator");
        match self.direction {
            Direction::Forward => key::user_key(self.inner.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. Panics if not `valid()`.
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "value() on an invalid iterator");
        if self.vlog.is_some() {
            return &self.resolved;
        }
        match self.direction {
            Direction::Forward => self.inner.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.split_error {
            return Err(e.duplicate());
        }
        self.inner.status()
    }

    /// Positions at the first key (at or above the lower bound).
    pub fn seek_to_first(&mut self) {
        match self.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => {
                self.direction = Direction::Forward;
                self.inner.seek_to_first();
                self.find_next_visible(None);
            }
        }
    }

    /// Positions at the last key (below the upper bound).
    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        match self.upper.clone() {
            Some(upper) => {
                // Land on the first entry at or above the bound, then step back before it.
                self.inner
                    .seek(&key::internal_key(&upper, key::MAX_SEQNO, ValueKind::Value));
                if self.inner.valid() {
                    self.inner.prev();
                } else {
                    self.inner.seek_to_last();
                }
            }
            None => self.inner.seek_to_last(),
        }
        self.find_prev_visible();
    }

    /// Positions at the first key `>= target` (and within bounds).
    pub fn seek(&mut self, target: &[u8]) {
        let target = match &self.lower {
            Some(lower) if target < lower.as_slice() => lower.clone(),
            _ => target.to_vec(),
        };
        self.direction = Direction::Forward;
        self.inner
            .seek(&key::internal_key(&target, self.seq, key::LOOKUP_KIND));
        self.find_next_visible(None);
    }

    /// Moves to the next key.
    pub fn next(&mut self) {
        assert!(self.valid, "next() on an invalid iterator");
        if self.direction == Direction::Reverse {
            // The inner cursor sits before the current key: move it to the current key's
            // first entry, then past all its entries.
            self.direction = Direction::Forward;
            let current = std::mem::take(&mut self.saved_key);
            self.inner.seek(&key::internal_key(
                &current,
                key::MAX_SEQNO,
                ValueKind::Value,
            ));
            self.find_next_visible(Some(&current));
            return;
        }
        let current = key::user_key(self.inner.key()).to_vec();
        self.inner.next();
        self.find_next_visible(Some(&current));
    }

    /// Moves to the previous key.
    pub fn prev(&mut self) {
        assert!(self.valid, "prev() on an invalid iterator");
        if self.direction == Direction::Forward {
            // Step the inner cursor back until it is before every entry of the current key.
            let current = key::user_key(self.inner.key()).to_vec();
            loop {
                self.inner.prev();
                if !self.inner.valid() || key::user_key(self.inner.key()) < current.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_visible();
    }

    // SPLIT VALUES (vlog): every move ends here, which resolves the entry's stored value.
    fn find_next_visible(&mut self, skip: Option<&[u8]>) {
        self.find_next_entry(skip);
        self.resolve_split();
    }

    fn find_prev_visible(&mut self) {
        self.find_prev_entry();
        self.resolve_split();
    }

    /// With split values, reads the current entry's value (inline or from the value log) into
    /// `resolved`; an error ends the iteration and is reported by `status`.
    fn resolve_split(&mut self) {
        let Some(vlog) = &self.vlog else {
            return;
        };
        if !self.valid {
            return;
        }
        let (key, stored) = match self.direction {
            Direction::Forward => (key::user_key(self.inner.key()), self.inner.value()),
            Direction::Reverse => (self.saved_key.as_slice(), self.saved_value.as_slice()),
        };
        match vlog.resolve(key, stored) {
            Ok(v) => self.resolved = v,
            Err(e) => {
                self.valid = false;
                self.split_error = Some(e);
            }
        }
    }

    /// Forward: skips to the newest visible value of the next key, skipping entries of `skip`
    /// (a key already returned) and keys hidden by tombstones.
    fn find_next_entry(&mut self, skip: Option<&[u8]>) {
        let mut skip: Option<Vec<u8>> = skip.map(<[u8]>::to_vec);
        self.valid = false;
        while self.inner.valid() {
            let Some(p) = key::parse_internal_key(self.inner.key()) else {
                self.inner.next();
                continue;
            };
            if self.upper.as_deref().is_some_and(|u| p.user_key >= u) {
                return;
            }
            let skipped = skip.as_deref().is_some_and(|s| p.user_key <= s);
            if p.seq <= self.seq && !skipped {
                match p.kind {
                    ValueKind::Value => {
                        self.valid = true;
                        return;
                    }
                    ValueKind::Deletion => skip = Some(p.user_key.to_vec()),
                }
            }
            self.inner.next();
        }
    }

    /// Reverse: the inner cursor is at or before the last entry of the wanted key; scans back
    /// over that key's entries, keeping the newest visible one.
    fn find_prev_entry(&mut self) {
        self.valid = false;
        let mut kind = ValueKind::Deletion;
        self.saved_key.clear();
        while self.inner.valid() {
            let Some(p) = key::parse_internal_key(self.inner.key()) else {
                self.inner.prev();
                continue;
            };
            if p.seq <= self.seq {
                if kind == ValueKind::Value && p.user_key < self.saved_key.as_slice() {
                    break; // Past the newest visible entry of the saved key.
                }
                if self.lower.as_deref().is_some_and(|l| p.user_key < l) {
                    break;
                }
                kind = p.kind;
                self.saved_key.clear();
                self.saved_key.extend_from_slice(p.user_key);
                self.saved_value.clear();
                if kind == ValueKind::Value {
                    self.saved_value.extend_from_slice(self.inner.value());
                }
            }
            self.inner.prev();
        }
        self.valid = kind == ValueKind::Value
            && self
                .lower
                .as_deref()
                .is_none_or(|l| self.saved_key.as_slice() >= l);
        if !self.valid {
            self.saved_key.clear();
            self.saved_value.clear();
        }
    }

    /// A standard iterator over `(key, value)` pairs from the current position onwards; the
    /// first error ends it as an `Err` item.
    pub fn entries(self) -> Entries {
        Entries {
            iter: self,
            done: false,
        }
    }
}

/// Owned `(key, value)` pairs from a [`DbIterator`].
pub struct Entries {
    iter: DbIterator,
    done: bool,
}

impl Iterator for Entries {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.iter.valid() {
            self.done = true;
            return self.iter.status().err().map(Err);
        }
        let item = (self.iter.key().to_vec(), self.iter.value().to_vec());
        self.iter.next();
        Some(Ok(item))
    }
}

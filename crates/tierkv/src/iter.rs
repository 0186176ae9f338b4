//! Internal iterators: the one cursor interface shared by memtables, SST blocks, tables,
//! levels and the merging iterator, over internal keys in [`crate::key::compare_internal`] order.

use crate::error::Result;

/// A bidirectional cursor over `(internal key, value)` entries.
///
/// After an I/O or checksum error the iterator becomes invalid and `status` returns the error;
/// it never yields data it could not verify.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose key is `>= target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
}

/// Merges several internal iterators into one ordered stream.
///
/// Children are few (memtables, L0 tables, one cursor per deeper level), so the smallest or
/// largest child is found by a linear scan instead of a heap. Two children hold the same
/// internal key only as copies of one version (the hot store and a table, `hot::iter`): a tie
/// yields both, one after the other, which the database iterator reads as one entry.
pub struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    forward: bool,
}

impl MergingIter {
    /// Merges `children`.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIter {
            children,
            current: None,
            forward: true,
        }
    }

    fn pick(&mut self, want: std::cmp::Ordering) {
        self.current = None;
        for i in 0..self.children.len() {
            if !self.children[i].valid() {
                continue;
            }
            let better = match self.current {
                None => true,
                Some(c) => {
                    crate::key::compare_internal(self.children[i].key(), self.children[c].key())
                        == want
                }
            };
            if better {
                self.current = Some(i);
            }
        }
    }

    fn cur(&self) -> &dyn InternalIterator {
        self.children[self.current.expect("merging iterator is not valid")].as_ref()
    }
}

impl InternalIterator for MergingIter {
    fn valid(&self) -> bool {
        self.current.is_some() && self.children.iter().all(|c| c.status().is_ok())
    }

    fn seek_to_first(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_first());
        self.forward = true;
        self.pick(std::cmp::Ordering::Less);
    }

    fn seek_to_last(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.forward = false;
        self.pick(std::cmp::Ordering::Greater);
    }

    fn seek(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.forward = true;
        self.pick(std::cmp::Ordering::Less);
    }

    fn next(&mut self) {
        let cur = self.current.expect("next on invalid iterator");
        if !self.forward {
            // Every other child must move to the first entry after the current key.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() && c.key() == key.as_slice() {
                        c.next();
                    }
                }
            }
            self.forward = true;
        }
        self.children[cur].next();
        self.pick(std::cmp::Ordering::Less);
    }

    fn prev(&mut self) {
        let cur = self.current.expect("prev on invalid iterator");
        if self.forward {
            // Every other child must move to the last entry before the current key.
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&key);
                    if c.valid() {
                        c.prev();
                    } else {
                        c.seek_to_last();
                    }
                }
            }
            self.forward = false;
        }
        self.children[cur].prev();
        self.pick(std::cmp::Ordering::Greater);
    }

    fn key(&self) -> &[u8] {
        self.cur().key()
    }

    fn value(&self) -> &[u8] {
        self.cur().value()
    }

    fn status(&self) -> Result<()> {
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}

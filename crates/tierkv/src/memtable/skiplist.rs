//! An append-only concurrent skip list whose nodes carry their key and value inline.
//!
//! The memtable never removes or changes an entry and frees all of them at once when it is
//! dropped, so this list needs none of a general concurrent map's machinery: no reference
//! counts or epochs on nodes, no deferred frees. A node is one piece of the list's arena
//! holding its links, key and value, so comparing against it touches one place in memory
//! rather than a node and a separately allocated key; and a cursor is a plain pointer that
//! steps along level 0.
//!
//! Inserts are lock-free. A writer finds, level by level from the top, the nodes just before
//! and just after its key (the splice), then links its node bottom-up with one
//! compare-and-swap per level. A swap fails only when another writer linked a node between the
//! same pair at that level; the writer then finds the pair again from its old predecessor,
//! which still sorts before the key because nodes are never removed. Keys must be unique (the
//! memtable's carry distinct sequence numbers).
//!
//! A node is published at level 0 by a release swap, after its key, value and level-0 link
//! were written, so a reader that loads the pointer with acquire sees the whole node. A level
//! above 0 is linked after the levels below it, so a reader that reached a node through a
//! higher level also sees its lower links.

use super::arena::{self, Arena};
use std::cell::Cell;
use std::cmp::Ordering as KeyOrdering;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The most levels a node can have. With one node in four promoted per level, 12 levels keep
/// searches logarithmic up to about 4^12 = 16M entries, far past a memtable's size.
pub const MAX_HEIGHT: usize = 12;

/// The order of the keys a list holds.
pub trait KeyOrder {
    /// Compares two keys.
    fn compare(a: &[u8], b: &[u8]) -> KeyOrdering;
}

/// A node's fixed header. In the same allocation follow `height` links
/// (`AtomicPtr<Node>`), then the key's bytes, then the value's.
#[repr(C)]
struct Node {
    key_len: usize,
    value_len: usize,
    height: usize,
}

const LINKS_OFFSET: usize = size_of::<Node>();
const LINK_SIZE: usize = size_of::<AtomicPtr<Node>>();

impl Node {
    fn size(height: usize, key_len: usize, value_len: usize) -> usize {
        LINKS_OFFSET + height * LINK_SIZE + key_len + value_len
    }

    /// A new unlinked node in `arena`, of `height` levels, holding the concatenation of
    /// `key_parts` and `value`.
    fn allocate(arena: &Arena, height: usize, key_parts: &[&[u8]], value: &[u8]) -> NonNull<Node> {
        const _: () = assert!(arena::ALIGN >= std::mem::align_of::<Node>());
        const _: () = assert!(arena::ALIGN >= std::mem::align_of::<AtomicPtr<Node>>());
        let key_len = key_parts.iter().map(|p| p.len()).sum();
        let node = arena
            .allocate(Self::size(height, key_len, value.len()))
            .cast::<Node>();
        let raw = node.as_ptr();
        // SAFETY: the range is ours, large enough and aligned for a node (asserted above).
        // Every byte the node will be read through is written here before it is returned.
        unsafe {
            raw.write(Node {
                key_len,
                value_len: value.len(),
                height,
            });
            let links = Self::links(raw);
            for level in 0..height {
                links.add(level).write(AtomicPtr::new(ptr::null_mut()));
            }
            let mut dst = Self::key_ptr(raw);
            for part in key_parts {
                ptr::copy_nonoverlapping(part.as_ptr(), dst, part.len());
                dst = dst.add(part.len());
            }
            ptr::copy_nonoverlapping(value.as_ptr(), dst, value.len());
        }
        node
    }

    /// # Safety
    /// `node` is a live node.
    unsafe fn links(node: *const Node) -> *mut AtomicPtr<Node> {
        (node as *mut u8).add(LINKS_OFFSET) as *mut AtomicPtr<Node>
    }

    /// # Safety
    /// `node` is a live node with more than `level` levels.
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        debug_assert!(level < (*node).height);
        &*Self::links(node).add(level)
    }

    /// # Safety
    /// `node` is a live node with more than `level` levels.
    unsafe fn next(node: *const Node, level: usize) -> *mut Node {
        Self::link(node, level).load(Ordering::Acquire)
    }

    /// # Safety
    /// `node` is a live node.
    unsafe fn key_ptr(node: *const Node) -> *mut u8 {
        (Self::links(node) as *mut u8).add((*node).height * LINK_SIZE)
    }

    /// # Safety
    /// `node` is a live, published node; the slice must not outlive it.
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        std::slice::from_raw_parts(Self::key_ptr(node), (*node).key_len)
    }

    /// # Safety
    /// `node` is a live, published node; the slice must not outlive it.
    unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
        let start = Self::key_ptr(node).add((*node).key_len);
        std::slice::from_raw_parts(start, (*node).value_len)
    }
}

/// A concurrent sorted list of unique keys, each with a value. Entries are only added; all are
/// freed together when the list is dropped.
pub struct SkipList<O: KeyOrder> {
    /// Where every node lives.
    arena: Arena,
    /// A node with no key and every level, before all others.
    head: NonNull<Node>,
    /// The tallest level any node may be linked at (a hint: levels above it are empty).
    height: AtomicUsize,
    _order: PhantomData<fn() -> O>,
}

// SAFETY: nodes are written only before they are published and read only after, through
// acquire loads of the links; every shared change is an atomic operation on a link or the
// height. Nodes are freed only with the arena, when the list is dropped.
unsafe impl<O: KeyOrder> Send for SkipList<O> {}
// SAFETY: as above.
unsafe impl<O: KeyOrder> Sync for SkipList<O> {}

impl<O: KeyOrder> Default for SkipList<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O: KeyOrder> SkipList<O> {
    /// An empty list.
    pub fn new() -> Self {
        let arena = Arena::new();
        SkipList {
            head: Node::allocate(&arena, MAX_HEIGHT, &[], &[]),
            arena,
            height: AtomicUsize::new(1),
            _order: PhantomData,
        }
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.first().is_none()
    }

    /// Inserts the key made of `key_parts` concatenated, with `value`. The key must not be in
    /// the list already.
    pub fn insert(&self, key_parts: &[&[u8]], value: &[u8]) {
        let height = random_height();
        let node = Node::allocate(&self.arena, height, key_parts, value).as_ptr();
        let list_height = self.raise_height(height);
        // SAFETY: `node` is ours until linked; every other node reached is live (nodes are
        // freed only when the list is dropped) and published.
        unsafe {
            let key = Node::key(node);
            let mut prev = [self.head.as_ptr(); MAX_HEIGHT];
            let mut next = [ptr::null_mut(); MAX_HEIGHT];
            let mut from = self.head.as_ptr();
            for level in (0..list_height.max(height)).rev() {
                (prev[level], next[level]) = self.splice(key, from, level);
                from = prev[level];
            }
            debug_assert!(next[0].is_null() || O::compare(Node::key(next[0]), key).is_gt());
            for level in 0..height {
                loop {
                    Node::link(node, level).store(next[level], Ordering::Relaxed);
                    let swapped = Node::link(prev[level], level).compare_exchange(
                        next[level],
                        node,
                        Ordering::Release,
                        Ordering::Relaxed,
                    );
                    if swapped.is_ok() {
                        break;
                    }
                    (prev[level], next[level]) = self.splice(key, prev[level], level);
                }
            }
        }
    }

    /// Raises the list's height to at least `height`; returns the height before.
    fn raise_height(&self, height: usize) -> usize {
        let mut current = self.height.load(Ordering::Relaxed);
        while height > current {
            match self.height.compare_exchange_weak(
                current,
                height,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        current
    }

    /// The pair of nodes at `level` between which `key` belongs, searching forward from
    /// `from`, which sorts before `key` (or is the head).
    ///
    /// # Safety
    /// `from` is a live node with more than `level` levels.
    unsafe fn splice(&self, key: &[u8], from: *mut Node, level: usize) -> (*mut Node, *mut Node) {
        let mut before = from;
        loop {
            let after = Node::next(before, level);
            if after.is_null() || O::compare(Node::key(after), key) != KeyOrdering::Less {
                return (before, after);
            }
            before = after;
        }
    }

    /// Walks down from the top level, at each level moving forward while the next node sorts
    /// before `key`; returns the last node before `key` (the head if none) and the first at or
    /// after it (null if none).
    fn descend(&self, key: &[u8]) -> (*mut Node, *mut Node) {
        let mut before = self.head.as_ptr();
        let mut level = self.height.load(Ordering::Relaxed);
        // SAFETY: every node reached is live and published; the head has every level.
        unsafe {
            loop {
                level -= 1;
                let (b, after) = self.splice(key, before, level);
                before = b;
                if level == 0 {
                    return (before, after);
                }
            }
        }
    }

    /// The first entry whose key is at least `key`.
    pub fn seek(&self, key: &[u8]) -> Option<Entry<'_>> {
        self.entry(self.descend(key).1)
    }

    /// The last entry whose key sorts before `key`.
    pub fn seek_before(&self, key: &[u8]) -> Option<Entry<'_>> {
        self.entry(self.descend(key).0)
    }

    /// The first entry.
    pub fn first(&self) -> Option<Entry<'_>> {
        // SAFETY: the head is live and has every level.
        self.entry(unsafe { Node::next(self.head.as_ptr(), 0) })
    }

    /// The last entry.
    pub fn last(&self) -> Option<Entry<'_>> {
        let mut node = self.head.as_ptr();
        let mut level = self.height.load(Ordering::Relaxed);
        // SAFETY: every node reached is live and published; the head has every level.
        unsafe {
            while level > 0 {
                let next = Node::next(node, level - 1);
                if next.is_null() {
                    level -= 1;
                } else {
                    node = next;
                }
            }
        }
        self.entry(node)
    }

    /// The entry at `node`, or `None` for null or the head.
    fn entry(&self, node: *mut Node) -> Option<Entry<'_>> {
        if node == self.head.as_ptr() {
            return None;
        }
        NonNull::new(node).map(|node| Entry {
            node,
            _list: PhantomData,
        })
    }
}

/// One entry of a list, borrowed from it.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    node: NonNull<Node>,
    _list: PhantomData<&'a ()>,
}

// SAFETY: an entry only reads an immutable, published node.
unsafe impl Send for Entry<'_> {}
// SAFETY: as above.
unsafe impl Sync for Entry<'_> {}

impl<'a> Entry<'a> {
    /// The entry's key.
    pub fn key(&self) -> &'a [u8] {
        // SAFETY: the node is published and lives as long as the list borrowed for 'a.
        unsafe { Node::key(self.node.as_ptr()) }
    }

    /// The entry's value.
    pub fn value(&self) -> &'a [u8] {
        // SAFETY: as in `key`.
        unsafe { Node::value(self.node.as_ptr()) }
    }

    /// The entry after this one.
    pub fn next(&self) -> Option<Entry<'a>> {
        // SAFETY: as in `key`; every node has level 0.
        let next = unsafe { Node::next(self.node.as_ptr(), 0) };
        NonNull::new(next).map(|node| Entry {
            node,
            _list: PhantomData,
        })
    }

    /// The same entry with its borrow of the list erased.
    ///
    /// # Safety
    /// The caller keeps the list alive for as long as it uses the result or anything read
    /// through it.
    pub unsafe fn detach(self) -> Entry<'static> {
        Entry {
            node: self.node,
            _list: PhantomData,
        }
    }
}

/// A node height: 1, then one more level with probability 1/4 each, up to `MAX_HEIGHT`.
fn random_height() -> usize {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(rand::random::<u64>() | 1);
    }
    let bits = STATE.with(|state| {
        // xorshift64: cheap, and heights need no more than uniform-looking bits.
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        x
    });
    let mut height = 1;
    let mut rest = bits;
    while height < MAX_HEIGHT && rest & 3 == 0 {
        height += 1;
        rest >>= 2;
    }
    height
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    struct Bytewise;
    impl KeyOrder for Bytewise {
        fn compare(a: &[u8], b: &[u8]) -> KeyOrdering {
            a.cmp(b)
        }
    }

    fn keys_forward(list: &SkipList<Bytewise>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut e = list.first();
        while let Some(entry) = e {
            out.push(entry.key().to_vec());
            e = entry.next();
        }
        out
    }

    /// Every level, walked alone, is sorted and a subsequence of level 0.
    fn check_levels(list: &SkipList<Bytewise>) {
        let level0: BTreeSet<Vec<u8>> = keys_forward(list).into_iter().collect();
        for level in 0..MAX_HEIGHT {
            let mut prev: Option<&[u8]> = None;
            // SAFETY: the list is alive and not being written.
            unsafe {
                let mut node = Node::next(list.head.as_ptr(), level);
                while !node.is_null() {
                    let key = Node::key(node);
                    assert!(level0.contains(key));
                    assert!(prev.is_none_or(|p| p < key), "level {level} out of order");
                    prev = Some(key);
                    node = Node::next(node, level);
                }
            }
        }
    }

    #[test]
    fn an_empty_list_has_no_entries() {
        let list = SkipList::<Bytewise>::new();
        assert!(list.is_empty());
        assert!(list.first().is_none());
        assert!(list.last().is_none());
        assert!(list.seek(b"a").is_none());
        assert!(list.seek_before(b"a").is_none());
    }

    #[test]
    fn inserts_in_any_order_come_back_sorted_with_their_values() {
        let list = SkipList::<Bytewise>::new();
        let mut model = std::collections::BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let inserts: u32 = if cfg!(miri) { 300 } else { 5000 };
        for i in 0..inserts {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("{:08}", (x >> 33) % 1_000_000).into_bytes();
            if model.contains_key(&key) {
                continue;
            }
            let value = i.to_le_bytes().repeat((i % 7) as usize);
            let (a, b) = key.split_at(key.len() / 2);
            list.insert(&[a, b], &value);
            model.insert(key, value);
        }
        let mut e = list.first();
        for (k, v) in &model {
            let entry = e.expect("entry missing");
            assert_eq!(entry.key(), &k[..]);
            assert_eq!(entry.value(), &v[..]);
            e = entry.next();
        }
        assert!(e.is_none());
        check_levels(&list);
    }

    #[test]
    fn seeks_land_on_the_neighbours_of_a_key() {
        let list = SkipList::<Bytewise>::new();
        for k in [b"b", b"d", b"f"] {
            list.insert(&[k], b"v");
        }
        let key = |e: Option<Entry<'_>>| e.map(|e| e.key().to_vec());
        assert_eq!(key(list.seek(b"a")), Some(b"b".to_vec()));
        assert_eq!(key(list.seek(b"d")), Some(b"d".to_vec()));
        assert_eq!(key(list.seek(b"e")), Some(b"f".to_vec()));
        assert_eq!(key(list.seek(b"g")), None);
        assert_eq!(key(list.seek_before(b"b")), None);
        assert_eq!(key(list.seek_before(b"d")), Some(b"b".to_vec()));
        assert_eq!(key(list.seek_before(b"z")), Some(b"f".to_vec()));
        assert_eq!(key(list.first()), Some(b"b".to_vec()));
        assert_eq!(key(list.last()), Some(b"f".to_vec()));
    }

    #[test]
    fn concurrent_writers_and_readers_see_a_sorted_complete_list() {
        const WRITERS: u32 = 4;
        const PER_WRITER: u32 = if cfg!(miri) { 100 } else { 20_000 };
        let list = Arc::new(SkipList::<Bytewise>::new());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (list, done) = (Arc::clone(&list), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut passes = 0;
                while !done.load(Ordering::Acquire) || passes == 0 {
                    let keys = keys_forward(&list);
                    assert!(keys.windows(2).all(|w| w[0] < w[1]));
                    for k in keys.iter().step_by(97) {
                        let found = list.seek(k).expect("a key seen is found");
                        assert_eq!(found.key(), &k[..]);
                        assert_eq!(found.value(), &k[..4]);
                    }
                    passes += 1;
                }
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let list = Arc::clone(&list);
                std::thread::spawn(move || {
                    // Interleaved keys, so writers race for the same splices.
                    for i in 0..PER_WRITER {
                        let key = (i * WRITERS + w).to_be_bytes();
                        list.insert(&[&key, b"-suffix"], &key);
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        reader.join().unwrap();
        let keys = keys_forward(&list);
        assert_eq!(keys.len(), (WRITERS * PER_WRITER) as usize);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(&k[..4], &(i as u32).to_be_bytes());
        }
        check_levels(&list);
    }

    #[test]
    fn heights_are_mostly_one_and_bounded() {
        let n = if cfg!(miri) { 4_000 } else { 100_000 };
        let heights: Vec<usize> = (0..n).map(|_| random_height()).collect();
        assert!(heights.iter().all(|&h| (1..=MAX_HEIGHT).contains(&h)));
        let ones = heights.iter().filter(|&&h| h == 1).count();
        // Three in four nodes stay at height 1.
        assert!(
            (n * 70 / 100..n * 80 / 100).contains(&ones),
            "{ones} of {n} at height 1"
        );
    }
}

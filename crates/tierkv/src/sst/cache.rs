//! The block cache: decoded blocks shared by every table of one or more databases.
//!
//! Keyed by `(cache_id, block offset)`, where each opened [`Table`](super::Table) takes a fresh
//! `cache_id` from [`BlockCache::next_id`], so tables of several databases never collide. The
//! cache is split into [`SHARDS`] independent LRU lists, each with `capacity / SHARDS` bytes,
//! charged by [`Block::size`].
//!
//! INVARIANTS: a shard's usage never exceeds its budget after an insert returns (a block larger
//! than a whole shard is not cached); a shard lock is held only for map and list updates, never
//! across I/O.

use crate::sst::block::Block;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Number of independent LRU shards.
pub const SHARDS: usize = 16;

type Key = (u64, u64);

const NIL: usize = usize::MAX;

#[derive(Debug)]
struct Node {
    key: Key,
    block: Option<Arc<Block>>,
    charge: usize,
    prev: usize,
    next: usize,
}

/// One LRU list: a slab of nodes linked from most (`head`) to least (`tail`) recently used.
#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Key, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    usage: usize,
    capacity: usize,
}

impl Shard {
    fn new(capacity: usize) -> Self {
        Shard {
            head: NIL,
            tail: NIL,
            capacity,
            ..Shard::default()
        }
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.nodes[i].prev, self.nodes[i].next);
        match p {
            NIL => self.head = n,
            p => self.nodes[p].next = n,
        }
        match n {
            NIL => self.tail = p,
            n => self.nodes[n].prev = p,
        }
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head;
        match self.head {
            NIL => self.tail = i,
            h => self.nodes[h].prev = i,
        }
        self.head = i;
    }

    fn get(&mut self, key: Key) -> Option<Arc<Block>> {
        let i = *self.map.get(&key)?;
        self.unlink(i);
        self.push_front(i);
        self.nodes[i].block.clone()
    }

    fn remove(&mut self, i: usize) {
        self.unlink(i);
        let node = &mut self.nodes[i];
        node.block = None;
        self.usage -= node.charge;
        self.map.remove(&node.key);
        self.free.push(i);
    }

    fn insert(&mut self, key: Key, block: Arc<Block>) {
        let charge = block.size();
        if let Some(&i) = self.map.get(&key) {
            self.remove(i);
        }
        if charge > self.capacity {
            return;
        }
        while self.usage + charge > self.capacity && self.tail != NIL {
            self.remove(self.tail);
        }
        let node = Node {
            key,
            block: Some(block),
            charge,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_front(i);
        self.map.insert(key, i);
        self.usage += charge;
    }
}

/// A sharded LRU cache of decoded blocks with a total byte budget.
#[derive(Debug)]
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    capacity: usize,
    next_id: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of block contents.
    pub fn new(capacity_bytes: usize) -> Self {
        let per_shard = capacity_bytes / SHARDS;
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Shard::new(per_shard)))
                .collect(),
            capacity: capacity_bytes,
            next_id: AtomicU64::new(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// A cache id no other caller of this cache has received.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn shard(&self, key: Key) -> &Mutex<Shard> {
        let h = (key.0 ^ key.1.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(h >> 60) as usize % SHARDS]
    }

    /// The cached block at `offset` of the table with `cache_id`; counts a hit or a miss.
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self
            .shard((cache_id, offset))
            .lock()
            .get((cache_id, offset));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block`, evicting least recently used blocks of its shard to stay in budget.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) {
        self.shard((cache_id, offset))
            .lock()
            .insert((cache_id, offset), block);
    }

    /// Lookups that found a block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that found nothing.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes of blocks currently cached.
    pub fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage).sum()
    }

    /// The byte budget given to [`BlockCache::new`].
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(len: usize) -> Arc<Block> {
        let mut data = vec![0u8; len];
        data[len - 4..].copy_from_slice(&1u32.to_le_bytes());
        Arc::new(Block::new(data).unwrap())
    }

    #[test]
    fn hit_after_insert_and_ids_unique() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(1, 0).is_none());
        c.insert(1, 0, block(100));
        assert_eq!(c.get(1, 0).unwrap().size(), 100);
        assert!(c.get(2, 0).is_none());
        assert_eq!((c.hits(), c.misses(), c.usage()), (1, 2, 100));
        assert_ne!(c.next_id(), c.next_id());
    }

    #[test]
    fn eviction_respects_budget_and_recency() {
        let c = BlockCache::new(16 * 1000);
        for off in 0..2000u64 {
            c.insert(7, off, block(100));
            assert!(c.usage() <= c.capacity());
        }
        assert!(c.usage() > c.capacity() / 2);
        // Within one shard, touching an entry protects it from the next eviction.
        let mut s = Shard::new(300);
        for k in 0..3 {
            s.insert((0, k), block(100));
        }
        assert!(s.get((0, 0)).is_some());
        s.insert((0, 3), block(100));
        assert!(s.get((0, 0)).is_some());
        assert!(s.get((0, 1)).is_none());
        assert_eq!(s.usage, 300);
        s.insert((0, 9), block(301));
        assert_eq!((s.usage, s.map.len()), (300, 3));
        s.insert((0, 3), block(50));
        assert_eq!(s.usage, 250);
    }
}

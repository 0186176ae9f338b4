//! Multi-get: many point lookups from one read view, with their table reads batched.
//!
//! Every key first tries the memtables. The rest walk their candidate tables (L0 newest
//! first, then one table per level) in rounds: in a round each key advances through tables
//! the filter, index or block cache can answer without I/O until it needs a data block; the
//! round then reads every needed block once (keys sharing a block share the read) in one
//! batch through [`read_batch`] — one io_uring submission where the kernel allows — and each
//! key either finds its entry or goes on to its next table in the following round. A batch of
//! keys thus costs about one device round trip per table depth, not one per key.

use super::hot::HotAnswer;
use super::DbInner;
use crate::env::{read_batch, ReadRequest};
use crate::error::Result;
use crate::key::{self, ValueKind};
use crate::options::ReadOptions;
use crate::sst::{Block, BlockHandle, Entry, Probe, ReadTrace, Table};
use crate::stats::Counters;
use crate::version::FileMeta;
use std::collections::HashMap;
use std::sync::Arc;

/// One key still looking through tables.
struct KeySearch {
    /// Position of the key in the caller's list.
    index: usize,
    /// Internal lookup key at the view's sequence.
    lookup: Vec<u8>,
    /// Candidate tables, in the order they must be consulted.
    files: Vec<(usize, Arc<FileMeta>)>,
    /// The next candidate to consult.
    next: usize,
    trace: ReadTrace,
}

/// A key waiting for the data block `block` of the round's reads.
struct Waiting {
    search: KeySearch,
    block: usize,
}

/// Where a key's search stands after the lookups that need no I/O.
enum Step {
    /// Found, deleted or absent: its answer is recorded.
    Settled,
    /// Needs the data block at the handle of the table.
    Read(KeySearch, Arc<Table>, BlockHandle),
}

type Values = Vec<Option<Vec<u8>>>;

impl DbInner {
    /// The values of `keys` from one read view (see [`crate::Db::multi_get`]).
    pub(super) fn multi_get(&self, opts: &ReadOptions, keys: &[&[u8]]) -> Result<Values> {
        Counters::add(&self.counters.multi_gets, 1);
        Counters::add(&self.counters.gets, keys.len() as u64);
        // SPLIT VALUES: pinned against value-log collection until the values are resolved.
        let _pin = self.pin_values();
        let mut out: Values;
        let mut searching = Vec::new();
        // NB: the view lives until the rounds end: its version keeps their tables' files.
        let _view = 'view: loop {
            let view = self.read_view(opts);
            out = vec![None; keys.len()];
            searching.clear();
            for (index, &user_key) in keys.iter().enumerate() {
                // Hot tier hook: memtables, then the hot store, then the tables.
                let found = match self.memtable_lookup(&view, user_key, true) {
                    Some(value) => Some(value),
                    None => match self.hot_get(&view, user_key)? {
                        HotAnswer::Found(value) => Some(value),
                        HotAnswer::Lsm => None,
                        HotAnswer::Retry => continue 'view,
                    },
                };
                match found {
                    Some(value) => out[index] = value,
                    None => searching.push(KeySearch {
                        index,
                        lookup: key::internal_key(user_key, view.seq, key::LOOKUP_KIND),
                        files: view.version.files_for_key(user_key),
                        next: 0,
                        trace: ReadTrace::default(),
                    }),
                }
            }
            break view;
        };
        while !searching.is_empty() {
            searching = self.multi_get_round(searching, opts.fill_cache, &mut out)?;
        }
        // SPLIT VALUES: stored values are resolved (`user_value`).
        if self.vlog.is_some() {
            for (slot, &user_key) in out.iter_mut().zip(keys) {
                if let Some(v) = slot.take() {
                    *slot = Some(self.user_value(user_key, v)?);
                }
            }
        }
        Ok(out)
    }

    /// One round: advance every key to the data block it needs, read those blocks together,
    /// settle the keys they answer. Returns the keys still searching.
    fn multi_get_round(
        &self,
        searching: Vec<KeySearch>,
        fill_cache: bool,
        out: &mut Values,
    ) -> Result<Vec<KeySearch>> {
        let mut waiting: Vec<Waiting> = Vec::new();
        let mut blocks: Vec<(Arc<Table>, BlockHandle)> = Vec::new();
        let mut block_of: HashMap<(usize, u64), usize> = HashMap::new();
        for search in searching {
            let Step::Read(search, table, handle) = self.advance_without_io(search, out)? else {
                continue;
            };
            let id = (Arc::as_ptr(&table) as usize, handle.offset);
            let block = *block_of.entry(id).or_insert_with(|| {
                blocks.push((Arc::clone(&table), handle));
                blocks.len() - 1
            });
            waiting.push(Waiting { search, block });
        }
        let decoded = self.read_blocks(&blocks, fill_cache, &mut waiting)?;
        let mut next_round = Vec::new();
        for w in waiting {
            let mut search = w.search;
            let (table, handle) = &blocks[w.block];
            let found = table.search_block(&decoded[w.block], *handle, &search.lookup)?;
            match found {
                Some(entry) => self.settle(search, Some(entry), out),
                None => {
                    search.next += 1;
                    next_round.push(search);
                }
            }
        }
        Ok(next_round)
    }

    /// Consults `search`'s tables from its next candidate on until one needs a data block
    /// read, or the key is settled (found, or no candidate left).
    fn advance_without_io(&self, mut search: KeySearch, out: &mut Values) -> Result<Step> {
        while let Some((_, file)) = search.files.get(search.next) {
            let table = self.table_cache.get(file)?;
            let probe = table.probe(&search.lookup, &mut search.trace)?;
            if std::mem::take(&mut search.trace.filter_negative) {
                Counters::add(&self.counters.filter_negatives, 1);
            }
            match probe {
                Probe::Read(handle) => return Ok(Step::Read(search, table, handle)),
                Probe::Done(Some(entry)) => {
                    self.settle(search, Some(entry), out);
                    return Ok(Step::Settled);
                }
                Probe::Done(None) => search.next += 1,
            }
        }
        self.settle(search, None, out);
        Ok(Step::Settled)
    }

    /// Reads the blocks `blocks` in one batch and decodes them; the bytes read are charged to
    /// the first key waiting for each block.
    fn read_blocks(
        &self,
        blocks: &[(Arc<Table>, BlockHandle)],
        fill_cache: bool,
        waiting: &mut [Waiting],
    ) -> Result<Vec<Arc<Block>>> {
        if blocks.is_empty() {
            return Ok(Vec::new());
        }
        let mut reqs = Vec::with_capacity(blocks.len());
        for (table, handle) in blocks {
            let (offset, len) = table.block_range(*handle)?;
            reqs.push(ReadRequest {
                file: table.file(),
                offset,
                len,
            });
        }
        Counters::add(&self.counters.multi_get_block_reads, blocks.len() as u64);
        let mut first_waiter: Vec<Option<usize>> = vec![None; blocks.len()];
        for (i, w) in waiting.iter().enumerate() {
            first_waiter[w.block].get_or_insert(i);
        }
        let mut decoded = Vec::with_capacity(blocks.len());
        for (b, raw) in read_batch(&reqs).into_iter().enumerate() {
            let (table, handle) = &blocks[b];
            let mut spare = ReadTrace::default();
            let trace = match first_waiter[b] {
                Some(i) => &mut waiting[i].search.trace,
                None => &mut spare,
            };
            decoded.push(table.decode_block(*handle, &raw?, fill_cache, trace)?);
        }
        Ok(decoded)
    }

    /// Records the outcome for one key: `entry` is the newest entry found (a value or a
    /// deletion), or `None` if no table has the key.
    fn settle(&self, search: KeySearch, entry: Option<Entry>, out: &mut Values) {
        let Some((ikey, value)) = entry else {
            Counters::add(&self.counters.reads_not_found, 1);
            return;
        };
        if let Some((level, file)) = search.files.get(search.next) {
            self.count_table_read(*level, file.tier, &search.trace);
        }
        let kind = key::parse_internal_key(&ikey).map(|p| p.kind);
        out[search.index] = (kind == Some(ValueKind::Value)).then_some(value);
    }
}

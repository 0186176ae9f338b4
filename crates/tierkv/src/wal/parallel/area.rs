//! The parallel WAL (SpanDB): a preallocated area of 4 KiB pages on tier 0 that several
//! loggers write at once. The format is specified in `docs/parallel-wal.md`.
//!
//! - The area starts with two metadata pages (written alternately, newest generation wins),
//!   then `groups` page groups of `group_pages` pages each. A memtable owns one group for its
//!   whole life; the group's pages carry the memtable's log tag number (its "colour", equal to
//!   the memtable's number, unique and increasing).
//! - A logger writes a *run*: consecutive pages holding whole entries (an entry may cross pages
//!   inside its run, never between runs). Runs are claimed in sequence-number order, so page
//!   order is sequence order inside a group.
//! - Every page header carries `durable_seq`: every write numbered at or below it was on stable
//!   storage when the run was packed. Recovery uses it to tell a crash (lost, unacknowledged
//!   pages) from corruption (lost pages something later proves were durable).
//! - Recovery reads the metadata, then each live group's pages until a page of another colour or
//!   a bad checksum, and redoes the entries in ascending sequence order, stopping at a gap.
//!   Groups of flushed memtables are reused without wiping: their old pages have an older colour.

use crate::batch::WriteBatch;
use crate::coding::{crc, get_u32, get_u64};
use crate::env::AlignedBuf;
use crate::env::{Fs, PositionalFile};
use crate::error::{Error, Result};
use crate::wal::log::RecoveryMode;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Page size: the unit of claiming, writing and recovery.
pub const PAGE: usize = 4096;
/// Bytes of a page header.
pub const PAGE_HEADER: usize = 24;
/// Payload bytes per page.
pub const PAGE_PAYLOAD: usize = PAGE - PAGE_HEADER;
/// Bytes of an entry header: length and checksum.
pub const ENTRY_HEADER: usize = 8;
/// Name of the area file in tier 0's directory.
pub const AREA_FILE: &str = "WAL-AREA";
/// Metadata pages before the first group.
const META_PAGES: u64 = 2;
/// The metadata page's magic: the ASCII bytes `tierkvWA` on disk.
const META_MAGIC: u64 = u64::from_le_bytes(*b"tierkvWA");
/// The magic of areas written before the magic's bytes were made to spell `tierkvWA` (the
/// same letters in reverse on disk). Read, never written. Do not change.
const LEGACY_META_MAGIC: u64 = 0x7469_6572_6b76_5741;
const META_VERSION: u32 = 1;
/// Page flag: this page starts a run.
const FLAG_RUN_START: u16 = 1;
/// `end_page` of a group still being written.
const OPEN_GROUP: u32 = u32::MAX;

/// The shape of the area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Page groups in the area.
    pub groups: u64,
    /// Pages per group.
    pub group_pages: u64,
}

impl Layout {
    /// Bytes of the whole area file.
    pub fn area_bytes(&self) -> u64 {
        (META_PAGES + self.groups * self.group_pages) * PAGE as u64
    }

    /// File offset of page `page` of group `slot`.
    pub fn page_offset(&self, slot: usize, page: u64) -> u64 {
        (META_PAGES + slot as u64 * self.group_pages + page) * PAGE as u64
    }
}

/// Pages a write of `payload_len` bytes may need, whatever it is packed with: the bound a
/// group's space is reserved by before the write is packed.
pub fn worst_case_pages(payload_len: usize) -> u64 {
    (payload_len + ENTRY_HEADER).div_ceil(PAGE_PAYLOAD) as u64
}

/// The largest payload whose worst case fits `pages` pages (the inverse of
/// [`worst_case_pages`]).
pub fn largest_payload(pages: u64) -> usize {
    (pages as usize * PAGE_PAYLOAD).saturating_sub(ENTRY_HEADER)
}

/// Pages `payload_lens` take when packed into one run.
pub fn run_pages(payload_lens: impl IntoIterator<Item = usize>) -> u64 {
    let bytes: usize = payload_lens.into_iter().map(|l| l + ENTRY_HEADER).sum();
    bytes.div_ceil(PAGE_PAYLOAD).max(1) as u64
}

/// One group slot as the metadata page records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slot {
    /// The owning memtable's number; 0 for a slot never used.
    pub colour: u64,
    /// Sequence number of the group's first write.
    pub first_seq: u64,
    /// Pages used once sealed; [`u32::MAX`] while the group is written.
    pub end_page: u32,
}

/// The metadata page's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Bumped by every metadata write; the valid copy with the highest one wins.
    pub generation: u64,
    /// The area's shape.
    pub layout: Layout,
    /// One entry per group.
    pub slots: Vec<Slot>,
}

impl Meta {
    /// Encodes into one page.
    pub(crate) fn encode(&self) -> AlignedBuf {
        let mut page = AlignedBuf::zeroed(PAGE);
        let b = page.as_mut_slice();
        b[0..8].copy_from_slice(&META_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&META_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..28].copy_from_slice(&(PAGE as u32).to_le_bytes());
        b[28..32].copy_from_slice(&(self.layout.groups as u32).to_le_bytes());
        b[32..40].copy_from_slice(&self.layout.group_pages.to_le_bytes());
        for (i, s) in self.slots.iter().enumerate() {
            let at = 40 + i * 24;
            b[at..at + 8].copy_from_slice(&s.colour.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&s.first_seq.to_le_bytes());
            b[at + 16..at + 20].copy_from_slice(&s.end_page.to_le_bytes());
        }
        let sum = crc(&b[16..]);
        b[12..16].copy_from_slice(&sum.to_le_bytes());
        page
    }

    /// Decodes a metadata page; `None` if it is not a valid one (never written, torn).
    pub fn decode(b: &[u8]) -> Option<Meta> {
        let magic = get_u64(b.get(0..8)?)?;
        if b.len() < PAGE
            || (magic != META_MAGIC && magic != LEGACY_META_MAGIC)
            || get_u32(&b[8..12])? != META_VERSION
        {
            return None;
        }
        if get_u32(&b[12..16])? != crc(&b[16..PAGE]) || get_u32(&b[24..28])? != PAGE as u32 {
            return None;
        }
        let groups = get_u32(&b[28..32])? as u64;
        let layout = Layout {
            groups,
            group_pages: get_u64(&b[32..40])?,
        };
        // NB: the page's checksum only says it was written whole; a layout whose size does
        // not fit in a u64 was never written by the engine, and every offset below it would
        // overflow.
        let pages = groups
            .checked_mul(layout.group_pages)
            .and_then(|p| p.checked_add(META_PAGES));
        if groups as usize > (PAGE - 40) / 24 || pages?.checked_mul(PAGE as u64).is_none() {
            return None;
        }
        let slots = (0..groups as usize)
            .map(|i| {
                let at = 40 + i * 24;
                Some(Slot {
                    colour: get_u64(&b[at..at + 8])?,
                    first_seq: get_u64(&b[at + 8..at + 16])?,
                    end_page: get_u32(&b[at + 16..at + 20])?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Meta {
            generation: get_u64(&b[16..24])?,
            layout,
            slots,
        })
    }
}

/// Most groups one metadata page describes.
pub const MAX_GROUPS: u64 = ((PAGE - 40) / 24) as u64;

/// Packs `payloads` (encoded write batches) into one run of whole pages coloured `colour`.
pub fn pack_run(payloads: &[&[u8]], colour: u64, durable_seq: u64) -> AlignedBuf {
    let pages = run_pages(payloads.iter().map(|p| p.len())) as usize;
    let mut buf = AlignedBuf::zeroed(pages * PAGE);
    let out = buf.as_mut_slice();
    // Fill the payload areas as one stream, then stamp the headers.
    let mut writer = PayloadWriter { out, pos: 0 };
    for p in payloads {
        let mut head = [0u8; ENTRY_HEADER];
        head[..4].copy_from_slice(&(p.len() as u32).to_le_bytes());
        head[4..].copy_from_slice(&crc(p).to_le_bytes());
        writer.put(&head);
        writer.put(p);
    }
    let total = writer.pos;
    for i in 0..pages {
        let used = (total - (i * PAGE_PAYLOAD).min(total)).min(PAGE_PAYLOAD);
        let page = &mut out[i * PAGE..(i + 1) * PAGE];
        let flags = if i == 0 { FLAG_RUN_START } else { 0 };
        page[0..8].copy_from_slice(&colour.to_le_bytes());
        page[12..14].copy_from_slice(&(used as u16).to_le_bytes());
        page[14..16].copy_from_slice(&flags.to_le_bytes());
        page[16..24].copy_from_slice(&durable_seq.to_le_bytes());
        let sum = page_crc(page);
        page[8..12].copy_from_slice(&sum.to_le_bytes());
    }
    buf
}

/// Writes a byte stream into the payload areas of consecutive pages.
struct PayloadWriter<'a> {
    out: &'a mut [u8],
    /// Bytes of stream written.
    pos: usize,
}

impl PayloadWriter<'_> {
    fn put(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let page = self.pos / PAGE_PAYLOAD;
            let within = self.pos % PAGE_PAYLOAD;
            let n = bytes.len().min(PAGE_PAYLOAD - within);
            let at = page * PAGE + PAGE_HEADER + within;
            self.out[at..at + n].copy_from_slice(&bytes[..n]);
            self.pos += n;
            bytes = &bytes[n..];
        }
    }
}

/// CRC32C of a page's colour and of everything after the checksum field.
fn page_crc(page: &[u8]) -> u32 {
    let head = crc32c::crc32c(&page[0..8]);
    crc32c::crc32c_append(head, &page[12..PAGE])
}

/// A page header that passed its checks.
#[derive(Debug, Clone, Copy)]
struct PageHeader {
    used: usize,
    run_start: bool,
    durable_seq: u64,
}

/// Why a page is not part of the group's log.
#[derive(Debug, PartialEq, Eq)]
enum PageState {
    /// Another colour: never written in this group's life (the end of the log, or a hole).
    Stale,
    /// This group's colour with a bad checksum or header: a torn or damaged write.
    Damaged(&'static str),
}

fn parse_page(page: &[u8], colour: u64) -> std::result::Result<PageHeader, PageState> {
    if get_u64(&page[0..8]) != Some(colour) {
        return Err(PageState::Stale);
    }
    if get_u32(&page[8..12]) != Some(page_crc(page)) {
        return Err(PageState::Damaged("page checksum mismatch"));
    }
    let used = u16::from_le_bytes([page[12], page[13]]) as usize;
    if used > PAGE_PAYLOAD {
        return Err(PageState::Damaged("page payload length out of range"));
    }
    Ok(PageHeader {
        used,
        run_start: u16::from_le_bytes([page[14], page[15]]) & FLAG_RUN_START != 0,
        durable_seq: get_u64(&page[16..24]).unwrap_or(0),
    })
}

/// A write batch read back from the area.
#[derive(Debug)]
pub struct RecoveredBatch {
    /// Its first sequence number.
    pub seq: u64,
    /// The batch.
    pub batch: WriteBatch,
}

/// What recovery found in the area.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Intact batches of live groups, in ascending sequence order, a contiguous history
    /// (except in salvage mode).
    pub batches: Vec<RecoveredBatch>,
    /// Highest colour of any group in the metadata (a file number to skip).
    pub max_colour: u64,
    /// The metadata found, if any.
    pub meta: Option<Meta>,
}

/// Reads both metadata pages; the valid one with the highest generation. `None` when no page
/// was ever written (or the only one written was torn by a crash during its write, before any
/// group could start). Both pages written and neither valid is `Corruption`: the pages are
/// written one at a time, each synced, so a crash tears at most one of them.
pub fn read_meta(file: &dyn PositionalFile) -> Result<Option<Meta>> {
    let mut best: Option<Meta> = None;
    let mut damaged = Vec::new();
    for page in 0..META_PAGES {
        if file.size() < (page + 1) * PAGE as u64 {
            break;
        }
        let mut buf = vec![0u8; PAGE];
        file.read_exact_at(page * PAGE as u64, &mut buf)?;
        match Meta::decode(&buf) {
            Some(meta) if best.as_ref().is_none_or(|b| b.generation < meta.generation) => {
                best = Some(meta);
            }
            Some(_) => {}
            None if buf.iter().any(|&b| b != 0) => damaged.push(page),
            None => {}
        }
    }
    if best.is_none() && damaged.len() == META_PAGES as usize {
        return Err(Error::corruption(
            file.path(),
            0,
            "both parallel-WAL metadata pages are damaged: the area's groups cannot be found",
        ));
    }
    Ok(best)
}

/// Reads the live groups (colour >= `log_number`) of the area at `path`.
pub fn recover(fs: &dyn Fs, path: &Path, log_number: u64, mode: RecoveryMode) -> Result<Recovered> {
    if !fs.exists(path) {
        return Ok(Recovered::default());
    }
    let file = fs.open_positional(path, 0)?;
    let Some(meta) = read_meta(file.as_ref())? else {
        // The area was created but no group ever started: nothing was logged in it.
        return Ok(Recovered::default());
    };
    if file.size() < meta.layout.area_bytes() {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "parallel WAL area is {} bytes, its metadata describes {}",
                file.size(),
                meta.layout.area_bytes()
            ),
        ));
    }
    let mut live: Vec<(usize, Slot)> = meta
        .slots
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, s)| s.colour != 0 && s.colour >= log_number)
        .collect();
    live.sort_by_key(|(_, s)| s.colour);
    let mut scan = Scan::default();
    for &(slot, s) in &live {
        scan_group(file.as_ref(), &meta.layout, slot, s, mode, &mut scan)?;
    }
    let max_colour = meta.slots.iter().map(|s| s.colour).max().unwrap_or(0);
    if max_colour == u64::MAX {
        // NB: colours are memtable numbers and the next one must be above every colour; the
        // engine never takes the last number, so such a page is damage its checksum missed.
        return Err(Error::corruption(
            path,
            (meta.generation % META_PAGES) * PAGE as u64,
            "parallel-WAL metadata names a group colour no later memtable number can follow",
        ));
    }
    let start = live.first().map(|(_, s)| s.first_seq);
    let batches = order_history(path, scan, start, mode)?;
    Ok(Recovered {
        batches,
        max_colour,
        meta: Some(meta),
    })
}

/// Entries collected from the live groups.
#[derive(Default)]
struct Scan {
    batches: Vec<RecoveredBatch>,
    /// Highest `durable_seq` any valid page carries.
    durable_seq: u64,
    /// The first damage met (offset, what), for the error message.
    damage: Option<(u64, String)>,
}

/// Reads one group's pages, collecting the entries of its intact runs up to the first
/// missing page, and every page's durability claim.
fn scan_group(
    file: &dyn PositionalFile,
    layout: &Layout,
    slot: usize,
    s: Slot,
    mode: RecoveryMode,
    scan: &mut Scan,
) -> Result<()> {
    let limit = if s.end_page == OPEN_GROUP {
        layout.group_pages
    } else {
        (s.end_page as u64).min(layout.group_pages)
    };
    const CHUNK_PAGES: u64 = 256;
    let mut run: Vec<u8> = Vec::new();
    let mut run_at = 0u64;
    let mut collecting = true;
    let mut buf = vec![0u8; CHUNK_PAGES as usize * PAGE];
    let mut page_no = 0;
    while page_no < limit {
        let n = (limit - page_no).min(CHUNK_PAGES);
        let chunk = &mut buf[..n as usize * PAGE];
        file.read_exact_at(layout.page_offset(slot, page_no), chunk)?;
        for i in 0..n {
            let page = &chunk[i as usize * PAGE..(i as usize + 1) * PAGE];
            let offset = layout.page_offset(slot, page_no + i);
            match parse_page(page, s.colour) {
                Ok(h) => {
                    scan.durable_seq = scan.durable_seq.max(h.durable_seq);
                    if h.run_start {
                        if collecting && !run.is_empty() {
                            parse_run(file.path(), run_at, &run, scan)?;
                        }
                        run.clear();
                        run_at = offset;
                        collecting = collecting || mode == RecoveryMode::SkipAnyCorruptedRecords;
                    }
                    if collecting {
                        run.extend_from_slice(&page[PAGE_HEADER..PAGE_HEADER + h.used]);
                    }
                }
                Err(state) => {
                    if collecting && !run.is_empty() {
                        // The run lost its later pages: keep its whole entries.
                        parse_run_prefix(&run, scan);
                    }
                    run.clear();
                    collecting = false;
                    if let PageState::Damaged(what) = state {
                        if scan.damage.is_none() {
                            scan.damage = Some((offset, what.to_string()));
                        }
                        if mode == RecoveryMode::AbsoluteConsistency {
                            return Err(Error::corruption(file.path(), offset, what));
                        }
                    }
                }
            }
        }
        page_no += n;
    }
    if collecting && !run.is_empty() {
        parse_run(file.path(), run_at, &run, scan)?;
    }
    Ok(())
}

/// Parses a complete run's entries; a damaged entry inside intact pages is corruption.
fn parse_run(path: &Path, at: u64, run: &[u8], scan: &mut Scan) -> Result<()> {
    let consumed = parse_run_prefix(run, scan);
    if consumed != run.len() {
        return Err(Error::corruption(
            path,
            at,
            format!(
                "parallel WAL run: damaged entry at byte {consumed} of {}",
                run.len()
            ),
        ));
    }
    Ok(())
}

/// Parses whole, intact entries from the start of `run`; returns the bytes consumed.
fn parse_run_prefix(run: &[u8], scan: &mut Scan) -> usize {
    let mut pos = 0;
    while pos + ENTRY_HEADER <= run.len() {
        let len = get_u32(&run[pos..pos + 4]).unwrap_or(0) as usize;
        let sum = get_u32(&run[pos + 4..pos + 8]).unwrap_or(0);
        let Some(payload) = run.get(pos + ENTRY_HEADER..pos + ENTRY_HEADER + len) else {
            break;
        };
        if crc(payload) != sum {
            break;
        }
        let Some((seq, batch)) = WriteBatch::decode(payload) else {
            break;
        };
        scan.batches.push(RecoveredBatch { seq, batch });
        pos += ENTRY_HEADER + len;
    }
    pos
}

/// Sorts the collected batches and keeps the contiguous history from `start`; a gap that a
/// durability claim proves is not a crash's doing is corruption (by recovery mode).
fn order_history(
    path: &Path,
    mut scan: Scan,
    start: Option<u64>,
    mode: RecoveryMode,
) -> Result<Vec<RecoveredBatch>> {
    scan.batches.sort_by_key(|b| b.seq);
    if mode == RecoveryMode::SkipAnyCorruptedRecords {
        return Ok(scan.batches);
    }
    let Some(mut expected) = start else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(scan.batches.len());
    for b in scan.batches {
        if b.seq != expected {
            break;
        }
        // A batch numbered past the end of the sequence space ends the history like a gap.
        let Some(next) = expected.checked_add(b.batch.len() as u64) else {
            break;
        };
        expected = next;
        out.push(b);
    }
    // Everything numbered below `expected` was recovered. A page claiming more was durable
    // proves the missing pages had been written and synced: damage, not a crash.
    if scan.durable_seq >= expected && mode != RecoveryMode::PointInTime {
        let (offset, what) = scan.damage.unwrap_or((0, "pages lost".to_string()));
        return Err(Error::corruption(
            path,
            offset,
            format!(
                "parallel WAL: history ends before sequence {expected} but a page records \
                 writes through {} as durable ({what})",
                scan.durable_seq
            ),
        ));
    }
    Ok(out)
}

/// The group a memtable's writes go to, shared by the admitting writer and the loggers.
pub struct ActiveGroup {
    /// Slot index in the area.
    pub slot: usize,
    /// The memtable's number.
    pub colour: u64,
    /// Pages of the group.
    pub pages: u64,
    /// Pages claimed by runs so far. Loggers claim with one `fetch_add`.
    next_page: AtomicU64,
    /// Pages promised: claimed ones plus the worst case of admitted writes not yet packed.
    committed: AtomicU64,
}

impl ActiveGroup {
    /// Reserves `pages` for an admitted write; false (nothing reserved) if the group lacks
    /// room. Called by the admission path only, one writer at a time.
    pub fn reserve(&self, pages: u64) -> bool {
        let now = self.committed.load(Ordering::Acquire);
        if now + pages > self.pages {
            return false;
        }
        self.committed.fetch_add(pages, Ordering::AcqRel);
        true
    }

    /// True if `pages` more can be reserved.
    pub fn has_room(&self, pages: u64) -> bool {
        self.committed.load(Ordering::Acquire) + pages <= self.pages
    }

    /// Claims `pages` consecutive pages for a run of writes that reserved `reserved`; returns
    /// the first page.
    pub fn claim(&self, pages: u64, reserved: u64) -> u64 {
        debug_assert!(pages <= reserved);
        let first = self.next_page.fetch_add(pages, Ordering::AcqRel);
        self.committed.fetch_sub(reserved - pages, Ordering::AcqRel);
        first
    }

    /// Pages claimed or promised to admitted writes.
    pub fn promised(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// Pages claimed so far.
    #[cfg(test)]
    pub fn claimed(&self) -> u64 {
        self.next_page.load(Ordering::Acquire)
    }
}

/// The area of an open database: its file, layout and the metadata kept in memory.
pub struct Area {
    file: Arc<dyn PositionalFile>,
    layout: Layout,
    meta: Mutex<MetaState>,
}

struct MetaState {
    generation: u64,
    slots: Vec<Slot>,
    /// Slots whose groups may still be needed (their memtable is not flushed).
    live: Vec<bool>,
    active: Option<Arc<ActiveGroup>>,
}

impl Area {
    /// Opens the area at `path` (creating or growing it to `layout`), after recovery.
    /// Every group is free: recovery wrote what the old groups held to tables.
    pub fn open(fs: &dyn Fs, path: &Path, layout: Layout, prev: Option<&Meta>) -> Result<Self> {
        if layout.groups > MAX_GROUPS {
            return Err(Error::invalid(format!(
                "parallel WAL: {} groups do not fit one metadata page (at most {MAX_GROUPS})",
                layout.groups
            )));
        }
        let file = fs.open_positional(path, layout.area_bytes())?;
        let mut slots = vec![Slot::default(); layout.groups as usize];
        let mut generation = 0;
        if let Some(prev) = prev {
            generation = prev.generation;
            // Keep old colours while the layout is unchanged: pages stay stale by colour.
            if prev.layout == layout {
                for (s, p) in slots.iter_mut().zip(&prev.slots) {
                    s.colour = p.colour;
                }
            }
        }
        Ok(Area {
            file,
            layout,
            meta: Mutex::new(MetaState {
                generation,
                live: vec![false; slots.len()],
                slots,
                active: None,
            }),
        })
    }

    /// The area file.
    pub fn file(&self) -> &Arc<dyn PositionalFile> {
        &self.file
    }

    /// The area's shape.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Seals the active group (if any) and starts a group coloured `colour` whose first write
    /// is `first_seq`, durably recording both in the metadata. `None` if every group is
    /// still live (a flush must free one first).
    pub fn start_group(&self, colour: u64, first_seq: u64) -> Result<Option<Arc<ActiveGroup>>> {
        let mut m = self.meta.lock();
        // NB: a group may be reused only when its colour is older than anything live, which
        // `release_below` guarantees; pick the least recently used for wear spreading.
        let free = (0..m.slots.len())
            .filter(|&i| !m.live[i])
            .min_by_key(|&i| m.slots[i].colour);
        let Some(slot) = free else {
            return Ok(None);
        };
        if let Some(old) = m.active.take() {
            // NB: writes admitted before the switch may claim pages after it; the promised
            // count bounds every page they can take.
            let end = old.promised().min(u32::MAX as u64 - 1) as u32;
            m.slots[old.slot].end_page = end;
        }
        m.slots[slot] = Slot {
            colour,
            first_seq,
            end_page: OPEN_GROUP,
        };
        m.live[slot] = true;
        m.generation += 1;
        let meta = Meta {
            generation: m.generation,
            layout: self.layout,
            slots: m.slots.clone(),
        };
        let page = meta.generation % META_PAGES;
        self.file
            .write_at(page * PAGE as u64, meta.encode().as_slice(), true)?;
        let group = Arc::new(ActiveGroup {
            slot,
            colour,
            pages: self.layout.group_pages,
            next_page: AtomicU64::new(0),
            committed: AtomicU64::new(0),
        });
        m.active = Some(Arc::clone(&group));
        Ok(Some(group))
    }

    /// Frees the groups of memtables numbered below `log_number` (flushed); true if any was
    /// live until now.
    pub fn release_below(&self, log_number: u64) -> bool {
        let mut m = self.meta.lock();
        let mut freed = false;
        for i in 0..m.slots.len() {
            if m.live[i] && m.slots[i].colour < log_number {
                m.live[i] = false;
                freed = true;
            }
        }
        freed
    }

    /// True if a group is free for the next memtable.
    pub fn has_free_group(&self) -> bool {
        self.meta.lock().live.iter().any(|l| !l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(seq: u64, key: &str, value_len: usize) -> Vec<u8> {
        let mut b = WriteBatch::new();
        b.put(key, vec![b'v'; value_len]);
        b.encode_with_seq(seq).to_vec()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn golden_meta() -> Meta {
        Meta {
            generation: 7,
            layout: Layout {
                groups: 2,
                group_pages: 16,
            },
            slots: vec![
                Slot {
                    colour: 5,
                    first_seq: 100,
                    end_page: OPEN_GROUP,
                },
                Slot::default(),
            ],
        }
    }

    #[test]
    fn meta_page_golden_bytes() {
        let page = golden_meta().encode();
        let b = page.as_slice();
        assert_eq!(&b[0..8], b"tierkvWA", "the magic spells its name on disk");
        assert_eq!(
            hex(&b[8..88]),
            concat!(
                "01000000",         // format version
                "19502058",         // CRC32C of bytes 16..4096
                "0700000000000000", // generation
                "00100000",         // page size
                "02000000",         // groups
                "1000000000000000", // pages per group
                "0500000000000000", // group 0: colour
                "6400000000000000", // group 0: first sequence
                "ffffffff",         // group 0: end page (open)
                "00000000",         // reserved
                "0000000000000000", // group 1: colour (never used)
                "0000000000000000", // group 1: first sequence
                "00000000",         // group 1: end page
                "00000000",         // reserved
            )
        );
        assert!(b[88..].iter().all(|&x| x == 0));
    }

    #[test]
    fn meta_pages_with_the_legacy_magic_still_decode() {
        let mut page = golden_meta().encode();
        page.as_mut_slice()[0..8].copy_from_slice(&LEGACY_META_MAGIC.to_le_bytes());
        assert_eq!(Meta::decode(page.as_slice()), Some(golden_meta()));
        page.as_mut_slice()[0] ^= 1;
        assert_eq!(Meta::decode(page.as_slice()), None);
    }

    #[test]
    fn run_page_golden_bytes() {
        let run = pack_run(&[b"abc"], 9, 41);
        let b = run.as_slice();
        assert_eq!(b.len(), PAGE);
        assert_eq!(
            hex(&b[0..35]),
            concat!(
                "0900000000000000", // colour
                "cba11063",         // CRC32C of the colour and bytes 12..4096
                "0b00",             // payload bytes used: one 8-byte entry header + 3
                "0100",             // flags: run start
                "2900000000000000", // durable_seq
                "03000000",         // entry length
                "b73f4b36",         // CRC32C of the entry
                "616263",           // the entry
            )
        );
        assert!(b[35..].iter().all(|&x| x == 0));
    }

    #[test]
    fn meta_round_trip_and_damage() {
        let meta = Meta {
            generation: 7,
            layout: Layout {
                groups: 4,
                group_pages: 100,
            },
            slots: vec![
                Slot {
                    colour: 12,
                    first_seq: 1,
                    end_page: 40,
                },
                Slot {
                    colour: 13,
                    first_seq: 99,
                    end_page: OPEN_GROUP,
                },
                Slot::default(),
                Slot::default(),
            ],
        };
        let page = meta.encode();
        assert_eq!(Meta::decode(page.as_slice()), Some(meta));
        for at in [0, 9, 13, 20, 45, 4000] {
            let mut bad = page.as_slice().to_vec();
            bad[at] ^= 0x10;
            assert_eq!(Meta::decode(&bad), None, "flip at {at}");
        }
    }

    #[test]
    fn both_metadata_pages_damaged_is_corruption_not_an_empty_log() {
        use crate::env::{FaultFs, Fs};
        let fs = FaultFs::new(1);
        fs.create_dir_all(Path::new("/db")).unwrap();
        let file = fs
            .open_positional(Path::new("/db/WAL-AREA"), 4 * PAGE as u64)
            .unwrap();
        assert_eq!(read_meta(file.as_ref()).unwrap(), None, "a new area");
        let mut page = golden_meta().encode();
        file.write_at(0, page.as_slice(), true).unwrap();
        assert!(read_meta(file.as_ref()).unwrap().is_some());
        // One page torn (the other never written): nothing can have been logged.
        page.as_mut_slice()[40] ^= 1;
        file.write_at(0, page.as_slice(), true).unwrap();
        assert_eq!(read_meta(file.as_ref()).unwrap(), None);
        // Both written, both damaged: the groups are lost, and recovery must say so.
        file.write_at(PAGE as u64, page.as_slice(), true).unwrap();
        let err = read_meta(file.as_ref()).unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("WAL-AREA"),
            "{err}"
        );
    }

    #[test]
    fn meta_with_an_area_past_u64_is_not_a_meta_page() {
        for group_pages in [u64::MAX, u64::MAX / 2, u64::MAX / PAGE as u64] {
            let meta = Meta {
                generation: 1,
                layout: Layout {
                    groups: 2,
                    group_pages,
                },
                slots: vec![Slot::default(); 2],
            };
            assert_eq!(
                Meta::decode(meta.encode().as_slice()),
                None,
                "{group_pages}"
            );
        }
    }

    #[test]
    fn pack_and_parse_round_trip_across_pages() {
        let payloads = [batch(5, "a", 10), batch(6, "b", 5000), batch(7, "c", 3)];
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        let run = pack_run(&refs, 42, 4);
        assert_eq!(run.len(), 2 * PAGE);
        let mut stream = Vec::new();
        for (i, page) in run.as_slice().chunks(PAGE).enumerate() {
            let h = parse_page(page, 42).expect("valid page");
            assert_eq!(h.run_start, i == 0);
            assert_eq!(h.durable_seq, 4);
            stream.extend_from_slice(&page[PAGE_HEADER..PAGE_HEADER + h.used]);
            assert_eq!(parse_page(page, 41).unwrap_err(), PageState::Stale);
        }
        let mut scan = Scan::default();
        assert_eq!(parse_run_prefix(&stream, &mut scan), stream.len());
        let seqs: Vec<u64> = scan.batches.iter().map(|b| b.seq).collect();
        assert_eq!(seqs, vec![5, 6, 7]);
        let mut torn = run.as_slice().to_vec();
        torn[PAGE + 600] ^= 1;
        assert!(matches!(
            parse_page(&torn[PAGE..], 42),
            Err(PageState::Damaged(_))
        ));
    }

    #[test]
    fn page_bounds() {
        assert_eq!(worst_case_pages(PAGE_PAYLOAD - ENTRY_HEADER), 1);
        assert_eq!(worst_case_pages(PAGE_PAYLOAD - ENTRY_HEADER + 1), 2);
        assert_eq!(run_pages([100, 100, 100]), 1);
        assert_eq!(run_pages(std::iter::empty()), 1);
        let l = Layout {
            groups: 3,
            group_pages: 10,
        };
        assert_eq!(l.area_bytes(), 32 * PAGE as u64);
        assert_eq!(l.page_offset(1, 2), 14 * PAGE as u64);
    }

    #[test]
    fn group_reservations_release_unused_pages() {
        let g = ActiveGroup {
            slot: 0,
            colour: 1,
            pages: 10,
            next_page: AtomicU64::new(0),
            committed: AtomicU64::new(0),
        };
        assert!(g.reserve(6));
        assert!(!g.reserve(5));
        assert_eq!(g.claim(2, 6), 0);
        assert!(g.reserve(8));
        assert_eq!(g.claim(1, 8), 2);
        assert_eq!(g.claimed(), 3);
    }
}

//! Garbage collection: the live extents of the emptiest full zones are copied into other
//! zones, the new extents journaled, and the emptied zones reset.
//!
//! Who collects: the background collector ([`super::background`]) while fewer than
//! `gc_high_free_zones` data zones are free; a writer that needs a zone while fewer than
//! `gc_low_free_zones` are free (or finds the device full) empties one zone first, in the
//! foreground, as a last resort. One collection runs at a time.
//!
//! A zone is emptied in three steps, so that file creations, appends, syncs and removals wait
//! for bookkeeping only, never for a zone's copy:
//! 1. under the metadata lock: the victim's files and their synced extents are noted, and the
//!    victim is pinned (no reset takes it, even if every file in it is removed meanwhile);
//! 2. without any lock: the victim's extents are copied into other zones and flushed;
//! 3. under the metadata lock: each file still live, not being written and with the extents
//!    noted in step 1 gets its copies (journaled); the copies of a file removed or changed
//!    meanwhile are dropped, its bytes stay where they are. The victim is then unpinned and
//!    reset once no live byte is left in it.
//!
//! Readers never see a reset zone: a file's extents are swapped only after their copies are
//! flushed, a reader holds the file's read lock across a read, and the victim is reset only
//! after the new extents are journaled.

use super::file::{FileNode, FileState};
use super::journal::{Extent, Record};
use super::zones::ZoneUse;
use super::{add, GcMode, Inner};
use crate::env::Lifetime;
use crate::error::Result;
use crate::zoned::{ZoneId, ZonedDevice};
use std::collections::HashSet;
use std::sync::Arc;

/// A file with extents in the victim zone, as the collection found it.
struct Noted {
    node: Arc<FileNode>,
    /// The synced size and extents (equal to the written ones when noted).
    size: u64,
    extents: Vec<Extent>,
}

/// A noted file's extents with the victim's replaced by copies.
struct Planned {
    noted: Noted,
    /// The file's extents once moved.
    moved: Vec<Extent>,
    /// Of `moved`, the copies this collection wrote.
    copies: Vec<Extent>,
}

impl Noted {
    /// True when the file is still live and exactly as noted: not removed, not being written,
    /// nothing appended or synced since.
    fn unchanged(&self, state: &FileState, live_ids: &HashSet<u64>) -> bool {
        live_ids.contains(&self.node.id)
            && !state.removed
            && !state.writing
            && state.synced_size == self.size
            && state.synced_extents == self.extents
            && state.extents == self.extents
    }
}

impl Inner {
    /// Moves the live extents of up to `max_zones` of the emptiest full zones elsewhere and
    /// resets them. Returns the zones emptied.
    pub(super) fn collect(&self, max_zones: usize, mode: GcMode) -> Result<usize> {
        let _one_collector = self.gc_lock.lock();
        let candidates = self.zones.lock().gc_candidates();
        let mut emptied = 0;
        for id in candidates {
            if emptied == max_zones {
                break;
            }
            if self.evacuate(id, mode)? {
                emptied += 1;
                add(&self.counters.gc_zones, 1);
                add(self.zones_counter(mode), 1);
            }
        }
        Ok(emptied)
    }

    fn zones_counter(&self, mode: GcMode) -> &std::sync::atomic::AtomicU64 {
        match mode {
            GcMode::Background => &self.counters.gc_background_zones,
            GcMode::Foreground => &self.counters.gc_foreground_zones,
        }
    }

    fn bytes_counter(&self, mode: GcMode) -> &std::sync::atomic::AtomicU64 {
        match mode {
            GcMode::Background => &self.counters.gc_background,
            GcMode::Foreground => &self.counters.gc_foreground,
        }
    }

    /// Copies every live extent of zone `victim` elsewhere; true when the zone was reset.
    /// False when a file there is being written or has unsynced extents, no zone can take
    /// the copies now, or a file there changed during the copy (its bytes stay).
    fn evacuate(&self, victim: ZoneId, mode: GcMode) -> Result<bool> {
        let Some(noted) = self.note_and_pin(victim) else {
            return Ok(false);
        };
        let moved = self.copy_and_commit(victim, mode, noted);
        let reset = self.unpin_and_reset_dead(victim);
        // NB: a failed move is the first thing to report; the reset is retried later.
        moved?;
        reset
    }

    /// Step 1: notes the files with extents in `victim` and pins it. `None` (nothing pinned)
    /// when the zone is no longer full, holds no file, or a file there is being written or
    /// has unsynced extents.
    fn note_and_pin(&self, victim: ZoneId) -> Option<Vec<Noted>> {
        let meta = self.meta.lock();
        let mut noted = Vec::new();
        for node in meta.files.values() {
            let state = node.state.read();
            if !state.extents.iter().any(|e| e.zone == victim) {
                continue;
            }
            if state.writing || state.extents != state.synced_extents {
                return None;
            }
            noted.push(Noted {
                node: Arc::clone(node),
                size: state.synced_size,
                extents: state.synced_extents.clone(),
            });
        }
        if noted.is_empty() {
            return None;
        }
        let mut z = self.zones.lock();
        // NB: the candidate list may be stale: the zone may have been reset and taken again.
        if z.slots[victim as usize].state != ZoneUse::Full {
            return None;
        }
        z.collecting = Some(victim);
        drop(z);
        drop(meta);
        Some(noted)
    }

    /// Steps 2 and 3: copies the noted files' extents in `victim` without a lock, then swaps
    /// in and journals the copies of the files still unchanged. On failure, or when no zone
    /// can take a copy now, every copy made is dropped.
    fn copy_and_commit(&self, victim: ZoneId, mode: GcMode, noted: Vec<Noted>) -> Result<()> {
        let mut all_copies = Vec::new();
        let mut planned = Vec::with_capacity(noted.len());
        for n in noted {
            let before = all_copies.len();
            match self.copy_extents(&n.extents, victim, mode, &mut all_copies) {
                Ok(Some(moved)) => planned.push(Planned {
                    noted: n,
                    moved,
                    copies: all_copies[before..].to_vec(),
                }),
                other => {
                    self.forget_copies(&all_copies);
                    return other.map(|_| ());
                }
            }
        }
        if let Err(e) = self.dev.flush() {
            self.forget_copies(&all_copies);
            return Err(self.zone_error(e));
        }
        #[cfg(test)]
        hooks::after_copy();
        self.commit_moves(victim, planned)
    }

    /// Step 3: under the metadata lock, gives each unchanged file its copies and journals
    /// them; drops the copies of the others. Takes the moved bytes off the victim's live count.
    fn commit_moves(&self, victim: ZoneId, planned: Vec<Planned>) -> Result<()> {
        let mut meta = self.meta.lock();
        let live_ids: HashSet<u64> = meta.files.values().map(|n| n.id).collect();
        let mut records = Vec::new();
        let mut moved_bytes = 0u64;
        let mut stale_copies = Vec::new();
        for p in planned {
            let mut state = p.noted.node.state.write();
            if !p.noted.unchanged(&state, &live_ids) {
                stale_copies.extend(p.copies);
                continue;
            }
            moved_bytes += p
                .noted
                .extents
                .iter()
                .filter(|e| e.zone == victim)
                .map(|e| e.occupied(self.lba))
                .sum::<u64>();
            state.extents = p.moved.clone();
            state.synced_extents = p.moved.clone();
            records.push(Record::Extents {
                id: p.noted.node.id,
                size: p.noted.size,
                extents: p.moved,
            });
        }
        self.forget_copies(&stale_copies);
        if records.is_empty() {
            return Ok(());
        }
        // NB: the file locks are gone before the commit, whose snapshot (when the journal
        // rolls) reads every file's state. The copies are flushed, so a read of them is good
        // now; the meta lock keeps every other journal change out until the commit is made.
        self.commit(&mut meta, &records)?;
        let mut z = self.zones.lock();
        let slot = &mut z.slots[victim as usize];
        slot.live = slot.live.saturating_sub(moved_bytes);
        Ok(())
    }

    /// `extents` with each one in zone `victim` replaced by a copy in another zone; the
    /// copies made are added to `copies`. `None` when no zone could take one now.
    fn copy_extents(
        &self,
        extents: &[Extent],
        victim: ZoneId,
        mode: GcMode,
        copies: &mut Vec<Extent>,
    ) -> Result<Option<Vec<Extent>>> {
        let mut out = Vec::with_capacity(extents.len());
        for e in extents {
            if e.zone != victim {
                out.push(*e);
                continue;
            }
            let mut data = vec![0u8; e.occupied(self.lba) as usize];
            self.dev
                .read(e.zone, e.offset, &mut data)
                .map_err(|err| self.zone_error(err))?;
            let before = copies.len();
            if !self.place_copy(&data, e.len, victim, copies)? {
                return Ok(None);
            }
            add(&self.counters.gc, data.len() as u64);
            add(self.bytes_counter(mode), data.len() as u64);
            out.extend_from_slice(&copies[before..]);
        }
        Ok(Some(out))
    }

    /// Writes one extent's bytes (whole LBAs, the first `len` of them the file's) into zones
    /// other than `victim`, appending the new extents to `copies`. Never waits: false when no
    /// zone is available now.
    fn place_copy(
        &self,
        data: &[u8],
        len: u64,
        victim: ZoneId,
        copies: &mut Vec<Extent>,
    ) -> Result<bool> {
        let mut done = 0u64;
        while done < data.len() as u64 {
            let (zone, wp, room) = {
                let mut z = self.zones.lock();
                match z.take(Lifetime::Extreme) {
                    Ok(id) if id != victim => {
                        let wp = z.slots[id as usize].wp;
                        (id, wp, z.capacity - wp)
                    }
                    Ok(id) => {
                        z.release(id);
                        return Ok(false);
                    }
                    Err(_) => return Ok(false),
                }
            };
            let n = room.min(data.len() as u64 - done);
            let written = self
                .dev
                .write(zone, wp, &data[done as usize..(done + n) as usize], false)
                .map_err(|e| self.zone_error(e));
            {
                let mut z = self.zones.lock();
                if written.is_ok() {
                    let slot = &mut z.slots[zone as usize];
                    slot.wp += n;
                    slot.live += n;
                } else {
                    self.take_device_wp(&mut z, zone);
                }
                z.release(zone);
            }
            self.zone_released.notify_all();
            written?;
            copies.push(Extent {
                zone,
                offset: wp,
                len: n.min(len.saturating_sub(done)),
            });
            done += n;
        }
        Ok(true)
    }

    /// Takes back the live bytes of copies an abandoned collection made.
    fn forget_copies(&self, copies: &[Extent]) {
        let mut z = self.zones.lock();
        for e in copies {
            let slot = &mut z.slots[e.zone as usize];
            slot.live = slot.live.saturating_sub(e.occupied(self.lba));
        }
    }
}

/// A test's hook into a collection, on the collecting thread: run after the copies are
/// flushed and before they are committed, with no lock held.
#[cfg(test)]
pub(super) mod hooks {
    use std::cell::RefCell;

    thread_local! {
        static AFTER_COPY: RefCell<Option<Box<dyn FnMut()>>> = RefCell::new(None);
    }

    /// Runs `hook` after the copy of every zone this thread collects from now on.
    pub fn set_after_copy(hook: impl FnMut() + 'static) {
        AFTER_COPY.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    }

    /// Removes this thread's hook.
    pub fn clear_after_copy() {
        AFTER_COPY.with(|h| *h.borrow_mut() = None);
    }

    pub(super) fn after_copy() {
        // NB: taken out while it runs, so a collection the hook starts does not re-enter it.
        let hook = AFTER_COPY.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook();
            AFTER_COPY.with(|h| {
                h.borrow_mut().get_or_insert(hook);
            });
        }
    }
}

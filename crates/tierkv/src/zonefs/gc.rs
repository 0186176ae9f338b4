//! Garbage collection: the live extents of the emptiest full zones are copied into other
//! zones, the new extents journaled, and the emptied zones reset.
//!
//! Who collects: the background collector ([`super::background`]) while fewer than
//! `gc_high_free_zones` data zones are free; a writer that needs a zone while fewer than
//! `gc_low_free_zones` are free (or finds the device full) empties one zone first, in the
//! foreground, as a last resort. One collection runs at a time.
//!
//! Readers never see a reset zone: the collector holds the write lock of every file it moves
//! from the copy until the new extents are swapped in, and resets the zone only after the new
//! extents are journaled.

use super::file::FileState;
use super::journal::{Extent, Record};
use super::zones::ZoneUse;
use super::{add, GcMode, Inner};
use crate::env::Lifetime;
use crate::error::Result;
use crate::zoned::{ZoneId, ZonedDevice};
use parking_lot::RwLockWriteGuard;

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
    /// False (nothing changed) when a file there is still being written or has unsynced
    /// extents, or no zone can take the copies now.
    fn evacuate(&self, victim: ZoneId, mode: GcMode) -> Result<bool> {
        let mut meta = self.meta.lock();
        // NB: the candidate list may be stale: the zone may have been reset and taken again.
        if self.zones.lock().slots[victim as usize].state != ZoneUse::Full {
            return Ok(false);
        }
        let nodes: Vec<_> = meta
            .files
            .values()
            .filter(|n| n.extents().iter().any(|e| e.zone == victim))
            .cloned()
            .collect();
        if nodes.is_empty() {
            return Ok(false);
        }
        let mut states: Vec<RwLockWriteGuard<'_, FileState>> = Vec::new();
        for node in &nodes {
            let state = node.state.write();
            if state.writing || state.extents != state.synced_extents {
                return Ok(false);
            }
            states.push(state);
        }
        let mut copies = Vec::new();
        let mut plans = Vec::with_capacity(states.len());
        for state in &states {
            match self.copy_extents(&state.synced_extents, victim, mode, &mut copies) {
                Ok(Some(plan)) => plans.push(plan),
                other => {
                    self.forget_copies(&copies);
                    return other.map(|_| false);
                }
            }
        }
        let records: Vec<Record> = nodes
            .iter()
            .zip(&states)
            .zip(&plans)
            .map(|((node, state), plan)| Record::Extents {
                id: node.id,
                size: state.synced_size,
                extents: plan.clone(),
            })
            .collect();
        self.dev.flush().map_err(|e| self.zone_error(e))?;
        for (state, plan) in states.iter_mut().zip(plans) {
            state.extents = plan.clone();
            state.synced_extents = plan;
        }
        // NB: the file locks go before the commit, whose snapshot (when the journal rolls)
        // reads every file's state. The copies are flushed, so a read of them is good now;
        // the meta lock keeps every other journal change out until the commit is made.
        drop(states);
        self.commit(&mut meta, &records)?;
        self.zones.lock().slots[victim as usize].live = 0;
        drop(meta);
        self.reset_dead_zones()?;
        Ok(true)
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

//! Opening a [`super::ZoneFs`]: read the newest complete journal generation, rebuild the files
//! and every zone's live bytes, reset the zones no file owns, and start a new generation.

use super::file::FileNode;
use super::journal::{self, FileRecord, Replayed};
use super::meta::Meta;
use super::zones::{ZoneSlot, ZoneTable, ZoneUse};
use super::{Counters, Inner, ZoneFsConfig, DEVICE_FILE, META_ZONES};
use crate::env::{Fs, Lifetime};
use crate::error::{Error, Result};
use crate::zoned::emulator::EmulatedZoned;
use crate::zoned::{Geometry, ZoneId, ZoneInfo, ZoneState, ZonedDevice};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

/// Rebuilds the file system's state from the device and makes it ready to write.
pub(super) fn recover(
    dev: EmulatedZoned,
    base: Arc<dyn Fs>,
    dir: &Path,
    config: ZoneFsConfig,
) -> Result<Inner> {
    let g = *dev.geometry();
    let report = dev.report();
    let device = dir.join(DEVICE_FILE);
    let newest = newest_generation(&dev, &report, &device)?;
    let data_written = report[META_ZONES.len()..]
        .iter()
        .any(|z| z.write_pointer > 0);
    let (zone, generation, replayed) = match newest {
        Some((zone, generation, records)) => {
            let mut r = Replayed::default();
            r.apply(records);
            (zone, generation, r)
        }
        None if data_written => {
            return Err(Error::corruption(
                device,
                0,
                "the zoned device holds data but no valid metadata journal",
            ))
        }
        // A new device: the first generation goes to zone 0.
        None => (META_ZONES[1], 0, Replayed::default()),
    };
    for f in replayed.files.values() {
        check_extents(f, &g, &device)?;
    }
    let slots = zone_slots(&dev, &g, &report, &replayed, &device, !config.read_only)?;
    let files = replayed
        .files
        .into_values()
        .map(|f| (f.name, Arc::new(FileNode::new(f.id, f.size, f.extents))))
        .collect();
    let inner = Inner {
        lba: g.lba,
        meta: Mutex::new(Meta {
            files,
            next_id: replayed.next_id.max(1),
            zone,
            wp: report[zone as usize].write_pointer,
            generation,
        }),
        zones: Mutex::new(ZoneTable {
            slots,
            capacity: g.zone_capacity,
            max_active: g.max_active as usize - 1,
            max_held: g.max_open as usize - 1,
            collecting: None,
        }),
        dev,
        base,
        dir: dir.to_path_buf(),
        config,
        zone_released: Condvar::new(),
        writers_waiting: AtomicUsize::new(0),
        gc_lock: Mutex::new(()),
        gc_signal: Arc::default(),
        counters: Counters::default(),
        poisoned: AtomicBool::new(false),
    };
    if config.read_only {
        // Read-only: the zones a crash left unowned stay as they are (reset by the next
        // writable open), and the journal keeps its generation.
        return Ok(inner);
    }
    // Zones no synced file owns are reset first, so their active resources are free for the
    // journal's new zone.
    inner.reset_dead_zones()?;
    // A new generation on every open: the journal then never appends after a torn commit.
    {
        let mut meta = inner.meta.lock();
        meta.roll(&inner)?;
    }
    Ok(inner)
}

/// The metadata zone with the newest complete generation: zone, generation, records.
pub(super) fn newest_generation(
    dev: &EmulatedZoned,
    report: &[ZoneInfo],
    device: &Path,
) -> Result<Option<(ZoneId, u64, Vec<journal::Record>)>> {
    let lba = dev.geometry().lba;
    let mut newest: Option<(ZoneId, u64, Vec<journal::Record>)> = None;
    for zone in META_ZONES {
        let wp = report[zone as usize].write_pointer;
        if wp == 0 {
            continue;
        }
        let mut bytes = vec![0u8; wp as usize];
        dev.read(zone, 0, &mut bytes)
            .map_err(|e| e.into_error(device))?;
        if let Some((generation, records)) = journal::scan_zone(&bytes, lba) {
            if newest.as_ref().is_none_or(|n| generation > n.1) {
                newest = Some((zone, generation, records));
            }
        }
    }
    Ok(newest)
}

/// Checks that a file's extents lie in data zones and add up to its size.
fn check_extents(f: &FileRecord, g: &Geometry, device: &Path) -> Result<()> {
    let bad = |what: String| {
        Err(Error::corruption(
            device,
            0,
            format!("file {}: {what}", f.name),
        ))
    };
    let mut total = 0u64;
    for e in &f.extents {
        let in_data_zone = e.zone >= META_ZONES.len() as u32 && e.zone < g.zones;
        if !in_data_zone
            || !e.offset.is_multiple_of(g.lba)
            || e.offset + e.occupied(g.lba) > g.zone_capacity
        {
            return bad(format!("extent {e:?} is outside the data zones"));
        }
        total += e.len;
    }
    if total != f.size {
        return bad(format!(
            "extents hold {total} bytes, the size is {}",
            f.size
        ));
    }
    Ok(())
}

/// Every zone's use, write pointer and live bytes. A partly written zone whose write pointer
/// (found by the device from its data) is below the end of a live extent (one ending in
/// zeros) is finished (on the device only when `writable`), so no later write lands on that
/// extent.
fn zone_slots(
    dev: &EmulatedZoned,
    g: &Geometry,
    report: &[ZoneInfo],
    replayed: &Replayed,
    device: &Path,
    writable: bool,
) -> Result<Vec<ZoneSlot>> {
    let mut live = vec![0u64; g.zones as usize];
    let mut end = vec![0u64; g.zones as usize];
    for e in replayed.files.values().flat_map(|f| &f.extents) {
        live[e.zone as usize] += e.occupied(g.lba);
        end[e.zone as usize] = end[e.zone as usize].max(e.offset + e.occupied(g.lba));
    }
    let mut slots = Vec::with_capacity(g.zones as usize);
    let mut active = 0;
    for z in report {
        let id = z.id as usize;
        let state = if META_ZONES.contains(&z.id) {
            ZoneUse::Meta
        } else if z.write_pointer == 0 && z.state != ZoneState::Full {
            ZoneUse::Free
        } else if z.state == ZoneState::Full || z.write_pointer >= g.zone_capacity {
            ZoneUse::Full
        } else if live[id] == 0 {
            // Reset below, with the other dead zones.
            ZoneUse::Partial(Lifetime::NotSet)
        } else if z.write_pointer >= end[id] && active + 1 < g.max_active as usize {
            active += 1;
            ZoneUse::Partial(Lifetime::NotSet)
        } else {
            if writable {
                dev.finish(z.id).map_err(|e| e.into_error(device))?;
            }
            ZoneUse::Full
        };
        slots.push(ZoneSlot {
            state,
            wp: if state == ZoneUse::Full {
                g.zone_capacity
            } else {
                z.write_pointer
            },
            live: live[id],
        });
    }
    Ok(slots)
}

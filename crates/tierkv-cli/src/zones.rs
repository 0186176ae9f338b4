//! Zoned tiers (`tables = "zones"`) read offline: `dump-zones` prints a tier's device, zones
//! and files, and `dump-sst` reads a table that lives in zones. Both read the device and its
//! journal as recovery would, and write nothing.

use crate::errors::OK;
use crate::text::human_bytes;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use tierkv::env::{Fs, PosixFs, RandomAccessFile};
use tierkv::inspect::{ZoneFileView, ZoneRole, ZoneView, ZonedDir, ZonedTierImage};

/// `dump-zones`: the device geometry, the journal's position, every zone (condition, write
/// pointer, live bytes, owning files) and every file's extents, then the consistency check
/// (a failed one is exit 3).
pub fn dump(dir: &Path, out: &mut dyn Write) -> Result<u8> {
    let tier = ZonedDir::open(&PosixFs::new(), dir)
        .with_context(|| format!("cannot read the zoned tier in {}", dir.display()))?;
    let image = tier.image();
    write_geometry(image, out)?;
    writeln!(out, "zones:")?;
    for z in &image.zones {
        write_zone(z, out)?;
    }
    write_zone_counts(image, out)?;
    writeln!(out, "files: {}", image.files.len())?;
    for f in &image.files {
        write_file(f, out)?;
    }
    let c = image
        .check()
        .with_context(|| format!("zoned tier in {} is inconsistent", dir.display()))?;
    writeln!(
        out,
        "ok: {} files, {} extents, {} live in {} zones; every written zone metadata, owned by \
         a live file, or unsynced data the next open resets",
        c.files,
        c.extents,
        human_bytes(c.live_bytes),
        c.zones_in_use
    )?;
    Ok(OK)
}

fn write_geometry(image: &ZonedTierImage, out: &mut dyn Write) -> Result<()> {
    let g = &image.geometry;
    writeln!(out, "device: {}", image.device.display())?;
    writeln!(
        out,
        "geometry: {} zones of {} bytes ({}), capacity {} bytes, LBA {} bytes",
        g.zones,
        g.zone_size,
        human_bytes(g.zone_size),
        g.zone_capacity,
        g.lba
    )?;
    match image.journal {
        Some(j) => writeln!(out, "journal: zone {}, generation {}", j.zone, j.generation)?,
        None => writeln!(out, "journal: none (a device never written)")?,
    }
    Ok(())
}

fn write_zone(z: &ZoneView, out: &mut dyn Write) -> Result<()> {
    write!(
        out,
        "  zone {:>4}  {:<8}  {:<13}  wp {:>10}  live {:>10}",
        z.id,
        z.role.name(),
        z.condition,
        z.write_pointer,
        z.live_bytes
    )?;
    if !z.files.is_empty() {
        write!(out, "  {}", z.files.join(" "))?;
    }
    writeln!(out)?;
    Ok(())
}

fn write_zone_counts(image: &ZonedTierImage, out: &mut dyn Write) -> Result<()> {
    let count = |role: ZoneRole| image.zones.iter().filter(|z| z.role == role).count();
    writeln!(
        out,
        "zone roles: {} metadata, {} free, {} active, {} full, {} unowned",
        count(ZoneRole::Metadata),
        count(ZoneRole::Free),
        count(ZoneRole::Active),
        count(ZoneRole::Full),
        count(ZoneRole::Unowned)
    )?;
    Ok(())
}

fn write_file(f: &ZoneFileView, out: &mut dyn Write) -> Result<()> {
    let extents: Vec<String> = f
        .extents
        .iter()
        .map(|e| format!("zone {} @{}+{}", e.zone, e.offset, e.len))
        .collect();
    writeln!(
        out,
        "  {}  {} bytes  {} extents: {}",
        f.name,
        f.size,
        f.extents.len(),
        extents.join(", ")
    )?;
    Ok(())
}

/// Opens `path` for reading: a file of the base file system, or, when it is not there and its
/// directory is a zoned tier, the file of that name in the tier's zones.
pub fn open_file(path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
    let fs = PosixFs::new();
    let zoned_parent = path
        .parent()
        .filter(|dir| !fs.exists(path) && ZonedDir::is_zoned(&fs, dir));
    let (Some(dir), Some(name)) = (zoned_parent, path.file_name().and_then(|n| n.to_str())) else {
        return fs
            .open_read(path)
            .with_context(|| format!("cannot open {}", path.display()));
    };
    let tier = ZonedDir::open(&fs, dir)
        .with_context(|| format!("cannot read the zoned tier in {}", dir.display()))?;
    tier.open_read(name)
        .with_context(|| format!("cannot open {} in the zoned tier", path.display()))
}

//! The consistency rules of a zoned tier's view ([`ZonedTierImage::check`]): extents inside
//! data zones and apart, sizes that add up, no leaked zone, live bytes that match the extents.

use super::image::{ZoneExtent, ZoneRole, ZonedTierImage};
use super::META_ZONES;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// What [`ZonedTierImage::check`] verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZoneCheck {
    /// Data zones holding live extents.
    pub zones_in_use: u64,
    /// Files checked.
    pub files: u64,
    /// Extents checked.
    pub extents: u64,
    /// Bytes of zones the live files occupy.
    pub live_bytes: u64,
}

impl ZonedTierImage {
    /// Checks the view: every extent lies in a data zone, on an LBA boundary, within the
    /// zone's capacity and below its write pointer, and overlaps no other; each file's
    /// extents add up to its size; every written data zone is owned by a live file (except,
    /// in a view read from the device alone, the zones the next open resets); and where the
    /// running file system counts live bytes, they match the extents. Fails with
    /// `Corruption` naming the device and the byte offset of the first problem (its count
    /// in the message).
    pub fn check(&self) -> Result<ZoneCheck> {
        let mut problems = Vec::new();
        let mut summary = ZoneCheck::default();
        self.check_files(&mut problems, &mut summary);
        self.check_zones(&mut problems, &mut summary);
        problems.sort_by_key(|(offset, _)| *offset);
        match problems.first() {
            None => Ok(summary),
            Some((offset, what)) => {
                let more = match problems.len() - 1 {
                    0 => String::new(),
                    1 => " (and 1 more problem)".to_string(),
                    n => format!(" (and {n} more problems)"),
                };
                Err(Error::corruption(
                    &self.device,
                    *offset,
                    format!("{what}{more}"),
                ))
            }
        }
    }

    /// Byte offset of `offset` of `zone` in the device's data.
    fn device_offset(&self, zone: u32, offset: u64) -> u64 {
        // NB: saturating, as every sum over a damaged journal's extents: the check reports
        // them rather than overflowing.
        u64::from(zone)
            .saturating_mul(self.geometry.zone_size)
            .saturating_add(offset)
    }

    fn occupied(&self, e: &ZoneExtent) -> u64 {
        e.len
            .div_ceil(self.geometry.lba)
            .saturating_mul(self.geometry.lba)
    }

    fn check_files(&self, problems: &mut Vec<(u64, String)>, summary: &mut ZoneCheck) {
        let g = &self.geometry;
        // Per zone: (start, end, file) of every extent, to find overlaps.
        let mut spans: BTreeMap<u32, Vec<(u64, u64, &str)>> = BTreeMap::new();
        for f in &self.files {
            summary.files += 1;
            let mut total = 0u64;
            for e in &f.extents {
                summary.extents += 1;
                total = total.saturating_add(e.len);
                let end = e.offset.saturating_add(self.occupied(e));
                let at = self.device_offset(e.zone, e.offset);
                let zone = self.zones.get(e.zone as usize);
                let problem = match zone {
                    _ if META_ZONES.contains(&e.zone) => Some("lies in a metadata zone".into()),
                    None => Some(format!("names zone {} of {}", e.zone, g.zones)),
                    Some(_) if !e.offset.is_multiple_of(g.lba) => {
                        Some(format!("does not start on an LBA boundary ({})", g.lba))
                    }
                    Some(_) if end > g.zone_capacity => {
                        Some(format!("ends past the zone capacity {}", g.zone_capacity))
                    }
                    // NB: read from the device alone, a write pointer found from the data stops
                    // before an extent ending in zeros; only a running file system's is exact.
                    Some(z) if z.counted_live_bytes.is_some() && end > z.write_pointer => Some(
                        format!("ends past the zone's write pointer {}", z.write_pointer),
                    ),
                    Some(_) => None,
                };
                match problem {
                    Some(what) => {
                        problems.push((at, format!("file {}: extent {e:?} {what}", f.name)))
                    }
                    None => spans
                        .entry(e.zone)
                        .or_default()
                        .push((e.offset, end, &f.name)),
                }
            }
            if total != f.size {
                let at = f
                    .extents
                    .first()
                    .map_or(0, |e| self.device_offset(e.zone, e.offset));
                problems.push((
                    at,
                    format!(
                        "file {}: extents hold {total} bytes, its size is {}",
                        f.name, f.size
                    ),
                ));
            }
        }
        for (zone, mut list) in spans {
            list.sort_unstable();
            for pair in list.windows(2) {
                let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
                if start < end {
                    problems.push((
                        self.device_offset(zone, start),
                        format!("zone {zone}: extents of {a} and {b} overlap"),
                    ));
                }
            }
        }
    }

    fn check_zones(&self, problems: &mut Vec<(u64, String)>, summary: &mut ZoneCheck) {
        for z in &self.zones {
            let at = self.device_offset(z.id, 0);
            let running = z.counted_live_bytes.is_some();
            if z.role == ZoneRole::Unowned && running {
                problems.push((
                    at,
                    format!(
                        "zone {}: written to {} but owned by no live file and not reset (leaked)",
                        z.id, z.write_pointer
                    ),
                ));
            }
            if let Some(counted) = z.counted_live_bytes {
                if counted != z.live_bytes {
                    problems.push((
                        at,
                        format!(
                            "zone {}: {counted} live bytes counted, the files' extents occupy {}",
                            z.id, z.live_bytes
                        ),
                    ));
                }
            }
            if z.live_bytes > 0 {
                summary.zones_in_use += 1;
                summary.live_bytes = summary.live_bytes.saturating_add(z.live_bytes);
            }
        }
    }
}

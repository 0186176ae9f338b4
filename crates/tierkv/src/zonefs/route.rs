//! The routing of zoned tiers: each tier with `tables = "zones"` gets its [`ZoneFs`], and a
//! [`RoutingFs`] sends the files of that tier's directory to it and everything else (the device
//! files included) to the base file system, so the engine above sees one [`Fs`].

use super::{ZoneFs, ZoneFsConfig, DEVICE_FILE};
use crate::env::{Fs, Handler, RouteRules, RouteScope, RoutingFs};
use crate::error::Result;
use crate::options::Options;
use std::sync::Arc;

/// How zoned tiers route: a device holds one flat directory of files, so only the files
/// directly in the tier's directory go to it; the device file itself, the directories and the
/// locks stay on the base file system.
pub(crate) const ZONED_TIER_RULES: RouteRules = RouteRules {
    scope: RouteScope::Children,
    create_dirs: Handler::Base,
    locks: Handler::Base,
    base_names: &[DEVICE_FILE],
    route_kind: "zoned tier",
};

/// Opens the zoned device of every tier with `tables = "zones"` and makes `opts.fs` route
/// those tiers' files to it; a zoned tier without a budget gets its device's data capacity.
/// Returns each zoned tier's name and file system, for stats.
pub(crate) fn route_zoned_tiers(opts: &mut Options) -> Result<Vec<(String, Arc<ZoneFs>)>> {
    let base = opts.fs.unrouted().unwrap_or_else(|| Arc::clone(&opts.fs));
    let mut zoned = Vec::new();
    for tier in &mut opts.tiers {
        let Some(geometry) = tier.zone_geometry() else {
            continue;
        };
        let config = ZoneFsConfig {
            read_only: opts.read_only,
            ..ZoneFsConfig::for_geometry(&geometry)
        };
        let zfs = Arc::new(ZoneFs::open(
            Arc::clone(&base),
            &tier.path,
            geometry,
            config,
        )?);
        if tier.capacity == u64::MAX {
            tier.capacity = zfs.data_capacity();
        }
        zoned.push((tier.name.clone(), zfs));
    }
    if !zoned.is_empty() {
        let routes = zoned
            .iter()
            .map(|(_, z)| (z.dir().to_path_buf(), Arc::clone(z) as Arc<dyn Fs>))
            .collect();
        opts.fs = Arc::new(RoutingFs::new(base, routes, ZONED_TIER_RULES));
    }
    Ok(zoned)
}

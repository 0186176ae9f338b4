//! [`RoutingFs`]: sends the files of zoned tier directories to their [`ZoneFs`] and
//! everything else (the device files included) to the base file system, so the engine above
//! sees one [`Fs`].

use super::{ZoneFs, ZoneFsConfig, DEVICE_FILE};
use crate::env::{FileLock, Fs, Lifetime, PositionalFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::options::Options;
use std::path::Path;
use std::sync::Arc;

/// One file system over a base and the zoned directories.
pub(crate) struct RoutingFs {
    base: Arc<dyn Fs>,
    zoned: Vec<Arc<ZoneFs>>,
}

impl RoutingFs {
    pub fn new(base: Arc<dyn Fs>, zoned: Vec<Arc<ZoneFs>>) -> RoutingFs {
        RoutingFs { base, zoned }
    }

    /// The zoned file system that holds `path`, a file (not the device) of its directory.
    fn zoned_file(&self, path: &Path) -> Option<&ZoneFs> {
        let name = path.file_name()?;
        if name == DEVICE_FILE {
            return None;
        }
        let parent = path.parent()?;
        self.zoned
            .iter()
            .find(|z| z.dir() == parent)
            .map(|z| z.as_ref())
    }

    /// The zoned file system whose directory is `dir`.
    fn zoned_dir(&self, dir: &Path) -> Option<&ZoneFs> {
        self.zoned
            .iter()
            .find(|z| z.dir() == dir)
            .map(|z| z.as_ref())
    }

    fn file(&self, path: &Path) -> &dyn Fs {
        match self.zoned_file(path) {
            Some(z) => z,
            None => self.base.as_ref(),
        }
    }
}

impl Fs for RoutingFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.file(path).create(path)
    }

    fn create_with_lifetime(
        &self,
        path: &Path,
        lifetime: Lifetime,
    ) -> Result<Box<dyn WritableFile>> {
        self.file(path).create_with_lifetime(path, lifetime)
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.file(path).open_append(path)
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.file(path).open_read(path)
    }

    fn open_read_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.file(path).open_read_direct(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.file(path).exists(path)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        match self.zoned_dir(dir) {
            Some(z) => z.list_dir(dir),
            None => self.base.list_dir(dir),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.base.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.file(path).remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (a, b) = (self.zoned_file(from), self.zoned_file(to));
        match (a, b) {
            (Some(x), Some(y)) if std::ptr::eq(x, y) => x.rename(from, to),
            (None, None) => self.base.rename(from, to),
            _ => Err(Error::invalid(format!(
                "cannot rename {} to {}: they are on different devices",
                from.display(),
                to.display()
            ))),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        match self.zoned_dir(dir) {
            Some(z) => z.sync_dir(dir),
            None => self.base.sync_dir(dir),
        }
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.file(path).file_size(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.base.lock(path)
    }

    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        self.file(path).open_positional(path, len)
    }

    fn unrouted(&self) -> Option<Arc<dyn Fs>> {
        Some(Arc::clone(&self.base))
    }
}

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
        let all = zoned.iter().map(|(_, z)| Arc::clone(z)).collect();
        opts.fs = Arc::new(RoutingFs::new(base, all));
    }
    Ok(zoned)
}

//! Turning the global flags into `tierkv::Options` and opening the database.
//!
//! Precedence: a `--config` file replaces the built-in defaults; `--tier` replaces the file's
//! tiers; the tuning flags override single options. Without a file or `--tier` the tiers are
//! `./tierkv-data/fast` and `./tierkv-data/capacity`. A tier directory holding a zoned device
//! (`ZONED-DEVICE`) is opened as a zoned tier (`tables = "zones"`, the device's geometry).

use crate::cli::EngineArgs;
use crate::errors::Usage;
use anyhow::{Context, Result};
use std::path::PathBuf;
use tierkv::env::PosixFs;
use tierkv::inspect::ZonedDir;
use tierkv::{Db, Options, TierConfig, TierTables};

/// Where the default tiers live, relative to the working directory.
pub const DEFAULT_ROOT: &str = "tierkv-data";

/// What opening may do to the directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// The database must exist; nothing is written to it (read commands and `check`).
    ReadOnly,
    /// The database must exist (`compact`).
    Existing,
    /// Create it if missing (write commands).
    CreateIfMissing,
    /// It must not exist yet (`demo`).
    CreateNew,
}

impl EngineArgs {
    /// The options the flags describe, starting from `base` when there is no config file.
    pub fn options(&self, base: Options) -> Result<Options> {
        let mut opts = match &self.config {
            // NB: the error names the file.
            Some(path) => Options::from_toml_file(path)?,
            None => base,
        };
        if !self.tiers.is_empty() {
            opts.tiers = self.tiers.clone();
        } else if opts.tiers.is_empty() {
            opts.tiers = default_tiers();
        }
        self.apply_tuning(&mut opts)?;
        mark_zoned_tiers(&mut opts)?;
        // NB: out-of-range options are the user's to fix, like a bad flag: a usage error.
        opts.validate()
            .map_err(|e| Usage(format!("invalid options: {e}")))?;
        Ok(opts)
    }

    fn apply_tuning(&self, opts: &mut Options) -> Result<()> {
        if let Some(n) = self.levels_on_fast {
            opts.placement.levels_on_fast = n;
        }
        if let Some(bytes) = self.write_buffer_size {
            opts.memtable.write_buffer_size = to_usize(bytes, "--write-buffer-size")?;
        }
        if let Some(c) = self.compression {
            opts.table.compression = c.into();
        }
        if let Some(bytes) = self.block_cache {
            opts.cache.block_cache_bytes = to_usize(bytes, "--block-cache")?;
        }
        if let Some(wal) = self.wal {
            opts.wal.mode = wal.into();
        }
        if let Some(placement) = self.placement {
            opts.placement.mode = placement.into();
        }
        Ok(())
    }

    /// Opens the database with the engine's defaults as the base options.
    pub fn open(&self, mode: OpenMode) -> Result<Db> {
        self.open_with(Options::default(), mode)
    }

    /// Opens the database, starting from `base` when there is no config file.
    pub fn open_with(&self, base: Options, mode: OpenMode) -> Result<Db> {
        let mut opts = self.options(base)?;
        // NB: the mode decides these, whatever a config file says.
        opts.read_only = mode == OpenMode::ReadOnly;
        opts.create_if_missing = matches!(mode, OpenMode::CreateIfMissing | OpenMode::CreateNew);
        opts.error_if_exists = mode == OpenMode::CreateNew;
        let dir = opts.tiers[0].path.clone();
        Db::open(opts).with_context(|| format!("cannot open the database in {}", dir.display()))
    }

    /// The tier 0 directory (CURRENT, MANIFEST, WAL), found without opening anything.
    pub fn tier0_dir(&self) -> Result<PathBuf> {
        Ok(self.options(Options::default())?.tiers[0].path.clone())
    }
}

/// A tier directory holding a zoned device keeps its tables in zones: it is opened with
/// `tables = "zones"` and the geometry the device records, so `--tier` works on zoned tiers
/// without repeating their zone settings.
fn mark_zoned_tiers(opts: &mut Options) -> Result<()> {
    let fs = PosixFs::new();
    for tier in &mut opts.tiers {
        if tier.tables == TierTables::Zones || !ZonedDir::is_zoned(&fs, &tier.path) {
            continue;
        }
        let g = ZonedDir::geometry(&fs, &tier.path)
            .with_context(|| format!("cannot read the zoned device of tier {}", tier.name))?;
        *tier = tier.clone().with_zoned_tables(g.zone_size, g.zones);
    }
    Ok(())
}

fn default_tiers() -> Vec<TierConfig> {
    let root = PathBuf::from(".").join(DEFAULT_ROOT);
    vec![
        TierConfig::new("fast", root.join("fast")),
        TierConfig::new("capacity", root.join("capacity")),
    ]
}

fn to_usize(bytes: u64, flag: &str) -> Result<usize> {
    usize::try_from(bytes).with_context(|| format!("{flag} {bytes} does not fit this machine"))
}

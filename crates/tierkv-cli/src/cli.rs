//! The command line: global engine options and the subcommands, as clap derives them.
//!
//! Only parsing lives here; each subcommand's behaviour is in its own module. Values that can be
//! checked without the database (tier specs, sizes) are checked by clap, so a mistake there is a
//! usage error (exit 2) before anything is opened.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use tierkv::TierConfig;

const EXIT_CODES: &str = "\
Keys and values are text: non-printable bytes and backslashes are written as \\xNN and \\\\, and
the same escapes are accepted in arguments and `load` input. With --hex, keys and values are hex.

Exit codes:
  0  success
  1  not found (`get` of an absent key)
  2  usage error (bad arguments)
  3  corruption: damaged data detected (`check`, dumps, or any read of a damaged file)
  4  any other error (I/O, locked database, no database, invalid option)";

/// tierkv: inspect, load and benchmark a tierkv database (an ldb-like tool).
#[derive(Parser, Debug)]
#[command(name = "tierkv", version, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(flatten)]
    pub engine: EngineArgs,

    /// Keys and values on the command line, in `load` input and in output are hex.
    #[arg(long, global = true)]
    pub hex: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// Where the database lives and how it is tuned. Flags override the `--config` file.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Engine options (any command)")]
pub struct EngineArgs {
    /// A storage tier, fastest first (repeat for each tier); CAPACITY like 10GiB is optional.
    /// Default: fast=./tierkv-data/fast and capacity=./tierkv-data/capacity.
    #[arg(long = "tier", value_name = "NAME=DIR[:CAPACITY]", value_parser = parse_tier, global = true)]
    pub tiers: Vec<TierConfig>,

    /// Engine options from a TOML file (`[[tier]]` tables plus option keys).
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// LSM levels L0..L(N-1) stay on the fast tier; deeper levels go to the next tiers.
    #[arg(long, value_name = "N", global = true)]
    pub levels_on_fast: Option<usize>,

    /// Memtable size before it is flushed, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, global = true)]
    pub write_buffer_size: Option<u64>,

    /// Block compression of new tables.
    #[arg(long, value_enum, global = true)]
    pub compression: Option<CompressionArg>,

    /// Block cache budget, e.g. 256MiB (0 disables the cache).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, global = true)]
    pub block_cache: Option<u64>,

    /// How the WAL is written: group commit, or SpanDB's parallel WAL (several loggers
    /// writing a preallocated page area).
    #[arg(long, value_enum, global = true)]
    pub wal: Option<WalArg>,

    /// How new tables are placed: by --levels-on-fast, or automatically by the fast tier's
    /// measured bandwidth use and space (starting from --levels-on-fast).
    #[arg(long, value_enum, global = true)]
    pub placement: Option<PlacementArg>,
}

/// Placement modes as typed on the command line.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementArg {
    /// A fixed split: --levels-on-fast levels on the fast tier.
    Fixed,
    /// A pointer over levels moved by the fast tier's utilisation, with migration.
    Auto,
}

impl From<PlacementArg> for tierkv::Placement {
    fn from(p: PlacementArg) -> Self {
        match p {
            PlacementArg::Fixed => tierkv::Placement::Fixed,
            PlacementArg::Auto => tierkv::Placement::Auto,
        }
    }
}

/// WAL modes as typed on the command line.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalArg {
    /// One log file per memtable, written by a group-commit leader.
    Group,
    /// A page area on the fast tier written by up to three loggers at once.
    Parallel,
}

impl From<WalArg> for tierkv::WalMode {
    fn from(w: WalArg) -> Self {
        match w {
            WalArg::Group => tierkv::WalMode::Group,
            WalArg::Parallel => tierkv::WalMode::Parallel,
        }
    }
}

/// Compression names as typed on the command line.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionArg {
    /// Store blocks as they are.
    None,
    /// LZ4: fast, modest ratio.
    Lz4,
    /// zstd: slower, better ratio.
    Zstd,
}

impl From<CompressionArg> for tierkv::Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::None => tierkv::Compression::None,
            CompressionArg::Lz4 => tierkv::Compression::Lz4,
            CompressionArg::Zstd => tierkv::Compression::Zstd,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Store VALUE under KEY.
    Put {
        key: String,
        value: String,
        /// Sync the WAL to stable storage before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Print the value of KEY (exit 1, nothing on stdout, if it is absent).
    Get { key: String },
    /// Remove KEY (no error if it is absent).
    Delete {
        key: String,
        /// Sync the WAL to stable storage before returning.
        #[arg(long)]
        sync: bool,
    },
    /// Print `key<TAB>value` lines in key order.
    Scan(ScanArgs),
    /// Bulk-load `key<TAB>value` lines from stdin; a summary goes to stderr.
    Load(LoadArgs),
    /// Print the engine's statistics: tiers, levels, files.
    Stats {
        /// Also list every live table file.
        #[arg(long)]
        files: bool,
    },
    /// Compact the whole key range down to the last level, then print statistics.
    Compact,
    /// Verify every checksum (MANIFEST, WAL, every table block), scan every key and check every
    /// zoned tier's zones against its files, without changing the database.
    Check,
    /// Print the edits of the live MANIFEST on tier 0, without opening the database.
    DumpManifest,
    /// Print the records of WAL files (default: every *.log on tier 0) and how each ends.
    DumpWal(DumpWalArgs),
    /// Print a table file's properties, index and first entries (a table of a zoned tier is
    /// read from the tier's zones).
    DumpSst(DumpSstArgs),
    /// Print a zoned tier's device geometry, every zone (role, condition, write pointer, live
    /// bytes, owning files) and every file's extents, then check them; reads only.
    DumpZones {
        /// The tier directory (holding ZONED-DEVICE).
        dir: PathBuf,
    },
    /// Create a database, load random records, read them back, print throughput and stats.
    Demo(DemoArgs),
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// First key (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Print at most N pairs.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Descending key order (starting below --to).
    #[arg(long)]
    pub reverse: bool,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Sync the WAL after every write.
    #[arg(long)]
    pub sync: bool,
    /// Lines per atomic write batch.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Flush and wait for background compaction before printing the summary, so the bytes
    /// per tier and the write amplification are final.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Args, Debug)]
pub struct DumpWalArgs {
    /// WAL files to read (default: every *.log in the tier 0 directory).
    pub files: Vec<PathBuf>,
    /// Print whole values instead of their first 64 bytes.
    #[arg(long)]
    pub full_values: bool,
}

#[derive(Args, Debug)]
pub struct DumpSstArgs {
    /// The table file (NNNNNN.sst).
    pub file: PathBuf,
    /// Index entries and data entries to print.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub limit: usize,
    /// Also verify every block's checksum.
    #[arg(long)]
    pub verify: bool,
    /// Print whole values instead of their first 64 bytes.
    #[arg(long)]
    pub full_values: bool,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Records to load (random 16-byte keys).
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub records: u64,
    /// Bytes per value (the first 16 repeat the key so reads can be verified).
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub value_size: usize,
    /// Random point reads after the load.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub reads: u64,
    /// Records per write batch.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Sync the WAL after every write.
    #[arg(long)]
    pub sync: bool,
    /// Seed of the key and value generator (default: random).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Remove a database left in the tier directories by an earlier run first (only
    /// directories that are tierkv tiers). Always done for the default ./tierkv-data tiers.
    #[arg(long)]
    pub replace: bool,
}

/// Parses `NAME=DIR[:CAPACITY]`. A `:` suffix is a capacity only if it starts with a digit, so
/// directories with colons still work; a digit suffix that is not a size is an error.
pub fn parse_tier(spec: &str) -> Result<TierConfig, String> {
    let (name, rest) = spec
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=DIR[:CAPACITY], got {spec:?}"))?;
    if name.is_empty() || rest.is_empty() {
        return Err(format!("expected NAME=DIR[:CAPACITY], got {spec:?}"));
    }
    let tier = match rest.rsplit_once(':') {
        Some((dir, cap)) if !dir.is_empty() && cap.starts_with(|c: char| c.is_ascii_digit()) => {
            TierConfig::new(name, dir).with_capacity(parse_size(cap)?)
        }
        _ => TierConfig::new(name, rest),
    };
    Ok(tier)
}

/// Parses a byte size such as `4096`, `64MiB` or `1.5GiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    tierkv::inspect::parse_size(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_specs() {
        let t = parse_tier("fast=/mnt/a:10GiB").unwrap();
        assert_eq!((t.name.as_str(), t.capacity), ("fast", 10 << 30));
        assert_eq!(t.path, PathBuf::from("/mnt/a"));
        let t = parse_tier("cap=/mnt/b:c").unwrap();
        assert_eq!(t.path, PathBuf::from("/mnt/b:c"));
        assert_eq!(t.capacity, u64::MAX);
        assert!(parse_tier("fast=/a:10parsecs").is_err());
        assert!(parse_tier("/just/a/dir").is_err());
        assert!(parse_tier("=/a").is_err());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}

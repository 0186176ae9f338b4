//! Configuration: the command line (clap), the TOML file, and the checked [`ServerConfig`]
//! plus engine [`Options`] they make.
//!
//! Precedence: flags over the file's `[server]` table over the defaults documented at each
//! field. The file's other keys are the engine's TOML options (`Options::from_toml_str`);
//! `--tier` replaces its `[[tier]]` tables; without either the tiers are
//! `./tierkv-server-data/fast` and `./tierkv-server-data/capacity`. The one rule that is not a
//! range check: a server reachable beyond loopback must have a password.

use clap::{Parser, ValueEnum};
use serde::Deserialize;
use std::fmt;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tierkv::{Durability, Options, TierConfig};

/// Where the default tiers live, relative to the working directory.
pub const DEFAULT_ROOT: &str = "tierkv-server-data";
/// Default port: Redis's.
pub const DEFAULT_PORT: u16 = 6379;
/// Default most bytes of one request: a 64 MiB value (the engine's limit) with room for its
/// key and the command.
pub const DEFAULT_MAX_REQUEST: u64 = 72 << 20;

/// tierkv-server: the tierkv engine over the Redis protocol (RESP2/RESP3).
#[derive(Parser, Debug, Clone, Default)]
#[command(name = "tierkv-server", version)]
pub struct Args {
    /// TOML file: engine options (as for `tierkv --config`) plus a `[server]` table.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (default 127.0.0.1). Beyond loopback, --requirepass is required.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// TCP port (default 6379; 0 picks a free one, printed at start).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Password clients must give with AUTH (or HELLO ... AUTH default PASS).
    #[arg(long, value_name = "PASSWORD")]
    pub requirepass: Option<String>,
    /// Most connected clients; more are refused with an error (default 10000).
    #[arg(long, value_name = "N")]
    pub maxclients: Option<usize>,
    /// Most bytes of one request, all arguments together, e.g. 8MiB (default 72MiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_request_size: Option<u64>,
    /// Most arguments in one request (default 1048576).
    #[arg(long, value_name = "N")]
    pub max_args: Option<usize>,
    /// Close a client idle (or not reading its replies) for this many seconds; 0 never
    /// (default 300).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Durability of every write: sync (appendfsync always), flush (everysec; survives a
    /// process crash) or buffered (no). Default flush.
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityArg>,
    /// Allow FLUSHALL (off by default: it deletes every key).
    #[arg(long)]
    pub enable_flushall: bool,
    /// Threads serving connections (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    pub io_threads: Option<usize>,
    /// A storage tier, fastest first (repeat for each tier); CAPACITY like 10GiB is optional.
    #[arg(long = "tier", value_name = "NAME=DIR[:CAPACITY]", value_parser = parse_tier)]
    pub tiers: Vec<TierConfig>,
    /// LSM levels L0..L(N-1) stay on the fast tier.
    #[arg(long, value_name = "N")]
    pub levels_on_fast: Option<usize>,
    /// Memtable size before it is flushed, e.g. 64MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub write_buffer_size: Option<u64>,
    /// Block cache budget, e.g. 256MiB (0 disables the cache).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub block_cache: Option<u64>,
    /// How the WAL is written.
    #[arg(long, value_enum)]
    pub wal: Option<WalArg>,
    /// Instead of serving: measure GETs in-process through the engine's async API for this
    /// many seconds (keys `key:%012d` as redis-benchmark's -r writes them), then exit.
    #[arg(long, value_name = "SECONDS")]
    pub bench_inprocess: Option<u64>,
    /// Instead of serving: write keys 0..N (named as redis-benchmark's -r names them) with
    /// --bench-value-size values, flush, then exit (or run --bench-inprocess).
    #[arg(long, value_name = "N")]
    pub bench_load: Option<u64>,
    /// --bench-load: bytes per value (default 1000).
    #[arg(long, value_name = "BYTES", default_value_t = 1000)]
    pub bench_value_size: usize,
    /// --bench-inprocess: keys 0..N are read at random (default 1000000).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub bench_keyspace: u64,
    /// --bench-inprocess: concurrent readers, as redis-benchmark's -c (default 50).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub bench_clients: usize,
}

/// Write durability as typed on the command line and in the file.
#[derive(ValueEnum, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityArg {
    /// fdatasync before the reply (Redis `appendfsync always`).
    Sync,
    /// Handed to the OS before the reply: survives a process crash (`appendfsync everysec`).
    Flush,
    /// Kept in the WAL's buffer: lost if the process dies (`appendfsync no`).
    Buffered,
}

impl DurabilityArg {
    /// The engine's durability.
    pub fn durability(self) -> Durability {
        match self {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Flush => Durability::Flush,
            DurabilityArg::Buffered => Durability::Buffered,
        }
    }

    /// The name, as CONFIG GET and INFO show it.
    pub fn name(self) -> &'static str {
        match self {
            DurabilityArg::Sync => "sync",
            DurabilityArg::Flush => "flush",
            DurabilityArg::Buffered => "buffered",
        }
    }

    /// Redis's `appendfsync` counterpart.
    pub fn appendfsync(self) -> &'static str {
        match self {
            DurabilityArg::Sync => "always",
            DurabilityArg::Flush => "everysec",
            DurabilityArg::Buffered => "no",
        }
    }
}

/// WAL modes as typed on the command line.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalArg {
    /// Group commit (one log file per memtable).
    Group,
    /// SpanDB's parallel WAL.
    Parallel,
    /// The leaderless append WAL on a conventional file.
    Append,
    /// WALTZ: the append WAL on an emulated zoned device.
    Zoned,
}

/// The `[server]` table of the config file; every key optional.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
struct ServerTable {
    bind: Option<String>,
    port: Option<u16>,
    requirepass: Option<String>,
    maxclients: Option<usize>,
    max_request_size: Option<SizeValue>,
    max_args: Option<usize>,
    timeout: Option<u64>,
    durability: Option<DurabilityArg>,
    enable_flushall: Option<bool>,
    io_threads: Option<usize>,
}

/// A size written as a number of bytes or as text such as "8MiB".
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
enum SizeValue {
    Bytes(u64),
    Text(String),
}

/// The server's settings, checked.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on.
    pub bind: String,
    /// Port (0: any free one).
    pub port: u16,
    /// Password for AUTH, if any.
    pub requirepass: Option<String>,
    /// Most connected clients.
    pub maxclients: usize,
    /// Most bytes of one request.
    pub max_request_size: usize,
    /// Most arguments of one request.
    pub max_args: usize,
    /// Idle and stalled-write timeout; `None` never.
    pub timeout: Option<Duration>,
    /// Durability of every write.
    pub durability: DurabilityArg,
    /// Whether FLUSHALL runs.
    pub enable_flushall: bool,
    /// Threads serving connections.
    pub io_threads: usize,
    /// The config file, if one was given (INFO shows it).
    pub config_file: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            requirepass: None,
            maxclients: 10_000,
            max_request_size: DEFAULT_MAX_REQUEST as usize,
            max_args: 1 << 20,
            timeout: Some(Duration::from_secs(300)),
            durability: DurabilityArg::Flush,
            enable_flushall: false,
            io_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            config_file: None,
        }
    }
}

/// Why the configuration cannot be used.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read or is not valid TOML.
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A setting is out of range.
    Setting {
        /// The flag or key.
        name: &'static str,
        /// What is wrong and what is accepted.
        what: String,
    },
    /// Listening beyond loopback without a password.
    NeedsPassword {
        /// The address asked for.
        bind: String,
    },
    /// The engine refused its options.
    Engine(tierkv::Error),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::File { path, what } => {
                write!(f, "config file {}: {what}", path.display())
            }
            ConfigError::Setting { name, what } => write!(f, "setting {name}: {what}"),
            ConfigError::NeedsPassword { bind } => write!(
                f,
                "refusing to listen on {bind} without a password: it is reachable beyond this \
                 machine's loopback interface; set --requirepass (or requirepass in [server]), \
                 or bind 127.0.0.1"
            ),
            ConfigError::Engine(e) => write!(f, "engine options: {e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn setting(name: &'static str, what: impl Into<String>) -> ConfigError {
    ConfigError::Setting {
        name,
        what: what.into(),
    }
}

impl Args {
    /// The server settings and engine options these arguments (and their file) describe.
    pub fn resolve(&self) -> Result<(ServerConfig, Options), ConfigError> {
        let mut table = match &self.config {
            Some(path) => read_table(path)?,
            None => toml::Table::new(),
        };
        let server: ServerTable = match table.remove("server") {
            Some(v) => v
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::File {
                    path: self.config.clone().unwrap_or_default(),
                    what: format!("[server]: {}", e.message()),
                })?,
            None => ServerTable::default(),
        };
        let config = self.server_config(server)?;
        let opts = self.engine_options(table)?;
        Ok((config, opts))
    }

    fn server_config(&self, file: ServerTable) -> Result<ServerConfig, ConfigError> {
        let d = ServerConfig::default();
        let max_request = match (self.max_request_size, &file.max_request_size) {
            (Some(n), _) => n,
            (None, Some(SizeValue::Bytes(n))) => *n,
            (None, Some(SizeValue::Text(t))) => {
                parse_size(t).map_err(|e| setting("max_request_size", e))?
            }
            (None, None) => DEFAULT_MAX_REQUEST,
        };
        if !(1024..=1 << 30).contains(&max_request) {
            return Err(setting(
                "max_request_size",
                format!("{max_request} is out of range: accepted 1KiB..=1GiB"),
            ));
        }
        let timeout = self.timeout.or(file.timeout).unwrap_or(300);
        let config = ServerConfig {
            bind: self.bind.clone().or(file.bind).unwrap_or(d.bind),
            port: self.port.or(file.port).unwrap_or(d.port),
            requirepass: self
                .requirepass
                .clone()
                .or(file.requirepass)
                .filter(|p| !p.is_empty()),
            maxclients: self.maxclients.or(file.maxclients).unwrap_or(d.maxclients),
            max_request_size: max_request as usize,
            max_args: self.max_args.or(file.max_args).unwrap_or(d.max_args),
            timeout: (timeout > 0).then(|| Duration::from_secs(timeout)),
            durability: self.durability.or(file.durability).unwrap_or(d.durability),
            enable_flushall: self.enable_flushall || file.enable_flushall.unwrap_or(false),
            io_threads: self.io_threads.or(file.io_threads).unwrap_or(d.io_threads),
            config_file: self.config.clone(),
        };
        config.validate()?;
        Ok(config)
    }

    fn engine_options(&self, mut table: toml::Table) -> Result<Options, ConfigError> {
        let engine_error = |e: tierkv::Error| match &self.config {
            Some(path) => ConfigError::File {
                path: path.clone(),
                what: e.detail(),
            },
            None => ConfigError::Engine(e),
        };
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        server_engine_defaults(&mut table, cores).map_err(engine_error)?;
        if !self.tiers.is_empty() {
            table.insert("tier".into(), tiers_value(&self.tiers));
        } else if !table.contains_key("tier") {
            table.insert("tier".into(), tiers_value(&default_tiers()));
        }
        let text = toml::to_string(&table).map_err(|e| setting("config", e.to_string()))?;
        let mut opts = Options::from_toml_str(&text).map_err(engine_error)?;
        self.apply_tuning(&mut opts)?;
        opts.validate().map_err(ConfigError::Engine)?;
        Ok(opts)
    }

    fn apply_tuning(&self, opts: &mut Options) -> Result<(), ConfigError> {
        if let Some(n) = self.levels_on_fast {
            opts.placement.levels_on_fast = n;
        }
        if let Some(b) = self.write_buffer_size {
            opts.memtable.write_buffer_size = usize::try_from(b)
                .map_err(|_| setting("--write-buffer-size", "does not fit this machine"))?;
        }
        if let Some(b) = self.block_cache {
            opts.cache.block_cache_bytes = usize::try_from(b)
                .map_err(|_| setting("--block-cache", "does not fit this machine"))?;
        }
        if let Some(w) = self.wal {
            opts.wal.mode = match w {
                WalArg::Group => tierkv::WalMode::Group,
                WalArg::Parallel => tierkv::WalMode::Parallel,
                WalArg::Append => tierkv::WalMode::Append,
                WalArg::Zoned => tierkv::WalMode::Zoned,
            };
        }
        Ok(())
    }
}

impl ServerConfig {
    /// Checks ranges and the password rule.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.maxclients == 0 {
            return Err(setting("maxclients", "must be at least 1"));
        }
        if !(3..=1 << 24).contains(&self.max_args) {
            return Err(setting(
                "max_args",
                format!("{} is out of range: accepted 3..=16777216", self.max_args),
            ));
        }
        if !(1..=256).contains(&self.io_threads) {
            return Err(setting(
                "io_threads",
                format!("{} is out of range: accepted 1..=256", self.io_threads),
            ));
        }
        if self.requirepass.is_none() && !is_loopback(&self.bind, self.port)? {
            return Err(ConfigError::NeedsPassword {
                bind: self.bind.clone(),
            });
        }
        Ok(())
    }
}

/// True when every address `bind` names is a loopback address.
fn is_loopback(bind: &str, port: u16) -> Result<bool, ConfigError> {
    if let Ok(ip) = bind.parse::<IpAddr>() {
        return Ok(ip.is_loopback());
    }
    let addrs: Vec<_> = (bind, port)
        .to_socket_addrs()
        .map_err(|e| setting("bind", format!("cannot resolve {bind:?}: {e}")))?
        .collect();
    Ok(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()))
}

fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let file_err = |what: String| ConfigError::File {
        path: path.to_path_buf(),
        what,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
    text.parse::<toml::Table>()
        .map_err(|e| file_err(format!("not valid TOML: {}", e.message())))
}

fn tiers_value(tiers: &[TierConfig]) -> toml::Value {
    let tables = tiers.iter().map(|t| {
        let mut table = toml::Table::new();
        table.insert("name".into(), t.name.clone().into());
        table.insert("path".into(), t.path.display().to_string().into());
        if t.capacity != u64::MAX {
            // NB: as text, since TOML integers stop at i64::MAX.
            table.insert("capacity".into(), t.capacity.to_string().into());
        }
        if t.direct_reads {
            table.insert("direct_reads".into(), true.into());
        }
        toml::Value::Table(table)
    });
    toml::Value::Array(tables.collect())
}

/// Where the server's engine defaults differ from the library's, and the file says nothing:
/// a server's connections write many batches at once, so on a machine with cores to spare
/// (4 or more) a group commit's batches are inserted into the memtable in parallel
/// (`wal.concurrent_memtable_writes`) by more pipeline workers (`pipeline.workers`: half the
/// cores, 2 to 8). On 16 cores synced, pipelined SETs ran 2.6x faster so; on 2 cores, with no
/// idle core for a second inserter, the option measured 0.88x, so it stays off there
/// (BENCHMARKS.md, "tierkv-server on 16 cores").
fn server_engine_defaults(table: &mut toml::Table, cores: usize) -> tierkv::Result<()> {
    Options::normalize_toml(table)?;
    let parallel = cores >= 4;
    let defaults = [
        (
            "wal",
            "concurrent_memtable_writes",
            toml::Value::Boolean(parallel),
        ),
        (
            "pipeline",
            "workers",
            toml::Value::Integer((cores / 2).clamp(2, 8) as i64),
        ),
    ];
    for (group, field, value) in defaults {
        let section = table
            .entry(group)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(section) = section.as_table_mut() {
            section.entry(field).or_insert(value);
        }
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

/// Parses `NAME=DIR[:CAPACITY]`, as the `tierkv` command does: a `:` suffix is a capacity
/// only if it starts with a digit, so directories with colons still work.
pub fn parse_tier(spec: &str) -> Result<TierConfig, String> {
    let bad = || format!("expected NAME=DIR[:CAPACITY], got {spec:?}");
    let (name, rest) = spec.split_once('=').ok_or_else(bad)?;
    if name.is_empty() || rest.is_empty() {
        return Err(bad());
    }
    Ok(match rest.rsplit_once(':') {
        Some((dir, cap)) if !dir.is_empty() && cap.starts_with(|c: char| c.is_ascii_digit()) => {
            TierConfig::new(name, dir).with_capacity(parse_size(cap)?)
        }
        _ => TierConfig::new(name, rest),
    })
}

/// Parses a byte size such as `4096`, `64MiB` or `1.5GiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    tierkv::inspect::parse_size(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("tierkv-server").chain(words.iter().copied())).unwrap()
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let (c, o) = args(&[]).resolve().unwrap();
        assert_eq!((c.bind.as_str(), c.port), ("127.0.0.1", 6379));
        assert_eq!(c.durability, DurabilityArg::Flush);
        assert_eq!(o.tiers.len(), 2);
        assert!(o.tiers[0].path.ends_with("tierkv-server-data/fast"));
    }

    #[test]
    fn every_wal_mode_is_selectable() {
        for (word, mode) in [
            ("group", tierkv::WalMode::Group),
            ("parallel", tierkv::WalMode::Parallel),
            ("append", tierkv::WalMode::Append),
            ("zoned", tierkv::WalMode::Zoned),
        ] {
            let (_, o) = args(&["--wal", word]).resolve().unwrap();
            assert_eq!(o.wal.mode, mode, "--wal {word}");
        }
    }

    #[test]
    fn beyond_loopback_needs_a_password() {
        let err = args(&["--bind", "0.0.0.0"]).resolve().unwrap_err();
        assert!(matches!(err, ConfigError::NeedsPassword { .. }));
        assert!(err.to_string().contains("--requirepass"), "{err}");
        args(&["--bind", "0.0.0.0", "--requirepass", "pw"])
            .resolve()
            .unwrap();
        args(&["--bind", "::1"]).resolve().unwrap();
        args(&["--bind", "localhost"]).resolve().unwrap();
    }

    #[test]
    fn file_with_server_table_and_engine_options() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.toml");
        std::fs::write(
            &path,
            "levels_on_fast = 1\nwrite_buffer_size = \"8MiB\"\n\
             [server]\nport = 7000\ndurability = \"sync\"\nmax_request_size = \"2MiB\"\n\
             [[tier]]\nname = \"fast\"\npath = \"/tmp/x/fast\"\ncapacity = \"1GiB\"\n",
        )
        .unwrap();
        let p = path.to_str().unwrap();
        let (c, o) = args(&["--config", p, "--port", "7001"]).resolve().unwrap();
        assert_eq!(c.port, 7001, "flags win");
        assert_eq!(c.durability, DurabilityArg::Sync);
        assert_eq!(c.max_request_size, 2 << 20);
        assert_eq!(
            (o.placement.levels_on_fast, o.memtable.write_buffer_size),
            (1, 8 << 20)
        );
        assert_eq!(o.tiers[0].capacity, 1 << 30);
        let (_, o) = args(&[
            "--config",
            p,
            "--tier",
            "a=/tmp/y/a:2GiB",
            "--tier",
            "b=/tmp/y/b",
        ])
        .resolve()
        .unwrap();
        assert_eq!(o.tiers.len(), 2);
        assert_eq!(o.tiers[0].capacity, 2 << 30);
        std::fs::write(&path, "[server]\nprot = 1\n").unwrap();
        let err = args(&["--config", p]).resolve().unwrap_err().to_string();
        assert!(err.contains("prot") && err.contains("server.toml"), "{err}");
        std::fs::write(&path, "levels_on_fats = 1\n").unwrap();
        let err = args(&["--config", p]).resolve().unwrap_err().to_string();
        assert!(err.contains("levels_on_fats"), "{err}");
    }

    #[test]
    fn server_defaults_parallel_inserts_unless_the_file_says_otherwise() {
        let parse = |text: &str, cores| {
            let mut table: toml::Table = toml::from_str(text).unwrap();
            server_engine_defaults(&mut table, cores).unwrap();
            table.insert("tier".into(), tiers_value(&default_tiers()));
            Options::from_toml_str(&toml::to_string(&table).unwrap()).unwrap()
        };
        let o = parse("", 16);
        assert_eq!(
            (o.wal.concurrent_memtable_writes, o.pipeline.workers),
            (true, 8)
        );
        let two = parse("", 2);
        assert_eq!(
            (two.wal.concurrent_memtable_writes, two.pipeline.workers),
            (false, 2)
        );
        assert_eq!(parse("", 64).pipeline.workers, 8);
        assert_eq!(parse("", 6).pipeline.workers, 3);
        assert!(parse("", 4).wal.concurrent_memtable_writes);
        let o = parse("wal = \"parallel\"\npipeline_workers = 3\n", 16);
        assert_eq!(o.wal.mode, tierkv::WalMode::Parallel);
        assert_eq!(o.pipeline.workers, 3);
        assert!(o.wal.concurrent_memtable_writes);
        let o = parse("[wal]\nconcurrent_memtable_writes = false\n", 16);
        assert!(!o.wal.concurrent_memtable_writes);
        let o = parse("wal_concurrent_memtable_writes = false\n", 16);
        assert!(!o.wal.concurrent_memtable_writes);
    }

    #[test]
    fn ranges_are_named() {
        let err = args(&["--maxclients", "0"])
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("maxclients"), "{err}");
        let err = args(&["--max-request-size", "10"])
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_request_size"), "{err}");
        assert!(parse_tier("fast").is_err());
    }
}

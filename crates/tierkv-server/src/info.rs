//! INFO and CONFIG GET: the server's settings and counters and the engine's statistics in
//! Redis's `key:value` format.
//!
//! Sections: `server`, `clients`, `persistence`, `tiers` (one line per tier and per level)
//! and `stats` (server counters, then the engine's as `engine_*`). Field names follow Redis
//! where Redis has the field, so tools that read `connected_clients` or `aof_enabled` work.

use crate::resp::Reply;
use crate::scan::glob_match;
use crate::server::Shared;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Sections INFO knows, in the order it prints them.
pub const SECTIONS: &[&str] = &["server", "clients", "persistence", "tiers", "stats"];

/// The INFO text for `asked` sections (all of them when empty or `all`/`default`/`everything`).
pub fn info(shared: &Shared, asked: &[String]) -> String {
    let all = asked.is_empty()
        || asked
            .iter()
            .any(|s| matches!(s.as_str(), "all" | "default" | "everything"));
    let mut out = String::new();
    for &section in SECTIONS {
        if !all && !asked.iter().any(|s| s == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = section.to_string();
        title[..1].make_ascii_uppercase();
        let _ = write!(out, "# {title}\r\n");
        let lines = match section {
            "server" => server(shared),
            "clients" => clients(shared),
            "persistence" => persistence(shared),
            "tiers" => tiers(shared),
            _ => stats(shared),
        };
        for (k, v) in lines {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    out
}

type Lines = Vec<(String, String)>;

fn kv(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

fn server(s: &Shared) -> Lines {
    let up = s.started.elapsed().as_secs();
    vec![
        // NB: clients and tools check redis_version for features; this is the protocol
        // level the server speaks, not a Redis build.
        kv("redis_version", "7.0.0"),
        kv("tierkv_version", env!("CARGO_PKG_VERSION")),
        kv("redis_mode", "standalone"),
        kv("os", std::env::consts::OS),
        kv("arch_bits", usize::BITS),
        kv("process_id", std::process::id()),
        kv("tcp_port", s.addr.port()),
        kv("listening", s.addr),
        kv("uptime_in_seconds", up),
        kv("uptime_in_days", up / 86_400),
        kv("io_threads_active", s.config.io_threads),
        kv(
            "config_file",
            s.config
                .config_file
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string()),
        ),
    ]
}

fn clients(s: &Shared) -> Lines {
    let c = &s.counters;
    vec![
        kv("connected_clients", c.connected.load(Ordering::Relaxed)),
        kv("maxclients", s.config.maxclients),
        kv("blocked_clients", 0),
        kv("max_request_size", s.config.max_request_size),
    ]
}

fn persistence(s: &Shared) -> Lines {
    let st = s.db.stats();
    let d = s.config.durability;
    vec![
        kv("loading", 0),
        kv("aof_enabled", 1),
        kv("appendfsync", d.appendfsync()),
        kv("durability", d.name()),
        kv("wal_io_path", &st.wal_io_path),
        kv("last_sequence", st.last_sequence),
        kv("memtable_bytes", st.memtable_bytes),
        kv("memtables_memory_bytes", st.memtables_memory),
        kv("immutable_memtables", st.immutable_memtables),
        kv("flushes", st.flushes),
        kv("compactions", st.compactions),
        kv("stall_micros", st.stall_micros),
        kv("user_bytes_written", st.user_bytes_written),
    ]
}

fn tiers(s: &Shared) -> Lines {
    let st = s.db.stats();
    let mut lines = vec![kv("placement", &st.placement), kv("tiers", st.tiers.len())];
    for (i, (t, cfg)) in st.tiers.iter().zip(&s.db.options().tiers).enumerate() {
        let capacity = if t.capacity == u64::MAX {
            "unlimited".to_string()
        } else {
            t.capacity.to_string()
        };
        lines.push(kv(
            &format!("tier{i}"),
            format!(
                "name={},path={},capacity={capacity},used={},files={},bytes_read={},bytes_written={},reads_served={}",
                t.name,
                cfg.path.display(),
                t.bytes_used,
                t.files,
                t.bytes_read,
                t.bytes_written(),
                t.reads_served
            ),
        ));
    }
    for l in st.levels.iter().filter(|l| l.files > 0) {
        lines.push(kv(
            &format!("level{}", l.level),
            format!(
                "files={},bytes={},reads_served={}",
                l.files, l.bytes, l.reads_served
            ),
        ));
    }
    lines
}

fn stats(s: &Shared) -> Lines {
    let c = &s.counters;
    let st = s.db.stats();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (hits, misses, used, budget) = st.block_cache;
    vec![
        kv("total_connections_received", load(&c.total_connections)),
        kv("total_commands_processed", load(&c.total_commands)),
        kv("rejected_connections", load(&c.rejected_connections)),
        kv("protocol_errors", load(&c.protocol_errors)),
        kv("timed_out_clients", load(&c.timeouts)),
        kv("busy_backoffs", load(&c.busy_backoffs)),
        kv("reply_writes", load(&c.reply_writes)),
        kv(
            "scan_cursors",
            s.cursors.lock().expect("cursor table").len(),
        ),
        kv("engine_gets", st.gets),
        kv("engine_reads_memtable", st.reads_memtable),
        kv("engine_reads_block_cache", st.reads_block_cache),
        kv("engine_reads_not_found", st.reads_not_found),
        kv("engine_lucky_reads", st.lucky_reads),
        kv("engine_multi_gets", st.multi_gets),
        kv("engine_writes", st.writes),
        kv("engine_write_groups", st.write_groups),
        kv("engine_synced_groups", st.synced_groups),
        kv("engine_parallel_insert_groups", st.parallel_insert_groups),
        kv(
            "engine_average_group_size",
            format!("{:.2}", st.average_group_size()),
        ),
        kv("engine_async_requests", st.async_requests),
        kv("engine_busy_rejections", st.busy_rejections),
        kv("engine_txn_commits", st.txn_commits),
        kv("engine_txn_conflicts", st.txn_conflicts),
        kv("engine_slowdowns", st.slowdowns),
        kv("engine_stops", st.stops),
        kv("engine_block_cache_hits", hits),
        kv("engine_block_cache_misses", misses),
        kv("engine_block_cache_bytes", format!("{used}/{budget}")),
        kv(
            "engine_write_amplification",
            format!("{:.2}", st.write_amplification()),
        ),
    ]
}

/// Every setting CONFIG GET can report, by Redis's name where Redis has one.
fn settings(s: &Shared) -> Vec<(&'static str, String)> {
    let c = &s.config;
    let opts = s.db.options();
    let tiers: Vec<String> = opts
        .tiers
        .iter()
        .map(|t| format!("{}={}", t.name, t.path.display()))
        .collect();
    vec![
        ("bind", c.bind.clone()),
        ("port", s.addr.port().to_string()),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("maxclients", c.maxclients.to_string()),
        ("timeout", c.timeout.map_or(0, |t| t.as_secs()).to_string()),
        ("proto-max-bulk-len", c.max_request_size.to_string()),
        ("client-query-buffer-limit", c.max_request_size.to_string()),
        ("max-args", c.max_args.to_string()),
        ("appendonly", "yes".into()),
        ("appendfsync", c.durability.appendfsync().into()),
        ("durability", c.durability.name().into()),
        ("save", String::new()),
        ("databases", "1".into()),
        ("io-threads", c.io_threads.to_string()),
        ("enable-flushall", yes_no(c.enable_flushall)),
        ("dir", opts.tiers[0].path.display().to_string()),
        ("tiers", tiers.join(" ")),
        ("levels-on-fast", opts.placement.levels_on_fast.to_string()),
        (
            "write-buffer-size",
            opts.memtable.write_buffer_size.to_string(),
        ),
        ("block-cache", opts.cache.block_cache_bytes.to_string()),
        ("wal", format!("{:?}", opts.wal.mode).to_ascii_lowercase()),
    ]
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// CONFIG GET: the settings whose names match any pattern (case-insensitive), as a map.
pub fn config_get(shared: &Shared, patterns: &[Vec<u8>]) -> Reply {
    let patterns: Vec<Vec<u8>> = patterns.iter().map(|p| p.to_ascii_lowercase()).collect();
    let pairs = settings(shared)
        .into_iter()
        .filter(|(name, _)| patterns.iter().any(|p| glob_match(p, name.as_bytes())))
        .map(|(name, value)| (Reply::text(name), Reply::text(value)))
        .collect();
    Reply::Map(pairs)
}

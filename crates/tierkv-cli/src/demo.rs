//! `demo`: a small db_bench. It creates a database, loads random records (fillrandom), flushes,
//! reads random keys back (readrandom), and shows what the tiers did.
//!
//! Keys are 16 random bytes. A value starts with its key (so every read is verified) and is
//! then half random bytes, half zeros: about 2:1 compressible, like db_bench's default.
//! Without `--config`, the engine is sized for a demo (8 MiB memtables and files, a 32 MiB L1)
//! so that a few hundred MiB already reach the capacity tier; the global flags still apply.

use crate::cli::{DemoArgs, EngineArgs};
use crate::errors::OK;
use crate::kv::write_options;
use crate::open::OpenMode;
use crate::progress::Progress;
use crate::text::human_bytes;
use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::io::Write;
use std::time::Instant;
use tierkv::{Db, Options, ReadOptions, Stats, WriteBatch};

const KEY_LEN: usize = 16;

/// `demo`: create, load, flush, read back, then report throughput and what the tiers did.
pub fn demo(engine: &EngineArgs, args: &DemoArgs, out: &mut dyn Write) -> Result<u8> {
    let default_tiers = engine.tiers.is_empty() && engine.config.is_none();
    if args.replace || default_tiers {
        remove_previous_run(&engine.options(demo_options())?, out)?;
    }
    let db = engine
        .open_with(demo_options(), OpenMode::CreateNew)
        .map_err(explain_existing)?;
    let seed = args.seed.unwrap_or_else(rand::random);
    write_header(&db, args, seed, out)?;
    let keys = load_phase(&db, args, seed, out)?;
    let start = Instant::now();
    db.flush().context("flush failed")?;
    writeln!(out, "flush:  {:.2} s", start.elapsed().as_secs_f64())?;
    read_phase(&db, args, &keys, seed, out)?;
    let stats = db.stats();
    writeln!(out)?;
    write_tier_summary(&stats, out)?;
    writeln!(out, "\n{stats}")?;
    Ok(OK)
}

/// Engine options sized so a demo of a few hundred MiB shows every level and both tiers.
fn demo_options() -> Options {
    let mut opts = Options::default();
    opts.memtable.write_buffer_size = 8 << 20;
    opts.compaction.target_file_size = 8 << 20;
    opts.compaction.max_bytes_for_level_base = 32 << 20;
    opts
}

/// Deletes the tier directories of an earlier demo run. A directory that is not a tierkv tier
/// (no identity file) but holds files is left alone and reported.
fn remove_previous_run(opts: &Options, out: &mut dyn Write) -> Result<()> {
    let fs = tierkv::env::PosixFs::new();
    for tier in &opts.tiers {
        let dir = &tier.path;
        if !dir.exists() {
            continue;
        }
        let is_tier = tierkv::inspect::read_identity(&fs, dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .is_some();
        let is_empty = std::fs::read_dir(dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .next()
            .is_none();
        if is_empty {
            continue;
        }
        if !is_tier {
            bail!(
                "{} holds files but is not a tierkv tier directory; not removing it",
                dir.display()
            );
        }
        writeln!(
            out,
            "removing the previous demo database's tier {}",
            dir.display()
        )?;
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(())
}

/// Adds what to do when the demo's directories already hold a database.
fn explain_existing(err: anyhow::Error) -> anyhow::Error {
    let exists = err
        .chain()
        .any(|c| matches!(c.downcast_ref(), Some(tierkv::Error::AlreadyExists(_))));
    if exists {
        err.context(
            "demo creates a new database: pass --replace to remove the old one, or --tier with \
             new directories",
        )
    } else {
        err
    }
}

fn write_header(db: &Db, args: &DemoArgs, seed: u64, out: &mut dyn Write) -> Result<()> {
    let o = db.options();
    let tiers: Vec<String> = o
        .tiers
        .iter()
        .map(|t| format!("{}={}", t.name, t.path.display()))
        .collect();
    writeln!(
        out,
        "tierkv demo: {} records ({KEY_LEN}-byte keys, {}-byte values), {} random reads, seed {seed}",
        args.records, args.value_size, args.reads
    )?;
    writeln!(
        out,
        "tiers: {}; levels on fast tier: {}; memtable {}, compression {}",
        tiers.join(", "),
        o.placement.levels_on_fast,
        human_bytes(o.memtable.write_buffer_size as u64),
        o.table.compression
    )?;
    // NB: stdout is buffered; show the header before the progress bar starts on stderr.
    out.flush()?;
    Ok(())
}

/// A record's value for `key`: the key, then half random bytes, then zeros.
fn fill_value(value: &mut [u8], key: &[u8; KEY_LEN], rng: &mut SmallRng) {
    let head = value.len().min(KEY_LEN);
    value[..head].copy_from_slice(&key[..head]);
    let random_end = head + (value.len() - head) / 2;
    rng.fill_bytes(&mut value[head..random_end]);
    value[random_end..].fill(0);
}

/// Writes `--records` random records; returns their keys for the read phase.
fn load_phase(
    db: &Db,
    args: &DemoArgs,
    seed: u64,
    out: &mut dyn Write,
) -> Result<Vec<[u8; KEY_LEN]>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let wopts = write_options(args.sync);
    let mut keys = Vec::with_capacity(args.records as usize);
    let mut value = vec![0u8; args.value_size];
    let mut batch = WriteBatch::new();
    let mut progress = Progress::new("load", args.records);
    let start = Instant::now();
    for _ in 0..args.records {
        let key: [u8; KEY_LEN] = rng.gen();
        fill_value(&mut value, &key, &mut rng);
        batch.put(key, &value);
        keys.push(key);
        if batch.len() as u64 >= args.batch {
            db.write(&wopts, std::mem::take(&mut batch))?;
            progress.inc(args.batch);
        }
    }
    if !batch.is_empty() {
        progress.inc(batch.len() as u64);
        db.write(&wopts, batch)?;
    }
    progress.finish();
    let bytes = args.records * (KEY_LEN + args.value_size) as u64;
    write_rate(out, "load", "writes", args.records, bytes, start)?;
    Ok(keys)
}

/// Reads `--reads` random loaded keys and checks each value.
fn read_phase(
    db: &Db,
    args: &DemoArgs,
    keys: &[[u8; KEY_LEN]],
    seed: u64,
    out: &mut dyn Write,
) -> Result<()> {
    if keys.is_empty() || args.reads == 0 {
        return Ok(());
    }
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let ropts = ReadOptions::default();
    let mut progress = Progress::new("read", args.reads);
    let mut bytes = 0u64;
    let start = Instant::now();
    for _ in 0..args.reads {
        let key = &keys[rng.gen_range(0..keys.len())];
        let Some(value) = db.get(&ropts, key)? else {
            bail!(
                "demo read lost a key it wrote: {}",
                crate::text::to_hex(key)
            );
        };
        check_value(key, &value, args.value_size)?;
        bytes += (KEY_LEN + value.len()) as u64;
        progress.inc(1);
    }
    progress.finish();
    write_rate(out, "reads", "gets", args.reads, bytes, start)?;
    writeln!(out, "        every key found, every value verified")?;
    Ok(())
}

fn check_value(key: &[u8; KEY_LEN], value: &[u8], size: usize) -> Result<()> {
    let head = size.min(KEY_LEN);
    if value.len() != size || value[..head] != key[..head] {
        bail!(
            "demo read a wrong value for key {}: {} bytes, starting {}",
            crate::text::to_hex(key),
            value.len(),
            crate::text::to_hex(&value[..value.len().min(KEY_LEN)])
        );
    }
    Ok(())
}

fn write_rate(
    out: &mut dyn Write,
    phase: &str,
    unit: &str,
    ops: u64,
    bytes: u64,
    start: Instant,
) -> Result<()> {
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    writeln!(
        out,
        "{phase:<6}  {ops} {unit} in {secs:.2} s: {:.0} ops/s, {:.1} MB/s",
        ops as f64 / secs,
        bytes as f64 / 1e6 / secs
    )?;
    out.flush()?;
    Ok(())
}

/// One line per tier: bytes written, bytes held and which levels it holds.
fn write_tier_summary(stats: &Stats, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{:<10} {:>10} {:>10} {:>10}  levels held",
        "tier", "written", "of it WAL", "holds"
    )?;
    for t in &stats.tiers {
        let levels: Vec<String> = stats
            .levels
            .iter()
            .filter_map(|l| {
                let (_, files, bytes) = l.by_tier.iter().find(|(name, ..)| *name == t.name)?;
                Some(format!(
                    "L{} ({files} files, {})",
                    l.level,
                    human_bytes(*bytes)
                ))
            })
            .collect();
        writeln!(
            out,
            "{:<10} {:>10} {:>10} {:>10}  {}",
            t.name,
            human_bytes(t.bytes_written()),
            human_bytes(t.wal_bytes_written),
            human_bytes(t.bytes_used),
            if levels.is_empty() {
                "-".into()
            } else {
                levels.join(", ")
            }
        )?;
    }
    writeln!(
        out,
        "write amplification: {:.2} (bytes written to all tiers / user bytes)",
        stats.write_amplification()
    )?;
    Ok(())
}

//! Reports: the JSON record of a run, the human table, and the ratio table of `--compare`.

use crate::engine::EngineCounters;
use crate::runner::PhaseResult;
use crate::workload::OpKind;
use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// CPU seconds used by this process (user, system), from `getrusage`.
pub fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// A block device's `(bytes read, bytes written)` from `/sys/block/DEV/stat`.
pub fn device_bytes(dev: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/sys/block/{dev}/stat")).ok()?;
    let f: Vec<u64> = text
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    Some((f.get(2)? * 512, f.get(6)? * 512))
}

fn micros(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

fn latency_json(h: &Histogram<u64>) -> Value {
    json!({
        "count": h.len(),
        "mean": h.mean() / 1000.0,
        "p50": micros(h, 0.5),
        "p90": micros(h, 0.9),
        "p99": micros(h, 0.99),
        "p999": micros(h, 0.999),
        "max": h.max() as f64 / 1000.0,
    })
}

/// Per-tier figures measured outside the engine.
#[derive(Debug, Clone, Default)]
pub struct TierMeasure {
    /// Tier name.
    pub name: String,
    /// Bytes of files in the tier directory after the run.
    pub bytes_used: u64,
    /// Most bytes the file system allocated in the tier directory at any moment of load and
    /// run (`space::PeakWatch`).
    pub peak_bytes_allocated: u64,
    /// Device counters during load+run, when a device was named for the tier.
    pub device: Option<(u64, u64)>,
    /// Bytes of table files in the tier directory after the run (`space::table_bytes`).
    pub table_bytes: u64,
}

/// Everything known about one engine's run.
pub struct RunRecord<'a> {
    /// Engine spec.
    pub engine: &'a str,
    /// Workload name.
    pub workload: String,
    /// Client threads.
    pub threads: usize,
    /// Requests in flight per thread that the run used (1 = synchronous calls).
    pub inflight: usize,
    /// Requests in flight per thread that `--inflight` asked for.
    pub inflight_requested: usize,
    /// Why `inflight` differs from `inflight_requested`.
    pub inflight_note: Option<&'a str>,
    /// The profile's placement promise checked against the directories (`space::placement_check`).
    pub placement_check: Option<String>,
    /// Most point reads per multi-get (1 = one get per read).
    pub multiget: usize,
    /// Unmeasured operations run between the load and the run phase.
    pub warmup_ops: u64,
    /// Whether writes were synced.
    pub sync: bool,
    /// Load phase, if any.
    pub load: Option<&'a PhaseResult>,
    /// Run phase.
    pub run: &'a PhaseResult,
    /// Engine counters at the end.
    pub counters: &'a EngineCounters,
    /// Measured tiers.
    pub tiers: &'a [TierMeasure],
    /// CPU seconds (user, sys) of the run phase.
    pub cpu: (f64, f64),
    /// Bytes the engine wrote to each tier during the run phase alone (its counters before the
    /// run subtracted), fastest first.
    pub run_tier_written: Vec<u64>,
}

/// What an `mget` latency sample stands for, when reads were batched.
fn multiget_latency_note(multiget: usize) -> Option<String> {
    (multiget > 1).then(|| {
        format!(
            "mget latencies are per multi-get of up to {multiget} keys; ops and ops/s count keys"
        )
    })
}

/// Each zoned tier's zone file system figures, for the JSON record.
fn zoned_tiers_json(tiers: &[(String, tierkv::ZoneFsStats)]) -> Value {
    let mut out = Map::new();
    for (name, z) in tiers {
        out.insert(
            name.clone(),
            json!({
                "engine_bytes": z.engine_bytes,
                "data_bytes": z.data_bytes,
                "padding_bytes": z.padding_bytes,
                "gc_bytes": z.gc_bytes,
                "meta_bytes": z.meta_bytes,
                "zone_write_amplification": z.write_amplification(),
                "live_bytes": z.live_bytes,
                "zones_free": z.zones_free,
                "zones_active": z.zones_active,
                "zones_full": z.zones_full,
                "gc_zones_reclaimed": z.gc_zones_reclaimed,
                "gc_background_zones": z.gc_background_zones,
                "gc_foreground_zones": z.gc_foreground_zones,
                "gc_background_bytes": z.gc_background_bytes,
                "gc_foreground_bytes": z.gc_foreground_bytes,
                "resets": z.resets,
            }),
        );
    }
    Value::Object(out)
}

/// One line per zoned tier: zone write amplification, garbage collection, zones.
fn print_zoned_tiers(tiers: &[(String, tierkv::ZoneFsStats)]) {
    for (name, z) in tiers {
        println!(
            "  tables on zones ({name}): zone write amplification {:.3} ({} zone bytes for {} \
             engine bytes: {} padding, {} GC, {} journal); GC reclaimed {} zones ({} background, \
             {} foreground); {} resets; zones {} free, {} active, {} full",
            z.write_amplification(),
            z.data_bytes + z.gc_bytes + z.meta_bytes,
            z.engine_bytes,
            z.padding_bytes,
            z.gc_bytes,
            z.meta_bytes,
            z.gc_zones_reclaimed,
            z.gc_background_zones,
            z.gc_foreground_zones,
            z.resets,
            z.zones_free,
            z.zones_active,
            z.zones_full,
        );
    }
}

impl RunRecord<'_> {
    /// Device bytes written over user bytes written (load + run); engine counters are used
    /// where no device counters exist.
    pub fn write_amplification(&self) -> f64 {
        let user = self.run.user_bytes_written + self.load.map_or(0, |l| l.user_bytes_written);
        let written: u64 = self
            .tiers
            .iter()
            .zip(&self.counters.tiers)
            .map(|(m, c)| m.device.map_or(c.bytes_written, |d| d.1))
            .sum();
        if user == 0 {
            0.0
        } else {
            written as f64 / user as f64
        }
    }

    /// Bytes the engine wrote to each tier (WAL, flushes, compactions, hot-store slabs) over
    /// the user bytes written (load + run), fastest tier first: what each device's wear and
    /// write bandwidth pay per byte the application wrote.
    pub fn written_per_user_byte(&self) -> Vec<f64> {
        let user = self.run.user_bytes_written + self.load.map_or(0, |l| l.user_bytes_written);
        self.counters
            .tiers
            .iter()
            .map(|c| c.bytes_written as f64 / user.max(1) as f64)
            .collect()
    }

    /// Bytes written to each tier during the run phase over the run phase's user bytes: the
    /// steady state, without the load's compactions.
    pub fn run_written_per_user_byte(&self) -> Vec<f64> {
        let user = self.run.user_bytes_written.max(1) as f64;
        self.run_tier_written
            .iter()
            .map(|&w| w as f64 / user)
            .collect()
    }

    /// The JSON record (`--json`).
    pub fn to_json(&self) -> Value {
        let mut latency = Map::new();
        latency.insert("all".into(), latency_json(&self.run.all_latency()));
        for kind in OpKind::ALL {
            if let Some(h) = self.run.latency.get(&kind) {
                latency.insert(kind.name().into(), latency_json(h));
            }
        }
        let mut tiers = Map::new();
        let per_user_byte = self.written_per_user_byte();
        let run_per_user_byte = self.run_written_per_user_byte();
        for (((m, c), per_user), run_per_user) in self
            .tiers
            .iter()
            .zip(&self.counters.tiers)
            .zip(per_user_byte)
            .zip(run_per_user_byte)
        {
            let mut t = json!({
                "bytes_written": c.bytes_written,
                "written_per_user_byte": per_user,
                "run_written_per_user_byte": run_per_user,
                "bytes_read": c.bytes_read,
                "bytes_used": m.bytes_used,
                "table_bytes": m.table_bytes,
                "peak_bytes_allocated": m.peak_bytes_allocated,
            });
            if let Some((read, written)) = m.device {
                t["device_bytes_read"] = json!(read);
                t["device_bytes_written"] = json!(written);
            }
            tiers.insert(m.name.clone(), t);
        }
        let wal = self.counters.wal.as_ref();
        let async_api = self.counters.async_api.as_ref();
        let zoned = wal.and_then(|w| w.zoned.as_ref()).map(|z| {
            json!({
                "zone_replacements": z.zone_replacements,
                "zones_finished": z.zones_finished,
                "reserved_waits": z.reserved_waits,
                "full_retries": z.full_retries,
                "dummy_appends": z.dummy_appends,
            })
        });
        let mut record = json!({
            "engine": self.engine,
            "workload": self.workload,
            "threads": self.threads,
            "inflight": self.inflight,
            "inflight_requested": self.inflight_requested,
            "inflight_note": self.inflight_note,
            "placement_check": self.placement_check,
            "multiget": self.multiget,
            "multiget_batches": self.run.multiget_batches,
            "multiget_keys_per_batch": self.run.keys_per_multiget(),
            "multiget_latency_note": multiget_latency_note(self.multiget),
            "sync": self.sync,
            "warmup_ops": self.warmup_ops,
            "ops": self.run.ops,
            "seconds": self.run.seconds,
            "throughput_ops_per_sec": self.run.throughput(),
            "load": self.load.map(|l| json!({"ops": l.ops, "seconds": l.seconds, "throughput_ops_per_sec": l.throughput()})),
            "latency_us": latency,
            "tiers": tiers,
            "write_amplification": self.write_amplification(),
            "cpu_seconds": {"user": self.cpu.0, "sys": self.cpu.1},
            "cpu_us_per_op": (self.cpu.0 + self.cpu.1) * 1e6 / self.run.ops.max(1) as f64,
            "reads_served": self.counters.reads_served,
            "reads_found": {"found": self.run.found, "attempted": self.run.reads},
            "avg_group_size": self.counters.avg_group_size,
            "stall_seconds": self.counters.stall_seconds,
            "placement": self.counters.placement.as_ref().map(|p| p.0.as_str()),
            "migrations": self.counters.placement.as_ref().map(|p| p.1),
            "wal_io_path": wal.map(|w| w.io_path.as_str()),
            "active_loggers": wal.map(|w| w.active_loggers),
            "wal_runs": wal.map(|w| w.runs),
            "wal_pages": wal.map(|w| w.pages),
            "wal_pages_per_run": wal.and_then(|w| w.pages_per_run()),
            "wal_writes_per_run": wal.and_then(|w| w.writes_per_run()),
            "writes": wal.map(|w| w.writes),
            "wal_cover_syncs": wal.map(|w| w.cover_syncs),
            "async_requests": async_api.map(|a| a.requests),
            "busy_rejections": async_api.map(|a| a.busy_rejections),
            "lucky_reads": async_api.map(|a| a.lucky_reads),
            "client_busy_waits": self.run.busy_waits,
            "client_busy_sleeps": self.run.busy_sleeps,
        });
        record["zoned_wal"] = json!(zoned);
        record["zoned_tiers"] = zoned_tiers_json(&self.counters.zoned_tiers);
        record
    }

    /// The human-readable report.
    pub fn print(&self) {
        println!(
            "== {} on {} ({} threads, inflight {}, multiget {}, sync={})",
            self.engine, self.workload, self.threads, self.inflight, self.multiget, self.sync
        );
        if let Some(note) = self.inflight_note {
            println!("  NOTE: {note}");
        }
        if self.warmup_ops > 0 {
            println!(
                "  warm-up: {} ops before the run, not measured",
                self.warmup_ops
            );
        }
        if let Some(note) = multiget_latency_note(self.multiget) {
            let per_batch = self.run.keys_per_multiget().unwrap_or(0.0);
            println!("  NOTE: {note} ({per_batch:.2} keys per multi-get on average)");
        }
        if let Some(l) = self.load {
            println!(
                "load: {} ops in {:.2} s = {:.0} ops/s",
                l.ops,
                l.seconds,
                l.throughput()
            );
        }
        println!(
            "run:  {} ops in {:.2} s = {:.0} ops/s",
            self.run.ops,
            self.run.seconds,
            self.run.throughput()
        );
        println!(
            "  {:<6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "op", "count", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us"
        );
        let all = self.run.all_latency();
        let rows = std::iter::once(("all", &all)).chain(
            OpKind::ALL
                .iter()
                .filter_map(|k| self.run.latency.get(k).map(|h| (k.name(), h))),
        );
        for (name, h) in rows {
            println!(
                "  {:<6} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                name,
                h.len(),
                micros(h, 0.5),
                micros(h, 0.9),
                micros(h, 0.99),
                micros(h, 0.999),
                h.max() as f64 / 1000.0
            );
        }
        println!(
            "  {:<10} {:>14} {:>14} {:>14} {:>14} {:>16}",
            "tier", "written", "read", "used", "peak", "device written"
        );
        for (m, c) in self.tiers.iter().zip(&self.counters.tiers) {
            let dev = m.device.map_or("-".to_string(), |d| mib(d.1));
            println!(
                "  {:<10} {:>14} {:>14} {:>14} {:>14} {:>16}",
                m.name,
                mib(c.bytes_written),
                mib(c.bytes_read),
                mib(m.bytes_used),
                mib(m.peak_bytes_allocated),
                dev
            );
        }
        let per_user: Vec<String> = self
            .tiers
            .iter()
            .zip(self.written_per_user_byte())
            .map(|(m, w)| format!("{} {w:.2}", m.name))
            .collect();
        let run_per_user: Vec<String> = self
            .tiers
            .iter()
            .zip(self.run_written_per_user_byte())
            .map(|(m, w)| format!("{} {w:.2}", m.name))
            .collect();
        println!(
            "  written per user byte: {} (run phase alone: {})",
            per_user.join(", "),
            run_per_user.join(", ")
        );
        let served: Vec<String> = self
            .counters
            .reads_served
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("  reads served: {}", served.join(", "));
        let tables: Vec<String> = self
            .tiers
            .iter()
            .map(|m| format!("{} {}", m.name, mib(m.table_bytes)))
            .collect();
        println!("  tables found on disk: {}", tables.join(", "));
        if let Some(check) = &self.placement_check {
            println!("  placement check: {check}");
        }
        if self.run.reads > 0 {
            println!("  reads found: {} of {}", self.run.found, self.run.reads);
        }
        println!(
            "  write amplification {:.2}; cpu user {:.2} s sys {:.2} s ({:.1} us/op)",
            self.write_amplification(),
            self.cpu.0,
            self.cpu.1,
            (self.cpu.0 + self.cpu.1) * 1e6 / self.run.ops.max(1) as f64
        );
        if let Some(g) = self.counters.avg_group_size {
            println!("  average WAL group size {g:.2}");
        }
        if let Some(s) = self.counters.stall_seconds {
            println!("  write stalls {s:.3} s");
        }
        if let Some(w) = &self.counters.wal {
            let per_run = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
            println!(
                "  WAL io path {}; {} active loggers; {} runs, {} pages: {} pages/run, {} writes/run; \
                 {} cover syncs",
                w.io_path,
                w.active_loggers,
                w.runs,
                w.pages,
                per_run(w.pages_per_run()),
                per_run(w.writes_per_run()),
                w.cover_syncs,
            );
            if let Some(z) = &w.zoned {
                println!(
                    "  zoned WAL: {} zone replacements, {} zones finished, {} reserved-zone waits, \
                     {} zone-full retries, {} dummy appends",
                    z.zone_replacements,
                    z.zones_finished,
                    z.reserved_waits,
                    z.full_retries,
                    z.dummy_appends
                );
            }
        }
        print_zoned_tiers(&self.counters.zoned_tiers);
        if let Some(a) = &self.counters.async_api {
            println!(
                "  async: {} requests, {} busy rejections, {} lucky reads; client waited on busy \
                 {} times, slept {} times",
                a.requests,
                a.busy_rejections,
                a.lucky_reads,
                self.run.busy_waits,
                self.run.busy_sleeps
            );
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// Prints the ratio table of `--compare`: each engine against the first.
pub fn print_comparison(records: &[Value]) {
    let Some(base) = records.first() else {
        return;
    };
    let f = |v: &Value, path: &[&str]| number_at(v, path).unwrap_or(0.0);
    println!(
        "\n== comparison (ratios against {})",
        base["engine"].as_str().unwrap_or("?")
    );
    println!(
        "  {:<34} {:>8} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9}",
        "engine",
        "inflight",
        "multiget",
        "ops/s",
        "x tput",
        "x p50",
        "x p99",
        "x WA",
        "x cpu/op",
        "cpu us/op",
        "WAL io",
        "wr/run"
    );
    for r in records {
        let ratio = |path: &[&str]| {
            let b = f(base, path);
            if b > 0.0 {
                format!("{:.2}", f(r, path) / b)
            } else {
                "-".into()
            }
        };
        // An engine that fell back to fewer requests in flight than asked is marked with `*`.
        let inflight = match (r["inflight"].as_u64(), r["inflight_requested"].as_u64()) {
            (Some(used), Some(asked)) if used != asked => format!("{used}*"),
            (Some(used), _) => used.to_string(),
            _ => "-".into(),
        };
        let writes_per_run = r["wal_writes_per_run"]
            .as_f64()
            .map_or("-".into(), |v| format!("{v:.2}"));
        println!(
            "  {:<34} {:>8} {:>8} {:>12.0} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9.1} {:>9} {:>9}",
            r["engine"].as_str().unwrap_or("?"),
            inflight,
            r["multiget"].as_u64().unwrap_or(1),
            f(r, &["throughput_ops_per_sec"]),
            ratio(&["throughput_ops_per_sec"]),
            ratio(&["latency_us", "all", "p50"]),
            ratio(&["latency_us", "all", "p99"]),
            ratio(&["write_amplification"]),
            ratio(&["cpu_us_per_op"]),
            f(r, &["cpu_us_per_op"]),
            r["wal_io_path"].as_str().unwrap_or("-"),
            writes_per_run,
        );
    }
    if records
        .iter()
        .any(|r| r["inflight"].as_u64() != r["inflight_requested"].as_u64())
    {
        println!(
            "  * fewer requests in flight per thread than --inflight asked: the engine has no \
             asynchronous API; with --outstanding equal (the default) it ran that many times the \
             client threads, so both sides kept as many requests outstanding"
        );
    }
    let multiget = base["multiget"].as_u64().unwrap_or(1) as usize;
    if let Some(note) = multiget_latency_note(multiget) {
        println!("  {note}; x p50 and x p99 count each multi-get as one sample");
    }
    print_tail_comparison(records);
}

/// The operation kinds with latencies in `record`, "all" first.
fn latency_kinds(record: &Value) -> Vec<String> {
    let mut kinds = vec!["all".to_string()];
    if let Some(map) = record["latency_us"].as_object() {
        kinds.extend(
            OpKind::ALL
                .iter()
                .map(|k| k.name().to_string())
                .filter(|k| map.contains_key(k)),
        );
    }
    kinds
}

/// Per operation: each engine's p99.9 and max latency and their ratios against the first
/// engine, where the worst write latencies of a WAL show.
fn print_tail_comparison(records: &[Value]) {
    let Some(base) = records.first() else {
        return;
    };
    println!(
        "\n== tail latency per operation (ratios against {})",
        base["engine"].as_str().unwrap_or("?")
    );
    println!(
        "  {:<34} {:<6} {:>12} {:>12} {:>9} {:>9}",
        "engine", "op", "p99.9 us", "max us", "x p99.9", "x max"
    );
    for kind in latency_kinds(base) {
        for r in records {
            let at = |v: &Value, q: &str| number_at(v, &["latency_us", &kind, q]);
            let ratio = |q: &str| match (at(r, q), at(base, q)) {
                (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
                _ => "-".into(),
            };
            println!(
                "  {:<34} {:<6} {:>12.1} {:>12.1} {:>9} {:>9}",
                r["engine"].as_str().unwrap_or("?"),
                kind,
                at(r, "p999").unwrap_or(0.0),
                at(r, "max").unwrap_or(0.0),
                ratio("p999"),
                ratio("max"),
            );
        }
    }
}

/// The number at `path` (object keys) in a JSON record, if there is one.
fn number_at(record: &Value, path: &[&str]) -> Option<f64> {
    path.iter().fold(record, |v, key| &v[*key]).as_f64()
}

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// After `--rounds N`: each engine's median throughput and p99 over the rounds, the spread of
/// its throughput, and the medians' ratios against the first engine of the list.
pub fn print_rounds_summary(engines: &[String], records: &[Value]) {
    let series = |engine: &str, path: &[&str]| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r["engine"].as_str() == Some(engine))
            .filter_map(|r| number_at(r, path))
            .collect()
    };
    let tput = |e: &str| series(e, &["throughput_ops_per_sec"]);
    let p99 = |e: &str| series(e, &["latency_us", "all", "p99"]);
    let Some(base) = engines.first() else {
        return;
    };
    let (base_tput, base_p99) = (median(tput(base)), median(p99(base)));
    let ratio = |v: Option<f64>, b: Option<f64>| match (v, b) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:.2}", v / b),
        _ => "-".into(),
    };
    println!("\n== medians over the rounds (ratios against {base})");
    println!(
        "  {:<40} {:>6} {:>12} {:>12} {:>12} {:>8} {:>10} {:>8}",
        "engine", "runs", "ops/s", "min", "max", "x tput", "p99 us", "x p99"
    );
    for e in engines {
        let t = tput(e);
        let (lo, hi) = t.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
        let (m, p) = (median(t.clone()), median(p99(e)));
        println!(
            "  {:<40} {:>6} {:>12.0} {:>12.0} {:>12.0} {:>8} {:>10.1} {:>8}",
            e,
            t.len(),
            m.unwrap_or(0.0),
            lo,
            hi,
            ratio(m, base_tput),
            p.unwrap_or(0.0),
            ratio(p, base_p99),
        );
    }
    let Some(first) = records.iter().find(|r| r["engine"].as_str() == Some(base)) else {
        return;
    };
    println!("\n== median tail latency per operation over the rounds (ratios against {base})");
    println!(
        "  {:<40} {:<6} {:>12} {:>12} {:>9} {:>9}",
        "engine", "op", "p99.9 us", "max us", "x p99.9", "x max"
    );
    for kind in latency_kinds(first) {
        let tail = |e: &str, q: &str| median(series(e, &["latency_us", &kind, q]));
        for e in engines {
            let (p999, max) = (tail(e, "p999"), tail(e, "max"));
            println!(
                "  {:<40} {:<6} {:>12.1} {:>12.1} {:>9} {:>9}",
                e,
                kind,
                p999.unwrap_or(0.0),
                max.unwrap_or(0.0),
                ratio(p999, tail(base, "p999")),
                ratio(max, tail(base, "max")),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0]), Some(3.0));
        assert_eq!(median(vec![5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}

//! Drives an engine through a load phase and a run phase with N client threads, recording the
//! latency of every operation in per-kind HDR histograms.

use crate::engine::Engine;
use crate::workload::{
    fill_value, format_key, load_order, thread_rng, Distribution, KeyChooser, OpKind, ValueSizes,
    Workload,
};
use anyhow::Result;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The workload.
    pub workload: Workload,
    /// Records loaded (and key space of random fills).
    pub records: u64,
    /// Operations of the run phase (`None`: until `duration`, or `records` if neither).
    pub ops: Option<u64>,
    /// Time limit of the run phase.
    pub duration: Option<Duration>,
    /// Client threads.
    pub threads: usize,
    /// Key length in bytes.
    pub key_size: usize,
    /// Value sizes.
    pub values: ValueSizes,
    /// Key distribution of the run phase.
    pub distribution: Distribution,
    /// Base seed.
    pub seed: u64,
    /// Keys per scan (scanrandom, readseq); YCSB-E draws 1..=scan_length uniformly.
    pub scan_length: usize,
    /// Show a progress bar.
    pub progress: bool,
}

/// Latencies and counts of one phase.
pub struct PhaseResult {
    /// Operations completed.
    pub ops: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Latency in nanoseconds per operation kind.
    pub latency: BTreeMap<OpKind, Histogram<u64>>,
    /// Key and value bytes written.
    pub user_bytes_written: u64,
    /// Reads that found their key.
    pub found: u64,
    /// Reads attempted.
    pub reads: u64,
}

impl PhaseResult {
    fn empty() -> Self {
        PhaseResult {
            ops: 0,
            seconds: 0.0,
            latency: BTreeMap::new(),
            user_bytes_written: 0,
            found: 0,
            reads: 0,
        }
    }

    fn merge(&mut self, other: PhaseResult) {
        self.ops += other.ops;
        self.user_bytes_written += other.user_bytes_written;
        self.found += other.found;
        self.reads += other.reads;
        for (kind, h) in other.latency {
            self.latency
                .entry(kind)
                .or_insert_with(new_histogram)
                .add(&h)
                .expect("same histogram bounds");
        }
    }

    /// All operations' latencies together.
    pub fn all_latency(&self) -> Histogram<u64> {
        let mut all = new_histogram();
        for h in self.latency.values() {
            all.add(h).expect("same histogram bounds");
        }
        all
    }

    /// Operations per second.
    pub fn throughput(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ops as f64 / self.seconds
        } else {
            0.0
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Shared state of the client threads of one phase.
struct Shared {
    done_ops: AtomicU64,
    next_insert: AtomicU64,
    stop: AtomicBool,
}

/// Inserts every record once, in a deterministic random order, split across the threads.
pub fn load(engine: &dyn Engine, spec: &RunSpec) -> Result<PhaseResult> {
    let order = load_order(spec.records, spec.seed);
    let shared = Shared {
        done_ops: AtomicU64::new(0),
        next_insert: AtomicU64::new(spec.records),
        stop: AtomicBool::new(false),
    };
    let chunk = order.len().div_ceil(spec.threads.max(1)).max(1);
    run_threads(engine, spec, &shared, "load", spec.records, |t, ctx| {
        let keys = order.chunks(chunk).nth(t).unwrap_or(&[]);
        let mut rng = thread_rng(spec.seed ^ 0x10ad, t);
        let mut result = PhaseResult::empty();
        let (mut key, mut value) = (Vec::new(), Vec::new());
        for &k in keys {
            format_key(k, spec.key_size, &mut key);
            fill_value(&mut rng, &spec.values, &mut value);
            let start = Instant::now();
            ctx.engine.put(&key, &value)?;
            record(&mut result, OpKind::Insert, start);
            result.user_bytes_written += (key.len() + value.len()) as u64;
            ctx.shared.done_ops.fetch_add(1, Ordering::Relaxed);
        }
        Ok(result)
    })
}

/// The run phase of the workload.
pub fn run(engine: &dyn Engine, spec: &RunSpec) -> Result<PhaseResult> {
    let total = match (spec.ops, spec.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => spec.records,
    };
    let shared = Shared {
        done_ops: AtomicU64::new(0),
        next_insert: AtomicU64::new(if spec.workload.needs_load() {
            spec.records
        } else {
            0
        }),
        stop: AtomicBool::new(false),
    };
    let per_thread = total / spec.threads as u64;
    let extra = total % spec.threads as u64;
    let deadline = spec.duration.map(|d| Instant::now() + d);
    run_threads(engine, spec, &shared, "run", total, |t, ctx| {
        let quota = per_thread + u64::from((t as u64) < extra);
        client(ctx, t, quota, total, deadline)
    })
}

struct ClientCtx<'a> {
    engine: &'a dyn Engine,
    spec: &'a RunSpec,
    shared: &'a Shared,
}

/// One client thread of the run phase.
fn client(
    ctx: &ClientCtx<'_>,
    thread: usize,
    quota: u64,
    total: u64,
    deadline: Option<Instant>,
) -> Result<PhaseResult> {
    let spec = ctx.spec;
    let mut rng = thread_rng(spec.seed, thread);
    let dist = spec
        .workload
        .forced_distribution(zipf_theta(spec))
        .unwrap_or(spec.distribution);
    let start_key = match spec.workload {
        Workload::FillSeq => thread as u64 * quota,
        _ => (spec.records / spec.threads as u64) * thread as u64,
    };
    let mut chooser = KeyChooser::new(dist, spec.records.max(1), start_key);
    let mut result = PhaseResult::empty();
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < quota {
        if i % 64 == 0
            && (ctx.shared.stop.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| Instant::now() >= d))
        {
            break;
        }
        let done = ctx.shared.done_ops.load(Ordering::Relaxed);
        let fraction = match deadline {
            Some(_) if total == u64::MAX => elapsed_fraction(spec, deadline),
            _ => done as f64 / total as f64,
        };
        let kind = spec.workload.mix(fraction).pick(&mut rng);
        let newest = ctx
            .shared
            .next_insert
            .load(Ordering::Relaxed)
            .saturating_sub(1);
        let index = match kind {
            OpKind::Insert => ctx.shared.next_insert.fetch_add(1, Ordering::Relaxed),
            _ => chooser.next(&mut rng, newest),
        };
        format_key(index, spec.key_size, &mut key);
        let start = Instant::now();
        match kind {
            OpKind::Read => {
                result.reads += 1;
                result.found += u64::from(ctx.engine.get(&key)?);
            }
            OpKind::Update | OpKind::Insert => {
                fill_value(&mut rng, &spec.values, &mut value);
                ctx.engine.put(&key, &value)?;
                result.user_bytes_written += (key.len() + value.len()) as u64;
            }
            OpKind::Scan => {
                let n = scan_len(spec, &mut rng);
                ctx.engine.scan(&key, n)?;
            }
            OpKind::ReadModifyWrite => {
                result.reads += 1;
                result.found += u64::from(ctx.engine.get(&key)?);
                fill_value(&mut rng, &spec.values, &mut value);
                ctx.engine.put(&key, &value)?;
                result.user_bytes_written += (key.len() + value.len()) as u64;
            }
        }
        record(&mut result, kind, start);
        ctx.shared.done_ops.fetch_add(1, Ordering::Relaxed);
        i += 1;
    }
    Ok(result)
}

fn zipf_theta(spec: &RunSpec) -> f64 {
    match spec.distribution {
        Distribution::Zipfian(t) | Distribution::Latest(t) => t,
        _ => 0.99,
    }
}

fn elapsed_fraction(spec: &RunSpec, deadline: Option<Instant>) -> f64 {
    match (spec.duration, deadline) {
        (Some(d), Some(end)) => {
            let left = end.saturating_duration_since(Instant::now()).as_secs_f64();
            1.0 - left / d.as_secs_f64()
        }
        _ => 0.0,
    }
}

fn scan_len(spec: &RunSpec, rng: &mut impl rand::Rng) -> usize {
    match spec.workload {
        Workload::Ycsb(4) => rng.gen_range(1..=spec.scan_length.max(1)),
        _ => spec.scan_length,
    }
}

fn record(result: &mut PhaseResult, kind: OpKind, start: Instant) {
    let nanos = start.elapsed().as_nanos().clamp(1, 3_600_000_000_000) as u64;
    result
        .latency
        .entry(kind)
        .or_insert_with(new_histogram)
        .record(nanos)
        .expect("latency within histogram bounds");
    result.ops += 1;
}

/// Runs `body` on `spec.threads` scoped threads with a progress bar, and merges their results.
fn run_threads<F>(
    engine: &dyn Engine,
    spec: &RunSpec,
    shared: &Shared,
    phase: &str,
    total: u64,
    body: F,
) -> Result<PhaseResult>
where
    F: Fn(usize, &ClientCtx<'_>) -> Result<PhaseResult> + Sync,
{
    let ctx = ClientCtx {
        engine,
        spec,
        shared,
    };
    let started = Instant::now();
    let finished = AtomicBool::new(false);
    let mut merged = PhaseResult::empty();
    let outcome: Result<()> = std::thread::scope(|s| {
        let progress = spec
            .progress
            .then(|| s.spawn(|| show_progress(phase, total, shared, &finished, spec.duration)));
        let handles: Vec<_> = (0..spec.threads)
            .map(|t| {
                let (body, ctx) = (&body, &ctx);
                s.spawn(move || {
                    let r = body(t, ctx);
                    if r.is_err() {
                        ctx.shared.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut first_error = None;
        for h in handles {
            match h.join().expect("client thread panicked") {
                Ok(r) => merged.merge(r),
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        finished.store(true, Ordering::Relaxed);
        if let Some(p) = progress {
            p.join().expect("progress thread panicked");
        }
        first_error.map_or(Ok(()), Err)
    });
    outcome?;
    merged.seconds = started.elapsed().as_secs_f64();
    Ok(merged)
}

/// A progress bar with live ops/s, shown once a phase has run for two seconds.
fn show_progress(
    phase: &str,
    total: u64,
    shared: &Shared,
    finished: &AtomicBool,
    duration: Option<Duration>,
) {
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut last = (Instant::now(), 0u64);
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        if started.elapsed() < Duration::from_secs(2) {
            continue;
        }
        let b = bar.get_or_insert_with(|| new_bar(phase, total, duration));
        let done = shared.done_ops.load(Ordering::Relaxed);
        let rate = (done - last.1) as f64 / last.0.elapsed().as_secs_f64();
        last = (Instant::now(), done);
        match duration {
            Some(d) if total == u64::MAX => {
                b.set_position(started.elapsed().as_secs().min(d.as_secs()))
            }
            _ => b.set_position(done),
        }
        b.set_message(format!("{rate:>10.0} ops/s"));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

fn new_bar(phase: &str, total: u64, duration: Option<Duration>) -> ProgressBar {
    let (len, unit) = match duration {
        Some(d) if total == u64::MAX => (d.as_secs(), "s"),
        _ => (total, "ops"),
    };
    let bar = ProgressBar::new(len);
    let template = format!("{phase:>4} [{{bar:40}}] {{pos}}/{{len}} {unit} {{msg}} (eta {{eta}})");
    bar.set_style(
        ProgressStyle::with_template(&template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

//! Drives an engine through a load phase and a run phase with N client threads, recording the
//! latency of every operation in per-kind HDR histograms.
//!
//! With `inflight = 1` every client thread calls the engine synchronously. With `inflight = N >
//! 1` each thread drives the engine's asynchronous API through a [`Window`] of up to N requests
//! in flight; an operation's latency runs from its submission to the moment the thread sees it
//! complete.
//!
//! With `multiget = N > 1` each client thread gathers up to N consecutive point reads into one
//! multi-get (see [`ReadBatcher`]); a multi-get is one latency sample (kind `mget`) and counts
//! as N operations.

use crate::engine::{AsyncOp, Engine, Outcome, Pending, Submitted};
use crate::workload::{
    fill_value, format_key, load_order, thread_rng, Distribution, KeyChooser, OpKind, ValueSizes,
    Workload,
};
use anyhow::Result;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::{BTreeMap, VecDeque};
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
    /// Requests in flight per client thread (1 = synchronous calls).
    pub inflight: usize,
    /// Most point reads a client issues as one multi-get (1 = one `get` per read).
    pub multiget: usize,
    /// Show a progress bar.
    pub progress: bool,
    /// Report every stall of at least this long (no operation completing) with the kernel
    /// stacks of the process's threads (see [`watch_stalls`]).
    pub stall_report: Option<Duration>,
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
    /// Submissions refused with `Busy` that the client answered by waiting for its oldest
    /// request.
    pub busy_waits: u64,
    /// Submissions refused with `Busy` while the client had nothing in flight (it slept).
    pub busy_sleeps: u64,
    /// Multi-gets issued (each one latency sample of kind `mget`).
    pub multiget_batches: u64,
    /// Keys read through multi-gets.
    pub multiget_keys: u64,
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
            busy_waits: 0,
            busy_sleeps: 0,
            multiget_batches: 0,
            multiget_keys: 0,
        }
    }

    fn merge(&mut self, other: PhaseResult) {
        self.ops += other.ops;
        self.user_bytes_written += other.user_bytes_written;
        self.found += other.found;
        self.reads += other.reads;
        self.busy_waits += other.busy_waits;
        self.busy_sleeps += other.busy_sleeps;
        self.multiget_batches += other.multiget_batches;
        self.multiget_keys += other.multiget_keys;
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

    /// Average keys per multi-get, if any was issued.
    pub fn keys_per_multiget(&self) -> Option<f64> {
        (self.multiget_batches > 0)
            .then(|| self.multiget_keys as f64 / self.multiget_batches as f64)
    }

    /// Operations per second (a multi-get counts as one operation per key).
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
        if spec.inflight > 1 {
            let mut window = Window::new(ctx, spec.inflight);
            for &k in keys {
                format_key(k, spec.key_size, &mut key);
                fill_value(&mut rng, &spec.values, &mut value);
                window.make_room(&mut result)?;
                let op = AsyncOp::Put {
                    key: &key,
                    value: &value,
                };
                window.submit(&mut result, OpKind::Insert, op, Stage::Final)?;
            }
            window.drain(&mut result)?;
            return Ok(result);
        }
        for &k in keys {
            format_key(k, spec.key_size, &mut key);
            fill_value(&mut rng, &spec.values, &mut value);
            let start = Instant::now();
            ctx.engine.put(&key, &value)?;
            record(&mut result, OpKind::Insert, start, 1);
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
        if spec.inflight > 1 {
            client_async(ctx, t, quota, total, deadline)
        } else {
            client(ctx, t, quota, total, deadline)
        }
    })
}

/// A client thread's random source and key chooser: the same for the same seed and thread,
/// whichever API the client drives.
fn client_draws(spec: &RunSpec, thread: usize, quota: u64) -> (rand::rngs::SmallRng, KeyChooser) {
    let rng = thread_rng(spec.seed, thread);
    let dist = spec
        .workload
        .forced_distribution(zipf_theta(spec))
        .unwrap_or(spec.distribution);
    let start_key = match spec.workload {
        Workload::FillSeq => thread as u64 * quota,
        _ => (spec.records / spec.threads as u64) * thread as u64,
    };
    (rng, KeyChooser::new(dist, spec.records.max(1), start_key))
}

/// True once the run is stopped or past its deadline.
fn should_stop(ctx: &ClientCtx<'_>, deadline: Option<Instant>) -> bool {
    ctx.shared.stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d)
}

/// Draws a client's next operation by the workload's mix at the run's progress, and writes
/// its key into `key`.
fn draw_op(
    ctx: &ClientCtx<'_>,
    (rng, chooser): (&mut rand::rngs::SmallRng, &mut KeyChooser),
    total: u64,
    deadline: Option<Instant>,
    key: &mut Vec<u8>,
) -> OpKind {
    let spec = ctx.spec;
    let done = ctx.shared.done_ops.load(Ordering::Relaxed);
    let fraction = match deadline {
        Some(_) if total == u64::MAX => elapsed_fraction(spec, deadline),
        _ => done as f64 / total as f64,
    };
    let kind = spec.workload.mix(fraction).pick(rng);
    let newest = ctx
        .shared
        .next_insert
        .load(Ordering::Relaxed)
        .saturating_sub(1);
    let index = match kind {
        OpKind::Insert => ctx.shared.next_insert.fetch_add(1, Ordering::Relaxed),
        _ => chooser.next(rng, newest),
    };
    format_key(index, spec.key_size, key);
    kind
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
    let (mut rng, mut chooser) = client_draws(spec, thread, quota);
    let mut result = PhaseResult::empty();
    let mut batcher = ReadBatcher::new(spec.multiget);
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < quota {
        if i % 64 == 0 && should_stop(ctx, deadline) {
            break;
        }
        let kind = draw_op(ctx, (&mut rng, &mut chooser), total, deadline, &mut key);
        i += 1;
        let issue = batcher.push(kind, &key);
        if let Some(keys) = issue.batch {
            multi_get(ctx, &mut result, &keys)?;
        }
        if issue.single {
            let start = Instant::now();
            single_op(ctx, &mut rng, &mut result, kind, (&key, &mut value))?;
            record(&mut result, kind, start, 1);
            ctx.shared.done_ops.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(keys) = batcher.finish() {
        multi_get(ctx, &mut result, &keys)?;
    }
    Ok(result)
}

/// Runs one drawn operation synchronously (its latency is the caller's to record).
fn single_op(
    ctx: &ClientCtx<'_>,
    rng: &mut rand::rngs::SmallRng,
    result: &mut PhaseResult,
    kind: OpKind,
    (key, value): (&[u8], &mut Vec<u8>),
) -> Result<()> {
    let spec = ctx.spec;
    match kind {
        OpKind::Read => {
            result.reads += 1;
            result.found += u64::from(ctx.engine.get(key)?);
        }
        OpKind::Update | OpKind::Insert => {
            fill_value(rng, &spec.values, value);
            ctx.engine.put(key, value)?;
            result.user_bytes_written += (key.len() + value.len()) as u64;
        }
        OpKind::Scan => {
            let n = scan_len(spec, rng);
            ctx.engine.scan(key, n)?;
        }
        OpKind::ReadModifyWrite => {
            result.reads += 1;
            result.found += u64::from(ctx.engine.get(key)?);
            fill_value(rng, &spec.values, value);
            ctx.engine.put(key, value)?;
            result.user_bytes_written += (key.len() + value.len()) as u64;
        }
        OpKind::MultiGet => unreachable!("workload mixes draw single operations"),
    }
    Ok(())
}

/// Reads `keys` with one synchronous multi-get and records it as one latency sample.
fn multi_get(ctx: &ClientCtx<'_>, result: &mut PhaseResult, keys: &[Vec<u8>]) -> Result<()> {
    let start = Instant::now();
    let found = ctx.engine.multi_get(keys)?;
    let n = keys.len() as u64;
    result.reads += n;
    result.found += found as u64;
    record(result, OpKind::MultiGet, start, n);
    ctx.shared.done_ops.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

/// What a client issues for one drawn operation, in this order.
#[derive(Debug)]
struct Issue {
    /// Point reads to issue first, as one multi-get.
    batch: Option<Vec<Vec<u8>>>,
    /// Whether the drawn operation is then issued on its own (it joined no batch).
    single: bool,
}

/// Gathers a client's consecutive point reads into multi-gets of up to `size` keys. Any other
/// operation first flushes the reads gathered so far, so each client still issues its
/// operations in the order it drew them. With `size` 1 every operation is issued on its own,
/// as without batching.
struct ReadBatcher {
    size: usize,
    keys: Vec<Vec<u8>>,
}

impl ReadBatcher {
    fn new(size: usize) -> Self {
        ReadBatcher {
            size: size.max(1),
            keys: Vec::new(),
        }
    }

    /// Takes the next drawn operation and its key; says what to issue now.
    fn push(&mut self, kind: OpKind, key: &[u8]) -> Issue {
        if kind != OpKind::Read || self.size == 1 {
            return Issue {
                batch: self.finish(),
                single: true,
            };
        }
        self.keys.push(key.to_vec());
        let full = self.keys.len() >= self.size;
        Issue {
            batch: if full { self.finish() } else { None },
            single: false,
        }
    }

    /// The reads gathered and not yet issued, if any (at a flush or the end of the run).
    fn finish(&mut self) -> Option<Vec<Vec<u8>>> {
        if self.keys.is_empty() {
            return None;
        }
        Some(std::mem::replace(
            &mut self.keys,
            Vec::with_capacity(self.size),
        ))
    }
}

/// One client thread of the run phase with up to `spec.inflight` requests in flight (a
/// multi-get is one request). It draws the same operations, keys and values as [`client`] for
/// the same seed and thread.
fn client_async(
    ctx: &ClientCtx<'_>,
    thread: usize,
    quota: u64,
    total: u64,
    deadline: Option<Instant>,
) -> Result<PhaseResult> {
    let spec = ctx.spec;
    let (mut rng, mut chooser) = client_draws(spec, thread, quota);
    let mut result = PhaseResult::empty();
    let mut window = Window::new(ctx, spec.inflight);
    let mut batcher = ReadBatcher::new(spec.multiget);
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < quota {
        if i % 64 == 0 && should_stop(ctx, deadline) {
            break;
        }
        window.make_room(&mut result)?;
        let kind = draw_op(ctx, (&mut rng, &mut chooser), total, deadline, &mut key);
        i += 1;
        let issue = batcher.push(kind, &key);
        if let Some(keys) = issue.batch {
            window.submit_multi_get(&mut result, &keys)?;
            // The multi-get may have taken the room made above.
            window.make_room(&mut result)?;
        }
        if issue.single {
            let (op, stage) = async_op(spec, &mut rng, kind, &key, &mut value);
            window.submit(&mut result, kind, op, stage)?;
        }
    }
    if let Some(keys) = batcher.finish() {
        window.make_room(&mut result)?;
        window.submit_multi_get(&mut result, &keys)?;
    }
    window.drain(&mut result)?;
    Ok(result)
}

/// The first request of one drawn operation, and what follows its completion.
fn async_op<'k>(
    spec: &RunSpec,
    rng: &mut rand::rngs::SmallRng,
    kind: OpKind,
    key: &'k [u8],
    value: &'k mut Vec<u8>,
) -> (AsyncOp<'k>, Stage) {
    match kind {
        OpKind::Read => (AsyncOp::Get { key }, Stage::Final),
        OpKind::Update | OpKind::Insert => {
            fill_value(rng, &spec.values, value);
            let value: &'k [u8] = value;
            (AsyncOp::Put { key, value }, Stage::Final)
        }
        OpKind::Scan => {
            let n = scan_len(spec, rng);
            (AsyncOp::Scan { start: key, n }, Stage::Final)
        }
        OpKind::ReadModifyWrite => {
            // The read goes first; the write is submitted once the read completes.
            fill_value(rng, &spec.values, value);
            let stage = Stage::ThenWrite {
                key: key.to_vec(),
                value: value.clone(),
            };
            (AsyncOp::Get { key }, stage)
        }
        OpKind::MultiGet => unreachable!("workload mixes draw single operations"),
    }
}

/// What follows a request's completion.
enum Stage {
    /// The operation is complete.
    Final,
    /// The read of a read-modify-write: its write (`submit_write`) follows.
    ThenWrite { key: Vec<u8>, value: Vec<u8> },
}

/// A request in flight and the operation it belongs to.
struct InFlight {
    pending: Box<dyn Pending>,
    kind: OpKind,
    /// When the operation's first request was submitted.
    start: Instant,
    /// Key and value bytes the request writes.
    bytes: u64,
    /// Operations the request completes: its keys for a multi-get, else 1.
    ops: u64,
    stage: Stage,
}

/// The second request of an operation, waiting to be submitted.
struct Deferred {
    kind: OpKind,
    start: Instant,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// One client thread's requests in flight, oldest first, at most `depth` of them.
struct Window<'c, 'a> {
    ctx: &'c ClientCtx<'a>,
    depth: usize,
    queue: VecDeque<InFlight>,
    deferred: VecDeque<Deferred>,
}

impl<'c, 'a> Window<'c, 'a> {
    fn new(ctx: &'c ClientCtx<'a>, depth: usize) -> Self {
        Window {
            ctx,
            depth: depth.max(1),
            queue: VecDeque::with_capacity(depth),
            deferred: VecDeque::new(),
        }
    }

    /// Returns once fewer than `depth` requests are in flight and no second request is
    /// waiting: first collects the requests that completed, then waits for the oldest.
    fn make_room(&mut self, result: &mut PhaseResult) -> Result<()> {
        loop {
            if self.queue.len() >= self.depth {
                self.reap_ready(result)?;
            }
            if self.queue.len() >= self.depth {
                self.complete_oldest(result)?;
                continue;
            }
            match self.deferred.pop_front() {
                Some(d) => {
                    let op = AsyncOp::Write {
                        key: &d.key,
                        value: &d.value,
                    };
                    self.submit_at(result, d.kind, op, Stage::Final, d.start)?;
                }
                None => return Ok(()),
            }
        }
    }

    /// Submits an operation's first request; the caller made room.
    fn submit(
        &mut self,
        result: &mut PhaseResult,
        kind: OpKind,
        op: AsyncOp<'_>,
        stage: Stage,
    ) -> Result<()> {
        self.submit_at(result, kind, op, stage, Instant::now())
    }

    /// Submits a multi-get of `keys`; the caller made room.
    fn submit_multi_get(&mut self, result: &mut PhaseResult, keys: &[Vec<u8>]) -> Result<()> {
        let op = AsyncOp::MultiGet { keys };
        self.submit(result, OpKind::MultiGet, op, Stage::Final)
    }

    /// Submits `op`. On `Busy` it waits for its oldest request and retries; with nothing of
    /// its own in flight (other threads filled the engine's queue) it sleeps, with backoff.
    fn submit_at(
        &mut self,
        result: &mut PhaseResult,
        kind: OpKind,
        op: AsyncOp<'_>,
        stage: Stage,
        start: Instant,
    ) -> Result<()> {
        let (bytes, ops) = match op {
            AsyncOp::Put { key, value } | AsyncOp::Write { key, value } => {
                ((key.len() + value.len()) as u64, 1)
            }
            AsyncOp::MultiGet { keys } => (0, keys.len() as u64),
            AsyncOp::Get { .. } | AsyncOp::Scan { .. } => (0, 1),
        };
        let mut backoff = Duration::from_micros(20);
        let pending = loop {
            match self.ctx.engine.submit(op)? {
                Submitted::InFlight(p) => break p,
                Submitted::Busy if !self.queue.is_empty() => {
                    result.busy_waits += 1;
                    self.complete_oldest(result)?;
                }
                Submitted::Busy => {
                    result.busy_sleeps += 1;
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(1));
                }
            }
        };
        let request = InFlight {
            pending,
            kind,
            start,
            bytes,
            ops,
            stage,
        };
        if request.pending.is_ready() {
            // Completed inline (a read served from a memtable).
            self.complete(result, request)
        } else {
            self.queue.push_back(request);
            Ok(())
        }
    }

    /// Completes requests that are ready, without blocking: the ready ones at the front if
    /// there are any (cheap, the common case), else every ready one behind a slow oldest.
    fn reap_ready(&mut self, result: &mut PhaseResult) -> Result<()> {
        let mut freed = false;
        while self.queue.front().is_some_and(|r| r.pending.is_ready()) {
            let request = self.queue.pop_front().expect("front exists");
            self.complete(result, request)?;
            freed = true;
        }
        if freed {
            return Ok(());
        }
        let mut i = 1;
        while i < self.queue.len() {
            if self.queue[i].pending.is_ready() {
                let request = self.queue.remove(i).expect("index in range");
                self.complete(result, request)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Waits for the oldest request.
    fn complete_oldest(&mut self, result: &mut PhaseResult) -> Result<()> {
        match self.queue.pop_front() {
            Some(request) => self.complete(result, request),
            None => Ok(()),
        }
    }

    fn complete(&mut self, result: &mut PhaseResult, request: InFlight) -> Result<()> {
        match request.pending.wait()? {
            Outcome::Found(found) => {
                result.reads += 1;
                result.found += u64::from(found);
            }
            Outcome::FoundMany { found, keys } => {
                result.reads += keys as u64;
                result.found += found as u64;
            }
            Outcome::Written | Outcome::Scanned(_) => {}
        }
        result.user_bytes_written += request.bytes;
        match request.stage {
            Stage::Final => {
                record(result, request.kind, request.start, request.ops);
                let done = &self.ctx.shared.done_ops;
                done.fetch_add(request.ops, Ordering::Relaxed);
            }
            Stage::ThenWrite { key, value } => self.deferred.push_back(Deferred {
                kind: request.kind,
                start: request.start,
                key,
                value,
            }),
        }
        Ok(())
    }

    /// Completes everything in flight, second requests included.
    fn drain(&mut self, result: &mut PhaseResult) -> Result<()> {
        while !self.queue.is_empty() || !self.deferred.is_empty() {
            self.make_room(result)?;
            self.complete_oldest(result)?;
        }
        Ok(())
    }
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
        Workload::MixGraph => crate::mixgraph::seek_length(rng),
        _ => spec.scan_length,
    }
}

/// Records one latency sample since `start` for a request that completed `ops` operations
/// (the keys of a multi-get, else 1).
fn record(result: &mut PhaseResult, kind: OpKind, start: Instant, ops: u64) {
    let nanos = start.elapsed().as_nanos().clamp(1, 3_600_000_000_000) as u64;
    result
        .latency
        .entry(kind)
        .or_insert_with(new_histogram)
        .record(nanos)
        .expect("latency within histogram bounds");
    result.ops += ops;
    if kind == OpKind::MultiGet {
        result.multiget_batches += 1;
        result.multiget_keys += ops;
    }
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
        let finished = &finished;
        let watch = spec
            .stall_report
            .map(|after| s.spawn(move || watch_stalls(phase, after, shared, finished)));
        let handles: Vec<_> = (0..spec.threads)
            .map(|t| {
                let (body, ctx) = (&body, &ctx);
                // NB: named, so a stall report says which stacks are the clients'.
                std::thread::Builder::new()
                    .name(format!("client-{t}"))
                    .spawn_scoped(s, move || {
                        let r = body(t, ctx);
                        if r.is_err() {
                            ctx.shared.stop.store(true, Ordering::Relaxed);
                        }
                        r
                    })
                    .expect("spawning a client thread")
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
        if let Some(w) = watch {
            w.join().expect("stall watch thread panicked");
        }
        first_error.map_or(Ok(()), Err)
    });
    outcome?;
    merged.seconds = started.elapsed().as_secs_f64();
    Ok(merged)
}

/// Most stalls reported per phase (each report reads every thread's kernel stack).
const MAX_STALL_REPORTS: usize = 8;

/// Reports each stretch of at least `after` in which no operation completed: when it starts,
/// every thread of this process with its name, wait channel and kernel stack (reading another
/// thread's kernel stack needs root; without it the stacks are left out), and when it ends,
/// its length. What for: a read held for a second shows only as a maximum latency, and the
/// stacks say whether the clients wait in the kernel (I/O, memory reclaim) or on a lock.
fn watch_stalls(phase: &str, after: Duration, shared: &Shared, finished: &AtomicBool) {
    let started = Instant::now();
    let mut last = (Instant::now(), shared.done_ops.load(Ordering::Relaxed));
    let mut reported = false;
    let mut reports = 0;
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        let done = shared.done_ops.load(Ordering::Relaxed);
        if done != last.1 {
            if reported {
                eprintln!(
                    "stall in {phase}: ended after {:.0} ms",
                    last.0.elapsed().as_secs_f64() * 1e3
                );
            }
            last = (Instant::now(), done);
            reported = false;
            continue;
        }
        if !reported && last.0.elapsed() >= after && reports < MAX_STALL_REPORTS {
            reported = true;
            reports += 1;
            eprintln!(
                "stall in {phase}: no operation completed for {:.0} ms, {:.1} s into the phase\n{}",
                last.0.elapsed().as_secs_f64() * 1e3,
                last.0.duration_since(started).as_secs_f64(),
                thread_stacks()
            );
        }
    }
}

/// Every thread of this process: id, name, wait channel and kernel stack, from `/proc`.
fn thread_stacks() -> String {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return "  (no /proc/self/task)".to_string();
    };
    let read = |dir: &std::path::Path, name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_default()
    };
    let mut out = String::new();
    for task in tasks.flatten() {
        let dir = task.path();
        out += &format!(
            "  thread {} {} waiting in {}\n",
            task.file_name().to_string_lossy(),
            read(&dir, "comm").trim(),
            read(&dir, "wchan").trim()
        );
        for frame in read(&dir, "stack").lines() {
            out += &format!("      {frame}\n");
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineCounters;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    /// A request of the fake engine: done once its flag is set.
    struct FakePending {
        done: Arc<AtomicBool>,
        outcome: Outcome,
    }

    impl Pending for FakePending {
        fn is_ready(&self) -> bool {
            self.done.load(Ordering::Acquire)
        }

        fn wait(self: Box<Self>) -> Result<Outcome> {
            while !self.done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_micros(20));
            }
            Ok(self.outcome)
        }
    }

    /// An engine whose requests complete in order on a worker thread, 30 us apart, and that
    /// answers `Busy` beyond `cap` requests in flight; it records the most ever in flight.
    struct FakeEngine {
        cap: usize,
        in_flight: Arc<AtomicUsize>,
        most: AtomicUsize,
        busy: AtomicU64,
        submitted: AtomicU64,
        multi_gets: AtomicU64,
        queue: Mutex<mpsc::Sender<Arc<AtomicBool>>>,
    }

    impl FakeEngine {
        fn new(cap: usize) -> Self {
            let (tx, rx) = mpsc::channel::<Arc<AtomicBool>>();
            let in_flight = Arc::new(AtomicUsize::new(0));
            let worker_count = Arc::clone(&in_flight);
            std::thread::spawn(move || {
                for done in rx {
                    std::thread::sleep(Duration::from_micros(30));
                    worker_count.fetch_sub(1, Ordering::AcqRel);
                    done.store(true, Ordering::Release);
                }
            });
            FakeEngine {
                cap,
                in_flight,
                most: AtomicUsize::new(0),
                busy: AtomicU64::new(0),
                submitted: AtomicU64::new(0),
                multi_gets: AtomicU64::new(0),
                queue: Mutex::new(tx),
            }
        }
    }

    impl Engine for FakeEngine {
        fn put(&self, _: &[u8], _: &[u8]) -> Result<()> {
            unreachable!("the async path makes no synchronous calls")
        }
        fn get(&self, _: &[u8]) -> Result<bool> {
            unreachable!("the async path makes no synchronous calls")
        }
        fn multi_get(&self, _: &[Vec<u8>]) -> Result<usize> {
            unreachable!("the async path makes no synchronous calls")
        }
        fn scan(&self, _: &[u8], _: usize) -> Result<usize> {
            unreachable!("the async path makes no synchronous calls")
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
        fn settle(&self) -> Result<()> {
            Ok(())
        }
        fn counters(&self) -> EngineCounters {
            EngineCounters::default()
        }
        fn supports_async(&self) -> bool {
            true
        }
        fn submit(&self, op: AsyncOp<'_>) -> Result<Submitted> {
            let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
            if now > self.cap {
                self.in_flight.fetch_sub(1, Ordering::AcqRel);
                self.busy.fetch_add(1, Ordering::Relaxed);
                return Ok(Submitted::Busy);
            }
            self.most.fetch_max(now, Ordering::Relaxed);
            self.submitted.fetch_add(1, Ordering::Relaxed);
            let outcome = match op {
                AsyncOp::Put { .. } | AsyncOp::Write { .. } => Outcome::Written,
                AsyncOp::Get { .. } => Outcome::Found(true),
                AsyncOp::MultiGet { keys } => {
                    self.multi_gets.fetch_add(1, Ordering::Relaxed);
                    Outcome::FoundMany {
                        found: keys.len(),
                        keys: keys.len(),
                    }
                }
                AsyncOp::Scan { n, .. } => Outcome::Scanned(n),
            };
            let done = Arc::new(AtomicBool::new(false));
            self.queue.lock().unwrap().send(Arc::clone(&done)).unwrap();
            Ok(Submitted::InFlight(Box::new(FakePending { done, outcome })))
        }
    }

    fn spec(workload: Workload, threads: usize, inflight: usize) -> RunSpec {
        RunSpec {
            workload,
            records: 1000,
            ops: Some(600),
            duration: None,
            threads,
            key_size: 16,
            values: "100".parse().unwrap(),
            distribution: Distribution::Zipfian(0.99),
            seed: 42,
            scan_length: 10,
            inflight,
            multiget: 1,
            progress: false,
            stall_report: None,
        }
    }

    #[test]
    fn window_keeps_at_most_inflight_requests_per_thread() {
        let engine = FakeEngine::new(1000);
        let r = run(&engine, &spec(Workload::Ycsb(0), 1, 6)).unwrap();
        assert_eq!(r.ops, 600);
        let most = engine.most.load(Ordering::Relaxed);
        assert!((3..=6).contains(&most), "most in flight {most}");
        assert_eq!(engine.submitted.load(Ordering::Relaxed), 600);
        assert_eq!(r.reads, r.found);
        assert_eq!(r.busy_waits + r.busy_sleeps, 0);
    }

    #[test]
    fn busy_waits_for_the_oldest_request_and_loses_no_op() {
        // Two threads with 8 in flight each against an engine that admits 5.
        let engine = FakeEngine::new(5);
        let r = run(&engine, &spec(Workload::Ycsb(5), 2, 8)).unwrap();
        assert_eq!(r.ops, 600);
        assert!(engine.most.load(Ordering::Relaxed) <= 5);
        assert!(engine.busy.load(Ordering::Relaxed) > 0);
        assert_eq!(
            engine.busy.load(Ordering::Relaxed),
            r.busy_waits + r.busy_sleeps
        );
        // Read-modify-writes are two requests each; every other op is one.
        let rmw = r
            .latency
            .get(&OpKind::ReadModifyWrite)
            .map_or(0, |h| h.len());
        assert_eq!(engine.submitted.load(Ordering::Relaxed), 600 + rmw);
        assert!(rmw > 200);
        assert_eq!(r.reads, 600);
    }

    #[test]
    fn load_phase_uses_the_window_too() {
        let engine = FakeEngine::new(1000);
        let s = spec(Workload::ReadRandom, 2, 4);
        let l = load(&engine, &s).unwrap();
        assert_eq!(l.ops, 1000);
        assert_eq!(engine.submitted.load(Ordering::Relaxed), 1000);
        assert!(engine.most.load(Ordering::Relaxed) <= 8);
        assert_eq!(l.user_bytes_written, 1000 * (16 + 100));
    }

    /// What a client issues for a stream of drawn operations: each batch as the stream
    /// positions of its reads, each single operation as its position.
    #[derive(Debug, PartialEq, Eq)]
    enum Step {
        Batch(Vec<usize>),
        Single(usize),
    }

    /// Runs `kinds` through a [`ReadBatcher`] of `size`; keys carry the stream positions.
    fn batch_stream(kinds: &[OpKind], size: usize) -> Vec<Step> {
        let position = |key: &Vec<u8>| String::from_utf8_lossy(key).parse::<usize>().unwrap();
        let mut batcher = ReadBatcher::new(size);
        let mut steps = Vec::new();
        let mut key = Vec::new();
        let batch = |keys: Option<Vec<Vec<u8>>>, steps: &mut Vec<Step>| {
            if let Some(keys) = keys {
                steps.push(Step::Batch(keys.iter().map(position).collect()));
            }
        };
        for (i, &kind) in kinds.iter().enumerate() {
            format_key(i as u64, 16, &mut key);
            let issue = batcher.push(kind, &key);
            batch(issue.batch, &mut steps);
            if issue.single {
                steps.push(Step::Single(i));
            }
        }
        batch(batcher.finish(), &mut steps);
        steps
    }

    #[test]
    fn reads_are_batched_up_to_size_and_flushed_before_other_ops() {
        use OpKind::{Insert, Read as R, ReadModifyWrite, Scan, Update};
        let kinds = [
            R,
            R,
            R,
            R,
            Update,
            R,
            Scan,
            R,
            R,
            R,
            ReadModifyWrite,
            Insert,
            R,
            R,
        ];
        let steps = batch_stream(&kinds, 3);
        assert_eq!(
            steps,
            vec![
                Step::Batch(vec![0, 1, 2]),
                Step::Batch(vec![3]),
                Step::Single(4),
                Step::Batch(vec![5]),
                Step::Single(6),
                Step::Batch(vec![7, 8, 9]),
                Step::Single(10),
                Step::Single(11),
                Step::Batch(vec![12, 13]),
            ]
        );
        // Size 1 is the unbatched client: every operation on its own.
        let singles: Vec<Step> = (0..kinds.len()).map(Step::Single).collect();
        assert_eq!(batch_stream(&kinds, 1), singles);
    }

    #[test]
    fn batching_keeps_every_op_once_in_drawn_order() {
        let mut rng = thread_rng(11, 0);
        for size in [2, 5, 16] {
            let mix = Workload::Ycsb(0).mix(0.0);
            let kinds: Vec<OpKind> = (0..2000).map(|_| mix.pick(&mut rng)).collect();
            let steps = batch_stream(&kinds, size);
            let mut order = Vec::new();
            for (n, step) in steps.iter().enumerate() {
                match step {
                    Step::Single(i) => {
                        assert_ne!(kinds[*i], OpKind::Read, "reads are batched");
                        order.push(*i);
                    }
                    Step::Batch(reads) => {
                        assert!((1..=size).contains(&reads.len()));
                        assert!(reads.iter().all(|&i| kinds[i] == OpKind::Read));
                        // A short batch was flushed by the next op, or by the end of the run.
                        let next_is_single = matches!(steps.get(n + 1), Some(Step::Single(_)));
                        assert!(reads.len() == size || next_is_single || n + 1 == steps.len());
                        order.extend(reads);
                    }
                }
            }
            assert_eq!(order, (0..kinds.len()).collect::<Vec<_>>(), "size {size}");
        }
    }

    #[test]
    fn async_multi_gets_count_keys_as_ops_and_one_latency_sample_each() {
        let engine = FakeEngine::new(1000);
        let mut s = spec(Workload::ReadRandom, 1, 4);
        s.multiget = 16;
        let r = run(&engine, &s).unwrap();
        // 600 reads: 37 multi-gets of 16 and a last one of 8.
        assert_eq!(r.ops, 600);
        assert_eq!((r.reads, r.found), (600, 600));
        assert_eq!(engine.multi_gets.load(Ordering::Relaxed), 38);
        assert_eq!(engine.submitted.load(Ordering::Relaxed), 38);
        assert_eq!(r.latency[&OpKind::MultiGet].len(), 38);
        assert!(!r.latency.contains_key(&OpKind::Read));
        assert_eq!((r.multiget_batches, r.multiget_keys), (38, 600));

        // YCSB-A: updates go on their own between the batches of reads.
        let engine = FakeEngine::new(1000);
        let mut s = spec(Workload::Ycsb(0), 2, 4);
        s.multiget = 8;
        let r = run(&engine, &s).unwrap();
        let updates = r.latency[&OpKind::Update].len();
        assert_eq!(r.ops, 600);
        assert_eq!(r.multiget_keys + updates, 600);
        assert_eq!(r.reads, r.multiget_keys);
        let batches = engine.multi_gets.load(Ordering::Relaxed);
        assert_eq!(r.multiget_batches, batches);
        assert_eq!(engine.submitted.load(Ordering::Relaxed), batches + updates);
        assert!(r.keys_per_multiget().unwrap() > 1.0);
    }
}

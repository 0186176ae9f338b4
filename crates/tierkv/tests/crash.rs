//! Crash tests on `FaultFs`.
//!
//! A seeded workload (puts, deletes and batches with `Sync`, `Flush` and `Buffered` durability,
//! explicit flushes and clean reopens) runs on tiny memtables and tables, so WAL appends, memtable
//! switches, flushes, compactions, MANIFEST edits and CURRENT switches all happen within a few
//! thousand file-system calls. The sweep freezes the file system at many call counts
//! (`fail_after(n, Io, sticky)`), crashes it (power loss under each `CrashPolicy`, or a process
//! kill), drops the dead `Db` and reopens. The recovered state must equal the model after some
//! prefix of the history that keeps every write acknowledged as durable; batches are atomic
//! because the candidate states are those between whole attempts. Then a second crash is
//! injected into that recovery, which must not change what is recovered.
//!
//! Sweeps run on several option shapes (placement, compression, an overflowing fast tier) and
//! with four concurrent writers; every call of a recovery is crashed on images with torn WAL
//! tails; a failure sweep injects one EIO or ENOSPC per run and reopens without a crash. Also
//! here: a failed fsync stops writes until reopen and loses nothing acknowledged; ENOSPC is
//! reported and recoverable; a full fast-tier budget only moves tables to the capacity tier.
//!
//! A pass-through `Fs` (`ProbeFs`) records where the injected fault fired, so every failure
//! message names the interrupted call, and can arm a one-shot fault right before a chosen call.
//!
//! Environment: `TIERKV_CRASH_POINTS` (even-spread crash points per sweep, default 40; rarer calls
//! are added, and each point is crashed four ways), `TIERKV_CRASH_SEED` (workload seed).

mod common;

use common::{
    crash_now, drop_within, env_u64, sized, small, Crash, Failures, FsImage, TierSetup, CAPACITY,
    CRASHES, FAST,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tierkv::env::{CrashPolicy, FaultFs, FaultKind, Fs, WritableFile};
use tierkv::inspect::LogReader;
use tierkv::{
    CapacityLevels, Compression, Db, Durability, Error, HotAdmission, HotEviction, HotTier,
    Options, ReadOptions, RecoveryMode, Result, WalMode, WriteBatch, WriteOptions,
};

/// Keys of the workload are `key0000..key0299`: few enough that keys are overwritten and deleted
/// often, so a lost or resurrected write changes the state.
const KEYS: u32 = 300;
/// Steps of the base sweep's workload: about 1.7 MB of writes, some 27 memtables of 64 KiB.
const STEPS: usize = 3000;

// ---------------------------------------------------------------------------------------------
// A pass-through file system that says where a fault fired
// ---------------------------------------------------------------------------------------------

/// One mutating file-system call.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FsOp {
    op: &'static str,
    path: PathBuf,
}

impl std::fmt::Display for FsOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.op, self.path.display())
    }
}

impl FsOp {
    /// What part of the engine the call belongs to. Tables on the fast tier are written by
    /// flushes (L0 lives there with `levels_on_fast = 1`), tables on the capacity tier by
    /// compactions.
    fn category(&self) -> &'static str {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match () {
            _ if self.op == "remove" => "remove-obsolete",
            _ if self.op == "fsync-dir" => "dir-sync",
            _ if name.ends_with(".log") => "wal",
            _ if name.ends_with(".sst") && self.path.starts_with(FAST) => "flush-table",
            _ if name.ends_with(".sst") => "compaction-table",
            _ if name.starts_with("MANIFEST-") => "manifest",
            _ if name.starts_with("CURRENT") => "current",
            _ if name.starts_with("TIER") => "tier-identity",
            _ if name.ends_with(".slab") => "hot-slab",
            _ if name.starts_with("HOT-JOURNAL") => "hot-journal",
            _ => "other",
        }
    }
}

/// A trigger: arm FaultFs's fault right before the first call it matches.
type Matcher = Box<dyn FnMut(&FsOp) -> bool + Send>;

#[derive(Default)]
struct ProbeState {
    /// The first mutating call that failed: where the injected fault fired.
    first_failure: Option<FsOp>,
    /// Every mutating call, when tracing.
    trace: Option<Vec<FsOp>>,
    trigger: Option<(Matcher, FaultKind, bool)>,
}

/// Shared by the file system and its open files.
struct Probe {
    fault: Arc<FaultFs>,
    state: Mutex<ProbeState>,
}

impl Probe {
    fn new(fault: Arc<FaultFs>, trace: bool) -> Arc<Probe> {
        let state = ProbeState {
            trace: trace.then(Vec::new),
            ..ProbeState::default()
        };
        Arc::new(Probe {
            fault,
            state: Mutex::new(state),
        })
    }

    /// Runs a mutating call. NB: the probe lock is held across the call, so an armed one-shot
    /// fault is consumed by the call that armed it, not by a racing background thread.
    fn mutate<T>(
        &self,
        op: &'static str,
        path: &Path,
        call: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let mut state = self.state.lock().unwrap();
        let fs_op = FsOp {
            op,
            path: path.to_path_buf(),
        };
        if let Some(trace) = &mut state.trace {
            trace.push(fs_op.clone());
        }
        if state.trigger.as_mut().is_some_and(|(m, _, _)| m(&fs_op)) {
            let (_, kind, once) = state.trigger.take().expect("trigger");
            self.fault.fail_after(0, kind, once);
        }
        let result = call();
        if result.as_ref().is_err_and(is_injected) && state.first_failure.is_none() {
            state.first_failure = Some(fs_op);
        }
        result
    }

    /// Makes the first call `matcher` accepts fail with `kind` (and every later one unless
    /// `once`).
    fn arm(
        &self,
        kind: FaultKind,
        once: bool,
        matcher: impl FnMut(&FsOp) -> bool + Send + 'static,
    ) {
        self.state.lock().unwrap().trigger = Some((Box::new(matcher), kind, once));
    }

    fn first_failure(&self) -> Option<FsOp> {
        self.state.lock().unwrap().first_failure.clone()
    }

    fn take_trace(&self) -> Vec<FsOp> {
        self.state.lock().unwrap().trace.take().unwrap_or_default()
    }
}

/// True for the errors FaultFs injects (EIO, ENOSPC); not, say, the ENOENT of two threads
/// removing the same obsolete file.
fn is_injected(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => matches!(source.raw_os_error(), Some(libc::EIO | libc::ENOSPC)),
        _ => false,
    }
}

struct ProbeFs(Arc<Probe>);

struct ProbeFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    probe: Arc<Probe>,
}

impl WritableFile for ProbeFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let inner = &mut self.inner;
        self.probe
            .mutate("write", &self.path, || inner.append(data))
    }

    fn sync(&mut self) -> Result<()> {
        let inner = &mut self.inner;
        self.probe.mutate("fdatasync", &self.path, || inner.sync())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

impl Fs for ProbeFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inner = self
            .0
            .mutate("create", path, || self.0.fault.create(path))?;
        Ok(Box::new(ProbeFile {
            inner,
            path: path.to_path_buf(),
            probe: Arc::clone(&self.0),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let inner = self.0.fault.open_append(path)?;
        Ok(Box::new(ProbeFile {
            inner,
            path: path.to_path_buf(),
            probe: Arc::clone(&self.0),
        }))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.0
            .mutate("remove", path, || self.0.fault.remove_file(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0
            .mutate("rename", to, || self.0.fault.rename(from, to))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0
            .mutate("fsync-dir", dir, || self.0.fault.sync_dir(dir))
    }

    fn open_positional(
        &self,
        path: &Path,
        len: u64,
    ) -> Result<Arc<dyn tierkv::env::PositionalFile>> {
        let inner = self.0.fault.open_positional(path, len)?;
        Ok(Arc::new(ProbePositional {
            inner,
            probe: Arc::clone(&self.0),
        }))
    }

    common::forward_fs!(
        0.fault =>
        open_read,
        exists,
        list_dir,
        create_dir_all,
        file_size,
        lock,
    );
}

/// A positional file (the hot store's slabs, the parallel WAL's area) whose writes and syncs
/// are crash points.
struct ProbePositional {
    inner: Arc<dyn tierkv::env::PositionalFile>,
    probe: Arc<Probe>,
}

impl tierkv::env::PositionalFile for ProbePositional {
    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()> {
        self.probe.mutate("pwrite", self.inner.path(), || {
            self.inner.write_at(offset, data, durable)
        })
    }

    fn sync(&self) -> Result<()> {
        self.probe
            .mutate("fdatasync", self.inner.path(), || self.inner.sync())
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}

// ---------------------------------------------------------------------------------------------
// Options, crash kinds, images
// ---------------------------------------------------------------------------------------------

/// What varies between sweeps; the sizes stay tiny so every mechanism runs often.
#[derive(Clone, Copy, Debug)]
struct Shape {
    name: &'static str,
    levels_on_fast: usize,
    /// Byte budget of the fast tier (`u64::MAX`: unlimited).
    fast_capacity: u64,
    max_bytes_for_level_base: u64,
    compression: Compression,
    background_threads: usize,
    /// Writer threads. Each owns its keys (`t{i}/...`) and its history.
    writers: usize,
    /// A single writer closes and reopens the database a third and two thirds of the way.
    reopens: bool,
    /// Values are 16 bytes up to this long.
    max_value: usize,
    /// Values of random bytes rather than one repeated byte: tables as large as the data.
    incompressible: bool,
    /// Keys are padded to this length (the MANIFEST stores each table's first and last key).
    key_len: usize,
    /// The hot store's budget (`hot_tier = "slab"`); 0: no hot store.
    hot_budget: u64,
    /// The hot store's eviction policy.
    hot_eviction: HotEviction,
    /// The hot store's admission rule.
    hot_admission: HotAdmission,
    /// Whether demotions merge straight into the bottom run.
    hot_demote_into_bottom: bool,
    /// The hot store's partitions (`hot_partitions`).
    hot_partitions: usize,
    /// Values of this many bytes or more go to the value log (`values = "split"`); 0: every
    /// value inline.
    split_threshold: u64,
    /// Split values are separated at flush (`vlog_separation = "on-flush"`), not on write.
    split_on_flush: bool,
    /// Write groups overlap and are inserted into the memtable in parallel, however small
    /// (`wal.concurrent_memtable_writes`, `wal.concurrent_memtable_min_ops = 1`).
    parallel_inserts: bool,
    /// One sorted run below L0 (`capacity_levels = 1`) and L0's file ceiling at three
    /// tables (slowdown trigger 4), so small L0 tables merge within L0 often.
    one_run: bool,
}

const BASE: Shape = Shape {
    name: "base",
    levels_on_fast: 1,
    fast_capacity: u64::MAX,
    max_bytes_for_level_base: 64 << 10,
    compression: Compression::Lz4,
    background_threads: 2,
    writers: 1,
    reopens: true,
    max_value: 900,
    incompressible: false,
    key_len: 7,
    hot_budget: 0,
    hot_eviction: HotEviction::Msc,
    hot_admission: HotAdmission::WhenFree,
    hot_demote_into_bottom: false,
    hot_partitions: 1,
    split_threshold: 0,
    split_on_flush: false,
    parallel_inserts: false,
    one_run: false,
};

fn shaped_options(fs: Arc<dyn Fs>, shape: &Shape) -> Options {
    let mut b = sized(64 << 10, 16 << 10, shape.max_bytes_for_level_base);
    if shape.hot_budget > 0 {
        b = b
            .hot_tier(HotTier::Slab)
            .hot_budget(shape.hot_budget)
            .hot_eviction(shape.hot_eviction)
            .hot_admission(shape.hot_admission)
            .hot_demote_into_bottom(shape.hot_demote_into_bottom)
            .hot_partitions(shape.hot_partitions);
    }
    if shape.split_threshold > 0 {
        b = b
            .values(tierkv::ValuesMode::Split)
            .split_threshold(shape.split_threshold)
            .vlog_separation(if shape.split_on_flush {
                tierkv::ValueSeparation::OnFlush
            } else {
                tierkv::ValueSeparation::OnWrite
            });
    }
    if shape.one_run {
        b = b
            .capacity_levels(CapacityLevels::Fixed(1))
            .l0_slowdown_trigger(4)
            .l0_stop_trigger(8);
    }
    b.fault_tiers_capped(shape.fast_capacity)
        .levels_on_fast(shape.levels_on_fast)
        .l0_compaction_trigger(2)
        .compression(shape.compression)
        .background_threads(shape.background_threads)
        .wal_concurrent_memtable_writes(shape.parallel_inserts)
        .wal_concurrent_memtable_min_ops(1)
        .fs(fs)
        .build()
        .expect("valid options")
}

fn options(fs: Arc<dyn Fs>) -> Options {
    shaped_options(fs, &BASE)
}

impl Crash {
    /// The history prefix this crash must keep.
    fn must_keep(self, h: &History) -> usize {
        match self {
            Crash::Power(_) => h.power_durable,
            Crash::Process => h.process_durable,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workload, history and the prefix check
// ---------------------------------------------------------------------------------------------

/// One atomic write: a single put or delete, or a batch.
#[derive(Clone, Debug)]
struct Op {
    writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    durability: Durability,
}

impl Op {
    fn batch(&self) -> WriteBatch {
        let mut b = WriteBatch::new();
        for (k, v) in &self.writes {
            match v {
                Some(v) => b.put(k, v),
                None => b.delete(k),
            }
        }
        b
    }

    fn write_options(&self) -> WriteOptions {
        WriteOptions {
            durability: self.durability,
        }
    }
}

#[derive(Clone, Debug)]
enum Step {
    Write(Op),
    /// `Db::flush`: once it returns Ok, everything before it is durable.
    Flush,
    /// Clean close and reopen: once the open returns, everything before it is durable.
    Reopen,
}

/// A value unique to (step, entry), so each state identifies the prefix that produced it.
fn value(rng: &mut SmallRng, step: usize, entry: usize, max_len: usize, random: bool) -> Vec<u8> {
    let mut v = format!("s{step}.{entry}:").into_bytes();
    let len = rng.gen_range(16..max_len).max(v.len());
    if random {
        v.extend((v.len()..len).map(|_| rng.gen_range(b'0'..=b'z')));
    } else {
        v.resize(len, b'a' + (step % 26) as u8);
    }
    v
}

/// A seeded plan over the keys `{prefix}key0000..`: mostly single puts, some deletes, 13% batches
/// of 2..=6 entries (a key may repeat within one), 15% `Sync`, 35% `Flush`, the rest
/// `Buffered`; explicit flushes now and then, and two clean reopens when `reopens`.
fn plan(seed: u64, steps: usize, prefix: &str, reopens: bool, shape: &Shape) -> Vec<Step> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..steps)
        .map(|s| {
            if reopens && (s == steps / 3 || s == 2 * steps / 3) {
                return Step::Reopen;
            }
            let roll = rng.gen_range(0..1000);
            if roll < 8 {
                return Step::Flush;
            }
            let n = if roll < 130 { rng.gen_range(2..=6) } else { 1 };
            let writes = (0..n)
                .map(|e| {
                    let k = format!("{prefix}key{:04}", rng.gen_range(0..KEYS));
                    let k = format!("{k:-<len$}", len = shape.key_len);
                    let v = (rng.gen_range(0..10) != 0)
                        .then(|| value(&mut rng, s, e, shape.max_value, shape.incompressible));
                    (k.into_bytes(), v)
                })
                .collect();
            let durability = match rng.gen_range(0..20) {
                0..=2 => Durability::Sync,
                3..=9 => Durability::Flush,
                _ => Durability::Buffered,
            };
            Step::Write(Op { writes, durability })
        })
        .collect()
}

/// A write the workload attempted, in order.
#[derive(Clone, Debug)]
struct Attempt {
    step: usize,
    op: Op,
    acked: bool,
}

/// The attempts of one writer, and how many of them must survive a crash.
#[derive(Clone, Debug, Default)]
struct History {
    /// The writer's keys all start with this.
    prefix: String,
    ops: Vec<Attempt>,
    /// Attempts every crash must keep: through the last `Sync` acknowledgement, or through the
    /// last flush or reopen that returned Ok.
    power_durable: usize,
    /// Attempts a process crash must keep: also through the last `Flush` acknowledgement.
    process_durable: usize,
}

impl History {
    fn push(&mut self, step: usize, op: &Op, acked: bool) {
        self.ops.push(Attempt {
            step,
            op: op.clone(),
            acked,
        });
        if acked && op.durability >= Durability::Flush {
            self.process_durable = self.ops.len();
        }
        if acked && op.durability == Durability::Sync {
            self.power_durable = self.ops.len();
        }
    }

    fn all_durable(&mut self) {
        self.power_durable = self.ops.len();
        self.process_durable = self.ops.len();
    }

    fn keys(&self) -> BTreeSet<Vec<u8>> {
        let writes = self.ops.iter().flat_map(|a| &a.op.writes);
        writes.map(|(k, _)| k.clone()).collect()
    }

    /// The acknowledged prefix: everything up to the last acknowledged attempt.
    fn acked(&self) -> usize {
        self.ops.iter().rposition(|a| a.acked).map_or(0, |i| i + 1)
    }

    fn describe(&self, i: usize) -> String {
        match self.ops.get(i) {
            Some(a) => format!(
                "attempt #{i} (step {}, {:?}, {} entries, {})",
                a.step,
                a.op.durability,
                a.op.writes.len(),
                if a.acked { "acknowledged" } else { "failed" }
            ),
            None => format!("attempt #{i} (past the end)"),
        }
    }
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_after(h: &History, k: usize) -> State {
    let mut model = State::new();
    for a in &h.ops[..k] {
        for (key, v) in &a.op.writes {
            match v {
                Some(v) => model.insert(key.clone(), v.clone()),
                None => model.remove(key),
            };
        }
    }
    model
}

fn show(v: Option<&Vec<u8>>) -> String {
    match v {
        None => "<absent>".into(),
        Some(v) => {
            let s = String::from_utf8_lossy(&v[..v.len().min(24)]);
            format!("{s:?}.. ({} B)", v.len())
        }
    }
}

/// The largest `k >= must_keep` such that `got` equals the model after the first `k` attempts;
/// otherwise a message saying how `got` differs from the closest such prefix.
fn check_prefix(h: &History, got: &State, must_keep: usize) -> std::result::Result<usize, String> {
    let mut model = State::new();
    // Keys where the model and `got` differ, kept up to date as attempts are applied.
    let mut diff: BTreeSet<Vec<u8>> = got.keys().cloned().collect();
    let mut matching = Vec::new();
    let mut closest = (usize::MAX, 0);
    for k in 0..=h.ops.len() {
        if k > 0 {
            for (key, v) in &h.ops[k - 1].op.writes {
                match v {
                    Some(v) => model.insert(key.clone(), v.clone()),
                    None => model.remove(key),
                };
                if model.get(key) == got.get(key) {
                    diff.remove(key);
                } else {
                    diff.insert(key.clone());
                }
            }
        }
        if diff.is_empty() {
            matching.push(k);
        }
        if k >= must_keep && diff.len() < closest.0 {
            closest = (diff.len(), k);
        }
    }
    if let Some(&k) = matching.iter().rev().find(|&&k| k >= must_keep) {
        return Ok(k);
    }
    let mut msg = format!(
        "recovered state ({} keys) is no prefix of the history that keeps the first {must_keep} \
         of {} attempts (last one that must survive: {})",
        got.len(),
        h.ops.len(),
        h.describe(must_keep.wrapping_sub(1)),
    );
    if let Some(&k) = matching.last() {
        msg += &format!(
            "; it equals the prefix of {k} attempts, so acknowledged writes were lost, first {}",
            h.describe(k)
        );
    }
    let (_, k) = closest;
    let model = model_after(h, k);
    let keys: BTreeSet<&Vec<u8>> = model.keys().chain(got.keys()).collect();
    let bad: Vec<String> = keys
        .into_iter()
        .filter(|key| model.get(*key) != got.get(*key))
        .take(5)
        .map(|key| {
            format!(
                "{}: expected {}, got {}",
                String::from_utf8_lossy(key),
                show(model.get(key)),
                show(got.get(key))
            )
        })
        .collect();
    msg += &format!("; closest prefix {k} differs at: {}", bad.join("; "));
    Err(msg)
}

/// Checks each writer's part of `got` (its keys) against its history; every key of `got` must
/// belong to some writer. Returns the prefix length found for each.
fn check_histories(
    histories: &[History],
    got: &State,
    crash: Crash,
) -> std::result::Result<Vec<usize>, String> {
    let mut claimed = 0;
    let mut found = Vec::new();
    for (t, h) in histories.iter().enumerate() {
        let part: State = got
            .iter()
            .filter(|(k, _)| k.starts_with(h.prefix.as_bytes()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        claimed += part.len();
        let k =
            check_prefix(h, &part, crash.must_keep(h)).map_err(|e| format!("writer {t}: {e}"))?;
        found.push(k);
    }
    if claimed != got.len() {
        return Err(format!(
            "{} recovered keys were never written",
            got.len() - claimed
        ));
    }
    Ok(found)
}

/// The whole visible state, by a scan, cross-checked with `get` on every key in `keys`.
fn read_state(db: &Db, keys: &BTreeSet<Vec<u8>>) -> std::result::Result<State, String> {
    let mut it = db
        .iter(ReadOptions::default())
        .map_err(|e| format!("iter: {e}"))?;
    it.seek_to_first();
    let state = it
        .entries()
        .collect::<Result<State>>()
        .map_err(|e| format!("scan: {e}"))?;
    for k in keys.iter().chain(state.keys()) {
        let got = db
            .get(&ReadOptions::default(), k)
            .map_err(|e| format!("get {}: {e}", String::from_utf8_lossy(k)))?;
        if got.as_ref() != state.get(k) {
            return Err(format!(
                "get and scan disagree on {}: get {}, scan {}",
                String::from_utf8_lossy(k),
                show(got.as_ref()),
                show(state.get(k))
            ));
        }
    }
    Ok(state)
}

/// Where a fault fires in a workload run.
#[derive(Clone, Copy, Debug)]
enum At {
    /// After this many mutating calls. Background threads make the call there vary a little
    /// from run to run.
    Call(u64),
    /// At the `.1`-th (from 0) call of category `.0`: the same call in every run.
    Nth(&'static str, usize),
}

/// A fault to inject into a workload run.
#[derive(Clone, Copy, Debug)]
struct Fault {
    at: At,
    kind: FaultKind,
    /// Only that one call fails; otherwise every later one too.
    once: bool,
}

impl Fault {
    /// The world stops at `at`: that call and every later one fail, as in the instant of a crash.
    fn freeze(at: At) -> Fault {
        Fault {
            at,
            kind: FaultKind::Io,
            once: false,
        }
    }

    fn inject(&self, fault: &FaultFs, probe: &Probe) {
        match self.at {
            At::Call(n) => fault.fail_after(n, self.kind, self.once),
            At::Nth(category, nth) => {
                let mut seen = 0;
                probe.arm(self.kind, self.once, move |op| {
                    let hit = op.category() == category && seen == nth;
                    seen += usize::from(op.category() == category);
                    hit
                });
            }
        }
    }
}

/// A workload stopped by a fault (or run to its end), with its `Db` still open.
struct Cut {
    fault: Arc<FaultFs>,
    probe: Arc<Probe>,
    db: Option<Db>,
    histories: Vec<History>,
}

/// After a failed write or flush, the database must refuse writes until it is reopened.
fn assert_sticky(db: &Db, case: &str) {
    let result = db.put(
        &WriteOptions::sync(),
        b"sticky-probe",
        b"must not be written",
    );
    assert!(
        result.is_err(),
        "{case}: a write succeeded after an earlier write or flush failed"
    );
}

/// A seeded workload on one option shape, run as often as the crash cases need.
struct Workload {
    seed: u64,
    shape: Shape,
    /// One plan per writer.
    plans: Vec<Vec<Step>>,
    keys: BTreeSet<Vec<u8>>,
}

impl Workload {
    fn new(seed: u64, shape: Shape, steps: usize) -> Workload {
        let plans: Vec<Vec<Step>> = (0..shape.writers)
            .map(|t| {
                plan(
                    seed + t as u64,
                    steps,
                    &Self::prefix(shape, t),
                    shape.writers == 1 && shape.reopens,
                    &shape,
                )
            })
            .collect();
        let keys = plans
            .iter()
            .flatten()
            .filter_map(|s| match s {
                Step::Write(op) => Some(op.writes.iter().map(|(k, _)| k.clone())),
                _ => None,
            })
            .flatten()
            .collect();
        Workload {
            seed,
            shape,
            plans,
            keys,
        }
    }

    fn prefix(shape: Shape, writer: usize) -> String {
        if shape.writers == 1 {
            String::new()
        } else {
            format!("t{writer}/")
        }
    }

    fn options(&self, fs: Arc<dyn Fs>) -> Options {
        shaped_options(fs, &self.shape)
    }

    /// Runs the plans on a fresh FaultFs. With `inject`, the file system fails the call at
    /// `inject.at` (and every later one unless `inject.once`); each writer stops at its first
    /// error, after checking that the failure is sticky.
    fn run(&self, inject: Option<Fault>, trace: bool) -> Cut {
        let case = format!("{} seed {:#x}, {inject:?}", self.shape.name, self.seed);
        let fault = FaultFs::new(self.seed);
        let probe = Probe::new(Arc::clone(&fault), trace);
        let fs: Arc<dyn Fs> = Arc::new(ProbeFs(Arc::clone(&probe)));
        if let Some(f) = inject {
            f.inject(&fault, &probe);
        }
        let mut db = Db::open(self.options(Arc::clone(&fs))).ok();
        let histories = if self.shape.writers == 1 {
            vec![self.run_one(&self.plans[0], &mut db, &fs, &case)]
        } else {
            std::thread::scope(|scope| {
                let db = &db;
                let case = &case;
                let writers: Vec<_> = (0..self.shape.writers)
                    .map(|t| scope.spawn(move || self.run_writer(t, db.as_ref(), case)))
                    .collect();
                writers
                    .into_iter()
                    .map(|w| w.join().expect("writer"))
                    .collect()
            })
        };
        Cut {
            fault,
            probe,
            db,
            histories,
        }
    }

    /// The single writer: may close and reopen `db`.
    fn run_one(&self, plan: &[Step], db: &mut Option<Db>, fs: &Arc<dyn Fs>, case: &str) -> History {
        let mut history = History::default();
        for (s, step) in plan.iter().enumerate() {
            let Some(d) = &*db else { break };
            let ok = match step {
                Step::Write(op) => {
                    let result = d.write(&op.write_options(), op.batch());
                    history.push(s, op, result.is_ok());
                    result.is_ok()
                }
                Step::Flush => d.flush().is_ok(),
                Step::Reopen => {
                    drop_within(db.take(), "clean close in the workload");
                    *db = Db::open(self.options(Arc::clone(fs))).ok();
                    db.is_some()
                }
            };
            if !ok {
                if let Some(d) = &*db {
                    assert_sticky(d, &format!("{case}, step {s}"));
                }
                break;
            }
            if matches!(step, Step::Flush | Step::Reopen) {
                history.all_durable();
            }
        }
        history
    }

    /// One of several concurrent writers, on its own keys.
    fn run_writer(&self, t: usize, db: Option<&Db>, case: &str) -> History {
        let mut history = History {
            prefix: Self::prefix(self.shape, t),
            ..History::default()
        };
        let Some(db) = db else { return history };
        for (s, step) in self.plans[t].iter().enumerate() {
            let ok = match step {
                Step::Write(op) => {
                    let result = db.write(&op.write_options(), op.batch());
                    history.push(s, op, result.is_ok());
                    result.is_ok()
                }
                // Everything this writer wrote before the flush is durable once it returns.
                Step::Flush => db.flush().is_ok(),
                Step::Reopen => unreachable!("concurrent plans have no reopens"),
            };
            if !ok {
                assert_sticky(db, &format!("{case}, writer {t}, step {s}"));
                break;
            }
            if matches!(step, Step::Flush) {
                history.all_durable();
            }
        }
        history
    }

    fn open_and_read(&self, fs: Arc<FaultFs>) -> std::result::Result<(Db, State), String> {
        let db = Db::open(self.options(fs)).map_err(|e| format!("reopen failed: {e}"))?;
        let state = read_state(&db, &self.keys)?;
        Ok((db, state))
    }

    /// Recovers a copy of `img` without faults: the state, and the mutating calls the open made.
    fn recover_copy(&self, img: &FsImage, seed: u64) -> std::result::Result<(State, u64), String> {
        let fs = img.materialize(seed);
        let before = fs.op_count();
        let (db, state) = self.open_and_read(Arc::clone(&fs))?;
        let ops = fs.op_count() - before;
        drop_within(Some(db), "clean close after recovery");
        Ok((state, ops))
    }

    /// Recovers a copy of `img`, crashing after `m` mutating calls of the open, then recovers
    /// again.
    fn recover_with_crash(
        &self,
        img: &FsImage,
        seed: u64,
        m: u64,
        crash: Crash,
    ) -> std::result::Result<State, String> {
        let fault = img.materialize(seed);
        fault.fail_after(m, FaultKind::Io, false);
        let db = Db::open(self.options(fault.clone())).ok();
        crash_now(&fault, db, crash, "drop after a crash during recovery");
        let (db, state) = self.open_and_read(fault)?;
        drop_within(Some(db), "clean close after the second recovery");
        Ok(state)
    }

    /// Crashes the workload at `at` with `crash`, recovers, checks every writer's prefix, then
    /// crashes the recovery itself after `second.0 % (its calls + 1)` calls and checks that the
    /// same state comes back. Returns where the fault fired.
    fn crash_case(
        &self,
        at: At,
        crash: Crash,
        second: (u64, Crash),
    ) -> (Option<FsOp>, std::result::Result<(), String>) {
        let cut = self.run(Some(Fault::freeze(at)), false);
        let hit = cut.probe.first_failure();
        let hit_at = hit
            .as_ref()
            .map_or("after the end".to_string(), ToString::to_string);
        let case = format!(
            "{} seed {:#x}, crash at {at:?} ({hit_at}), {crash:?}",
            self.shape.name, self.seed
        );
        crash_now(&cut.fault, cut.db, crash, &case);
        let img = FsImage::take(&cut.fault);
        let result = self.check_recoveries(&cut.histories, &img, crash, second, &case);
        (hit, result)
    }

    fn check_recoveries(
        &self,
        histories: &[History],
        img: &FsImage,
        crash: Crash,
        second: (u64, Crash),
        case: &str,
    ) -> std::result::Result<(), String> {
        let (recovered, open_ops) = self
            .recover_copy(img, self.seed)
            .map_err(|e| format!("{case}: {e}; files: {}", img.listing()))?;
        check_histories(histories, &recovered, crash).map_err(|e| format!("{case}: {e}"))?;

        let (m, crash2) = (second.0 % (open_ops + 1), second.1);
        let then = format!("{case}, then {crash2:?} after op {m} of {open_ops} of the recovery");
        let again = self
            .recover_with_crash(img, self.seed ^ m, m, crash2)
            .map_err(|e| format!("{then}: {e}; files before the recovery: {}", img.listing()))?;
        if again != recovered {
            return Err(format!(
                "{then}: the state differs from a clean recovery's: {:?} instead of {:?}",
                check_histories(histories, &again, Crash::Process),
                check_histories(histories, &recovered, Crash::Process),
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The sweep
// ---------------------------------------------------------------------------------------------

/// Crash points: `count` spread evenly over the workload's `trace`, plus a few calls of each
/// rarer kind (table writes, MANIFEST, CURRENT), which even spreading would mostly miss among
/// the WAL appends, plus every call of the categories in `every`.
fn crash_points(trace: &[FsOp], count: u64, every: &[&'static str]) -> Vec<At> {
    let total = trace.len() as u64;
    let spread: BTreeSet<u64> = (0..count).map(|i| i * total / count.max(1)).collect();
    let mut points: Vec<At> = spread.into_iter().map(At::Call).collect();
    let extra = (count / 6).max(2) as usize;
    let rare = [
        "flush-table",
        "compaction-table",
        "manifest",
        "current",
        "dir-sync",
        "remove-obsolete",
        "hot-slab",
        "hot-journal",
    ];
    for cat in rare {
        let calls = trace.iter().filter(|op| op.category() == cat).count();
        let picked: BTreeSet<usize> = if every.contains(&cat) {
            (0..calls).collect()
        } else {
            (0..extra.min(calls)).map(|j| j * calls / extra).collect()
        };
        points.extend(picked.into_iter().map(|j| At::Nth(cat, j)));
    }
    points
}

/// Runs the sweep on one shape: a fault-free run to learn the calls, then every crash point of
/// [`crash_points`] crashed each way. Returns how many crashes landed in each category of call.
fn sweep(
    shape: Shape,
    steps: usize,
    count: u64,
    every: &[&'static str],
) -> BTreeMap<&'static str, usize> {
    let started = Instant::now();
    let seed = env_u64("TIERKV_CRASH_SEED", 0x7135_c0de);
    let workload = Workload::new(seed, shape, steps);

    let full = workload.run(None, true);
    let trace = full.probe.take_trace();
    let db = full.db.expect("the workload runs without faults");
    // A starved single background worker may still owe compactions when the workload ends.
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    // NB: with a roomy hot store every flush may go to the slabs, leaving nothing to compact.
    let compacts = stats.compactions > 0 || shape.hot_budget >= 1 << 20;
    assert!(
        compacts && stats.flushes > 0,
        "{}: the workload must flush and compact:\n{stats}",
        shape.name
    );
    if shape.hot_partitions > 1 {
        let demoted = stats.hot_tier.as_ref().map_or(0, |h| h.demoted_objects);
        assert!(
            demoted > 0,
            "{}: the workload must demote:\n{stats}",
            shape.name
        );
    }
    if shape.hot_budget > 0 && shape.hot_eviction == HotEviction::Weight {
        let migrated = stats.hot_tier.as_ref().map_or(0, |h| h.migrated_objects);
        assert!(
            migrated > 0,
            "{}: the workload must migrate:\n{stats}",
            shape.name
        );
    }
    let state = read_state(&db, &workload.keys).unwrap();
    let all = |h: &History| History {
        power_durable: h.ops.len(),
        ..h.clone()
    };
    let complete: Vec<History> = full.histories.iter().map(all).collect();
    check_histories(&complete, &state, Crash::Power(CrashPolicy::DropUnsynced))
        .unwrap_or_else(|e| panic!("{}: fault-free run: {e}", shape.name));
    drop_within(Some(db), "clean close");

    let mut rng = SmallRng::seed_from_u64(seed ^ 0xa5a5);
    let mut coverage = BTreeMap::new();
    let mut failures = Failures::default();
    let points = crash_points(&trace, count, every);
    for &at in &points {
        for crash in CRASHES {
            let second = (rng.gen::<u64>(), CRASHES[rng.gen_range(0..CRASHES.len())]);
            let (hit, result) = workload.crash_case(at, crash, second);
            *coverage
                .entry(hit.as_ref().map_or("none", FsOp::category))
                .or_default() += 1;
            if let Err(msg) = result {
                failures.add(msg);
            }
        }
    }
    eprintln!(
        "{} sweep: {} calls in the workload, {} crash points x {} crash kinds in {:?}; fault \
         fired in: {coverage:?}",
        shape.name,
        trace.len(),
        points.len(),
        CRASHES.len(),
        started.elapsed()
    );
    failures.assert_none(&format!("{} crash sweep", shape.name));
    coverage
}

#[test]
fn crash_sweep_recovers_a_durable_prefix() {
    let coverage = sweep(BASE, STEPS, env_u64("TIERKV_CRASH_POINTS", 40), &[]);
    // Tables on the fast tier are flushes and on the capacity tier compactions only in BASE.
    assert_landed(
        &coverage,
        &[
            "wal",
            "flush-table",
            "compaction-table",
            "manifest",
            "current",
        ],
    );
}

/// A sweep of half the steps and crash points of the base one, for a shape that exercises
/// one part of the engine; fails unless a crash landed in each of `categories`.
fn half_sweep(shape: Shape, categories: &[&str]) {
    let points = env_u64("TIERKV_CRASH_POINTS", 40) / 2;
    assert_landed(&sweep(shape, STEPS / 2, points, &[]), categories);
}

/// Fails unless some crash of a sweep landed in each of `categories` of call.
fn assert_landed(coverage: &BTreeMap<&'static str, usize>, categories: &[&str]) {
    for cat in categories {
        assert!(
            coverage.get(cat).is_some_and(|&c| c > 0),
            "no crash landed in {cat}: {coverage:?}"
        );
    }
}

/// The hot store on, below its budget: every small object lives in slabs, each update writes
/// a new slot and frees the old one after its flush commits, and recovery rebuilds the index.
#[test]
fn crash_sweep_hot_tier() {
    let shape = Shape {
        name: "hot-tier",
        hot_budget: 4 << 20,
        ..BASE
    };
    half_sweep(shape, &["hot-slab", "hot-journal"]);
}

/// The hot store over its budget: demotions write L0 tables and clear slots while flushes
/// keep filling it.
#[test]
fn crash_sweep_hot_tier_demoting() {
    let shape = Shape {
        name: "hot-tier-demoting",
        hot_budget: 64 << 10,
        max_value: 400,
        ..BASE
    };
    half_sweep(shape, &["hot-slab"]);
}

/// The hot store over its budget with room-making flushes and demotions merged straight into
/// the bottom run: crashes between the bottom run's edit, the L0 table's and the slot clears
/// lose no acknowledged write and bring back no older value.
#[test]
fn crash_sweep_hot_tier_demoting_into_bottom() {
    let shape = Shape {
        name: "hot-tier-demoting-into-bottom",
        hot_budget: 64 << 10,
        max_value: 400,
        hot_admission: HotAdmission::MakeRoom,
        hot_demote_into_bottom: true,
        ..BASE
    };
    half_sweep(shape, &["hot-slab", "compaction-table"]);
}

/// The hot store over its budget above one sorted run, with L0's file ceiling low: flushes'
/// leftovers and demotions' tables merge within L0 (each output ordered by its oldest input)
/// as well as into the run. No acknowledged write is lost and no older value returns,
/// whichever of the merge's edit, a demotion's table or the slot clears a crash falls between.
#[test]
fn crash_sweep_hot_tier_merging_within_l0() {
    let shape = Shape {
        name: "hot-tier-merging-within-l0",
        hot_budget: 64 << 10,
        // Values as large as their bytes: enough of the data passes the store to fill a
        // run (about 200 merges within L0 in a sweep).
        incompressible: true,
        levels_on_fast: 0,
        one_run: true,
        ..BASE
    };
    half_sweep(shape, &["hot-slab", "compaction-table"]);
}

/// The hot store in three partitions over their budgets: each partition's flush part,
/// demotion and journal are jobs of their own, so a crash can fall between one partition's
/// job and the next one's within the same flush. Recovery finishes or discards each
/// partition's job by its own journal; no acknowledged write is lost, no older value returns.
#[test]
fn crash_sweep_hot_tier_partitioned_demoting() {
    let shape = Shape {
        name: "hot-tier-partitioned-demoting",
        // NB: a third of the one-store sweep's budget each, so every seed's workload demotes.
        hot_budget: 64 << 10,
        hot_partitions: 3,
        max_value: 400,
        ..BASE
    };
    half_sweep(shape, &["hot-slab", "hot-journal"]);
}

/// The hot store with SplitKV's weight policy and split values: values of 400 bytes or more
/// go to the value log, smaller ones to slabs, and past 80% of the budget the lightest
/// objects migrate to L0 tables while flushes keep filling the store. Crashes across those
/// migrations lose no acknowledged write and bring back no older value.
#[test]
fn crash_sweep_hot_tier_weight_migrating() {
    let shape = Shape {
        name: "hot-tier-weight-migrating",
        hot_budget: 64 << 10,
        hot_eviction: HotEviction::Weight,
        split_threshold: 520,
        max_value: 600,
        ..BASE
    };
    half_sweep(shape, &["hot-slab", "hot-journal"]);
}

/// The same with values separated at flush: a flush moves the large values it keeps to the
/// value log and syncs it, the small ones go to slabs, in the same job. Crashes across those
/// flushes and the migrations lose nothing acknowledged and leave no dangling pointer.
#[test]
fn crash_sweep_hot_tier_weight_migrating_values_separated_at_flush() {
    let shape = Shape {
        name: "hot-tier-weight-separating-at-flush",
        hot_budget: 64 << 10,
        hot_eviction: HotEviction::Weight,
        split_threshold: 520,
        split_on_flush: true,
        max_value: 600,
        ..BASE
    };
    half_sweep(shape, &["hot-slab", "hot-journal"]);
}

/// SpanDB's "PL" placement (only the WAL on the fast tier), no compression, one background
/// thread.
#[test]
fn crash_sweep_wal_only_fast_tier() {
    let shape = Shape {
        name: "wal-only-fast",
        levels_on_fast: 0,
        compression: Compression::None,
        background_threads: 1,
        ..BASE
    };
    half_sweep(shape, &[]);
}

/// A fast tier whose budget is too small for the levels it should hold: tables overflow to the
/// capacity tier, and recovery must find each on the tier the MANIFEST names.
#[test]
fn crash_sweep_overflowing_fast_tier() {
    let shape = Shape {
        name: "overflowing-fast",
        levels_on_fast: 2,
        fast_capacity: 1 << 20,
        max_bytes_for_level_base: 1 << 20,
        ..BASE
    };
    half_sweep(shape, &[]);
}

/// Enough data that the MANIFEST outgrows its roll size (a quarter of the WAL reserve, at least
/// 64 KiB) and is replaced while the database runs: every call that writes CURRENT, at the open
/// and at each roll, is a crash point.
#[test]
fn crash_sweep_manifest_roll() {
    let shape = Shape {
        name: "manifest-roll",
        reopens: false,
        key_len: 2000,
        ..BASE
    };
    let coverage = sweep(shape, 600, 8, &["current"]);
    // The open writes CURRENT with four calls (create, write, fdatasync, rename); so does a roll.
    let current = coverage.get("current").copied().unwrap_or(0);
    assert!(
        current > 4 * CRASHES.len(),
        "the MANIFEST never rolled: {coverage:?}"
    );
}

/// Four writers at once, so write groups hold several batches of mixed durability; each
/// writer's keys must come back as a prefix of its own history.
#[test]
fn crash_sweep_concurrent_writers() {
    let shape = Shape {
        name: "4-writers",
        writers: 4,
        ..BASE
    };
    sweep(
        shape,
        STEPS / 4,
        env_u64("TIERKV_CRASH_POINTS", 40) / 2,
        &[],
    );
}

/// The same with overlapping write groups, each inserted into the memtable by several threads
/// (`wal.concurrent_memtable_writes`): recovery still finds a prefix of each writer's history.
#[test]
fn crash_sweep_concurrent_writers_parallel_inserts() {
    let shape = Shape {
        name: "4-writers-parallel-inserts",
        writers: 4,
        parallel_inserts: true,
        ..BASE
    };
    sweep(
        shape,
        STEPS / 4,
        env_u64("TIERKV_CRASH_POINTS", 40) / 2,
        &[],
    );
}

/// One failed call (EIO or ENOSPC; the file system is fine again right after) at each point of
/// the workload, and no crash. From the failure on the database refuses writes (a failed write
/// or sync cannot be retried safely); after a clean close it reopens with everything
/// acknowledged, and what that recovery shows survives a power loss right after it.
#[test]
fn failure_sweep_then_clean_reopen() {
    let started = Instant::now();
    let seed = env_u64("TIERKV_CRASH_SEED", 0x7135_c0de) ^ 0x3;
    let workload = Workload::new(seed, BASE, STEPS / 2);
    let full = workload.run(None, true);
    let trace = full.probe.take_trace();
    drop_within(full.db, "clean close");
    let mut failures = Failures::default();
    let points = crash_points(&trace, env_u64("TIERKV_CRASH_POINTS", 40), &[]);
    let mut fired = 0;
    for (i, &at) in points.iter().enumerate() {
        let kind = [FaultKind::Io, FaultKind::NoSpace][i % 2];
        let cut = workload.run(
            Some(Fault {
                at,
                kind,
                once: true,
            }),
            false,
        );
        let hit = cut.probe.first_failure();
        let case = format!("seed {seed:#x}, {kind:?} once at {at:?} ({hit:?})");
        drop_within(cut.db, &case);
        // NB: background timing changes how many calls a run makes, so a late point may lie
        // past this run's end; its fault must not stay armed for the reopen.
        cut.fault.clear_faults();
        fired += usize::from(hit.is_some());
        if let Err(e) = reopen_then_power_loss(&workload, &cut.fault, &cut.histories) {
            failures.add(format!("{case}: {e}"));
        }
    }
    eprintln!(
        "failure sweep: {} points ({fired} fired) in {:?}",
        points.len(),
        started.elapsed()
    );
    failures.assert_none("failure sweep");
    assert!(
        fired * 4 >= points.len() * 3,
        "only {fired} of {} injected faults fired during the workload",
        points.len()
    );
}

/// Reopens `fs` (no crash before): every acknowledged `Flush` or `Sync` write is there. Then a
/// power loss with no write in between must change nothing.
fn reopen_then_power_loss(
    workload: &Workload,
    fs: &Arc<FaultFs>,
    histories: &[History],
) -> std::result::Result<(), String> {
    let (db, state) = workload.open_and_read(Arc::clone(fs))?;
    check_histories(histories, &state, Crash::Process)?;
    crash_now(
        fs,
        Some(db),
        Crash::Power(CrashPolicy::DropUnsynced),
        "power loss",
    );
    let (db, again) = workload
        .open_and_read(Arc::clone(fs))
        .map_err(|e| format!("after a power loss right after recovery: {e}"))?;
    drop_within(Some(db), "clean close");
    if again != state {
        return Err(format!(
            "a power loss right after recovery changed the state: {:?} instead of {:?}",
            check_histories(histories, &again, Crash::Process),
            check_histories(histories, &state, Crash::Process),
        ));
    }
    Ok(())
}

/// True if the newest WAL of `img` ends in damage: a torn or partly lost unsynced tail.
fn newest_wal_is_torn(img: &FsImage) -> bool {
    let newest = img
        .files
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "log"))
        .max_by(|a, b| a.0.cmp(&b.0));
    let Some((path, bytes)) = newest else {
        return false;
    };
    let mut reader = LogReader::from_bytes(bytes.clone(), path.clone(), RecoveryMode::PointInTime);
    while let Ok(Some(_)) = reader.next_record() {}
    reader.tail().damage.is_some()
}

/// Crashes a recovery after each of its mutating calls, each way: the state after the next
/// recovery must be the one a clean recovery finds. The images are picked so their newest WAL
/// ends in a torn record, the case recovery has to tolerate.
#[test]
fn crash_at_every_step_of_recovery() {
    let seed = env_u64("TIERKV_CRASH_SEED", 0x7135_c0de) ^ 0x2;
    let workload = Workload::new(seed, BASE, 700);
    let full = workload.run(None, true);
    let total = full.probe.take_trace().len() as u64;
    drop_within(full.db, "clean close");
    let mut failures = Failures::default();
    let (mut images, mut cases) = (0, 0);
    let policies = [CrashPolicy::TearLastSector, CrashPolicy::KeepRandomPages];
    // Crash points spread over the run, until four images with a torn tail are found.
    let points = (2..24).map(|j| total * j / 24);
    for (n, policy) in points.flat_map(|n| policies.map(|p| (n, p))) {
        if images == 4 {
            break;
        }
        let crash = Crash::Power(policy);
        let cut = workload.run(Some(Fault::freeze(At::Call(n))), false);
        let case = format!("seed {seed:#x}, first crash at op {n}, {crash:?}");
        crash_now(&cut.fault, cut.db, crash, &case);
        let img = FsImage::take(&cut.fault);
        if !newest_wal_is_torn(&img) {
            continue;
        }
        images += 1;
        let (recovered, open_ops) = match workload.recover_copy(&img, seed) {
            Ok(r) => r,
            Err(e) => {
                failures.add(format!("{case}: {e}"));
                continue;
            }
        };
        if let Err(e) = check_histories(&cut.histories, &recovered, crash) {
            failures.add(format!("{case}: {e}"));
        }
        for m in 0..=open_ops {
            for crash2 in CRASHES {
                cases += 1;
                let then =
                    format!("{case}, then {crash2:?} after op {m} of {open_ops} of the recovery");
                match workload.recover_with_crash(&img, seed + m, m, crash2) {
                    Ok(again) if again == recovered => {}
                    Ok(again) => failures.add(format!(
                        "{then}: the state differs from a clean recovery's: {:?} instead of \
                         {:?}",
                        check_histories(&cut.histories, &again, Crash::Process),
                        check_histories(&cut.histories, &recovered, Crash::Process)
                    )),
                    Err(e) => failures.add(format!(
                        "{then}: {e}; files before the recovery: {}",
                        img.listing()
                    )),
                }
            }
        }
    }
    eprintln!("recovery crash cases: {cases} on {images} images with a torn WAL tail");
    assert!(
        images >= 3,
        "only {images} crash images had a torn WAL tail"
    );
    failures.assert_none("crash during recovery");
}

/// BUG-1 regression: the live WAL ends in a torn record; a recovery crashes after creating and
/// dir-syncing its new WAL but before CURRENT names the new MANIFEST. The next open must still
/// tolerate the torn tail: the new WAL is empty, so nothing proves the torn bytes were synced.
#[test]
fn crash_after_recovery_created_its_wal_keeps_the_db_openable() {
    let (fault, probe, db) = fresh_db(7);
    let mut history = History::default();
    write_acked(&db, &mut history, 7, 60);
    for i in 0..3 {
        let op = single_put(
            format!("tail{i}").as_bytes(),
            &[b'x'; 700],
            Durability::Flush,
        );
        db.write(&op.write_options(), op.batch()).unwrap();
        history.push(1000 + i, &op, true);
    }
    crash_now(
        &fault,
        Some(db),
        Crash::Power(CrashPolicy::TearLastSector),
        "first crash",
    );
    assert!(
        newest_wal_is_torn(&FsImage::take(&fault)),
        "the crash left no torn WAL tail"
    );
    drop(probe);

    let probe = Probe::new(Arc::clone(&fault), false);
    probe.arm(FaultKind::Io, true, |op| {
        op.op == "create" && op.category() == "manifest"
    });
    let reopened = Db::open(options(Arc::new(ProbeFs(Arc::clone(&probe)))));
    assert!(reopened.is_err(), "the fault must stop the recovery");
    let hit = probe.first_failure().expect("fault fired");
    crash_now(
        &fault,
        reopened.ok(),
        Crash::Power(CrashPolicy::DropUnsynced),
        "second crash",
    );
    assert_eq!(hit.category(), "manifest", "fault fired at {hit}");

    let db =
        Db::open(options(fault)).unwrap_or_else(|e| panic!("open after the second crash: {e}"));
    assert_state_is_prefix(
        &db,
        &history,
        history.power_durable,
        "after the second crash",
    );
}

// ---------------------------------------------------------------------------------------------
// Failed syncs, ENOSPC, a full fast tier
// ---------------------------------------------------------------------------------------------

fn fresh_db(seed: u64) -> (Arc<FaultFs>, Arc<Probe>, Db) {
    let fault = FaultFs::new(seed);
    let probe = Probe::new(Arc::clone(&fault), false);
    let db = Db::open(options(Arc::new(ProbeFs(Arc::clone(&probe))))).expect("open");
    (fault, probe, db)
}

/// Writes `count` steps of a fresh plan, asserting each is acknowledged.
fn write_acked(db: &Db, history: &mut History, seed: u64, count: usize) {
    for (s, step) in plan(seed, count, "", false, &BASE).iter().enumerate() {
        if let Step::Write(op) = step {
            db.write(&op.write_options(), op.batch())
                .unwrap_or_else(|e| panic!("seed {seed:#x}, step {s}: {e}"));
            history.push(s, op, true);
        }
    }
}

fn single_put(k: &[u8], v: &[u8], durability: Durability) -> Op {
    Op {
        writes: vec![(k.to_vec(), Some(v.to_vec()))],
        durability,
    }
}

/// Every kind of write must now fail, and none may become visible.
fn assert_writes_refused(db: &Db, case: &str) {
    let w = |d| WriteOptions { durability: d };
    let mut batch = WriteBatch::new();
    batch.put(b"refused-batch", b"x");
    let attempts: Vec<(&str, Result<()>)> = vec![
        (
            "Buffered put",
            db.put(&w(Durability::Buffered), b"refused-1", b"x"),
        ),
        (
            "Flush put",
            db.put(&w(Durability::Flush), b"refused-2", b"x"),
        ),
        (
            "Sync put",
            db.put(&WriteOptions::sync(), b"refused-3", b"x"),
        ),
        ("delete", db.delete(&WriteOptions::sync(), b"key0000")),
        ("batch", db.write(&WriteOptions::sync(), batch)),
        ("flush", db.flush()),
    ];
    for (what, result) in attempts {
        match result {
            // The failure itself comes back as it happened; later writes keep it as the typed
            // cause of the stop.
            Err(Error::Io { .. }) => {}
            Err(Error::Stopped { cause }) => assert!(
                matches!(*cause, Error::Io { .. } | Error::NoSpace { .. }),
                "{case}: {what} stopped by {cause:?}, expected the injected fault, typed"
            ),
            other => {
                panic!("{case}: {what} after the failure returned {other:?}, expected an error")
            }
        }
    }
    for k in ["refused-1", "refused-2", "refused-3", "refused-batch"] {
        assert_eq!(
            db.get(&ReadOptions::default(), k.as_bytes()).unwrap(),
            None,
            "{case}: refused write {k} is visible"
        );
    }
}

fn assert_state_is_prefix(db: &Db, history: &History, must_keep: usize, case: &str) -> usize {
    let state = read_state(db, &history.keys()).unwrap_or_else(|e| panic!("{case}: {e}"));
    check_prefix(history, &state, must_keep).unwrap_or_else(|e| panic!("{case}: {e}"))
}

/// The WAL fdatasync of a `Sync` write fails once; the file system is healthy again right after.
/// The write fails, every later write fails until reopen (a failed fsync cannot be retried:
/// the kernel may have dropped the dirty pages), reads go on, and nothing acknowledged is lost,
/// after a clean reopen or after a power loss.
#[test]
fn failed_wal_fsync_stops_writes_until_reopen() {
    for power_loss in [false, true] {
        let case = format!(
            "failed WAL fsync, then {}",
            if power_loss {
                "power loss"
            } else {
                "clean close"
            }
        );
        let (fault, probe, db) = fresh_db(11);
        let mut history = History::default();
        write_acked(&db, &mut history, 11, 400);
        let last = single_put(b"last-acked", b"synced", Durability::Sync);
        db.write(&WriteOptions::sync(), last.batch()).unwrap();
        history.push(400, &last, true);

        probe.arm(FaultKind::Io, true, |op| {
            op.op == "fdatasync" && op.path.extension().is_some_and(|e| e == "log")
        });
        let failed = single_put(b"failed-sync", b"?", Durability::Sync);
        match db.write(&WriteOptions::sync(), failed.batch()) {
            Err(Error::Io {
                op: "fdatasync",
                path,
                ..
            }) => {
                assert!(
                    path.starts_with(FAST),
                    "{case}: error names {}",
                    path.display()
                )
            }
            other => panic!("{case}: the write whose WAL sync failed returned {other:?}"),
        }
        history.push(401, &failed, false);
        let hit = probe.first_failure().expect("the fault fired");
        assert_eq!(hit.op, "fdatasync", "{case}: fault fired at {hit}");

        assert_writes_refused(&db, &case);
        // Reads go on, and show every acknowledged write.
        assert_state_is_prefix(&db, &history, history.ops.len() - 1, &case);

        if power_loss {
            crash_now(
                &fault,
                Some(db),
                Crash::Power(CrashPolicy::DropUnsynced),
                &case,
            );
        } else {
            drop_within(Some(db), &case);
        }
        let db = Db::open(options(fault.clone())).unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
        let k = assert_state_is_prefix(&db, &history, history.power_durable, &case);
        assert!(
            k + 1 >= history.ops.len(),
            "{case}: recovered only {k} attempts"
        );
        db.put(&WriteOptions::sync(), b"after-reopen", b"ok")
            .unwrap_or_else(|e| panic!("{case}: write after reopen: {e}"));
        db.flush().unwrap();
    }
}

/// A background job fails once at the call `pick` selects: writes stop, reads go on, and a
/// clean reopen finds every acknowledged write.
fn background_failure_case(what: &str, seed: u64, pick: fn(&FsOp) -> bool) {
    let case = format!("failed {what}");
    let (fault, probe, db) = fresh_db(seed);
    let mut history = History::default();
    write_acked(&db, &mut history, seed, 300);
    probe.arm(FaultKind::Io, true, pick);
    // Keep writing (and flushing now and then) until the failure surfaces.
    let mut failed = false;
    for (s, step) in plan(seed + 100, 4000, "", false, &BASE).iter().enumerate() {
        let Step::Write(op) = step else { continue };
        let result = db.write(&op.write_options(), op.batch());
        history.push(300 + s, op, result.is_ok());
        if result.is_err() || (s % 100 == 99 && db.flush().is_err()) {
            failed = true;
            break;
        }
    }
    let hit = probe.first_failure();
    assert!(
        failed,
        "{case}: the failure never surfaced (fault fired at {hit:?})"
    );
    let hit = hit.expect("fault fired");
    assert!(pick(&hit), "{case}: fault fired at {hit}");
    assert_writes_refused(&db, &case);
    let acked = history.acked();
    assert_state_is_prefix(&db, &history, acked, &case);
    drop_within(Some(db), &case);
    let db = Db::open(options(fault)).unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
    // No crash: everything acknowledged with Flush or Sync reached the OS before the failure.
    assert_state_is_prefix(&db, &history, history.process_durable, &case);
    db.put(&WriteOptions::sync(), b"after-reopen", b"ok")
        .unwrap();
    db.flush().unwrap();
}

#[test]
fn failed_compaction_write_stops_writes_until_reopen() {
    background_failure_case("compaction table write", 21, |op| {
        op.op == "write" && op.category() == "compaction-table"
    });
}

#[test]
fn failed_flush_table_create_stops_writes_until_reopen() {
    background_failure_case("flush table create", 22, |op| {
        op.op == "create" && op.category() == "flush-table"
    });
}

/// BUG-2 regression: the edit reached the MANIFEST file but its fsync failed; the flushed table
/// it lists must not be deleted, or the database never opens again.
#[test]
fn failed_manifest_fsync_keeps_the_db_openable() {
    background_failure_case("MANIFEST fsync", 20, |op| {
        op.op == "fdatasync" && op.category() == "manifest"
    });
}

/// A full tier, also as the typed cause of a stop (a background job hit ENOSPC first).
fn is_out_of_space(e: &Error) -> bool {
    e.is_no_space()
}

/// A put of a new key with 400 random bytes (incompressible, so tables take real space).
fn growing_put(rng: &mut SmallRng, i: usize, durability: Durability) -> Op {
    let v: Vec<u8> = (0..400).map(|_| rng.gen_range(b'0'..=b'z')).collect();
    single_put(format!("grow{i:07}").as_bytes(), &v, durability)
}

/// ENOSPC on a tier: the write that meets it fails with an out-of-space error, the database
/// stays readable, and after a reopen with room everything acknowledged is there.
#[test]
fn out_of_space_is_reported_and_recoverable() {
    for (dir, limit) in [(FAST, 160 << 10), (CAPACITY, 256 << 10)] {
        let case = format!("{dir} limited to {limit} bytes");
        let (fault, _probe, db) = fresh_db(31);
        fault.set_space_limit(Path::new(dir), Some(limit));
        let mut rng = SmallRng::seed_from_u64(31);
        let mut history = History::default();
        let mut first_error = None;
        for i in 0..20_000 {
            let durability = [Durability::Flush, Durability::Sync, Durability::Buffered][i % 3];
            let op = growing_put(&mut rng, i, durability);
            let result = db.write(&WriteOptions { durability }, op.batch());
            history.push(i, &op, result.is_ok());
            if let Err(e) = result {
                first_error = Some(e);
                break;
            }
        }
        let err =
            first_error.unwrap_or_else(|| panic!("{case}: 20000 writes never ran out of space"));
        assert!(
            is_out_of_space(&err),
            "{case}: first failed write returned {err:?}"
        );
        assert_writes_refused(&db, &case);
        let acked = history.acked();
        assert_state_is_prefix(&db, &history, acked, &case);
        drop_within(Some(db), &case);

        fault.set_space_limit(Path::new(dir), None);
        let db = Db::open(options(fault.clone()))
            .unwrap_or_else(|e| panic!("{case}: reopen with room: {e}"));
        assert_state_is_prefix(&db, &history, history.process_durable, &case);
        db.put(&WriteOptions::sync(), b"after-reopen", b"ok")
            .unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(
            db.get(&ReadOptions::default(), b"after-reopen").unwrap(),
            Some(b"ok".to_vec())
        );
    }
}

/// Fills a database whose fast tier has a 1 MiB budget and L1 wants four times that; with
/// `device_limit`, the fast tier's directory is also a device of exactly the budget's size.
/// Every write must succeed: tables that prefer the fast tier go to the capacity tier instead.
fn fill_small_fast_tier(seed: u64, device_limit: bool) {
    const BUDGET: u64 = 1 << 20;
    let fault = FaultFs::new(seed);
    fault.create_dir_all(Path::new(FAST)).unwrap();
    if device_limit {
        fault.set_space_limit(Path::new(FAST), Some(BUDGET));
    }
    let mut opts = options(fault.clone());
    opts.tiers[0].capacity = BUDGET;
    opts.placement.levels_on_fast = 2;
    opts.compaction.max_bytes_for_level_base = 4 << 20;
    opts.validate().unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut history = History::default();
    // About 6 MB of distinct keys: far more than the fast tier's budget.
    for i in 0..14_000 {
        let op = growing_put(&mut rng, i, Durability::Flush);
        db.write(&op.write_options(), op.batch())
            .unwrap_or_else(|e| {
                panic!(
                    "seed {seed}, put {i}: write failed with the fast tier full: {e}\nfast tier \
                     holds {}\n{}",
                    FsImage::take(&fault).listing_of(Path::new(FAST)),
                    db.stats()
                )
            });
        history.push(i, &op, true);
    }
    db.flush().unwrap();
    let stats = db.stats();
    let overflowed = db
        .live_files()
        .iter()
        .filter(|f| f.level < 2 && f.tier == "capacity")
        .count();
    assert!(
        overflowed > 0,
        "no L0/L1 table went to the capacity tier:\n{stats}"
    );
    assert!(
        stats.tiers[0].bytes_used <= BUDGET - opts.wal_reserve(),
        "fast tier holds {} bytes of tables, over its budget minus the WAL reserve\n{stats}",
        stats.tiers[0].bytes_used
    );
    assert_state_is_prefix(&db, &history, history.ops.len(), "full fast tier");
    drop_within(Some(db), "full fast tier");
    let db = Db::open(opts).unwrap();
    assert_state_is_prefix(&db, &history, history.ops.len(), "full fast tier, reopened");
}

/// Tier 0's byte budget is small: tables that prefer the fast tier go to the capacity tier
/// instead, the budget minus the WAL reserve bounds the fast tier's tables, no write fails.
#[test]
fn full_fast_tier_budget_moves_tables_to_capacity() {
    fill_small_fast_tier(41, false);
}

/// The same with a fast-tier device of exactly the budget: WAL, MANIFEST and tables together
/// must fit in it. The peak depends on how flushes and compactions interleave, so several
/// seeds run at once: the contention makes the unlucky interleavings common.
#[test]
fn fast_tier_files_stay_within_its_budget() {
    for round in 0..3 {
        std::thread::scope(|scope| {
            for seed in 41 + 6 * round..47 + 6 * round {
                scope.spawn(move || fill_small_fast_tier(seed, true));
            }
        });
    }
}

/// A new database's tier directories are created durably: a power loss right after the first
/// synced write keeps the directories, and so the write, in every WAL mode. (Before the fix the
/// directories' own entries were never synced into their parents, so all of it could vanish.)
#[test]
fn a_new_databases_directories_survive_power_loss() {
    for mode in [WalMode::Group, WalMode::Parallel] {
        let fs = FaultFs::new(5);
        let opts = || {
            Options::builder()
                .two_tiers("/new/deep/fast", "/new/other/capacity", u64::MAX)
                .wal(mode)
                .fs(Arc::clone(&fs) as Arc<dyn Fs>)
                .build()
                .unwrap()
        };
        let db = Db::open(opts()).unwrap();
        db.put(&WriteOptions::sync(), b"first", b"write").unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        drop(db);
        let db = Db::open(opts()).unwrap_or_else(|e| panic!("{mode:?}: reopen: {e}"));
        assert_eq!(
            db.get(&ReadOptions::default(), b"first")
                .unwrap()
                .as_deref(),
            Some(&b"write"[..]),
            "{mode:?}"
        );
    }
}

/// Append WAL: a batch too big for the active, still empty log (the batch limit follows
/// `wal.group_bytes`, twice the memtable by default, a log is sized for one memtable) switches
/// to a new log sized for it. The empty log is removed then, so recovery, which reads a live
/// log without records before a newer one as a crash's loss, replays the newer one after a
/// process kill.
#[test]
fn a_batch_bigger_than_an_empty_append_log_survives_a_process_kill() {
    let fs = FaultFs::new(9);
    let opts = || {
        small(WalMode::Append, 1 << 20)
            .fault_tiers()
            .fs(Arc::clone(&fs) as Arc<dyn Fs>)
            .build()
            .unwrap()
    };
    let db = Db::open(opts()).unwrap();
    let big = vec![b'b'; 1536 << 10];
    db.put(&WriteOptions::default(), b"big", &big).unwrap();
    db.put(&WriteOptions::default(), b"small", b"after")
        .unwrap();
    fs.process_crash();
    drop(db);
    let db = Db::open(opts()).unwrap();
    let get = |k: &[u8]| db.get(&ReadOptions::default(), k).unwrap();
    assert_eq!(get(b"big").map(|v| v.len()), Some(big.len()));
    assert_eq!(get(b"small").as_deref(), Some(&b"after"[..]));
}

//! [`FaultFs`]: an in-memory [`Fs`] for tests that models a page cache over a device, so a test
//! can cut the power at any point, fail the Nth operation or run a directory out of space.
//!
//! Model and invariants:
//! - A file (an "inode", shared by every path and handle that names it) has *current* bytes
//!   (what reads see, what a process crash keeps) and *durable* bytes (what the device held at
//!   the file's last `sync`). `data[..stable] == durable[..stable]` always; `dirty` holds the
//!   4096-byte pages written since the last `sync`, `last_sector` the 512-byte sector holding the
//!   last byte written since then.
//! - There are two namespaces, path -> file: *current* (what `open`/`exists`/`list_dir` see; a
//!   create, rename or remove changes it at once) and *durable* (what survives a power loss).
//!   `sync_dir(d)` copies the current entries of `d`, and only those, into the durable one.
//! - Directories have a current and a durable set too: `create_dir_all` adds to the current
//!   one; a directory's entry becomes durable when its parent is synced (`sync_dir(parent)`).
//!   A power loss keeps only directories whose every ancestor is durable, and only files whose
//!   directory survives. Directories are never removed.
//! - [`FaultFs::crash`] rebuilds the file system from the durable namespace, each file's bytes
//!   chosen by a [`CrashPolicy`] from its durable bytes plus some of its unsynced writes;
//!   [`FaultFs::process_crash`] rebuilds it from the current namespace and bytes. Either way
//!   every open handle is dead from then on (each of its operations is an `Io` error) and every
//!   lock is released; the fault and space-limit settings stay until cleared.
//! - The *mutating* operations are `create`, `append`, `sync`, `rename`, `remove_file` and
//!   `sync_dir`. Each attempt counts in [`FaultFs::op_count`] and is where an injected fault
//!   fires; a failed operation changes nothing.
//! - A space limit on a directory bounds the sum of the current sizes of the files whose current
//!   path is under it; an `append` that would pass it fails with `ENOSPC` and writes nothing.
//! - Errors carry real errno values (`ENOENT`, `EISDIR`, `EIO`, `ENOSPC`, ...), so `ENOSPC` has
//!   the kind [`std::io::ErrorKind::StorageFull`], as on a real file system.
//! - Every random choice comes from one RNG seeded by [`FaultFs::new`], and every iteration is
//!   in path order, so the same seed and the same operations give the same crash outcome.
//!
//! Lock order: the file-system state, then a file's bytes; no lock is taken the other way round.

use super::{FileLock, Fs, PositionalFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use parking_lot::{Mutex, MutexGuard};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Unsynced writes are lost or kept a page at a time.
const PAGE: usize = 4096;
/// The unit a power loss tears.
const SECTOR: usize = 512;

/// What a power loss does to the bytes written since a file's last `sync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPolicy {
    /// Every unsynced byte is lost.
    DropUnsynced,
    /// Each unsynced page survives or not, independently. A lost page past the durable end
    /// reads as zeros when a later page survived; otherwise the file ends with the last
    /// surviving byte.
    KeepRandomPages,
    /// Every unsynced byte survives except the last sector written, which is torn: its second
    /// half reads as zeros, or the file ends inside it.
    TearLastSector,
    /// Each write (`append` or `write_at`) since the last `sync` survives whole or not at all,
    /// independently of the others, in the order they were made: a zoned device's completed
    /// but unflushed appends. A lost write past the durable end reads as zeros when a later
    /// write survived.
    KeepRandomWrites,
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`: the device failed.
    Io,
    /// `ENOSPC`: the device is full (kind [`std::io::ErrorKind::StorageFull`]).
    NoSpace,
}

impl FaultKind {
    fn to_io_error(self) -> io::Error {
        match self {
            FaultKind::Io => os_error(libc::EIO),
            FaultKind::NoSpace => os_error(libc::ENOSPC),
        }
    }
}

fn os_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

fn dead_handle() -> io::Error {
    io::Error::other("FaultFs: handle opened before a simulated crash")
}

/// One file's bytes, shared by every path and handle naming it.
type Node = Arc<Mutex<FileData>>;

#[derive(Default)]
struct FileData {
    /// What reads see.
    data: Vec<u8>,
    /// What the device held at the last `sync`.
    durable: Vec<u8>,
    // INVARIANT: stable <= min(data.len(), durable.len()) and data[..stable] == durable[..stable].
    stable: usize,
    /// Pages written since the last `sync`.
    dirty: BTreeSet<usize>,
    /// The sector of the last byte written since the last `sync`.
    last_sector: Option<usize>,
    /// Every write since the last `sync`: offset and bytes.
    unsynced: Vec<(usize, Vec<u8>)>,
}

impl FileData {
    /// A file whose bytes are all durable.
    fn settled(bytes: Vec<u8>) -> Node {
        Arc::new(Mutex::new(FileData {
            data: bytes.clone(),
            stable: bytes.len(),
            durable: bytes,
            ..FileData::default()
        }))
    }

    fn append(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let start = self.data.len();
        let end = start + bytes.len();
        self.data.extend_from_slice(bytes);
        self.unsynced.push((start, bytes.to_vec()));
        self.dirty.extend(start / PAGE..=(end - 1) / PAGE);
        self.last_sector = Some((end - 1) / SECTOR);
    }

    /// Overwrites (and, past the end, extends) bytes at `offset`.
    fn write_at(&mut self, offset: usize, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let end = offset + bytes.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset..end].copy_from_slice(bytes);
        self.unsynced.push((offset, bytes.to_vec()));
        // NB: bytes from `offset` on may now differ from the durable ones.
        self.stable = self.stable.min(offset);
        self.dirty.extend(offset / PAGE..=(end - 1) / PAGE);
        self.last_sector = Some((end - 1) / SECTOR);
    }

    /// `O_TRUNC`: empties the current bytes; the durable ones stay until the next `sync`.
    fn truncate(&mut self) {
        self.data.clear();
        self.stable = 0;
        self.last_sector = None;
        self.unsynced.clear();
    }

    fn sync(&mut self) {
        self.durable.truncate(self.stable);
        self.durable.extend_from_slice(&self.data[self.stable..]);
        self.stable = self.data.len();
        self.dirty.clear();
        self.last_sector = None;
        self.unsynced.clear();
    }

    /// The bytes a power loss leaves under `policy`.
    fn after_power_loss(&self, policy: CrashPolicy, rng: &mut SmallRng) -> Vec<u8> {
        match policy {
            CrashPolicy::DropUnsynced => self.durable.clone(),
            CrashPolicy::KeepRandomPages => self.keep_random_pages(rng),
            CrashPolicy::TearLastSector => self.tear_last_sector(rng),
            CrashPolicy::KeepRandomWrites => self.keep_random_writes(rng),
        }
    }

    fn keep_random_writes(&self, rng: &mut SmallRng) -> Vec<u8> {
        let mut out = self.durable.clone();
        for (offset, bytes) in &self.unsynced {
            let end = offset + bytes.len();
            if rng.gen_bool(0.5) {
                if out.len() < end {
                    out.resize(end, 0);
                }
                out[*offset..end].copy_from_slice(bytes);
            }
        }
        out
    }

    fn keep_random_pages(&self, rng: &mut SmallRng) -> Vec<u8> {
        let mut out = self.durable.clone();
        for &page in &self.dirty {
            let lo = page * PAGE;
            let hi = (lo + PAGE).min(self.data.len());
            // NB: one draw per dirty page, even one a truncation emptied, keeps outcomes stable.
            if rng.gen_bool(0.5) && lo < hi {
                if out.len() < hi {
                    out.resize(hi, 0);
                }
                out[lo..hi].copy_from_slice(&self.data[lo..hi]);
            }
        }
        out
    }

    fn tear_last_sector(&self, rng: &mut SmallRng) -> Vec<u8> {
        let mut out = self.data.clone();
        let Some(sector) = self.last_sector else {
            return out;
        };
        // Bytes that were already durable cannot be torn.
        let start = (sector * SECTOR).max(self.stable);
        let end = (sector * SECTOR + SECTOR).min(out.len());
        let half = (sector * SECTOR + SECTOR / 2).max(start);
        // NB: a crash never shortens a file below its durable size: a torn overwrite inside
        // it (a preallocated WAL area) tears in place.
        let cut_from = start.max(self.durable.len());
        if half < end && rng.gen_bool(0.5) {
            out[half..end].fill(0);
        } else if cut_from < end {
            out.truncate(rng.gen_range(cut_from..end));
        } else if half < end {
            out[half..end].fill(0);
        }
        out
    }

    /// Flips a bit in both the current and the durable bytes; false if `offset` is in neither.
    fn flip_bit(&mut self, offset: usize, mask: u8) -> bool {
        let mut hit = false;
        for bytes in [&mut self.data, &mut self.durable] {
            if let Some(b) = bytes.get_mut(offset) {
                *b ^= mask;
                hit = true;
            }
        }
        hit
    }
}

/// A pending injected fault.
struct Fault {
    /// Mutating operations still to succeed before the fault fires.
    remaining: u64,
    kind: FaultKind,
    /// Disarm after firing once; otherwise every later mutating operation fails.
    once: bool,
}

/// Everything behind the one lock.
struct State {
    /// The current namespace.
    files: BTreeMap<PathBuf, Node>,
    /// The namespace a power loss keeps.
    durable_files: BTreeMap<PathBuf, Node>,
    dirs: BTreeSet<PathBuf>,
    /// The directories a power loss keeps (see the module doc).
    durable_dirs: BTreeSet<PathBuf>,
    /// Bumped by each crash; a handle from an older epoch is dead.
    epoch: u64,
    /// Held locks, path -> the token of the guard holding it.
    locks: BTreeMap<PathBuf, u64>,
    next_token: u64,
    fault: Option<Fault>,
    space_limits: BTreeMap<PathBuf, u64>,
    ops: u64,
    syncs: u64,
    write_backs: u64,
    /// Positional files ask for the emulated submission ring (see [`FaultFs::emulate_ring`]).
    emulate_ring: bool,
    rng: SmallRng,
}

impl State {
    fn new(seed: u64) -> Self {
        State {
            files: BTreeMap::new(),
            durable_files: BTreeMap::new(),
            dirs: BTreeSet::from([PathBuf::from("/")]),
            durable_dirs: BTreeSet::from([PathBuf::from("/")]),
            epoch: 0,
            locks: BTreeMap::new(),
            next_token: 0,
            fault: None,
            space_limits: BTreeMap::new(),
            ops: 0,
            syncs: 0,
            write_backs: 0,
            emulate_ring: false,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Counts a mutating operation and fires the injected fault if it is due.
    fn begin_mutation(&mut self, op: &'static str, path: &Path) -> Result<()> {
        self.ops += 1;
        let Some(fault) = &mut self.fault else {
            return Ok(());
        };
        if fault.remaining > 0 {
            fault.remaining -= 1;
            return Ok(());
        }
        let err = fault.kind.to_io_error();
        if fault.once {
            self.fault = None;
        }
        Err(Error::io(op, path, err))
    }

    fn dir_exists(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || self.dirs.contains(dir)
    }

    /// `ENOENT` if the directory that would hold `path` does not exist.
    fn check_parent(&self, op: &'static str, path: &Path) -> Result<()> {
        match path.parent() {
            Some(dir) if !self.dir_exists(dir) => Err(Error::io(op, path, os_error(libc::ENOENT))),
            _ => Ok(()),
        }
    }

    /// `EISDIR` if `path` names a directory.
    fn check_not_dir(&self, op: &'static str, path: &Path) -> Result<()> {
        if self.dirs.contains(path) {
            return Err(Error::io(op, path, os_error(libc::EISDIR)));
        }
        Ok(())
    }

    /// The file at `path` in the current namespace.
    fn lookup(&self, op: &'static str, path: &Path) -> Result<Node> {
        self.check_not_dir(op, path)?;
        let node = self.files.get(path).cloned();
        node.ok_or_else(|| Error::io(op, path, os_error(libc::ENOENT)))
    }

    /// The file at `path`, created empty (not yet durable) if missing.
    fn lookup_or_create(&mut self, op: &'static str, path: &Path) -> Result<Node> {
        self.check_parent(op, path)?;
        self.check_not_dir(op, path)?;
        let node = self.files.entry(path.to_path_buf()).or_default();
        Ok(node.clone())
    }

    /// `ENOSPC` if appending `extra` bytes to `path` would pass a space limit.
    fn check_space(&self, path: &Path, extra: usize) -> Result<()> {
        for (dir, &limit) in &self.space_limits {
            if path.starts_with(dir) && self.bytes_under(dir) + extra as u64 > limit {
                return Err(Error::io("write", path, os_error(libc::ENOSPC)));
            }
        }
        Ok(())
    }

    fn bytes_under(&self, dir: &Path) -> u64 {
        let under = self.files.iter().filter(|(p, _)| p.starts_with(dir));
        under.map(|(_, node)| node.lock().data.len() as u64).sum()
    }

    /// The current entries directly inside `dir`.
    fn children<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = (&'a PathBuf, &'a Node)> {
        self.files
            .iter()
            .filter(move |(p, _)| p.parent() == Some(dir))
    }

    /// Makes `namespace` and `dirs` both the current and the durable ones, kills every handle
    /// and lock.
    fn restart(&mut self, namespace: BTreeMap<PathBuf, Node>, dirs: BTreeSet<PathBuf>) {
        self.files = namespace.clone();
        self.durable_files = namespace;
        self.dirs = dirs.clone();
        self.durable_dirs = dirs;
        self.epoch += 1;
        self.locks.clear();
    }
}

/// Fresh files for `namespace`, each holding `bytes(old file)`; paths that named the same file
/// still do.
fn rebuild(
    namespace: &BTreeMap<PathBuf, Node>,
    mut bytes: impl FnMut(&FileData) -> Vec<u8>,
) -> BTreeMap<PathBuf, Node> {
    let mut fresh: HashMap<*const Mutex<FileData>, Node> = HashMap::new();
    let mut out = BTreeMap::new();
    for (path, node) in namespace {
        let new = fresh
            .entry(Arc::as_ptr(node))
            .or_insert_with(|| FileData::settled(bytes(&node.lock())));
        out.insert(path.clone(), new.clone());
    }
    out
}

/// An in-memory file system that can crash, fail operations and run out of space.
pub struct FaultFs {
    shared: Arc<Mutex<State>>,
}

impl FaultFs {
    /// An empty file system (only `/` exists) whose random choices come from `seed`.
    pub fn new(seed: u64) -> Arc<FaultFs> {
        Arc::new(FaultFs {
            shared: Arc::new(Mutex::new(State::new(seed))),
        })
    }

    /// Power loss: only durable directory entries remain, each file holding its durable bytes
    /// plus the unsynced writes `policy` keeps. Open handles die and locks are released.
    pub fn crash(&self, policy: CrashPolicy) {
        let mut state = self.shared.lock();
        let state = &mut *state;
        let dirs: BTreeSet<PathBuf> = state
            .durable_dirs
            .iter()
            .filter(|d| {
                d.ancestors()
                    .skip(1)
                    .all(|a| a.as_os_str().is_empty() || state.durable_dirs.contains(a))
            })
            .cloned()
            .collect();
        let mut kept = state.durable_files.clone();
        kept.retain(|p, _| {
            p.parent()
                .is_some_and(|d| d.as_os_str().is_empty() || dirs.contains(d))
        });
        let rng = &mut state.rng;
        let survivors = rebuild(&kept, |f| f.after_power_loss(policy, rng));
        state.restart(survivors, dirs);
    }

    /// Process kill (`kill -9`): everything handed to the file system survives and becomes
    /// durable. Open handles die and locks are released.
    pub fn process_crash(&self) {
        let mut state = self.shared.lock();
        let survivors = rebuild(&state.files, |f| f.data.clone());
        let dirs = state.dirs.clone();
        state.restart(survivors, dirs);
    }

    /// With `on`, the parallel WAL writes this file system's positional files through an
    /// emulated submission ring (several durable writes in flight, carried out in a random
    /// order), the path it takes through io_uring on a real device, instead of one `pwrite`
    /// at a time.
    pub fn emulate_ring(&self, on: bool) {
        self.shared.lock().emulate_ring = on;
    }

    /// After `n` more mutating operations succeed, the next one fails with `kind`; with `once`
    /// only that one, otherwise every one from then on. Replaces any pending fault.
    pub fn fail_after(&self, n: u64, kind: FaultKind, once: bool) {
        let fault = Fault {
            remaining: n,
            kind,
            once,
        };
        self.shared.lock().fault = Some(fault);
    }

    /// Removes the pending or sticky fault.
    pub fn clear_faults(&self) {
        self.shared.lock().fault = None;
    }

    /// Bounds the total current size of the files under `dir`; `None` lifts the bound.
    pub fn set_space_limit(&self, dir: &Path, bytes: Option<u64>) {
        let mut state = self.shared.lock();
        match bytes {
            Some(limit) => state.space_limits.insert(dir.to_path_buf(), limit),
            None => state.space_limits.remove(dir),
        };
    }

    /// Mutating operations attempted so far, failed ones included.
    pub fn op_count(&self) -> u64 {
        self.shared.lock().ops
    }

    /// Successful `sync` and `sync_dir` calls so far.
    pub fn sync_count(&self) -> u64 {
        self.shared.lock().syncs
    }

    /// `write_back` hints taken so far. A write-back changes nothing here: unlike a `sync` it
    /// promises no durability, so its pages stay unsynced in the crash model.
    pub fn write_back_count(&self) -> u64 {
        self.shared.lock().write_backs
    }

    /// Flips bit `bit` of the byte at `offset` of `path`, in its current and durable bytes.
    ///
    /// # Panics
    /// If `path` is not a file, `bit > 7`, or `offset` is past the end of the file.
    pub fn flip_bit(&self, path: &Path, offset: u64, bit: u8) {
        assert!(bit < 8, "flip_bit: bit {bit} is not in 0..8");
        let state = self.shared.lock();
        let node = state.files.get(path);
        let node = node.unwrap_or_else(|| panic!("flip_bit: no file {}", path.display()));
        let hit = node.lock().flip_bit(offset as usize, 1 << bit);
        assert!(
            hit,
            "flip_bit: offset {offset} is past the end of {}",
            path.display()
        );
    }

    /// The current bytes of `path`, or `None` if it is not a file.
    pub fn file_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        let node = state.files.get(path)?;
        let bytes = node.lock().data.clone();
        Some(bytes)
    }

    /// Makes `path` hold exactly `data`, durably (entry and bytes), creating it if missing.
    /// Counts as no operation and ignores faults and space limits.
    ///
    /// # Panics
    /// If the parent directory is missing or `path` is a directory.
    pub fn write_raw(&self, path: &Path, data: &[u8]) {
        let mut state = self.shared.lock();
        let node = match state.lookup_or_create("write", path) {
            Ok(node) => node,
            Err(e) => panic!("write_raw: {e}"),
        };
        *node.lock() = FileData {
            data: data.to_vec(),
            durable: data.to_vec(),
            stable: data.len(),
            ..FileData::default()
        };
        state.durable_files.insert(path.to_path_buf(), node);
    }

    fn handle(&self, state: &State, node: Node, path: &Path) -> Handle {
        Handle {
            shared: self.shared.clone(),
            node,
            path: path.to_path_buf(),
            epoch: state.epoch,
        }
    }
}

impl Fs for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut state = self.shared.lock();
        state.begin_mutation("create", path)?;
        let node = state.lookup_or_create("create", path)?;
        node.lock().truncate();
        let handle = self.handle(&state, node, path);
        Ok(Box::new(FaultWritable { handle, size: 0 }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let state = self.shared.lock();
        let node = state.lookup("open", path)?;
        let size = node.lock().data.len() as u64;
        let handle = self.handle(&state, node, path);
        Ok(Box::new(FaultWritable { handle, size }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let state = self.shared.lock();
        let node = state.lookup("open", path)?;
        let size = node.lock().data.len() as u64;
        let handle = self.handle(&state, node, path);
        Ok(Arc::new(FaultRandomAccess { handle, size }))
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.shared.lock();
        state.files.contains_key(path) || state.dirs.contains(path)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let state = self.shared.lock();
        if !state.dir_exists(dir) {
            let errno = if state.files.contains_key(dir) {
                libc::ENOTDIR
            } else {
                libc::ENOENT
            };
            return Err(Error::io("readdir", dir, os_error(errno)));
        }
        let files = state.children(dir).map(|(p, _)| p);
        let subdirs = state.dirs.iter().filter(|p| p.parent() == Some(dir));
        let names = files.chain(subdirs).filter_map(|p| p.file_name());
        Ok(names.map(|n| n.to_string_lossy().into_owned()).collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut state = self.shared.lock();
        let missing: Vec<&Path> = dir.ancestors().filter(|a| !state.dir_exists(a)).collect();
        if let Some(file) = missing.iter().find(|a| state.files.contains_key(**a)) {
            return Err(Error::io("mkdir", file, os_error(libc::ENOTDIR)));
        }
        let missing: Vec<PathBuf> = missing.into_iter().map(Path::to_path_buf).collect();
        state.dirs.extend(missing);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut state = self.shared.lock();
        state.begin_mutation("remove", path)?;
        state.lookup("remove", path)?;
        state.files.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.shared.lock();
        state.begin_mutation("rename", from)?;
        let node = state.lookup("rename", from)?;
        state.check_parent("rename", to)?;
        state.check_not_dir("rename", to)?;
        state.files.remove(from);
        state.files.insert(to.to_path_buf(), node);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.shared.lock();
        state.begin_mutation("fsync-dir", dir)?;
        if !state.dir_exists(dir) {
            return Err(Error::io("fsync-dir", dir, os_error(libc::ENOENT)));
        }
        let entries: Vec<(PathBuf, Node)> = state
            .children(dir)
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect();
        state.durable_files.retain(|p, _| p.parent() != Some(dir));
        state.durable_files.extend(entries);
        let subdirs: Vec<PathBuf> = state
            .dirs
            .iter()
            .filter(|d| d.parent() == Some(dir))
            .cloned()
            .collect();
        state.durable_dirs.extend(subdirs);
        state.syncs += 1;
        Ok(())
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let node = self.shared.lock().lookup("stat", path)?;
        let size = node.lock().data.len() as u64;
        Ok(size)
    }

    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        let mut state = self.shared.lock();
        state.begin_mutation("open", path)?;
        let node = state.lookup_or_create("open", path)?;
        let size = node.lock().data.len() as u64;
        if size < len {
            state.check_space(path, (len - size) as usize)?;
            let mut file = node.lock();
            file.append(&vec![0u8; (len - size) as usize]);
            file.sync();
        }
        let size = size.max(len);
        let handle = self.handle(&state, node, path);
        Ok(Arc::new(FaultPositional { handle, size }))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.shared.lock();
        state.lookup_or_create("open", path)?;
        if state.locks.contains_key(path) {
            return Err(Error::Locked(path.to_path_buf()));
        }
        state.next_token += 1;
        let token = state.next_token;
        state.locks.insert(path.to_path_buf(), token);
        Ok(Box::new(FaultLock {
            shared: self.shared.clone(),
            path: path.to_path_buf(),
            token,
        }))
    }
}

/// What every open file holds: the file, and the epoch it was opened in.
struct Handle {
    shared: Arc<Mutex<State>>,
    node: Node,
    path: PathBuf,
    epoch: u64,
}

impl Handle {
    /// The state, if this handle outlived no crash.
    fn live_state(&self, op: &'static str) -> Result<MutexGuard<'_, State>> {
        let state = self.shared.lock();
        if state.epoch != self.epoch {
            return Err(Error::io(op, &self.path, dead_handle()));
        }
        Ok(state)
    }
}

struct FaultWritable {
    handle: Handle,
    size: u64,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let h = &self.handle;
        let mut state = h.live_state("write")?;
        state.begin_mutation("write", &h.path)?;
        // NB: the limit is checked against the path the file was opened by.
        state.check_space(&h.path, data.len())?;
        h.node.lock().append(data);
        self.size += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let h = &self.handle;
        let mut state = h.live_state("fdatasync")?;
        state.begin_mutation("fdatasync", &h.path)?;
        h.node.lock().sync();
        state.syncs += 1;
        Ok(())
    }

    fn write_back(&mut self) {
        if let Ok(mut state) = self.handle.live_state("write back") {
            state.write_backs += 1;
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.handle.live_state("close").map(drop)
    }
}

struct FaultPositional {
    handle: Handle,
    size: u64,
}

impl PositionalFile for FaultPositional {
    fn emulates_ring(&self) -> bool {
        self.handle.live_state("stat").is_ok_and(|s| s.emulate_ring)
    }

    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()> {
        let h = &self.handle;
        let mut state = h.live_state("pwrite")?;
        state.begin_mutation("pwrite", &h.path)?;
        if offset + data.len() as u64 > self.size {
            let err = io::Error::new(io::ErrorKind::InvalidInput, "write past the file's end");
            return Err(Error::io("pwrite", &h.path, err));
        }
        let mut file = h.node.lock();
        file.write_at(offset as usize, data);
        if durable {
            file.sync();
            state.syncs += 1;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let h = &self.handle;
        let mut state = h.live_state("fdatasync")?;
        state.begin_mutation("fdatasync", &h.path)?;
        h.node.lock().sync();
        state.syncs += 1;
        Ok(())
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let h = &self.handle;
        let _state = h.live_state("read")?;
        let file = h.node.lock();
        read_into(&file.data, offset, buf).map_err(|e| Error::io("read", &h.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.handle.path
    }
}

/// Copies the bytes at `offset` of `data` into `buf`; `UnexpectedEof` past the end.
fn read_into(data: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let src = start
        .checked_add(buf.len())
        .and_then(|end| data.get(start..end));
    let Some(src) = src else {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "read past end of file",
        ));
    };
    buf.copy_from_slice(src);
    Ok(())
}

struct FaultRandomAccess {
    handle: Handle,
    size: u64,
}

impl RandomAccessFile for FaultRandomAccess {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let h = &self.handle;
        let _state = h.live_state("read")?;
        let file = h.node.lock();
        read_into(&file.data, offset, buf).map_err(|e| Error::io("read", &h.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// Releases its lock on drop, unless a crash already did (and someone may hold it anew).
struct FaultLock {
    shared: Arc<Mutex<State>>,
    path: PathBuf,
    token: u64,
}

impl FileLock for FaultLock {}

impl Drop for FaultLock {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        if state.locks.get(&self.path) == Some(&self.token) {
            state.locks.remove(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{create_dir_all_durable, read_file, write_file_atomic};

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    /// A file system with `/db` created and made durable.
    fn fresh(seed: u64) -> Arc<FaultFs> {
        let fs = FaultFs::new(seed);
        create_dir_all_durable(&*fs, p("/db")).unwrap();
        fs
    }

    #[test]
    fn a_new_directory_needs_its_parent_synced_to_survive_power_loss() {
        let fs = FaultFs::new(1);
        fs.create_dir_all(p("/a/b")).unwrap();
        write_file_atomic(&*fs, p("/a/b/f"), b"synced").unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        // The file and its directory were synced, but /a and /a/b never were in their parents.
        assert!(!fs.exists(p("/a")) && !fs.exists(p("/a/b/f")));

        // Syncing only / keeps /a but not /a/b (nor the file in it).
        fs.create_dir_all(p("/a/b")).unwrap();
        write_file_atomic(&*fs, p("/a/b/f"), b"synced").unwrap();
        fs.sync_dir(p("/")).unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert!(fs.exists(p("/a")) && !fs.exists(p("/a/b")));

        create_dir_all_durable(&*fs, p("/a/b/c")).unwrap();
        write_file_atomic(&*fs, p("/a/b/c/f"), b"synced").unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(read_file(&*fs, p("/a/b/c/f")).unwrap(), b"synced");

        // A process crash keeps every directory, synced or not.
        fs.create_dir_all(p("/x/y")).unwrap();
        fs.process_crash();
        assert!(fs.exists(p("/x/y")));
    }

    /// Creates `path` holding `synced` (synced, entry dir-synced) then `unsynced` (not synced).
    fn write_file(fs: &FaultFs, path: &str, synced: &[u8], unsynced: &[u8]) {
        let mut f = fs.create(p(path)).unwrap();
        f.append(synced).unwrap();
        f.sync().unwrap();
        fs.sync_dir(p(path).parent().unwrap()).unwrap();
        f.append(unsynced).unwrap();
        f.close().unwrap();
    }

    fn io_parts(err: Error) -> (&'static str, PathBuf, io::ErrorKind) {
        match err {
            Error::Io { op, path, source } => (op, path, source.kind()),
            other => panic!("expected an Io error, got {other:?}"),
        }
    }

    fn contents(fs: &FaultFs, path: &str) -> Vec<u8> {
        read_file(fs, p(path)).unwrap()
    }

    #[test]
    fn usable_as_dyn_fs_with_posix_errors() {
        let fs = fresh(1);
        let dyn_fs: Arc<dyn Fs> = fs.clone();
        write_file_atomic(&*dyn_fs, p("/db/CURRENT"), b"MANIFEST-000001\n").unwrap();
        assert_eq!(contents(&fs, "/db/CURRENT"), b"MANIFEST-000001\n");
        assert!(!dyn_fs.exists(p("/db/CURRENT.tmp")));
        let err = dyn_fs.create(p("/nodir/x")).err().unwrap();
        assert_eq!(
            io_parts(err),
            ("create", p("/nodir/x").into(), io::ErrorKind::NotFound)
        );
        let err = dyn_fs.open_read(p("/db/missing")).err().unwrap();
        assert_eq!(io_parts(err).0, "open");
        let err = dyn_fs.list_dir(p("/nodir")).unwrap_err();
        assert_eq!(io_parts(err).0, "readdir");
    }

    #[test]
    fn list_dir_shows_files_and_subdirs() {
        let fs = fresh(1);
        fs.create_dir_all(p("/db/fast/wal")).unwrap();
        fs.create(p("/db/fast/000001.log")).unwrap();
        let mut names = fs.list_dir(p("/db/fast")).unwrap();
        names.sort();
        assert_eq!(names, ["000001.log", "wal"]);
        assert_eq!(fs.list_dir(p("/")).unwrap(), ["db"]);
        assert!(fs.list_dir(p("/db/fast/wal")).unwrap().is_empty());
    }

    #[test]
    fn unsynced_data_lost_on_drop_unsynced() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"durable", b" but not this");
        assert_eq!(contents(&fs, "/db/a"), b"durable but not this");
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(contents(&fs, "/db/a"), b"durable");
    }

    #[test]
    fn synced_data_kept() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"first", b"");
        let mut f = fs.open_append(p("/db/a")).unwrap();
        assert_eq!(f.size(), 5);
        f.append(b" second").unwrap();
        f.sync().unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(contents(&fs, "/db/a"), b"first second");
        assert_eq!(fs.file_size(p("/db/a")).unwrap(), 12);
    }

    #[test]
    fn file_without_dir_sync_vanishes() {
        let fs = fresh(1);
        let mut f = fs.create(p("/db/new")).unwrap();
        f.append(b"synced bytes, unsynced entry").unwrap();
        f.sync().unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert!(!fs.exists(p("/db/new")));
        assert!(fs.exists(p("/db")), "directories are durable at once");
    }

    #[test]
    fn rename_durable_only_after_dir_sync() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"payload", b"");
        fs.rename(p("/db/a"), p("/db/b")).unwrap();
        assert!(fs.exists(p("/db/b")) && !fs.exists(p("/db/a")));
        fs.crash(CrashPolicy::DropUnsynced);
        assert!(
            fs.exists(p("/db/a")) && !fs.exists(p("/db/b")),
            "un-synced rename reverts"
        );

        fs.rename(p("/db/a"), p("/db/b")).unwrap();
        fs.sync_dir(p("/db")).unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert!(fs.exists(p("/db/b")) && !fs.exists(p("/db/a")));
        assert_eq!(contents(&fs, "/db/b"), b"payload");
    }

    #[test]
    fn remove_durable_only_after_dir_sync() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"payload", b"");
        let reader = fs.open_read(p("/db/a")).unwrap();
        fs.remove_file(p("/db/a")).unwrap();
        let mut buf = [0u8; 7];
        reader.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"payload", "an open file outlives its unlinking");
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(
            contents(&fs, "/db/a"),
            b"payload",
            "un-synced remove reverts"
        );
        fs.remove_file(p("/db/a")).unwrap();
        fs.sync_dir(p("/db")).unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert!(!fs.exists(p("/db/a")));
    }

    #[test]
    fn process_crash_keeps_everything_handed_over() {
        let fs = fresh(1);
        let mut f = fs.create(p("/db/wal")).unwrap();
        f.append(b"never synced").unwrap();
        fs.process_crash();
        assert!(f.append(b"more").is_err());
        assert_eq!(contents(&fs, "/db/wal"), b"never synced");
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(
            contents(&fs, "/db/wal"),
            b"never synced",
            "process crash made it durable"
        );
    }

    /// Page 0 synced and filled with 0xFF; pages 1..=16 unsynced, page i filled with byte i.
    fn paged_file(seed: u64) -> Arc<FaultFs> {
        let fs = fresh(seed);
        let unsynced: Vec<u8> = (1..=16u8).flat_map(|i| [i; PAGE]).collect();
        write_file(&fs, "/db/t", &[0xFF; PAGE], &unsynced);
        fs
    }

    #[test]
    fn keep_random_pages_keeps_a_subset_and_all_synced_bytes() {
        let (mut kept, mut holes) = (0, 0);
        for seed in 0..20 {
            let fs = paged_file(seed);
            fs.crash(CrashPolicy::KeepRandomPages);
            let got = contents(&fs, "/db/t");
            assert_eq!(got.len() % PAGE, 0);
            let pages: Vec<&[u8]> = got.chunks(PAGE).collect();
            assert_eq!(
                pages[0],
                &[0xFF; PAGE][..],
                "synced page lost (seed {seed})"
            );
            for (i, page) in pages.iter().enumerate().skip(1) {
                let survived = page.iter().all(|&b| b == i as u8);
                assert!(
                    survived || page.iter().all(|&b| b == 0),
                    "page {i}, seed {seed}"
                );
                kept += usize::from(survived);
                holes += usize::from(!survived);
            }
            let last = pages.len() - 1;
            assert!(
                last == 0 || pages[last][0] == last as u8,
                "file ends with a lost page"
            );
        }
        assert!(
            kept > 0 && kept < 20 * 16,
            "kept {kept} of {} pages",
            20 * 16
        );
        assert!(holes > 0, "no lost page was followed by a surviving one");
    }

    #[test]
    fn crash_outcome_depends_only_on_seed() {
        let outcome = |seed| {
            let fs = paged_file(seed);
            fs.crash(CrashPolicy::KeepRandomPages);
            contents(&fs, "/db/t")
        };
        assert_eq!(outcome(3), outcome(3));
        assert!((0..8).any(|seed| outcome(seed) != outcome(3)));
    }

    #[test]
    fn tear_last_sector_tears_only_the_last_sector() {
        let synced = [0x11u8; 1000];
        let unsynced = [0xABu8; 1500];
        let full: Vec<u8> = [&synced[..], &unsynced[..]].concat();
        let (mut zeroed, mut cut) = (false, false);
        for seed in 0..16 {
            let fs = fresh(seed);
            write_file(&fs, "/db/t", &synced, &unsynced);
            fs.crash(CrashPolicy::TearLastSector);
            let got = contents(&fs, "/db/t");
            // The last byte written is 2499, in sector 4 (bytes 2048..2560; the file ends at 2500).
            assert_eq!(got[..2048], full[..2048], "seed {seed}");
            if got.len() == 2500 {
                assert_eq!(got[2048..2304], full[2048..2304]);
                assert!(got[2304..].iter().all(|&b| b == 0));
                zeroed = true;
            } else {
                assert!((2048..2500).contains(&got.len()));
                assert_eq!(got[..], full[..got.len()]);
                cut = true;
            }
        }
        assert!(zeroed && cut);
    }

    #[test]
    fn tear_never_reaches_synced_bytes() {
        for seed in 0..16 {
            let fs = fresh(seed);
            write_file(&fs, "/db/t", &[7u8; 1000], &[9u8; 10]);
            fs.crash(CrashPolicy::TearLastSector);
            let got = contents(&fs, "/db/t");
            assert!(got.len() >= 1000 && got[..1000].iter().all(|&b| b == 7));
        }
    }

    #[test]
    fn fail_after_once_then_recovers() {
        let fs = fresh(1);
        let mut f = fs.create(p("/db/a")).unwrap();
        fs.fail_after(1, FaultKind::Io, true);
        f.append(b"ok").unwrap();
        let err = f.append(b"lost").unwrap_err();
        let (op, path, _) = io_parts(err);
        assert_eq!((op, path), ("write", p("/db/a").into()));
        f.append(b"!").unwrap();
        f.sync().unwrap();
        assert_eq!(fs.file_contents(p("/db/a")).unwrap(), b"ok!");
    }

    #[test]
    fn fail_after_sticky_until_cleared() {
        let fs = fresh(1);
        let mut f = fs.create(p("/db/a")).unwrap();
        fs.fail_after(0, FaultKind::NoSpace, false);
        for _ in 0..3 {
            let (op, _, kind) = io_parts(f.sync().unwrap_err());
            assert_eq!((op, kind), ("fdatasync", io::ErrorKind::StorageFull));
        }
        let (op, _, _) = io_parts(fs.rename(p("/db/a"), p("/db/b")).unwrap_err());
        assert_eq!(op, "rename");
        assert!(fs.exists(p("/db/a")), "a failed operation changes nothing");
        fs.clear_faults();
        f.sync().unwrap();
    }

    #[test]
    fn op_count_counts_mutating_attempts() {
        let fs = fresh(1);
        let before = fs.op_count();
        let syncs_before = fs.sync_count();
        let mut f = fs.create(p("/db/a")).unwrap();
        f.append(b"x").unwrap();
        f.sync().unwrap();
        fs.sync_dir(p("/db")).unwrap();
        fs.rename(p("/db/a"), p("/db/b")).unwrap();
        fs.remove_file(p("/db/b")).unwrap();
        assert!(fs.remove_file(p("/db/b")).is_err());
        fs.exists(p("/db/b"));
        assert_eq!(fs.op_count() - before, 7);
        assert_eq!(fs.sync_count() - syncs_before, 2);
    }

    #[test]
    fn space_limit_rejects_whole_appends() {
        let fs = fresh(1);
        fs.create_dir_all(p("/db/fast")).unwrap();
        fs.create_dir_all(p("/db/cap")).unwrap();
        fs.set_space_limit(p("/db/fast"), Some(100));
        let mut a = fs.create(p("/db/fast/a")).unwrap();
        a.append(&[1; 60]).unwrap();
        let mut b = fs.create(p("/db/fast/b")).unwrap();
        let (op, _, kind) = io_parts(b.append(&[2; 50]).unwrap_err());
        assert_eq!((op, kind), ("write", io::ErrorKind::StorageFull));
        assert_eq!(b.size(), 0);
        assert_eq!(fs.file_contents(p("/db/fast/b")).unwrap(), b"");
        fs.create(p("/db/cap/c"))
            .unwrap()
            .append(&[3; 500])
            .unwrap();
        b.append(&[2; 40]).unwrap();
        fs.remove_file(p("/db/fast/a")).unwrap();
        b.append(&[2; 50]).unwrap();
        fs.set_space_limit(p("/db/fast"), None);
        b.append(&[2; 1000]).unwrap();
    }

    #[test]
    fn handles_and_locks_die_in_a_crash() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"data", b"");
        let mut w = fs.open_append(p("/db/a")).unwrap();
        let r = fs.open_read(p("/db/a")).unwrap();
        let old_lock = fs.lock(p("/db/LOCK")).unwrap();
        assert!(matches!(fs.lock(p("/db/LOCK")), Err(Error::Locked(_))));
        fs.crash(CrashPolicy::DropUnsynced);

        assert_eq!(io_parts(w.append(b"zombie").unwrap_err()).0, "write");
        assert_eq!(io_parts(w.sync().unwrap_err()).0, "fdatasync");
        assert_eq!(
            io_parts(r.read_exact_at(0, &mut [0; 4]).unwrap_err()).0,
            "read"
        );
        assert_eq!(io_parts(w.close().unwrap_err()).0, "close");
        assert_eq!(contents(&fs, "/db/a"), b"data");

        let new_lock = fs.lock(p("/db/LOCK")).unwrap();
        drop(old_lock);
        assert!(matches!(fs.lock(p("/db/LOCK")), Err(Error::Locked(_))));
        drop(new_lock);
        fs.lock(p("/db/LOCK")).unwrap();
    }

    #[test]
    fn read_past_eof_is_an_error() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"0123456789", b"");
        let r = fs.open_read(p("/db/a")).unwrap();
        let err = r.read_exact_at(8, &mut [0; 4]).unwrap_err();
        assert_eq!(
            io_parts(err),
            ("read", p("/db/a").into(), io::ErrorKind::UnexpectedEof)
        );
        r.read_exact_at(u64::MAX, &mut [0; 1]).unwrap_err();
    }

    #[test]
    fn corruption_helpers_survive_crashes() {
        let fs = fresh(1);
        fs.write_raw(p("/db/000001.sst"), &[0u8; 8]);
        fs.flip_bit(p("/db/000001.sst"), 3, 7);
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(
            fs.file_contents(p("/db/000001.sst")).unwrap(),
            [0, 0, 0, 0x80, 0, 0, 0, 0]
        );
        assert_eq!(fs.file_contents(p("/db/none")), None);
    }

    #[test]
    fn recreate_truncates_and_unsynced_truncation_is_lost() {
        let fs = fresh(1);
        write_file(&fs, "/db/a", b"old contents", b"");
        let mut f = fs.create(p("/db/a")).unwrap();
        f.append(b"new").unwrap();
        assert_eq!(contents(&fs, "/db/a"), b"new");
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(contents(&fs, "/db/a"), b"old contents");
    }
}

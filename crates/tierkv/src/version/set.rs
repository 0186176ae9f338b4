//! The version set: owner of the current [`Version`], the MANIFEST writer, file numbers and the
//! last visible sequence number.
//!
//! Locks: `current` is held only to clone or swap the `Arc`; `manifest` serialises edits and IS
//! held across the MANIFEST append and sync (it is the writer's owner lock; nothing else waits
//! on it but other edits). CURRENT is replaced atomically (temporary file, sync, rename,
//! directory sync) only after the new MANIFEST it names is durable.

use super::{FileMeta, Version, VersionEdit, DB_FORMAT_VERSION};
use crate::env::{self, Fs};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::tier::{FileKind, TierId, Tiers, WriteKind};
use crate::wal::log::{LogReader, LogWriter, RecoveryMode};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Name of the file that names the live MANIFEST.
pub const CURRENT_FILE: &str = "CURRENT";

/// What a MANIFEST says, before tiers are opened.
#[derive(Debug)]
pub struct RecoveredManifest {
    /// Database identity.
    pub db_id: String,
    /// Tier names recorded.
    pub tiers: Vec<String>,
    /// Every edit, in order.
    pub edits: Vec<VersionEdit>,
    /// Number of the MANIFEST read.
    pub manifest_number: u64,
}

impl RecoveredManifest {
    /// Reads CURRENT and the MANIFEST it names in `dir`; `Ok(None)` if there is no CURRENT.
    pub fn read(fs: &dyn Fs, dir: &Path) -> Result<Option<RecoveredManifest>> {
        let current = dir.join(CURRENT_FILE);
        if !fs.exists(&current) {
            return Ok(None);
        }
        let text = env::read_file(fs, &current)?;
        let name = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| t.strip_suffix('\n'))
            .filter(|n| n.starts_with("MANIFEST-"))
            .ok_or_else(|| Error::corruption(&current, 0, "CURRENT does not name a MANIFEST"))?;
        let manifest_number = match crate::tier::parse_file_name(name) {
            Some((FileKind::Manifest, n)) => n,
            _ => {
                return Err(Error::corruption(
                    &current,
                    0,
                    format!("bad MANIFEST name {name:?}"),
                ))
            }
        };
        let path = dir.join(name);
        if !fs.exists(&path) {
            return Err(Error::corruption(
                &current,
                0,
                format!("CURRENT names {name}, which is missing"),
            ));
        }
        let edits = read_edits(fs, &path)?;
        check_format_version(&edits, &path)?;
        let db_id = edits
            .iter()
            .find_map(|e| e.db_id.clone())
            .ok_or_else(|| Error::corruption(&path, 0, "MANIFEST has no database id"))?;
        let tiers = edits
            .iter()
            .rev()
            .find_map(|e| e.tiers.clone())
            .unwrap_or_default();
        Ok(Some(RecoveredManifest {
            db_id,
            tiers,
            edits,
            manifest_number,
        }))
    }
}

/// Refuses a MANIFEST written in a newer database format.
fn check_format_version(edits: &[VersionEdit], path: &Path) -> Result<()> {
    match edits.iter().filter_map(|e| e.format_version).max() {
        Some(v) if v > DB_FORMAT_VERSION => Err(Error::invalid(format!(
            "{} was written in database format version {v}; this tierkv reads up to version \
             {DB_FORMAT_VERSION}",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Appends the encoded edit `edit` to a MANIFEST, syncs it, then appends and syncs an empty
/// record, the edit's voucher: the voucher's `synced_through` covers the edit, so damage to
/// the edit reads as corruption from then on, not as a torn tail. The database acts on an
/// edit (deletes the WALs and tables it retires) only once this returns; without a voucher a
/// damaged last edit would be dropped at open as one whose sync never completed, and what it
/// recorded lost with the files already deleted.
fn append_vouched(writer: &mut LogWriter, edit: &[u8]) -> Result<()> {
    writer.add_record(edit)?;
    writer.sync()?;
    writer.add_record(&[])?;
    writer.sync()
}

/// Reads every edit of a MANIFEST file. A torn last record is tolerated (its edit was never
/// acted on: see [`append_vouched`]); any other damage is corruption. Vouchers (empty
/// records) are skipped.
pub fn read_edits(fs: &dyn Fs, path: &Path) -> Result<Vec<VersionEdit>> {
    let mut reader = LogReader::open(fs, path, RecoveryMode::TolerateCorruptedTail)?;
    let mut edits = Vec::new();
    while let Some((offset, payload)) = reader.next_record()? {
        if payload.is_empty() {
            continue;
        }
        let edit = VersionEdit::decode(payload)
            .map_err(|what| Error::corruption(path, offset, format!("MANIFEST edit: {what}")))?;
        edits.push(edit);
    }
    Ok(edits)
}

struct Manifest {
    writer: LogWriter,
    number: u64,
}

/// Owner of the LSM shape and its persistent record.
pub struct VersionSet {
    tiers: Arc<Tiers>,
    dir: PathBuf,
    db_id: String,
    current: Mutex<Arc<Version>>,
    live: Mutex<Vec<Weak<Version>>>,
    manifest: Mutex<Option<Manifest>>,
    next_file_number: AtomicU64,
    last_sequence: AtomicU64,
    log_number: AtomicU64,
    /// A MANIFEST that reaches this size is replaced by a fresh one at the next edit.
    manifest_roll_bytes: u64,
    /// Set once writing or syncing an edit failed: what the MANIFEST holds is then unknown
    /// until reopen, so a stop it caused is never resumed in place.
    manifest_failed: std::sync::atomic::AtomicBool,
}

impl VersionSet {
    /// A version set built from a recovered MANIFEST (or empty for a new database). No MANIFEST
    /// is open for writing until [`VersionSet::write_new_manifest`].
    pub fn recover(
        tiers: Arc<Tiers>,
        num_levels: usize,
        db_id: String,
        recovered: Option<&RecoveredManifest>,
        manifest_roll_bytes: u64,
    ) -> Result<VersionSet> {
        let dir = tiers.fast().dir.clone();
        let set = VersionSet {
            tiers,
            dir,
            db_id,
            current: Mutex::new(Arc::new(Version::empty(num_levels))),
            live: Mutex::new(Vec::new()),
            manifest: Mutex::new(None),
            next_file_number: AtomicU64::new(2),
            last_sequence: AtomicU64::new(0),
            log_number: AtomicU64::new(0),
            manifest_roll_bytes,
            manifest_failed: std::sync::atomic::AtomicBool::new(false),
        };
        if let Some(rec) = recovered {
            set.replay(rec)?;
        }
        Ok(set)
    }

    fn replay(&self, rec: &RecoveredManifest) -> Result<()> {
        let mut version = Version::empty(self.current().levels.len());
        for edit in &rec.edits {
            version.apply_unsorted(&edit.deleted_files, &self.added_files(edit)?)?;
            if let Some(n) = edit.log_number {
                self.log_number.store(n, Ordering::Relaxed);
            }
            if let Some(n) = edit.next_file_number {
                self.next_file_number.store(n, Ordering::Relaxed);
            }
            if let Some(s) = edit.last_sequence {
                self.last_sequence.store(s, Ordering::Relaxed);
            }
        }
        let next = self
            .next_file_number
            .load(Ordering::Relaxed)
            .max(rec.manifest_number + 1);
        self.next_file_number.store(next, Ordering::Relaxed);
        version.sort_levels();
        version.check_invariants().map_err(|what| {
            Error::corruption(
                self.dir.join(crate::tier::file_name(
                    FileKind::Manifest,
                    rec.manifest_number,
                )),
                0,
                what,
            )
        })?;
        for (_, f) in version.all_files() {
            self.tiers.add_table(f.tier, f.size);
        }
        self.install(version);
        Ok(())
    }

    fn apply_edit(&self, base: &Version, edit: &VersionEdit) -> Result<Version> {
        base.apply(&edit.deleted_files, &self.added_files(edit)?)
    }

    /// The tables `edit` adds, with their tier names resolved to configured tiers.
    fn added_files(&self, edit: &VersionEdit) -> Result<Vec<(usize, Arc<FileMeta>)>> {
        edit.new_files
            .iter()
            .map(|nf| {
                let tier = self.tiers.index_of(&nf.tier).ok_or_else(|| {
                    Error::invalid(format!(
                        "the database keeps table {} on tier '{}', which is not configured",
                        nf.number, nf.tier
                    ))
                })?;
                Ok((nf.level, Arc::new(meta_from_new_file(nf, tier))))
            })
            .collect()
    }

    fn install(&self, version: Version) -> Arc<Version> {
        let v = Arc::new(version);
        let mut live = self.live.lock();
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&v));
        drop(live);
        *self.current.lock() = Arc::clone(&v);
        v
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current.lock())
    }

    /// Allocates a file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::Relaxed)
    }

    /// The next unused file number.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number.load(Ordering::Relaxed)
    }

    /// Makes sure future file numbers are above `n`.
    pub fn mark_file_number_used(&self, n: u64) {
        self.next_file_number.fetch_max(n + 1, Ordering::Relaxed);
    }

    /// The last sequence number visible to readers.
    pub fn last_sequence(&self) -> SeqNo {
        self.last_sequence.load(Ordering::Acquire)
    }

    /// Publishes `seq` as the last visible sequence number.
    pub fn set_last_sequence(&self, seq: SeqNo) {
        self.last_sequence.store(seq, Ordering::Release);
    }

    /// WAL files numbered below this are obsolete.
    pub fn log_number(&self) -> u64 {
        self.log_number.load(Ordering::Relaxed)
    }

    /// Number of the MANIFEST being written.
    pub fn manifest_number(&self) -> Option<u64> {
        self.manifest.lock().as_ref().map(|m| m.number)
    }

    /// Every table (tier, number) listed by a live version.
    pub fn live_tables(&self) -> std::collections::HashSet<(TierId, u64)> {
        let live: Vec<Arc<Version>> = {
            let mut live = self.live.lock();
            live.retain(|w| w.strong_count() > 0);
            live.iter().filter_map(Weak::upgrade).collect()
        };
        let mut tables: std::collections::HashSet<(TierId, u64)> = live
            .iter()
            .flat_map(|v| v.all_files().map(|(_, f)| (f.tier, f.number)))
            .collect();
        tables.extend(self.current().all_files().map(|(_, f)| (f.tier, f.number)));
        tables
    }

    /// Starts a new MANIFEST holding the whole current state plus `edit`, then points CURRENT
    /// at it. Used at open; the previous MANIFEST becomes obsolete.
    pub fn write_new_manifest(&self, edit: VersionEdit) -> Result<()> {
        let mut guard = self.manifest.lock();
        let manifest = self.start_manifest(edit)?;
        if let Some(old) = guard.replace(manifest) {
            let _ = old.writer.close();
        }
        Ok(())
    }

    /// Writes a new MANIFEST holding the current state plus `edit`, syncs it, points CURRENT at
    /// it and installs the result. The caller holds the `manifest` lock.
    fn start_manifest(&self, mut edit: VersionEdit) -> Result<Manifest> {
        let number = self.new_file_number();
        let path = self.tiers.path(TierId::FAST, FileKind::Manifest, number);
        let file = self.tiers.create(
            TierId::FAST,
            &path,
            WriteKind::Meta,
            64 << 10,
            crate::env::Lifetime::Medium,
        )?;
        let mut writer = LogWriter::new(file, path);
        let base = self.current();
        let version = self.apply_edit(&base, &edit)?;
        self.fill_edit_totals(&mut edit);
        append_vouched(&mut writer, &self.snapshot_edit(&version, &edit).encode())?;
        let current = format!("{}\n", crate::tier::file_name(FileKind::Manifest, number));
        env::write_file_atomic(
            self.tiers.fs().as_ref(),
            &self.dir.join(CURRENT_FILE),
            current.as_bytes(),
        )?;
        self.tiers
            .count_write(TierId::FAST, WriteKind::Meta, current.len() as u64);
        self.install_edit(&base, &edit, version);
        Ok(Manifest { writer, number })
    }

    fn snapshot_edit(&self, version: &Version, edit: &VersionEdit) -> VersionEdit {
        let tier_names: Vec<String> = self.tiers.all().iter().map(|t| t.name.clone()).collect();
        VersionEdit {
            format_version: Some(DB_FORMAT_VERSION),
            db_id: Some(self.db_id.clone()),
            tiers: Some(tier_names),
            log_number: edit.log_number,
            next_file_number: edit.next_file_number,
            last_sequence: edit.last_sequence,
            new_files: version
                .all_files()
                .map(|(l, f)| f.to_new_file(l, &self.tiers.get(f.tier).name))
                .collect(),
            deleted_files: Vec::new(),
        }
    }

    fn fill_edit_totals(&self, edit: &mut VersionEdit) {
        let log = edit.log_number.unwrap_or_else(|| self.log_number());
        edit.log_number = Some(log);
        edit.next_file_number = Some(self.next_file_number());
        edit.last_sequence = Some(self.last_sequence());
    }

    /// Installs `version`, made by applying `edit` to `base` (the version it replaces), and
    /// moves the tiers' byte counts with it.
    fn install_edit(&self, base: &Version, edit: &VersionEdit, version: Version) -> Arc<Version> {
        if let Some(n) = edit.log_number {
            self.log_number.fetch_max(n, Ordering::Relaxed);
        }
        let installed = self.install(version);
        for &(level, number) in &edit.deleted_files {
            if let Some(f) = base.levels[level].iter().find(|f| f.number == number) {
                self.tiers.remove_table(f.tier, f.size);
            }
        }
        for nf in &edit.new_files {
            if let Some(t) = self.tiers.index_of(&nf.tier) {
                self.tiers.add_table(t, nf.size);
            }
        }
        installed
    }

    /// Applies `edit`: appends it to the MANIFEST, syncs, then installs the new version.
    /// On error nothing is installed and the caller must treat the database as failed.
    pub fn log_and_apply(&self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        let mut guard = self.manifest.lock();
        let manifest = guard
            .as_mut()
            .ok_or_else(|| Error::Closed("MANIFEST is not open".into()))?;
        if manifest.writer.size() >= self.manifest_roll_bytes {
            // A MANIFEST only grows while the database is open; start a compact one.
            let fresh = self
                .start_manifest(edit)
                .inspect_err(|_| self.note_manifest_failed())?;
            let old = std::mem::replace(manifest, fresh);
            let _ = old.writer.close();
            return Ok(self.current());
        }
        self.fill_edit_totals(&mut edit);
        let base = self.current();
        let version = self.apply_edit(&base, &edit)?;
        append_vouched(&mut manifest.writer, &edit.encode())
            .inspect_err(|_| self.note_manifest_failed())?;
        Ok(self.install_edit(&base, &edit, version))
    }

    fn note_manifest_failed(&self) {
        self.manifest_failed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// True once an edit could not be written or synced since open (see `log_and_apply`).
    pub fn manifest_failed(&self) -> bool {
        self.manifest_failed
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Closes the MANIFEST writer.
    pub fn close(&self) -> Result<()> {
        match self.manifest.lock().take() {
            Some(m) => m.writer.close(),
            None => Ok(()),
        }
    }
}

fn meta_from_new_file(nf: &super::NewFile, tier: TierId) -> FileMeta {
    FileMeta {
        number: nf.number,
        tier,
        size: nf.size,
        smallest: nf.smallest.clone(),
        largest: nf.largest.clone(),
        smallest_seq: nf.smallest_seq,
        largest_seq: nf.largest_seq,
        l0_seq: nf.l0_seq,
        num_entries: nf.num_entries,
        num_deletions: nf.num_deletions,
    }
}

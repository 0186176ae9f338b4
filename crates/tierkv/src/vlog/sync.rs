//! Group sync of one value-log file: writers append under the value log's append lock and
//! make their bytes durable here, without that lock. Each file tracks how far it is synced;
//! a writer whose bytes a finished sync covered returns at once, one whose bytes a running
//! sync covers waits for it, and otherwise one writer syncs for everyone who appended before
//! it started. Ordering rules: `docs/value-log.md` ("Durability and syncs").

use crate::env::WritableFile;
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// How far one file is durable, and whether a sync of it is running.
#[derive(Debug, Default)]
struct Progress {
    /// Every byte below this offset is durable.
    synced: u64,
    /// A writer is in `fdatasync` now; the others wait for it.
    syncing: bool,
    /// The first failed sync's error: after a failed `fdatasync` the OS may have dropped the
    /// dirty pages, so no later sync of this file can promise durability.
    failed: Option<String>,
}

/// The sync side of one value-log file.
pub(crate) struct FileSync {
    /// The file, for errors.
    path: PathBuf,
    /// A handle used only for `fdatasync` (a second handle on the file where appends go
    /// through another one; `fdatasync` covers the file, not the handle). `None` where the
    /// appender syncs each append itself and reports it with [`FileSync::mark_synced`].
    handle: Option<Mutex<Box<dyn WritableFile>>>,
    /// End of the bytes whose append returned: what a sync started now covers.
    appended: AtomicU64,
    progress: Mutex<Progress>,
    done: Condvar,
}

impl FileSync {
    /// The sync side of the file at `path`, whose first `durable` bytes are durable.
    pub fn new(path: PathBuf, handle: Option<Box<dyn WritableFile>>, durable: u64) -> Self {
        FileSync {
            path,
            handle: handle.map(Mutex::new),
            appended: AtomicU64::new(durable),
            progress: Mutex::new(Progress {
                synced: durable,
                ..Progress::default()
            }),
            done: Condvar::new(),
        }
    }

    /// Records that the bytes below `end` were appended (the append returned).
    pub fn note_appended(&self, end: u64) {
        self.appended.fetch_max(end, Ordering::AcqRel);
    }

    /// End of the bytes appended so far.
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// Records that the appender synced the bytes below `end` itself.
    pub fn mark_synced(&self, end: u64) {
        let mut p = self.progress.lock();
        p.synced = p.synced.max(end);
    }

    /// Every byte below this offset is durable.
    #[cfg(test)]
    pub fn synced(&self) -> u64 {
        self.progress.lock().synced
    }

    /// Makes every byte below `end` durable: returns at once if a finished sync covered
    /// them, waits for a running sync, else syncs everything appended so far (covering the
    /// writers that appended since the last sync). Adds the `fdatasync`s it issued to `syncs`.
    pub fn sync_to(&self, end: u64, syncs: &AtomicU64) -> Result<()> {
        let mut p = self.progress.lock();
        loop {
            if let Some(msg) = &p.failed {
                return Err(self.error(format!(
                    "an earlier sync of this value-log file failed ({msg}); its bytes may be lost"
                )));
            }
            if p.synced >= end {
                return Ok(());
            }
            if p.syncing {
                self.done.wait(&mut p);
                continue;
            }
            p.syncing = true;
            // NB: read after taking the sync: every byte appended before this line is
            // handed to the OS, so the `fdatasync` below covers it.
            let target = self.appended();
            drop(p);
            self.sync_through(target, syncs)?;
            p = self.progress.lock();
        }
    }

    /// Runs the `fdatasync` a caller of `sync_to` took on, covering `target` bytes, and
    /// records its outcome. The waiters are woken however it ends, a panic included.
    fn sync_through(&self, target: u64, syncs: &AtomicU64) -> Result<()> {
        let _running = RunningSync(self);
        let result = match &self.handle {
            Some(handle) => handle.lock().sync(),
            None => Err(self.error("no handle to sync this file through".into())),
        };
        syncs.fetch_add(1, Ordering::Relaxed);
        let mut p = self.progress.lock();
        match &result {
            Ok(()) => p.synced = p.synced.max(target),
            Err(e) => p.failed = Some(e.to_string()),
        }
        result
    }

    fn error(&self, msg: String) -> Error {
        Error::io("fdatasync", &self.path, std::io::Error::other(msg))
    }
}

/// The sync a writer runs for the others: ends it (and wakes them) when dropped.
struct RunningSync<'a>(&'a FileSync);

impl Drop for RunningSync<'_> {
    fn drop(&mut self) {
        self.0.progress.lock().syncing = false;
        self.0.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{FaultFs, Fs};
    use std::path::Path;
    use std::sync::Arc;

    fn file(fs: &FaultFs) -> (Box<dyn WritableFile>, FileSync) {
        let path = Path::new("/v/000001.vlog");
        fs.create_dir_all(Path::new("/v")).unwrap();
        let appender = fs.create(path).unwrap();
        let sync = FileSync::new(path.into(), Some(fs.open_append(path).unwrap()), 0);
        (appender, sync)
    }

    #[test]
    fn a_sync_covers_every_byte_appended_before_it_started() {
        let fs = FaultFs::new(1);
        let (mut appender, sync) = file(&fs);
        let syncs = AtomicU64::new(0);
        appender.append(&[7; 100]).unwrap();
        sync.note_appended(100);
        appender.append(&[8; 50]).unwrap();
        sync.note_appended(150);
        sync.sync_to(100, &syncs).unwrap();
        assert_eq!(sync.synced(), 150, "the later append is covered too");
        sync.sync_to(150, &syncs).unwrap();
        sync.sync_to(20, &syncs).unwrap();
        assert_eq!(syncs.load(Ordering::Relaxed), 1);
        appender.append(&[9; 10]).unwrap();
        sync.note_appended(160);
        sync.sync_to(160, &syncs).unwrap();
        assert_eq!(syncs.load(Ordering::Relaxed), 2);
        assert_eq!(sync.synced(), 160);
    }

    #[test]
    fn concurrent_writers_share_syncs() {
        let fs = FaultFs::new(2);
        let (appender, sync) = file(&fs);
        let appender = Mutex::new((appender, 0u64));
        let sync = Arc::new(sync);
        let syncs = AtomicU64::new(0);
        const WRITERS: usize = 4;
        const EACH: usize = 50;
        std::thread::scope(|s| {
            for _ in 0..WRITERS {
                s.spawn(|| {
                    for _ in 0..EACH {
                        let end = {
                            let mut a = appender.lock();
                            a.0.append(&[1; 64]).unwrap();
                            a.1 += 64;
                            sync.note_appended(a.1);
                            a.1
                        };
                        sync.sync_to(end, &syncs).unwrap();
                        assert!(sync.synced() >= end);
                    }
                });
            }
        });
        let n = syncs.load(Ordering::Relaxed);
        assert!(n >= 1 && n <= (WRITERS * EACH) as u64, "{n} syncs");
        assert_eq!(sync.synced(), (WRITERS * EACH * 64) as u64);
    }

    #[test]
    fn a_failed_sync_fails_every_later_one() {
        let fs = FaultFs::new(3);
        let (mut appender, sync) = file(&fs);
        let syncs = AtomicU64::new(0);
        appender.append(&[1; 10]).unwrap();
        sync.note_appended(10);
        fs.fail_after(0, crate::env::FaultKind::Io, false);
        assert!(sync.sync_to(10, &syncs).is_err());
        fs.clear_faults();
        let err = sync.sync_to(10, &syncs).unwrap_err();
        assert!(err.to_string().contains("000001.vlog"), "{err}");
        assert_eq!(sync.synced(), 0);
    }
}

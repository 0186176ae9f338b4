//! The [`Fs`] contract as tests: each check runs on every implementation (real files, mapped
//! files on a disk directory and on shared memory, the fault-injecting file system, and the
//! router with pm tiers' rules and with a flat directory's), so a new implementation is held
//! to the same behaviour by adding one line per check.

use super::pm::PM_TIER_RULES;
use super::{
    read_file, write_file_atomic, FaultFs, Fs, Handler, MappedFs, PosixFs, RouteRules, RouteScope,
    RoutingFs,
};
use crate::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file system under test and the directory it works in (kept alive by `_guard`).
struct Subject {
    name: &'static str,
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    _guard: Option<tempfile::TempDir>,
}

fn real(name: &'static str, fs: Arc<dyn Fs>, guard: tempfile::TempDir) -> Subject {
    Subject {
        name,
        fs,
        dir: guard.path().to_path_buf(),
        _guard: Some(guard),
    }
}

/// Every implementation, each in a fresh directory.
fn subjects() -> Vec<Subject> {
    let fault = FaultFs::new(7);
    let fault_dir = PathBuf::from("/contract");
    fault.create_dir_all(&fault_dir).unwrap();
    let mut all = vec![
        real(
            "posix",
            Arc::new(PosixFs::new()),
            tempfile::tempdir().unwrap(),
        ),
        real(
            "mapped",
            Arc::new(MappedFs::new()),
            tempfile::tempdir().unwrap(),
        ),
        Subject {
            name: "fault",
            fs: fault,
            dir: fault_dir,
            _guard: None,
        },
    ];
    if Path::new("/dev/shm").is_dir() {
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        all.push(real("mapped on /dev/shm", Arc::new(MappedFs::new()), shm));
    }
    all.push(routed_like_a_pm_tier());
    all.push(routed_like_a_flat_directory());
    all
}

/// Real files below a router whose one route maps the whole working directory, as a pm tier's.
fn routed_like_a_pm_tier() -> Subject {
    let guard = tempfile::tempdir().unwrap();
    let mapped: Arc<dyn Fs> = Arc::new(MappedFs::new());
    let routes = vec![(guard.path().to_path_buf(), mapped)];
    let router = RoutingFs::new(Arc::new(PosixFs::new()), routes, PM_TIER_RULES);
    real("routed, pm rules", Arc::new(router), guard)
}

/// A router whose one route takes only the files directly in the working directory (as a
/// zoned tier's does), so the checks cross between the route and the base: files at the top
/// go to the route, subdirectories, their files and the LOCK to the base.
fn routed_like_a_flat_directory() -> Subject {
    const FLAT: RouteRules = RouteRules {
        scope: RouteScope::Children,
        create_dirs: Handler::Base,
        locks: Handler::Base,
        base_names: &["DEVICE"],
        route_kind: "flat directory",
    };
    let dir = PathBuf::from("/contract-routed");
    let (base, flat) = (FaultFs::new(11), FaultFs::new(12));
    base.create_dir_all(&dir).unwrap();
    flat.create_dir_all(&dir).unwrap();
    let flat: Arc<dyn Fs> = flat;
    let routes = vec![(dir.clone(), flat)];
    Subject {
        name: "routed, flat rules",
        fs: Arc::new(RoutingFs::new(base, routes, FLAT)),
        dir,
        _guard: None,
    }
}

#[test]
fn appends_survive_close_and_reopen_for_append() {
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let path = s.dir.join("000001.log");
        let mut f = fs.create(&path).unwrap();
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        assert_eq!(f.size(), 11, "{name}");
        f.sync().unwrap();
        f.close().unwrap();
        fs.sync_dir(&s.dir).unwrap();

        let mut f = fs.open_append(&path).unwrap();
        assert_eq!(f.size(), 11, "{name}");
        f.append(b"!").unwrap();
        f.append(b"").unwrap();
        assert_eq!(f.size(), 12, "{name}");
        f.close().unwrap();

        let r = fs.open_read(&path).unwrap();
        assert_eq!(r.size(), 12, "{name}");
        let mut buf = [0u8; 5];
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world", "{name}");
        assert_eq!(fs.file_size(&path).unwrap(), 12, "{name}");
        assert_eq!(read_file(fs, &path).unwrap(), b"hello world!", "{name}");
    }
}

#[test]
fn create_truncates_and_an_empty_file_reads_as_empty() {
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let path = s.dir.join("MANIFEST-000002");
        let mut f = fs.create(&path).unwrap();
        f.append(b"old contents").unwrap();
        f.close().unwrap();
        let f = fs.create(&path).unwrap();
        assert_eq!(f.size(), 0, "{name}");
        f.close().unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), 0, "{name}");
        assert!(read_file(fs, &path).unwrap().is_empty(), "{name}");
    }
}

#[test]
fn long_appends_read_back_at_any_offset() {
    // 3 MiB in odd-sized pieces: crosses any implementation's growth steps.
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i * 31 % 251) as u8).collect();
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let path = s.dir.join("000003.vlog");
        let mut f = fs.create(&path).unwrap();
        for piece in data.chunks(4093) {
            f.append(piece).unwrap();
        }
        assert_eq!(
            fs.file_size(&path).unwrap(),
            data.len() as u64,
            "{name}: exact length"
        );
        f.sync().unwrap();
        f.close().unwrap();
        let r = fs.open_read(&path).unwrap();
        for (off, len) in [(0, 10), (4095, 2), (1 << 20, 70_000), (data.len() - 9, 9)] {
            let mut buf = vec![0u8; len];
            r.read_exact_at(off as u64, &mut buf).unwrap();
            assert_eq!(buf, data[off..off + len], "{name}: at {off}+{len}");
        }
    }
}

#[test]
fn reads_past_the_end_are_errors() {
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let path = s.dir.join("short");
        let mut f = fs.create(&path).unwrap();
        f.append(b"0123456789").unwrap();
        f.close().unwrap();
        let r = fs.open_read(&path).unwrap();
        let mut buf = [0u8; 4];
        assert!(r.read_exact_at(8, &mut buf).is_err(), "{name}");
        assert!(r.read_exact_at(u64::MAX - 1, &mut buf).is_err(), "{name}");
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"6789", "{name}");
    }
}

#[test]
fn namespace_operations() {
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let sub = s.dir.join("fast/hot");
        fs.create_dir_all(&sub).unwrap();
        fs.create_dir_all(&sub).unwrap();
        let a = sub.join("a");
        let b = sub.join("b");
        write_file_atomic(fs, &a, b"payload").unwrap();
        fs.rename(&a, &b).unwrap();
        assert!(!fs.exists(&a), "{name}");
        assert!(fs.exists(&b), "{name}");
        assert_eq!(fs.list_dir(&sub).unwrap(), vec!["b".to_string()], "{name}");
        assert_eq!(read_file(fs, &b).unwrap(), b"payload", "{name}");
        fs.remove_file(&b).unwrap();
        assert!(fs.list_dir(&sub).unwrap().is_empty(), "{name}");
        assert!(
            matches!(fs.remove_file(&b), Err(Error::Io { .. })),
            "{name}"
        );
        assert!(
            fs.open_read(&b).is_err(),
            "{name}: a removed file cannot be read"
        );
    }
}

#[test]
fn a_second_lock_conflicts_until_the_first_drops() {
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let path = s.dir.join("LOCK");
        let guard = fs.lock(&path).unwrap();
        match fs.lock(&path) {
            Err(Error::Locked(p)) => assert_eq!(p, path, "{name}"),
            other => panic!("{name}: expected Locked, got {:?}", other.err()),
        }
        drop(guard);
        let _again = fs.lock(&path).unwrap();
    }
}

#[test]
fn positional_files_start_zeroed_grow_and_keep_their_bytes() {
    for s in subjects() {
        let (fs, name) = (s.fs.as_ref(), s.name);
        let path = s.dir.join("slab-00-0064.slab");
        let small = fs.open_positional(&path, 8192).unwrap();
        assert_eq!(small.size(), 8192, "{name}");
        assert_eq!(small.path(), path.as_path(), "{name}");
        let mut buf = vec![1u8; 8192];
        small.read_exact_at(0, &mut buf).unwrap();
        assert!(
            buf.iter().all(|&b| b == 0),
            "{name}: a new file reads as zeros"
        );
        small.write_at(100, b"in place", false).unwrap();
        small.write_at(4096, b"durable", true).unwrap();
        small.sync().unwrap();

        let grown = fs.open_positional(&path, 64 << 10).unwrap();
        assert_eq!(grown.size(), 64 << 10, "{name}");
        assert_eq!(fs.file_size(&path).unwrap(), 64 << 10, "{name}");
        let mut word = [0u8; 8];
        grown.read_exact_at(100, &mut word).unwrap();
        assert_eq!(&word, b"in place", "{name}: growth keeps the bytes");
        grown.write_at(60 << 10, b"far", true).unwrap();
        // The handle opened before the growth still reads and writes its own range.
        small.write_at(200, b"old", false).unwrap();
        let mut three = [0u8; 3];
        grown.read_exact_at(200, &mut three).unwrap();
        assert_eq!(&three, b"old", "{name}: both handles see one file");

        let again = fs.open_positional(&path, 4096).unwrap();
        assert_eq!(
            again.size(),
            64 << 10,
            "{name}: a shorter length never shrinks"
        );
        again.read_exact_at(60 << 10, &mut three).unwrap();
        assert_eq!(&three, b"far", "{name}");
        assert!(
            again.read_exact_at((64 << 10) - 2, &mut three).is_err(),
            "{name}"
        );
    }
}

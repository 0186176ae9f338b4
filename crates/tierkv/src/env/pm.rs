//! Tiers of kind `pm`: the check that a tier's directory is on a mount whose files may be
//! memory-mapped as persistent (or volatile) memory, and the routing that sends the files under
//! those directories to [`MappedFs`] and everything else to the file system below.

use super::route::{Handler, RouteRules, RouteScope, RoutingFs};
use super::{Fs, MappedFs};
use crate::error::{Error, Result};
use crate::options::{Options, RecoveryMode, TierKind};
use crate::tier::{parse_file_name, FileKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `statfs` magic of tmpfs (and of `/dev/shm`).
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `statfs` magic of ramfs.
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// Whether a file system of `statfs` type `magic` is memory with no medium behind it
/// (tmpfs or ramfs).
pub(super) fn is_memory_fs(magic: i64) -> bool {
    magic == TMPFS_MAGIC || magic == RAMFS_MAGIC
}

/// What kind of memory a `pm` tier's mount is, which decides what a sync promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmMount {
    /// tmpfs or ramfs: synced bytes survive a process crash, nothing survives a power loss.
    Volatile,
    /// A file system mounted with `dax`: `msync` puts the bytes on persistent memory.
    Dax,
}

/// Checks that `dir` (or, while it does not exist yet, its nearest existing ancestor) is a
/// directory on tmpfs, ramfs or a DAX mount; the error names tier `index`'s option and path.
pub fn check_pm_dir(index: usize, name: &str, dir: &Path) -> Result<PmMount> {
    let bad = |why: String| {
        Error::InvalidArgument(format!(
            "option tiers[{index}].kind = \"pm\" (tier '{name}'): {} {why}; a pm tier needs a \
             directory on tmpfs (such as /dev/shm) or on a file system mounted with -o dax",
            dir.display()
        ))
    };
    let existing = dir
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && a.exists())
        .ok_or_else(|| bad("has no existing ancestor".to_string()))?;
    if !existing.is_dir() {
        return Err(bad(format!(
            "is not a directory ({} is a file)",
            existing.display()
        )));
    }
    let magic = fs_magic(existing).map_err(|e| bad(format!("cannot be examined ({e})")))?;
    if is_memory_fs(magic) {
        return Ok(PmMount::Volatile);
    }
    let real =
        std::fs::canonicalize(existing).map_err(|e| bad(format!("cannot be resolved ({e})")))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    match mount_of(&mountinfo, &real) {
        Some(mount) if mount.dax => Ok(PmMount::Dax),
        Some(mount) => Err(bad(format!(
            "is on a {} mount at {} without the dax option",
            mount.fs_type,
            mount.point.display()
        ))),
        None => Err(bad(format!(
            "is on a file system of type {magic:#x}, not tmpfs or a DAX mount"
        ))),
    }
}

/// The `statfs` type of the file system holding `path`.
fn fs_magic(path: &Path) -> std::io::Result<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: an all-zero statfs is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64)
}

/// One line of `/proc/self/mountinfo`, the parts the check needs.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    point: PathBuf,
    fs_type: String,
    dax: bool,
}

/// The mount holding `path` (canonical): the one with the longest mount point above it.
fn mount_of(mountinfo: &str, path: &Path) -> Option<Mount> {
    mountinfo
        .lines()
        .filter_map(parse_mount)
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| m.point.as_os_str().len())
}

/// Parses `id parent dev root point options [optional...] - type source super_options`.
fn parse_mount(line: &str) -> Option<Mount> {
    let (head, tail) = line.split_once(" - ")?;
    let fields: Vec<&str> = head.split(' ').collect();
    let point = fields.get(4)?.replace("\\040", " ");
    let mount_options = fields.get(5)?;
    let mut tail = tail.split(' ');
    let fs_type = tail.next()?.to_string();
    let super_options = tail.nth(1).unwrap_or("");
    let has_dax = |opts: &str| opts.split(',').any(|o| o == "dax" || o == "dax=always");
    Some(Mount {
        point: PathBuf::from(point),
        fs_type,
        dax: has_dax(mount_options) || has_dax(super_options),
    })
}

/// How pm tiers route: everything under a pm tier's directory is mapped, its subdirectories,
/// lock and listings included; the base keeps no names there.
pub(crate) const PM_TIER_RULES: RouteRules = RouteRules {
    scope: RouteScope::Subtree,
    create_dirs: Handler::Route,
    locks: Handler::Route,
    base_names: &[],
    route_kind: "pm tier",
};

/// Checks every tier of kind `pm` and makes `opts.fs` map their files. Returns each pm
/// tier's name and mount kind, in tier order.
pub(crate) fn route_pm_tiers(opts: &mut Options) -> Result<Vec<(String, PmMount)>> {
    let mut mounts = Vec::new();
    let mut routes = Vec::new();
    // One mapped file system for every pm tier, so a rename between two of them stays a rename.
    let mapped: Arc<dyn Fs> = Arc::new(mapped_fs(opts.wal.recovery_mode));
    for (i, tier) in opts.tiers.iter().enumerate() {
        if tier.kind != TierKind::Pm {
            continue;
        }
        mounts.push((tier.name.clone(), check_pm_dir(i, &tier.name, &tier.path)?));
        routes.push((tier.path.clone(), Arc::clone(&mapped)));
    }
    if !routes.is_empty() {
        let base = Arc::clone(&opts.fs);
        opts.fs = Arc::new(RoutingFs::new(base, routes, PM_TIER_RULES));
    }
    Ok(mounts)
}

/// The mapped file system for a database recovering its WAL in `mode`: the WAL's length runs
/// ahead of its records (no `ftruncate` per synced write) wherever its reader takes the zero
/// tail a crash leaves for a torn end, that is in every mode but `absolute-consistency`,
/// which would refuse it as damage.
fn mapped_fs(mode: RecoveryMode) -> MappedFs {
    if mode == RecoveryMode::AbsoluteConsistency {
        MappedFs::new()
    } else {
        MappedFs::with_length_ahead(is_wal_file)
    }
}

/// Whether `path` names a WAL file (`NNNNNN.log`).
fn is_wal_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_file_name)
        .is_some_and(|(kind, _)| kind == FileKind::Wal)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:25 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
41 22 259:1 / /mnt/pmem rw,relatime shared:9 - xfs /dev/pmem0 rw,attr2,dax=always
42 22 259:2 / /mnt/pmem\\040b rw,dax - ext4 /dev/pmem1 rw
";

    #[test]
    fn the_deepest_mount_above_a_path_decides() {
        let m = mount_of(MOUNTINFO, Path::new("/mnt/pmem/db/fast")).unwrap();
        assert_eq!((m.fs_type.as_str(), m.dax), ("xfs", true));
        assert_eq!(m.point, PathBuf::from("/mnt/pmem"));
        let root = mount_of(MOUNTINFO, Path::new("/home/db")).unwrap();
        assert_eq!((root.fs_type.as_str(), root.dax), ("ext4", false));
        let spaced = mount_of(MOUNTINFO, Path::new("/mnt/pmem b/x")).unwrap();
        assert!(spaced.dax, "dax among the mount options counts too");
    }

    #[test]
    fn shared_memory_is_a_volatile_pm_mount() {
        if !Path::new("/dev/shm").is_dir() {
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let sub = dir.path().join("not/yet/created");
        assert_eq!(check_pm_dir(0, "fast", &sub).unwrap(), PmMount::Volatile);
    }

    #[test]
    fn a_disk_directory_or_a_file_is_refused_naming_the_option() {
        let dir = tempfile::tempdir().unwrap();
        if fs_magic(dir.path()).unwrap() == TMPFS_MAGIC {
            return; // the temporary directory is on tmpfs here: nothing to refuse
        }
        match check_pm_dir(1, "pmem", dir.path()) {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains("tiers[1].kind = \"pm\""), "{msg}");
                assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        let file = dir.path().join("plain");
        std::fs::write(&file, b"x").unwrap();
        match check_pm_dir(1, "pmem", &file) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("not a directory"), "{msg}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}

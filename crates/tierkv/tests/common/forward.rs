//! `forward_fs!`: the `Fs` methods a test's wrapping file system does not change, written as
//! plain forwards to the file system it wraps, so each wrapper spells out only what it hooks.
//!
//! ```ignore
//! impl Fs for CountingFs {
//!     fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> { ... }
//!     common::forward_fs!(inner => create, open_append, exists, list_dir);
//! }
//! ```
//! The field path before `=>` names the wrapped file system (`inner`, `0.fault`).

#[allow(unused_macros)] // Test binaries without a wrapping file system leave it unused.
macro_rules! forward_fs {
    ($($field:tt).+ => $($method:ident),+ $(,)?) => {
        $crate::common::forward_fs!(@each [$($field).+] $($method)+);
    };
    (@each [$($f:tt)+] $method:ident $($rest:ident)*) => {
        $crate::common::forward_fs!(@method [$($f)+] $method);
        $crate::common::forward_fs!(@each [$($f)+] $($rest)*);
    };
    (@each [$($f:tt)+]) => {};
    (@method [$($f:tt)+] create) => {
        fn create(
            &self,
            path: &std::path::Path,
        ) -> tierkv::Result<Box<dyn tierkv::env::WritableFile>> {
            self.$($f)+.create(path)
        }
    };
    (@method [$($f:tt)+] open_append) => {
        fn open_append(
            &self,
            path: &std::path::Path,
        ) -> tierkv::Result<Box<dyn tierkv::env::WritableFile>> {
            self.$($f)+.open_append(path)
        }
    };
    (@method [$($f:tt)+] open_read) => {
        fn open_read(
            &self,
            path: &std::path::Path,
        ) -> tierkv::Result<std::sync::Arc<dyn tierkv::env::RandomAccessFile>> {
            self.$($f)+.open_read(path)
        }
    };
    (@method [$($f:tt)+] exists) => {
        fn exists(&self, path: &std::path::Path) -> bool {
            self.$($f)+.exists(path)
        }
    };
    (@method [$($f:tt)+] list_dir) => {
        fn list_dir(&self, dir: &std::path::Path) -> tierkv::Result<Vec<String>> {
            self.$($f)+.list_dir(dir)
        }
    };
    (@method [$($f:tt)+] create_dir_all) => {
        fn create_dir_all(&self, dir: &std::path::Path) -> tierkv::Result<()> {
            self.$($f)+.create_dir_all(dir)
        }
    };
    (@method [$($f:tt)+] remove_file) => {
        fn remove_file(&self, path: &std::path::Path) -> tierkv::Result<()> {
            self.$($f)+.remove_file(path)
        }
    };
    (@method [$($f:tt)+] rename) => {
        fn rename(&self, from: &std::path::Path, to: &std::path::Path) -> tierkv::Result<()> {
            self.$($f)+.rename(from, to)
        }
    };
    (@method [$($f:tt)+] sync_dir) => {
        fn sync_dir(&self, dir: &std::path::Path) -> tierkv::Result<()> {
            self.$($f)+.sync_dir(dir)
        }
    };
    (@method [$($f:tt)+] file_size) => {
        fn file_size(&self, path: &std::path::Path) -> tierkv::Result<u64> {
            self.$($f)+.file_size(path)
        }
    };
    (@method [$($f:tt)+] lock) => {
        fn lock(
            &self,
            path: &std::path::Path,
        ) -> tierkv::Result<Box<dyn tierkv::env::FileLock>> {
            self.$($f)+.lock(path)
        }
    };
    (@method [$($f:tt)+] open_positional) => {
        fn open_positional(
            &self,
            path: &std::path::Path,
            len: u64,
        ) -> tierkv::Result<std::sync::Arc<dyn tierkv::env::PositionalFile>> {
            self.$($f)+.open_positional(path, len)
        }
    };
}

pub(crate) use forward_fs;

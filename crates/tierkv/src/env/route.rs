//! [`RoutingFs`]: one [`Fs`] over a base file system and a list of routes, each a directory
//! whose files another file system holds. Tiers of kind `pm` route their directories to a
//! [`super::MappedFs`]; tiers with zoned tables route theirs to the tier's `ZoneFs`. Where the
//! two differ is written down once, as the [`RouteRules`] each passes in.

use super::{FileLock, Fs, Lifetime, PositionalFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which paths a route's directory takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RouteScope {
    /// The directory itself and everything below it, at any depth.
    Subtree,
    /// Only the files directly in the directory, and the directory's own entries (its listing
    /// and its sync): a flat namespace such as a zoned device's.
    Children,
}

impl RouteScope {
    /// True if a route at `dir` takes the file (or directory) `path`.
    fn takes_file(self, dir: &Path, path: &Path) -> bool {
        match self {
            RouteScope::Subtree => path.starts_with(dir),
            RouteScope::Children => path.file_name().is_some() && path.parent() == Some(dir),
        }
    }

    /// True if a route at `dir` holds the entries of directory `listed`.
    fn takes_entries_of(self, dir: &Path, listed: &Path) -> bool {
        match self {
            RouteScope::Subtree => listed.starts_with(dir),
            RouteScope::Children => listed == dir,
        }
    }
}

/// Which file system serves an operation on a path a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handler {
    /// The route's file system.
    Route,
    /// The base file system, whatever the routes say.
    Base,
}

/// The choices that tell one kind of route from another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RouteRules {
    /// Which paths a route's directory takes.
    pub scope: RouteScope,
    /// Who creates a directory a route takes (`create_dir_all`).
    pub create_dirs: Handler,
    /// Who takes a lock on a path a route takes (`lock`).
    pub locks: Handler,
    /// File names the base keeps even inside a route's directory (a zoned tier's device file).
    pub base_names: &'static [&'static str],
    /// What a route is, for error messages: "pm tier", "zoned tier".
    pub route_kind: &'static str,
}

impl RouteRules {
    /// True if the base keeps `path` by its file name.
    fn keeps_on_base(&self, path: &Path) -> bool {
        path.file_name()
            .is_some_and(|name| self.base_names.iter().any(|kept| name == *kept))
    }
}

/// One routed directory and the file system holding its files.
struct Route {
    dir: PathBuf,
    fs: Arc<dyn Fs>,
}

/// A file system that sends the paths its routes take to the routes' file systems and every
/// other path to the base. Listing and syncing a directory go to the route holding its
/// entries; `create_dir_all` and `lock` go where [`RouteRules`] say. Where routes nest, the
/// deepest directory wins. A rename works only within one file system: two routes may share
/// one (every pm tier maps through the same [`super::MappedFs`]).
pub(crate) struct RoutingFs {
    base: Arc<dyn Fs>,
    routes: Vec<Route>,
    rules: RouteRules,
}

impl RoutingFs {
    /// Routes each `(directory, file system)` pair over `base`, by `rules`.
    pub fn new(
        base: Arc<dyn Fs>,
        routes: Vec<(PathBuf, Arc<dyn Fs>)>,
        rules: RouteRules,
    ) -> RoutingFs {
        let routes = routes
            .into_iter()
            .map(|(dir, fs)| Route { dir, fs })
            .collect();
        RoutingFs {
            base,
            routes,
            rules,
        }
    }

    /// The deepest route whose directory satisfies `takes`.
    fn deepest_route(&self, takes: impl Fn(&Path) -> bool) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| takes(&r.dir))
            .max_by_key(|r| r.dir.components().count())
    }

    /// The route that takes the file `path`, unless the base keeps its name.
    fn route_of_file(&self, path: &Path) -> Option<&Route> {
        if self.rules.keeps_on_base(path) {
            return None;
        }
        self.deepest_route(|dir| self.rules.scope.takes_file(dir, path))
    }

    /// The route that holds the entries of directory `dir`.
    fn route_of_dir(&self, dir: &Path) -> Option<&Route> {
        self.deepest_route(|route_dir| self.rules.scope.takes_entries_of(route_dir, dir))
    }

    /// The file system of `route`, or the base when there is none.
    fn fs_of<'a>(&'a self, route: Option<&'a Route>) -> &'a dyn Fs {
        route.map_or(self.base.as_ref(), |r| r.fs.as_ref())
    }

    fn for_file(&self, path: &Path) -> &dyn Fs {
        self.fs_of(self.route_of_file(path))
    }

    fn for_dir(&self, dir: &Path) -> &dyn Fs {
        self.fs_of(self.route_of_dir(dir))
    }

    /// `routed` when `handler` is the route, else the base.
    fn handled_by<'a>(&'a self, handler: Handler, routed: &'a dyn Fs) -> &'a dyn Fs {
        match handler {
            Handler::Route => routed,
            Handler::Base => self.base.as_ref(),
        }
    }

    /// Where `path` lives, in words, for an error message.
    fn describe(&self, path: &Path) -> String {
        match self.route_of_file(path) {
            Some(r) => format!("on the {} at {}", self.rules.route_kind, r.dir.display()),
            None => "on the file system below the routed tiers".to_string(),
        }
    }

    /// The error of a rename whose ends live on different file systems.
    fn cross_route_rename(&self, from: &Path, to: &Path) -> Error {
        Error::invalid(format!(
            "cannot rename {} to {}: the first is {}, the second {}, and a rename cannot move a \
             file between file systems",
            from.display(),
            to.display(),
            self.describe(from),
            self.describe(to)
        ))
    }
}

/// True if `a` and `b` are the same file system object.
fn same_fs(a: &dyn Fs, b: &dyn Fs) -> bool {
    std::ptr::addr_eq(a as *const dyn Fs, b as *const dyn Fs)
}

impl Fs for RoutingFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.for_file(path).create(path)
    }

    fn create_with_lifetime(
        &self,
        path: &Path,
        lifetime: Lifetime,
    ) -> Result<Box<dyn WritableFile>> {
        self.for_file(path).create_with_lifetime(path, lifetime)
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.for_file(path).open_append(path)
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.for_file(path).open_read(path)
    }

    fn open_read_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        // The route decides what bypassing a cache means: a mapped file's reads are the copy.
        self.for_file(path).open_read_direct(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.for_file(path).exists(path)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        self.for_dir(dir).list_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.handled_by(self.rules.create_dirs, self.for_dir(dir))
            .create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.for_file(path).remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let fs = self.for_file(from);
        if !same_fs(fs, self.for_file(to)) {
            return Err(self.cross_route_rename(from, to));
        }
        fs.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.for_dir(dir).sync_dir(dir)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.for_file(path).file_size(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.handled_by(self.rules.locks, self.for_file(path))
            .lock(path)
    }

    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        self.for_file(path).open_positional(path, len)
    }

    fn unrouted(&self) -> Option<Arc<dyn Fs>> {
        // Routers stack (pm tiers over zoned ones): the bottom one's base is the answer.
        Some(
            self.base
                .unrouted()
                .unwrap_or_else(|| Arc::clone(&self.base)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file, FaultFs};

    const SUBTREE: RouteRules = RouteRules {
        scope: RouteScope::Subtree,
        create_dirs: Handler::Route,
        locks: Handler::Route,
        base_names: &[],
        route_kind: "pm tier",
    };

    const CHILDREN: RouteRules = RouteRules {
        scope: RouteScope::Children,
        create_dirs: Handler::Base,
        locks: Handler::Base,
        base_names: &["DEVICE"],
        route_kind: "zoned tier",
    };

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn as_fs(fs: &Arc<FaultFs>) -> Arc<dyn Fs> {
        fs.clone()
    }

    /// Creates `path` through `fs` holding `data`.
    fn write(fs: &dyn Fs, path: &Path, data: &[u8]) {
        let mut file = fs.create(path).unwrap();
        file.append(data).unwrap();
        file.close().unwrap();
    }

    /// The names `fs` lists in `dir`, sorted.
    fn listing(fs: &dyn Fs, dir: &str) -> Vec<String> {
        let mut names = fs.list_dir(&p(dir)).unwrap();
        names.sort();
        names
    }

    /// A base and two routed file systems, each its own in-memory file system with the
    /// directories the tests write to, so where a file landed is where it exists.
    struct Setup {
        base: Arc<FaultFs>,
        outer: Arc<FaultFs>,
        inner: Arc<FaultFs>,
        router: RoutingFs,
    }

    /// Routes `/db/pm` to `outer` and `/db/pm/deep` (nested in it) to `inner`.
    fn setup(rules: RouteRules) -> Setup {
        let (base, outer, inner) = (FaultFs::new(1), FaultFs::new(2), FaultFs::new(3));
        for fs in [&base, &outer, &inner] {
            for dir in ["/db/pm/deep/sub", "/db/pm2", "/db/other"] {
                fs.create_dir_all(&p(dir)).unwrap();
            }
        }
        let routes = vec![
            (p("/db/pm"), as_fs(&outer)),
            (p("/db/pm/deep"), as_fs(&inner)),
        ];
        let router = RoutingFs::new(as_fs(&base), routes, rules);
        Setup {
            base,
            outer,
            inner,
            router,
        }
    }

    impl Setup {
        /// Writes `path` through the router and names the one file system that holds it.
        fn holder_of_new_file(&self, path: &str) -> &'static str {
            write(&self.router, &p(path), b"x");
            let holders: Vec<&str> = [
                ("base", &self.base),
                ("outer", &self.outer),
                ("inner", &self.inner),
            ]
            .into_iter()
            .filter(|(_, fs)| fs.exists(&p(path)))
            .map(|(name, _)| name)
            .collect();
            assert_eq!(holders.len(), 1, "{path} is on {holders:?}");
            holders[0]
        }

        /// Writes each path through the router and checks which file system holds it.
        fn assert_holders(&self, expected: &[(&str, &str)]) {
            for &(path, holder) in expected {
                assert_eq!(self.holder_of_new_file(path), holder, "{path}");
            }
        }
    }

    #[test]
    fn the_deepest_route_wins_where_routes_nest() {
        let s = setup(SUBTREE);
        s.assert_holders(&[
            ("/db/pm/deep/000007.sst", "inner"),
            ("/db/pm/deep/sub/000008.sst", "inner"),
            ("/db/pm/000009.sst", "outer"),
        ]);
        assert_eq!(
            listing(&s.router, "/db/pm/deep"),
            ["000007.sst", "sub"],
            "the inner route's listing"
        );
        assert_eq!(listing(&s.router, "/db/pm"), ["000009.sst", "deep"]);
    }

    #[test]
    fn a_path_outside_every_route_goes_to_the_base() {
        let s = setup(SUBTREE);
        // `/db/pm2` shares a string prefix with `/db/pm` but is not below it.
        s.assert_holders(&[
            ("/db/pm2/000010.sst", "base"),
            ("/db/other/CURRENT", "base"),
            ("/db/MANIFEST-000001", "base"),
        ]);
        s.router.create_dir_all(&p("/db/fresh")).unwrap();
        assert!(s.base.exists(&p("/db/fresh")) && !s.outer.exists(&p("/db/fresh")));
    }

    #[test]
    fn a_children_route_takes_only_the_files_directly_in_its_directory() {
        let s = setup(CHILDREN);
        s.assert_holders(&[
            ("/db/pm/000011.sst", "outer"),
            ("/db/pm/deep/000012.sst", "inner"),
            ("/db/pm/deep/sub/000013.sst", "base"),
            // A name the rules keep on the base, though it is directly in a route's directory.
            ("/db/pm/DEVICE", "base"),
        ]);
        assert_eq!(
            listing(&s.router, "/db/pm"),
            ["000011.sst", "deep"],
            "the route's own listing, without the device file the base holds"
        );
    }

    #[test]
    fn locks_and_new_directories_go_where_the_rules_say() {
        let on_route = setup(SUBTREE);
        let _lock = on_route.router.lock(&p("/db/pm/LOCK")).unwrap();
        assert!(on_route.outer.exists(&p("/db/pm/LOCK")));
        on_route.router.create_dir_all(&p("/db/pm/new")).unwrap();
        assert!(on_route.outer.exists(&p("/db/pm/new")));

        let on_base = setup(CHILDREN);
        let _lock = on_base.router.lock(&p("/db/pm/LOCK")).unwrap();
        assert!(on_base.base.exists(&p("/db/pm/LOCK")));
        assert!(!on_base.outer.exists(&p("/db/pm/LOCK")));
        assert!(matches!(
            on_base.router.lock(&p("/db/pm/LOCK")),
            Err(Error::Locked(_))
        ));
        on_base.router.create_dir_all(&p("/db/pm")).unwrap();
        on_base.router.create_dir_all(&p("/db/pm/new")).unwrap();
        assert!(on_base.base.exists(&p("/db/pm/new")));
        assert!(!on_base.outer.exists(&p("/db/pm/new")));
    }

    #[test]
    fn a_rename_across_routes_fails_naming_both_paths_and_moves_nothing() {
        for rules in [SUBTREE, CHILDREN] {
            let s = setup(rules);
            let (from, to) = (p("/db/pm/000014.tmp"), p("/db/other/000014.sst"));
            write(&s.router, &from, b"table");
            match s.router.rename(&from, &to) {
                Err(Error::InvalidArgument(msg)) => {
                    assert!(msg.contains("/db/pm/000014.tmp"), "{msg}");
                    assert!(msg.contains("/db/other/000014.sst"), "{msg}");
                    assert!(msg.contains(rules.route_kind), "{msg}");
                }
                other => panic!("expected InvalidArgument, got {other:?}"),
            }
            assert_eq!(read_file(&s.router, &from).unwrap(), b"table");
            assert!(!s.router.exists(&to));
            assert!(matches!(
                s.router.rename(&from, &p("/db/pm/deep/000014.sst")),
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn routes_sharing_one_file_system_rename_between_each_other() {
        let (base, shared) = (FaultFs::new(4), FaultFs::new(5));
        for dir in ["/a", "/b"] {
            shared.create_dir_all(&p(dir)).unwrap();
        }
        let routes = vec![(p("/a"), as_fs(&shared)), (p("/b"), as_fs(&shared))];
        let router = RoutingFs::new(as_fs(&base), routes, SUBTREE);
        write(&router, &p("/a/000015.sst"), b"moved");
        router
            .rename(&p("/a/000015.sst"), &p("/b/000015.sst"))
            .unwrap();
        assert_eq!(read_file(&*shared, &p("/b/000015.sst")).unwrap(), b"moved");
        assert!(!base.exists(&p("/b/000015.sst")));
    }

    #[test]
    fn stacked_routers_unroute_to_the_bottom_base() {
        let s = setup(CHILDREN);
        let bottom = as_fs(&s.base);
        let lower: Arc<dyn Fs> = Arc::new(s.router);
        let upper = RoutingFs::new(
            Arc::clone(&lower),
            vec![(p("/x"), as_fs(&s.outer))],
            SUBTREE,
        );
        assert!(same_fs(&*upper.unrouted().unwrap(), &*bottom));
        assert!(same_fs(&*lower.unrouted().unwrap(), &*bottom));
    }
}

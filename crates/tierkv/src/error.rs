//! The one error type of tierkv.
//!
//! Every variant carries structured fields so a caller can react to it and a person can read it:
//! which file, which offset, which option, which tier. `Io` keeps the operation and the path that
//! failed; `Corruption` says what check failed where.

use std::fmt;
use std::path::PathBuf;

/// A specialised `Result` for tierkv operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in tierkv.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// What was being done: "open", "read", "write", "fdatasync", "rename", ...
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The error the operating system returned.
        source: std::io::Error,
    },
    /// A checksum, magic number or structural check failed while reading stored data.
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset in that file where the damaged unit starts.
        offset: u64,
        /// What check failed.
        what: String,
    },
    /// The caller passed something that is not acceptable (an option, a key, a value).
    InvalidArgument(String),
    /// No database at the path and `create_if_missing` is false, or a required file is missing.
    NotFound(String),
    /// A database already exists and `error_if_exists` is true.
    AlreadyExists(PathBuf),
    /// Another process (or another `Db` in this one) holds the database's LOCK file.
    Locked(PathBuf),
    /// A tier ran out of space and no later tier could take the file.
    NoSpace {
        /// The tier that was full.
        tier: String,
    },
    /// The engine is temporarily unable to take the request (queues full); retry later.
    Busy(String),
    /// A transaction's commit lost a race: another write changed `key` after the transaction
    /// began and before it committed. Nothing of the transaction was written; retry it.
    Conflict {
        /// The first key found changed.
        key: Vec<u8>,
    },
    /// The database (or the log or MANIFEST the request needed) was closed.
    Closed(String),
    /// A background job (a flush, compaction, migration, replica copy, value-log collection
    /// or hot-store promotion) panicked. The panic is caught where the job runs, so the
    /// database stops writes with this cause instead of leaving its waiters blocked. A panic
    /// is a defect, never cleared by [`crate::Db::resume`]; reopen the database to continue.
    BackgroundPanic {
        /// Which kind of job panicked: "flush", "compaction", "migration", ...
        job: &'static str,
        /// The panic's message (its payload when that is a string).
        message: String,
    },
    /// Writes are stopped: an earlier write, sync, memtable switch or background job failed
    /// with `cause` (kept whole: a full tier is [`Error::NoSpace`] or an `Io` of kind
    /// `StorageFull`, damage is [`Error::Corruption`] naming file and offset), and the
    /// database's durable state or its background work cannot go on safely. Reads go on;
    /// reopen the database to continue, or, when a flush, compaction or migration ran out
    /// of space, make room and call [`crate::Db::resume`].
    Stopped {
        /// The first failure, as it was reported where it happened.
        cause: Box<Error>,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        what: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// The message without the `invalid argument: ` prefix of its kind when it is one, for a
    /// message that puts it in a larger context (a config file's name) and stays of that kind;
    /// other errors as displayed.
    pub fn detail(&self) -> String {
        match self {
            Error::InvalidArgument(m) => m.clone(),
            e => e.to_string(),
        }
    }

    /// True for `Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// Writes stopped by `cause` (see [`Error::Stopped`]).
    pub(crate) fn stopped(cause: &Error) -> Self {
        match cause {
            // Already a stop: keep the first cause, not a chain of them.
            Error::Stopped { cause } => Error::Stopped {
                cause: Box::new(cause.duplicate()),
            },
            other => Error::Stopped {
                cause: Box::new(other.duplicate()),
            },
        }
    }

    /// The failure at the root of this error: the cause of a [`Error::Stopped`], else the
    /// error itself.
    pub fn root_cause(&self) -> &Error {
        match self {
            Error::Stopped { cause } => cause.root_cause(),
            other => other,
        }
    }

    /// True when the root cause is a full tier or device ([`Error::NoSpace`], or an `Io`
    /// error of kind `StorageFull`).
    pub fn is_no_space(&self) -> bool {
        match self.root_cause() {
            Error::NoSpace { .. } => true,
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::StorageFull,
            _ => false,
        }
    }

    /// True when the root cause is a background job's panic ([`Error::BackgroundPanic`]).
    pub fn is_background_panic(&self) -> bool {
        matches!(self.root_cause(), Error::BackgroundPanic { .. })
    }

    /// A copy of this error for handing to several waiters (the `io::Error` source is
    /// re-created from its errno where it has one, so callers can still tell `EMFILE` from
    /// `ENOSPC`, else from its kind and message).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: match source.raw_os_error() {
                    Some(errno) => std::io::Error::from_raw_os_error(errno),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption { file, offset, what } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                what: what.clone(),
            },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::NotFound(m) => Error::NotFound(m.clone()),
            Error::AlreadyExists(p) => Error::AlreadyExists(p.clone()),
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::NoSpace { tier } => Error::NoSpace { tier: tier.clone() },
            Error::Busy(m) => Error::Busy(m.clone()),
            Error::Conflict { key } => Error::Conflict { key: key.clone() },
            Error::Closed(m) => Error::Closed(m.clone()),
            Error::BackgroundPanic { job, message } => Error::BackgroundPanic {
                job,
                message: message.clone(),
            },
            Error::Stopped { cause } => Error::stopped(cause),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "I/O error: {op} {}: {source}", path.display())
            }
            Error::Corruption { file, offset, what } => {
                write!(
                    f,
                    "corruption in {} at offset {offset}: {what}",
                    file.display()
                )
            }
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::NotFound(m) => write!(f, "not found: {m}"),
            Error::AlreadyExists(p) => write!(f, "database already exists: {}", p.display()),
            Error::Locked(p) => write!(
                f,
                "database is locked by another process or handle: {}",
                p.display()
            ),
            Error::NoSpace { tier } => {
                write!(f, "no space left on tier '{tier}'")
            }
            Error::Busy(m) => write!(f, "busy: {m}"),
            Error::Conflict { key } => write!(
                f,
                "transaction conflict: key {} changed since the transaction began",
                key.escape_ascii()
            ),
            Error::Closed(m) => write!(f, "database closed: {m}"),
            Error::BackgroundPanic { job, message } => {
                write!(f, "background {job} job panicked: {message}")
            }
            Error::Stopped { cause } => write!(
                f,
                "writes are stopped after an earlier failure ({cause}); reopen the database"
            ),
        }
    }
}

/// `err` and its causes on one line, `: ` between them, each cause shown once: a cause whose
/// text an earlier message already holds (this crate's I/O errors show their OS error, and
/// return it as their source too) is not repeated. For programs that print an error chain.
pub fn chain_message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Stopped { cause } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_message_shows_each_cause_once() {
        let enoent = Error::io(
            "open",
            "/fast/000009.sst",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        let m = chain_message(&enoent);
        assert_eq!(m.matches("os error 2").count(), 1, "{m}");
        let stopped = Error::stopped(&enoent);
        let m = chain_message(&stopped);
        assert_eq!(m.matches("os error 2").count(), 1, "{m}");
        assert!(m.starts_with("writes are stopped"), "{m}");
        assert_eq!(Error::invalid("size \"x\"").detail(), "size \"x\"");
    }

    #[test]
    fn a_copy_keeps_the_errno() {
        let emfile = Error::io(
            "open",
            "/fast/000009.sst",
            std::io::Error::from_raw_os_error(libc::EMFILE),
        );
        let Error::Stopped { cause } = Error::stopped(&emfile) else {
            panic!("a stop");
        };
        let Error::Io { source, .. } = *cause else {
            panic!("an I/O cause");
        };
        assert_eq!(source.raw_os_error(), Some(libc::EMFILE));
        assert_eq!(emfile.duplicate().to_string(), emfile.to_string());
    }

    #[test]
    fn a_stop_keeps_its_first_cause_typed() {
        let full = Error::io(
            "write",
            "/fast/000007.sst",
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        );
        let stopped = Error::stopped(&full);
        assert!(stopped.is_no_space());
        assert!(matches!(
            stopped.root_cause(),
            Error::Io { op: "write", .. }
        ));
        assert!(
            stopped.to_string().contains("/fast/000007.sst"),
            "{stopped}"
        );
        // Stopping again (a later write refused) keeps the first cause, not a chain.
        let again = Error::stopped(&stopped);
        assert!(matches!(&again, Error::Stopped { cause } if matches!(**cause, Error::Io { .. })));
        assert!(std::error::Error::source(&again).is_some());

        let damaged = Error::stopped(&Error::corruption("/fast/MANIFEST-000003", 4096, "crc"));
        assert!(damaged.root_cause().is_corruption());
        assert!(!damaged.is_no_space());
        assert!(Error::stopped(&Error::NoSpace {
            tier: "fast".into()
        })
        .is_no_space());
    }

    #[test]
    fn a_panic_cause_names_its_job_and_message() {
        let panic = Error::BackgroundPanic {
            job: "flush",
            message: "index out of bounds".into(),
        };
        let stopped = Error::stopped(&panic);
        assert!(stopped.is_background_panic());
        assert!(!stopped.is_no_space());
        let shown = stopped.to_string();
        assert!(shown.contains("background flush job panicked"), "{shown}");
        assert!(shown.contains("index out of bounds"), "{shown}");
        assert_eq!(panic.duplicate().to_string(), panic.to_string());
    }
}

//! The server: opening the database, the listener, the accept loop with its client limit,
//! and graceful shutdown.
//!
//! Shutdown (SIGTERM, SIGINT, or the future given to [`Server::run`]): the listener closes,
//! every connection stops reading, answers what it has in flight and closes; then `run`
//! returns and the last reference to the database closes it (the engine completes or fails
//! every request still in flight, and a clean close keeps even `buffered` writes).

use crate::config::ServerConfig;
use crate::conn;
use crate::scan::Cursors;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tierkv::{Db, Options, WriteOptions};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// How long shutdown waits for connections to answer what they have in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Server-wide counters (INFO's clients and stats sections).
#[derive(Debug, Default)]
pub struct Counters {
    /// Clients connected now.
    pub connected: AtomicUsize,
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Connections refused at `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Requests parsed.
    pub total_commands: AtomicU64,
    /// Connections closed for malformed or oversized input.
    pub protocol_errors: AtomicU64,
    /// Connections closed for idling or not reading replies.
    pub timeouts: AtomicU64,
    /// Pauses taken because the engine answered `Busy`.
    pub busy_backoffs: AtomicU64,
    /// Writes of replies to clients (system calls asked for; pipelined replies share one).
    pub reply_writes: AtomicU64,
    /// Last client id handed out.
    pub next_client_id: AtomicU64,
}

/// What every connection shares.
pub struct Shared {
    /// The database.
    pub db: Arc<Db>,
    /// The settings.
    pub config: ServerConfig,
    /// Every write's options (the configured durability).
    pub write_opts: WriteOptions,
    /// SCAN cursors.
    pub cursors: Mutex<Cursors>,
    /// Counters.
    pub counters: Counters,
    /// When the server started.
    pub started: Instant,
    /// The address it listens on.
    pub addr: SocketAddr,
}

/// Why the server cannot start.
#[derive(Debug)]
pub enum StartError {
    /// The database is open in another process (its LOCK file is held).
    Locked {
        /// Tier 0's directory.
        dir: std::path::PathBuf,
    },
    /// The database cannot be opened.
    Open {
        /// Tier 0's directory.
        dir: std::path::PathBuf,
        /// The engine's error.
        source: tierkv::Error,
    },
    /// The address cannot be listened on.
    Bind {
        /// `bind:port`.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Locked { dir } => write!(
                f,
                "the database in {} is already open in another process (its LOCK file is held): \
                 is another tierkv-server running on these tiers? Stop it, or give this one \
                 other --tier directories",
                dir.display()
            ),
            StartError::Open { dir, source } => {
                write!(f, "cannot open the database in {}: {source}", dir.display())
            }
            StartError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Opens the database, mapping a held LOCK to a clear error.
pub fn open_db(opts: Options) -> Result<Db, StartError> {
    let dir = opts.tiers[0].path.clone();
    Db::open(opts).map_err(|source| match source {
        tierkv::Error::Locked(_) => StartError::Locked { dir },
        source => StartError::Open { dir, source },
    })
}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Binds the configured address (call inside the runtime).
    pub async fn bind(db: Db, config: ServerConfig) -> Result<Server, StartError> {
        let addr = format!("{}:{}", config.bind, config.port);
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: addr.clone(),
                source,
            })?;
        let local = listener
            .local_addr()
            .map_err(|source| StartError::Bind { addr, source })?;
        let shared = Arc::new(Shared {
            db: Arc::new(db),
            write_opts: WriteOptions {
                durability: config.durability.durability(),
            },
            config,
            cursors: Mutex::new(Cursors::default()),
            counters: Counters::default(),
            started: Instant::now(),
            addr: local,
        });
        Ok(Server { listener, shared })
    }

    /// The address it listens on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Serves until `stop` completes, then shuts down gracefully. Returns the database once
    /// no connection holds it (`None` if one was still busy after [`SHUTDOWN_GRACE`]).
    pub async fn run(self, stop: impl Future<Output = ()>) -> Option<Db> {
        let Server { listener, shared } = self;
        let slots = Arc::new(Semaphore::new(shared.config.maxclients));
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => admit(stream, &shared, &slots, &shutdown_rx),
                    // NB: out of descriptors or a connection reset before accept: keep going.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
            }
        }
        drop(listener);
        let _ = shutdown_tx.send(true);
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        let all = u32::try_from(shared.config.maxclients).unwrap_or(u32::MAX);
        let drained = tokio::time::timeout_at(deadline, slots.acquire_many(all)).await;
        if drained.is_err() {
            return None;
        }
        let mut shared = shared;
        loop {
            // NB: a blocking task of a closed connection may still hold a reference briefly.
            match Arc::try_unwrap(shared) {
                Ok(s) => return Arc::into_inner(s.db),
                Err(s) if tokio::time::Instant::now() < deadline => shared = s,
                Err(_) => return None,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Starts serving a new connection, or refuses it at `maxclients`.
fn admit(
    stream: TcpStream,
    shared: &Arc<Shared>,
    slots: &Arc<Semaphore>,
    shutdown: &watch::Receiver<bool>,
) {
    let counters = &shared.counters;
    let Ok(permit) = Arc::clone(slots).try_acquire_owned() else {
        counters
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        tokio::spawn(refuse(stream));
        return;
    };
    counters.total_connections.fetch_add(1, Ordering::Relaxed);
    counters.connected.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::clone(shared);
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        conn::serve(stream, Arc::clone(&shared), shutdown).await;
        shared.counters.connected.fetch_sub(1, Ordering::Relaxed);
        // NB: the reference goes before the slot, so shutdown finds the database free.
        drop(shared);
        drop(permit);
    });
}

async fn refuse(mut stream: TcpStream) {
    let msg = b"-ERR max number of clients reached\r\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(msg)).await;
}

/// Completes on SIGTERM or SIGINT.
pub async fn termination_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install the SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

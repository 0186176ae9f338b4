//! One client connection: reading and parsing requests, keeping many in flight through the
//! engine's asynchronous API, and answering them in order.
//!
//! A connection is two halves joined in one task. The **reader** parses requests, submits
//! each to the engine (`submit_*`, or a blocking thread for transactions) and queues what it
//! gets back ([`Pending`]) on a bounded channel; consecutive plain SETs and MSETs are merged
//! into one write batch. The **writer** takes the queue in order, waits for each result,
//! encodes the replies and writes them out, many per system call.
//!
//! Ordering: the engine does not order requests that are in flight together, but a client
//! expects its own commands to take effect in the order it sent them. So a request waits,
//! before it is submitted, for the earlier requests of this connection that touch one of its
//! keys (a read for earlier writes of the key; a write for earlier reads and writes of it); a
//! whole-keyspace command (SCAN, DBSIZE, FLUSHALL) waits for every earlier one, and FLUSHALL
//! also makes every later one wait for it. Requests on different keys overlap freely. The
//! bookkeeping is [`crate::deps`].
//!
//! Bounds: at most [`MAX_IN_FLIGHT`] requests queued per connection (then the reader stops
//! reading: TCP pushes back on the client), the parser's limits on one request, an idle
//! timeout on reads and a timeout on writes a client does not drain. The engine's `Busy`
//! makes the reader wait for one of its requests to complete (or a short pause) and retry.

use crate::atomic::{self, AtomicOp};
use crate::commands::{self, ClientCmd, Command, CommandQuery, SetCond, SPECS};
use crate::deps::{Deps, KeyDigest};
use crate::exec::{self, GetKind, MultiKind, Pending, ScanCall};
use crate::info;
use crate::resp::{Limits, Parser, Proto, Reply, Request};
use crate::server::Shared;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tierkv::{Db, Error, ReadOptions, WriteBatch, MAX_KEY_LEN, MAX_VALUE_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

/// Requests one connection may have queued for its writer.
pub const MAX_IN_FLIGHT: usize = 1024;
/// Pipelined SET/MSET commands merged into one write batch at most.
const MAX_MERGED_COMMANDS: usize = 256;
/// Encoded bytes of one merged write batch at most (less where the database's own batch
/// limit is less).
const MAX_MERGED_BYTES: usize = 4 << 20;
/// Bytes read per system call when no large argument is pending.
const READ_CHUNK: usize = 16 << 10;
/// Replies buffered before the writer writes them out even if more are ready.
const WRITE_CHUNK: usize = 64 << 10;
/// Longest pause between retries after the engine answered `Busy`.
const MAX_BUSY_PAUSE: Duration = Duration::from_millis(5);

/// A queued request: its position in the connection's order and how to answer it.
struct Item {
    idx: u64,
    proto: Proto,
    pending: Pending,
}

/// Serves one accepted connection until it closes, fails or the server shuts down.
pub async fn serve(stream: TcpStream, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let (read, write) = stream.into_split();
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
    let (done_tx, done_rx) = watch::channel(0u64);
    let id = shared
        .counters
        .next_client_id
        .fetch_add(1, Ordering::Relaxed)
        + 1;
    let reader = Reader::new(Arc::clone(&shared), id, tx, done_rx);
    let writer = write_replies(write, rx, done_tx, Arc::clone(&shared));
    tokio::join!(reader.run(read, shutdown), writer);
}

/// How the reader goes on after a request.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    /// Stop reading (QUIT, a protocol error, the writer is gone); queued replies still go.
    Stop,
}

/// Pipelined SET/MSET commands not yet submitted.
#[derive(Default)]
struct OpenBatch {
    batch: WriteBatch,
    keys: Vec<KeyDigest>,
    commands: usize,
    /// The latest earlier request it must wait for.
    dep: u64,
}

/// The per-connection client state the reader keeps.
struct Client {
    id: u64,
    proto: Proto,
    authenticated: bool,
    name: Option<Vec<u8>>,
}

struct Reader {
    shared: Arc<Shared>,
    client: Client,
    parser: Parser,
    buf: Vec<u8>,
    tx: mpsc::Sender<Item>,
    done: watch::Receiver<u64>,
    next_idx: u64,
    deps: Deps,
    open: OpenBatch,
    /// Most encoded bytes of a merged write batch.
    merge_limit: usize,
}

impl Reader {
    fn new(
        shared: Arc<Shared>,
        id: u64,
        tx: mpsc::Sender<Item>,
        done: watch::Receiver<u64>,
    ) -> Self {
        let authenticated = shared.config.requirepass.is_none();
        let limits = if authenticated {
            full_limits(&shared)
        } else {
            Limits::UNAUTHENTICATED
        };
        Reader {
            client: Client {
                id,
                proto: Proto::Resp2,
                authenticated,
                name: None,
            },
            parser: Parser::new(limits),
            buf: Vec::with_capacity(READ_CHUNK),
            tx,
            done,
            next_idx: 1,
            deps: Deps::default(),
            open: OpenBatch::default(),
            merge_limit: MAX_MERGED_BYTES.min(shared.db.options().max_batch_bytes()),
            shared,
        }
    }

    /// Reads until the client stops, then drops its end of the queue so the writer finishes.
    async fn run(mut self, mut read: OwnedReadHalf, mut shutdown: watch::Receiver<bool>) {
        loop {
            if self.serve_buffered().await == Flow::Stop || self.flush_batch().await == Flow::Stop {
                break;
            }
            self.buf.reserve(READ_CHUNK);
            let got = tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                got = self.read_some(&mut read) => got,
            };
            if !got {
                break;
            }
        }
        let _ = self.flush_batch().await;
    }

    /// Reads more input; false when the client closed, failed or idled out.
    async fn read_some(&mut self, read: &mut OwnedReadHalf) -> bool {
        loop {
            let Some(limit) = self.shared.config.timeout else {
                return matches!(read.read_buf(&mut self.buf).await, Ok(n) if n > 0);
            };
            match tokio::time::timeout(limit, read.read_buf(&mut self.buf)).await {
                Ok(r) => return matches!(r, Ok(n) if n > 0),
                // NB: a client waiting for replies is not idle.
                Err(_) if *self.done.borrow() + 1 < self.next_idx => continue,
                Err(_) => {
                    self.shared
                        .counters
                        .timeouts
                        .fetch_add(1, Ordering::Relaxed);
                    return false;
                }
            }
        }
    }

    /// Parses and starts every complete request in the buffer.
    async fn serve_buffered(&mut self) -> Flow {
        let mut pos = 0;
        let flow = loop {
            let step = match self.parser.parse(&self.buf[pos..]) {
                Ok(step) => step,
                Err(e) => {
                    self.shared
                        .counters
                        .protocol_errors
                        .fetch_add(1, Ordering::Relaxed);
                    let _ = self.flush_batch().await;
                    let _ = self.push(Pending::Ready(Reply::err(e))).await;
                    break Flow::Stop;
                }
            };
            pos += step.consumed;
            if let Some(req) = step.request {
                if self.request(req).await == Flow::Stop {
                    break Flow::Stop;
                }
            } else if step.consumed == 0 || pos == self.buf.len() {
                break Flow::Continue;
            }
        };
        // NB: only consumed bytes move, and the parser consumes a bulk argument's header
        // before its data arrives, so a large argument is not moved again while it fills.
        self.buf.drain(..pos);
        flow
    }

    async fn request(&mut self, req: Request) -> Flow {
        self.shared
            .counters
            .total_commands
            .fetch_add(1, Ordering::Relaxed);
        let spec = match commands::resolve(&req) {
            Ok(spec) => spec,
            Err(reply) => return self.reply(reply).await,
        };
        // NB: before the arguments are parsed, so that a client that has not authenticated
        // learns nothing from argument errors, as with Redis.
        if !self.client.authenticated && !spec.no_auth() {
            return self
                .reply(Reply::Error("NOAUTH Authentication required.".into()))
                .await;
        }
        let cmd = match commands::parse_args(spec, req) {
            Ok(cmd) => cmd,
            Err(reply) => return self.reply(reply).await,
        };
        match cmd {
            Command::Set {
                key,
                value,
                cond: SetCond::Always,
                get: false,
            } => self.merge_writes(vec![(key, value)]).await,
            Command::MSet(pairs) => self.merge_writes(pairs).await,
            other => {
                if self.flush_batch().await == Flow::Stop {
                    return Flow::Stop;
                }
                self.execute(other).await
            }
        }
    }

    /// Queues an answer that is known now.
    async fn reply(&mut self, reply: Reply) -> Flow {
        if self.flush_batch().await == Flow::Stop {
            return Flow::Stop;
        }
        self.push(Pending::Ready(reply)).await
    }

    /// Queues `pending` in order; returns its index via `last_idx`.
    async fn push(&mut self, pending: Pending) -> Flow {
        let idx = self.next_idx;
        let item = Item {
            idx,
            proto: self.client.proto,
            pending,
        };
        if self.tx.send(item).await.is_err() {
            return Flow::Stop;
        }
        self.next_idx += 1;
        self.deps.prune(*self.done.borrow());
        Flow::Continue
    }

    /// The index the last queued request got.
    fn last_idx(&self) -> u64 {
        self.next_idx - 1
    }

    /// Waits until every request up to `dep` has completed.
    async fn wait_for(&mut self, dep: u64) -> Flow {
        if *self.done.borrow() >= dep {
            return Flow::Continue;
        }
        match self.done.wait_for(|d| *d >= dep).await {
            Ok(_) => Flow::Continue,
            Err(_) => Flow::Stop,
        }
    }

    /// Calls `submit` until the engine stops answering `Busy`, pausing in between: until one
    /// of this connection's requests completes, or a short, growing pause.
    async fn retry_busy<T>(
        &mut self,
        mut submit: impl FnMut(&Db) -> tierkv::Result<T>,
    ) -> tierkv::Result<T> {
        let mut pause = Duration::from_micros(50);
        loop {
            match submit(&self.shared.db) {
                Err(Error::Busy(_)) => {}
                other => return other,
            }
            self.shared
                .counters
                .busy_backoffs
                .fetch_add(1, Ordering::Relaxed);
            if *self.done.borrow() < self.last_idx() {
                let _ = tokio::time::timeout(pause, self.done.changed()).await;
            } else {
                tokio::time::sleep(pause).await;
            }
            pause = (pause * 2).min(MAX_BUSY_PAUSE);
        }
    }

    /// Adds pipelined SET/MSET pairs to the open write batch.
    async fn merge_writes(&mut self, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Flow {
        if let Some(bad) = pairs.iter().find_map(|(k, v)| size_error(k, v)) {
            return self.reply(bad).await;
        }
        // NB: a batch over the database's limit fails as a whole, so SETs that each fit must
        // not be merged into one that does not; a command too large alone fails alone.
        let bytes: usize = pairs.iter().map(|(k, v)| encoded_put_len(k, v)).sum();
        let full = self.open.commands >= MAX_MERGED_COMMANDS
            || self.open.batch.encoded_len() + bytes > self.merge_limit;
        if full && self.flush_batch().await == Flow::Stop {
            return Flow::Stop;
        }
        for (k, v) in pairs {
            let key = self.deps.digest(&k);
            self.open.dep = self.open.dep.max(self.deps.write_dep(key));
            self.open.batch.put(&k, &v);
            self.open.keys.push(key);
        }
        self.open.commands += 1;
        Flow::Continue
    }

    /// Submits the open write batch, if any.
    async fn flush_batch(&mut self) -> Flow {
        if self.open.commands == 0 {
            return Flow::Continue;
        }
        let open = std::mem::take(&mut self.open);
        if self.wait_for(open.dep).await == Flow::Stop {
            return Flow::Stop;
        }
        let wo = self.shared.write_opts;
        let pending = match self
            .retry_busy(|db| db.submit_write(&wo, open.batch.clone()))
            .await
        {
            Ok(h) => Pending::Writes(h, open.commands),
            Err(e) => Pending::Repeat(Reply::err(e), open.commands),
        };
        let flow = self.push(pending).await;
        let idx = self.last_idx();
        for &key in &open.keys {
            self.deps.note_write(key, idx);
        }
        flow
    }

    /// Starts any command other than a mergeable write.
    async fn execute(&mut self, cmd: Command) -> Flow {
        match cmd {
            Command::Get(key) => self.get(key, GetKind::Value).await,
            Command::StrLen(key) => self.get(key, GetKind::Len).await,
            Command::MGet(keys) => self.multi_get(keys, MultiKind::Values).await,
            Command::Exists(keys) => self.multi_get(keys, MultiKind::Count).await,
            Command::Set {
                key,
                value,
                cond,
                get,
            } => {
                self.atomic(AtomicOp::Set {
                    key,
                    value,
                    cond,
                    get,
                })
                .await
            }
            Command::GetSet(key, value) => self.atomic(AtomicOp::GetSet(key, value)).await,
            Command::Del(keys) => self.atomic(AtomicOp::del(keys)).await,
            Command::IncrBy(key, by) => self.atomic(AtomicOp::IncrBy(key, by)).await,
            Command::Append(key, value) => self.atomic(AtomicOp::Append(key, value)).await,
            Command::Scan {
                cursor,
                pattern,
                count,
                strings,
            } => {
                self.scan(
                    cursor,
                    ScanCall {
                        count,
                        pattern,
                        strings,
                    },
                )
                .await
            }
            Command::DbSize => self.whole_keyspace(false).await,
            Command::FlushAll => self.whole_keyspace(true).await,
            other => {
                let (reply, flow) = self.connection_command(other);
                if self.push(Pending::Ready(reply)).await == Flow::Stop {
                    return Flow::Stop;
                }
                flow
            }
        }
    }

    async fn get(&mut self, key: Vec<u8>, kind: GetKind) -> Flow {
        let digest = self.deps.digest(&key);
        if self.wait_for(self.deps.read_dep(digest)).await == Flow::Stop {
            return Flow::Stop;
        }
        let ro = ReadOptions::default();
        let pending = match self.retry_busy(|db| db.submit_get(&ro, &key)).await {
            Ok(h) => Pending::Get(h, kind),
            Err(e) => Pending::Ready(Reply::err(e)),
        };
        let flow = self.push(pending).await;
        self.deps.note_read(digest, self.last_idx());
        flow
    }

    async fn multi_get(&mut self, keys: Vec<Vec<u8>>, kind: MultiKind) -> Flow {
        let digests: Vec<KeyDigest> = keys.iter().map(|k| self.deps.digest(k)).collect();
        let dep = digests
            .iter()
            .map(|&k| self.deps.read_dep(k))
            .max()
            .unwrap_or(0);
        if self.wait_for(dep).await == Flow::Stop {
            return Flow::Stop;
        }
        let ro = ReadOptions::default();
        let pending = match self
            .retry_busy(|db| db.submit_multi_get(&ro, keys.clone()))
            .await
        {
            Ok(h) => Pending::MultiGet(h, kind),
            Err(e) => Pending::Ready(Reply::err(e)),
        };
        let flow = self.push(pending).await;
        let idx = self.last_idx();
        digests.iter().for_each(|&k| self.deps.note_read(k, idx));
        flow
    }

    async fn atomic(&mut self, op: AtomicOp) -> Flow {
        let digests: Vec<KeyDigest> = op.keys().iter().map(|k| self.deps.digest(k)).collect();
        let dep = digests
            .iter()
            .map(|&k| self.deps.write_dep(k))
            .max()
            .unwrap_or(0);
        if self.wait_for(dep).await == Flow::Stop {
            return Flow::Stop;
        }
        let shared = Arc::clone(&self.shared);
        let task =
            tokio::task::spawn_blocking(move || atomic::run(&shared.db, &shared.write_opts, &op));
        let flow = self.push(Pending::Blocking(task)).await;
        let idx = self.last_idx();
        digests.iter().for_each(|&k| self.deps.note_write(k, idx));
        flow
    }

    async fn scan(&mut self, cursor: u64, call: ScanCall) -> Flow {
        if self.wait_for(self.last_idx()).await == Flow::Stop {
            return Flow::Stop;
        }
        let start = self
            .shared
            .cursors
            .lock()
            .expect("cursor table")
            .start_key(cursor);
        let Some(start) = start else {
            return self
                .push(Pending::Ready(Reply::err("invalid cursor")))
                .await;
        };
        let ro = ReadOptions::default();
        let count = call.count;
        let pending = match self
            .retry_busy(|db| db.submit_scan(ro.clone(), &start, count))
            .await
        {
            Ok(h) => Pending::Scan(h, call),
            Err(e) => Pending::Ready(Reply::err(e)),
        };
        self.push(pending).await
    }

    /// DBSIZE (`flush` false) or FLUSHALL: after every earlier request, on a blocking thread.
    async fn whole_keyspace(&mut self, flush: bool) -> Flow {
        if flush && !self.shared.config.enable_flushall {
            return self
                .push(Pending::Ready(Reply::err(
                    "FLUSHALL is disabled: start tierkv-server with --enable-flushall to allow it",
                )))
                .await;
        }
        if self.wait_for(self.last_idx()).await == Flow::Stop {
            return Flow::Stop;
        }
        let shared = Arc::clone(&self.shared);
        let task = tokio::task::spawn_blocking(move || {
            if flush {
                let wo = shared.write_opts;
                exec::delete_all(shared, wo)
            } else {
                exec::count_keys(shared)
            }
        });
        let flow = self.push(Pending::Blocking(task)).await;
        if flush {
            self.deps.set_barrier(self.last_idx());
        }
        flow
    }

    /// Commands answered from the connection's and server's state.
    fn connection_command(&mut self, cmd: Command) -> (Reply, Flow) {
        let reply = match cmd {
            Command::Ping(None) => Reply::Simple("PONG".into()),
            Command::Ping(Some(msg)) | Command::Echo(msg) => Reply::Bulk(msg),
            Command::Quit => return (Reply::ok(), Flow::Stop),
            Command::Select(0) => Reply::ok(),
            Command::Select(_) => Reply::err("DB index is out of range"),
            Command::Auth { user, pass } => self.auth(user.as_deref(), &pass),
            Command::Hello { proto, auth, name } => self.hello(proto, auth, name),
            Command::Client(c) => self.client_command(c),
            Command::Info(sections) => Reply::Verbatim(info::info(&self.shared, &sections)),
            Command::ConfigGet(patterns) => info::config_get(&self.shared, &patterns),
            Command::Command(q) => command_query(q),
            other => Reply::err(format!(
                "internal error: {other:?} reached the wrong handler"
            )),
        };
        (reply, Flow::Continue)
    }

    /// AUTH: `user` is `None` when only a password was given (the `default` user).
    fn auth(&mut self, user: Option<&[u8]>, pass: &[u8]) -> Reply {
        let Some(expected) = &self.shared.config.requirepass else {
            return no_password_auth(user);
        };
        if user.is_some_and(|u| u != b"default") || !constant_time_eq(pass, expected.as_bytes()) {
            return wrong_pass();
        }
        self.client.authenticated = true;
        self.parser.set_limits(full_limits(&self.shared));
        Reply::ok()
    }

    fn hello(
        &mut self,
        version: Option<Proto>,
        auth: Option<(Vec<u8>, Vec<u8>)>,
        name: Option<Vec<u8>>,
    ) -> Reply {
        if let Some((user, pass)) = auth {
            let r = self.auth(Some(&user), &pass);
            if matches!(r, Reply::Error(_)) {
                return r;
            }
        }
        if !self.client.authenticated {
            return Reply::Error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
            );
        }
        if let Some(v) = version {
            self.client.proto = v;
        }
        if let Some(name) = name {
            self.set_name(name);
        }
        let proto_num = if self.client.proto == Proto::Resp3 {
            3
        } else {
            2
        };
        Reply::Map(vec![
            (Reply::text("server"), Reply::text("tierkv")),
            (
                Reply::text("version"),
                Reply::text(env!("CARGO_PKG_VERSION")),
            ),
            (Reply::text("proto"), Reply::Int(proto_num)),
            (Reply::text("id"), Reply::Int(self.client.id as i64)),
            (Reply::text("mode"), Reply::text("standalone")),
            (Reply::text("role"), Reply::text("master")),
            (Reply::text("modules"), Reply::Array(Vec::new())),
        ])
    }

    fn client_command(&mut self, c: ClientCmd) -> Reply {
        match c {
            ClientCmd::SetName(name) => {
                self.set_name(name);
                Reply::ok()
            }
            ClientCmd::GetName => Reply::bulk_or_nil(self.client.name.clone()),
            ClientCmd::Id => Reply::Int(self.client.id as i64),
            ClientCmd::SetInfo => Reply::ok(),
        }
    }

    /// Names the client (a name already checked); an empty name clears it, as in Redis.
    fn set_name(&mut self, name: Vec<u8>) {
        self.client.name = Some(name).filter(|n| !n.is_empty());
    }
}

/// The parser limits of an authenticated client.
fn full_limits(shared: &Shared) -> Limits {
    Limits {
        max_args: shared.config.max_args,
        max_bulk: shared.config.max_request_size,
        max_request: shared.config.max_request_size,
    }
}

/// AUTH without requirepass. Redis's `default` user then has no password, so it logs in
/// with any (client libraries configured with a user name send one); only the password-only
/// form is an error, since it suggests a server configured other than the client thinks.
fn no_password_auth(user: Option<&[u8]>) -> Reply {
    match user {
        None => Reply::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ),
        Some(b"default") => Reply::ok(),
        Some(_) => wrong_pass(),
    }
}

fn wrong_pass() -> Reply {
    Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
}

/// The bytes a put of `key` and `value` adds to a [`WriteBatch`]'s encoding: a kind byte and
/// two length-prefixed strings (at most a 10-byte varint each).
fn encoded_put_len(key: &[u8], value: &[u8]) -> usize {
    1 + 2 * 10 + key.len() + value.len()
}

/// The engine's limits, checked per pair so one bad SET does not fail the others merged with it.
fn size_error(key: &[u8], value: &[u8]) -> Option<Reply> {
    if key.len() > MAX_KEY_LEN {
        return Some(Reply::err(format!(
            "key of {} bytes exceeds tierkv's limit of {MAX_KEY_LEN} bytes",
            key.len()
        )));
    }
    if value.len() > MAX_VALUE_LEN {
        return Some(Reply::err(format!(
            "value of {} bytes exceeds tierkv's limit of {MAX_VALUE_LEN} bytes",
            value.len()
        )));
    }
    None
}

/// Compares without an early exit, so the time taken does not reveal a matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
}

fn command_query(q: CommandQuery) -> Reply {
    match q {
        CommandQuery::All => Reply::Array(SPECS.iter().map(commands::info_entry).collect()),
        CommandQuery::Count => Reply::Int(SPECS.len() as i64),
        CommandQuery::List => Reply::Array(SPECS.iter().map(|s| Reply::text(s.name)).collect()),
        CommandQuery::Docs => Reply::Map(Vec::new()),
        CommandQuery::Info(names) => Reply::Array(
            names
                .iter()
                .map(|n| commands::lookup(n).map_or(Reply::Nil, commands::info_entry))
                .collect(),
        ),
    }
}

/// The writer half: answers queued requests in order, batching replies into few writes.
async fn write_replies(
    mut write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Item>,
    done: watch::Sender<u64>,
    shared: Arc<Shared>,
) {
    let mut out = Vec::with_capacity(WRITE_CHUNK);
    let limit = shared.config.timeout;
    // NB: once the client is gone, requests in flight are still waited for (not written):
    // the engine finishes them either way, and shutdown waits for them.
    let mut alive = true;
    loop {
        let item = match rx.try_recv() {
            Ok(item) => item,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                alive = alive && send(&mut write, &mut out, limit, &shared).await;
                match rx.recv().await {
                    Some(item) => item,
                    None => break,
                }
            }
        };
        // NB: replies ready so far go out before waiting on a slow request, unless more
        // requests are queued behind it: then the client sent a pipeline, and its replies go
        // out together once the queue runs dry (one write per pipeline, not one per request
        // that missed the memtable).
        if !item.pending.is_ready() && rx.is_empty() {
            alive = alive && send(&mut write, &mut out, limit, &shared).await;
        }
        item.pending.finish(&shared, item.proto, &mut out).await;
        done.send_replace(item.idx);
        if !alive {
            out.clear();
            rx.close();
        } else if out.len() >= WRITE_CHUNK {
            alive = send(&mut write, &mut out, limit, &shared).await;
        }
    }
    if alive && send(&mut write, &mut out, limit, &shared).await {
        let _ = write.shutdown().await;
    }
}

/// Writes `out` and clears it; false if the client is gone or did not take it in time.
async fn send(
    write: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    limit: Option<Duration>,
    shared: &Shared,
) -> bool {
    if out.is_empty() {
        return true;
    }
    shared.counters.reply_writes.fetch_add(1, Ordering::Relaxed);
    let ok = match limit {
        None => write.write_all(out).await.is_ok(),
        Some(t) => match with_timeout(t, write.write_all(out)).await {
            Some(r) => r.is_ok(),
            None => {
                shared.counters.timeouts.fetch_add(1, Ordering::Relaxed);
                false
            }
        },
    };
    out.clear();
    ok
}

async fn with_timeout<F: Future>(t: Duration, f: F) -> Option<F::Output> {
    tokio::time::timeout(t, f).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_compare_fully() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}

//! Requests in flight: what a connection waits on for each answer ([`Pending`]), and turning
//! each completed result into its reply.
//!
//! A [`Pending`] is one of the engine's asynchronous handles (a get, a multi-get, a write
//! batch shared by several pipelined SETs, a scan), a blocking task (transactions, DBSIZE,
//! FLUSHALL), or a reply known at once. The connection's writer takes them in request order
//! and [`Pending::finish`] encodes their replies.

use crate::resp::{Proto, Reply};
use crate::server::Shared;
use std::sync::Arc;
use tierkv::{Handle, ReadOptions, WriteBatch, WriteOptions};
use tokio::task::JoinHandle;

/// What a GET-like command replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetKind {
    /// The value (GET).
    Value,
    /// Its length (STRLEN).
    Len,
}

/// What a multi-key read replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiKind {
    /// The values (MGET).
    Values,
    /// How many are present (EXISTS).
    Count,
}

/// A SCAN waiting for its entries.
#[derive(Debug)]
pub struct ScanCall {
    /// Keys asked for: fewer back means the scan reached the end.
    pub count: usize,
    /// MATCH pattern.
    pub pattern: Option<Vec<u8>>,
    /// False when TYPE excludes strings (nothing matches).
    pub strings: bool,
}

/// The entries of a scan: `(key, value)` pairs in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A request the connection will answer once it completes.
#[derive(Debug)]
pub enum Pending {
    /// Known already.
    Ready(Reply),
    /// The same reply to several pipelined commands (an error for a merged write).
    Repeat(Reply, usize),
    /// A write batch holding this many pipelined SET/MSET commands; OK to each.
    Writes(Handle<()>, usize),
    /// GET or STRLEN.
    Get(Handle<Option<Vec<u8>>>, GetKind),
    /// MGET or EXISTS.
    MultiGet(Handle<Vec<Option<Vec<u8>>>>, MultiKind),
    /// SCAN.
    Scan(Handle<Entries>, ScanCall),
    /// Work on a blocking thread.
    Blocking(JoinHandle<Reply>),
}

impl Pending {
    /// True when `finish` would not wait.
    pub fn is_ready(&self) -> bool {
        match self {
            Pending::Ready(_) | Pending::Repeat(..) => true,
            Pending::Writes(h, _) => h.is_ready(),
            Pending::Get(h, _) => h.is_ready(),
            Pending::MultiGet(h, _) => h.is_ready(),
            Pending::Scan(h, _) => h.is_ready(),
            Pending::Blocking(j) => j.is_finished(),
        }
    }

    /// Waits for the result and appends the encoded replies to `out`.
    pub async fn finish(self, shared: &Shared, proto: Proto, out: &mut Vec<u8>) {
        match self {
            Pending::Ready(r) => r.encode(proto, out),
            Pending::Repeat(r, n) => (0..n).for_each(|_| r.encode(proto, out)),
            Pending::Writes(h, n) => {
                let reply = h.await.map_or_else(Reply::err, |()| Reply::ok());
                (0..n).for_each(|_| reply.encode(proto, out));
            }
            Pending::Get(h, kind) => get_reply(h.await, kind).encode(proto, out),
            Pending::MultiGet(h, kind) => multi_reply(h.await, kind).encode(proto, out),
            Pending::Scan(h, call) => scan_reply(shared, h.await, call).encode(proto, out),
            Pending::Blocking(j) => j
                .await
                .unwrap_or_else(|e| Reply::err(format!("internal error: {e}")))
                .encode(proto, out),
        }
    }
}

fn get_reply(r: tierkv::Result<Option<Vec<u8>>>, kind: GetKind) -> Reply {
    match (r, kind) {
        (Err(e), _) => Reply::err(e),
        (Ok(v), GetKind::Value) => Reply::bulk_or_nil(v),
        (Ok(v), GetKind::Len) => Reply::Int(v.map_or(0, |v| v.len() as i64)),
    }
}

fn multi_reply(r: tierkv::Result<Vec<Option<Vec<u8>>>>, kind: MultiKind) -> Reply {
    match (r, kind) {
        (Err(e), _) => Reply::err(e),
        (Ok(vs), MultiKind::Values) => {
            Reply::Array(vs.into_iter().map(Reply::bulk_or_nil).collect())
        }
        (Ok(vs), MultiKind::Count) => Reply::Int(vs.iter().filter(|v| v.is_some()).count() as i64),
    }
}

fn scan_reply(shared: &Shared, r: tierkv::Result<Entries>, call: ScanCall) -> Reply {
    let entries = match r {
        Ok(e) => e,
        Err(e) => return Reply::err(e),
    };
    let cursor = match entries.last() {
        Some((last, _)) if entries.len() >= call.count => shared
            .cursors
            .lock()
            .expect("cursor table")
            .register(last.clone()),
        _ => 0,
    };
    let keys = entries
        .into_iter()
        .filter(|_| call.strings)
        .filter(|(k, _)| {
            call.pattern
                .as_ref()
                .is_none_or(|p| crate::scan::glob_match(p, k))
        })
        .map(|(k, _)| Reply::Bulk(k))
        .collect();
    Reply::Array(vec![Reply::text(cursor.to_string()), Reply::Array(keys)])
}

/// DBSIZE: counts the keys at a snapshot by iterating them (exact, O(keys)).
pub fn count_keys(shared: Arc<Shared>) -> Reply {
    let opts = ReadOptions {
        fill_cache: false,
        ..Default::default()
    };
    let mut it = match shared.db.iter(opts) {
        Ok(it) => it,
        Err(e) => return Reply::err(e),
    };
    it.seek_to_first();
    let mut n = 0i64;
    while it.valid() {
        n += 1;
        it.next();
    }
    match it.status() {
        Ok(()) => Reply::Int(n),
        Err(e) => Reply::err(e),
    }
}

/// Keys deleted per write batch by FLUSHALL.
const FLUSH_BATCH: usize = 1024;

/// FLUSHALL: deletes every key present when it starts, in batches.
pub fn delete_all(shared: Arc<Shared>, wo: WriteOptions) -> Reply {
    let opts = ReadOptions {
        fill_cache: false,
        snapshot: Some(shared.db.snapshot()),
        ..Default::default()
    };
    let mut it = match shared.db.iter(opts) {
        Ok(it) => it,
        Err(e) => return Reply::err(e),
    };
    it.seek_to_first();
    let mut batch = WriteBatch::new();
    while it.valid() {
        batch.delete(it.key());
        if batch.len() >= FLUSH_BATCH {
            if let Err(e) = shared.db.write(&wo, std::mem::take(&mut batch)) {
                return Reply::err(e);
            }
        }
        it.next();
    }
    if let Err(e) = it.status() {
        return Reply::err(e);
    }
    match shared.db.write(&wo, batch) {
        Ok(()) => Reply::ok(),
        Err(e) => Reply::err(e),
    }
}

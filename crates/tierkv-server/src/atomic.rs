//! Read-modify-write commands (INCR and friends, APPEND, GETSET, SET NX/XX/GET, DEL) made
//! atomic with the engine's optimistic transactions.
//!
//! Each command is split in two: [`decide`], a pure function from the keys' current values to
//! the reply and the writes, and [`run`], which reads the values in a transaction, applies the
//! writes and commits, starting over on `Conflict` (another client changed a key in between).
//! `run` blocks on the engine's synchronous API, so the connection calls it on a blocking
//! thread.

use crate::commands::SetCond;
use crate::resp::{parse_i64, Reply};
use std::time::Duration;
use tierkv::{Db, Error, WriteOptions};

/// Commits tried before a command gives up under contention.
pub const MAX_ATTEMPTS: u32 = 1000;

/// A read-modify-write command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtomicOp {
    /// SET with NX or XX, or with GET.
    Set {
        /// Key.
        key: Vec<u8>,
        /// New value.
        value: Vec<u8>,
        /// Existence condition.
        cond: SetCond,
        /// Reply with the old value instead of OK.
        get: bool,
    },
    /// GETSET key value.
    GetSet(Vec<u8>, Vec<u8>),
    /// DEL: distinct keys.
    Del(Vec<Vec<u8>>),
    /// INCRBY (and INCR, DECR, DECRBY).
    IncrBy(Vec<u8>, i64),
    /// APPEND key value.
    Append(Vec<u8>, Vec<u8>),
}

/// A write [`decide`] asks for: a key and its new value (`None` deletes it).
pub type Write = (Vec<u8>, Option<Vec<u8>>);

impl AtomicOp {
    /// DEL of `keys`, each once.
    pub fn del(mut keys: Vec<Vec<u8>>) -> AtomicOp {
        keys.sort_unstable();
        keys.dedup();
        AtomicOp::Del(keys)
    }

    /// The keys whose values `decide` needs, in the order it takes them.
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            AtomicOp::Set { key, .. }
            | AtomicOp::GetSet(key, _)
            | AtomicOp::IncrBy(key, _)
            | AtomicOp::Append(key, _) => vec![key],
            AtomicOp::Del(keys) => keys.iter().map(Vec::as_slice).collect(),
        }
    }
}

/// The reply and the writes of `op`, given the current values of its keys.
pub fn decide(op: &AtomicOp, current: Vec<Option<Vec<u8>>>) -> (Reply, Vec<Write>) {
    let mut current = current.into_iter();
    let mut first = || current.next().flatten();
    match op {
        AtomicOp::Set {
            key,
            value,
            cond,
            get,
        } => {
            let old = first();
            let allowed = match cond {
                SetCond::Always => true,
                SetCond::IfAbsent => old.is_none(),
                SetCond::IfPresent => old.is_some(),
            };
            let reply = match (get, allowed) {
                (true, _) => Reply::bulk_or_nil(old),
                (false, true) => Reply::ok(),
                (false, false) => Reply::Nil,
            };
            let writes = if allowed {
                vec![(key.clone(), Some(value.clone()))]
            } else {
                Vec::new()
            };
            (reply, writes)
        }
        AtomicOp::GetSet(key, value) => (
            Reply::bulk_or_nil(first()),
            vec![(key.clone(), Some(value.clone()))],
        ),
        AtomicOp::Del(keys) => {
            let present: Vec<Write> = keys
                .iter()
                .zip(current)
                .filter(|(_, v)| v.is_some())
                .map(|(k, _)| (k.clone(), None))
                .collect();
            (Reply::Int(present.len() as i64), present)
        }
        AtomicOp::IncrBy(key, by) => incr(key, *by, first()),
        AtomicOp::Append(key, value) => {
            let mut v = first().unwrap_or_default();
            v.extend_from_slice(value);
            (Reply::Int(v.len() as i64), vec![(key.clone(), Some(v))])
        }
    }
}

fn incr(key: &[u8], by: i64, old: Option<Vec<u8>>) -> (Reply, Vec<Write>) {
    let old = match old {
        None => 0,
        Some(v) => match parse_i64(&v) {
            Some(n) => n,
            None => {
                return (
                    Reply::err("value is not an integer or out of range"),
                    Vec::new(),
                )
            }
        },
    };
    match old.checked_add(by) {
        Some(n) => (
            Reply::Int(n),
            vec![(key.to_vec(), Some(n.to_string().into_bytes()))],
        ),
        None => (
            Reply::err("increment or decrement would overflow"),
            Vec::new(),
        ),
    }
}

/// Runs `op` atomically: reads, decides, writes and commits with `wo`, retrying conflicts.
pub fn run(db: &Db, wo: &WriteOptions, op: &AtomicOp) -> Reply {
    for attempt in 0..MAX_ATTEMPTS {
        let mut txn = db.transaction();
        let current: Result<Vec<_>, Error> = op.keys().iter().map(|k| txn.get(k)).collect();
        let current = match current {
            Ok(c) => c,
            Err(e) => return Reply::err(e),
        };
        let (reply, writes) = decide(op, current);
        if writes.is_empty() {
            return reply;
        }
        for (key, value) in &writes {
            let put = match value {
                Some(v) => txn.put(key, v),
                None => txn.delete(key),
            };
            if let Err(e) = put {
                return Reply::err(e);
            }
        }
        match txn.commit(wo) {
            Ok(()) => return reply,
            Err(Error::Conflict { .. }) => backoff(attempt),
            Err(e) => return Reply::err(e),
        }
    }
    Reply::err(format!(
        "gave up after {MAX_ATTEMPTS} transaction conflicts on a hot key; retry"
    ))
}

/// A short, growing pause so contending clients stop colliding in lock step.
fn backoff(attempt: u32) {
    if attempt < 3 {
        std::thread::yield_now();
    } else {
        let micros = 10u64 << attempt.min(10);
        std::thread::sleep(Duration::from_micros(micros.min(5_000)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn incr_rules() {
        let op = AtomicOp::IncrBy(k("n"), 5);
        assert_eq!(decide(&op, vec![None]).0, Reply::Int(5));
        assert_eq!(decide(&op, vec![Some(k("-7"))]).0, Reply::Int(-2));
        let (r, w) = decide(&op, vec![Some(k("x1"))]);
        assert!(matches!(r, Reply::Error(ref e) if e.contains("not an integer")) && w.is_empty());
        let (r, w) = decide(&op, vec![Some(i64::MAX.to_string().into_bytes())]);
        assert!(matches!(r, Reply::Error(ref e) if e.contains("overflow")) && w.is_empty());
    }

    #[test]
    fn set_conditions() {
        let set = |cond, get| AtomicOp::Set {
            key: k("a"),
            value: k("new"),
            cond,
            get,
        };
        let (r, w) = decide(&set(SetCond::IfAbsent, false), vec![Some(k("old"))]);
        assert_eq!((r, w.len()), (Reply::Nil, 0));
        let (r, w) = decide(&set(SetCond::IfPresent, true), vec![Some(k("old"))]);
        assert_eq!((r, w.len()), (Reply::Bulk(k("old")), 1));
        let (r, _) = decide(&set(SetCond::IfAbsent, false), vec![None]);
        assert_eq!(r, Reply::ok());
    }

    #[test]
    fn del_counts_present_keys_once() {
        let op = AtomicOp::del(vec![k("b"), k("a"), k("b")]);
        assert_eq!(op.keys().len(), 2);
        let (r, w) = decide(&op, vec![Some(k("1")), None]);
        assert_eq!(r, Reply::Int(1));
        assert_eq!(w, vec![(k("a"), None)]);
    }

    #[test]
    fn append_and_getset() {
        let (r, w) = decide(&AtomicOp::Append(k("a"), k("cd")), vec![Some(k("ab"))]);
        assert_eq!(r, Reply::Int(4));
        assert_eq!(w[0].1.as_deref(), Some(&b"abcd"[..]));
        let (r, _) = decide(&AtomicOp::GetSet(k("a"), k("x")), vec![None]);
        assert_eq!(r, Reply::Nil);
    }
}

//! A group-commit leader for the zoned WAL, for the ablation of WALTZ (`wal.zoned_leader`):
//! writers queue their padded records; the first writer to find no leader becomes the leader,
//! takes the queued records from the front (up to one append's worth), writes them with one
//! device write, and hands every member the result. WALTZ itself runs without it: each writer
//! appends its own record.
//!
//! INVARIANT: records are written in the order they were queued, each starting on an LBA
//! boundary (every record is padded to whole LBAs), so the recovery scan reads a group's
//! records one by one exactly as if each had been appended alone.

use crate::env::AlignedBuf;
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};

/// One queued record.
struct Queued {
    ticket: u64,
    /// The record's log number.
    tag: u64,
    record: Vec<u8>,
    fua: bool,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Queued>,
    next_ticket: u64,
    /// A leader is writing a group.
    leading: bool,
    /// Results of written records not yet collected, by ticket.
    results: HashMap<u64, Result<()>>,
}

/// The queue and its leader.
#[derive(Default)]
pub(crate) struct Leader {
    queue: Mutex<Queue>,
    /// Signalled when a group is written.
    written: Condvar,
}

/// How a leader writes a group: its bytes, whether any member asked for FUA, and the
/// highest log number in it.
pub(crate) type WriteGroup<'a> = &'a dyn Fn(&[u8], bool, u64) -> Result<()>;

impl Leader {
    /// Queues `record` (padded to whole LBAs) of log `tag` and returns once a leader, this
    /// writer or another, wrote it with `write`, in groups of at most `limit` bytes.
    pub fn write(
        &self,
        tag: u64,
        record: &[u8],
        fua: bool,
        limit: usize,
        write: WriteGroup<'_>,
    ) -> Result<()> {
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(Queued {
            ticket,
            tag,
            record: record.to_vec(),
            fua,
        });
        loop {
            if let Some(result) = q.results.remove(&ticket) {
                return result;
            }
            if q.leading {
                self.written.wait(&mut q);
                continue;
            }
            q.leading = true;
            let group = take_group(&mut q.waiting, limit);
            drop(q);
            let result = write_group(&group, write);
            q = self.queue.lock();
            for member in &group {
                let own = result.as_ref().map_err(Error::duplicate).copied();
                q.results.insert(member.ticket, own);
            }
            q.leading = false;
            self.written.notify_all();
        }
    }
}

/// The queued records from the front, up to `limit` bytes (always at least one).
fn take_group(waiting: &mut VecDeque<Queued>, limit: usize) -> Vec<Queued> {
    let mut group = Vec::new();
    let mut bytes = 0;
    while let Some(next) = waiting.front() {
        if !group.is_empty() && bytes + next.record.len() > limit {
            break;
        }
        bytes += next.record.len();
        group.extend(waiting.pop_front());
    }
    group
}

/// Writes `group`'s records back to back with one call of `write`.
fn write_group(group: &[Queued], write: WriteGroup<'_>) -> Result<()> {
    let len = group.iter().map(|m| m.record.len()).sum();
    let mut buf = AlignedBuf::zeroed(len);
    let mut at = 0;
    for member in group {
        buf.as_mut_slice()[at..at + member.record.len()].copy_from_slice(&member.record);
        at += member.record.len();
    }
    let fua = group.iter().any(|m| m.fua);
    let tag = group.iter().map(|m| m.tag).max().unwrap_or_default();
    write(buf.as_slice(), fua, tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Concurrent writers: every record is written exactly once, in one of the groups, and
    /// groups never exceed the limit; several records share a group when writers queue up.
    #[test]
    fn queued_records_are_written_once_in_groups_within_the_limit() {
        let leader = Arc::new(Leader::default());
        let groups = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
        let threads: Vec<_> = (0..8u8)
            .map(|w| {
                let (leader, groups) = (Arc::clone(&leader), Arc::clone(&groups));
                std::thread::spawn(move || {
                    for i in 0..50u8 {
                        let record = [w, i, 0, 0];
                        let write = |bytes: &[u8], _: bool, _: u64| {
                            std::thread::yield_now();
                            groups.lock().push(bytes.to_vec());
                            Ok(())
                        };
                        leader.write(0, &record, false, 64, &write).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let groups = groups.lock();
        assert!(groups.iter().all(|g| g.len() <= 64 && !g.is_empty()));
        let mut records: Vec<&[u8]> = groups.iter().flat_map(|g| g.chunks(4)).collect();
        assert_eq!(records.len(), 8 * 50);
        records.sort_unstable();
        records.dedup();
        assert_eq!(records.len(), 8 * 50, "a record was written twice");
        assert!(groups.len() < 8 * 50, "no two writers ever shared a group");
    }

    #[test]
    fn a_failed_group_fails_every_member() {
        let leader = Leader::default();
        let write =
            |_: &[u8], _: bool, _: u64| -> Result<()> { Err(Error::invalid("the device failed")) };
        let err = leader.write(1, &[0; 8], true, 64, &write).unwrap_err();
        assert!(err.to_string().contains("the device failed"), "{err}");
    }
}

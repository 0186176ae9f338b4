//! Numbering and publication order of overlapping write groups.
//!
//! With `wal.concurrent_memtable_writes`, a leader hands the lead on as soon as its group is
//! logged, so the next group is logged (and synced) while this one is inserted into the
//! memtable. Groups are therefore numbered here rather than from the published sequence, and
//! each takes a ticket: a group publishes only on its ticket's turn, after every earlier group
//! published, so a later group never becomes visible before an earlier one.

use parking_lot::{Condvar, Mutex};

/// A numbered group's place in the publication order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ticket(u64);

#[derive(Debug, Default)]
struct State {
    /// The last sequence number given to a group, published or not.
    last_numbered: u64,
    /// The ticket the next numbered group gets.
    next_ticket: u64,
    /// The ticket whose turn it is to publish (or to give its turn up).
    turn: u64,
}

/// The numbering and publication order of groups.
#[derive(Debug, Default)]
pub(super) struct PublishOrder {
    state: Mutex<State>,
    turn_cv: Condvar,
}

impl PublishOrder {
    /// Numbers a group of `ops` operations: returns its ticket and first sequence number.
    /// `published` is the host's last published sequence (the start after open).
    /// Called only by the leader, so groups are numbered in queue order.
    pub fn number(&self, published: u64, ops: u64) -> (Ticket, u64) {
        let mut s = self.state.lock();
        let first = s.last_numbered.max(published) + 1;
        s.last_numbered = first + ops - 1;
        let ticket = Ticket(s.next_ticket);
        s.next_ticket += 1;
        (ticket, first)
    }

    /// Waits until every earlier group has published or given its turn up.
    pub fn wait_turn(&self, ticket: Ticket) {
        let mut s = self.state.lock();
        while s.turn != ticket.0 {
            self.turn_cv.wait(&mut s);
        }
    }

    /// Ends `ticket`'s turn (after publishing, or after its group failed): the next group may
    /// publish.
    pub fn end_turn(&self, ticket: Ticket) {
        let mut s = self.state.lock();
        debug_assert_eq!(s.turn, ticket.0, "turns end in ticket order");
        s.turn += 1;
        self.turn_cv.notify_all();
    }

    /// Waits until every numbered group has published (a check validates against all of them).
    pub fn wait_all_published(&self) {
        let mut s = self.state.lock();
        while s.turn != s.next_ticket {
            self.turn_cv.wait(&mut s);
        }
    }

    /// True if some numbered group has not published yet.
    pub fn in_flight(&self) -> bool {
        let s = self.state.lock();
        s.turn != s.next_ticket
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn groups_are_numbered_back_to_back_from_the_published_sequence() {
        let order = PublishOrder::default();
        assert_eq!(order.number(100, 3), (Ticket(0), 101));
        // Unpublished groups count: the next starts after them, not after the published 100.
        assert_eq!(order.number(100, 2), (Ticket(1), 104));
        assert!(order.in_flight());
        order.end_turn(Ticket(0));
        order.end_turn(Ticket(1));
        assert!(!order.in_flight());
        order.wait_all_published();
    }

    #[test]
    fn a_later_group_publishes_only_after_an_earlier_one() {
        let order = Arc::new(PublishOrder::default());
        let published = Arc::new(AtomicU64::new(0));
        let tickets: Vec<_> = (0..8).map(|_| order.number(0, 10)).collect();
        // Finish the groups in reverse order: each must still publish in ticket order.
        let threads: Vec<_> = tickets
            .into_iter()
            .rev()
            .map(|(ticket, first)| {
                let (order, published) = (Arc::clone(&order), Arc::clone(&published));
                std::thread::spawn(move || {
                    order.wait_turn(ticket);
                    let before = published.swap(first + 9, Ordering::SeqCst);
                    assert_eq!(before + 1, first, "published in order");
                    order.end_turn(ticket);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(published.load(Ordering::SeqCst), 80);
        assert!(!order.in_flight());
    }
}

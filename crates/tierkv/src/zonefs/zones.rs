//! The data zones' bookkeeping: which zones are free, written to by a writer, partly written,
//! full, or reserved for metadata; their write pointers and live bytes; and the choice of a
//! zone for a new extent (by lifetime hint, within the device's open and active limits).
//! Pure state: the I/O is done by the caller.

use crate::env::Lifetime;
use crate::zoned::ZoneId;

/// What a zone is used for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZoneUse {
    /// A metadata zone (the journal).
    Meta,
    /// Empty: may be given to a writer.
    Free,
    /// Held by one writer, which appends at its write pointer.
    Held(Lifetime),
    /// Partly written and not held: a writer with a fitting hint may continue it.
    Partial(Lifetime),
    /// Written to capacity (or finished): only read until reset.
    Full,
}

/// One zone's state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZoneSlot {
    /// Its use.
    pub state: ZoneUse,
    /// Bytes from the zone's start to its write pointer.
    pub wp: u64,
    /// Bytes of the zone occupied by extents of files not removed (LBA-rounded).
    pub live: u64,
}

/// Why no zone could be handed out now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoZone {
    /// Every active zone is held by another writer: wait for one to be released.
    Wait,
    /// No free zone and nothing partly written: the device is full.
    Full,
}

/// Every zone's state and the device limits that apply to data zones.
#[derive(Debug)]
pub(crate) struct ZoneTable {
    /// Indexed by zone id.
    pub slots: Vec<ZoneSlot>,
    /// Zone capacity in bytes.
    pub capacity: u64,
    /// Most data zones active (held or partial) at once: the device's active limit less the
    /// journal's zone.
    pub max_active: usize,
    /// Most data zones held (written) at once: the device's open limit less the journal's.
    pub max_held: usize,
    /// The zone a garbage collection is copying from: not reset until the collection is
    /// done with it, even once no live byte is left in it.
    pub collecting: Option<ZoneId>,
}

impl ZoneTable {
    /// Zones in `state`-like use, counted by `pred`.
    fn count(&self, pred: impl Fn(ZoneUse) -> bool) -> usize {
        self.slots.iter().filter(|s| pred(s.state)).count()
    }

    /// Held zones.
    pub fn held(&self) -> usize {
        self.count(|u| matches!(u, ZoneUse::Held(_)))
    }

    /// Held or partial zones: the ones the device counts as active.
    pub fn active(&self) -> usize {
        self.count(|u| matches!(u, ZoneUse::Held(_) | ZoneUse::Partial(_)))
    }

    /// Free zones.
    pub fn free(&self) -> usize {
        self.count(|u| u == ZoneUse::Free)
    }

    /// Full zones.
    pub fn full(&self) -> usize {
        self.count(|u| u == ZoneUse::Full)
    }

    /// Chooses a zone for a writer whose file has `hint` and marks it held: a partial zone of
    /// the same hint, else of the nearest longer one; else a free zone while the active limit
    /// allows; else any partial zone; else [`NoZone`].
    pub fn take(&mut self, hint: Lifetime) -> Result<ZoneId, NoZone> {
        if self.held() >= self.max_held {
            return Err(NoZone::Wait);
        }
        let chosen = self
            .partial_with(|l| l == hint)
            .or_else(|| self.nearest_longer(hint))
            .or_else(|| self.free_within_limit())
            .or_else(|| self.partial_with(|_| true));
        match chosen {
            Some(id) => {
                self.slots[id as usize].state = ZoneUse::Held(hint);
                Ok(id)
            }
            None if self.held() > 0 => Err(NoZone::Wait),
            None => Err(NoZone::Full),
        }
    }

    fn partial_with(&self, pred: impl Fn(Lifetime) -> bool) -> Option<ZoneId> {
        self.slots
            .iter()
            .position(|s| matches!(s.state, ZoneUse::Partial(l) if pred(l)))
            .map(|i| i as ZoneId)
    }

    fn nearest_longer(&self, hint: Lifetime) -> Option<ZoneId> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.state {
                ZoneUse::Partial(l) if l > hint => Some((l, i as ZoneId)),
                _ => None,
            })
            .min()
            .map(|(_, id)| id)
    }

    fn free_within_limit(&self) -> Option<ZoneId> {
        if self.active() >= self.max_active {
            return None;
        }
        self.slots
            .iter()
            .position(|s| s.state == ZoneUse::Free)
            .map(|i| i as ZoneId)
    }

    /// A writer gives its zone back: partial, or full once its write pointer reached capacity.
    pub fn release(&mut self, id: ZoneId) {
        let slot = &mut self.slots[id as usize];
        if let ZoneUse::Held(hint) = slot.state {
            slot.state = if slot.wp >= self.capacity {
                ZoneUse::Full
            } else {
                ZoneUse::Partial(hint)
            };
        }
    }

    /// Zones holding no live byte that are neither held by a writer nor being collected:
    /// ready to reset.
    pub fn dead(&self) -> Vec<ZoneId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live == 0 && matches!(s.state, ZoneUse::Full | ZoneUse::Partial(_)))
            .map(|(i, _)| i as ZoneId)
            .filter(|&id| self.collecting != Some(id))
            .collect()
    }

    /// Marks a zone reset: free, write pointer 0.
    pub fn mark_reset(&mut self, id: ZoneId) {
        let slot = &mut self.slots[id as usize];
        slot.state = ZoneUse::Free;
        slot.wp = 0;
        slot.live = 0;
    }

    /// Full zones with the fewest live bytes first, those with any dead byte only: the
    /// garbage collector's candidates.
    pub fn gc_candidates(&self) -> Vec<ZoneId> {
        let mut c: Vec<(u64, ZoneId)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == ZoneUse::Full && s.live < self.capacity)
            .map(|(i, s)| (s.live, i as ZoneId))
            .collect();
        c.sort_unstable();
        c.into_iter().map(|(_, id)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(states: &[ZoneUse]) -> ZoneTable {
        ZoneTable {
            slots: states
                .iter()
                .map(|&state| ZoneSlot {
                    state,
                    wp: 0,
                    live: 0,
                })
                .collect(),
            capacity: 4096 * 4,
            max_active: 3,
            max_held: 2,
            collecting: None,
        }
    }

    #[test]
    fn a_hint_goes_to_its_own_zone_then_the_nearest_longer_then_a_free_one() {
        use Lifetime::*;
        let mut t = table(&[
            ZoneUse::Meta,
            ZoneUse::Partial(Extreme),
            ZoneUse::Partial(Long),
            ZoneUse::Free,
        ]);
        assert_eq!(t.take(Long), Ok(2));
        t.release(2);
        assert_eq!(t.take(Medium), Ok(2), "nearest longer than Medium is Long");
        assert_eq!(t.take(Medium), Ok(1), "then Extreme");
        t.release(1);
        t.release(2);
        t.slots[1].state = ZoneUse::Full;
        t.slots[2].state = ZoneUse::Full;
        assert_eq!(t.take(Extreme), Ok(3), "no partial zone: a free one");
    }

    #[test]
    fn limits_make_writers_wait_and_a_full_device_says_so() {
        use Lifetime::*;
        let mut t = table(&[ZoneUse::Meta, ZoneUse::Free, ZoneUse::Free, ZoneUse::Free]);
        assert_eq!(t.take(Short), Ok(1));
        assert_eq!(t.take(Short), Ok(2));
        assert_eq!(t.take(Short), Err(NoZone::Wait), "open limit");
        t.release(1);
        t.max_active = 2;
        // Zone 1 is partial: with the active limit reached, a shorter-lived writer takes it
        // instead of opening zone 3.
        assert_eq!(t.take(Extreme), Ok(1));
        t.release(1);
        t.release(2);
        for s in &mut t.slots[1..] {
            s.state = ZoneUse::Full;
        }
        assert_eq!(t.take(Short), Err(NoZone::Full));
        t.slots[3].live = 0;
        assert_eq!(t.dead(), vec![1, 2, 3]);
        t.collecting = Some(2);
        assert_eq!(t.dead(), vec![1, 3], "a zone being collected is not reset");
    }
}

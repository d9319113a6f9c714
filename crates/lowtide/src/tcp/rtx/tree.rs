//! The tree shape of the retransmit queue's storage ([`super::store`]): skbs
//! ordered by stream offset, found by offset in O(log n) as Linux's rb-tree
//! (`tcp_rtx_queue`).
//!
//! Two representations behind one interface, chosen by size (issue 14): up to a few
//! thousand skbs (every ordinary flow), a ring sorted by offset and searched by
//! bisection, where skbs join at the tail and leave at the head, so that in steady
//! state nothing is allocated or freed (a `BTreeMap` allocates and frees a node every
//! few skbs); beyond that, where an insertion in the middle of a ring would move
//! thousands of skbs (a SACK split deep in a huge window), a `BTreeMap`. The switch
//! has hysteresis, so a queue hovering at the threshold does not flap.

use super::skb::Skb;
use super::store::Pos;
use core::ops::Bound::{Excluded, Unbounded};
use std::collections::{btree_map, vec_deque, BTreeMap, VecDeque};

/// A ring growing past this many skbs becomes a map.
const TO_MAP: usize = 2048;
/// A map shrinking below this many skbs becomes a ring.
const TO_RING: usize = 512;

/// Skbs ordered by `seq`, non-overlapping (see the module docs).
#[derive(Debug)]
pub(crate) enum Sorted {
    Ring(VecDeque<Skb>),
    Map(BTreeMap<u64, Skb>),
}

/// Iterator over a [`Sorted`] from some skb on.
pub(crate) enum SortedIter<'a> {
    Ring(vec_deque::Iter<'a, Skb>),
    Map(btree_map::Range<'a, u64, Skb>),
}

impl<'a> Iterator for SortedIter<'a> {
    type Item = &'a Skb;
    fn next(&mut self) -> Option<&'a Skb> {
        match self {
            SortedIter::Ring(i) => i.next(),
            SortedIter::Map(r) => r.next().map(|(_, s)| s),
        }
    }
}

impl Sorted {
    pub(crate) fn new() -> Sorted {
        Sorted::Ring(VecDeque::new())
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Sorted::Ring(r) => r.len(),
            Sorted::Map(m) => m.len(),
        }
    }

    pub(crate) fn first(&self) -> Option<&Skb> {
        match self {
            Sorted::Ring(r) => r.front(),
            Sorted::Map(m) => m.values().next(),
        }
    }

    pub(crate) fn last(&self) -> Option<&Skb> {
        match self {
            Sorted::Ring(r) => r.back(),
            Sorted::Map(m) => m.values().next_back(),
        }
    }

    /// The skb at `p` (a valid position).
    pub(crate) fn get(&self, p: Pos) -> &Skb {
        match self {
            Sorted::Ring(r) => &r[index(r, p)],
            Sorted::Map(m) => &m[&p],
        }
    }

    pub(crate) fn get_mut(&mut self, p: Pos) -> &mut Skb {
        match self {
            Sorted::Ring(r) => {
                let i = index(r, p);
                &mut r[i]
            }
            Sorted::Map(m) => m.get_mut(&p).expect("valid pos"),
        }
    }

    /// The first skb starting after `p`.
    pub(crate) fn next(&self, p: Pos) -> Option<Pos> {
        match self {
            Sorted::Ring(r) => r.get(r.partition_point(|s| s.seq <= p)).map(|s| s.seq),
            Sorted::Map(m) => m.range((Excluded(p), Unbounded)).next().map(|(k, _)| *k),
        }
    }

    /// The last skb starting before `at`.
    pub(crate) fn last_before(&self, at: u64) -> Option<Pos> {
        match self {
            Sorted::Ring(r) => {
                let i = r.partition_point(|s| s.seq < at);
                i.checked_sub(1).map(|i| r[i].seq)
            }
            Sorted::Map(m) => m.range(..at).next_back().map(|(k, _)| *k),
        }
    }

    /// True if an skb starts at `seq`.
    pub(crate) fn contains(&self, seq: u64) -> bool {
        match self {
            Sorted::Ring(r) => r.binary_search_by_key(&seq, |s| s.seq).is_ok(),
            Sorted::Map(m) => m.contains_key(&seq),
        }
    }

    /// The skb containing `seq`, else the first one after it.
    pub(crate) fn containing_or_after(&self, seq: u64) -> Option<Pos> {
        let (at_or_before, at_or_after) = match self {
            Sorted::Ring(r) => {
                let i = r.partition_point(|s| s.seq <= seq);
                let j = r.partition_point(|s| s.seq < seq);
                (i.checked_sub(1).map(|i| &r[i]), r.get(j))
            }
            Sorted::Map(m) => (
                m.range(..=seq).next_back().map(|(_, s)| s),
                m.range(seq..).next().map(|(_, s)| s),
            ),
        };
        match at_or_before {
            Some(s) if s.end_seq > seq => Some(s.seq),
            _ => at_or_after.map(|s| s.seq),
        }
    }

    /// Inserts `s` in order (an skb at the same offset is replaced, as a map insert).
    pub(crate) fn insert(&mut self, s: Skb) {
        match self {
            Sorted::Ring(r) if r.back().is_none_or(|b| b.seq < s.seq) => r.push_back(s),
            Sorted::Ring(r) => match r.binary_search_by_key(&s.seq, |x| x.seq) {
                Ok(i) => r[i] = s,
                Err(i) => r.insert(i, s),
            },
            Sorted::Map(m) => {
                m.insert(s.seq, s);
            }
        }
        if let Sorted::Ring(r) = self {
            if r.len() > TO_MAP {
                let m = r.drain(..).map(|s| (s.seq, s)).collect();
                *self = Sorted::Map(m);
            }
        }
    }

    /// Removes and returns the skb at `p` (a valid position).
    pub(crate) fn remove(&mut self, p: Pos) -> Skb {
        let s = match self {
            Sorted::Ring(r) => {
                let i = index(r, p);
                r.remove(i).expect("valid pos")
            }
            Sorted::Map(m) => m.remove(&p).expect("valid pos"),
        };
        if let Sorted::Map(m) = self {
            if m.len() < TO_RING {
                let r = std::mem::take(m).into_values().collect();
                *self = Sorted::Ring(r);
            }
        }
        s
    }

    /// The skbs starting at or after `p`.
    pub(crate) fn iter_from(&self, p: Pos) -> SortedIter<'_> {
        match self {
            Sorted::Ring(r) => SortedIter::Ring(r.range(r.partition_point(|s| s.seq < p)..)),
            Sorted::Map(m) => SortedIter::Map(m.range(p..)),
        }
    }
}

/// Index of the ring's skb starting at `p` (a valid position).
fn index(r: &VecDeque<Skb>, p: Pos) -> usize {
    r.binary_search_by_key(&p, |s| s.seq).expect("valid pos")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;
    use bytes::Bytes;

    fn skb(seq: u64) -> Skb {
        Skb {
            seq,
            end_seq: seq + 10,
            data: Bytes::new().into(),
            flags: 0,
            sacked: 0,
            pcount: 1,
            gso_size: 0,
            tx_time: Instant::ZERO,
            truesize: 0,
            tx: Default::default(),
            fclone: 0,
            zc: None,
            uncharged: 0,
        }
    }

    /// Every query answers the same in both representations, across the switches.
    #[test]
    fn ring_and_map_agree_across_the_switches() {
        let mut s = Sorted::new();
        let mut m = BTreeMap::new();
        let check = |s: &Sorted, m: &BTreeMap<u64, Skb>| {
            assert_eq!(s.len(), m.len());
            assert_eq!(s.first().map(|x| x.seq), m.keys().next().copied());
            assert_eq!(s.last().map(|x| x.seq), m.keys().next_back().copied());
            for q in [0, 5, 10, 15, 20_000, 20_005, 40_000, 41_005, 90_000] {
                let want = m.range(..=q).next_back().filter(|(_, x)| x.end_seq > q);
                let want = want.or_else(|| m.range(q..).next()).map(|(k, _)| *k);
                assert_eq!(s.containing_or_after(q), want, "at {q}");
                let next = m.range((Excluded(q), Unbounded)).next().map(|(k, _)| *k);
                assert_eq!(s.next(q), next);
                assert_eq!(s.last_before(q), m.range(..q).next_back().map(|(k, _)| *k));
                assert_eq!(s.contains(q), m.contains_key(&q));
                let from: Vec<u64> = s.iter_from(q).map(|x| x.seq).collect();
                assert_eq!(from, m.range(q..).map(|(k, _)| *k).collect::<Vec<_>>());
            }
        };
        // Tail appends, then middle inserts past TO_MAP: a map.
        for i in 0..TO_MAP as u64 {
            s.insert(skb(i * 20));
            m.insert(i * 20, skb(i * 20));
        }
        check(&s, &m);
        assert!(matches!(s, Sorted::Ring(_)));
        for i in 0..10u64 {
            s.insert(skb(i * 20 + 10));
            m.insert(i * 20 + 10, skb(i * 20 + 10));
        }
        assert!(matches!(s, Sorted::Map(_)));
        check(&s, &m);
        // Head removals below TO_RING: a ring again.
        let keys: Vec<u64> = m.keys().copied().collect();
        for k in &keys[..keys.len() - TO_RING + 1] {
            assert_eq!(s.remove(*k).seq, *k);
            m.remove(k);
        }
        assert!(matches!(s, Sorted::Ring(_)));
        check(&s, &m);
        s.get_mut(keys[keys.len() - 1]).flags = 7;
        assert_eq!(s.get(keys[keys.len() - 1]).flags, 7);
    }
}

//! Where the retransmit queue's skbs live (`experimental.rtx_queue`): Linux's rb-tree
//! since seed 003 (a `BTreeMap` keyed by stream offset here) or the linear list it
//! replaced (a `VecDeque` searched from the head, as `tcp_write_queue_walk` did).
//!
//! The scoreboard logic in [`super::rtx_queue`] is written once over this small set of
//! primitives, so both shapes give the same results at different costs.
//!
//! A [`Pos`] addresses one skb: its `seq` in the tree, its index in the list. The
//! callers keep at most one `Pos` across a change, in these ways only, which keep it
//! valid in both shapes: `insert_after(p, _)` and `remove(next(p))` keep `p`;
//! `remove(p)` keeps `prev(p)`.

use super::skb::Skb;
use crate::config::RtxQueueKind;
use core::ops::Bound::{Excluded, Unbounded};
use std::collections::{btree_map, vec_deque, BTreeMap, VecDeque};

/// Address of one skb in a [`Store`].
pub(crate) type Pos = u64;

/// The skbs, ordered by sequence, non-overlapping.
#[derive(Debug)]
pub(crate) enum Store {
    /// Linux's `tcp_rtx_queue` rb-tree: O(log n) search.
    Tree(BTreeMap<u64, Skb>),
    /// The list before seed 003: every search walks from the head.
    List(VecDeque<Skb>),
}

impl Store {
    pub(crate) fn new(kind: RtxQueueKind) -> Store {
        match kind {
            RtxQueueKind::Tree => Store::Tree(BTreeMap::new()),
            RtxQueueKind::List => Store::List(VecDeque::new()),
        }
    }

    pub(crate) fn kind(&self) -> RtxQueueKind {
        match self {
            Store::Tree(_) => RtxQueueKind::Tree,
            Store::List(_) => RtxQueueKind::List,
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Store::Tree(t) => t.len(),
            Store::List(l) => l.len(),
        }
    }

    pub(crate) fn first_pos(&self) -> Option<Pos> {
        match self {
            Store::Tree(t) => t.keys().next().copied(),
            Store::List(l) => (!l.is_empty()).then_some(0),
        }
    }

    pub(crate) fn last(&self) -> Option<&Skb> {
        match self {
            Store::Tree(t) => t.values().next_back(),
            Store::List(l) => l.back(),
        }
    }

    pub(crate) fn get(&self, p: Pos) -> &Skb {
        match self {
            Store::Tree(t) => &t[&p],
            Store::List(l) => &l[p as usize],
        }
    }

    pub(crate) fn get_mut(&mut self, p: Pos) -> &mut Skb {
        match self {
            Store::Tree(t) => t.get_mut(&p).expect("valid pos"),
            Store::List(l) => &mut l[p as usize],
        }
    }

    /// The skb after `p`.
    pub(crate) fn next(&self, p: Pos) -> Option<Pos> {
        match self {
            Store::Tree(t) => t.range((Excluded(p), Unbounded)).next().map(|(k, _)| *k),
            Store::List(l) => (p as usize + 1 < l.len()).then_some(p + 1),
        }
    }

    /// The skb before `p`.
    pub(crate) fn prev(&self, p: Pos) -> Option<Pos> {
        match self {
            Store::Tree(t) => t.range(..p).next_back().map(|(k, _)| *k),
            Store::List(_) => p.checked_sub(1),
        }
    }

    /// Index of the first list skb matching `pred`, walking from the head.
    fn scan(l: &VecDeque<Skb>, pred: impl Fn(&Skb) -> bool) -> Option<usize> {
        l.iter().position(pred)
    }

    /// The skb starting at `seq`.
    pub(crate) fn find(&self, seq: u64) -> Option<Pos> {
        match self {
            Store::Tree(t) => t.contains_key(&seq).then_some(seq),
            Store::List(l) => Store::scan(l, |s| s.seq >= seq)
                .filter(|&i| l[i].seq == seq)
                .map(|i| i as Pos),
        }
    }

    /// The skb containing `seq`, or else the first one after it
    /// (`tcp_sacktag_bsearch` in the tree, `tcp_sacktag_skip` in the list).
    pub(crate) fn seek(&self, seq: u64) -> Option<Pos> {
        match self {
            Store::Tree(t) => {
                if let Some((k, s)) = t.range(..=seq).next_back() {
                    if s.end_seq > seq {
                        return Some(*k);
                    }
                }
                t.range(seq..).next().map(|(k, _)| *k)
            }
            Store::List(l) => Store::scan(l, |s| s.end_seq > seq || s.seq >= seq).map(|i| i as Pos),
        }
    }

    /// The last skb starting before `at`.
    pub(crate) fn last_before(&self, at: u64) -> Option<Pos> {
        match self {
            Store::Tree(t) => t.range(..at).next_back().map(|(k, _)| *k),
            Store::List(l) => Store::scan(l, |s| s.seq >= at)
                .unwrap_or(l.len())
                .checked_sub(1)
                .map(|i| i as Pos),
        }
    }

    /// Appends an skb past every queued one.
    pub(crate) fn push_back(&mut self, s: Skb) {
        match self {
            Store::Tree(t) => {
                t.insert(s.seq, s);
            }
            Store::List(l) => l.push_back(s),
        }
    }

    /// Inserts `s`, which starts where the skb at `p` now ends; returns its position.
    pub(crate) fn insert_after(&mut self, p: Pos, s: Skb) -> Pos {
        match self {
            Store::Tree(t) => {
                let k = s.seq;
                t.insert(k, s);
                k
            }
            Store::List(l) => {
                l.insert(p as usize + 1, s);
                p + 1
            }
        }
    }

    pub(crate) fn remove(&mut self, p: Pos) -> Skb {
        match self {
            Store::Tree(t) => t.remove(&p).expect("valid pos"),
            Store::List(l) => l.remove(p as usize).expect("valid pos"),
        }
    }

    /// The skbs from `p` on (none if `p` is `None`).
    pub(crate) fn iter_from(&self, p: Option<Pos>) -> Iter<'_> {
        match (self, p) {
            (Store::Tree(t), Some(p)) => Iter::Tree(t.range(p..)),
            (Store::List(l), Some(p)) => Iter::List(l.range(p as usize..)),
            (_, None) => Iter::Empty,
        }
    }
}

/// Iterator over a [`Store`]'s skbs in sequence order.
pub(crate) enum Iter<'a> {
    Tree(btree_map::Range<'a, u64, Skb>),
    List(vec_deque::Iter<'a, Skb>),
    Empty,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Skb;
    fn next(&mut self) -> Option<&'a Skb> {
        match self {
            Iter::Tree(r) => r.next().map(|(_, s)| s),
            Iter::List(i) => i.next(),
            Iter::Empty => None,
        }
    }
}

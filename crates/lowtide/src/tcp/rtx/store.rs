//! Where the retransmit queue's skbs live (`experimental.rtx_queue`): Linux's rb-tree
//! since seed 003 (here [`super::tree::Sorted`], keyed by stream offset) or the
//! linear list it replaced (a `VecDeque` searched from the head, as `tcp_write_queue_walk` did).
//!
//! The scoreboard logic in [`super::queue`] is written once over this small set of
//! primitives, so both shapes give the same results at different costs.
//!
//! A [`Pos`] addresses one skb: its `seq` in the tree, its index in the list. The
//! callers keep at most one `Pos` across a change, in these ways only, which keep it
//! valid in both shapes: `insert_after(p, _)` and `remove(next(p))` keep `p`;
//! `remove(p)` keeps `prev(p)`.

use super::skb::Skb;
use super::tree::{Sorted, SortedIter};
use crate::config::RtxQueueKind;
use core::cell::Cell;
use std::collections::{vec_deque, VecDeque};

/// Address of one skb in a [`Store`].
pub(crate) type Pos = u64;

/// The skbs, ordered by sequence, non-overlapping, and a count of the nodes the
/// operations visited (the CPU cost model's measure of work; see [`Store::visits`]).
#[derive(Debug)]
pub(crate) struct Store {
    skbs: Skbs,
    visits: Cell<u64>,
}

#[derive(Debug)]
enum Skbs {
    /// Linux's `tcp_rtx_queue` rb-tree: O(log n) search.
    Tree(Sorted),
    /// The list before seed 003: every search walks from the head.
    List(VecDeque<Skb>),
}

impl Store {
    pub(crate) fn new(kind: RtxQueueKind) -> Store {
        let skbs = match kind {
            RtxQueueKind::Tree => Skbs::Tree(Sorted::new()),
            RtxQueueKind::List => Skbs::List(VecDeque::new()),
        };
        Store {
            skbs,
            visits: Cell::new(0),
        }
    }

    /// Nodes visited so far, counted as Linux's structure would visit them: in the
    /// tree, a search costs the depth of a balanced tree of this size
    /// (`bits(len)`, about log2 n + 1, as an rb-tree descent) and a step to a
    /// neighbour one node; in the list, a search walks from where it starts, one
    /// node per skb passed, and a step, an insertion after a held skb or a removal
    /// one node (a linked list); a removal of a held skb is one node in the tree
    /// too (`rb_erase` rebalances in amortized constant time). Where Linux held a pointer to the skb (the caller
    /// has it in hand: `find`), the list charges one node.
    pub(crate) fn visits(&self) -> u64 {
        self.visits.get()
    }

    fn visit(&self, n: u64) {
        self.visits.set(self.visits.get() + n);
    }

    /// The cost of one tree search: the depth of a balanced tree of `len` nodes.
    fn depth(len: usize) -> u64 {
        (usize::BITS - len.leading_zeros()) as u64
    }

    pub(crate) fn kind(&self) -> RtxQueueKind {
        match &self.skbs {
            Skbs::Tree(_) => RtxQueueKind::Tree,
            Skbs::List(_) => RtxQueueKind::List,
        }
    }

    pub(crate) fn len(&self) -> usize {
        match &self.skbs {
            Skbs::Tree(t) => t.len(),
            Skbs::List(l) => l.len(),
        }
    }

    /// The head (`tcp_rtx_queue_head`: `rb_first`, or the list's head).
    pub(crate) fn first_pos(&self) -> Option<Pos> {
        match &self.skbs {
            Skbs::Tree(t) => {
                self.visit(Store::depth(t.len()));
                t.first().map(|s| s.seq)
            }
            Skbs::List(l) => {
                self.visit(1);
                (!l.is_empty()).then_some(0)
            }
        }
    }

    pub(crate) fn last(&self) -> Option<&Skb> {
        self.visit(1);
        match &self.skbs {
            Skbs::Tree(t) => t.last(),
            Skbs::List(l) => l.back(),
        }
    }

    pub(crate) fn get(&self, p: Pos) -> &Skb {
        match &self.skbs {
            Skbs::Tree(t) => t.get(p),
            Skbs::List(l) => &l[p as usize],
        }
    }

    pub(crate) fn get_mut(&mut self, p: Pos) -> &mut Skb {
        match &mut self.skbs {
            Skbs::Tree(t) => t.get_mut(p),
            Skbs::List(l) => &mut l[p as usize],
        }
    }

    /// The skb after `p` (`skb_rb_next`, or the list's next).
    pub(crate) fn next(&self, p: Pos) -> Option<Pos> {
        self.visit(1);
        match &self.skbs {
            Skbs::Tree(t) => t.next(p),
            Skbs::List(l) => (p as usize + 1 < l.len()).then_some(p + 1),
        }
    }

    /// The skb before `p`.
    pub(crate) fn prev(&self, p: Pos) -> Option<Pos> {
        self.visit(1);
        match &self.skbs {
            Skbs::Tree(t) => t.last_before(p),
            Skbs::List(_) => p.checked_sub(1),
        }
    }

    /// Index of the first list skb from `from` on matching `pred`, walking forward
    /// and counting every skb looked at.
    fn scan(&self, l: &VecDeque<Skb>, from: usize, pred: impl Fn(&Skb) -> bool) -> Option<usize> {
        let found = l.range(from..).position(pred);
        self.visit(found.map_or(l.len() - from.min(l.len()), |i| i + 1) as u64);
        found.map(|i| from + i)
    }

    /// The skb starting at `seq`: one that the caller holds in Linux (the skb being
    /// retransmitted, marked, or timed), so the list finds it without a walk (by
    /// binary search here, charged as one node).
    pub(crate) fn find(&self, seq: u64) -> Option<Pos> {
        match &self.skbs {
            Skbs::Tree(t) => {
                self.visit(Store::depth(t.len()));
                t.contains(seq).then_some(seq)
            }
            Skbs::List(l) => {
                self.visit(1);
                l.binary_search_by_key(&seq, |s| s.seq)
                    .ok()
                    .map(|i| i as Pos)
            }
        }
    }

    /// The skb containing `seq`, or else the first one after it
    /// (`tcp_sacktag_bsearch` in the tree, `tcp_sacktag_skip` from the head in the
    /// list).
    pub(crate) fn seek(&self, seq: u64) -> Option<Pos> {
        self.seek_from(None, seq)
    }

    /// As [`Store::seek`], starting from `cursor` (an skb at or before the target)
    /// where Linux's walk would start there: the list walks on from it
    /// (`tcp_sacktag_skip`); the tree searches from its root unless the cursor is
    /// already past `seq` (Linux's `tcp_sacktag_skip` since seed 003).
    pub(crate) fn seek_from(&self, cursor: Option<Pos>, seq: u64) -> Option<Pos> {
        if let Some(c) = cursor {
            if self.get(c).seq > seq {
                return Some(c);
            }
        }
        match &self.skbs {
            Skbs::Tree(t) => {
                self.visit(Store::depth(t.len()));
                t.containing_or_after(seq)
            }
            Skbs::List(l) => {
                let from = cursor.map_or(0, |c| c as usize);
                self.scan(l, from, |s| s.end_seq > seq || s.seq >= seq)
                    .map(|i| i as Pos)
            }
        }
    }

    /// The skb containing `seq` or the first after it, reached through a pointer
    /// Linux keeps (`tp->highest_sack`): one node in either shape.
    pub(crate) fn seek_hinted(&self, seq: u64) -> Option<Pos> {
        self.visit(1);
        self.at_hint(seq)
    }

    /// The skb containing `seq` or the first after it, reached through a pointer
    /// Linux keeps and walks on from (`tp->retransmit_skb_hint`,
    /// `tp->lost_skb_hint`): no node is charged, the walk that follows
    /// ([`Store::iter_from`]) counts this skb as its first.
    pub(crate) fn at_hint(&self, seq: u64) -> Option<Pos> {
        match &self.skbs {
            Skbs::Tree(t) => t.containing_or_after(seq),
            Skbs::List(l) => {
                let i = l.partition_point(|s| s.end_seq <= seq);
                (i < l.len()).then_some(i as Pos)
            }
        }
    }

    /// The last skb starting before `at`.
    pub(crate) fn last_before(&self, at: u64) -> Option<Pos> {
        match &self.skbs {
            Skbs::Tree(t) => {
                self.visit(Store::depth(t.len()));
                t.last_before(at)
            }
            Skbs::List(l) => self
                .scan(l, 0, |s| s.seq >= at)
                .unwrap_or(l.len())
                .checked_sub(1)
                .map(|i| i as Pos),
        }
    }

    /// Appends an skb past every queued one.
    pub(crate) fn push_back(&mut self, s: Skb) {
        match &mut self.skbs {
            Skbs::Tree(t) => {
                let d = Store::depth(t.len());
                t.insert(s);
                self.visit(d);
            }
            Skbs::List(l) => {
                l.push_back(s);
                self.visit(1);
            }
        }
    }

    /// Inserts `s`, which starts where the skb at `p` now ends; returns its position.
    pub(crate) fn insert_after(&mut self, p: Pos, s: Skb) -> Pos {
        match &mut self.skbs {
            Skbs::Tree(t) => {
                let k = s.seq;
                let d = Store::depth(t.len());
                t.insert(s);
                self.visit(d);
                k
            }
            Skbs::List(l) => {
                l.insert(p as usize + 1, s);
                self.visit(1);
                p + 1
            }
        }
    }

    /// Unlinks the skb at `p`, which the caller holds as Linux does (`rb_erase`,
    /// `list_del`: no search): one node in either shape.
    pub(crate) fn remove(&mut self, p: Pos) -> Skb {
        self.visit(1);
        match &mut self.skbs {
            Skbs::Tree(t) => t.remove(p),
            Skbs::List(l) => l.remove(p as usize).expect("valid pos"),
        }
    }

    /// Unlinks the head skb and returns it with the new head
    /// (`tcp_clean_rtx_queue`: the walk steps on with `skb_rb_next` and unlinks the
    /// skb it held, with no search from the root): two nodes in either shape.
    pub(crate) fn remove_first(&mut self) -> Option<(Skb, Option<Pos>)> {
        self.visit(2);
        match &mut self.skbs {
            Skbs::Tree(t) => {
                let head = t.first()?.seq;
                let s = t.remove(head);
                Some((s, t.first().map(|f| f.seq)))
            }
            Skbs::List(l) => (l.pop_front()).map(|s| (s, (!l.is_empty()).then_some(0))),
        }
    }

    /// The skbs from `p` on (none if `p` is `None`); each one yielded counts a node.
    pub(crate) fn iter_from(&self, p: Option<Pos>) -> Iter<'_> {
        let inner = match (&self.skbs, p) {
            (Skbs::Tree(t), Some(p)) => Inner::Tree(t.iter_from(p)),
            (Skbs::List(l), Some(p)) => Inner::List(l.range(p as usize..)),
            (_, None) => Inner::Empty,
        };
        Iter {
            inner,
            visits: &self.visits,
        }
    }
}

/// Iterator over a [`Store`]'s skbs in sequence order.
pub(crate) struct Iter<'a> {
    inner: Inner<'a>,
    visits: &'a Cell<u64>,
}

enum Inner<'a> {
    Tree(SortedIter<'a>),
    List(vec_deque::Iter<'a, Skb>),
    Empty,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Skb;
    fn next(&mut self) -> Option<&'a Skb> {
        let s = match &mut self.inner {
            Inner::Tree(r) => r.next(),
            Inner::List(i) => i.next(),
            Inner::Empty => None,
        };
        if s.is_some() {
            self.visits.set(self.visits.get() + 1);
        }
        s
    }
}

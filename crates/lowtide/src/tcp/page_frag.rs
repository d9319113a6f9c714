//! Payload memory of the write queues, reused instead of allocated per skb (issue 14):
//! Linux's `sk_page_frag` and `skb_page_frag_refill`.
//!
//! `tcp_sendmsg_locked` copies the application's bytes into page fragments, and
//! `skb_page_frag_refill` starts over in the same page once nobody else holds it
//! (`page_ref_count(pfrag->page) == 1`) instead of allocating a new one. Here an
//! arena is one shared [`BytesMut`] of [`FRAG_LEN`] bytes: each write skb is carved
//! from it ([`PageFrag::take`]), its sent parts become [`bytes::Bytes`] slices of it in
//! the retransmit queue, and once every slice of an exhausted arena is gone (acked and
//! freed) the arena is reclaimed whole for the next skbs. In steady state no payload
//! buffer is allocated or freed, and splitting or cloning a slice only counts a
//! reference.

use bytes::BytesMut;
use std::collections::VecDeque;

/// Bytes per arena: a few 64 KB skbs' worth.
pub(crate) const FRAG_LEN: usize = 512 * 1024;

/// Exhausted arenas kept for reuse at most (256 MB); more are let go (freed with
/// their last slice).
const MAX_SPENT: usize = 512;

/// The stack's write-queue payload arenas (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct PageFrag {
    /// The arena being carved: empty, its capacity the part still free.
    cur: Option<BytesMut>,
    /// Exhausted arenas, oldest first, each empty and still sharing its storage
    /// with the slices carved from it.
    spent: VecDeque<BytesMut>,
}

impl PageFrag {
    /// An empty buffer with room for exactly `cap` bytes, carved from the arena.
    pub(crate) fn take(&mut self, cap: usize) -> BytesMut {
        if self.cur.as_ref().is_none_or(|c| c.capacity() < cap) {
            self.refill(cap);
        }
        let cur = self.cur.as_mut().expect("refilled");
        let rest = cur.split_off(cap);
        std::mem::replace(cur, rest)
    }

    /// Replaces the arena by one of at least `cap` bytes: the oldest exhausted one
    /// that no slice holds any more, or a new allocation.
    fn refill(&mut self, cap: usize) {
        let want = cap.max(FRAG_LEN);
        if let Some(old) = self.cur.take() {
            self.spent.push_back(old);
            if self.spent.len() > MAX_SPENT {
                self.spent.pop_front();
            }
        }
        // try_reclaim succeeds only for the unique owner of the storage, once every
        // slice carved from the arena is gone (`page_ref_count() == 1`).
        let free = self.spent.iter_mut().position(|a| a.try_reclaim(want));
        self.cur = Some(match free {
            Some(i) => self.spent.remove(i).expect("found"),
            None => BytesMut::with_capacity(want),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_are_reused_once_their_slices_are_gone() {
        let mut f = PageFrag::default();
        let mut a = f.take(FRAG_LEN / 2);
        assert_eq!(a.capacity(), FRAG_LEN / 2);
        a.extend_from_slice(&[1; 100]);
        let base = a.as_ptr();
        let a = a.freeze();
        let b = f.take(FRAG_LEN / 2);
        // Exhausted while `a` still lives: a new arena.
        let c = f.take(1000);
        assert_ne!(c.as_ptr(), base);
        drop((b, c));
        let (head, tail) = (a.slice(..10), a.slice(10..));
        drop(a);
        drop(head);
        let d = f.take(FRAG_LEN); // the second arena is still being carved
        drop(tail);
        let e = f.take(FRAG_LEN);
        assert_eq!(e.as_ptr(), base, "the first arena, reclaimed");
        drop(d);
    }
}

//! The receive queue as Linux keeps it (`sk_receive_queue`): the in-order payload of
//! received packets, held by reference instead of copied into one ring (issue 14).
//!
//! A segment that arrives in shared buffers (a GRO packet whose frags are slices of
//! the wire's buffers, [`Payload::Frags`]) is queued as those slices: its bytes are
//! copied once, out to the reader. A segment that arrives in a borrowed packet
//! ([`Payload::Flat`], e.g. a TUN read the device reuses) is copied into payload
//! memory carved from the stack's arenas ([`PageFrag`], reclaimed once read), so
//! neither path allocates per packet in steady state.

use super::page_frag::PageFrag;
use super::skbuff::{CoalesceTo, RxSkb, SKB_MAX_ORDER0};
use crate::time::Instant;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;

/// A received skb's timestamp as the read side sees it (tcp/rx_tstamp.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStamp {
    /// `TCP_SKB_CB(skb)->has_rxtstamp`: stamped on arrival.
    pub has: bool,
    /// `skb->tstamp`; none on an skb `tcp_collapse` built (`alloc_skb`), which
    /// keeps the first collapsed one's `has_rxtstamp` (its `cb` is copied).
    pub at: Option<Instant>,
}

impl RxStamp {
    /// `tcp_try_coalesce`: the skb another joins takes that one's stamp, if any.
    pub fn join(&mut self, from: RxStamp) {
        if from.has {
            *self = from;
        }
    }
}

/// A segment's payload as the input path sees it.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// Contiguous bytes borrowed from the packet.
    Flat(&'a [u8]),
    /// Shared buffers (skb frags) from `skip` bytes into them, `len` bytes long.
    Frags {
        /// The buffers, in order.
        frags: &'a [Bytes],
        /// Bytes of the first buffers that are not part of the payload.
        skip: usize,
        /// The payload's length.
        len: usize,
    },
}

impl<'a> Payload<'a> {
    /// All of `frags`.
    pub fn frags(frags: &'a [Bytes]) -> Payload<'a> {
        let len = frags.iter().map(Bytes::len).sum();
        Payload::Frags {
            frags,
            skip: 0,
            len,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Flat(b) => b.len(),
            Payload::Frags { len, .. } => *len,
        }
    }

    /// No bytes?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload without its first `n` bytes (`n` at most its length).
    pub fn skip(self, n: usize) -> Payload<'a> {
        match self {
            Payload::Flat(b) => Payload::Flat(&b[n..]),
            Payload::Frags { frags, skip, len } => Payload::Frags {
                frags,
                skip: skip + n,
                len: len - n,
            },
        }
    }

    /// Calls `f` with the payload's bytes in order, one contiguous piece at a time.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&'a [u8])) {
        match *self {
            Payload::Flat(b) => f(b),
            Payload::Frags { frags, skip, len } => {
                for_each_slice(frags, skip, len, |b, r| f(&b.as_ref()[r]));
            }
        }
    }

    /// The payload's bytes copied into one buffer carved from `frag`'s arenas.
    pub fn copy_to(&self, frag: &mut PageFrag) -> bytes::BytesMut {
        let mut b = frag.take(self.len());
        self.for_each_chunk(|c| b.extend_from_slice(c));
        b
    }

    /// The payload's bytes in one piece: borrowed if flat, else copied into `scratch`.
    pub fn contiguous<'s>(&self, scratch: &'s mut Vec<u8>) -> &'s [u8]
    where
        'a: 's,
    {
        match *self {
            Payload::Flat(b) => b,
            Payload::Frags { .. } => {
                scratch.clear();
                self.for_each_chunk(|c| scratch.extend_from_slice(c));
                scratch
            }
        }
    }
}

/// Calls `f` with each buffer of `frags` and the range of it that lies within `len`
/// bytes from `skip`.
fn for_each_slice<'b>(
    frags: &'b [Bytes],
    mut skip: usize,
    mut len: usize,
    mut f: impl FnMut(&'b Bytes, core::ops::Range<usize>),
) {
    for b in frags {
        if len == 0 {
            break;
        }
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        let n = (b.len() - skip).min(len);
        f(b, skip..skip + n);
        len -= n;
        skip = 0;
    }
}

/// One buffer of the receive queue: a segment's bytes (or a slice of them) and, on
/// the last buffer of an skb, the memory the whole skb is charged (segments
/// coalesced into an skb add theirs to it: [`RcvQueue::coalesced_skb_charge`]).
#[derive(Debug)]
struct Chunk {
    data: Bytes,
    /// `skb->truesize` of the skb this buffer ends; 0 on its earlier buffers.
    truesize: u32,
    /// Bytes the skb holds before this buffer's first byte that the queue no
    /// longer has: already read, or received before (an skb that started below
    /// `rcv_nxt` is queued whole, `tcp_data_queue`'s partial packet). 0 on a buffer
    /// that follows another of its skb still queued.
    pre: u32,
}

/// The in-order bytes not yet read (see the module docs), with the memory charged for
/// them (the receive queue's part of `sk_rmem_alloc`): a segment's charge is freed
/// once all of it is read, as Linux frees an skb.
#[derive(Debug, Default)]
pub struct RcvQueue {
    chunks: VecDeque<Chunk>,
    len: usize,
    truesize: u64,
    /// The tail buffer, as a segment queued next may join it (`tcp_try_coalesce`).
    tail: CoalesceTo,
    /// Bytes ever queued: the stream position after the tail.
    pushed: u64,
    /// The skbs' stamps in order, by the positions `[start, end)` they hold
    /// ([`RcvQueue::stamp`]).
    stamps: VecDeque<(u64, u64, RxStamp)>,
    /// `truesize` of a FIN-only skb queued behind the bytes (0: none): a bare FIN
    /// that joined no tail is an skb of its own, charged until a read takes the
    /// end of the stream ([`RcvQueue::push_fin`]).
    fin: u32,
    /// Truesize of the skbs ever freed here (read, collapsed), each a
    /// `sk_mem_uncharge`.
    freed: u64,
}

impl RcvQueue {
    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Truesize of the skbs ever freed from the queue.
    pub fn freed(&self) -> u64 {
        self.freed
    }

    /// Memory charged for what is queued.
    pub fn truesize(&self) -> u64 {
        self.truesize
    }

    /// Nothing queued?
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `tcp_queue_rcv` of a bare FIN that joined no tail skb (`tcp_add_receive_queue`,
    /// `skb_set_owner_r`): an empty skb charged `truesize` behind the bytes, freed
    /// when a read reaches it ([`RcvQueue::eat_fin`]). Nothing can follow it.
    pub fn push_fin(&mut self, truesize: u32) {
        self.uncharge(self.fin as u64);
        self.fin = truesize;
        self.truesize += truesize as u64;
    }

    /// `tcp_recvmsg_locked`'s `found_fin_ok` (and `tcp_read_sock`'s FIN): the
    /// FIN-only skb, if queued, is freed (`tcp_eat_recv_skb`). Only once the bytes
    /// before it are read.
    pub fn eat_fin(&mut self) {
        if self.chunks.is_empty() {
            let fin = std::mem::take(&mut self.fin) as u64;
            self.uncharge(fin);
        }
    }

    /// An skb's charge (`n`) freed: `sock_rfree`'s `sk_mem_uncharge`.
    fn uncharge(&mut self, n: u64) {
        self.truesize -= n;
        self.freed += n;
    }

    /// Queues a buffer as it is, charged `truesize`.
    pub fn push(&mut self, b: Bytes, truesize: u32) {
        self.push_chunk(b, truesize, 0, 0);
    }

    /// Queues a buffer charged `truesize`, ending an skb that also holds `carried`
    /// (charged before, on the buffers it joins); `pre`: the skb's bytes before it
    /// that are not queued ([`Chunk::pre`]).
    fn push_chunk(&mut self, b: Bytes, truesize: u32, carried: u32, pre: u32) {
        if !b.is_empty() {
            self.len += b.len();
            self.pushed += b.len() as u64;
            self.truesize += truesize as u64;
            let truesize = truesize + carried;
            self.chunks.push_back(Chunk {
                data: b,
                truesize,
                pre,
            });
        }
    }

    /// Before bytes join the tail skb (`joined`): its charge, taken off its last
    /// buffer, to be carried by the new last one.
    fn carry_tail(&mut self, joined: bool) -> u32 {
        match self.chunks.back_mut() {
            Some(c) if joined => std::mem::take(&mut c.truesize),
            _ => 0,
        }
    }

    /// Records the stamp of the skb whose `len` bytes were just queued; `joined`:
    /// it was coalesced into the skb before it ([`RcvQueue::coalesced_skb_charge`]),
    /// which takes its stamp ([`RxStamp::join`]).
    pub fn stamp(&mut self, len: usize, stamp: RxStamp, joined: bool) {
        let (start, end) = (self.pushed - len as u64, self.pushed);
        match self.stamps.back_mut() {
            // A bare FIN joined too: the tail takes its stamp.
            Some((_, e, s)) if joined && *e == start => {
                *e = end;
                s.join(stamp);
            }
            _ if len == 0 => {}
            _ => self.stamps.push_back((start, end, stamp)),
        }
    }

    /// `tcp_recvmsg_locked`'s `tss` for `n` bytes read from `skip` bytes into the
    /// queue (`n` 0: the skb at `skip`): the stamp of the last skb among them with
    /// `has_rxtstamp`, `None` if none has.
    pub fn rx_tstamp(&self, skip: usize, n: usize) -> Option<Option<Instant>> {
        let from = self.pushed - self.len as u64 + skip as u64;
        let to = from + n.max(1) as u64;
        if from >= self.pushed {
            return None;
        }
        let mut tss = None;
        for &(s, e, st) in &self.stamps {
            if s >= to {
                break;
            }
            if e > from && st.has {
                tss = Some(st.at);
            }
        }
        tss
    }

    /// `tcp_try_coalesce(sk, tail, skb)` (`tcp_queue_rcv`, `tcp_ofo_queue`) for an
    /// skb of `len` bytes that starts at the tail's end (`at_end`; not one that
    /// overlaps it): its charge, less if it joins the tail buffer
    /// (`skb_try_coalesce`, tcp/skbuff.rs), and whether it joined
    /// (`TcpExtTCPRcvCoalesce`). `own` is the skb as others may join it if segments joined it before
    /// (its frags, its tailroom left; `None`: as received). The tail is then the
    /// skb it joined, or this one.
    pub fn coalesced_skb_charge(
        &mut self,
        skb: RxSkb,
        len: u32,
        own: Option<CoalesceTo>,
        at_end: bool,
    ) -> (u32, bool) {
        let frags = own.map_or(0, |o| o.frags);
        // A zero-length skb (a bare FIN) joins too: skb_try_coalesce copies its
        // nothing into any tailroom.
        if !self.is_empty() && at_end {
            if let Some(charge) = skb.coalesce_frags_into(&mut self.tail, len, frags) {
                return (charge, true);
            }
        }
        self.tail = own.unwrap_or_else(|| skb.as_to());
        (skb.truesize, false)
    }

    /// Queues `payload` charged `truesize`: shared buffers by reference, borrowed bytes
    /// copied into memory from `frag`. `joined`: it was coalesced into the tail skb
    /// ([`RcvQueue::coalesced_skb_charge`]), whose charge it then carries; `pre`: the
    /// skb's bytes before `payload` that were received before (a partial packet).
    pub fn push_payload(
        &mut self,
        frag: &mut PageFrag,
        payload: Payload,
        (truesize, joined): (u32, bool),
        pre: u32,
    ) {
        let carried = self.carry_tail(joined && !payload.is_empty());
        match payload {
            Payload::Flat(_) => {
                let b = payload.copy_to(frag).freeze();
                self.push_chunk(b, truesize, carried, pre)
            }
            Payload::Frags { frags, skip, len } => {
                let (mut left, mut pre) = (len, pre);
                for_each_slice(frags, skip, len, |b, r| {
                    left -= r.len();
                    self.push_piece(b.slice(r), left, (truesize, carried), &mut pre);
                });
            }
        }
    }

    /// Queues an skb's buffers charged `truesize` (an out-of-order skb taken in order,
    /// `tcp_ofo_queue`); `joined` and `pre` as in [`RcvQueue::push_payload`].
    pub fn push_skb(&mut self, bufs: Vec<Bytes>, (truesize, joined): (u32, bool), pre: u32) {
        let len = bufs.iter().map(Bytes::len).sum::<usize>();
        let carried = self.carry_tail(joined && len > 0);
        let (mut left, mut pre) = (len, pre);
        for b in bufs {
            left -= b.len();
            self.push_piece(b, left, (truesize, carried), &mut pre);
        }
    }

    /// One buffer of an skb queued in pieces, `left` bytes of it to follow: the
    /// first piece takes `pre` ([`Chunk::pre`]), the last the skb's charge
    /// (`truesize`, and `carried` from the tail it joined).
    fn push_piece(
        &mut self,
        b: Bytes,
        left: usize,
        (truesize, carried): (u32, u32),
        pre: &mut u32,
    ) {
        let pre = std::mem::take(pre);
        match left {
            0 => self.push_chunk(b, truesize, carried, pre),
            _ => self.push_chunk(b, 0, 0, pre),
        }
    }

    /// Hands up to `max` bytes to `read` in order (one call per buffer) and consumes
    /// them; returns how many.
    pub fn read(&mut self, max: usize, read: impl FnMut(&[u8])) -> usize {
        self.read_until(max, false, read)
    }

    /// [`RcvQueue::read`] that stops at the end of the skb it starts in (one
    /// pass of `tcp_recvmsg_locked`'s loop).
    pub fn read_skb(&mut self, max: usize, read: impl FnMut(&[u8])) -> usize {
        self.read_until(max, true, read)
    }

    fn read_until(&mut self, max: usize, one_skb: bool, mut read: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let take = front.data.len().min(max - n);
            read(&front.data[..take]);
            n += take;
            if take < front.data.len() {
                bytes::Buf::advance(&mut front.data, take);
                front.pre += take as u32;
                continue;
            }
            let ends_skb = front.truesize != 0;
            let (truesize, read_of_skb) = (front.truesize, front.pre + front.data.len() as u32);
            self.uncharge(truesize as u64);
            self.chunks.pop_front();
            if !ends_skb {
                if let Some(next) = self.chunks.front_mut() {
                    next.pre += read_of_skb;
                }
            }
            if one_skb && ends_skb {
                break;
            }
        }
        self.len -= n;
        let head = self.pushed - self.len as u64;
        while self.stamps.front().is_some_and(|&(_, e, _)| e <= head) {
            self.stamps.pop_front();
        }
        // A read with room left past the last byte goes on to the FIN-only skb
        // behind it (`found_fin_ok`); one that ends on the last byte leaves it.
        if n < max {
            self.eat_fin();
        }
        n
    }

    /// Copies the bytes from `skip` on into `buf` without consuming them
    /// (`MSG_PEEK`).
    pub fn peek_from(&self, mut skip: usize, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for c in &self.chunks {
            if n == buf.len() {
                break;
            }
            if skip >= c.data.len() {
                skip -= c.data.len();
                continue;
            }
            let d = &c.data[skip..];
            skip = 0;
            let take = d.len().min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&d[..take]);
            n += take;
        }
        n
    }

    /// `tcp_collapse` of the receive queue from `copied_seq`: skbs that carry their
    /// overhead well (`bloated(truesize, skb->len)` false, see
    /// [`super::ofo::OfoQueue::collapse`]) are kept; from the first that does not,
    /// that holds bytes before `start` (a partly read head, or an skb queued over
    /// bytes received before it), or whose next skb overlaps it (`end_seq` not the
    /// next `seq`), the rest is copied into buffers of at most `SKB_MAX_ORDER(0, 0)`
    /// bytes, `alloc(len)` each (`alloc_skb`), the last of them the new tail.
    /// Returns the skbs freed (`TcpExtTCPRcvCollapsed`).
    pub fn collapse(
        &mut self,
        bloated: impl Fn(u32, u32) -> bool,
        alloc: impl Fn(u32) -> RxSkb,
    ) -> u32 {
        let mut from = None;
        let (mut first, mut skb_len) = (0, 0u32);
        for (i, c) in self.chunks.iter().enumerate() {
            if i == first {
                skb_len = c.pre; // skb->len counts them too
            }
            skb_len += c.data.len() as u32;
            if c.truesize == 0 {
                continue;
            }
            let head_pre = self.chunks[first].pre;
            let next_overlaps = self.chunks.get(i + 1).is_some_and(|n| n.pre > 0);
            if head_pre > 0 || bloated(c.truesize, skb_len) || next_overlaps {
                from = Some(first);
                break;
            }
            first = i + 1;
        }
        let Some(from) = from else { return 0 };
        let old: Vec<Chunk> = self.chunks.drain(from..).collect();
        let freed = old.iter().filter(|c| c.truesize != 0).count() as u32;
        self.uncharge(old.iter().map(|c| c.truesize as u64).sum::<u64>());
        let old_len = old.iter().map(|c| c.data.len()).sum::<usize>();
        self.len -= old_len;
        self.pushed -= old_len as u64;
        let olds = self.stamps_from(self.pushed);
        let max = SKB_MAX_ORDER0 as usize;
        let mut buf = BytesMut::with_capacity(max);
        for c in &old {
            let mut d: &[u8] = &c.data;
            while !d.is_empty() {
                let take = d.len().min(max - buf.len());
                buf.extend_from_slice(&d[..take]);
                d = &d[take..];
                if buf.len() == max {
                    self.flush_collapsed(&mut buf, &alloc, &olds);
                }
            }
        }
        self.flush_collapsed(&mut buf, &alloc, &olds);
        freed
    }

    /// Takes out the stamps of the bytes from position `pos` on (a stamp that
    /// straddles it is cut there).
    fn stamps_from(&mut self, pos: u64) -> Vec<(u64, u64, RxStamp)> {
        let mut olds = Vec::new();
        while let Some(&(s, e, st)) = self.stamps.back() {
            if e <= pos {
                break;
            }
            self.stamps.pop_back();
            if s < pos {
                self.stamps.push_back((s, pos, st));
                olds.push((pos, e, st));
                break;
            }
            olds.push((s, e, st));
        }
        olds.reverse();
        olds
    }

    /// Queues the collapsed bytes in `buf`, if any, as one buffer: a new skb with
    /// the `cb` (so `has_rxtstamp`) of the one its first byte came from (`olds`,
    /// the stamps the collapsed bytes had) and no `tstamp`.
    fn flush_collapsed(
        &mut self,
        buf: &mut BytesMut,
        alloc: &impl Fn(u32) -> RxSkb,
        olds: &[(u64, u64, RxStamp)],
    ) {
        if !buf.is_empty() {
            let b = std::mem::take(buf).freeze();
            let len = b.len();
            let nskb = alloc(len as u32);
            self.tail = nskb.as_to();
            let start = self.pushed;
            self.push(b, nskb.truesize);
            let has = olds
                .iter()
                .any(|&(s, e, st)| (s..e).contains(&start) && st.has);
            self.stamps
                .push_back((start, start + len as u64, RxStamp { has, at: None }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(r: core::ops::Range<u8>) -> Vec<u8> {
        r.collect()
    }

    /// A collapsed buffer charged `truesize`, no tailroom.
    fn nskb(truesize: u32) -> RxSkb {
        RxSkb {
            truesize,
            head: crate::tcp::skbuff::RxHead::Linear { tailroom: 0 },
        }
    }

    #[test]
    fn frags_are_queued_by_reference_and_read_in_order() {
        let a = Bytes::from(bytes(0..10));
        let b = Bytes::from(bytes(10..30));
        let frags = [a.clone(), b.clone()];
        let p = Payload::frags(&frags).skip(4);
        assert_eq!(p.len(), 26);
        let mut q = RcvQueue::default();
        q.push_payload(&mut PageFrag::default(), p, (2000, false), 0);
        assert_eq!(q.len(), 26);
        assert_eq!(q.chunks[0].data.as_ptr(), a[4..].as_ptr(), "no copy");
        assert_eq!(q.chunks[1].data.as_ptr(), b.as_ptr(), "no copy");
        assert_eq!(
            (q.chunks[0].truesize, q.truesize()),
            (0, 2000),
            "charged on the last"
        );
        let mut peeked = [0u8; 8];
        assert_eq!(q.peek_from(0, &mut peeked), 8);
        assert_eq!(peeked.to_vec(), bytes(4..12));
        let mut got = Vec::new();
        assert_eq!(q.read(9, |c| got.extend_from_slice(c)), 9);
        assert_eq!(got, bytes(4..13));
        assert_eq!(
            (q.len(), q.truesize()),
            (17, 2000),
            "freed once all is read"
        );
        assert_eq!(q.read(100, |c| got.extend_from_slice(c)), 17);
        assert_eq!(got, bytes(4..30));
        assert!(q.is_empty() && q.truesize() == 0);
    }

    #[test]
    fn flat_payload_is_copied_into_arena_memory() {
        let mut frag = PageFrag::default();
        let mut q = RcvQueue::default();
        let data = bytes(0..100);
        q.push_payload(&mut frag, Payload::Flat(&data[..60]), (900, false), 0);
        q.push_payload(&mut frag, Payload::Flat(&data[60..]), (900, false), 0);
        let mut got = Vec::new();
        q.read(usize::MAX, |c| got.extend_from_slice(c));
        assert_eq!(got, data);
    }

    #[test]
    fn a_skip_past_whole_frags_and_a_short_length_take_only_their_bytes() {
        let frags = [
            Bytes::from(bytes(0..5)),
            Bytes::from(bytes(5..10)),
            Bytes::from(bytes(10..20)),
        ];
        let p = Payload::frags(&frags).skip(7);
        let Payload::Frags { frags, skip, .. } = p else {
            unreachable!()
        };
        let short = Payload::Frags {
            frags,
            skip,
            len: 5,
        };
        let mut got = Vec::new();
        short.for_each_chunk(|c| got.extend_from_slice(c));
        assert_eq!(got, bytes(7..12));
        let mut scratch = Vec::new();
        assert_eq!(p.contiguous(&mut scratch), &bytes(7..20)[..]);
    }

    /// Stamps follow the skbs (tcp/rx_tstamp.rs): a joined segment gives the skb it
    /// joins its stamp, a read reports the last stamped skb it takes bytes from (an
    /// unstamped one leaves it), and `tcp_collapse`'s buffers keep `has_rxtstamp`
    /// but no time.
    #[test]
    fn stamps_follow_the_skbs() {
        let t = |ms| Some(Instant::ZERO + core::time::Duration::from_millis(ms));
        let st = |ms| RxStamp {
            has: true,
            at: t(ms),
        };
        let mut q = RcvQueue::default();
        let seg = |q: &mut RcvQueue, stamp, joined| {
            q.push(Bytes::from(vec![0u8; 100]), if joined { 0 } else { 900 });
            q.stamp(100, stamp, joined);
        };
        seg(&mut q, st(1), false);
        seg(&mut q, st(2), false);
        seg(&mut q, st(3), true);
        seg(&mut q, RxStamp::default(), false);
        assert_eq!(q.rx_tstamp(0, 50), Some(t(1)));
        assert_eq!(q.rx_tstamp(0, 0), Some(t(1)), "0 bytes: the first skb");
        assert_eq!(q.rx_tstamp(50, 100), Some(t(3)), "joined: the later stamp");
        assert_eq!(q.rx_tstamp(250, 100), Some(t(3)), "unstamped: tss stays");
        assert_eq!(q.rx_tstamp(300, 100), None);
        assert_eq!(q.rx_tstamp(400, 0), None, "nothing queued there");
        q.read(150, |_| {});
        assert_eq!(q.rx_tstamp(0, 10), Some(t(3)));
        assert_eq!(q.stamps.len(), 2, "the first skb is gone");
        // Every small segment is bloated: all of it is collapsed.
        assert!(q.collapse(|_, _| true, |l| nskb(l + 100)) > 0);
        assert_eq!(q.rx_tstamp(0, 10), Some(None), "has_rxtstamp, no tstamp");
        q.read(usize::MAX, |_| {});
        assert!(q.stamps.is_empty());
    }

    /// A segment that joins the tail skb (`tcp_try_coalesce`) is part of it: the
    /// skb's whole charge is freed once all of it is read, `tcp_collapse` weighs
    /// and counts it as one skb, and the last buffer it allocates is the new tail,
    /// whose tailroom the next segment may take.
    #[test]
    fn a_joined_segment_is_part_of_the_tail_skb() {
        use crate::tcp::skbuff::{alloc_skb, tun_skb};
        let mut frag = PageFrag::default();
        let mut q = RcvQueue::default();
        let mut seg = |q: &mut RcvQueue, len: usize| {
            let skb = tun_skb(len as u32 + 40);
            let (charge, joined) = q.coalesced_skb_charge(skb, len as u32, None, true);
            q.push_payload(
                &mut frag,
                Payload::Flat(&vec![1u8; len]),
                (charge, joined),
                0,
            );
            joined
        };
        assert!(!seg(&mut q, 1000));
        assert!(seg(&mut q, 300), "624 bytes of tailroom");
        assert_eq!(q.truesize(), 2304);
        q.read(1100, |_| {});
        assert_eq!(q.truesize(), 2304, "200 bytes of the skb left");
        q.read(200, |_| {});
        assert_eq!(q.truesize(), 0);
        assert!(!seg(&mut q, 1000), "an empty queue has no tail");
        assert!(seg(&mut q, 300));
        assert!(seg(&mut q, 300));
        assert!(!seg(&mut q, 300), "24 bytes left");
        // Two skbs (one of three segments), both bloated: two freed, 1900 bytes
        // in one buffer of alloc_skb(1900) (4096 - 320 - 1900 = 1876 bytes of
        // tailroom).
        assert_eq!(q.collapse(|_, _| true, alloc_skb), 2);
        assert_eq!(q.truesize(), 4096 + 256);
        assert!(seg(&mut q, 100), "into the collapsed buffer's tailroom");
        assert!(!seg(&mut q, 1800));
    }

    /// `tcp_collapse` of the receive queue: segments that carry their overhead are
    /// kept, from the first bloated one on the bytes go into page-sized buffers.
    #[test]
    fn collapse_keeps_full_segments_and_copies_small_ones() {
        let mut q = RcvQueue::default();
        q.push(Bytes::from(vec![7u8; 1000]), 1200);
        let data = bytes(0..250);
        for c in data.chunks(5) {
            q.push(Bytes::copy_from_slice(c), 900);
        }
        let bloated = |t: u32, l: u32| t / 2 > l;
        assert_eq!(q.collapse(bloated, |l| nskb(l + 100)), 50);
        assert_eq!(
            (q.chunks.len(), q.len(), q.truesize()),
            (2, 1250, 1200 + 350)
        );
        let mut got = Vec::new();
        q.read(usize::MAX, |c| got.extend_from_slice(c));
        assert_eq!(&got[1000..], &data[..]);
        assert_eq!(q.collapse(bloated, nskb), 0, "nothing to do");
    }
    /// `tcp_collapse`'s first walk: an skb that carries its overhead well is
    /// kept unless it holds bytes before `copied_seq` (a partly read head) or the
    /// next skb overlaps it (a partial packet, queued whole); its `skb->len`
    /// counts the bytes it holds before its first queued one.
    #[test]
    fn collapse_starts_before_an_overlap_or_at_a_partly_read_head() {
        let well = |t: u32, l: u32| t > 2 * l; // 1000 bytes in 2000: kept
        let three = |pre: u32| {
            let mut q = RcvQueue::default();
            q.push(Bytes::from(vec![1u8; 1000]), 2000);
            q.push(Bytes::from(vec![2u8; 1000]), 2000);
            let mut f = PageFrag::default();
            // 1500 bytes, 500 of them below rcv_nxt: 1000 queued, skb->len 1500.
            let p = Payload::Flat(&[3u8; 1000]);
            q.push_payload(&mut f, p, (2000, false), pre);
            q
        };
        assert_eq!(three(0).collapse(well, nskb), 0, "contiguous: kept");
        let mut q = three(500);
        assert_eq!(q.collapse(well, nskb), 2, "from the skb before the overlap");
        assert_eq!((q.chunks.len(), q.len()), (2, 3000));
        // skb->len 1500 against its truesize: bloated by len only if trimmed.
        let by_len = |t: u32, l: u32| t > l + 600;
        let mut q = RcvQueue::default();
        let mut f = PageFrag::default();
        q.push_payload(&mut f, Payload::Flat(&[3u8; 1000]), (2000, false), 500);
        assert_eq!(
            q.collapse(by_len, nskb),
            1,
            "the head holds bytes before start"
        );
        let mut q = three(0);
        q.read(10, |_| {});
        assert_eq!(q.collapse(well, nskb), 3, "a partly read head");
        let mut got = vec![];
        q.read(usize::MAX, |c| got.extend_from_slice(c));
        assert_eq!((got.len(), got[0], got[2989]), (2990, 1, 3));
    }

    /// A FIN-only skb behind the bytes (`tcp_queue_rcv` without a tail to join):
    /// charged, no byte of the stream; a read that ends on the last byte leaves
    /// it, one with room left frees it (`found_fin_ok`), as does the read of the
    /// end of the stream on an empty queue (`eat_fin`); `tcp_collapse` never
    /// takes it.
    #[test]
    fn a_fin_only_skb_is_charged_until_a_read_passes_the_last_byte() {
        let mut q = RcvQueue::default();
        q.push(Bytes::from(vec![1u8; 100]), 900);
        q.push_fin(832);
        assert_eq!((q.len(), q.truesize()), (100, 900 + 832));
        assert_eq!(q.read(100, |_| {}), 100);
        assert_eq!(
            (q.is_empty(), q.truesize()),
            (true, 832),
            "ended on the byte"
        );
        assert_eq!(q.collapse(|_, _| true, nskb), 0);
        assert_eq!(q.truesize(), 832);
        q.eat_fin();
        assert_eq!(q.truesize(), 0);
        q.push(Bytes::from(vec![1u8; 100]), 900);
        q.push_fin(832);
        q.eat_fin();
        assert_eq!(q.truesize(), 900 + 832, "not before the bytes are read");
        assert_eq!(q.read_skb(500, |_| {}), 100);
        assert_eq!(q.truesize(), 0, "room left: the FIN too");
    }
}

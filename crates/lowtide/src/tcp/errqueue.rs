//! The socket error queue (`sk_error_queue`) and `MSG_ZEROCOPY`'s completion
//! notifications (net/core/skbuff.c `msg_zerocopy_*`, net/core/sock.c
//! `sock_dequeue_err_skb`).
//!
//! A `MSG_ZEROCOPY` send takes a notification id (`sk_zckey`) and keeps its data
//! until the peer acknowledged all of it; then a `sock_extended_err` with
//! `SO_EE_ORIGIN_ZEROCOPY` and the id range `[ee_info, ee_data]` goes on the error
//! queue. Consecutive sends into the same unsent skb share one id range
//! (`msg_zerocopy_realloc`), and a completion that continues the range at the
//! queue's tail extends it instead of queuing (`skb_zerocopy_notify_extend`).
//!
//! A send of slices ([`crate::Stack::sendmsg`], the POSIX layer) copies the
//! bytes, so its completion says `SO_EE_CODE_ZEROCOPY_COPIED`. A send of a
//! `Bytes` ([`crate::Stack::send_zerocopy`]) does not: its skbs hold slices of the
//! caller's buffer ([`super::rtx::data`]), and its completion carries `ee_code` 0
//! unless something copied them: the stack, for a device that takes no payload
//! apart (`tcp_sendmsg_locked` without `NETIF_F_SG`), or a device that declares
//! it copies every packet's payload ([`crate::Stack::set_tx_orphan_frags`]: tun's
//! `tun_net_xmit`, loopback's `deliver_skb` and so packetdrill's tun call
//! `skb_orphan_frags_rx`, whose `skb_copy_ubufs` clears `uarg->zerocopy`), which
//! clears the range's flag as each of its packets is handed over. The
//! notification is queued once the stack holds no reference to the bytes:
//! `snd_una` is past them and every packet of them the device held has come back
//! through its TX completion (Linux: the last skb clone freed,
//! `msg_zerocopy_complete` dropping `uarg->refcnt` to 0).
//!
//! Where lowtide differs: a send completes when `snd_una` passes its last byte
//! (Linux: when the skb holding it is freed, which a partly acknowledged skb is
//! not), a connection that ends with the data unacknowledged reports nothing for it
//! (Linux reports it when the purged skbs are freed, unless the socket was closed),
//! and pinned pages are not charged to `RLIMIT_MEMLOCK` nor to `sk_wmem_queued`
//! page by page (a pure zerocopy skb is charged as copied data is, where Linux's
//! `skb_zcopy_pure` skips `sk_mem_charge`). An skb holds one slice of one buffer,
//! so copied data after zerocopy data, and a later send's buffer, start a new skb
//! where Linux would append page fragments to it.

use super::sock::Tcb;
pub use super::sock_errqueue::{ErrEntry, SockExtendedErr};
pub(crate) use super::sock_errqueue::{ErrQueue, Uarg};
use super::Ctx;
use crate::socket::{EventKind, SocketError};

/// `SO_EE_ORIGIN_ICMP`: an ICMP error (`ip_icmp_error`).
pub const SO_EE_ORIGIN_ICMP: u8 = 2;
/// `SO_EE_ORIGIN_ICMP6`: an ICMPv6 error (`ipv6_icmp_error`).
pub const SO_EE_ORIGIN_ICMP6: u8 = 3;
/// `SO_EE_ORIGIN_ZEROCOPY`.
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED`: the data was copied after all (no pages pinned).
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// `SKB_TRUESIZE(0)` (x86_64): what one notification skb costs in `sk_omem_alloc`
/// (`sock_omalloc(sk, 0)`), from the send that allocates it until it is read.
pub const NOTIFY_TRUESIZE: u32 = 256 + 320;
/// `msg_zerocopy_realloc`'s `byte_limit`: a range grows to "a few TSO" at most.
const BYTE_LIMIT: u64 = 1 << 19;
/// `msg_zerocopy_realloc`: a range holds fewer than `USHRT_MAX` ids.
const RANGE_LIMIT: u32 = u16::MAX as u32 - 1;

impl SockExtendedErr {
    /// The 16-byte C layout, in the host's byte order.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.errno.to_ne_bytes());
        b[4] = self.origin;
        b[5] = self.kind;
        b[6] = self.code;
        b[8..12].copy_from_slice(&self.info.to_ne_bytes());
        b[12..].copy_from_slice(&self.data.to_ne_bytes());
        b
    }
}

impl ErrQueue {
    /// Is an entry waiting (`tcp_poll`'s `EPOLLERR` for a non-empty queue)?
    pub fn has_entries(&self) -> bool {
        !self.queue.is_empty()
    }

    /// `skb_errqueue_purge`: drops every entry but zerocopy notifications and
    /// timestamp reports (`IP_RECVERR`/`IPV6_RECVERR` turned off).
    pub fn purge_icmp(&mut self) {
        let keep = |e: &ErrEntry| {
            e.ee.origin == SO_EE_ORIGIN_ZEROCOPY
                || e.ee.origin == super::tstamp::SO_EE_ORIGIN_TIMESTAMPING
        };
        for e in self.queue.iter().filter(|e| !keep(e)) {
            self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE + e.len);
        }
        self.queue.retain(keep);
    }

    /// `sock_dequeue_err_skb`: the oldest entry, which frees its memory.
    pub fn dequeue(&mut self) -> Option<ErrEntry> {
        let e = self.queue.pop_front()?;
        self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE + e.len);
        Some(e)
    }

    /// `sock_queue_err_skb` for a timestamp report: queued unless the error queue
    /// already holds `limit` bytes (`sk_rcvbuf`), which drops it as Linux does.
    pub fn queue_report(&mut self, e: ErrEntry, limit: u32) -> bool {
        let size = NOTIFY_TRUESIZE + e.len;
        if self.omem.saturating_add(size) >= limit {
            return false;
        }
        self.omem += size;
        self.queue.push_back(e);
        true
    }

    /// `msg_zerocopy_realloc` for a send of `size` bytes: extends the range of the
    /// write queue's tail skb (`tail_id`, its `skb_zcopy`) when this send's id
    /// continues it, else allocates a range (`msg_zerocopy_alloc`), which costs a
    /// notification skb of `sk_omem_alloc` within `optmem_max` (else `ENOBUFS`).
    /// Returns the id the send's data carries.
    pub fn realloc(&mut self, size: u64, tail_id: Option<u32>, optmem_max: u32) -> Option<u32> {
        if let Some(u) = self.pending.back_mut().filter(|u| Some(u.id) == tail_id) {
            let bytelen = u.bytelen + size;
            if u.len != RANGE_LIMIT
                && bytelen <= BYTE_LIMIT
                && u.id.wrapping_add(u.len) == self.zckey
            {
                u.len += 1;
                u.bytelen = bytelen;
                self.zckey = self.zckey.wrapping_add(1);
                return Some(u.id);
            }
        }
        // sock_omalloc.
        if self.omem + NOTIFY_TRUESIZE > optmem_max {
            return None;
        }
        self.omem += NOTIFY_TRUESIZE;
        let id = self.zckey;
        self.zckey = self.zckey.wrapping_add(1);
        self.pending.push_back(Uarg {
            id,
            len: 1,
            bytelen: size,
            zerocopy: true,
            end_seq: 0,
            in_device: 0,
        });
        Some(id)
    }

    /// The send took `copied` bytes ending at `end_seq`, copying them (`copied_data`:
    /// `uarg->zerocopy = 0`); with nothing taken, `msg_zerocopy_put_abort` gives the
    /// id back and a range left empty is freed without a notification.
    pub fn sent(&mut self, copied: usize, end_seq: u64, copied_data: bool) {
        let Some(u) = self.pending.back_mut() else {
            return;
        };
        if copied == 0 {
            self.zckey = self.zckey.wrapping_sub(1);
            u.len -= 1;
            if u.len == 0 && u.end_seq == 0 {
                self.pending.pop_back();
                self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE);
            }
            return;
        }
        u.end_seq = end_seq;
        u.zerocopy &= !copied_data;
    }

    /// Ranges whose data is all acknowledged below `snd_una` complete
    /// (`__msg_zerocopy_callback`); returns whether an entry was queued or extended.
    pub fn complete_acked(&mut self, snd_una: u64) -> bool {
        let mut any = false;
        while let Some(u) = self.pending.front().copied() {
            if u.end_seq == 0 || u.end_seq > snd_una || u.in_device > 0 {
                break;
            }
            self.pending.pop_front();
            self.callback(u);
            any = true;
        }
        any
    }

    /// A packet of range `id`'s zerocopy data went to the device: `copies`, the
    /// device copies it and lets go at once (`skb_orphan_frags_rx` ->
    /// `skb_copy_ubufs` -> `skb_zcopy_clear(skb, false)`: `uarg->zerocopy = 0`), or
    /// it holds the bytes until the packet's TX completion ([`ErrQueue::tx_freed`])
    /// when `completes`.
    pub fn tx_handed(&mut self, id: u32, copies: bool, completes: bool) {
        if let Some(u) = self.pending.iter_mut().find(|u| u.id == id) {
            u.zerocopy &= !copies;
            u.in_device += u32::from(!copies && completes);
        }
    }

    /// The device freed a packet of range `id`'s data (`msg_zerocopy_complete` of
    /// the clone).
    pub fn tx_freed(&mut self, id: u32) {
        if let Some(u) = self.pending.iter_mut().find(|u| u.id == id) {
            u.in_device = u.in_device.saturating_sub(1);
        }
    }

    /// `__msg_zerocopy_callback`: the notification for `[id, id + len - 1]`, merged
    /// into a zerocopy entry at the queue's tail that it continues.
    fn callback(&mut self, u: Uarg) {
        if u.len == 0 {
            self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE);
            return;
        }
        let lo = u.id;
        let ee = SockExtendedErr {
            origin: SO_EE_ORIGIN_ZEROCOPY,
            code: if u.zerocopy {
                0
            } else {
                SO_EE_CODE_ZEROCOPY_COPIED
            },
            info: lo,
            data: lo.wrapping_add(u.len - 1),
            ..SockExtendedErr::default()
        };
        if let Some(tail) = self.queue.back_mut().map(|t| &mut t.ee) {
            if tail.origin == SO_EE_ORIGIN_ZEROCOPY && notify_extend(tail, lo, u.len) {
                self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE); // consume_skb
                return;
            }
        }
        self.queue.push_back(ErrEntry {
            ee,
            tstamp: None,
            len: 0,
            offender: None,
            opt_stats: None,
        });
    }
}

/// `skb_zerocopy_notify_extend`: a range starting right after `tail`'s grows it,
/// as long as the whole stays below 2^32 ids.
fn notify_extend(tail: &mut SockExtendedErr, lo: u32, len: u32) -> bool {
    let sum_len = tail.data.wrapping_sub(tail.info) as u64 + 1 + len as u64;
    if sum_len >= 1 << 32 || lo != tail.data.wrapping_add(1) {
        return false;
    }
    tail.data = tail.data.wrapping_add(len);
    true
}

impl Tcb {
    /// `tcp_sendmsg_locked`'s zerocopy step: a notification id for this send, when
    /// `SO_ZEROCOPY` is on (`MSG_ZEROCOPY` is ignored otherwise), or `ENOBUFS`.
    pub(crate) fn zerocopy_begin(
        &mut self,
        ctx: &Ctx,
        size: usize,
    ) -> Result<Option<u32>, SocketError> {
        if size == 0 || !self.errq.zerocopy {
            return Ok(None);
        }
        let tail_id = self.write_queue.back().and_then(|t| t.zc);
        match self.errq.realloc(size as u64, tail_id, ctx.cfg.optmem_max) {
            Some(id) => Ok(Some(id)),
            None => Err(SocketError::NoBufferSpace),
        }
    }

    /// After an ACK moved `snd_una`, or the device freed a zerocopy packet:
    /// completions of fully acknowledged sends the device no longer holds, each a
    /// wakeup of the error queue's readers (`sk_error_report`).
    pub(crate) fn zerocopy_acked(&mut self, ctx: &mut Ctx) {
        if self.errq.complete_acked(self.snd_una) {
            self.notify(ctx, EventKind::ErrQueue);
        }
    }

    /// A packet whose payload is zerocopy data of notification `id` goes to the
    /// device (`__tcp_transmit_skb`'s clone referencing the pages); see
    /// [`ErrQueue::tx_handed`]. The bytes are copied by a device that says so, or
    /// into the packet by the stack when the device no longer takes payload apart.
    /// Returns `id` for the packet's TX token when the device holds the bytes
    /// until its completion.
    pub(crate) fn zerocopy_tx(&mut self, ctx: &Ctx, id: Option<u32>) -> Option<u32> {
        let id = id?;
        let copies = ctx.tx_orphan_frags || !ctx.tx_apart;
        let completes = !ctx.tx_orphan;
        self.errq.tx_handed(id, copies, completes);
        (completes && !copies).then_some(id)
    }

    /// The device freed a packet that held zerocopy data of `token.zc`.
    pub(crate) fn zerocopy_tx_freed(&mut self, ctx: &mut Ctx, token: &crate::socket::TxToken) {
        if let Some(id) = token.zc {
            self.errq.tx_freed(id);
            self.zerocopy_acked(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(q: &mut ErrQueue, size: u64, tail: Option<u32>, end: u64) -> u32 {
        let id = q.realloc(size, tail, 131_072).unwrap();
        q.sent(size as usize, end, true);
        id
    }

    #[test]
    fn sends_into_the_same_tail_skb_share_a_range() {
        let mut q = ErrQueue::default();
        assert_eq!(send(&mut q, 100, None, 101), 0);
        assert_eq!(send(&mut q, 100, Some(0), 201), 0, "extends range 0");
        assert_eq!(send(&mut q, 100, None, 301), 2, "sent tail: a new range");
        assert!(!q.complete_acked(200));
        assert!(q.complete_acked(201));
        let e = q.dequeue().unwrap().ee;
        assert_eq!((e.info, e.data, e.code), (0, 1, SO_EE_CODE_ZEROCOPY_COPIED));
        assert!(q.complete_acked(301));
        assert_eq!(q.dequeue().map(|e| (e.ee.info, e.ee.data)), Some((2, 2)));
        assert_eq!(q.dequeue(), None);
        assert_eq!(q.omem, 0);
    }

    #[test]
    fn continuing_completions_extend_the_queued_entry() {
        let mut q = ErrQueue::default();
        send(&mut q, 10, None, 11);
        q.complete_acked(11);
        send(&mut q, 10, None, 21);
        q.complete_acked(21);
        send(&mut q, 10, None, 31);
        q.complete_acked(31);
        assert_eq!(q.dequeue().map(|e| (e.ee.info, e.ee.data)), Some((0, 2)));
        assert_eq!(q.dequeue(), None);
        assert_eq!(q.omem, 0, "the merged notifications were consumed");
    }

    #[test]
    fn a_send_that_took_nothing_gives_its_id_back() {
        let mut q = ErrQueue::default();
        q.realloc(10, None, 131_072).unwrap();
        q.sent(0, 0, true);
        assert_eq!((q.zckey, q.omem, q.pending.len()), (0, 0, 0));
        assert_eq!(send(&mut q, 10, None, 11), 0);
        // An extension that took nothing shrinks the range back.
        q.realloc(10, Some(0), 131_072).unwrap();
        q.sent(0, 0, true);
        q.complete_acked(11);
        assert_eq!(q.dequeue().map(|e| (e.ee.info, e.ee.data)), Some((0, 0)));
    }

    #[test]
    fn optmem_max_bounds_outstanding_notifications() {
        let mut q = ErrQueue::default();
        let max = 3 * NOTIFY_TRUESIZE;
        for i in 0..3 {
            assert_eq!(q.realloc(1, None, max), Some(i));
            q.sent(1, i as u64 + 2, true);
        }
        assert_eq!(q.realloc(1, None, max), None, "ENOBUFS");
        q.complete_acked(10);
        // Merged into one entry: two skbs consumed, one left until read.
        assert_eq!(q.omem, NOTIFY_TRUESIZE);
        assert_eq!(q.realloc(1, None, max), Some(3));
    }

    #[test]
    fn a_range_stops_growing_at_the_byte_limit() {
        let mut q = ErrQueue::default();
        send(&mut q, BYTE_LIMIT, None, 1);
        assert_eq!(q.realloc(1, Some(0), 131_072), Some(1), "a new range");
    }

    #[test]
    fn extended_err_layout() {
        let e = SockExtendedErr {
            errno: 42,
            origin: 5,
            kind: 0,
            code: 1,
            info: 7,
            data: 9,
        };
        let b = e.to_bytes();
        assert_eq!((b[4], b[6]), (5, 1));
        assert_eq!(u32::from_ne_bytes(b[12..16].try_into().unwrap()), 9);
    }
}

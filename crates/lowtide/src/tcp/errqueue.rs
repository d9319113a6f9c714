//! The socket error queue (`sk_error_queue`) and `MSG_ZEROCOPY`'s completion
//! notifications (net/core/skbuff.c `msg_zerocopy_*`, net/core/sock.c
//! `sock_dequeue_err_skb`).
//!
//! A `MSG_ZEROCOPY` send takes a notification id (`sk_zckey`) in a range
//! (`struct ubuf_info_msgzc`) that the skbs holding its data reference
//! (`skb_zcopy`); when the last reference goes (`msg_zerocopy_complete`), a
//! `sock_extended_err` with `SO_EE_ORIGIN_ZEROCOPY` and the id range
//! `[ee_info, ee_data]` goes on the error queue. Consecutive sends into the same
//! unsent skb share one id range (`msg_zerocopy_realloc`), and a completion that
//! continues the range at the queue's tail extends it instead of queuing
//! (`skb_zerocopy_notify_extend`, whatever the two codes).
//!
//! The references, as Linux counts them: the send under way; every skb of the
//! write and retransmit queues that carries the id, so a range completes when
//! the last of them is freed, not when `snd_una` passes its last byte (an skb
//! partly acknowledged is trimmed and kept, `tcp_trim_head`; one with copied data
//! or a FIN after the range holds it until those are acknowledged too); and every
//! packet of its zerocopy data the device still holds, until the packet's TX
//! completion (the skb clones). A connection that ends with the data
//! unacknowledged frees its skbs (`tcp_write_queue_purge` on a reset, a timeout,
//! `tcp_disconnect`): the range completes then, and is reported unless the socket
//! was closed (`SOCK_DEAD` in `__msg_zerocopy_callback`).
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
//! clears the range's flag as each of its packets is handed over.
//!
//! Memory (tcp/api.rs): zerocopy data counts the pages it spans whole in
//! `sk_wmem_queued` (`__zerocopy_sg_from_iter`); an skb whose first data is
//! zerocopy is pure (`SKBFL_PURE_ZEROCOPY`): its pages are not charged to the
//! socket's reserve (`sk_mem_charge`), nor asked for (`tcp_wmem_schedule`),
//! until copied data joins it (`tcp_downgrade_zcopy_pure`); copied data after
//! zerocopy data takes a page fragment of its own.
//!
//! Where lowtide differs: a purge drops the skbs' references but lowtide's queues
//! keep the skbs (and a `Bytes` sender's slices) until the socket ends; without
//! `NETIF_F_SG` the skbs still reference the range (Linux copies without linking
//! them, so the range completes when the send returns); pinned pages are not
//! charged to `RLIMIT_MEMLOCK` (`mm_account_pinned_pages`); a send of slices
//! takes one fragment per slice (Linux: one per page it spans). An skb of a
//! `Bytes` sender holds one slice of one buffer, so copied data after its
//! zerocopy data, and a later send's buffer, start a new skb where Linux would
//! append page fragments to it (the sends still share one id range).

use super::consts::SKB_OVERHEAD;
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
/// What one notification skb costs in `sk_omem_alloc` (`sock_omalloc(sk, 0)`), from
/// the send that allocates it until it is read: `alloc_skb(0)` takes its head from
/// `skb_small_head_cache` (Linux 6.3+, `SKB_SMALL_HEAD_CACHE_SIZE`, the head of a
/// `MAX_TCP_HEADER` skb), so its truesize is a TCP skb's overhead, 832 on this
/// machine's kernel (`SK_MEMINFO_OPTMEM` 832 after one `MSG_ZEROCOPY` send, 1664
/// after two ranges).
pub const NOTIFY_TRUESIZE: u32 = SKB_OVERHEAD;
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
            self.report_mem = self.report_mem.saturating_sub(NOTIFY_TRUESIZE + e.len);
        }
        self.queue.retain(keep);
    }

    /// `sock_dequeue_err_skb`: the oldest entry, which frees its memory.
    pub fn dequeue(&mut self) -> Option<ErrEntry> {
        let e = self.queue.pop_front()?;
        if e.ee.origin == SO_EE_ORIGIN_ZEROCOPY {
            self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE); // sock_ofree
        } else {
            self.report_mem = self.report_mem.saturating_sub(NOTIFY_TRUESIZE + e.len);
        }
        Some(e)
    }

    /// `sock_queue_err_skb` for a timestamp report: queued unless the error queue
    /// already holds `limit` bytes (`sk_rcvbuf`), which drops it as Linux does.
    pub fn queue_report(&mut self, e: ErrEntry, limit: u32) -> bool {
        let size = NOTIFY_TRUESIZE + e.len;
        if self.report_mem.saturating_add(size) >= limit {
            return false;
        }
        self.report_mem += size;
        self.queue.push_back(e);
        true
    }

    /// `msg_zerocopy_realloc` for a send of `size` bytes: extends the range of the
    /// write queue's tail skb (`tail_id`, its `skb_zcopy`) when this send's id
    /// continues it, else allocates a range (`msg_zerocopy_alloc`), which costs a
    /// notification skb of `sk_omem_alloc` if `SKB_TRUESIZE(0)` more fits within
    /// `optmem_max` (else `ENOBUFS`), `other_omem` being what else the socket
    /// holds there (its TCP-MD5 keys).
    /// Either way the send holds the range until [`ErrQueue::sent`]. Returns the
    /// id the send's data carries.
    pub fn realloc(
        &mut self,
        size: u64,
        tail_id: Option<u32>,
        (other_omem, optmem_max): (u32, u32),
    ) -> Option<u32> {
        if let Some(u) = self.pending.back_mut().filter(|u| Some(u.id) == tail_id) {
            let bytelen = u.bytelen + size;
            if u.len != RANGE_LIMIT
                && bytelen <= BYTE_LIMIT
                && u.id.wrapping_add(u.len) == self.zckey
            {
                u.len += 1;
                u.bytelen = bytelen;
                u.busy = true; // net_zcopy_get
                self.zckey = self.zckey.wrapping_add(1);
                return Some(u.id);
            }
        }
        if !omalloc_fits(other_omem as u64 + self.omem as u64, optmem_max) {
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
            busy: true,
            linked: false,
        });
        Some(id)
    }

    /// The send ends (`tcp_sendmsg_locked`'s `net_zcopy_put`): it took `copied`
    /// bytes ending at `end_seq` into skbs that now hold the range, copying them
    /// (`copied_data`: `uarg->zerocopy = 0`); with nothing taken,
    /// `msg_zerocopy_put_abort` gives the id back, and a range left empty and
    /// unreferenced is freed without a notification. [`ErrQueue::release`] then
    /// completes it if nothing else holds it.
    pub fn sent(&mut self, copied: usize, end_seq: u64, copied_data: bool) {
        let Some(u) = self.pending.back_mut() else {
            return;
        };
        u.busy = false;
        if copied == 0 {
            self.zckey = self.zckey.wrapping_sub(1);
            u.len -= 1;
            return;
        }
        u.end_seq = end_seq;
        u.linked = true;
        u.zerocopy &= !copied_data;
    }

    /// `msg_zerocopy_complete` dropping the last reference: every range no send
    /// holds, no skb holds, and of which the device holds no packet completes
    /// (`__msg_zerocopy_callback`), oldest first. `front` is the first skb left
    /// in the retransmit and write queues (its `seq` and `skb_zcopy`): a range's
    /// skbs follow each other in the stream and are freed in order, so none is
    /// left once the first skb carries another id (or none) and starts past the
    /// range's last byte; an skb partly acknowledged keeps its id
    /// (`tcp_trim_head`). Returns whether an entry was queued or extended.
    pub fn release(&mut self, front: Option<(u64, Option<u32>)>) -> bool {
        let held = |u: &Uarg| {
            u.busy
                || u.in_device > 0
                || (u.linked && front.is_some_and(|(seq, zc)| zc == Some(u.id) || seq < u.end_seq))
        };
        let mut any = false;
        let mut i = 0;
        while i < self.pending.len() {
            if held(&self.pending[i]) {
                i += 1;
                continue;
            }
            let u = self.pending.remove(i).expect("in range");
            any |= self.callback(u);
        }
        any
    }

    /// `tcp_write_queue_purge`: the queues' skbs are freed, and with them their
    /// references to the ranges (the device's clones keep theirs).
    pub fn purge(&mut self) {
        for u in &mut self.pending {
            u.linked = false;
        }
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
    /// into a zerocopy entry at the queue's tail that it continues (whatever their
    /// codes: `skb_zerocopy_notify_extend` compares ids only). None for a range
    /// whose one send was aborted (`!uarg->len`) or on a closed socket
    /// (`SOCK_DEAD`). Returns whether the queue changed (`sk_error_report`).
    fn callback(&mut self, u: Uarg) -> bool {
        if u.len == 0 || self.dead {
            self.omem = self.omem.saturating_sub(NOTIFY_TRUESIZE); // consume_skb
            return false;
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
                return true;
            }
        }
        self.queue.push_back(ErrEntry {
            ee,
            tstamp: None,
            len: 0,
            offender: None,
            opt_stats: None,
        });
        true
    }
}

/// `msg_zerocopy_alloc`'s `sock_omalloc(sk, 0)` on a socket holding `omem` bytes of
/// `sk_omem_alloc`: "small safe race: SKB_TRUESIZE may differ from final
/// skb->truesize": the check counts `SKB_TRUESIZE(0)`, 576, and the skb then
/// charges its real truesize. A socket without a connection (its TCP-MD5 keys its
/// only option memory) asks it too, before `tcp_sendmsg_locked` checks its state.
pub(crate) fn omalloc_fits(omem: u64, optmem_max: u32) -> bool {
    omem + super::skbuff::skb_truesize(0) as u64 <= optmem_max as u64
}

/// `is_icmp_err_skb`: an ICMP or ICMPv6 error (`ip_icmp_error`, `ipv6_icmp_error`).
fn is_icmp_err_skb(e: &ErrEntry) -> bool {
    e.ee.origin == SO_EE_ORIGIN_ICMP || e.ee.origin == SO_EE_ORIGIN_ICMP6
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
        let omem = (self.md5.omem(), ctx.cfg.optmem_max);
        match self.errq.realloc(size as u64, tail_id, omem) {
            Some(id) => Ok(Some(id)),
            None => Err(SocketError::NoBufferSpace),
        }
    }

    /// `sock_dequeue_err_skb`: the oldest entry. `sk_err` follows the ICMP errors
    /// queued: the next entry's errno when it is one, cleared when the entry read
    /// was one and the next is not; and an entry left behind is reported again
    /// (`sk_error_report`, returned as `true`: an edge-triggered epoll item sees
    /// `EPOLLERR` once more).
    pub(crate) fn dequeue_err_skb(&mut self) -> (Option<ErrEntry>, bool) {
        let Some(e) = self.errq.dequeue() else {
            return (None, false);
        };
        let next = self.errq.queue.front();
        let icmp_next = next.is_some_and(is_icmp_err_skb);
        if let Some(n) = next.filter(|n| is_icmp_err_skb(n)) {
            self.sk_err = SocketError::from_errno(n.ee.errno as i32);
        }
        if is_icmp_err_skb(&e) && !icmp_next {
            self.sk_err = None;
        }
        let report = next.is_some();
        (Some(e), report)
    }

    /// `sk_omem_alloc`: the `MSG_ZEROCOPY` notification skbs not yet read and the
    /// TCP-MD5 keys (`sock_kmalloc`, [`crate::tcp::md5::MD5_KEY_OMEM`] each).
    pub(crate) fn optmem(&self) -> u32 {
        self.errq.omem + self.md5.omem()
    }

    /// After skbs were freed (an ACK, a purge), a send ended or the device freed
    /// a zerocopy packet: completions of the ranges nothing holds any more
    /// ([`ErrQueue::release`]), a wakeup of the error queue's readers
    /// (`sk_error_report`).
    pub(crate) fn zerocopy_release(&mut self, ctx: &mut Ctx) {
        if self.errq.pending.is_empty() {
            return;
        }
        let front = match self.rtx.first() {
            Some(s) => Some((s.seq, s.zc)),
            None => self.write_queue.front().map(|w| (w.seq, w.zc)),
        };
        if self.errq.release(front) {
            self.notify(ctx, EventKind::ErrQueue);
        }
    }

    /// `tcp_write_queue_purge` at `tcp_done`'s paths (a reset, a timeout,
    /// `tcp_disconnect`, the end of a closed socket): the skbs' references go, so
    /// ranges whose data was never acknowledged complete too, reported unless the
    /// socket was closed (the skbs went in [`Tcb::write_queue_purge`]).
    pub(crate) fn zerocopy_purge(&mut self, ctx: &mut Ctx) {
        self.errq.purge();
        self.zerocopy_release(ctx);
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
            self.zerocopy_release(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A send of `size` bytes ending at `end`, into skbs (`realloc`, `sent`).
    fn send(q: &mut ErrQueue, size: u64, tail: Option<u32>, end: u64) -> u32 {
        let id = q.realloc(size, tail, (0, 131_072)).unwrap();
        q.sent(size as usize, end, true);
        id
    }

    /// The first skb left in the queues: at `seq`, holding range `zc`.
    fn front(seq: u64, zc: Option<u32>) -> Option<(u64, Option<u32>)> {
        Some((seq, zc))
    }

    fn ranges(q: &mut ErrQueue) -> Vec<(u32, u32, u8)> {
        std::iter::from_fn(|| q.dequeue().map(|e| (e.ee.info, e.ee.data, e.ee.code))).collect()
    }

    #[test]
    fn sends_into_the_same_tail_skb_share_a_range() {
        let mut q = ErrQueue::default();
        assert_eq!(send(&mut q, 100, None, 101), 0);
        assert_eq!(send(&mut q, 100, Some(0), 201), 0, "extends range 0");
        assert_eq!(send(&mut q, 100, None, 301), 2, "sent tail: a new range");
        assert!(!q.release(front(101, Some(0))), "its skb is still queued");
        assert!(q.release(front(201, Some(2))));
        let e = q.dequeue().unwrap().ee;
        assert_eq!((e.info, e.data, e.code), (0, 1, SO_EE_CODE_ZEROCOPY_COPIED));
        assert!(q.release(None));
        assert_eq!(ranges(&mut q), [(2, 2, SO_EE_CODE_ZEROCOPY_COPIED)]);
        assert_eq!(q.omem, 0);
    }

    /// Linux: the last skb holding the range freed, not `snd_una` past its last
    /// byte: an skb partly acknowledged (tcp_trim_head) or carrying later bytes
    /// (copied data appended, a FIN) keeps it.
    #[test]
    fn a_range_completes_when_no_skb_holds_it() {
        let mut q = ErrQueue::default();
        send(&mut q, 100, None, 101);
        // The skb 1..301 holds range 0 and 200 bytes after it; trimmed to 201..301.
        assert!(!q.release(front(201, Some(0))), "trimmed, still held");
        // An older skb without the id, before the range's bytes.
        assert!(!q.release(front(1, None)), "its skbs come later");
        assert!(q.release(front(301, None)), "freed: the front is past it");
        assert_eq!(ranges(&mut q), [(0, 0, SO_EE_CODE_ZEROCOPY_COPIED)]);
    }

    /// A send under way holds its range (its own reference), and so does every
    /// packet of it the device holds; ranges complete in the order they are let go.
    #[test]
    fn a_send_and_the_device_hold_the_range() {
        let mut q = ErrQueue::default();
        let id = q.realloc(10, None, (0, 131_072)).unwrap();
        assert!(!q.release(None), "the send holds it");
        q.sent(10, 11, false);
        q.tx_handed(id, false, true);
        send(&mut q, 10, None, 21);
        assert!(q.release(None), "range 1 goes first");
        assert_eq!(ranges(&mut q), [(1, 1, SO_EE_CODE_ZEROCOPY_COPIED)]);
        q.tx_freed(id);
        assert!(q.release(None));
        assert_eq!(ranges(&mut q), [(0, 0, 0)], "never copied");
    }

    #[test]
    fn continuing_completions_extend_the_queued_entry() {
        let mut q = ErrQueue::default();
        send(&mut q, 10, None, 11);
        q.release(None);
        send(&mut q, 10, None, 21);
        q.release(None);
        // skb_zerocopy_notify_extend compares ids only: a range that was not
        // copied joins a COPIED entry, which keeps its code.
        q.realloc(10, None, (0, 131_072)).unwrap();
        q.sent(10, 31, false);
        q.release(None);
        assert_eq!(ranges(&mut q), [(0, 2, SO_EE_CODE_ZEROCOPY_COPIED)]);
        assert_eq!(q.omem, 0, "the merged notifications were consumed");
    }

    #[test]
    fn a_send_that_took_nothing_gives_its_id_back() {
        let mut q = ErrQueue::default();
        q.realloc(10, None, (0, 131_072)).unwrap();
        q.sent(0, 0, true);
        assert!(!q.release(front(1, None)), "aborted: no notification");
        assert_eq!((q.zckey, q.omem, q.pending.len()), (0, 0, 0));
        assert_eq!(send(&mut q, 10, None, 11), 0);
        // An extension that took nothing shrinks the range back.
        q.realloc(10, Some(0), (0, 131_072)).unwrap();
        q.sent(0, 0, true);
        assert!(!q.release(front(1, Some(0))));
        q.release(None);
        assert_eq!(ranges(&mut q), [(0, 0, SO_EE_CODE_ZEROCOPY_COPIED)]);
    }

    /// tcp_write_queue_purge frees the skbs: their ranges complete, reported
    /// unless the socket is closed (SOCK_DEAD); the device's clones still hold.
    #[test]
    fn a_purge_completes_unless_the_socket_is_dead() {
        let mut q = ErrQueue::default();
        send(&mut q, 10, None, 11);
        let held = send(&mut q, 10, None, 21);
        q.tx_handed(held, false, true);
        q.purge();
        assert!(q.release(front(1, Some(0))), "the queues' skbs are gone");
        assert_eq!(ranges(&mut q), [(0, 0, SO_EE_CODE_ZEROCOPY_COPIED)]);
        q.dead = true;
        q.tx_freed(held);
        assert!(!q.release(None), "SOCK_DEAD");
        assert_eq!((q.queue.len(), q.pending.len(), q.omem), (0, 0, 0));
    }

    #[test]
    fn optmem_max_bounds_outstanding_notifications() {
        let mut q = ErrQueue::default();
        let max = 3 * NOTIFY_TRUESIZE;
        for i in 0..3 {
            assert_eq!(q.realloc(1, None, (0, max)), Some(i));
            q.sent(1, i as u64 + 2, true);
        }
        assert_eq!(q.realloc(1, None, (0, max)), None, "ENOBUFS");
        q.release(None);
        // Merged into one entry: two skbs consumed, one left until read.
        assert_eq!(q.omem, NOTIFY_TRUESIZE);
        assert_eq!(q.realloc(1, None, (0, max)), Some(3));
        // The socket's TCP-MD5 keys share sk_omem_alloc, and sock_omalloc checks
        // SKB_TRUESIZE(0) (576) before charging the skb's 832.
        let mut k = ErrQueue::default();
        assert_eq!(k.realloc(1, None, (136, 576 + 135)), None);
        assert_eq!(k.realloc(1, None, (136, 576 + 136)), Some(0));
        assert_eq!(k.omem, NOTIFY_TRUESIZE);
    }

    /// sock_omalloc's check, which a socket without a connection makes too
    /// (tcp_sendmsg_locked's first step): SKB_TRUESIZE(0) more within optmem_max.
    #[test]
    fn omalloc_fits_counts_skb_truesize_zero() {
        assert!(!omalloc_fits(0, 0), "optmem_max 0: ENOBUFS");
        assert!(omalloc_fits(0, 576));
        assert!(!omalloc_fits(1, 576));
        assert!(omalloc_fits(136, 576 + 136), "TCP-MD5 keys count");
    }

    #[test]
    fn a_range_stops_growing_at_the_byte_limit() {
        let mut q = ErrQueue::default();
        send(&mut q, BYTE_LIMIT, None, 1);
        assert_eq!(q.realloc(1, Some(0), (0, 131_072)), Some(1), "a new range");
    }

    fn entry(origin: u8, errno: u32) -> ErrEntry {
        ErrEntry {
            ee: SockExtendedErr {
                errno,
                origin,
                ..SockExtendedErr::default()
            },
            tstamp: None,
            len: 0,
            offender: None,
            opt_stats: None,
        }
    }

    /// sock_dequeue_err_skb: sk_err follows the ICMP errors left queued, and an
    /// entry left behind is reported again (sk_error_report).
    #[test]
    fn dequeue_err_skb_sets_sk_err_from_the_next_icmp_error() {
        use crate::posix::consts::errno::{ECONNREFUSED, EHOSTUNREACH};
        let ts = super::super::tstamp::SO_EE_ORIGIN_TIMESTAMPING;
        let mut t = Tcb::for_test(&crate::config::Config::default());
        assert_eq!(t.dequeue_err_skb(), (None, false), "empty");
        t.sk_err = Some(SocketError::HostUnreachable);
        let icmp = |e: i32| entry(SO_EE_ORIGIN_ICMP, e as u32);
        t.errq
            .queue
            .extend([icmp(EHOSTUNREACH), icmp(ECONNREFUSED)]);
        t.errq.queue.push_back(entry(ts, 42));
        t.errq
            .queue
            .push_back(entry(SO_EE_ORIGIN_ICMP6, EHOSTUNREACH as u32));
        // An ICMP error followed by another: sk_err is the next one's.
        assert!(t.dequeue_err_skb().1);
        assert_eq!(t.sk_err, Some(SocketError::ConnectionRefused));
        // An ICMP error followed by a report: cleared.
        assert!(t.dequeue_err_skb().1);
        assert_eq!(t.sk_err, None);
        // A report followed by an ICMPv6 error: that one's errno.
        t.sk_err = Some(SocketError::TimedOut);
        let (e, report) = t.dequeue_err_skb();
        assert_eq!((e.map(|e| e.ee.origin), report), (Some(ts), true));
        assert_eq!(t.sk_err, Some(SocketError::HostUnreachable));
        // The last one: cleared, nobody woken.
        assert!(!t.dequeue_err_skb().1);
        assert_eq!(t.sk_err, None);
        // A report alone leaves sk_err as it was.
        t.sk_err = Some(SocketError::TimedOut);
        t.errq.queue.push_back(entry(ts, 42));
        assert!(!t.dequeue_err_skb().1);
        assert_eq!(t.sk_err, Some(SocketError::TimedOut));
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

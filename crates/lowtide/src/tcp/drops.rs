//! `sk_drops` as Linux 6.18 counts it for TCP sockets (`SO_MEMINFO`'s
//! `SK_MEMINFO_DROPS`, sock_diag's `INET_DIAG_SKMEMINFO`): an `atomic_t` (an `int`,
//! read back as a `u32`) that `sk_drops_skbadd` raises by a dropped skb's
//! `max(1, gso_segs)` and `sk_drops_inc` by one.
//!
//! What counts (tcp_input.c, tcp_ipv4.c / tcp_ipv6.c, tcp_minisocks.c):
//! - every `tcp_drop_reason` (`sk_drops_skbadd` then `sk_skb_reason_drop`):
//!   `tcp_validate_incoming`'s `discard:` (PAWS, an old ACK that failed PAWS,
//!   `tcp_sequence`'s out-of-window segments, resets not at `rcv_nxt`, SYNs
//!   challenged), `tcp_rcv_established`'s and `tcp_rcv_state_process`'s flagless
//!   segments and the ACKs `tcp_ack` refuses (of unsent data, too old),
//!   `tcp_rcv_state_process`'s final `if (!queued)` (every segment at or above
//!   `rcv_nxt` in CLOSE-WAIT, CLOSING and LAST-ACK that does not end the state, a
//!   listener's reset, SYN-FIN or flagless segment), `tcp_rcv_synsent_state_process`'s
//!   `discard_and_undo:` (a reset without ACK, a segment without SYN),
//!   `tcp_data_queue`'s drops (a duplicate, data beyond the window, at a zero
//!   window, `TcpExtTCPRcvQDrop`), `tcp_data_queue_ofo`'s (`TcpExtTCPOFODrop`, each
//!   skb `TcpExtTCPOFOMerge` drops, by the gso_segs `tcp_ooo_try_coalesce` summed
//!   into it), `tcp_ofo_queue`'s skbs wholly below `rcv_nxt`, and
//!   `tcp_prune_ofo_queue`'s; `tcp_rcv_established`'s `csum_error:` (a bad
//!   checksum found there, on a segment past `CHECKSUM_BREAK`: stack/drops.rs);
//! - `tcp_v4_rcv`'s `discard_and_relse:` on the socket found: `IP_MINTTL`,
//!   `tcp_inbound_hash` (TCP-MD5) and, with `sk` the listener, every segment
//!   `tcp_check_req` answers with `NULL` (a request's retransmitted SYN,
//!   out-of-window or PAWS-failed segments, a reset or SYN, a segment without ACK,
//!   `TCP_DEFER_ACCEPT`'s bare ACK, an accept queue overflow); `tcp_inbound_hash`
//!   on a request counts on its listener too;
//! - `tcp_listendrop` (`sk_drops_inc` beside `TcpExtListenDrops`) on the listener.
//!
//! What does not: a valid reset (`tcp_reset`, then `__kfree_skb`), segments a
//! socket consumes (a pure ACK, a SYN-ACK, a simultaneous open's SYN, the ACK that
//! ends CLOSING or LAST-ACK), segments answered with a reset from
//! `tcp_v4_do_rcv`'s `reset:` (an unacceptable ACK in SYN-SENT or SYN-RECV, text
//! after close, an ACK to a listener: `sk_skb_reason_drop` alone), a request's
//! ACK of something else (`tcp_check_req` returns the listener), and TIME-WAIT
//! sockets, which have no `sk_drops`. Nothing resets it: `tcp_disconnect` leaves
//! it, a child starts from 0 (`sk_clone_lock`).

use super::sock::Tcb;
use crate::config::Config;
use crate::tcp::skbuff::RxAlloc;

/// `max(1, skb_shinfo(skb)->gso_segs)` of a received packet of `len` payload bytes
/// as the stack counts it (`TcpInSegs`): a GRO packet's segments of the device MSS
/// (`RxAlloc::PageFrag`), one for a TUN device's packet (`RxAlloc::Tun`).
pub(crate) fn rx_gso_segs(cfg: &Config, v6: bool, len: usize) -> u32 {
    match cfg.rx_alloc {
        RxAlloc::PageFrag => len.div_ceil(cfg.mss_for(v6) as usize).max(1) as u32,
        RxAlloc::Tun => 1,
    }
}

/// `sk_drops_add` on an `atomic_t`: it wraps.
pub(crate) fn sk_drops_add(sk_drops: &mut i32, segs: u32) {
    *sk_drops = sk_drops.wrapping_add(segs as i32);
}

impl Tcb {
    /// `tcp_drop_reason`: the segment being processed is dropped and counted
    /// (`sk_drops_skbadd`).
    pub(crate) fn tcp_drop(&mut self) {
        sk_drops_add(&mut self.sk_drops, self.rx_segs);
    }

    /// A segment `tcp_check_req` answers with `NULL`: on a Fast Open child
    /// (`tcp_rcv_state_process`'s `goto discard`) its own drop; on a request,
    /// `tcp_v4_rcv`'s `discard_and_relse` with the listener as `sk`.
    pub(crate) fn req_drop(&mut self) {
        match self.tfo.rsk.is_some() {
            true => self.tcp_drop(),
            false => self.req.listener_drops += self.rx_segs,
        }
    }

    /// The skbs the out-of-order queue dropped (`tcp_drop_reason` in
    /// `tcp_data_queue_ofo` and `tcp_ofo_queue`), by their gso_segs.
    pub(crate) fn ofo_drops(&mut self) {
        let segs = self.ofo.take_drops();
        sk_drops_add(&mut self.sk_drops, segs);
    }

    /// `sk_drops_read`, as `sk_get_meminfo` reports it.
    pub(crate) fn sk_drops_read(&self) -> u32 {
        self.sk_drops as u32
    }
}

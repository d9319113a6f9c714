//! `struct sk_buff` as TCP uses it: one chunk of the send stream, with the
//! `tcp_skb_cb` bits and the delivery-rate snapshot (`tcp_skb_cb.tx`) it carries.

pub use super::data::{SkbData, WriteData};
use crate::tcp::consts::SKB_OVERHEAD;
use crate::time::Instant;

/// `TCPCB_SACKED_ACKED`: the receiver SACKed this skb.
pub const SACKED_ACKED: u8 = 0x01;
/// `TCPCB_SACKED_RETRANS`: retransmitted and not yet acknowledged or lost again.
pub const SACKED_RETRANS: u8 = 0x02;
/// `TCPCB_LOST`: considered lost, to be retransmitted.
pub const LOST: u8 = 0x04;
/// `TCPCB_EVER_RETRANS`: retransmitted at least once (Karn: no RTT sample).
pub const EVER_RETRANS: u8 = 0x80;
/// Not a `TCPCB_*` bit: the skb is off `tp->tsorted_sent_queue`, which
/// `tcp_rack_detect_loss` unlinks it from (`list_del_init(&skb->tcp_tsorted_anchor)`)
/// when it marks it lost, until it is sent again (`tcp_update_skb_after_send`'s
/// `list_move_tail`). An undo that clears `TCPCB_LOST` (`tcp_undo_cwnd_reduction`
/// with `unmark_loss`) does not put it back, so RACK does not see it again; an skb
/// marked lost otherwise (an RTO's `tcp_timeout_mark_lost`, NewReno) stays listed.
pub const TSORTED_OUT: u8 = 0x40;

/// Control flags an skb carries in sequence space.
pub const FLAG_SYN: u8 = 0x02;
/// FIN occupies the skb's last sequence number.
pub const FLAG_FIN: u8 = 0x01;
/// `TCPHDR_PSH` marked by `tcp_mark_push`.
pub const FLAG_PSH: u8 = 0x08;
/// `TCP_SKB_CB(skb)->eor` (not a header bit): the skb ends a `MSG_EOR` record, so no
/// later data joins it (`tcp_skb_can_collapse_to`); a split leaves it on the second
/// part (`tcp_skb_fragment_eor`).
pub const FLAG_EOR: u8 = 0x80;

/// `tcp_skb_can_collapse_to`: may data be appended to an skb with these flags?
pub fn can_collapse_to(flags: u8) -> bool {
    flags & FLAG_EOR == 0
}

/// An skb in the write queue: payload still growing, never sent.
#[derive(Debug)]
pub struct WriteSkb {
    /// Stream offset of the first byte (0 is the SYN).
    pub seq: u64,
    /// The payload.
    pub data: WriteData,
    /// `FLAG_SYN`/`FLAG_FIN`.
    pub flags: u8,
    /// `skb_zcopy`: the `MSG_ZEROCOPY` notification id its zerocopy data carries.
    pub zc: Option<u32>,
    /// Page fragments that zerocopy data added (`nr_frags`, at most
    /// `MAX_SKB_FRAGS`).
    pub nr_frags: u16,
    /// `SKBFL_PURE_ZEROCOPY` (`skb_zcopy_pure`): it holds zerocopy data only, so
    /// its pinned pages count in `sk_wmem_queued` but are not charged to the
    /// socket's reserve (`sk_mem_charge`); copied data downgrades it
    /// (`tcp_downgrade_zcopy_pure`).
    pub pure: bool,
    /// Truesize beyond its bytes and `SKB_OVERHEAD`: its zerocopy fragments
    /// count whole pages (`zerocopy_fill_skb_from_iter`: `PAGE_ALIGN`), and an
    /// skb an MTU probe took in part keeps the truesize of the bytes taken
    /// (`tcp_mtu_probe`'s `__pskb_trim_head`).
    pub slack: u32,
    /// Its last page fragment is zerocopy data: copied data cannot coalesce
    /// into it (`skb_can_coalesce`) and takes a fragment of its own.
    pub frag_zc: bool,
}

impl WriteSkb {
    /// An skb of copied data (no zerocopy fragments), as `tcp_stream_alloc_skb`
    /// makes it for `tcp_sendmsg_locked`'s copy path and for the SYN/FIN.
    pub fn copied(seq: u64, data: WriteData, flags: u8) -> Self {
        WriteSkb {
            seq,
            data,
            flags,
            zc: None,
            nr_frags: 0,
            pure: false,
            slack: 0,
            frag_zc: false,
        }
    }

    /// What a pure zerocopy skb holds in `sk_wmem_queued` without a charge: its
    /// truesize beyond the skb's own (`SKB_TRUESIZE(skb_end_offset(skb))`).
    pub fn uncharged(&self) -> u64 {
        match self.pure {
            true => self.data.len() as u64 + self.slack as u64,
            false => 0,
        }
    }

    /// Offset just past the skb (FIN included).
    pub fn end_seq(&self) -> u64 {
        self.seq + self.data.len() as u64 + u64::from(self.flags & (FLAG_FIN | FLAG_SYN) != 0)
    }
}

/// An skb in the retransmit queue: sent at least once.
#[derive(Debug, Clone)]
pub struct Skb {
    /// Stream offset of the first byte.
    pub seq: u64,
    /// Offset just past the skb (SYN and FIN count one each).
    pub end_seq: u64,
    /// The payload (shared, so splitting and cloning to the device are cheap).
    pub data: SkbData,
    /// `FLAG_SYN`/`FLAG_FIN`.
    pub flags: u8,
    /// `TCPCB_*` scoreboard bits.
    pub sacked: u8,
    /// Number of MSS-sized segments (`tcp_skb_pcount`).
    pub pcount: u32,
    /// `tcp_skb_mss` (`skb_shinfo(skb)->gso_size`): the segment size it was cut at
    /// when it last counted more than one segment, 0 for a one-segment skb
    /// (`tcp_set_skb_tso_segs`); a SACK shift sets it on the skb it joins, so two
    /// one-segment skbs of the same length make one skb of that segment size
    /// (`tcp_shifted_skb`).
    pub gso_size: u32,
    /// Last transmission time (`skb_mstamp_ns`).
    pub tx_time: Instant,
    /// Memory charged for it.
    pub truesize: u32,
    /// Delivery-rate snapshot of the last transmission (`tcp_rate_skb_sent`).
    pub tx: TxRate,
    /// The skb's fast clone (`SKB_FCLONE_ORIG`'s `skb2`, which `tcp_transmit_skb`
    /// hands to the device) while the device still holds it: the id its
    /// transmission's TX token carries, until that TX completion frees it; 0 when
    /// the clone is free. `skb_fclone_busy`: a retransmission then waits
    /// (`skb_still_in_host_queue`), and the skb joins no other on retransmission
    /// (`tcp_can_collapse`'s `skb_cloned`).
    pub fclone: u32,
    /// `skb_zcopy`: the `MSG_ZEROCOPY` notification id (`uarg`) whose data it
    /// holds; its reference keeps the range's completion back until the skb is
    /// freed (tcp/errqueue.rs).
    pub zc: Option<u32>,
    /// Of `truesize`, what a pure zerocopy skb (`skb_zcopy_pure`) holds without
    /// a charge to the socket's reserve (see [`WriteSkb::pure`]).
    pub uncharged: u32,
}

impl Skb {
    /// Payload length.
    pub fn len(&self) -> u32 {
        self.data.len() as u32
    }
    /// True if it carries no payload (a bare SYN or FIN).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// True if any of the `TCPCB_*` bits in `bits` is set.
    pub fn has(&self, bits: u8) -> bool {
        self.sacked & bits != 0
    }

    /// Splits off and returns the part from `at` (a stream offset strictly inside the
    /// skb's payload, or at its end when a FIN follows: the rest is the FIN alone, as
    /// `tcp_trim_head` leaves it) on; `self` keeps the part before
    /// (`tso_fragment`/`tcp_fragment`).
    ///
    /// The second part is a new skb (`tcp_stream_alloc_skb`: `SKB_OVERHEAD`, which
    /// `tcp_fragment` adds to `sk_wmem_queued`) and takes the truesize of the bytes it
    /// moves (`buff->truesize += nlen; skb->truesize -= nlen`): the pair costs one
    /// `SKB_OVERHEAD` more than the skb did, which the caller charges.
    pub fn split_off(&mut self, at: u64, mss: u32) -> Skb {
        debug_assert!(at > self.seq && at < self.end_seq);
        debug_assert!(at <= self.seq + self.data.len() as u64);
        let n = (at - self.seq) as usize;
        let tail_data = self.data.split_off(n);
        let tail_len = tail_data.len() as u32;
        let head_unch = (self.uncharged as u64 * n as u64 / (n as u64 + tail_len as u64)) as u32;
        let mut tail = Skb {
            seq: at,
            end_seq: self.end_seq,
            data: tail_data,
            flags: self.flags & (FLAG_FIN | FLAG_PSH | FLAG_EOR),
            sacked: self.sacked,
            pcount: 0,
            gso_size: 0,
            tx_time: self.tx_time,
            truesize: SKB_OVERHEAD + tail_len,
            tx: self.tx,
            // tcp_fragment: the second part is a new skb, its fast clone free;
            // the first keeps the clone (and its data) the device holds.
            fclone: 0,
            // skb_split -> skb_zerocopy_clone: both parts reference the uarg,
            // and both are pure if it was (SKBFL_PURE_ZEROCOPY).
            zc: self.zc,
            uncharged: self.uncharged - head_unch,
        };
        // tcp_fragment: "PSH and FIN should only be set in the second packet", and
        // the record end moves there too (tcp_skb_fragment_eor).
        self.flags &= !(FLAG_FIN | FLAG_PSH | FLAG_EOR);
        self.end_seq = at;
        self.truesize = self.truesize.saturating_sub(tail_len);
        self.uncharged = head_unch;
        self.set_tso_segs(mss);
        tail.set_tso_segs(mss);
        tail
    }

    /// `tcp_set_skb_tso_segs`: counts its segments of `mss` bytes, and keeps `mss` as
    /// its segment size if that makes more than one.
    pub fn set_tso_segs(&mut self, mss: u32) {
        (self.pcount, self.gso_size) = tso_segs(self.len(), mss);
    }

    /// `tcp_skb_seglen`: a one-segment skb's length, else its segment size.
    pub fn seglen(&self) -> u32 {
        match self.pcount {
            0 | 1 => self.len(),
            _ => self.gso_size,
        }
    }
}

/// `tcp_set_skb_tso_segs`: `(pcount, gso_size)` of an skb of `len` payload bytes cut
/// at `mss`: one segment and no segment size when it fits in one (a SYN or FIN
/// alone too), else as many as it takes, of `mss` bytes.
pub fn tso_segs(len: u32, mss: u32) -> (u32, u32) {
    match len <= mss.max(1) {
        true => (1, 0),
        false => (pcount(len, mss), mss),
    }
}

/// Segments for `len` payload bytes (a SYN or FIN alone still counts one).
pub fn pcount(len: u32, mss: u32) -> u32 {
    len.div_ceil(mss.max(1)).max(1)
}

/// The delivery state an skb carries from its (re)transmission (`tcp_skb_cb.tx`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxRate {
    /// `tx.delivered`: `tp->delivered` when the skb was sent.
    pub delivered: u64,
    /// `tx.delivered_mstamp`: when `tp->delivered` last grew before the send; `None`
    /// once the skb was SACKed and counted (Linux zeroes it), or for an skb never
    /// stamped.
    pub delivered_mstamp: Option<Instant>,
    /// `tx.first_tx_mstamp`: start of the send phase the skb belongs to.
    pub first_tx_mstamp: Instant,
    /// `tx.is_app_limited`: sent while the application left a bubble in the pipe.
    pub is_app_limited: bool,
}

/// The most recently sent skb among those one ACK delivered: the start of the
/// sample (what `tcp_rate_skb_delivered` keeps in `struct rate_sample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveredSkb {
    /// Its snapshot from the last transmission.
    pub tx: TxRate,
    /// Its last transmission time (`skb_mstamp_ns`).
    pub tx_time: Instant,
    /// Its end (`end_seq`), to order skbs sent at the same instant.
    pub end_seq: u64,
    /// It had been retransmitted (`TCPCB_RETRANS`).
    pub is_retrans: bool,
}

impl DeliveredSkb {
    /// The one sent later of `a` and `b` (`tcp_skb_sent_after`).
    pub fn later(a: Option<DeliveredSkb>, b: Option<DeliveredSkb>) -> Option<DeliveredSkb> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if (y.tx_time, y.end_seq) > (x.tx_time, x.end_seq) {
                y
            } else {
                x
            }),
            (x, None) => x,
            (None, y) => y,
        }
    }
}

/// `tcp_rate_skb_delivered` for one skb: keeps in `acc` the most recently sent of
/// the skbs delivered by this ACK. Skbs already counted when SACKed are skipped.
pub fn skb_delivered(acc: &mut Option<DeliveredSkb>, s: &Skb) {
    if s.tx.delivered_mstamp.is_none() {
        return;
    }
    let d = DeliveredSkb {
        tx: s.tx,
        tx_time: s.tx_time,
        end_seq: s.end_seq,
        is_retrans: s.has(SACKED_RETRANS | EVER_RETRANS),
    };
    *acc = DeliveredSkb::later(*acc, Some(d));
}

#[cfg(test)]
impl Skb {
    /// A sent skb of `len` zero bytes at `seq` in `pcount` segments, sent at
    /// `tx_time`, with no flags or scoreboard bits.
    pub(crate) fn sent_for_test(seq: u64, len: usize, pcount: u32, tx_time: Instant) -> Skb {
        Skb {
            seq,
            end_seq: seq + len as u64,
            data: bytes::Bytes::from(vec![0u8; len]).into(),
            flags: 0,
            sacked: 0,
            pcount,
            gso_size: if pcount > 1 {
                (len as u32).div_ceil(pcount)
            } else {
                0
            },
            tx_time,
            truesize: len as u32 + crate::tcp::consts::SKB_OVERHEAD,
            tx: Default::default(),
            fclone: 0,
            zc: None,
            uncharged: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tcp_fragment + tcp_skb_fragment_eor: the record end, PSH and FIN stay with
    /// the second part; the first part may then be collapsed into.
    #[test]
    fn split_moves_eor_to_the_second_part() {
        let mut a = Skb {
            seq: 1,
            end_seq: 1001,
            data: bytes::Bytes::from(vec![0u8; 1000]).into(),
            flags: FLAG_EOR | FLAG_PSH,
            sacked: 0,
            pcount: 2,
            gso_size: 500,
            tx_time: Instant(0),
            truesize: 1000 + SKB_OVERHEAD,
            tx: Default::default(),
            fclone: 0,
            zc: None,
            uncharged: 0,
        };
        let b = a.split_off(501, 500);
        assert!(can_collapse_to(a.flags));
        assert!(!can_collapse_to(b.flags));
        assert_eq!((a.flags, b.flags), (0, FLAG_EOR | FLAG_PSH));
    }

    #[test]
    fn later_skb_wins_by_time_then_sequence() {
        let mk = |t: u64, e: u64| DeliveredSkb {
            tx: TxRate::default(),
            tx_time: Instant(t),
            end_seq: e,
            is_retrans: false,
        };
        let a = Some(mk(5, 100));
        assert_eq!(DeliveredSkb::later(a, Some(mk(4, 200))), a);
        assert_eq!(DeliveredSkb::later(a, Some(mk(5, 200))), Some(mk(5, 200)));
        assert_eq!(DeliveredSkb::later(None, a), a);
    }
}

//! `SOF_TIMESTAMPING_OPT_STATS` (tcp.c `tcp_get_timestamping_opt_stats`): with
//! `SOF_TIMESTAMPING_OPT_TSONLY`, each transmit timestamp report carries the
//! connection's statistics at that moment as netlink attributes (`TCP_NLA_*`), the
//! report's payload and its `SCM_TIMESTAMPING_OPT_STATS` control message
//! (net/core/skbuff.c `__skb_tstamp_tx`, net/socket.c `__sock_recv_timestamp`).

use super::sock::Tcb;
pub use super::sock_errqueue::OptStats;
use crate::time::Instant;

/// The `TCP_NLA_*` attribute types (include/uapi/linux/tcp.h).
pub mod nla {
    /// `TCP_NLA_BUSY`: time busy sending data, in µs (u64).
    pub const BUSY: u16 = 1;
    /// `TCP_NLA_RWND_LIMITED`: time limited by the receive window, in µs (u64).
    pub const RWND_LIMITED: u16 = 2;
    /// `TCP_NLA_SNDBUF_LIMITED`: time limited by the send buffer, in µs (u64).
    pub const SNDBUF_LIMITED: u16 = 3;
    /// `TCP_NLA_DATA_SEGS_OUT`: data segments sent, retransmissions included (u64).
    pub const DATA_SEGS_OUT: u16 = 4;
    /// `TCP_NLA_TOTAL_RETRANS`: data segments retransmitted (u64).
    pub const TOTAL_RETRANS: u16 = 5;
    /// `TCP_NLA_PACING_RATE`: bytes per second (u64).
    pub const PACING_RATE: u16 = 6;
    /// `TCP_NLA_DELIVERY_RATE`: bytes per second (u64).
    pub const DELIVERY_RATE: u16 = 7;
    /// `TCP_NLA_SND_CWND` (u32).
    pub const SND_CWND: u16 = 8;
    /// `TCP_NLA_REORDERING` (u32).
    pub const REORDERING: u16 = 9;
    /// `TCP_NLA_MIN_RTT`, in µs (u32).
    pub const MIN_RTT: u16 = 10;
    /// `TCP_NLA_RECUR_RETRANS`: `icsk_retransmits` (u8).
    pub const RECUR_RETRANS: u16 = 11;
    /// `TCP_NLA_DELIVERY_RATE_APP_LMT` (u8).
    pub const DELIVERY_RATE_APP_LMT: u16 = 12;
    /// `TCP_NLA_SNDQ_SIZE`: `write_seq - snd_una` (u32).
    pub const SNDQ_SIZE: u16 = 13;
    /// `TCP_NLA_CA_STATE` (u8).
    pub const CA_STATE: u16 = 14;
    /// `TCP_NLA_SND_SSTHRESH` (u32).
    pub const SND_SSTHRESH: u16 = 15;
    /// `TCP_NLA_DELIVERED`: segments delivered (u32).
    pub const DELIVERED: u16 = 16;
    /// `TCP_NLA_DELIVERED_CE`: ... of them with a CE mark echoed (u32).
    pub const DELIVERED_CE: u16 = 17;
    /// `TCP_NLA_BYTES_SENT`: data bytes sent, retransmissions included (u64).
    pub const BYTES_SENT: u16 = 18;
    /// `TCP_NLA_BYTES_RETRANS`: data bytes retransmitted (u64).
    pub const BYTES_RETRANS: u16 = 19;
    /// `TCP_NLA_DSACK_DUPS`: segments D-SACKed (u32).
    pub const DSACK_DUPS: u16 = 20;
    /// `TCP_NLA_REORD_SEEN`: reordering events (u32).
    pub const REORD_SEEN: u16 = 21;
    /// `TCP_NLA_SRTT`: smoothed RTT in µs (u32).
    pub const SRTT: u16 = 22;
    /// `TCP_NLA_TIMEOUT_REHASH`: rehashes on RTO (u16).
    pub const TIMEOUT_REHASH: u16 = 23;
    /// `TCP_NLA_BYTES_NOTSENT`: bytes queued, not yet sent (u32).
    pub const BYTES_NOTSENT: u16 = 24;
    /// `TCP_NLA_EDT`: the reported skb's departure time, in ns (u64).
    pub const EDT: u16 = 25;
    /// `TCP_NLA_TTL`: TTL or hop limit of the ACK behind an ACK report (u8).
    pub const TTL: u16 = 26;
    /// `TCP_NLA_REHASH`: `plb_rehash + timeout_rehash` (u32).
    pub const REHASH: u16 = 27;
}

impl OptStats {
    /// The attributes as `nla_put*` lays them out on a 64-bit host with efficient
    /// unaligned access (no `TCP_NLA_PAD`): each a 4-byte header (`nla_len`,
    /// `nla_type`, host order) and its value, padded to 4 bytes, in Linux's order.
    pub fn to_nla(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(256);
        let mut put = |kind: u16, v: &[u8]| {
            b.extend_from_slice(&(4 + v.len() as u16).to_ne_bytes());
            b.extend_from_slice(&kind.to_ne_bytes());
            b.extend_from_slice(v);
            b.resize(b.len().next_multiple_of(4), 0);
        };
        let (busy, rwnd, sndbuf) = self.chrono_us;
        put(nla::BUSY, &busy.to_ne_bytes());
        put(nla::RWND_LIMITED, &rwnd.to_ne_bytes());
        put(nla::SNDBUF_LIMITED, &sndbuf.to_ne_bytes());
        put(nla::DATA_SEGS_OUT, &self.data_segs_out.to_ne_bytes());
        put(nla::TOTAL_RETRANS, &self.total_retrans.to_ne_bytes());
        put(nla::PACING_RATE, &self.pacing_rate.to_ne_bytes());
        put(nla::DELIVERY_RATE, &self.delivery_rate.to_ne_bytes());
        put(nla::SND_CWND, &self.snd_cwnd.to_ne_bytes());
        put(nla::REORDERING, &self.reordering.to_ne_bytes());
        put(nla::MIN_RTT, &self.min_rtt_us.to_ne_bytes());
        put(nla::RECUR_RETRANS, &[self.retransmits]);
        put(nla::DELIVERY_RATE_APP_LMT, &[self.app_limited as u8]);
        put(nla::SND_SSTHRESH, &self.snd_ssthresh.to_ne_bytes());
        put(nla::DELIVERED, &self.delivered.to_ne_bytes());
        put(nla::DELIVERED_CE, &self.delivered_ce.to_ne_bytes());
        put(nla::SNDQ_SIZE, &self.sndq_size.to_ne_bytes());
        put(nla::CA_STATE, &[self.ca_state]);
        put(nla::BYTES_SENT, &self.bytes_sent.to_ne_bytes());
        put(nla::BYTES_RETRANS, &self.bytes_retrans.to_ne_bytes());
        put(nla::DSACK_DUPS, &self.dsack_dups.to_ne_bytes());
        put(nla::REORD_SEEN, &self.reord_seen.to_ne_bytes());
        put(nla::SRTT, &self.srtt_us.to_ne_bytes());
        put(nla::TIMEOUT_REHASH, &self.timeout_rehash.to_ne_bytes());
        put(nla::BYTES_NOTSENT, &self.bytes_notsent.to_ne_bytes());
        put(nla::EDT, &self.edt_ns.to_ne_bytes());
        if let Some(ttl) = self.ttl {
            put(nla::TTL, &[ttl]);
        }
        put(nla::REHASH, &self.rehash.to_ne_bytes());
        b
    }

    /// Length of [`OptStats::to_nla`] (the report's `skb->len`).
    pub fn nla_len(&self) -> u32 {
        // Ten u64 attributes of 12 bytes, the rest 8 bytes each.
        10 * 12 + 16 * 8 + self.ttl.map_or(0, |_| 8)
    }
}

impl Tcb {
    /// `tcp_get_timestamping_opt_stats` for a report on an skb that departed at
    /// `edt` (`skb_mstamp_ns`); `ack_ttl` is the TTL or hop limit of the ACK that
    /// made an `SCM_TSTAMP_ACK` report.
    pub(crate) fn timestamping_opt_stats(
        &self,
        now: Instant,
        edt: Instant,
        ack_ttl: Option<u8>,
    ) -> OptStats {
        let i = self.info(now);
        OptStats {
            chrono_us: (i.busy_time, i.rwnd_limited, i.sndbuf_limited),
            data_segs_out: i.data_segs_out,
            total_retrans: i.total_retrans as u64,
            pacing_rate: i.pacing_rate,
            delivery_rate: i.delivery_rate,
            snd_cwnd: i.snd_cwnd,
            reordering: i.reordering,
            min_rtt_us: i.min_rtt,
            retransmits: i.retransmits,
            app_limited: i.delivery_rate_app_limited,
            snd_ssthresh: i.snd_ssthresh,
            delivered: i.delivered as u32,
            delivered_ce: i.delivered_ce as u32,
            sndq_size: self.write_seq.saturating_sub(self.snd_una) as u32,
            ca_state: self.ca_state as u8,
            bytes_sent: i.bytes_sent,
            bytes_retrans: i.bytes_retrans,
            dsack_dups: i.dsack_dups as u32,
            reord_seen: i.reord_seen,
            srtt_us: i.rtt,
            timeout_rehash: self.timeout_rehash as u16,
            bytes_notsent: self.write_seq.saturating_sub(self.snd_nxt) as u32,
            edt_ns: edt.saturating_since(Instant::ZERO).as_nanos() as u64,
            ttl: ack_ttl,
            rehash: self.timeout_rehash,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of Linux 6.18's attributes: order, types, lengths, padding.
    #[test]
    fn attributes_in_linux_order_and_sizes() {
        let s = OptStats {
            chrono_us: (50_000, 0, 0),
            data_segs_out: 1,
            snd_cwnd: 10,
            retransmits: 2,
            ca_state: 4,
            timeout_rehash: 3,
            ttl: Some(64),
            rehash: 3,
            ..Default::default()
        };
        let b = s.to_nla();
        assert_eq!(b.len() as u32, s.nla_len());
        let mut at = 0;
        let mut seen = Vec::new();
        while at < b.len() {
            let len = u16::from_ne_bytes([b[at], b[at + 1]]) as usize;
            let kind = u16::from_ne_bytes([b[at + 2], b[at + 3]]);
            seen.push((kind, len));
            at += len.next_multiple_of(4);
        }
        let expect: Vec<(u16, usize)> = vec![
            (1, 12),
            (2, 12),
            (3, 12),
            (4, 12),
            (5, 12),
            (6, 12),
            (7, 12),
            (8, 8),
            (9, 8),
            (10, 8),
            (11, 5),
            (12, 5),
            (15, 8),
            (16, 8),
            (17, 8),
            (13, 8),
            (14, 5),
            (18, 12),
            (19, 12),
            (20, 8),
            (21, 8),
            (22, 8),
            (23, 6),
            (24, 8),
            (25, 12),
            (26, 5),
            (27, 8),
        ];
        assert_eq!(seen, expect);
        // Values in host order right after each header; u8 and u16 padded.
        assert_eq!(&b[4..12], &50_000u64.to_ne_bytes());
        assert_eq!(&b[84 + 4..84 + 8], &10u32.to_ne_bytes());
        assert_eq!(&b[108..116], &[5, 0, 11, 0, 2, 0, 0, 0]);
        // Without an ACK, no TTL: 8 bytes fewer.
        let s = OptStats { ttl: None, ..s };
        assert_eq!(s.to_nla().len(), 248);
        assert_eq!(s.nla_len(), 248);
    }
}

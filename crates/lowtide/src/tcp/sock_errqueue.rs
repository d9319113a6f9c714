//! `struct sock`'s error-queue and timestamping parts in a TCP connection, as
//! include/net/sock.h holds them (`sk_error_queue`, `sk_zckey`, `sk_omem_alloc`,
//! `sk_tsflags`, `sk_tskey`), with `struct sock_extended_err`
//! (include/uapi/linux/errqueue.h) and `struct ubuf_info_msgzc`
//! (include/linux/skbuff.h). `Tcb` (tcp/sock.rs) embeds them; tcp/errqueue.rs and
//! tcp/tstamp.rs implement them. This file imports nothing from the rest of tcp/, so
//! it stays outside the tcp/ import circle (issue 24).

use crate::time::Instant;
use std::collections::VecDeque;

// ---- implemented in tcp/tstamp.rs ----

/// One marked byte (`skb_shinfo(skb)->tskey`) and the reports it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// Stream offset of the byte.
    pub(crate) key: u64,
    /// The `SOF_TIMESTAMPING_TX_*` flags of the write that marked it.
    pub(crate) flags: u32,
    /// When the segment holding the byte last left (its skb's `skb_mstamp_ns`).
    pub(crate) edt: Instant,
}

/// A connection's `SO_TIMESTAMPING` state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timestamping {
    /// `sk_tsflags`.
    pub flags: u32,
    /// The receive timestamp bits of `sk_flags` (tcp/rx_tstamp.rs).
    pub rx: RcvTstamp,
    /// `sk_tskey`: the stream offset keys count from (`SOF_TIMESTAMPING_OPT_ID`).
    pub(crate) tskey: u64,
    /// Marked bytes not yet acknowledged, in stream order.
    pub(crate) marks: VecDeque<Mark>,
}

// ---- implemented in tcp/rx_tstamp.rs ----

/// The receive timestamp bits of `sk_flags` (include/net/sock.h `enum sock_flags`),
/// as `SO_TIMESTAMP`, `SO_TIMESTAMPNS` and their `_NEW` forms set them
/// (net/core/sock.c `__sock_set_timestamps`) and `SO_TIMESTAMPING_NEW` sets
/// `tstamp_new` (`sock_set_timestamping`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcvTstamp {
    /// `SOCK_RCVTSTAMP`: reads carry `SCM_TIMESTAMP` or `SCM_TIMESTAMPNS`.
    pub rcvtstamp: bool,
    /// `SOCK_RCVTSTAMPNS`: ... `SCM_TIMESTAMPNS` (`struct timespec`).
    pub rcvtstampns: bool,
    /// `SOCK_TSTAMP_NEW`: the cmsgs are the `_NEW` ones (64-bit time on every
    /// architecture; the same layout on x86-64).
    pub tstamp_new: bool,
    /// `SOCK_TIMESTAMP`: the socket asked for arrival times once
    /// (`sock_enable_timestamp`); only its end clears it.
    pub timestamp: bool,
}

// ---- implemented in tcp/opt_stats.rs ----

/// The statistics of one report, as `tcp_get_timestamping_opt_stats` reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptStats {
    /// `TCP_NLA_BUSY`, `TCP_NLA_RWND_LIMITED`, `TCP_NLA_SNDBUF_LIMITED`
    /// (`tcp_get_info_chrono_stats`), µs.
    pub chrono_us: (u64, u64, u64),
    /// `TCP_NLA_DATA_SEGS_OUT`.
    pub data_segs_out: u64,
    /// `TCP_NLA_TOTAL_RETRANS`.
    pub total_retrans: u64,
    /// `TCP_NLA_PACING_RATE` (`~0` unlimited).
    pub pacing_rate: u64,
    /// `TCP_NLA_DELIVERY_RATE` (`tcp_compute_delivery_rate`).
    pub delivery_rate: u64,
    /// `TCP_NLA_SND_CWND`.
    pub snd_cwnd: u32,
    /// `TCP_NLA_REORDERING`.
    pub reordering: u32,
    /// `TCP_NLA_MIN_RTT` (`tcp_min_rtt`, `~0` before a sample).
    pub min_rtt_us: u32,
    /// `TCP_NLA_RECUR_RETRANS`.
    pub retransmits: u8,
    /// `TCP_NLA_DELIVERY_RATE_APP_LMT`.
    pub app_limited: bool,
    /// `TCP_NLA_SND_SSTHRESH`.
    pub snd_ssthresh: u32,
    /// `TCP_NLA_DELIVERED`.
    pub delivered: u32,
    /// `TCP_NLA_DELIVERED_CE`.
    pub delivered_ce: u32,
    /// `TCP_NLA_SNDQ_SIZE`.
    pub sndq_size: u32,
    /// `TCP_NLA_CA_STATE` (`enum tcp_ca_state`).
    pub ca_state: u8,
    /// `TCP_NLA_BYTES_SENT`.
    pub bytes_sent: u64,
    /// `TCP_NLA_BYTES_RETRANS`.
    pub bytes_retrans: u64,
    /// `TCP_NLA_DSACK_DUPS`.
    pub dsack_dups: u32,
    /// `TCP_NLA_REORD_SEEN`.
    pub reord_seen: u32,
    /// `TCP_NLA_SRTT`, µs.
    pub srtt_us: u32,
    /// `TCP_NLA_TIMEOUT_REHASH`.
    pub timeout_rehash: u16,
    /// `TCP_NLA_BYTES_NOTSENT`.
    pub bytes_notsent: u32,
    /// `TCP_NLA_EDT`: ns on the stack's clock.
    pub edt_ns: u64,
    /// `TCP_NLA_TTL`: only in reports made by an ACK (`ack_skb`).
    pub ttl: Option<u8>,
    /// `TCP_NLA_REHASH`.
    pub rehash: u32,
}

// ---- implemented in tcp/errqueue.rs ----

/// `struct sock_extended_err`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SockExtendedErr {
    /// `ee_errno`.
    pub errno: u32,
    /// `ee_origin` (`SO_EE_ORIGIN_*`).
    pub origin: u8,
    /// `ee_type`.
    pub kind: u8,
    /// `ee_code`.
    pub code: u8,
    /// `ee_info`.
    pub info: u32,
    /// `ee_data`.
    pub data: u32,
}

/// One error-queue entry (an skb on `sk_error_queue`): its `sock_extended_err`,
/// the software timestamp of a timestamp report (`SO_TIMESTAMPING`), and the bytes
/// it carries (a report's copy of the packet, unless `SOF_TIMESTAMPING_OPT_TSONLY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrEntry {
    /// The extended error.
    pub ee: SockExtendedErr,
    /// When the reported event happened (`skb->tstamp`), for `SCM_TIMESTAMPING`.
    pub tstamp: Option<Instant>,
    /// Payload bytes (`skb->len`): a reader's smaller buffer gets `MSG_TRUNC`.
    pub len: u32,
    /// The sender of an ICMP error (`ip_hdr(skb)->saddr`), the offender address
    /// `ip_recv_error` puts after the `sock_extended_err`; none for other origins.
    pub offender: Option<std::net::IpAddr>,
    /// `SOF_TIMESTAMPING_OPT_STATS` with `OPT_TSONLY`: the statistics that are the
    /// report's payload (`SCM_TIMESTAMPING_OPT_STATS`).
    pub opt_stats: Option<OptStats>,
}

/// `struct ubuf_info_msgzc`: the id range of sends whose data is still queued.
/// Its references (`uarg->refcnt`) are the send under way, the skbs holding its
/// data and the device's clones of them; the last one dropped completes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uarg {
    pub(crate) id: u32,
    pub(crate) len: u32,
    pub(crate) bytelen: u64,
    /// Cleared when the data was copied (`SO_EE_CODE_ZEROCOPY_COPIED`).
    pub(crate) zerocopy: bool,
    /// Stream offset just past the range's last byte.
    pub(crate) end_seq: u64,
    /// Packets of its zerocopy data the device still holds (the skb clones whose
    /// references to the pages keep `uarg->refcnt` up until they are freed).
    pub(crate) in_device: u32,
    /// A send holds it (`msg_zerocopy_realloc`'s reference, which
    /// `tcp_sendmsg_locked` drops at its end: `net_zcopy_put`).
    pub(crate) busy: bool,
    /// Skbs took it (`skb_zcopy_set`): they hold it until freed, and they are
    /// the write and retransmit queues' skbs that carry its id (`skb_zcopy`).
    pub(crate) linked: bool,
}

/// A socket's error queue and `MSG_ZEROCOPY` state.
#[derive(Debug, Default)]
pub(crate) struct ErrQueue {
    /// `sk_error_queue`.
    pub(crate) queue: VecDeque<ErrEntry>,
    /// `SOCK_ZEROCOPY` (`SO_ZEROCOPY`).
    pub zerocopy: bool,
    /// `sk_zckey`: the next notification id.
    pub(crate) zckey: u32,
    /// Ranges whose data is still queued, oldest first.
    pub(crate) pending: VecDeque<Uarg>,
    /// `sk_omem_alloc`: the notification skbs of `MSG_ZEROCOPY` ranges
    /// (`sock_omalloc`), from the send that allocates one until it is read or
    /// consumed (`SK_MEMINFO_OPTMEM`).
    pub(crate) omem: u32,
    /// What the timestamp reports and ICMP errors queued by `sock_queue_err_skb`
    /// hold, bounded by `sk_rcvbuf` (Linux charges them to `sk_rmem_alloc`).
    pub(crate) report_mem: u32,
    /// `SOCK_DEAD`: the socket was closed (`sock_orphan`); completions queue
    /// nothing (`__msg_zerocopy_callback`).
    pub(crate) dead: bool,
}

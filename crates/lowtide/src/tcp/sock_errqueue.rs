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
}

/// A connection's `SO_TIMESTAMPING` state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timestamping {
    /// `sk_tsflags`.
    pub flags: u32,
    /// `sk_tskey`: the stream offset keys count from (`SOF_TIMESTAMPING_OPT_ID`).
    pub(crate) tskey: u64,
    /// Marked bytes not yet acknowledged, in stream order.
    pub(crate) marks: VecDeque<Mark>,
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
}

/// `struct ubuf_info_msgzc`: the id range of sends whose data is still queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uarg {
    pub(crate) id: u32,
    pub(crate) len: u32,
    pub(crate) bytelen: u64,
    /// Cleared when the data was copied (`SO_EE_CODE_ZEROCOPY_COPIED`).
    pub(crate) zerocopy: bool,
    /// Stream offset just past the range's last byte.
    pub(crate) end_seq: u64,
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
    /// `sk_omem_alloc`.
    pub(crate) omem: u32,
}

//! `struct inet_connection_sock`'s state in a TCP connection, as
//! include/net/inet_connection_sock.h holds it: the retransmit timer (`icsk_rto`,
//! `icsk_pending`, `icsk_backoff`, ...), the delayed-ACK state (`icsk_ack`) and MTU
//! probing (`icsk_mtup`). `Tcb` (tcp/sock.rs) embeds them; the modules named beside
//! each implement them. This file imports nothing from the rest of tcp/, so it stays
//! outside the tcp/ import circle (issue 24).

use crate::time::{Instant, TimerList};
use core::time::Duration;

// ---- implemented in stack/bind.rs ----

/// What the bind table (`bhash`) knows of a socket holding a local port: the
/// `struct sock_common` fields `inet_bind_conflict` reads (`sk_reuse`,
/// `sk_reuseport`, `sk_ipv6only`) and whether the port's bucket came from
/// `bind(2)` (`tb->fastreuse >= 0`) rather than from `connect`'s own search
/// (`__inet_hash_connect` makes its buckets with `fastreuse = -1`), which
/// `connect`'s search must then pass over. A timewait socket keeps its
/// connection's (`inet_twsk_alloc`: `tw_reuse`, `tw_reuseport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PortBinding {
    /// `SO_REUSEADDR` (`sk_reuse`).
    pub reuse: bool,
    /// `SO_REUSEPORT` (`sk_reuseport`).
    pub reuseport: bool,
    /// `IPV6_V6ONLY` (`sk_ipv6only`).
    pub v6only: bool,
    /// The port was bound (`bind(2)`, `listen(2)`'s autobind, or a listener's
    /// child: `__inet_inherit_port`), not picked by `connect`.
    pub by_bind: bool,
    /// `SO_BINDTODEVICE` / `SO_BINDTOIFINDEX` (`sk_bound_dev_if`, a TIME-WAIT
    /// socket's `tw_bound_dev_if`): the device's ifindex, 0 for none
    /// (stack/netdev.rs).
    pub bound_dev_if: u32,
}

// ---- implemented in tcp/timer.rs ----

/// What the retransmit timer is armed for (`icsk_pending`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Pending {
    /// `ICSK_TIME_RETRANS`.
    Retrans,
    /// `ICSK_TIME_PROBE0`: zero-window probe.
    Probe0,
    /// `ICSK_TIME_REO_TIMEOUT`: RACK's reordering window expires.
    ReoTimeout,
    /// `ICSK_TIME_LOSS_PROBE`: tail loss probe
    /// ([RFC 8985 section 7](https://www.rfc-editor.org/rfc/rfc8985#section-7)).
    LossProbe,
}

/// The retransmit timer's part of `struct inet_connection_sock` (`icsk_rto`,
/// `icsk_pending`, `icsk_backoff`, `icsk_retransmits`, `icsk_probes_out`, ...), named
/// without the `icsk_` prefix; `icsk_ack` and `icsk_mtup` are beside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Icsk {
    /// `icsk_rto`: the retransmission timeout before backoff.
    pub rto: Duration,
    /// `icsk_rto_min`: the socket's own bound (`tcp_rto_min_us`, `TCP_RTO_MIN_US`),
    /// which a locked route `rto_min` overrides (`Tcb::rto_min`, `tcp_rto_min`).
    pub rto_min: Duration,
    /// `icsk_rto_max` (`tcp_rto_max`): the RTO's and every transmit timer's upper
    /// bound, from `net.ipv4.tcp_rto_max_ms` or `TCP_RTO_MAX_MS`.
    pub rto_max: Duration,
    /// `icsk_backoff`: the RTO's (or zero-window probe's) doublings.
    pub backoff: u32,
    /// Consecutive timeouts (`icsk_retransmits`).
    pub retransmits: u8,
    /// `icsk_probes_out`: unanswered zero-window (or keepalive) probes.
    pub probes_out: u8,
    /// When the current run of zero-window probes began (`icsk_probes_tstamp`).
    pub probes_tstamp: Option<Instant>,
    /// `icsk_pending` and `icsk_timeout`: what the retransmit timer is armed for, and
    /// when it fires.
    pub pending: Option<(Pending, Instant)>,
    /// `TCP_USER_TIMEOUT` (`icsk_user_timeout`); zero: off.
    pub user_timeout: Duration,
    /// `icsk_syn_retries` (`TCP_SYNCNT`): SYN (or SYN-ACK) retransmissions before
    /// giving up; 0 for the sysctl's.
    pub syn_retries: u8,
}

// ---- implemented in tcp/delack.rs ----

/// `icsk_ack` of `struct inet_connection_sock`: when and how the owed ACK goes out
/// (delayed ACKs, quick ACKs, pingpong mode), and the receiver's MSS estimate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IcskAck {
    /// `ICSK_ACK_SCHED` in `icsk_ack.pending`: an ACK is owed.
    pub pending: bool,
    /// `icsk_ack.pending`'s `ICSK_ACK_PUSHED` / `ICSK_ACK_PUSHED2` bits.
    pub pushed: u8,
    /// `ICSK_ACK_NOW`: the owed ACK goes out at once, pingpong mode or not.
    pub now: bool,
    /// `ICSK_ACK_NOMEM`: the last in-order segment found no memory: the owed ACK
    /// offers a zero window.
    pub nomem: bool,
    /// `icsk_ack.timeout`: when the delayed-ACK timer fires (`ICSK_ACK_TIMER`: armed).
    pub timeout: Option<Instant>,
    /// `icsk_ack.quick`: quick ACKs left (`tcp_incr_quickack`).
    pub quick: u32,
    /// `icsk_ack.pingpong`: replies sent within `ato` of a receipt.
    pub pingpong: u8,
    /// `icsk_ack.ato`: the delayed-ACK timeout, 0 until the first data.
    pub ato: Duration,
    /// `icsk_ack.last_seg_size`: the last small segment's payload, for
    /// `tcp_measure_rcv_mss`.
    pub last_seg_size: u32,
    /// `icsk_ack.rcv_mss`: the peer's MSS as the receiver sees it
    /// (`tcp_measure_rcv_mss`).
    pub rcv_mss: u32,
    /// `icsk_ack.lrcvtime`: when in-order data last arrived.
    pub lrcvtime: Instant,
    /// `icsk_ack.dst_quick_ack`: the route's `quickack`, no delayed ACKs.
    pub dst_quick_ack: bool,
}

// ---- implemented in tcp/mtu_probe.rs ----

/// `icsk_mtup` and `tp->mtu_probe`: the search and the probe in flight.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mtup {
    /// Probing is on (`tcp_mtu_probing` 2, or 1 after a blackhole).
    pub enabled: bool,
    /// The search's upper bound: the largest MTU not yet known to fail.
    pub search_high: u32,
    /// The largest MTU known to work: the search's lower bound.
    pub search_low: u32,
    /// The MTU of the probe in flight; 0 when none is.
    pub probe_size: u32,
    /// When the search last (re)started.
    pub probe_timestamp: Instant,
    /// The probe's sequence range.
    pub probe_seq_start: u64,
    pub probe_seq_end: u64,
    /// The segment being transmitted is the probe: one segment of its own size.
    pub probe_tx: bool,
}

/// When the connection's `timer_list` timers run on Linux's timer wheel
/// ([`crate::time::timer_list_runs`]: always after their expiry): the retransmit
/// timer (`icsk_retransmit_timer`, for whatever `icsk_pending` holds), the delayed
/// ACK (`icsk_delack_timer`), the keepalive and FIN-WAIT-2 timers (both `sk_timer`
/// in Linux) and the local-drop retry (Linux's retransmit timer). Pacing and SACK
/// compression are hrtimers and run at their time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TimerWheel {
    pub xmit: TimerList,
    pub delack: TimerList,
    pub keepalive: TimerList,
    pub fin_wait2: TimerList,
    pub resource: TimerList,
}

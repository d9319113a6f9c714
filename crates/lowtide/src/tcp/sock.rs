//! `struct tcp_sock`: the state of one connection (its construction, `tcp_init_sock`,
//! is in tcp/init_sock.rs).
//!
//! Like Linux's include/linux/tcp.h, this file holds the connection's state. The
//! sub-structs it embeds sit beside it: `struct inet_connection_sock`'s in
//! tcp/inet_connection_sock.rs, `struct sock`'s error queue and timestamping state in
//! tcp/sock_errqueue.rs, and the member groups tcp.h writes inline in
//! tcp/sock_members.rs; the modules that implement them (named beside each) hold
//! their methods. The modules depend on this file, not the other way round, so the
//! tcp/ import graph has no circle through `Tcb` (issue 24).

use super::cong::{self, CaState, CongestionOps, CwndState};
pub(crate) use super::inet_connection_sock::{Icsk, IcskAck, Mtup, Pending};
use super::ofo::OfoQueue;
use super::rtx::skb::WriteSkb;
use super::rtx::RtxQueue;
use super::seq::Seq;
pub use super::sock_errqueue::{ErrEntry, SockExtendedErr};
pub(crate) use super::sock_errqueue::{ErrQueue, Timestamping};
pub(crate) use super::sock_members::{
    AccEcn, CacheUpdate, Chrono, Chronos, CompSack, Dst, Pacing, Rack, RateState, RcvRttEst, Rtt,
    RttEstimator, RxOpt, SendCall, TfoSock, TimeWaitSock, Undo, Urg,
};
pub use super::sock_members::{Keepalive, TfoClientFail};
use super::{FourTuple, TcpState};
use crate::socket::{SocketError, SocketHandle};
use crate::time::Instant;
use std::collections::VecDeque;

/// What Linux keeps in a request sock that lowtide's child in SYN-RECV needs beside
/// its connection state.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReqState {
    /// `inet_rsk(req)->acked`: a final ACK came and was dropped (deferred or
    /// overflowing).
    pub acked: bool,
    /// The listener's `rskq_defer_accept` (`TCP_DEFER_ACCEPT` in SYN-ACK timeouts).
    pub defer_accept: u8,
    /// The listener's accept queue is full (`sk_acceptq_is_full`), as the stack
    /// found it before this segment.
    pub acceptq_full: bool,
    /// The listener checks an ACK as a SYN cookie (`tcp_syncookies` on, an overflow
    /// within `TCP_SYNCOOKIE_VALID`), as the stack found it before this segment.
    pub cookie_check: bool,
    /// No SYN-ACK timeout has struck the request yet: its listener counts it
    /// `young`.
    pub young: bool,
    /// The listener's SYN queue as the stack found it before this timeout:
    /// requests (`reqsk_queue_len`), young ones (`reqsk_queue_len_young`), and its
    /// backlog (`sk_max_ack_backlog`).
    pub qlen: u32,
    /// See [`ReqState::qlen`].
    pub young_qlen: u32,
    /// See [`ReqState::qlen`].
    pub max_ack_backlog: u32,
    /// `snt_tsval_first` and `snt_tsval_last`: the TSval of the request's first and
    /// latest SYN-ACK (first 0: none sent yet), the range a final ACK's TSecr must
    /// echo (`tcp_synack_options`, Linux 6.15+).
    pub snt_tsval: (u32, u32),
    /// `tcp_rsk(req)->syn_tos`: the DS field (ECN bits included) of the SYN that
    /// made the request (`tcp_conn_request`), or of the ACK that brought a SYN
    /// cookie back (`cookie_tcp_reqsk_init`); `None` on a connection that was no
    /// request. `net.ipv4.tcp_reflect_tos` reflects it ([`Tcb::synack_dsfield`]).
    pub syn_tos: Option<u8>,
    /// A SYN cookie's SYN-ACK or child (`TCP_SYNACK_COOKIE`): its timestamps stay
    /// with TCP-MD5 (the cookie carries its options in them).
    pub cookie: bool,
    /// `req->mss` of a SYN cookie's child: the MSS the cookie decodes to
    /// (`cookie_tcp_reqsk_alloc`), which its window is a multiple of; 0 otherwise.
    pub cookie_mss: u32,
    /// Drops of this input that count on the listener's `sk_drops`, not the
    /// request's (`tcp_v4_rcv`'s `discard_and_relse` with `sk = req->rsk_listener`,
    /// `tcp_listendrop`); the stack moves them there (tcp/drops.rs).
    pub listener_drops: u32,
}

/// One TCP connection. Sequence positions are 64-bit stream offsets: offset 0 is the
/// SYN in each direction (`iss`/`irs` on the wire).
#[derive(Debug)]
pub struct Tcb {
    pub(crate) state: TcpState,
    pub(crate) tuple: FourTuple,
    pub(crate) handle: SocketHandle,
    /// The listener this child came from, until it is accepted.
    pub(crate) parent: Option<u32>,
    /// A child reached ESTABLISHED and belongs in its listener's accept queue.
    pub(crate) accepted_ready: bool,
    pub(crate) in_accept_queue: bool,
    /// What Linux keeps in the request sock of a child in SYN-RECV (tcp/check_req.rs).
    pub(crate) req: ReqState,
    pub(crate) sk_err: Option<SocketError>,
    /// `sk_err_soft`: an ICMP error on a synchronized connection, reported only if
    /// it then times out (`tcp_write_err`) or by `SO_ERROR`; an ACK clears it.
    pub(crate) sk_err_soft: Option<SocketError>,
    /// `IP_RECVERR` (`inet->recverr`) and `IPV6_RECVERR` (`np->recverr`): an ICMP
    /// error on a synchronized connection is hard (`tcp_v4_err`, `tcp_v6_err`:
    /// by the packet's family); the second also lets `ipv6_icmp_error` queue.
    pub(crate) recverr: (bool, bool),
    pub(crate) nodelay: bool,
    /// `TCP_THIN_LINEAR_TIMEOUTS` (`tp->thin_lto`).
    pub(crate) thin_lto: bool,
    /// `TCP_CORK` (`TCP_NAGLE_CORK` in `tp->nonagle`).
    pub(crate) cork: bool,
    /// `pushed_seq`: `write_seq` when PSH was last marked (`tcp_mark_push`).
    pub(crate) pushed_seq: u64,
    /// `tcp_write_xmit`'s `push_one` for the running push: 1 in `tcp_push_one`
    /// (at most one TSO packet, undeferred), else 0.
    pub(crate) push_one: u8,
    /// Busy / rwnd-limited / sndbuf-limited chronographs (`tcp_chrono_*`).
    pub(crate) chrono: Chronos,
    /// `is_rwnd_limited` of the running `tcp_write_xmit`.
    pub(crate) rwnd_limited: bool,
    /// The running push's own `nonagle` (`__tcp_push_pending_frames`' argument:
    /// `TCP_NAGLE_CORK` for `MSG_MORE`, `TCP_NAGLE_PUSH` for `tcp_push_one`, a
    /// forced push or a writer out of buffer, `TCP_NAGLE_OFF` for `tcp_send_fin`);
    /// `None`: the socket's own `tp->nonagle`.
    pub(crate) push_nonagle: Option<u8>,
    /// `TCP_NAGLE_PUSH` in `tp->nonagle`: set by `TCP_NODELAY` on (or `TCP_CORK` off
    /// with it), cleared when the writer starts a new skb (`tcp_skb_entail`).
    pub(crate) nonagle_push: bool,

    // ---- send side (RFC 9293 SND.*) ----
    pub(crate) iss: Seq,
    pub(crate) snd_una: u64,
    pub(crate) snd_nxt: u64,
    /// End of the data the application queued (`write_seq`), FIN included.
    pub(crate) write_seq: u64,
    /// Send window in bytes, scaled (`snd_wnd`).
    pub(crate) snd_wnd: u32,
    pub(crate) snd_wl1: u64,
    pub(crate) max_window: u32,
    /// `snd_sml`: end of the last small segment sent (Minshall's Nagle).
    pub(crate) snd_sml: u64,
    pub(crate) write_queue: VecDeque<WriteSkb>,
    /// Pattern mode: the source of the send stream's bytes, which the skbs then
    /// do not store (`SocketMut::set_payload_source`).
    pub(crate) payload_source: Option<super::rtx::data::SharedSource>,
    /// `tcp_tx_delay`: `TCP_TX_DELAY`, microseconds added to every departure time
    /// (tcp/output.rs).
    pub(crate) tx_delay: u32,
    /// `saved_syn`: the SYN's IP and TCP headers, if the listener saved them
    /// (`TCP_SAVE_SYN`, tcp/saved_syn.rs), until `TCP_SAVED_SYN` takes them.
    pub(crate) saved_syn: Option<Box<[u8]>>,
    /// The error queue and `MSG_ZEROCOPY` state.
    pub(crate) errq: ErrQueue,
    /// A blocking `sendmsg(2)` waiting for send space between its attempts
    /// ([`crate::SendPart`]): what it copied and its zerocopy id.
    pub(crate) send_call: Option<SendCall>,
    pub(crate) rtx: RtxQueue,
    /// A FIN is queued after the data (`TCP_FIN_WAIT1`/`LAST_ACK` pending).
    pub(crate) fin_queued: bool,
    pub(crate) sndbuf: u32,
    pub(crate) sndbuf_locked: bool,
    /// Truesize of both queues (`sk_wmem_queued`).
    pub(crate) wmem_queued: u64,
    /// Of `wmem_queued`, what the write queue's pure zerocopy skbs hold without
    /// a charge to the reserve ([`super::rtx::skb::WriteSkb::uncharged`]; the
    /// retransmit queue keeps its own sum).
    pub(crate) wq_uncharged: u64,
    /// Truesize handed to the device and not completed (`sk_wmem_alloc`).
    pub(crate) wmem_alloc: u64,
    /// The id the last fast clone handed to the device took (tcp/host_queue.rs).
    pub(crate) fclone_next: u32,
    /// Pages reserved for both queues: charged plus `sk_forward_alloc` (tcp/mem.rs).
    pub(crate) mem_pages: u64,
    /// Truesize ever uncharged outside the receive queues (`sk_mem_uncharge` of
    /// write and retransmit queue skbs, of an out-of-order skb merged into the
    /// receive queue's tail): with the queues' own counts, when it moved, the
    /// reserve is reclaimed ([`Tcb::mem_sync`]).
    pub(crate) uncharged: u64,
    /// The sum of those counts at the last reclaim.
    pub(crate) uncharged_seen: u64,
    /// `SOCK_NOSPACE`: a write could not take everything; wake it on space.
    pub(crate) nospace: bool,
    pub(crate) shut_wr: bool,
    /// `TCP_NOTSENT_LOWAT` of this socket; 0 means unset (the sysctl applies).
    pub(crate) notsent_lowat: u32,
    /// Pacing and TCP Small Queues (`tcp/pacing.rs`).
    pub(crate) pace: Pacing,
    /// Writable events delivered (`sk_write_space` wakeups).
    pub(crate) wakeups: u64,

    // ---- receive side (RCV.*) ----
    pub(crate) irs: Seq,
    pub(crate) rcv_nxt: u64,
    /// `rcv_wup`: `rcv_nxt` when the window was last advertised.
    pub(crate) rcv_wup: u64,
    /// Last advertised window in bytes (`rcv_wnd`).
    pub(crate) rcv_wnd: u32,
    /// `window_clamp`: the largest window to offer (`tcp/rcvwin.rs`).
    pub(crate) window_clamp: u32,
    /// `rcv_ssthresh`: the window offered now grows up to this (`tcp_grow_window`).
    pub(crate) rcv_ssthresh: u32,
    /// `scaling_ratio`: payload per truesize of received segments, in 1/256ths.
    pub(crate) scaling_ratio: u8,
    /// `sk_receive_queue`: in-order bytes not yet read.
    pub(crate) rcv_queue: super::rcvqueue::RcvQueue,
    pub(crate) ofo: OfoQueue,
    /// Offset of the peer's FIN, once seen (in or out of order).
    pub(crate) fin_seq: Option<u64>,
    /// The FIN was consumed: reads end with EOF after the queue.
    pub(crate) rcv_shutdown: bool,
    pub(crate) shut_rd: bool,
    /// `close(2)` with `SO_LINGER` and a time left the connection closing: the socket
    /// is no orphan until the linger wait ends (`__tcp_close`'s `adjudge_to_death`).
    pub(crate) adjudge_pending: bool,
    pub(crate) copied_seq: u64,
    pub(crate) rcvbuf: u32,
    pub(crate) rcvbuf_locked: bool,
    /// `rcvq_space`: bytes read per RTT, for autotuning (`tcp_rcv_space_adjust`).
    pub(crate) rcvq_space: u32,
    pub(crate) rcvq_space_seq: u64,
    pub(crate) rcvq_space_time: Instant,
    /// `rcv_rtt_est`: the receiver's own RTT estimate, for autotuning.
    pub(crate) rcv_rtt: RcvRttEst,
    pub(crate) readable_signaled: bool,
    /// `pred_flags`: the window field header prediction expects (`None`: off;
    /// tcp/fastpath.rs).
    pub(crate) pred_wnd: Option<u16>,
    /// `sk_rcvlowat` (`SO_RCVLOWAT`): the bytes that make the socket readable.
    pub(crate) rcvlowat: u32,
    /// How many times `tcp_data_ready` woke the reader (`sk_data_ready`).
    pub(crate) data_ready_count: u64,
    /// D-SACK block to send in the next ACK.
    pub(crate) dsack: Option<(u64, u64)>,

    // ---- options ----
    pub(crate) mss_cache: u32,
    /// `tcp_connect_init`'s `tcp_header_len` counts the timestamp option our SYN
    /// offers (`tcp_timestamps`) until the SYN-ACK's options decide
    /// (`tcp_rcv_synsent_state_process`): the MSS of SYN-SENT leaves its room.
    pub(crate) connect_ts: bool,
    pub(crate) advmss: u32,
    /// `icsk_pmtu_cookie`: the path MTU the MSS was last synced to (the device's MTU
    /// or a smaller one learned from ICMP, `tcp/pmtu.rs`).
    pub(crate) pmtu_cookie: u32,
    /// `IP_TOS` (`inet->tos`): the TOS byte of IPv4 packets, ECN bits aside.
    pub(crate) tos: u8,
    /// `IPV6_TCLASS` (`np->tclass`): the traffic class of IPv6 packets, ECN bits
    /// aside.
    pub(crate) tclass: u8,
    /// The ECN bits of `inet->tos` and `np->tclass`, which TCP keeps its own: what
    /// `tcp_ecn_send` last set (`INET_ECN_xmit` / `INET_ECN_dontxmit`), the IP-ECN
    /// field of the last segment the socket sent. A timewait socket's `tw_tos`
    /// takes them (`inet_twsk_alloc`).
    pub(crate) tos_ecn: u8,
    /// `IP_TTL` (`inet->uc_ttl`) and `IPV6_UNICAST_HOPS` (`np->hop_limit`): the
    /// TTL of IPv4 and the hop limit of IPv6 packets; `None` is -1, the route's
    /// default (`net.ipv4.ip_default_ttl`, `net.ipv6.conf.all.hop_limit`).
    pub(crate) uc_ttl: Option<u8>,
    pub(crate) hop_limit: Option<u8>,
    /// `IP_MINTTL` (`inet->min_ttl`) and `IPV6_MINHOPCOUNT` (`np->min_hopcount`):
    /// segments arriving with a lower TTL / hop limit are dropped; 0 is off.
    pub(crate) min_ttl: u8,
    pub(crate) min_hopcount: u8,
    /// `IP_MTU_DISCOVER` (`inet->pmtudisc`), `IP_PMTUDISC_*` (`tcp/pmtu.rs`).
    pub(crate) pmtudisc: u8,
    /// `IPV6_MTU_DISCOVER` (`np->pmtudisc`, `IPV6_PMTUDISC_*`, the same values as
    /// `IP_PMTUDISC_*`): whether an ICMPv6 packet too big is taken
    /// (`ip6_sk_accept_pmtu`); `IPV6_PMTUDISC_WANT` by default (`inet6_create`).
    pub(crate) pmtudisc6: u8,
    /// The socket is `AF_INET6` (`sk_family`; `SockOptions::family_v6`).
    pub(crate) family_v6: bool,
    /// `TCP_MD5SIG` keys (`tp->md5sig_info`, tcp/md5.rs): segments to a peer with a
    /// key are signed and must arrive signed.
    pub(crate) md5: super::md5::Md5Keys,
    /// The options the handshake agreed and the last segment carried (`tp->rx_opt`).
    pub(crate) rx_opt: RxOpt,
    pub(crate) ts_offset: u32,

    // ---- RTT and timers ----
    /// The RTT estimate (`tcp/timer.rs`).
    pub(crate) rtt: Rtt,
    /// The retransmit timer's state (`tcp/timer.rs`).
    pub(crate) icsk: Icsk,
    /// `SO_KEEPALIVE` and its `TCP_KEEP*` settings.
    pub(crate) keepalive: Keepalive,
    /// When the keepalive timer fires (`sk_timer` of `inet_csk_reset_keepalive_timer`).
    pub(crate) keepalive_at: Option<Instant>,
    /// When we last sent an ACK for an out-of-window or challenged segment
    /// (`last_oow_ack_time`).
    pub(crate) last_oow_ack_time: Option<Instant>,
    /// Ranges `[start, end)` the device queue dropped, to send again.
    pub(crate) local_drops: Vec<(u64, u64)>,
    /// When to retry sending after a local drop if nothing else comes first
    /// (`TCP_RESOURCE_PROBE_INTERVAL`).
    pub(crate) resource_retry_at: Option<Instant>,
    /// `TCP_LINGER2` (`tp->linger2`) in seconds: 0 takes `tcp_fin_timeout`, a
    /// negative value aborts an orphan's FIN-WAIT-2.
    pub(crate) linger2: i32,
    /// SACK compression (`tcp/compsack.rs`).
    pub(crate) comp_sack: CompSack,
    /// `sk_write_pending`: writers waiting for the connection with data to send
    /// (`sk_stream_wait_connect`, `inet_wait_for_connect`'s write bias).
    pub(crate) write_pending: u32,
    /// `ecn_flags`: `TCP_ECN_OK` (`TCP_ECN_MODE_RFC3168`), `_QUEUE_CWR`,
    /// `_DEMAND_CWR`, `_SEEN`, `TCP_ECN_MODE_ACCECN` (`tcp/ecn.rs`).
    pub(crate) ecn_flags: u8,
    /// Accurate ECN's handshake state and receiver counters (`tcp/ecn.rs`).
    pub(crate) accecn: AccEcn,
    /// The ECN field of the segment being processed (`TCP_SKB_CB(skb)->ip_dsfield`).
    pub(crate) rx_ip_ecn: u8,
    /// TTL or hop limit of the segment being processed (`TCP_NLA_TTL`'s
    /// `tcp_skb_ttl_or_hop_limit(ack_skb)`).
    pub(crate) rx_ttl: u8,
    /// The IP packet length of the segment being processed (its buffer's size, for
    /// [`crate::tcp::skbuff::RxAlloc::Tun`]).
    pub(crate) rx_pkt_len: u32,
    /// `max(1, gso_segs)` of the segment being processed, what `sk_drops_skbadd`
    /// adds when it is dropped (tcp/drops.rs).
    pub(crate) rx_segs: u32,
    /// `sk_drops` (`atomic_t`, an `int`): segments this socket dropped
    /// (tcp/drops.rs); `SO_MEMINFO`'s `SK_MEMINFO_DROPS`.
    pub(crate) sk_drops: i32,
    /// The segment being processed is data that `tcp_rcv_established`'s fast path
    /// queues (`tcp_queue_rcv` on the reserve `sk_forward_alloc` already holds,
    /// without `tcp_try_rmem_schedule`'s checks).
    pub(crate) rx_fast_data: bool,
    /// `delivered_ce`: segments delivered with an ECE ACK (classic ECN), or CE-marked
    /// segments ACE reports (AccECN) (`tcpi_delivered_ce`).
    pub(crate) delivered_ce: u64,
    /// `icsk_ack`: the delayed-ACK state (`tcp/delack.rs`).
    pub(crate) ack: IcskAck,
    /// An orphan's FIN-WAIT-2 timer (Linux's keepalive timer in that state): the
    /// part of `tcp_fin_time` beyond `TCP_TIMEWAIT_LEN`.
    pub(crate) tw_at: Option<Instant>,
    /// The timewait socket `tcp_time_wait` made, for the stack to hash in this
    /// connection's place.
    pub(crate) tw_handoff: Option<Box<TimeWaitSock>>,
    /// When the `timer_list` timers above run on Linux's timer wheel
    /// ([`Tcb::sync_timers`]).
    pub(crate) wheel: super::inet_connection_sock::TimerWheel,
    /// The local port's binding (`icsk_bind_hash`, `sk_reuse`, ...).
    pub(crate) bind: super::inet_connection_sock::PortBinding,
    /// Last data sent (`lsndtime`; `icsk_ack.lrcvtime` is in [`IcskAck`]).
    pub(crate) lsndtime: Instant,
    /// Last acceptable ACK received (`rcv_tstamp`, set by tcp_ack).
    pub(crate) rcv_tstamp: Instant,

    // ---- congestion control and recovery ----
    pub(crate) cw: CwndState,
    /// `snd_cwnd_used`: the most packets out while the window went unfilled.
    pub(crate) snd_cwnd_used: u32,
    /// `snd_cwnd_stamp`: when cwnd last grew, shrank or was filled.
    pub(crate) snd_cwnd_stamp: Instant,
    pub(crate) cc: Box<dyn CongestionOps>,
    pub(crate) ca_state: CaState,
    pub(crate) reordering: u32,
    pub(crate) high_seq: u64,
    pub(crate) prr_delivered: u32,
    pub(crate) prr_out: u32,
    pub(crate) retransmit_hint: u64,
    /// Without SACK, Linux's `sacked_out`: duplicate ACKs counted as SACKed
    /// segments (`tcp_add_reno_sack`, renosack.rs); see [`Tcb::sacked_out`].
    pub(crate) reno_sacked_out: u32,

    // ---- RACK-TLP, F-RTO and undo (recovery.rs, tlp.rs, fastretrans.rs) ----
    /// `tp->rack`.
    pub(crate) rack: Rack,
    /// What undoing a reduction restores, and when it may (`tcp/fastretrans.rs`).
    pub(crate) undo: Undo,
    /// `tp->frto`: F-RTO (RFC 5682) is checking whether this RTO was spurious.
    pub(crate) frto: bool,
    /// F-RTO step 2.b: send new data before retransmitting (`REXMIT_NEW`).
    pub(crate) frto_rexmit_new: bool,
    /// `tcp_ack`'s `rexmit == REXMIT_LOST`: `tcp_fastretrans_alert` asked
    /// `tcp_xmit_recovery` to retransmit what is lost; the push that follows the
    /// ACK takes it. Only this, the reorder timer and `tcp_tsq_write` retransmit:
    /// `__tcp_push_pending_frames` sends new data only.
    pub(crate) rexmit_lost: bool,
    /// `tlp_high_seq`: `snd_nxt` when the outstanding loss probe was sent.
    pub(crate) tlp_high_seq: Option<u64>,
    /// `tlp_retrans`: that probe was a retransmission.
    pub(crate) tlp_retrans: bool,
    /// `reord_seen`: reordering events seen.
    pub(crate) reord_seen: u32,
    /// `is_sack_reneg`: an RTO found the receiver reneging on SACKed data; set until
    /// the connection is Open again (no rate samples meanwhile, `tcp_rate_gen`).
    pub(crate) is_sack_reneg: bool,

    // ---- statistics (tcp_info) ----
    pub(crate) bytes_acked: u64,
    pub(crate) bytes_received: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_retrans: u64,
    pub(crate) total_retrans: u32,
    /// `dsack_dups`: segments D-SACKs reported duplicated, dubious ones included
    /// (`tcp_dsack_seen` ignores D-SACKs once this passes `total_retrans`).
    pub(crate) dsack_dups: u64,
    /// `rcv_ooopack`: segments received out of order (`tcpi_rcv_ooopack`).
    pub(crate) rcv_ooopack: u64,
    /// `total_rto`, `total_rto_recoveries`, `total_rto_time` (ms) and `rto_stamp`
    /// (Linux 6.7, `tcp_update_rto_stats` / `tcp_update_rto_time`).
    pub(crate) total_rto: u32,
    pub(crate) total_rto_recoveries: u32,
    pub(crate) total_rto_time_ms: u64,
    pub(crate) rto_stamp: Option<Instant>,
    /// `sk_txrehash`: `net.core.txrehash` when the socket was made (`inet_create`).
    pub(crate) txrehash: bool,
    /// `sk_txhash`: the transmit hash, the IPv6 flow label's source
    /// (tcp/flowlabel.rs); 0 until a connect or request sets it.
    pub(crate) txhash: u32,
    /// A Fast Open child's request's `txhash` once `tcp_rtx_synack` changed it:
    /// the SYN-ACK's, while the child keeps its own; 0: the same as `txhash`.
    pub(crate) req_txhash: u32,
    /// `np->flow_label`: a label the connection chose (a reflected one); 0: none.
    pub(crate) flow_label: u32,
    /// `IPV6_AUTOFLOWLABEL` if set (`autoflowlabel_set`).
    pub(crate) autoflowlabel: Option<bool>,
    /// `np->repflow`: reflect the peer's flow label (`net.ipv6.flowlabel_reflect`
    /// bit 1 when the socket was made).
    pub(crate) repflow: bool,
    /// `icsk_ack.lrcv_flowlabel`: the label of the last data segment taken.
    pub(crate) lrcv_flowlabel: u32,
    /// `timeout_rehash`: RTOs that rehashed the transmit hash (`tcpi_rehash`).
    pub(crate) timeout_rehash: u32,
    pub(crate) segs_out: u64,
    pub(crate) segs_in: u64,
    pub(crate) data_segs_out: u64,
    pub(crate) data_segs_in: u64,
    pub(crate) delivered: u64,
    /// Delivery-rate sampling (tcp_rate.c, `tcp/rate.rs`).
    pub(crate) rate: RateState,
    pub(crate) rtt_samples: u64,
    pub(crate) rtt_sum_us: u64,
    pub(crate) created: Instant,
    /// TCP Fast Open (`tcp/fastopen.rs`).
    pub(crate) tfo: TfoSock,
    /// `SO_TIMESTAMPING` (`tcp/tstamp.rs`).
    pub(crate) tstamp: Timestamping,
    /// The route (`sk_dst_cache`, `tcp/dst.rs`).
    pub(crate) dst: Dst,
    /// `icsk_ca_dst_locked`: the route's locked `congctl` chose the congestion
    /// control; `TCP_CONGESTION` may not change it.
    pub(crate) ca_dst_locked: bool,
    /// `icsk_mtup`: MTU probing (RFC 4821, `tcp/pmtu.rs`).
    pub(crate) mtup: Mtup,
    /// Urgent data both ways (`tcp/urg.rs`).
    pub(crate) urg: Urg,
}

impl Tcb {
    /// The connection's state.
    pub fn state(&self) -> TcpState {
        self.state
    }

    /// Bytes queued and not yet sent (`notsent`: `write_seq - snd_nxt`).
    pub fn notsent_bytes(&self) -> u64 {
        self.write_seq.saturating_sub(self.snd_nxt)
    }

    /// `tcp_packets_in_flight`: segments believed to be in the network
    /// (RFC 6675 `pipe`).
    pub fn packets_in_flight(&self) -> u32 {
        let r = &self.rtx;
        (r.packets_out + r.retrans_out).saturating_sub(self.sacked_out() + r.lost_out)
    }

    /// The read-only socket view congestion control hooks get (Linux's `sk`).
    pub(crate) fn ca_ctx(&self, now: Instant) -> cong::CaCtx {
        cong::CaCtx {
            now,
            snd_una: self.snd_una,
            snd_nxt: self.snd_nxt,
            lsndtime: self.lsndtime,
            pacing_rate: self.pace.pacing_rate,
            paced: self.pace.pacing_needed || self.pace.pacing_fq,
            in_flight: self.packets_in_flight(),
            delivered: self.delivered,
            delivered_ce: self.delivered_ce,
            mss: self.mss_cache,
        }
    }

    /// Bytes ready for the application.
    pub(crate) fn rcv_queue_len(&self) -> usize {
        self.rcv_queue.len()
    }

    /// `SO_SNDBUF`.
    pub(crate) fn set_sndbuf(&mut self, bytes: u32) {
        self.sndbuf = bytes.saturating_mul(2).max(4608);
        self.sndbuf_locked = true;
    }

    /// `SO_RCVBUF`.
    pub(crate) fn set_rcvbuf(&mut self, bytes: u32) {
        self.rcvbuf = bytes.saturating_mul(2).max(2304);
        self.rcvbuf_locked = true;
    }

    /// Current TSval: a millisecond clock with a per-connection offset
    /// ([RFC 7323 section 5.4](https://www.rfc-editor.org/rfc/rfc7323#section-5.4) and
    /// Linux's `tcp_time_stamp_ts` with `ts_offset`).
    pub(crate) fn tsval(&self, now: Instant) -> u32 {
        (now.as_millis() as u32).wrapping_add(self.ts_offset)
    }

    /// Wire sequence number of send offset `off`.
    pub(crate) fn snd_seq(&self, off: u64) -> Seq {
        super::seq::wrap(off, self.iss)
    }

    /// Wire sequence number of receive offset `off`.
    pub(crate) fn rcv_seq(&self, off: u64) -> Seq {
        super::seq::wrap(off, self.irs)
    }

    /// Send offset of a wire acknowledgment number.
    pub(crate) fn snd_off(&self, s: Seq) -> u64 {
        super::seq::unwrap(s, self.snd_seq(self.snd_una), self.snd_una)
    }

    /// Receive offset of a wire sequence number.
    pub(crate) fn rcv_off(&self, s: Seq) -> u64 {
        super::seq::unwrap(s, self.rcv_seq(self.rcv_nxt), self.rcv_nxt)
    }
}

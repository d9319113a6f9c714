//! The TCP engine, split by role as Linux's is.
//!
//! | module | Linux counterpart |
//! |---|---|
//! | [`sock`] | `struct tcp_sock` |
//! | `init_sock` | tcp.c `tcp_init_sock`: a new connection's defaults |
//! | `inet_connection_sock` | include/net/inet_connection_sock.h: `struct inet_connection_sock`'s retransmit timer (`icsk_rto`, `icsk_pending`, ...), delayed-ACK state (`icsk_ack`) and MTU probing (`icsk_mtup`) as the connection embeds them |
//! | `sock_errqueue` | include/net/sock.h: `struct sock`'s error queue (`sk_error_queue`, `sk_zckey`, `sk_omem_alloc`) and timestamping state (`sk_tsflags`, `sk_tskey`); include/uapi/linux/errqueue.h `struct sock_extended_err`; skbuff.h `struct ubuf_info_msgzc` |
//! | `sock_members` | include/linux/tcp.h: the member groups `struct tcp_sock` writes inline (`rx_opt`, urgent data, chrono, compressed SACK, keepalive, the route's cached values, pacing, undo, rate sampling, RACK, the RTT estimator, AccECN), `struct tcp_timewait_sock` and Fast Open's client state |
//! | [`consts`] | the constants of include/net/tcp.h (and the few from linux/tcp.h, sock.h, skbuff.h, netdevice.h) |
//! | `input` | tcp_input.c: segment input and the state machine: `tcp_rcv_state_process`, `tcp_rcv_synsent_state_process`, `tcp_rcv_established`'s slow path, `tcp_finish_connect`, `tcp_init_transfer`; tcp_output.c `tcp_connect` |
//! | `ack` | tcp_input.c's ACK path: `tcp_ack`, `tcp_ack_update_window`, `tcp_clean_rtx_queue`'s RTT samples, `tcp_newly_delivered`, `tcp_cong_control` |
//! | `data_queue` | tcp_input.c's data path: `tcp_data_queue`, `tcp_ofo_queue`, the connection's side of `tcp_data_queue_ofo`, `tcp_fin`, `tcp_data_ready` |
//! | `sndbuf` | tcp_input.c `tcp_sndbuf_expand`, `tcp_should_expand_sndbuf`, `tcp_new_space`, `tcp_check_space`; stream.c `sk_stream_write_space` |
//! | `fastpath` | tcp_input.c header prediction, `tcp_rcv_established`'s fast path: `pred_flags`, `tcp_fast_path_on`, `tcp_fast_path_check`; the `TcpExtTCPHPHits`, `TCPHPAcks` and `TCPPureAcks` counts |
//! | `ratelimit` | tcp_input.c `tcp_oow_rate_limited`, `tcp_send_challenge_ack` ([RFC 5961 section 7](https://www.rfc-editor.org/rfc/rfc5961#section-7)) |
//! | `delack` | tcp_input.c `__tcp_ack_snd_check` (now or delayed), `tcp_event_data_recv`, quick ACKs; tcp_output.c `tcp_send_delayed_ack` |
//! | `compsack` | tcp_input.c SACK compression: `__tcp_ack_snd_check`, `tcp_sack_compress_send_ack` |
//! | `fastretrans` | tcp_input.c `tcp_fastretrans_alert`: RFC 6675 marking, PRR (RFC 6937), NewReno, undo, `tcp_enter_loss` |
//! | `renosack` | tcp_input.c without SACK: `tcp_add_reno_sack`, `tcp_remove_reno_sacks`, `tcp_check_reno_reordering`, `tcp_limit_reno_sacked` |
//! | `recovery` | tcp_recovery.c: RACK loss detection ([RFC 8985 section 6](https://www.rfc-editor.org/rfc/rfc8985#section-6)), the reorder timer |
//! | `reply` | tcp_ipv4.c `tcp_v4_send_reset` / `tcp_v4_send_ack`, tcp_ipv6.c `tcp_v6_send_reset` / `tcp_v6_send_ack` |
//! | `tlp` | tail loss probes ([RFC 8985 section 7](https://www.rfc-editor.org/rfc/rfc8985#section-7)): tcp_output.c `tcp_schedule_loss_probe`, `tcp_send_loss_probe`; tcp_input.c `tcp_process_tlp_ack` |
//! | [`rtx`] | the retransmit queue (`tcp_rtx_queue`, `tsorted_sent_queue`), SACK processing (`tcp_sacktag_write_queue`), `struct sk_buff` as TCP uses it |
//! | [`ofo`] | tcp_input.c: the out-of-order queue (`tcp_data_queue_ofo`) and the SACK blocks we send |
//! | `rcvqueue` | `sk_receive_queue`: in-order payload held by reference |
//! | [`mem`] | stack-wide TCP memory under `tcp_mem`: sock.c `__sk_mem_schedule`, `__sk_mem_raise_allocated`, `__sk_mem_reduce_allocated`; tcp.c `tcp_enter_memory_pressure`; tcp.h `tcp_out_of_memory` |
//! | [`metrics`] | tcp_metrics.c: the TCP metrics cache, `tcp_update_metrics`, `tcp_init_metrics`' lookup, `tcpm_suck_dst`, the Fast Open client's cookie cache |
//! | [`rmem`] | tcp_input.c: receive memory charged and bounded: `tcp_try_rmem_schedule`, `tcp_prune_queue`, `tcp_collapse`, `tcp_prune_ofo_queue`, `tcp_clamp_window` |
//! | [`skbuff`] | `struct sk_buff` as the receive side charges it: include/linux/skbuff.h `SKB_TRUESIZE`, skbuff.c `skb_try_coalesce`, tun.c `tun_alloc_skb` |
//! | `rcvbuf` | tcp_input.c: receiver RTT estimate, `tcp_rcv_space_adjust` |
//! | `rcvwin` | the receive window: `scaling_ratio`, `tcp_grow_window`, `__tcp_select_window` |
//! | `saved_syn` | `TCP_SAVE_SYN`/`TCP_SAVED_SYN`: tcp_input.c `tcp_reqsk_record_syn`, tcp.c `do_tcp_getsockopt` |
//! | [`fastopen`] | tcp_fastopen.c: the `tcp_fastopen` bits, keys and SipHash cookies, the listener's queue, blackhole detection |
//! | `fastopen_active` | tcp_output.c `tcp_send_syn_data`, tcp_input.c `tcp_rcv_fastopen_synack`, `tcp_fastopen_active_detect_blackhole`, `tcp_fastopen_active_disable_ofo_check` |
//! | `check_req` | a listener's child in its handshake (a request, a Fast Open child): `tcp_check_req`, `embryonic_reset`, `listen_overflow` (`tcp_abort_on_overflow`) |
//! | `fastopen_conn` | a passive Fast Open child: `tcp_fastopen_create_child`, `tcp_fastopen_synack_timer` |
//! | `flowlabel` | IPv6 flow labels and the transmit hash: `ip6_make_flowlabel`, `sk_rethink_txhash`, `tcp_rcv_spurious_retrans`'s repath |
//! | `ecn` | ECN (RFC 3168) and Accurate ECN's handshake and receiver (RFC 9768): include/net/tcp_ecn.h, the ECN parts of tcp_input.c and tcp_output.c |
//! | `accecn` | Accurate ECN's sender (RFC 9768): tcp_input.c `tcp_accecn_process`, `__tcp_accecn_process`, `tcp_accecn_process_option` |
//! | `accecn_opt` | The AccECN option we send (RFC 9768): tcp_output.c `tcp_options_fit_accecn`, the AccECN parts of `tcp_established_options`, `tcp_synack_options`, `tcp_syn_options` and `tcp_options_write` |
//! | `output` | tcp_output.c: `tcp_transmit_skb`, the SYN, ACK/RST, window selection, `tcp_write_wakeup` |
//! | `retransmit` | tcp_output.c: `tcp_xmit_retransmit_queue`, `tcp_retransmit_skb`, `__tcp_retransmit_skb` |
//! | `write_xmit` | tcp_output.c: `tcp_write_xmit` and its tests (`tcp_cwnd_test`, `tcp_snd_wnd_test`), the new-data send (`tcp_event_new_data_sent`), `tcp_check_probe_timer` |
//! | `pacing` | tcp_output.c: pacing rate, EDT, TSO autosizing, TCP Small Queues |
//! | `host_queue` | tcp_output.c `skb_still_in_host_queue`: no retransmission of an skb whose fast clone the device still holds (`skb_fclone_busy`) |
//! | `cwnd` | tcp_output.c: `tcp_cwnd_validate`, `tcp_cwnd_application_limited`, `tcp_cwnd_restart` (RFC 2861) |
//! | `chrono` | tcp_output.c `tcp_chrono_*`: busy, rwnd- and sndbuf-limited time |
//! | `pmtu` | path MTU (RFC 1191, RFC 8201): tcp_ipv4.c `tcp_v4_mtu_reduced`, tcp_output.c `tcp_sync_mss`, `tcp_simple_retransmit`, tcp_input.c `tcp_non_congestion_loss_retransmit` |
//! | `icmp_err` | an ICMP error on a connection (once src/stack/icmp.rs has found it): the end of tcp_ipv4.c `tcp_v4_err` and tcp_ipv6.c `tcp_v6_err`, hard and soft errors, `tcp_ld_RTO_revert` ([RFC 6069](https://www.rfc-editor.org/rfc/rfc6069)) |
//! | `mtu_probe` | MTU probing (RFC 4821, `net.ipv4.tcp_mtu_probing`): tcp_output.c `tcp_mtu_probe`, `tcp_mtup_init`; tcp_input.c `tcp_mtup_probe_success`/`_failed`; tcp_timer.c `tcp_mtu_probing` |
//! | `nagle` | tcp_output.c: Nagle with Minshall's variant (`tcp_nagle_test`, `tcp_nagle_check`, `tcp_minshall_check`), `tcp_mss_split_point`, the `nonagle` bits of a push |
//! | `dst` | the connection's route (`sk_dst_cache`) and its metrics: `tcp_connect_init`, `tcp_openreq_init_rwin`, `tcp_ca_dst_init`, `tcp_init_cwnd`, `tcp_rto_min`, `__sk_dst_check`; `tcp_init_metrics`, `tcp_update_metrics` |
//! | `validate` | tcp_input.c `tcp_validate_incoming`, `tcp_sequence`, PAWS, `tcp_reset`, `tcp_send_dupack` |
//! | `timer` | tcp_timer.c: RTO, delayed ACK, zero-window probe; tcp_minisocks.c `tcp_time_wait` |
//! | [`disconnect`] | tcp.c `tcp_write_queue_purge` and what `tcp_disconnect` leaves of a connection |
//! | `deathrow` | the caps on sockets the application let go: orphans (`tcp_too_many_orphans`, `tcp_check_oom`, `tcp_out_of_resources`) and TIME-WAIT sockets (`tcp_max_tw_buckets` in `tcp_time_wait`) |
//! | `drops` | `sk_drops` as Linux 6.18 counts it (`SK_MEMINFO_DROPS`): `tcp_drop_reason`'s `sk_drops_skbadd` by `max(1, gso_segs)`, what counts and what a socket consumes uncounted; the stack's side (`discard_and_relse`, `tcp_listendrop`, a request's drops on its listener) is stack/drops.rs |
//! | `minisocks` | tcp_minisocks.c: the timewait socket (`tcp_timewait_state_process`, `tcp_twsk_unique`), inet_timewait_sock.c |
//! | [`errqueue`] | the socket error queue (`sk_error_queue`) and `MSG_ZEROCOPY` completions: skbuff.c `msg_zerocopy_*`, sock.c `sock_dequeue_err_skb` |
//! | [`tstamp`] | `SO_TIMESTAMPING` transmit reports: tcp.c `tcp_tx_timestamp`, skbuff.c `__skb_tstamp_tx`, tcp_input.c `tcp_ack_tstamp` |
//! | [`opt_stats`] | `SOF_TIMESTAMPING_OPT_STATS`: tcp.c `tcp_get_timestamping_opt_stats` |
//! | [`rx_tstamp`] | receive timestamps: sock.c `sock_set_timestamp`, `sock_enable_timestamp`; tcp.c `tcp_update_recv_tstamps` |
//! | [`keepalive`] | tcp_timer.c `tcp_keepalive_timer`, tcp.c `tcp_set_keepalive` |
//! | [`md5`] | tcp_ipv4.c `tcp_md5_do_add` / `__tcp_md5_do_lookup` / `tcp_v4_md5_hash_skb`, tcp_ipv6.c `tcp_v6_md5_hash_skb` (TCP-MD5, RFC 2385) |
//! | [`rate`] | tcp_rate.c: delivery-rate sampling |
//! | [`cong`] | `tcp_congestion_ops` and `struct rate_sample` (include/net/tcp.h): Reno (tcp_cong.c), CUBIC (tcp_cubic.c), BBR (tcp_bbr.c), DCTCP (tcp_dctcp.c), lib/win_minmax.c |
//! | `urg` | urgent data: tcp.c `tcp_mark_urg`, `tcp_recv_urg`; tcp_input.c `tcp_urg`, `tcp_check_urg`; tcp_output.c's urgent pointer |
//! | `api` | tcp.c: `tcp_sendmsg`, `tcp_close`, `tcp_shutdown`, `tcp_disconnect` |
//! | `recvmsg` | tcp.c: `tcp_recvmsg`, `tcp_read_sock`, `MSG_PEEK`, `tcp_cleanup_rbuf` |
//! | [`sockopt`] | tcp.c: `do_tcp_setsockopt`, `tcp_poll`, `tcp_ioctl` |
//! | `page_frag` | `sk_page_frag`, `skb_page_frag_refill`: payload memory of the write queues |
//! | [`ehash`] | the established connection table (`tcp_hashinfo.ehash`), keyed as `inet_ehashfn` keys its hash with a secret |
//! | `syncookies` | syncookies.c: SYN cookies |
//! | [`info`] | `struct tcp_info` (tcp.c `tcp_get_info`) |
//! | [`seq`] | sequence numbers ([RFC 9293 section 3.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.4)): `before`/`after` at the wire boundary |
//!
//! The listening side (tcp_ipv4.c, tcp_minisocks.c) is in the stack's `listen` module.

pub(crate) mod accecn;
pub(crate) mod accecn_opt;
pub(crate) mod ack;
pub(crate) mod api;
mod check_req;
pub(crate) mod chrono;
pub(crate) mod compsack;
pub mod cong;
pub mod consts;
pub(crate) mod cwnd;
pub(crate) mod data_queue;
pub(crate) mod deathrow;
pub(crate) mod delack;
pub mod disconnect;
pub(crate) mod drops;
pub(crate) mod dst;
pub(crate) mod ecn;
pub mod ehash;
pub mod errqueue;
pub mod fastopen;
pub(crate) mod fastopen_active;
mod fastopen_conn;
pub(crate) mod fastpath;
pub(crate) mod fastretrans;
pub(crate) mod flowlabel;
pub(crate) mod host_queue;
pub(crate) mod icmp_err;
pub(crate) mod inet_connection_sock;
pub mod info;
mod init_sock;
pub(crate) mod input;
pub mod keepalive;
pub mod md5;
pub mod mem;
pub mod metrics;
pub(crate) mod minisocks;
pub(crate) mod mtu_probe;
pub(crate) mod nagle;
pub mod ofo;
pub mod opt_stats;
pub(crate) mod output;
pub(crate) mod pacing;
pub(crate) mod page_frag;
pub(crate) mod pmtu;
pub mod rate;
pub(crate) mod ratelimit;
pub(crate) mod rcvbuf;
pub(crate) mod rcvqueue;
pub(crate) mod rcvwin;
pub(crate) mod recovery;
mod recvmsg;
pub(crate) mod renosack;
pub(crate) mod reply;
pub(crate) mod retransmit;
pub mod rmem;
pub mod rtx;
pub mod rx_tstamp;
pub(crate) mod saved_syn;
pub mod seq;
pub mod skbuff;
pub(crate) mod sndbuf;
pub mod sock;
pub(crate) mod sock_errqueue;
pub(crate) mod sock_members;
pub mod sockopt;
pub(crate) mod syncookies;
pub(crate) mod timer;
pub(crate) mod tlp;
pub mod tstamp;
pub(crate) mod urg;
pub(crate) mod validate;
pub(crate) mod write_xmit;

use crate::config::Config;
use crate::mib::Counters;
use crate::socket::{SocketEvent, Transmit};
use crate::time::Instant;
use serde::Serialize;
use std::collections::VecDeque;
use std::net::SocketAddr;

pub use sock::Tcb;

/// Connection states
/// ([RFC 9293 section 3.3.2](https://www.rfc-editor.org/rfc/rfc9293#section-3.3.2)), with
/// Linux's names in `tcp_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum TcpState {
    /// No connection.
    Closed,
    /// Waiting for SYNs.
    Listen,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the ACK.
    SynRecv,
    /// Open.
    Established,
    /// We closed; our FIN is not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both closed; waiting out old duplicates.
    TimeWait,
}

impl TcpState {
    /// Linux's name (`TCP_ESTABLISHED` → "ESTABLISHED").
    pub fn name(self) -> &'static str {
        match self {
            TcpState::Closed => "CLOSED",
            TcpState::Listen => "LISTEN",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait1 => "FIN_WAIT1",
            TcpState::FinWait2 => "FIN_WAIT2",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::Closing => "CLOSING",
            TcpState::LastAck => "LAST_ACK",
            TcpState::TimeWait => "TIME_WAIT",
        }
    }

    /// States in which a connection has exchanged SYNs.
    pub fn is_synchronized(self) -> bool {
        !matches!(
            self,
            TcpState::Closed | TcpState::Listen | TcpState::SynSent | TcpState::SynRecv
        )
    }
}

/// A connection's addresses, as seen from this stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FourTuple {
    /// Our address and port.
    pub local: SocketAddr,
    /// The peer's address and port.
    pub remote: SocketAddr,
}

/// What a connection needs from its stack while it handles an input.
pub(crate) struct Ctx<'a> {
    pub now: Instant,
    pub cfg: &'a Config,
    pub mib: &'a mut Counters,
    pub out: &'a mut VecDeque<Transmit>,
    pub events: &'a mut VecDeque<SocketEvent>,
    pub ip_id: &'a mut u16,
    /// The stack-wide challenge-ACK budget
    /// ([RFC 5961 section 7](https://www.rfc-editor.org/rfc/rfc5961#section-7)).
    pub challenge: &'a mut ratelimit::ChallengeLimit,
    /// Packet buffers to build into (`Stack::recycle_buffer` refills it).
    pub pool: &'a mut lowtide_wire::pool::BufPool,
    /// Payload memory of the write queues.
    pub frag: &'a mut page_frag::PageFrag,
    /// The device frees packets as it takes them (`skb_orphan`): no TX completion
    /// is charged, so TCP Small Queues never waits on it.
    pub tx_orphan: bool,
    /// The device copies every packet's payload before it sends it
    /// (`skb_orphan_frags_rx`): zerocopy data it carries was copied
    /// ([`crate::Stack::set_tx_orphan_frags`]).
    pub tx_orphan_frags: bool,
    /// Leave payload out of the packets ([`Transmit::payload`]).
    pub tx_apart: bool,
    /// The stack's orphans and TIME-WAIT sockets as this input began.
    pub death_row: DeathRow,
    /// The stack's routes (`tcp/dst.rs` looks a changed route up again).
    pub routes: &'a crate::route::RouteTable,
    /// Stack-wide TCP memory under `tcp_mem` (tcp/mem.rs).
    pub mem: &'a mut mem::TcpMem,
    /// The stack's TCP metrics cache (tcp/metrics.rs).
    pub metrics: &'a mut metrics::TcpMetrics,
    /// `TCP_TX_DELAY` of the socket whose packets these are (`tcp_add_tx_delay`,
    /// `tcp_transmit_time`), in microseconds; 0 for the stack's own replies.
    pub tx_delay_us: u32,
    /// The TOS / traffic class (less ECN) of the segment this input handles, 0
    /// outside one: a reset that answers it carries it (`tcp_v4_send_reset`'s
    /// `arg.tos = ip_hdr(skb)->tos`, `tcp_v6_send_reset`'s `ipv6_get_dsfield`), with
    /// the ECN bits cleared (`ip_send_unicast_reply`, `tcp_v6_send_response`).
    pub rx_tos: u8,
    /// The flow label of the IPv6 packet being taken in (`ip6_flowlabel`); `None`
    /// for IPv4 or outside input.
    pub rx_flowlabel: Option<u32>,
    /// The stack's key for transmit and flow hashes (tcp/flowlabel.rs).
    pub flow_key: (u64, u64),
    /// Net timestamps are wanted on the stack (Linux's `netstamp_needed_key`): a
    /// segment arriving now is stamped (tcp/rx_tstamp.rs).
    pub netstamp: bool,
}

/// Sockets the stack keeps after their application let go: orphans
/// (`tcp_orphan_count`) and TIME-WAIT sockets (`tcp_death_row.tw_refcount`), held
/// under `net.ipv4.tcp_max_orphans` and `net.ipv4.tcp_max_tw_buckets`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeathRow {
    /// Closed by the application, not yet done (TIME-WAIT not included).
    pub orphans: u32,
    /// In TIME-WAIT.
    pub time_wait: u32,
}

/// What a [`Ctx`] borrows, owned, for unit tests: build one, take contexts from it
/// with [`TestStack::ctx`], then read what the connection counted and sent.
#[cfg(test)]
pub(crate) struct TestStack {
    pub mib: Counters,
    pub out: VecDeque<Transmit>,
    pub events: VecDeque<SocketEvent>,
    ip_id: u16,
    challenge: ratelimit::ChallengeLimit,
    pool: lowtide_wire::pool::BufPool,
    frag: page_frag::PageFrag,
    routes: crate::route::RouteTable,
    pub mem: mem::TcpMem,
    pub metrics: metrics::TcpMetrics,
    /// [`Ctx::netstamp`] of the contexts it gives.
    pub netstamp: bool,
}

#[cfg(test)]
impl Default for TestStack {
    /// Nothing counted or sent yet, no challenge-ACK budget.
    fn default() -> TestStack {
        TestStack {
            mib: Counters::default(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            ip_id: 0,
            challenge: ratelimit::ChallengeLimit::new(0),
            pool: Default::default(),
            frag: Default::default(),
            routes: Default::default(),
            mem: Default::default(),
            metrics: Default::default(),
            netstamp: false,
        }
    }
}

#[cfg(test)]
impl TestStack {
    /// A context at `now` (payload inside the packets).
    pub(crate) fn ctx<'a>(&'a mut self, cfg: &'a Config, now: Instant, tx_orphan: bool) -> Ctx<'a> {
        Ctx {
            now,
            cfg,
            mib: &mut self.mib,
            out: &mut self.out,
            events: &mut self.events,
            ip_id: &mut self.ip_id,
            challenge: &mut self.challenge,
            pool: &mut self.pool,
            frag: &mut self.frag,
            tx_orphan,
            tx_orphan_frags: false,
            tx_apart: false,
            death_row: DeathRow::default(),
            routes: &self.routes,
            mem: &mut self.mem,
            metrics: &mut self.metrics,
            tx_delay_us: 0,
            rx_tos: 0,
            rx_flowlabel: None,
            flow_key: (0, 0),
            netstamp: self.netstamp,
        }
    }
}

/// A listening socket: its accept queue and the children still in SYN-RECV.
pub(crate) struct Listener {
    pub local: SocketAddr,
    pub backlog: u32,
    /// Children in SYN-RECV (Linux keeps these as request socks).
    pub pending: u32,
    /// Those of them no SYN-ACK timeout has struck yet (`icsk_accept_queue.young`).
    pub young: u32,
    /// Established children waiting for `accept`.
    pub accept_queue: VecDeque<u32>,
    /// Options the children inherit (`sk_clone_lock`).
    pub opts: sockopt::SockOptions,
    /// When the SYN queue last overflowed into SYN cookies (`tcp_synq_overflow`).
    pub last_overflow: Option<Instant>,
    /// The Fast Open queue (`icsk_accept_queue.fastopenq`).
    pub fastopen: fastopen::FastOpenQueue,
    /// When it was hashed, in listens of its stack: its place in the `lhash2`
    /// bucket (`__inet_hash`).
    pub hash_seq: u64,
    /// `sk_drops` of the listening socket (tcp/drops.rs).
    pub sk_drops: i32,
}

impl Listener {
    pub fn new(local: SocketAddr, backlog: u32) -> Listener {
        Listener {
            local,
            backlog,
            pending: 0,
            young: 0,
            accept_queue: VecDeque::new(),
            opts: sockopt::SockOptions::default(),
            last_overflow: None,
            fastopen: Default::default(),
            hash_seq: 0,
            sk_drops: 0,
        }
    }

    /// syncookies.c `cookie_v4_check`'s first tests: with `tcp_syncookies` on, an
    /// ACK reaching this listener is checked as a cookie unless no overflow came
    /// within `TCP_SYNCOOKIE_VALID` (`tcp_synq_no_recent_overflow`).
    pub fn checks_cookies(&self, now: Instant, tcp_syncookies: u8) -> bool {
        let valid = syncookies::TCP_SYNCOOKIE_VALID;
        let recent = self
            .last_overflow
            .is_some_and(|t| now.saturating_since(t) < valid);
        tcp_syncookies != 0 && recent
    }

    /// `inet_csk_reqsk_queue_is_full`: more children in SYN-RECV than the backlog.
    pub fn syn_queue_full(&self) -> bool {
        self.pending > self.backlog
    }

    /// `sk_acceptq_is_full`: more established children waiting than the backlog.
    pub fn accept_queue_full(&self) -> bool {
        self.accept_queue.len() as u32 > self.backlog
    }

    /// A child died: it leaves the accept queue, or the SYN queue (`young`: no
    /// SYN-ACK timeout struck it, `reqsk_queue_removed`).
    pub fn forget_child(&mut self, index: u32, young: bool) {
        if let Some(pos) = self.accept_queue.iter().position(|&i| i == index) {
            self.accept_queue.remove(pos);
        } else {
            self.leave_syn_queue(young);
        }
    }

    /// A request leaves the SYN queue (`reqsk_queue_removed`).
    pub fn leave_syn_queue(&mut self, young: bool) {
        self.pending = self.pending.saturating_sub(1);
        if young {
            self.young = self.young.saturating_sub(1);
        }
    }
}

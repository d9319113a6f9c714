//! The member groups of `struct tcp_sock` that include/linux/tcp.h writes inline
//! (`rx_opt`, urgent data, chrono, the compressed-SACK state, keepalive, the route's
//! cached values, receiver RTT, pacing, undo, rate sampling, RACK, the RTT
//! estimator, AccECN), the TIME-WAIT sock (`struct tcp_timewait_sock`) and Fast
//! Open's client state. tcp/sock.rs embeds them in `Tcb` and re-exports them; the
//! modules named beside each hold their methods.

use super::seq::Seq;
use super::{FourTuple, TcpState};
use crate::route::Metrics;
use crate::time::Instant;
use core::time::Duration;
use lowtide_wire::tcp::FastOpenOption;
use serde::Serialize;

/// `struct tcp_options_received` (`tp->rx_opt`): what the handshake agreed (SACK,
/// timestamps, window scaling, the MSS bound) and the timestamp state of the last
/// segment; `tcp_parse_options` (tcp/input.rs) fills it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxOpt {
    /// `sack_ok`: both ends sent SACK-permitted.
    pub sack_ok: bool,
    /// `tstamp_ok`: both ends sent timestamps on the SYNs.
    pub tstamp_ok: bool,
    /// `wscale_ok`: both ends sent window scaling.
    pub wscale_ok: bool,
    /// `snd_wscale`: the peer's window scale, applied to the windows it sends.
    pub snd_wscale: u8,
    /// `rcv_wscale`: our window scale, applied to the windows we send.
    pub rcv_wscale: u8,
    /// `ts_recent`: the TSval to echo next.
    pub ts_recent: u32,
    /// `ts_recent_stamp`: when `ts_recent` was taken (PAWS aging).
    pub ts_recent_stamp: Instant,
    /// Linux's `ts_recent_stamp != 0` before the handshake: `tcp_twsk_unique` gave
    /// this connection the `ts_recent` of the TIME-WAIT socket it took the place of
    /// (lowtide's `ts_recent_stamp` starts at the socket's creation instead of 0).
    pub ts_recent_from_tw: bool,
    /// `rcv_tsecr`: the TSecr of the ACK being processed (0: none).
    pub rcv_tsecr: u32,
    /// `user_mss`: `TCP_MAXSEG`; 0 when unset.
    pub user_mss: u32,
    /// `mss_clamp`: the largest MSS the handshake allows (the peer's MSS option,
    /// `TCP_MAXSEG`, the device); the path MTU may lower the MSS below it.
    pub mss_clamp: u32,
}

// ---- implemented in tcp/urg.rs ----

/// Urgent data ([RFC 9293 section 3.8.5](https://www.rfc-editor.org/rfc/rfc9293#section-3.8.5)):
/// `tp->snd_up`, `tp->urg_data`, `tp->urg_seq` and `SOCK_URGINLINE`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Urg {
    /// `snd_up`: the offset just past our last urgent byte; urgent mode while it is
    /// ahead of `snd_una` (`tcp_urg_mode`).
    pub snd_up: u64,
    /// `urg_data`: 0, `TCP_URG_NOTYET`, `TCP_URG_READ`, or `TCP_URG_VALID` with the
    /// urgent byte in the low 8 bits.
    pub data: u16,
    /// `urg_seq`: the offset of the peer's urgent byte.
    pub seq: u64,
    /// `SO_OOBINLINE` (`SOCK_URGINLINE`): the urgent byte stays in the stream.
    pub inline: bool,
}

// ---- implemented in tcp/chrono.rs ----

/// `enum tcp_chrono`; a higher value takes precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) enum Chrono {
    /// `TCP_CHRONO_UNSPEC`: not sending.
    #[default]
    Unspec = 0,
    /// `TCP_CHRONO_BUSY`: actively sending data (non-empty write queue).
    Busy = 1,
    /// `TCP_CHRONO_RWND_LIMITED`: stalled by the peer's receive window.
    RwndLimited = 2,
    /// `TCP_CHRONO_SNDBUF_LIMITED`: stalled by the send buffer.
    SndbufLimited = 3,
}

/// The chronograph state of a connection (`chrono_start`, `chrono_stat`,
/// `chrono_type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Chronos {
    pub(crate) kind: Chrono,
    pub(crate) start_ms: u64,
    pub(crate) stat_ms: [u64; 3],
}

// ---- implemented in tcp/compsack.rs ----

/// State of SACK compression (`tp->compressed_ack` and friends).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CompSack {
    /// `compressed_ack`: ACKs held back since the last one sent.
    pub held: u32,
    /// `compressed_ack_rcv_nxt`: the `rcv_nxt` that `dup_acks` counts for.
    pub rcv_nxt: u64,
    /// `dup_ack_counter`: ACKs sent at once for that `rcv_nxt`.
    pub dup_acks: u8,
    /// `compressed_ack_timer`.
    pub timer_at: Option<crate::time::Instant>,
}

// ---- implemented in tcp/keepalive.rs ----

/// A socket's keepalive settings. `None` fields follow the sysctls
/// `net.ipv4.tcp_keepalive_time`, `tcp_keepalive_intvl` and
/// `tcp_keepalive_probes` (Linux's `keepalive_time_when` and friends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    /// `SO_KEEPALIVE` (`SOCK_KEEPOPEN`).
    pub enabled: bool,
    /// `TCP_KEEPIDLE` (`tp->keepalive_time`): silence before the first probe.
    pub idle: Option<Duration>,
    /// `TCP_KEEPINTVL` (`tp->keepalive_intvl`): time between probes.
    pub interval: Option<Duration>,
    /// `TCP_KEEPCNT` (`tp->keepalive_probes`): unanswered probes before the reset.
    pub probes: Option<u8>,
}

// ---- implemented in tcp/dst.rs ----

/// The route a connection holds: its metrics, the table generation they came from,
/// and `dst_mtu` as of now.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dst {
    pub metrics: Metrics,
    pub generation: u32,
    /// `dst_mtu(dst)`: the route's MTU, a learned path MTU, or the device's.
    pub mtu: u32,
    /// `rt_mtu_locked`: the learned path MTU was raised to `ip_rt_min_pmtu` and
    /// locked (`ip_mtu_locked`: no DF under `IP_PMTUDISC_WANT`).
    pub mtu_locked: bool,
    /// `dst->expires`: when `mtu`, a learned path MTU, stops counting
    /// (`ipv4_mtu` / `ip6_mtu` then give the route's or the device's).
    pub mtu_expires: Option<Instant>,
    /// The socket dropped its route (`sk_dst_reset`, e.g. `IP_TOS` changed): the next
    /// transmission looks it up again.
    pub obsolete: bool,
}

// ---- implemented in tcp/rcvbuf.rs ----

/// `struct rcv_rtt_est`: the receiver's RTT estimate.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RcvRttEst {
    /// `rtt_us`, scaled by 8 (0: no sample yet).
    pub rtt_us8: u32,
    /// `seq`: the window-based sample ends when rcv_nxt reaches this.
    pub seq: u64,
    /// `time`: when the window-based sample began.
    pub time: Option<Instant>,
    /// `rcv_rtt_last_tsecr`: one timestamp sample per echoed TSval.
    pub last_tsecr: u32,
}

// ---- implemented in tcp/minisocks.rs ----

/// `struct tcp_timewait_sock` (with the fields of `inet_timewait_sock` lowtide
/// uses): what a connection keeps in TIME-WAIT, or as an orphan in FIN-WAIT-2.
#[derive(Debug, Clone)]
pub(crate) struct TimeWaitSock {
    /// The connection's addresses (`tw_daddr`, `tw_rcv_saddr`, the ports).
    pub tuple: FourTuple,
    /// `tw_substate`: [`TcpState::FinWait2`] or [`TcpState::TimeWait`].
    pub substate: TcpState,
    /// `tw_rcv_nxt`.
    pub rcv_nxt: Seq,
    /// `tw_snd_nxt`.
    pub snd_nxt: Seq,
    /// `tw_rcv_wnd`: the receive window left when the connection entered it
    /// (`tcp_receive_window`).
    pub rcv_wnd: u32,
    /// `tw_rcv_wscale`.
    pub rcv_wscale: u8,
    /// `tw_ts_recent`.
    pub ts_recent: u32,
    /// `tw_ts_recent_stamp`: when `ts_recent` was taken; `None` without timestamps
    /// (Linux's 0).
    pub ts_recent_stamp: Option<Instant>,
    /// `tw_ts_offset`.
    pub ts_offset: u32,
    /// `tw_tos`, which is also `tw_tclass`: the DS field of its replies: the
    /// socket's `IP_TOS` (`inet_twsk_alloc`), overwritten with its `IPV6_TCLASS`
    /// when the socket is AF_INET6 (`tcp_time_wait`), whatever family its packets
    /// are; with the ECN bits the socket's last segment had (`Tcb::tos_ecn`),
    /// which only its in-window ACKs keep (`TCP_TW_ACK_OOW` clears them).
    pub tos: u8,
    /// `tw_tx_delay`: the connection's `TCP_TX_DELAY` for its replies.
    pub tx_delay: u32,
    /// `tw_txhash`: the connection's transmit hash, which its replies' IPv6 flow
    /// label keeps (tcp/flowlabel.rs).
    pub txhash: u32,
    /// `tw_flowlabel`: the connection's chosen IPv6 flow label (`np->flow_label`).
    pub flowlabel: u32,
    /// `tw_last_oow_ack_time`.
    pub last_oow_ack_time: Option<Instant>,
    /// `tw_entry_stamp`: when the connection entered it (`tcp_tw_reuse_delay`).
    pub entry: Instant,
    /// `tw_timer`'s expiry: the socket goes when the wheel runs it.
    pub expires: Instant,
    /// When the timer wheel runs `tw_timer` ([`crate::time::timer_list_runs`]).
    pub runs: Instant,
    /// `tw_family` is `AF_INET6` (`/proc/net/tcp6`).
    pub family_v6: bool,
    /// `tw_md5_key`: the connection's TCP-MD5 key for its peer, which signs the
    /// replies (`tcp_time_wait_init`).
    pub md5_key: Option<super::md5::Md5Key>,
    /// `tw_reuse`, `tw_reuseport`, `tw_ipv6only` and the port's bucket, the
    /// connection's (`inet_twsk_alloc`, `inet_twsk_hashdance`).
    pub bind: super::inet_connection_sock::PortBinding,
}

// ---- implemented in tcp/fastopen.rs ----

/// `tcpi_fastopen_client_fail` values (`enum tfo_client_fail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum TfoClientFail {
    /// `TFO_STATUS_UNSPEC`.
    #[default]
    Unspec = 0,
    /// `TFO_COOKIE_UNAVAILABLE`: no cookie for the destination yet.
    CookieUnavailable = 1,
    /// `TFO_DATA_NOT_ACKED`: the server acknowledged the SYN but not its data.
    DataNotAcked = 2,
    /// `TFO_SYN_RETRANSMITTED`: the SYN with data was retransmitted.
    SynRetransmitted = 3,
}

/// A connection's Fast Open state (`tcp_sock`'s `fastopen_*` and `syn_*` bits).
#[derive(Debug, Default, Clone)]
pub(crate) struct TfoSock {
    /// `fastopen_rsk`: a passive child that has not finished its handshake; the
    /// listener's slot and generation.
    pub rsk: Option<(u32, u32)>,
    /// `reqsk_fastopen_remove` happened (the listener and whether by a reset): for
    /// the stack to settle the listener's Fast Open queue.
    pub released: Option<((u32, u32), bool)>,
    /// The cookie option of our next SYN or SYN-ACK (retransmissions carry none).
    pub syn_cookie: Option<FastOpenOption>,
    /// `syn_data_acked`: data in the SYN was accepted (`TCPI_OPT_SYN_DATA`).
    pub syn_data_acked: bool,
    /// `syn_fastopen_child`: created by Fast Open (passive).
    pub syn_fastopen_child: bool,
    /// `fastopen_connect`: `TCP_FASTOPEN_CONNECT`.
    pub connect: bool,
    /// `fastopen_no_cookie`: `TCP_FASTOPEN_NO_COOKIE`.
    pub no_cookie: bool,
    /// `fastopen_client_fail` (`tcpi_fastopen_client_fail`).
    pub client_fail: TfoClientFail,
    /// `syn_fastopen`: our SYN carried a Fast Open option.
    pub syn_fastopen: bool,
    /// `syn_fastopen_exp`: ... in the experimental format.
    pub syn_fastopen_exp: bool,
    /// `syn_data`: our SYN carried data.
    pub syn_data: bool,
    /// `syn_fastopen_ch`: a blackhole pause had expired when this socket started.
    pub syn_fastopen_ch: bool,
    /// `tcp_send_syn_data` ran: `mss_clamp` holds its choice until the SYN-ACK, which
    /// keeps it when the SYN-ACK carries no MSS option.
    pub send_syn_data: bool,
    /// `DEFER_CONNECT`: `connect(2)` with `TCP_FASTOPEN_CONNECT` and a cookie: the
    /// SYN waits for the first write.
    pub defer_connect: bool,
    /// What the SYN-ACK taught the cookie cache, for the stack to store.
    pub cache_update: Option<CacheUpdate>,
    /// A blackhole is suspected: the stack pauses active Fast Open.
    pub blackhole: bool,
    /// Active Fast Open worked after a pause (`tcp_fastopen_active_disable_ofo_check`):
    /// the stack resets `tfo_active_disable_times`.
    pub active_worked: bool,
}

// ---- implemented in tcp/fastopen_active.rs ----

/// What a SYN-ACK teaches the cookie cache (`tcp_fastopen_cache_set`'s arguments),
/// for the stack to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheUpdate {
    /// The server's MSS.
    pub mss: u16,
    /// Its cookie, if it sent one we asked for.
    pub cookie: Option<FastOpenOption>,
    /// The SYN with data was presumably lost.
    pub syn_lost: bool,
    /// The request format to try next (1 experimental, 2 option 34).
    pub try_exp: u8,
}

// ---- implemented in tcp/pacing.rs ----

/// Pacing and TCP Small Queues: `struct sock`'s `sk_pacing_rate`,
/// `sk_max_pacing_rate` and `sk_pacing_status`, `struct tcp_sock`'s `tcp_wstamp_ns`,
/// `pacing_timer` and the `TSQ_THROTTLED` bit of `tsq_flags`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    /// `SO_MAX_PACING_RATE` in bytes per second.
    pub max_pacing_rate: u64,
    /// `sk_pacing_rate` in bytes per second (`tcp_update_pacing_rate`).
    pub pacing_rate: u64,
    /// `sk_pacing_status == SK_PACING_NEEDED`: TCP paces internally (asked by BBR,
    /// `SO_MAX_PACING_RATE` or an emulated fq), unless [`Pacing::pacing_fq`].
    pub pacing_needed: bool,
    /// `sk_pacing_status == SK_PACING_FQ`: the device's sch_fq paces the socket
    /// (`fq_classify` stores it over any other status): TCP stamps departure times
    /// and holds nothing.
    pub pacing_fq: bool,
    /// `tcp_wstamp_ns`: earliest departure time of the next packet (EDT).
    pub wstamp: Instant,
    /// The pacing timer is armed for `wstamp`.
    pub pacing_timer: bool,
    /// `TSQ_THROTTLED`: waiting for TX completions.
    pub tsq_throttled: bool,
    /// How often TCP Small Queues throttled this socket.
    pub tsq_throttled_count: u64,
}

// ---- implemented in tcp/fastretrans.rs ----

/// The undo state of `struct tcp_sock`: `undo_marker`, `undo_retrans`,
/// `prior_ssthresh`, `prior_cwnd` and `retrans_stamp`, which `tcp_may_undo`,
/// `tcp_undo_cwnd_reduction` and `tcp_packet_delayed` read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Undo {
    /// `undo_marker`: `snd_una` when the reduction that may be undone began.
    pub marker: Option<u64>,
    /// `undo_retrans`: retransmissions not yet shown spurious by D-SACKs; -1 if none
    /// were sent.
    pub retrans: i32,
    /// `prior_ssthresh`: ssthresh to restore on undo (0: none).
    pub prior_ssthresh: u32,
    /// `prior_cwnd`: cwnd when the reduction began (`tcp_init_cwnd_reduction`), for
    /// PRR and for undo.
    pub prior_cwnd: u32,
    /// `retrans_stamp`: when the first retransmission of the episode (or, in
    /// SYN-SENT, the first SYN) was sent; `tcp_packet_delayed` compares echoed
    /// timestamps with it, and the retransmit timer's give-up time counts from it.
    pub retrans_stamp: Option<Instant>,
}

// ---- implemented in tcp/rate.rs ----

/// The delivery-rate sampling state of `struct tcp_sock` (tcp_rate.c).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateState {
    /// `delivered_mstamp`: when `delivered` last grew.
    pub delivered_mstamp: Instant,
    /// `first_tx_mstamp`: start of the current send phase.
    pub first_tx_mstamp: Instant,
    /// `app_limited`: `delivered` value past which the app-limited bubble is gone;
    /// 0 when not app-limited. A new socket starts with Linux's `~0U`
    /// ([`super::consts::APP_LIMITED_UNTIL_ACKED`]): "a bubble in the pipe until at
    /// least the first ACK", and `rate_app_limited` set (`tcp_init_sock`).
    pub app_limited: u64,
    /// `rate_delivered`/`rate_interval_us`/`rate_app_limited`: the last recorded
    /// sample, for `tcpi_delivery_rate`.
    pub rate_delivered: u64,
    pub rate_interval_us: u64,
    pub rate_app_limited: bool,
}

// ---- implemented in tcp/recovery.rs ----

/// `tp->rack`: RACK's state
/// ([RFC 8985 section 6.1](https://www.rfc-editor.org/rfc/rfc8985#section-6.1)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rack {
    /// `rack.mstamp` (RACK.xmit_ts): send time of the most recently sent skb delivered.
    pub mstamp: Instant,
    /// `rack.end_seq` (RACK.end_seq): its end.
    pub end_seq: u64,
    /// `rack.rtt_us` (RACK.rtt): the RTT measured with it.
    pub rtt_us: u32,
    /// `rack.reo_wnd_steps`: the window in units of min_rtt/4
    /// ([RFC 8985 section 7.2](https://www.rfc-editor.org/rfc/rfc8985#section-7.2)).
    pub reo_wnd_steps: u32,
    /// `rack.reo_wnd_persist`: recoveries left before the steps fall back to 1.
    pub reo_wnd_persist: u8,
    /// `rack.dsack_seen`: a D-SACK arrived since the window was last adjusted.
    pub dsack_seen: bool,
    /// `rack.advanced`: the reference moved since the last loss scan.
    pub advanced: bool,
    /// `rack.last_delivered`: `tp->delivered` when the window was last grown;
    /// D-SACKs are ignored until an skb sent after that is delivered (a round
    /// trip later).
    pub last_delivered: u64,
}

impl Default for Rack {
    fn default() -> Rack {
        Rack {
            mstamp: Instant::ZERO,
            end_seq: 0,
            rtt_us: 0,
            reo_wnd_steps: 1,
            reo_wnd_persist: 0,
            dsack_seen: false,
            advanced: false,
            last_delivered: 0,
        }
    }
}

// ---- implemented in tcp/timer.rs ----

/// The sender's RTT estimate in `struct tcp_sock`: `srtt_us`, `mdev_us`, `rttvar_us`,
/// `rtt_seq` (`tcp_rtt_estimator`) and `rtt_min` (`tcp_update_rtt_min`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtt {
    /// Smoothed RTT (`tp->srtt_us >> 3`, `tcpi_rtt`).
    pub srtt_us: u32,
    /// Mean deviation (`tp->mdev_us >> 2`, `tcpi_rttvar`).
    pub rttvar_us: u32,
    /// `tcp_rtt_estimator`'s scaled state.
    pub est: RttEstimator,
    /// `tcp_min_rtt`: the windowed minimum of `rtt_min` (`u32::MAX` before a sample).
    pub min_rtt_us: u32,
    /// `tp->rtt_min`: the min filter over `tcp_min_rtt_wlen` (`tcp_update_rtt_min`).
    pub rtt_min: super::cong::minmax::MinMax,
}

/// `tcp_rtt_estimator`'s state, scaled as Linux keeps it (Jacobson, SIGCOMM '88,
/// with Linux's mdev rules): `srtt8` is 8 x SRTT, `mdev` 4 x the mean deviation,
/// `mdev_max` its largest value in the current RTT, `rttvar` the deviation the RTO
/// uses (at least `tcp_rto_min`), which decays once per RTT (`rtt_seq`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RttEstimator {
    pub(crate) srtt8: u32,
    pub(crate) mdev: u32,
    pub(crate) mdev_max: u32,
    pub(crate) rttvar: u32,
    pub(crate) rtt_seq: u64,
}

/// The AccECN state of `struct tcp_sock` (Linux 6.18): what the handshake saw and
/// the receiver's counters (tcp/ecn.rs runs them).
#[derive(Debug, Clone, Default)]
pub(crate) struct AccEcn {
    /// `syn_ect_snt`: the IP-ECN field of our SYN or SYN-ACK.
    pub(crate) syn_ect_snt: u8,
    /// `syn_ect_rcv`: the IP-ECN field the peer's SYN or SYN-ACK arrived with.
    pub(crate) syn_ect_rcv: u8,
    /// `prev_ecnfield`: the IP-ECN field of the last segment received.
    pub(crate) prev_ecnfield: u8,
    /// `accecn_fail_mode` (`TCP_ACCECN_*_FAIL_*` bits, `tcpi_accecn_fail_mode`).
    pub(crate) fail_mode: u8,
    /// `received_ce`: CE-marked packets received, pure ACKs too (`tcpi_received_ce`).
    pub(crate) received_ce: u32,
    /// `received_ce_pending`: CE marks not yet fed back (at most 15).
    pub(crate) received_ce_pending: u8,
    /// `received_ecn_bytes`: payload bytes received ECT(1), ECT(0) and CE
    /// (`tcpi_received_e1_bytes`, `_e0_bytes`, `_ce_bytes`).
    pub(crate) received_ecn_bytes: [u32; 3],
    /// Set while `tcp_send_ack_reflect_ect` sends the third ACK: ACE echoes the
    /// SYN-ACK's IP-ECN field instead of the CE count (`TCPHDR_ACE` in `tcp_flags`).
    pub(crate) reflect: bool,
    /// `delivered_ecn_bytes`: payload bytes the peer reports received ECT(1), ECT(0)
    /// and CE (the AccECN option's counters; `tcpi_delivered_e1_bytes`, ...).
    pub(crate) delivered_ecn_bytes: [u32; 3],
    /// `est_ecnfield`: the codepoint (1-3) whose byte counter the option last showed
    /// changing alone; ACKed bytes without an option are counted to it. 0: none.
    pub(crate) est_ecnfield: u8,
    /// `saw_accecn_opt`: `TCP_ACCECN_OPT_NOT_SEEN` (0), `_EMPTY_SEEN`,
    /// `_COUNTER_SEEN`, `_FAIL_SEEN`.
    pub(crate) saw_opt: u8,
    /// `pkts_acked_ewma`: packets delivered per ACK, a moving average (weight 1/64,
    /// fixed point 2^6), which tells thinned ACKs from lost ones.
    pub(crate) pkts_acked_ewma: u16,
    /// `accecn_opt_demand`: how many of our next segments must carry the AccECN
    /// option whatever `net.ipv4.tcp_ecn_option` says (0-2).
    pub(crate) opt_demand: u8,
    /// `accecn_minlen`: the fields the next option needs (1 ECT(1), 2 CE, 3 ECT(0):
    /// the last of order 1 whose byte counter moved since the last option).
    pub(crate) minlen: u8,
    /// `accecn_opt_tstamp`: when we last sent the option (the beacon's clock).
    pub(crate) opt_tstamp: crate::time::Instant,
    /// `accecn_opt_sent_w_dsack`: our last segment carried the option and a D-SACK.
    pub(crate) opt_sent_w_dsack: bool,
    /// `duplicate_sack[0].start_seq`: where the last D-SACK we reported began, as
    /// `tcp_rcv_spurious_retrans` reads it after the D-SACK went out.
    pub(crate) last_dsack_start: Option<u64>,
}

/// A blocking `sendmsg(2)` between its attempts ([`crate::SendPart`]): what it
/// has copied so far and the `MSG_ZEROCOPY` id it holds (`uarg`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendCall {
    pub(crate) zc: Option<u32>,
    pub(crate) copied: usize,
    pub(crate) copied_data: bool,
}

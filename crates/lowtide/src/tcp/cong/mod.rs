//! Congestion control as a table of hooks, shaped like Linux's `tcp_congestion_ops`.
//!
//! The engine owns the window variables ([`CwndState`]) and calls the hooks at the
//! points Linux does. Reno (`tcp_reno_*` in tcp_cong.c) is built in; CUBIC
//! (tcp_cubic.c), BBR (tcp_bbr.c) and DCTCP (tcp_dctcp.c) plug in through the same
//! trait; `minmax` is lib/win_minmax.c (BBR's windowed maximum, the connection's
//! windowed `rtt_min`).

pub mod bbr;
pub mod cubic;
pub mod dctcp;
pub mod minmax;
pub mod reno;

use crate::time::Instant;
use serde::Serialize;

/// `enum tcp_ca_state`: where the sender is in loss recovery (`tcp_info.ca_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum CaState {
    /// `TCP_CA_Open`: nothing suspicious.
    Open,
    /// `TCP_CA_Disorder`: SACKs or duplicate ACKs seen, no loss yet.
    Disorder,
    /// `TCP_CA_CWR`: window reduced for a local congestion signal (ECN, qdisc drop).
    Cwr,
    /// `TCP_CA_Recovery`: fast recovery after a loss.
    Recovery,
    /// `TCP_CA_Loss`: after a retransmission timeout.
    Loss,
}

impl CaState {
    /// Linux's name, as `ss -i` shows it.
    pub fn name(self) -> &'static str {
        match self {
            CaState::Open => "Open",
            CaState::Disorder => "Disorder",
            CaState::Cwr => "CWR",
            CaState::Recovery => "Recovery",
            CaState::Loss => "Loss",
        }
    }
}

/// `enum tcp_ca_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaEvent {
    /// First transmission after idle (`CA_EVENT_TX_START`).
    TxStart,
    /// Window restarted after idle (`CA_EVENT_CWND_RESTART`).
    CwndRestart,
    /// Recovery finished (`CA_EVENT_COMPLETE_CWR`).
    CompleteCwr,
    /// Retransmission timeout (`CA_EVENT_LOSS`).
    Loss,
    /// Data arrived marked CE (`CA_EVENT_ECN_IS_CE`), for a congestion control that
    /// needs ECN ([`CongestionOps::needs_ecn`]).
    EcnIsCe,
    /// Data arrived ECT, not marked (`CA_EVENT_ECN_NO_CE`).
    EcnNoCe,
}

/// `CA_ACK_SLOWPATH`: the ACK took `tcp_ack`'s slow path (lowtide has no header
/// prediction: every ACK does).
pub const CA_ACK_SLOWPATH: u32 = 1 << 0;
/// `CA_ACK_WIN_UPDATE`: the ACK updated the send window.
pub const CA_ACK_WIN_UPDATE: u32 = 1 << 1;
/// `CA_ACK_ECE`: the ACK carried ECE (`FLAG_ECE`).
pub const CA_ACK_ECE: u32 = 1 << 2;

/// The CE state machine of `tcp_dctcp.h` a receiver keeps in its congestion
/// control's private area (`ca->prior_rcv_nxt`, `ca->ce_state`); the engine runs it
/// on `CA_EVENT_ECN_IS_CE`/`CA_EVENT_ECN_NO_CE` (`dctcp_ece_ack_update`), since it
/// sends ACKs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CeAckState {
    /// `prior_rcv_nxt`: `rcv_nxt` after the last data segment seen, stream offset.
    pub prior_rcv_nxt: u64,
    /// `ce_state`: 1 if the last data segment was marked CE.
    pub ce_state: u32,
}

/// `union tcp_cc_info`: what `get_info` reports (`TCP_CC_INFO`, `ss -i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CcInfo {
    /// `struct tcp_dctcp_info` (`INET_DIAG_DCTCPINFO`).
    Dctcp(dctcp::DctcpInfo),
}

/// `struct rate_sample` (include/net/tcp.h, filled by tcp_rate.c: [`super::rate`]):
/// what one ACK says about the delivery rate. Signed fields follow Linux: -1 means
/// "no valid value".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSample {
    /// `prior_mstamp`: start of the interval (`None`: no timing information).
    pub prior_mstamp: Option<Instant>,
    /// `prior_delivered`: `tp->delivered` at `prior_mstamp`.
    pub prior_delivered: u64,
    /// `delivered`: packets delivered over the interval, or -1.
    pub delivered: i64,
    /// `interval_us`: the interval, or -1 if the sample is invalid.
    pub interval_us: i64,
    /// `snd_interval_us`: the send phase.
    pub snd_interval_us: i64,
    /// `rcv_interval_us`: the ACK phase.
    pub rcv_interval_us: i64,
    /// `rtt_us`: RTT of the most recently (S)ACKed packet, or -1.
    pub rtt_us: i64,
    /// `losses`: packets newly marked lost by this ACK.
    pub losses: u32,
    /// `acked_sacked`: packets newly ACKed or SACKed by this ACK.
    pub acked_sacked: u32,
    /// `prior_in_flight`: packets in flight before this ACK.
    pub prior_in_flight: u32,
    /// `is_app_limited`: the sample started in an application-limited period.
    pub is_app_limited: bool,
    /// `is_retrans`: the sample is from a retransmitted skb.
    pub is_retrans: bool,
    /// `is_ack_delayed`: the ACK may have been delayed (`FLAG_ACK_MAYBE_DELAYED`).
    pub is_ack_delayed: bool,
}

impl Default for RateSample {
    /// An empty, invalid sample.
    fn default() -> RateSample {
        RateSample {
            prior_mstamp: None,
            prior_delivered: 0,
            delivered: -1,
            interval_us: -1,
            snd_interval_us: 0,
            rcv_interval_us: 0,
            rtt_us: -1,
            losses: 0,
            acked_sacked: 0,
            prior_in_flight: 0,
            is_app_limited: false,
            is_retrans: false,
            is_ack_delayed: false,
        }
    }
}

impl RateSample {
    /// `delivered / interval_us`, in packets per second, if the sample is valid.
    pub fn rate_pps(&self) -> Option<u64> {
        (self.delivered >= 0 && self.interval_us > 0)
            .then(|| self.delivered as u64 * 1_000_000 / self.interval_us as u64)
    }
}

/// The window variables of a connection that congestion control reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CwndState {
    /// `snd_cwnd`, in segments.
    pub snd_cwnd: u32,
    /// `snd_ssthresh`, in segments.
    pub snd_ssthresh: u32,
    /// `snd_cwnd_cnt`: fractional growth in congestion avoidance.
    pub snd_cwnd_cnt: u32,
    /// `snd_cwnd_clamp`: upper bound of the window.
    pub snd_cwnd_clamp: u32,
    /// `is_cwnd_limited`: the window, not the application, limited the last flight.
    pub is_cwnd_limited: bool,
    /// `max_packets_out`: most packets out in the current window (`tcp_cwnd_validate`).
    pub max_packets_out: u32,
    /// `cwnd_usage_seq`: the window that `max_packets_out` describes ends here.
    pub cwnd_usage_seq: u64,
}

/// Counters a congestion control module bumps in Linux (`NET_INC_STATS` from the
/// module), for the engine to add to the stack's.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CaMib {
    /// A HyStart exit on an ACK train, with the cwnd then
    /// (`TcpExtTCPHystartTrainDetect`, `TcpExtTCPHystartTrainCwnd`).
    pub hystart_train_cwnd: Option<u32>,
    /// A HyStart exit on a delay increase, with the cwnd then
    /// (`TcpExtTCPHystartDelayDetect`, `TcpExtTCPHystartDelayCwnd`).
    pub hystart_delay_cwnd: Option<u32>,
}

impl CaMib {
    /// Adds these to the stack's counters.
    pub fn count(self, mib: &mut crate::mib::Counters) {
        use crate::mib::Mib;
        if let Some(cwnd) = self.hystart_train_cwnd {
            mib.inc(Mib::TcpExtTCPHystartTrainDetect);
            mib.add(Mib::TcpExtTCPHystartTrainCwnd, cwnd as u64);
        }
        if let Some(cwnd) = self.hystart_delay_cwnd {
            mib.inc(Mib::TcpExtTCPHystartDelayDetect);
            mib.add(Mib::TcpExtTCPHystartDelayCwnd, cwnd as u64);
        }
    }
}

/// `TCP_INFINITE_SSTHRESH`.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

impl CwndState {
    /// A window of `initcwnd` segments in slow start.
    pub fn new(initcwnd: u32) -> CwndState {
        CwndState {
            snd_cwnd: initcwnd,
            snd_ssthresh: INFINITE_SSTHRESH,
            snd_cwnd_cnt: 0,
            snd_cwnd_clamp: u32::MAX / 2,
            is_cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
        }
    }
    /// `tcp_is_cwnd_limited`: the window limited the last flight, or in slow start
    /// the window is below twice the largest flight of this window.
    pub fn is_cwnd_limited(&self) -> bool {
        self.is_cwnd_limited || (self.in_slow_start() && self.snd_cwnd < 2 * self.max_packets_out)
    }
    /// `tcp_in_slow_start`.
    pub fn in_slow_start(&self) -> bool {
        self.snd_cwnd < self.snd_ssthresh
    }
    /// `tcp_slow_start`: grow by `acked` up to ssthresh; returns the acks left over.
    pub fn slow_start(&mut self, acked: u32) -> u32 {
        let cwnd = (self.snd_cwnd + acked).min(self.snd_ssthresh);
        let left = acked - (cwnd - self.snd_cwnd).min(acked);
        self.snd_cwnd = cwnd.min(self.snd_cwnd_clamp);
        left
    }
    /// `tcp_cong_avoid_ai`: one segment per `w` segments acknowledged.
    pub fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        if self.snd_cwnd_cnt >= w {
            self.snd_cwnd_cnt = 0;
            self.snd_cwnd += 1;
        }
        self.snd_cwnd_cnt += acked;
        if self.snd_cwnd_cnt >= w {
            let delta = self.snd_cwnd_cnt / w;
            self.snd_cwnd_cnt -= delta * w;
            self.snd_cwnd += delta;
        }
        self.snd_cwnd = self.snd_cwnd.min(self.snd_cwnd_clamp);
    }
}

/// What an ACK told the sender, for `pkts_acked` (`struct ack_sample`).
#[derive(Debug, Clone, Copy)]
pub struct AckSample {
    /// Segments newly acknowledged.
    pub pkts_acked: u32,
    /// RTT sample in microseconds, if this ACK gave one.
    pub rtt_us: Option<u32>,
    /// Bytes delivered since the most recently sent of the skbs this ACK delivered
    /// went out: `mss_cache * (tp->delivered - rs->prior_delivered)`, as
    /// `tcp_clean_rtx_queue` fills it.
    pub in_flight: u32,
    /// When.
    pub now: Instant,
}

/// A read-only view of the socket for hooks that need more than the window: what
/// Linux's hooks read through `sk` (`tcp_jiffies32`/`tcp_mstamp`, `tp->snd_una`,
/// `tp->snd_nxt`, `tp->lsndtime`, `sk->sk_pacing_rate`, `tcp_packets_in_flight`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaCtx {
    /// The current time (`tcp_mstamp`, `tcp_jiffies32`).
    pub now: Instant,
    /// `snd_una` (after this ACK, when called from ACK processing), stream offset.
    pub snd_una: u64,
    /// `snd_nxt`, stream offset.
    pub snd_nxt: u64,
    /// `lsndtime`: when data was last sent.
    pub lsndtime: Instant,
    /// `sk_pacing_rate`, bytes per second.
    pub pacing_rate: u64,
    /// `sk_pacing_status != SK_PACING_NONE`: the socket paces (fq or internal).
    pub paced: bool,
    /// `tcp_packets_in_flight`.
    pub in_flight: u32,
    /// `tp->delivered`: packets delivered so far.
    pub delivered: u64,
    /// `tp->delivered_ce`: packets delivered with an ECE ACK.
    pub delivered_ce: u64,
    /// `tp->mss_cache`.
    pub mss: u32,
}

/// The parts of `struct tcp_sock` a congestion control that sets the window and the
/// pacing rate itself (`cong_control`, BBR) reads and writes.
#[derive(Debug)]
pub struct CcContext<'a> {
    /// The window variables.
    pub cw: &'a mut CwndState,
    /// `sk_pacing_rate` in bytes per second.
    pub pacing_rate: &'a mut u64,
    /// `sk_pacing_status == SK_PACING_NEEDED`: TCP paces internally.
    pub pacing_needed: &'a mut bool,
    /// `tp->app_limited` (0: not app-limited), see [`super::rate`].
    pub app_limited: &'a mut u64,
    /// `sk_max_pacing_rate` in bytes per second.
    pub max_pacing_rate: u64,
    /// `mss_cache`.
    pub mss: u32,
    /// Smoothed RTT in microseconds (0: no sample yet).
    pub srtt_us: u32,
    /// `tcp_min_rtt` in microseconds (`u32::MAX`: no sample yet).
    pub min_rtt_us: u32,
    /// `tp->delivered`: packets delivered so far.
    pub delivered: u64,
    /// `tp->delivered_mstamp`: when `delivered` last grew.
    pub delivered_mstamp: Instant,
    /// `tp->lost`: packets ever marked lost.
    pub lost: u64,
    /// `tcp_packets_in_flight`.
    pub packets_in_flight: u32,
    /// Now (`tcp_mstamp`/`tcp_clock_cache`).
    pub now: Instant,
    /// `tcp_wstamp_ns`: earliest departure time of the next packet.
    pub wstamp: Instant,
    /// `icsk_ca_state`.
    pub ca_state: CaState,
    /// A per-connection pseudo-random value (from the ISS), for randomized choices
    /// that must stay deterministic (`get_random_u32_below` in BBR).
    pub seed: u32,
    /// `tcp_ecn_mode_any(tp)`: ECN (classic or Accurate) was negotiated.
    pub ecn_ok: bool,
    /// `snd_nxt`, stream offset.
    pub snd_nxt: u64,
    /// `rcv_nxt`, stream offset.
    pub rcv_nxt: u64,
    /// `tp->delivered_ce`: packets delivered with an ECE ACK.
    pub delivered_ce: u64,
}

/// `struct tcp_congestion_ops`: the hooks a congestion control implements.
pub trait CongestionOps: core::fmt::Debug + Send {
    /// The name (`tcp_congestion_control` value).
    fn name(&self) -> &'static str;
    /// `ssthresh`: the slow start threshold after a loss.
    fn ssthresh(&mut self, cw: &CwndState) -> u32;
    /// `cong_avoid`: grow the window for `acked` newly acknowledged segments.
    fn cong_avoid(&mut self, cw: &mut CwndState, acked: u32, ctx: &CaCtx);
    /// `set_state`: `tcp_set_ca_state` was called with `new` (at every call, the
    /// same state too); `old` is `icsk_ca_state` still, which DCTCP compares.
    fn set_state(&mut self, _cw: &mut CwndState, _old: CaState, _new: CaState) {}
    /// `cwnd_event`: an event of interest happened.
    fn cwnd_event(&mut self, _cw: &mut CwndState, _ev: CaEvent, _ctx: &CaCtx) {}
    /// `cwnd_event(CA_EVENT_TX_START)` as a congestion control that sets the window
    /// and pacing rate itself (`cong_control`) sees it: with the socket view it may
    /// write. The engine raises it right after [`CongestionOps::cwnd_event`] with
    /// [`CaEvent::TxStart`].
    fn tx_start(&mut self, _ctx: &mut CcContext) {}
    /// The counters the last hook bumped (a module's `NET_INC_STATS`), taken by the
    /// engine after each call that may bump them (`pkts_acked`).
    fn take_mib(&mut self) -> CaMib {
        CaMib::default()
    }
    /// `pkts_acked`: per-ACK sample (RTT, count).
    fn pkts_acked(&mut self, _cw: &mut CwndState, _sample: &AckSample, _ctx: &CaCtx) {}
    /// `undo_cwnd`: the window to return to after a spurious reduction.
    fn undo_cwnd(&mut self, cw: &CwndState, prior_cwnd: u32) -> u32 {
        cw.snd_cwnd.max(prior_cwnd)
    }
    /// `sndbuf_expand`: send buffer multiple of the window (2 unless overridden).
    fn sndbuf_expand(&self) -> u32 {
        2
    }
    /// `init`: the connection is established (`tcp_init_congestion_control`).
    fn init(&mut self, _ctx: &mut CcContext) {}
    /// `TCP_CONG_NEEDS_ECN` (`tcp_ca_needs_ecn`): the socket asks for and accepts
    /// ECN whatever `net.ipv4.tcp_ecn` says, sends every packet ECT (the SYN, ACKs
    /// and retransmissions too: `INET_ECN_xmit` on the socket), and hears of each
    /// received CE or ECT data segment (`CA_EVENT_ECN_IS_CE`/`CA_EVENT_ECN_NO_CE`).
    fn needs_ecn(&self) -> bool {
        false
    }
    /// `in_ack_event`: an ACK was processed (after `tcp_clean_rtx_queue`, as Linux
    /// 6.14+ calls it, so `delivered` and `delivered_ce` count this ACK);
    /// `flags` are `CA_ACK_*`.
    fn in_ack_event(&mut self, _flags: u32, _ctx: &CaCtx) {}
    /// The receiver's CE state machine (`tcp_dctcp.h`), if this congestion control
    /// keeps one.
    fn ce_ack_state(&mut self) -> Option<&mut CeAckState> {
        None
    }
    /// `get_info`: the congestion control's `tcp_cc_info`, if it exports one.
    fn get_info(&self, _ctx: &CaCtx) -> Option<CcInfo> {
        None
    }
    /// A module parameter changed (`/sys/module/tcp_*/parameters/*`): Linux's
    /// modules read theirs at each use, so open connections follow at once.
    fn module_params_changed(&mut self, _cfg: &crate::Config) {}
    /// True if [`CongestionOps::cong_control`] sets cwnd and pacing itself; the engine
    /// then skips PRR and the end-of-recovery window reset, as Linux does when
    /// `ca_ops->cong_control` exists.
    fn has_cong_control(&self) -> bool {
        false
    }
    /// `cong_control`: the per-ACK hook with the delivery-rate sample. Returns true
    /// if it set cwnd and the pacing rate, replacing `cong_avoid` and
    /// `tcp_update_pacing_rate` (Linux's `tcp_cong_control`).
    fn cong_control(&mut self, _ctx: &mut CcContext, _rs: &RateSample) -> bool {
        false
    }
    /// `min_tso_segs`: the fewest segments per TSO packet at `pacing_rate` (bytes
    /// per second), overriding `net.ipv4.tcp_min_tso_segs`; `None` keeps the sysctl.
    fn min_tso_segs(&self, _pacing_rate: u64) -> Option<u32> {
        None
    }
    /// The congestion control's bottleneck bandwidth estimate in bits per second
    /// (BBR's `bbr_bw`, as `tcp_bbr_info.bbr_bw` reports it), if it keeps one.
    fn bw_estimate_bps(&self) -> Option<u64> {
        None
    }
}

/// The congestion control named `name` with the module parameters of `cfg`
/// (CUBIC's and DCTCP's writable ones), if this build has it.
pub fn by_name_cfg(name: &str, cfg: &crate::Config) -> Option<Box<dyn CongestionOps>> {
    match name {
        "cubic" => Some(Box::new(cubic::Cubic::with_params(
            cubic::CubicParams::from_cfg(cfg),
        ))),
        "dctcp" => Some(Box::new(dctcp::Dctcp::new(dctcp::DctcpParams::from_cfg(
            cfg,
        )))),
        _ => by_name(name),
    }
}

/// The congestion control named `name`, if this build has it.
pub fn by_name(name: &str) -> Option<Box<dyn CongestionOps>> {
    match name {
        "reno" => Some(Box::new(reno::Reno)),
        "cubic" => Some(Box::new(cubic::Cubic::new())),
        "bbr" => Some(Box::new(bbr::Bbr::default())),
        "dctcp" => Some(Box::new(dctcp::Dctcp::new(dctcp::DctcpParams::default()))),
        _ => None,
    }
}

impl crate::tcp::Tcb {
    /// `tcp_reinit_congestion_control` (`TCP_CONGESTION`): the new congestion
    /// control, initialized at once unless the socket is closed or listening
    /// (`tcp_init_congestion_control`: `prior_ssthresh` forgotten, `init`; the ECT
    /// the socket sends follows [`CongestionOps::needs_ecn`]).
    pub(crate) fn reinit_congestion_control(&mut self, now: Instant, cc: Box<dyn CongestionOps>) {
        self.cc = cc;
        if !matches!(
            self.state,
            crate::tcp::TcpState::Closed | crate::tcp::TcpState::Listen
        ) {
            self.undo.prior_ssthresh = 0;
            let (cc, mut c) = self.cc_context(now);
            cc.init(&mut c);
        }
    }
}

/// Runs `f` with a [`CcContext`] over `cw` at `now` with (`snd_nxt`, `rcv_nxt`)
/// and `ecn_ok`, everything else empty: for tests of a module's `init`.
#[cfg(test)]
pub(crate) fn with_test_cc_context<R>(
    cw: &mut CwndState,
    now: Instant,
    (snd_nxt, rcv_nxt): (u64, u64),
    ecn_ok: bool,
    f: impl FnOnce(&mut CcContext) -> R,
) -> R {
    let (mut pacing_rate, mut pacing_needed, mut app_limited) = (0, false, 0);
    let mut c = CcContext {
        cw,
        pacing_rate: &mut pacing_rate,
        pacing_needed: &mut pacing_needed,
        app_limited: &mut app_limited,
        max_pacing_rate: u64::MAX,
        mss: 1000,
        srtt_us: 0,
        min_rtt_us: u32::MAX,
        delivered: 0,
        delivered_mstamp: now,
        lost: 0,
        packets_in_flight: 0,
        now,
        wstamp: now,
        ca_state: CaState::Open,
        seed: 0,
        ecn_ok,
        snd_nxt,
        rcv_nxt,
        delivered_ce: 0,
    };
    f(&mut c)
}

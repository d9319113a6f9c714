//! `struct tcp_info` (`getsockopt(TCP_INFO)`), with Linux's field names.

use super::cong::INFINITE_SSTHRESH;
use super::consts::{TCP_INIT_CWND, TCP_MSS_DEFAULT, TCP_TIMEOUT_INIT};
use super::sock::Tcb;
use super::TcpState;
use crate::config::Config;
use crate::time::Instant;
use serde::Serialize;

/// A snapshot of one connection, named as Linux's `struct tcp_info` (times in
/// microseconds unless the name says otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct TcpInfo {
    /// `tcpi_state` as Linux names it ("ESTABLISHED").
    pub state: &'static str,
    /// `tcpi_ca_state` ("Open", "Disorder", "CWR", "Recovery", "Loss").
    pub ca_state: &'static str,
    /// `tcpi_retransmits`: consecutive RTOs.
    pub retransmits: u8,
    /// `tcpi_probes`: zero-window probes without answer.
    pub probes: u8,
    /// `tcpi_backoff`.
    pub backoff: u32,
    /// `tcpi_rto`.
    pub rto: u64,
    /// `tcpi_snd_mss`.
    pub snd_mss: u32,
    /// `tcpi_rcv_mss`.
    pub rcv_mss: u32,
    /// `tcpi_unacked`: segments outstanding.
    pub unacked: u32,
    /// `tcpi_sacked`.
    pub sacked: u32,
    /// `tcpi_lost`.
    pub lost: u32,
    /// `tcpi_retrans`: retransmitted and not yet acknowledged.
    pub retrans: u32,
    /// `tcpi_last_data_sent` (ms ago).
    pub last_data_sent: u64,
    /// `tcpi_last_data_recv` (ms ago).
    pub last_data_recv: u64,
    /// `tcpi_last_ack_recv` (ms ago): the last acceptable ACK (`rcv_tstamp`).
    pub last_ack_recv: u64,
    /// `tcpi_rtt`: smoothed RTT.
    pub rtt: u32,
    /// `tcpi_rttvar`.
    pub rttvar: u32,
    /// `tcpi_snd_ssthresh`.
    pub snd_ssthresh: u32,
    /// `tcpi_snd_cwnd`.
    pub snd_cwnd: u32,
    /// `tcpi_advmss`.
    pub advmss: u32,
    /// `tcpi_reordering`.
    pub reordering: u32,
    /// `tcpi_rcv_space`.
    pub rcv_space: u32,
    /// `tcpi_rcv_ssthresh`: the window offered grows up to this.
    pub rcv_ssthresh: u32,
    /// `tcpi_total_retrans`.
    pub total_retrans: u32,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_bytes_received`.
    pub bytes_received: u64,
    /// `tcpi_segs_out`.
    pub segs_out: u64,
    /// `tcpi_segs_in`.
    pub segs_in: u64,
    /// `tcpi_notsent_bytes`.
    pub notsent_bytes: u64,
    /// `tcpi_min_rtt` (`tcp_min_rtt`: `u32::MAX` before the first RTT sample, as
    /// `tcp_init_sock`'s `minmax_reset(~0U)` leaves it).
    pub min_rtt: u32,
    /// `tcpi_data_segs_in`.
    pub data_segs_in: u64,
    /// `tcpi_data_segs_out`.
    pub data_segs_out: u64,
    /// `tcpi_delivered`.
    pub delivered: u64,
    /// `tcpi_delivered_ce`: delivered with an ECE ACK (RFC 3168), or reported CE
    /// marked by ACE (AccECN, `tcp_accecn_process`).
    pub delivered_ce: u64,
    /// `tcpi_bytes_sent`.
    pub bytes_sent: u64,
    /// `tcpi_bytes_retrans`.
    pub bytes_retrans: u64,
    /// `tcpi_snd_wnd`: the peer's window.
    pub snd_wnd: u32,
    /// `tcpi_rcv_wnd`: our last advertised window.
    pub rcv_wnd: u32,
    /// `sk_sndbuf` (as `ss -m` shows `tb`).
    pub sndbuf: u32,
    /// `sk_rcvbuf` (`rb`).
    pub rcvbuf: u32,
    /// `sk_wmem_queued` (`w`).
    pub wmem_queued: u64,
    /// `sk_wmem_alloc` (`t`): bytes in the device.
    pub wmem_alloc: u64,
    /// Mean of all RTT samples (not in Linux's struct; what `ss` cannot show).
    pub mean_rtt: u32,
    /// `tcpi_pacing_rate` (bytes per second).
    pub pacing_rate: u64,
    /// `tcpi_max_pacing_rate` (bytes per second).
    pub max_pacing_rate: u64,
    /// `sk_rmem_alloc` (`r` in `ss -m`): receive memory.
    pub rmem_alloc: u64,
    /// How often TCP Small Queues throttled the socket (lowtide's own statistic).
    pub tsq_throttled: u64,
    /// Writable events delivered to the application (`sk_write_space` wakeups).
    pub wakeups: u64,
    /// `tcpi_delivery_rate`: the last delivery-rate sample (bytes per second).
    pub delivery_rate: u64,
    /// `tcpi_delivery_rate_app_limited`: that sample was application-limited.
    pub delivery_rate_app_limited: bool,
    /// `tcpi_busy_time`: time spent with data to send (us).
    pub busy_time: u64,
    /// `tcpi_rwnd_limited`: time stalled by the peer's window (us).
    pub rwnd_limited: u64,
    /// `tcpi_sndbuf_limited`: time stalled by the send buffer (us).
    pub sndbuf_limited: u64,
    /// `tcpi_options`: `TCPI_OPT_TIMESTAMPS` 1, `TCPI_OPT_SACK` 2, `TCPI_OPT_WSCALE` 4,
    /// `TCPI_OPT_ECN` 8 (negotiated), `TCPI_OPT_ECN_SEEN` 16 (the peer sent ECT).
    /// `TCPI_OPT_SYN_DATA` 32 (data in our SYN or the peer's was acknowledged),
    /// `TCPI_OPT_TFO_CHILD` 128 (a passive Fast Open child).
    pub options: u8,
    /// `tcpi_fastopen_client_fail`: why active Fast Open failed (0-3,
    /// [`crate::tcp::fastopen::TfoClientFail`]).
    pub fastopen_client_fail: u8,
    /// `tcpi_snd_wscale`.
    pub snd_wscale: u8,
    /// `tcpi_rcv_wscale`.
    pub rcv_wscale: u8,
    /// `tcpi_ato`: the delayed-ACK timeout (`icsk_ack.ato`, at most `tcp_delack_max`).
    pub ato: u32,
    /// `tcpi_pmtu`: the path MTU.
    pub pmtu: u32,
    /// `tcpi_rcv_rtt`: the receiver's RTT estimate.
    pub rcv_rtt: u32,
    /// `tcpi_reord_seen`.
    pub reord_seen: u32,
    /// `tcpi_dsack_dups`: segments the peer's D-SACKs reported received twice.
    pub dsack_dups: u64,
    /// `tcpi_rcv_ooopack`: segments received out of order.
    pub rcv_ooopack: u64,
    /// `tcpi_total_rto`: RTO timeouts, SYN and SYN-ACK ones included.
    pub total_rto: u32,
    /// `tcpi_total_rto_recoveries`: RTO recoveries, an unfinished one included.
    pub total_rto_recoveries: u32,
    /// `tcpi_total_rto_time`: ms spent in RTO recoveries, an unfinished one
    /// included.
    pub total_rto_time: u64,
    /// `tcpi_rehash`: transmit-hash rehashes, `plb_rehash` (no PLB here: 0) plus
    /// `timeout_rehash`.
    pub rehash: u32,
    /// `tcp_bbr_info.bbr_bw`: the congestion control's bottleneck bandwidth
    /// estimate in bytes per second (0 unless it keeps one, as BBR does).
    pub bbr_bw: u64,
    /// `tcpi_received_ce`: CE-marked packets received, pure ACKs too (Linux 6.18
    /// counts them on every connection, AccECN or not).
    #[serde(skip_serializing_if = "is_zero")]
    pub received_ce: u32,
    /// `tcpi_received_e1_bytes`, `tcpi_received_e0_bytes`, `tcpi_received_ce_bytes`:
    /// payload bytes received ECT(1), ECT(0) and CE.
    #[serde(skip_serializing_if = "is_zero")]
    pub received_e1_bytes: u32,
    /// See `received_e1_bytes`.
    #[serde(skip_serializing_if = "is_zero")]
    pub received_e0_bytes: u32,
    /// See `received_e1_bytes`.
    #[serde(skip_serializing_if = "is_zero")]
    pub received_ce_bytes: u32,
    /// `tcpi_delivered_e1_bytes`, `_e0_bytes`, `_ce_bytes`: what the peer's AccECN
    /// option reports delivered (`delivered_ecn_bytes`, `tcp_accecn_process_option`).
    #[serde(skip_serializing_if = "is_zero")]
    pub delivered_e1_bytes: u32,
    /// See `delivered_e1_bytes`.
    #[serde(skip_serializing_if = "is_zero")]
    pub delivered_e0_bytes: u32,
    /// See `delivered_e1_bytes`.
    #[serde(skip_serializing_if = "is_zero")]
    pub delivered_ce_bytes: u32,
    /// `tcpi_accecn_fail_mode`: `TCP_ACCECN_*_FAIL_*` bits.
    #[serde(skip_serializing_if = "is_zero")]
    pub accecn_fail_mode: u32,
    /// `tcpi_accecn_opt_seen` (`saw_accecn_opt`): which AccECN option the peer
    /// sent first, 0 none yet, 1 `TCP_ACCECN_OPT_EMPTY_SEEN`, 2 `_COUNTER_SEEN`,
    /// 3 `_FAIL_SEEN` (zeroed on the path, or none by 2^23 - 1 bytes sent).
    #[serde(skip_serializing_if = "is_zero")]
    pub accecn_opt_seen: u32,
}

/// Leaves a zero AccECN field out of the JSON forms of [`TcpInfo`], which keeps
/// them as they were for connections that never saw ECT.
fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl TcpInfo {
    /// `tcp_get_info` of a socket without a connection (`TCP_CLOSE`): what
    /// `tcp_init_sock` leaves: the initial RTO (1 s) and its deviation
    /// (`mdev_us`, a quarter of it in `tcpi_rttvar`), `TCP_MSS_DEFAULT`, an infinite
    /// ssthresh, the initial window and reordering degree, no RTT sample
    /// (`tcpi_min_rtt` ~0) and no pacing rate yet (`sk_pacing_rate` ~0);
    /// `max_pacing_rate` is `SO_MAX_PACING_RATE`'s (~0 unset) and `ms` the
    /// `tcpi_last_*` times (since time zero: nothing was sent or received).
    pub fn without_connection(cfg: &Config, max_pacing_rate: u64, ms: u64) -> TcpInfo {
        TcpInfo {
            state: TcpState::Closed.name(),
            ca_state: "Open",
            rto: TCP_TIMEOUT_INIT.as_micros() as u64,
            snd_mss: TCP_MSS_DEFAULT,
            rttvar: (TCP_TIMEOUT_INIT.as_micros() >> 2) as u32,
            snd_ssthresh: INFINITE_SSTHRESH,
            snd_cwnd: TCP_INIT_CWND,
            reordering: cfg.tcp_reordering,
            min_rtt: u32::MAX,
            pacing_rate: u64::MAX,
            max_pacing_rate,
            last_data_sent: ms,
            last_data_recv: ms,
            last_ack_recv: ms,
            // tcp_init_sock: "tp->rate_app_limited = 1" until the first ACK's sample.
            delivery_rate_app_limited: true,
            ..TcpInfo::default()
        }
    }

    /// `tcp_get_info` of a listener, which reports only the fields of every state
    /// (the pacing rates, reordering degree and cwnd `tcp_init_sock` set), then
    /// `tcpi_unacked` as the children ready for `accept` (`sk_ack_backlog`) and
    /// `tcpi_sacked` as the backlog (`sk_max_ack_backlog`).
    pub fn listener(cfg: &Config, max_pacing_rate: u64, queued: u32, backlog: u32) -> TcpInfo {
        TcpInfo {
            state: TcpState::Listen.name(),
            ca_state: "Open",
            snd_cwnd: TCP_INIT_CWND,
            reordering: cfg.tcp_reordering,
            pacing_rate: u64::MAX,
            max_pacing_rate,
            unacked: queued,
            sacked: backlog,
            ..TcpInfo::default()
        }
    }
}

impl Tcb {
    /// `tcpi_options` (`tcp_get_info`). `TCPI_OPT_USEC_TS` (64) stays clear:
    /// lowtide's TSval ticks in milliseconds only (no route `features tcp_usec_ts`,
    /// so `tp->tcp_usec_ts` is never set).
    fn info_options(&self) -> u8 {
        use super::ecn::TCP_ECN_SEEN;
        (self.rx_opt.tstamp_ok as u8)
            | (self.rx_opt.sack_ok as u8) << 1
            | (self.rx_opt.wscale_ok as u8) << 2
            | (self.ecn_mode_any() as u8) << 3
            | ((self.ecn_flags & TCP_ECN_SEEN != 0) as u8) << 4
            | (self.tfo.syn_data_acked as u8) << 5
            | (self.tfo.syn_fastopen_child as u8) << 7
    }

    /// `tcpi_snd_wscale` and `tcpi_rcv_wscale` (`tcp_get_info`): reported only
    /// once both sides agreed to scale (`rx_opt.wscale_ok`), so 0 in SYN-SENT
    /// though the SYN already offered `rcv_wscale`.
    fn info_wscales(&self) -> (u8, u8) {
        match self.rx_opt.wscale_ok {
            true => (self.rx_opt.snd_wscale, self.rx_opt.rcv_wscale),
            false => (0, 0),
        }
    }

    /// The `tcp_info` snapshot at `now`.
    pub(crate) fn info(&self, now: Instant) -> TcpInfo {
        let ms_ago = |t: Instant| now.saturating_since(t).as_millis() as u64;
        TcpInfo {
            state: self.state.name(),
            ca_state: self.ca_state.name(),
            retransmits: self.icsk.retransmits,
            probes: self.icsk.probes_out,
            backoff: self.icsk.backoff,
            rto: self.rto_backed_off().as_micros() as u64,
            snd_mss: self.mss_cache,
            rcv_mss: self.ack.rcv_mss,
            unacked: self.rtx.packets_out,
            sacked: self.sacked_out(),
            lost: self.rtx.lost_out,
            retrans: self.rtx.retrans_out,
            last_data_sent: ms_ago(self.lsndtime),
            last_data_recv: ms_ago(self.ack.lrcvtime),
            last_ack_recv: ms_ago(self.rcv_tstamp),
            rtt: self.rtt.srtt_us,
            rttvar: self.rtt.rttvar_us,
            snd_ssthresh: self.cw.snd_ssthresh,
            snd_cwnd: self.cw.snd_cwnd,
            advmss: self.advmss,
            reordering: self.reordering,
            rcv_space: self.rcvq_space,
            rcv_ssthresh: self.rcv_ssthresh,
            total_retrans: self.total_retrans,
            bytes_acked: self.bytes_acked,
            bytes_received: self.bytes_received,
            segs_out: self.segs_out,
            segs_in: self.segs_in,
            notsent_bytes: self.notsent_bytes(),
            min_rtt: self.rtt.min_rtt_us,
            data_segs_in: self.data_segs_in,
            data_segs_out: self.data_segs_out,
            delivered: self.delivered,
            delivered_ce: self.delivered_ce,
            bytes_sent: self.bytes_sent,
            bytes_retrans: self.bytes_retrans,
            snd_wnd: self.snd_wnd,
            rcv_wnd: self.rcv_wnd,
            sndbuf: self.sndbuf,
            rcvbuf: self.rcvbuf,
            wmem_queued: self.wmem_queued,
            wmem_alloc: self.wmem_alloc,
            mean_rtt: self.rtt_sum_us.checked_div(self.rtt_samples).unwrap_or(0) as u32,
            pacing_rate: self.pace.pacing_rate,
            max_pacing_rate: self.pace.max_pacing_rate,
            rmem_alloc: self.rmem_alloc(),
            tsq_throttled: self.pace.tsq_throttled_count,
            wakeups: self.wakeups,
            delivery_rate: self.delivery_rate(),
            delivery_rate_app_limited: self.rate.rate_app_limited,
            busy_time: self.chrono.stats_us(now).0,
            rwnd_limited: self.chrono.stats_us(now).1,
            sndbuf_limited: self.chrono.stats_us(now).2,
            options: self.info_options(),
            fastopen_client_fail: self.tfo.client_fail as u8,
            snd_wscale: self.info_wscales().0,
            rcv_wscale: self.info_wscales().1,
            ato: self.ack.ato.min(self.delack_max()).as_micros() as u32,
            pmtu: self.pmtu_cookie,
            rcv_rtt: self.rcv_rtt.rtt_us8 >> 3,
            reord_seen: self.reord_seen,
            dsack_dups: self.dsack_dups,
            rcv_ooopack: self.rcv_ooopack,
            total_rto: self.total_rto,
            rehash: self.timeout_rehash,
            total_rto_recoveries: self.total_rto_recoveries,
            total_rto_time: self.total_rto_time_ms
                + self
                    .rto_stamp
                    .map_or(0, |t| now.saturating_since(t).as_millis() as u64),
            bbr_bw: self.cc.bw_estimate_bps().map_or(0, |b| b / 8),
            received_ce: self.accecn.received_ce,
            received_e1_bytes: self.accecn.received_ecn_bytes[0],
            received_e0_bytes: self.accecn.received_ecn_bytes[1],
            received_ce_bytes: self.accecn.received_ecn_bytes[2],
            delivered_e1_bytes: self.accecn.delivered_ecn_bytes[0],
            delivered_e0_bytes: self.accecn.delivered_ecn_bytes[1],
            delivered_ce_bytes: self.accecn.delivered_ecn_bytes[2],
            accecn_fail_mode: self.accecn.fail_mode.into(),
            accecn_opt_seen: self.accecn.saw_opt.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_scales_only_once_agreed() {
        // tcp_get_info: tcpi_snd_wscale/tcpi_rcv_wscale and TCPI_OPT_WSCALE only with
        // rx_opt.wscale_ok; a SYN-SENT socket has offered rcv_wscale but reports 0.
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::SynSent;
        (t.rx_opt.snd_wscale, t.rx_opt.rcv_wscale) = (7, 8);
        let i = t.info(Instant::ZERO);
        assert_eq!((i.snd_wscale, i.rcv_wscale, i.options & 4), (0, 0, 0));
        t.rx_opt.wscale_ok = true;
        let i = t.info(Instant::ZERO);
        assert_eq!((i.snd_wscale, i.rcv_wscale, i.options & 4), (7, 8, 4));
    }
}

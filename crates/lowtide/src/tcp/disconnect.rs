//! The end of a connection as the socket sees it: tcp.c `tcp_write_queue_purge`
//! (a reset, a timeout, a hard ICMP error, `tcp_disconnect`), and what
//! `tcp_disconnect` leaves of the connection on its socket ([`Disconnected`]):
//! Linux keeps one `tcp_sock` through connect, failure and the next connect, and
//! resets only some of its fields, so `TCP_INFO` of the closed socket and the next
//! connect still see the others.

use super::chrono::{Chrono, Chronos};
use super::cong::INFINITE_SSTHRESH;
use super::consts::{SKB_OVERHEAD, TCP_INIT_CWND, TCP_MIN_MSS, TCP_TIMEOUT_INIT};
use super::info::TcpInfo;
use super::sock::Tcb;
use super::TcpState;
use crate::time::Instant;

/// `TCPI_OPT_ECN` and `TCPI_OPT_ECN_SEEN`: `tp->ecn_flags`, which `tcp_disconnect`
/// leaves (the next `tcp_ecn_send_syn` clears them).
const ECN_OPTIONS: u8 = 8 | 16;

/// What `tcp_disconnect` leaves of a connection on its socket: the `tcp_info`
/// fields it does not reset (`mss_cache`, `advmss`, `icsk_pmtu_cookie`, the
/// windows, `rcv_ssthresh`, `rcvq_space`, `rcv_rtt_est`, `rtt_min`, `reordering`,
/// `icsk_retransmits`, the RTO-recovery totals, `timeout_rehash`, the pacing and
/// delivery rates, `ecn_flags`, the chronographs, `lsndtime`, `rcv_tstamp`,
/// `snd_nxt`) and the ones it resets as it does; `rcv_wnd` reaches the next
/// connect's `tcp_initialize_rcv_mss`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnected {
    info: TcpInfo,
    lsndtime: Instant,
    rcv_tstamp: Instant,
    chrono: Chronos,
    total_rto_time_ms: u64,
    rto_stamp: Option<Instant>,
    snd_nxt: u32,
    /// `syn_fastopen`, `syn_fastopen_exp`, `syn_fastopen_ch`, `syn_data`.
    tfo_syn: [bool; 4],
}

impl Disconnected {
    /// `tp->rcv_wnd`: the next connect's `tcp_connect_init` calls
    /// `tcp_initialize_rcv_mss` before `tcp_select_initial_window` sets a new one,
    /// so half of this bounds its `rcv_mss` guess.
    pub fn rcv_wnd(&self) -> u32 {
        self.info.rcv_wnd
    }

    /// `tp->timeout_rehash`, which neither `tcp_disconnect` nor the next connect
    /// resets (`plb_rehash` is reset, and is 0 here): the next connection's
    /// `tcpi_rehash` counts on from it.
    pub fn timeout_rehash(&self) -> u32 {
        self.info.rehash
    }

    /// `tp->mss_cache`, which `TCP_MAXSEG` reads without a `user_mss`.
    pub fn mss_cache(&self) -> u32 {
        self.info.snd_mss
    }

    /// `tp->reordering`, which neither `tcp_disconnect` nor the next connect
    /// (`tcp_connect_init`) resets: that connection starts from it.
    pub fn reordering(&self) -> u32 {
        self.info.reordering
    }

    /// The Fast Open bits of our last SYN, which `tcp_disconnect` leaves (it clears
    /// `syn_data_acked` and `syn_fastopen_child` only) and `tcp_syn_options` /
    /// `tcp_send_syn_data` only set: the next connection starts with them, so its
    /// SYN-ACK goes through `tcp_rcv_fastopen_synack` again (`TCPFastOpenActive`
    /// and `TCPI_OPT_SYN_DATA` for a plain connect after one with SYN data) and the
    /// blackhole checks read `syn_fastopen`.
    pub(crate) fn keep_fastopen_syn_bits(&self, tfo: &mut super::sock::TfoSock) {
        [
            tfo.syn_fastopen,
            tfo.syn_fastopen_exp,
            tfo.syn_fastopen_ch,
            tfo.syn_data,
        ] = self.tfo_syn;
    }

    /// `tp->snd_nxt`, which `tcp_disconnect` does not reset (`tcp_stream_memory_free`
    /// and `tcpi_notsent_bytes` of the closed socket count from it).
    pub fn snd_nxt(&self) -> u32 {
        self.snd_nxt
    }

    /// `tcp_get_info` of the socket in `TCP_CLOSE` at `now`, with its
    /// `SO_MAX_PACING_RATE` and its `write_seq` (`tcpi_notsent_bytes` is
    /// `write_seq - snd_nxt`, past the old `snd_nxt` by `max_window + 2`, and 2 more
    /// for each `tcp_disconnect` since).
    pub fn info(&self, now: Instant, max_pacing_rate: u64, write_seq: u32) -> TcpInfo {
        let ms_ago = |t: Instant| now.saturating_since(t).as_millis() as u64;
        let (busy_time, rwnd_limited, sndbuf_limited) = self.chrono.stats_us(now);
        TcpInfo {
            last_data_sent: ms_ago(self.lsndtime),
            // inet_csk_delack_init zeroed icsk_ack.lrcvtime.
            last_data_recv: now.as_millis(),
            last_ack_recv: ms_ago(self.rcv_tstamp),
            notsent_bytes: notsent_bytes(write_seq, self.snd_nxt),
            busy_time,
            rwnd_limited,
            sndbuf_limited,
            total_rto_time: self.total_rto_time_ms + self.rto_stamp.map_or(0, ms_ago),
            max_pacing_rate,
            ..self.info.clone()
        }
    }
}

/// `tcpi_notsent_bytes`: `max_t(int, 0, write_seq - snd_nxt)`.
pub fn notsent_bytes(write_seq: u32, snd_nxt: u32) -> u64 {
    (write_seq.wrapping_sub(snd_nxt) as i32).max(0) as u64
}

impl Tcb {
    /// `tcp_write_queue_purge`: the busy chrono stops (`tcp_chrono_stop` while the
    /// queues still hold their skbs, so a running one goes on as busy), the queues'
    /// skbs are freed (`tcp_wmem_free_skb`: `sk_wmem_queued` falls by each one's
    /// truesize, to 0), `packets_out` and `icsk_backoff` are 0. Nothing else of the
    /// scoreboard moves: `tcp_rtx_queue_purge` unlinks the skbs without
    /// `tcp_skb_pcount` accounting, so `sacked_out`, `lost_out` and `retrans_out`
    /// stay as they were (`tcpi_sacked`, `tcpi_lost`, `tcpi_retrans` of the closed
    /// socket). The skbs' zerocopy references go with them ([`Tcb::zerocopy_purge`]
    /// reports the ranges at `tcp_done`).
    pub(crate) fn write_queue_purge(&mut self, now: Instant) {
        self.chrono_stop(now, Chrono::Busy);
        let mut freed = self.rtx.purge();
        for w in self.write_queue.drain(..) {
            freed += SKB_OVERHEAD as u64 + w.data.len() as u64 + w.slack as u64;
        }
        self.wq_uncharged = 0;
        self.wmem_free(freed);
        self.rtx.packets_out = 0;
        self.icsk.backoff = 0;
    }

    /// What `tcp_disconnect` leaves of this connection at `now` ([`Disconnected`]):
    /// its `tcp_info` with the fields `tcp_disconnect` resets as it resets them
    /// (after `tcp_write_queue_purge`, `tcp_clear_retrans`, `inet_csk_delack_init`
    /// and `rx_opt` zeroed): the RTT estimate (`srtt_us` 0, `mdev_us` and `icsk_rto`
    /// `TCP_TIMEOUT_INIT`), the congestion state (`TCP_INIT_CWND`, infinite
    /// ssthresh, `TCP_CA_Open`, the CA's private area), the scoreboard and its
    /// totals, the byte and segment counts, the delivered and AccECN counters,
    /// `rcv_mss` (`TCP_MIN_MSS`), the options but ECN's, the Fast Open bits.
    pub(crate) fn disconnected(&self, now: Instant) -> Disconnected {
        let mut chrono = self.chrono;
        // tcp_write_queue_purge's tcp_chrono_stop(TCP_CHRONO_BUSY).
        if self.write_queue.is_empty() && self.rtx.is_empty() {
            chrono.stop_all(now);
        }
        let i = self.info(now);
        let info = TcpInfo {
            state: TcpState::Closed.name(),
            ca_state: "Open",
            probes: 0,
            backoff: 0,
            rto: TCP_TIMEOUT_INIT.as_micros() as u64,
            rcv_mss: TCP_MIN_MSS,
            unacked: 0,
            sacked: 0,
            lost: 0,
            retrans: 0,
            rtt: 0,
            rttvar: (TCP_TIMEOUT_INIT.as_micros() >> 2) as u32,
            snd_ssthresh: INFINITE_SSTHRESH,
            snd_cwnd: TCP_INIT_CWND,
            total_retrans: 0,
            bytes_acked: 0,
            bytes_received: 0,
            segs_out: 0,
            segs_in: 0,
            data_segs_in: 0,
            data_segs_out: 0,
            delivered: 0,
            delivered_ce: 0,
            bytes_sent: 0,
            bytes_retrans: 0,
            dsack_dups: 0,
            reord_seen: 0,
            rcv_ooopack: 0,
            // The queues are purged; the mean RTT goes with srtt_us.
            wmem_queued: 0,
            wmem_alloc: 0,
            rmem_alloc: 0,
            mean_rtt: 0,
            bbr_bw: 0,
            delivery_rate_app_limited: true,
            options: i.options & ECN_OPTIONS,
            fastopen_client_fail: 0,
            snd_wscale: 0,
            rcv_wscale: 0,
            ato: 0,
            received_ce: 0,
            received_e1_bytes: 0,
            received_e0_bytes: 0,
            received_ce_bytes: 0,
            delivered_e1_bytes: 0,
            delivered_e0_bytes: 0,
            delivered_ce_bytes: 0,
            accecn_fail_mode: 0,
            accecn_opt_seen: 0,
            ..i
        };
        Disconnected {
            info,
            lsndtime: self.lsndtime,
            rcv_tstamp: self.rcv_tstamp,
            chrono,
            total_rto_time_ms: self.total_rto_time_ms,
            rto_stamp: self.rto_stamp,
            snd_nxt: self.snd_seq(self.snd_nxt).0,
            tfo_syn: [
                self.tfo.syn_fastopen,
                self.tfo.syn_fastopen_exp,
                self.tfo.syn_fastopen_ch,
                self.tfo.syn_data,
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::socket::SocketError;
    use crate::tcp::{TcpState, TestStack};
    use core::time::Duration;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// A connection in `state` with a scoreboard: 3 segments out, one each SACKed,
    /// lost and retransmitted, backed off twice.
    fn scoreboard(cfg: &Config, state: TcpState) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = state;
        (t.rtx.packets_out, t.rtx.sacked_out) = (3, 1);
        (t.rtx.lost_out, t.rtx.retrans_out) = (1, 1);
        t.icsk.backoff = 2;
        t.icsk.rto = Duration::from_secs(4);
        t
    }

    /// (unacked, sacked, lost, retrans, backoff, rto) as `tcp_get_info` reports them.
    fn counts(t: &Tcb) -> (u32, u32, u32, u32, u32, u64) {
        let i = t.info(Instant::ZERO);
        (i.unacked, i.sacked, i.lost, i.retrans, i.backoff, i.rto)
    }

    #[test]
    fn done_with_error_purges_packets_out_and_backoff_only() {
        // tcp_reset, tcp_write_err and a hard ICMP error end in tcp_done_with_error,
        // whose tcp_write_queue_purge zeroes packets_out and icsk_backoff; icsk_rto
        // (already doubled) and the SACK/loss/retransmit counts stay.
        let cfg = Config::default();
        for state in [
            TcpState::SynSent,
            TcpState::Established,
            TcpState::CloseWait,
        ] {
            let mut ts = TestStack::default();
            let mut t = scoreboard(&cfg, state);
            let err = SocketError::ConnectionReset;
            t.done_with_error(&mut ts.ctx(&cfg, Instant::ZERO, false), err);
            assert_eq!(counts(&t), (0, 1, 1, 1, 0, 4_000_000), "{state:?}");
        }
    }

    /// `tcp_write_queue_purge` frees every skb of both queues (`tcp_wmem_free_skb`):
    /// `sk_wmem_queued` falls to 0 (a reset in FIN-WAIT-1 with the FIN unacked,
    /// `SK_MEMINFO_WMEM_QUEUED` 0 on Linux), while the scoreboard counts stay
    /// (`tcp_rtx_queue_purge` unlinks without `tcp_skb_pcount` accounting).
    #[test]
    fn write_queue_purge_frees_the_skbs_and_keeps_the_scoreboard() {
        use crate::tcp::rtx::skb::{Skb, WriteSkb, SACKED_ACKED};
        let cfg = Config::default();
        let mut ts = TestStack::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::FinWait1;
        let mut s = Skb::sent_for_test(1, 1000, 1, Instant::ZERO);
        s.sacked = SACKED_ACKED;
        t.rtx.push(s);
        t.rtx.push(Skb::sent_for_test(1001, 1000, 1, Instant::ZERO));
        let data = bytes::BytesMut::from(&[7u8; 500][..]).into();
        t.write_queue.push_back(WriteSkb::copied(2001, data, 0));
        t.wmem_queued = 2 * (1000 + SKB_OVERHEAD as u64) + 500 + SKB_OVERHEAD as u64;
        assert_eq!(t.rtx.sacked_out, 1);
        t.tcp_reset(&mut ts.ctx(&cfg, Instant::ZERO, false));
        assert_eq!(t.sk_err, Some(SocketError::ConnectionReset));
        assert_eq!(t.wmem_queued, 0);
        assert!(t.rtx.is_empty() && t.write_queue.is_empty());
        assert_eq!((t.rtx.packets_out, t.rtx.sacked_out), (0, 1));
        assert_eq!(counts(&t).1, 1, "tcpi_sacked stays");
    }

    #[test]
    fn tcp_reset_and_timeout_purge() {
        let cfg = Config::default();
        let mut ts = TestStack::default();
        let mut t = scoreboard(&cfg, TcpState::SynSent);
        t.tcp_reset(&mut ts.ctx(&cfg, Instant::ZERO, false));
        assert_eq!(t.sk_err, Some(SocketError::ConnectionRefused));
        assert_eq!(counts(&t).0, 0, "tcp_reset");
        let mut t = scoreboard(&cfg, TcpState::Established);
        t.write_err(&mut ts.ctx(&cfg, Instant::ZERO, false));
        assert_eq!(counts(&t).0, 0, "tcp_write_err");
    }

    /// tcp_disconnect clears syn_data_acked and syn_fastopen_child only: the other
    /// syn_* bits reach the next connection on the socket.
    #[test]
    fn disconnect_leaves_the_fast_open_syn_bits() {
        let cfg = Config::default();
        for bits in [
            [true, true, true, true],
            [true, false, false, true],
            [false; 4],
        ] {
            let mut t = Tcb::for_test(&cfg);
            let f = &mut t.tfo;
            [
                f.syn_fastopen,
                f.syn_fastopen_exp,
                f.syn_fastopen_ch,
                f.syn_data,
            ] = bits;
            (f.syn_data_acked, f.syn_fastopen_child) = (true, true);
            let d = t.disconnected(Instant::ZERO);
            let mut next = Tcb::for_test(&cfg);
            d.keep_fastopen_syn_bits(&mut next.tfo);
            let f = &next.tfo;
            assert_eq!(
                [
                    f.syn_fastopen,
                    f.syn_fastopen_exp,
                    f.syn_fastopen_ch,
                    f.syn_data
                ],
                bits
            );
            assert!(!f.syn_data_acked && !f.syn_fastopen_child);
            assert_eq!(
                d.info(Instant::ZERO, 0, 0).options & 32,
                0,
                "TCPI_OPT_SYN_DATA"
            );
        }
    }

    #[test]
    fn disconnect_purges_in_every_state() {
        // tcp_disconnect purges whether it resets (SYN-SENT, ESTABLISHED) or only
        // closes (LAST-ACK with everything sent).
        let cfg = Config::default();
        for state in [TcpState::SynSent, TcpState::Established, TcpState::LastAck] {
            let mut ts = TestStack::default();
            let mut t = scoreboard(&cfg, state);
            t.disconnect(&mut ts.ctx(&cfg, Instant::ZERO, false));
            assert_eq!(counts(&t).0, 0, "{state:?}");
            assert_eq!(t.icsk.backoff, 0, "{state:?}");
        }
    }

    #[test]
    fn tcp_done_alone_keeps_the_scoreboard() {
        // tcp_done without an error (LAST-ACK's final ACK, a FIN-WAIT-2 timeout)
        // purges nothing: the queue goes with the socket (inet_csk_destroy_sock).
        let cfg = Config::default();
        let mut ts = TestStack::default();
        let mut t = scoreboard(&cfg, TcpState::LastAck);
        t.set_closed(&mut ts.ctx(&cfg, Instant::ZERO, false));
        assert_eq!(counts(&t), (3, 1, 1, 1, 2, 4_000_000));
    }

    #[test]
    fn disconnected_info_resets_what_tcp_disconnect_resets() {
        // tcp_disconnect: the RTT estimate, congestion state, scoreboard, counts,
        // rcv_mss and the options go; mss_cache, advmss, the path MTU, the windows,
        // rcv_ssthresh, rcv_rtt, min_rtt, reordering, icsk_retransmits, the RTO
        // totals, timeout_rehash and ecn_flags stay.
        let cfg = Config::default();
        let mut t = scoreboard(&cfg, TcpState::Established);
        (t.mss_cache, t.advmss, t.pmtu_cookie) = (1448, 1448, 1500);
        (t.rcv_wnd, t.rcv_ssthresh, t.snd_wnd) = (65000, 64000, 70000);
        (t.rtt.srtt_us, t.rtt.min_rtt_us, t.rcv_rtt.rtt_us8) = (8000, 900, 8 * 700);
        (t.cw.snd_cwnd, t.cw.snd_ssthresh, t.reordering) = (20, 15, 5);
        (t.segs_out, t.segs_in, t.bytes_acked, t.total_retrans) = (9, 8, 7000, 2);
        (t.ack.rcv_mss, t.icsk.retransmits, t.total_rto) = (1448, 2, 3);
        (t.rx_opt.tstamp_ok, t.rx_opt.sack_ok, t.rx_opt.wscale_ok) = (true, true, true);
        t.rx_opt.rcv_wscale = 7;
        t.ecn_flags = crate::tcp::ecn::TCP_ECN_SEEN;
        t.timeout_rehash = 4;
        let d = t.disconnected(Instant::ZERO);
        let i = d.info(Instant::ZERO, 5, 0);
        let reset = (
            i.rto,
            i.rtt,
            i.rttvar,
            i.snd_cwnd,
            i.snd_ssthresh,
            i.rcv_mss,
        );
        assert_eq!(reset, (1_000_000, 0, 250_000, 10, INFINITE_SSTHRESH, 88));
        let counts = (
            i.unacked,
            i.sacked,
            i.lost,
            i.retrans,
            i.backoff,
            i.total_retrans,
        );
        assert_eq!(counts, (0, 0, 0, 0, 0, 0));
        assert_eq!((i.segs_out, i.segs_in, i.bytes_acked), (0, 0, 0));
        assert_eq!((i.options, i.rcv_wscale, i.max_pacing_rate), (16, 0, 5));
        let mss = (
            i.snd_mss,
            i.advmss,
            i.pmtu,
            i.rcv_wnd,
            i.rcv_ssthresh,
            i.snd_wnd,
        );
        assert_eq!(mss, (1448, 1448, 1500, 65000, 64000, 70000));
        let kept = (
            i.min_rtt,
            i.rcv_rtt,
            i.reordering,
            i.retransmits,
            i.total_rto,
        );
        assert_eq!(kept, (900, 700, 5, 2, 3));
        assert_eq!(
            (i.state, d.rcv_wnd(), d.mss_cache()),
            ("CLOSED", 65000, 1448)
        );
        // timeout_rehash stays, for the next connect too.
        assert_eq!((i.rehash, d.timeout_rehash()), (4, 4));
    }

    #[test]
    fn disconnected_times_run_on() {
        // lsndtime and rcv_tstamp stay, icsk_ack.lrcvtime is 0; write_seq past
        // snd_nxt is tcpi_notsent_bytes.
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.lsndtime = ms(100);
        t.rcv_tstamp = ms(200);
        let d = t.disconnected(ms(300));
        let i = d.info(ms(1000), 0, t.snd_seq(t.snd_nxt).0 + 7);
        let times = (i.last_data_sent, i.last_ack_recv, i.last_data_recv);
        assert_eq!(times, (900, 800, 1000));
        assert_eq!(i.notsent_bytes, 7);
        assert_eq!(notsent_bytes(5, 10), 0, "negative is 0");
    }
}

//! `tcp_init_sock` (net/ipv4/tcp.c): a new connection's defaults, read from the
//! stack's settings (`sysctl_tcp_wmem`, `sysctl_tcp_rmem`, the congestion control,
//! the initial window, ...) and from the route's MTU. The state itself is
//! `struct tcp_sock` in tcp/sock.rs.

use super::cong::{self, CaState, CwndState};
use super::consts::TCP_TIMEOUT_INIT;
use super::ofo::OfoQueue;
use super::rtx::RtxQueue;
use super::seq::Seq;
use super::sock::{
    Dst, Icsk, IcskAck, Pacing, Rack, RateState, Rtt, RttEstimator, RxOpt, Tcb, Undo, Urg,
};
use super::{FourTuple, TcpState};
use crate::config::Config;
use crate::socket::SocketHandle;
use crate::time::Instant;
use core::time::Duration;
use std::collections::VecDeque;

impl Tcb {
    /// A closed connection with `cfg`'s defaults (`tcp_init_sock`).
    pub(crate) fn new(cfg: &Config, tuple: FourTuple, iss: u32, now: Instant) -> Tcb {
        let ipv6 = tuple.local.is_ipv6();
        let advmss = cfg.mss_for(ipv6);
        let cc = cong::by_name_cfg(&cfg.tcp_congestion_control, cfg)
            .unwrap_or_else(|| Box::new(cong::reno::Reno));
        Tcb {
            state: TcpState::Closed,
            tuple,
            handle: SocketHandle {
                index: 0,
                generation: 0,
            },
            parent: None,
            accepted_ready: false,
            in_accept_queue: false,
            req: Default::default(),
            sk_err: None,
            sk_err_soft: None,
            recverr: (false, false),
            nodelay: false,
            thin_lto: false,
            nonagle_push: false,
            cork: false,
            pushed_seq: 1,
            push_one: 0,
            urg: Urg::default(),
            chrono: Default::default(),
            rwnd_limited: false,
            push_nonagle: None,
            iss: Seq(iss),
            snd_una: 0,
            snd_nxt: 0,
            write_seq: 0,
            snd_wnd: 0,
            snd_wl1: 0,
            max_window: 0,
            snd_sml: 0,
            write_queue: VecDeque::new(),
            payload_source: None,
            saved_syn: None,
            tx_delay: 0,
            errq: Default::default(),
            send_call: None,
            rtx: RtxQueue::with_kind(cfg.rtx_queue),
            fin_queued: false,
            sndbuf: cfg.tcp_wmem[1],
            sndbuf_locked: false,
            wmem_queued: 0,
            wq_uncharged: 0,
            wmem_alloc: 0,
            fclone_next: 0,
            mem_pages: 0,
            uncharged: 0,
            uncharged_seen: 0,
            nospace: false,
            shut_wr: false,
            notsent_lowat: 0,
            pace: Pacing {
                max_pacing_rate: u64::MAX,
                // sock_init_data: ~0UL until tcp_update_pacing_rate first runs (a
                // Fast Open child sends before its handshake's ACK sets one).
                pacing_rate: u64::MAX,
                // sch_fq paces every flow it sees (SK_PACING_FQ): by the device's fq if it
                // has one, else emulated by TCP's own pacing.
                pacing_needed: cfg.default_qdisc == "fq" && cfg.device_fq.is_none(),
                pacing_fq: cfg.device_fq == Some(true),
                wstamp: now,
                pacing_timer: false,
                tsq_throttled: false,
                tsq_throttled_count: 0,
            },
            wakeups: 0,
            irs: Seq(0),
            rcv_nxt: 0,
            rcv_wup: 0,
            rcv_wnd: 0,
            window_clamp: 0,
            rcv_ssthresh: 0,
            scaling_ratio: super::consts::TCP_DEFAULT_SCALING_RATIO,
            rcv_queue: Default::default(),
            ofo: OfoQueue::default(),
            fin_seq: None,
            rcv_shutdown: false,
            shut_rd: false,
            adjudge_pending: false,
            copied_seq: 1,
            rcvbuf: cfg.tcp_rmem[1],
            rcvbuf_locked: false,
            rcvq_space: 10 * advmss,
            rcvq_space_seq: 1,
            rcvq_space_time: now,
            rcv_rtt: Default::default(),
            readable_signaled: false,
            pred_wnd: None,
            rcvlowat: 1,
            data_ready_count: 0,
            dsack: None,
            mss_cache: advmss,
            connect_ts: false,
            advmss,
            pmtu_cookie: cfg.mtu,
            tos: 0,
            tclass: 0,
            tos_ecn: 0,
            uc_ttl: None,
            hop_limit: None,
            min_ttl: 0,
            min_hopcount: 0,
            pmtudisc: super::pmtu::default_pmtudisc(cfg),
            pmtudisc6: super::pmtu::IP_PMTUDISC_WANT,
            family_v6: tuple.local.is_ipv6(),
            md5: Default::default(),
            rx_opt: RxOpt {
                sack_ok: false,
                tstamp_ok: false,
                wscale_ok: false,
                snd_wscale: 0,
                rcv_wscale: 0,
                ts_recent: 0,
                ts_recent_stamp: now,
                ts_recent_from_tw: false,
                rcv_tsecr: 0,
                user_mss: 0,
                mss_clamp: advmss,
            },
            ts_offset: iss.rotate_left(13),
            // tcp_init_sock: mdev_us starts at TCP_TIMEOUT_INIT (what tcpi_rttvar
            // shows, a quarter of it, until the first sample replaces it).
            rtt: Rtt {
                srtt_us: 0,
                rttvar_us: (TCP_TIMEOUT_INIT.as_micros() >> 2) as u32,
                est: RttEstimator {
                    mdev: TCP_TIMEOUT_INIT.as_micros() as u32,
                    ..Default::default()
                },
                min_rtt_us: u32::MAX,
                rtt_min: Default::default(),
            },
            icsk: Icsk {
                rto: TCP_TIMEOUT_INIT,
                rto_min: Duration::from_micros(cfg.tcp_rto_min_us as u64),
                rto_max: Duration::from_millis(cfg.tcp_rto_max_ms as u64),
                backoff: 0,
                retransmits: 0,
                probes_out: 0,
                probes_tstamp: None,
                pending: None,
                user_timeout: Duration::ZERO,
                syn_retries: 0,
            },
            keepalive: Default::default(),
            keepalive_at: None,
            last_oow_ack_time: None,
            local_drops: Vec::new(),
            resource_retry_at: None,
            linger2: 0,
            comp_sack: Default::default(),
            write_pending: 0,
            ecn_flags: 0,
            accecn: Default::default(),
            rx_ip_ecn: 0,
            rx_ttl: 0,
            rx_pkt_len: 0,
            rx_segs: 1,
            sk_drops: 0,
            rx_fast_data: false,
            delivered_ce: 0,
            ack: IcskAck {
                pending: false,
                pushed: 0,
                now: false,
                nomem: false,
                timeout: None,
                quick: 0,
                pingpong: 0,
                ato: Duration::ZERO,
                last_seg_size: 0,
                rcv_mss: advmss.min(536),
                lrcvtime: now,
                dst_quick_ack: false,
            },
            tw_at: None,
            tw_handoff: None,
            wheel: Default::default(),
            bind: Default::default(),
            lsndtime: now,
            rcv_tstamp: now,
            cw: CwndState::new(cfg.initcwnd),
            snd_cwnd_used: 0,
            snd_cwnd_stamp: now,
            cc,
            ca_state: CaState::Open,
            reordering: cfg.tcp_reordering,
            high_seq: 0,
            prr_delivered: 0,
            prr_out: 0,
            retransmit_hint: 0,
            reno_sacked_out: 0,
            rack: Rack::default(),
            undo: Undo {
                marker: None,
                retrans: -1,
                prior_ssthresh: 0,
                prior_cwnd: 0,
                retrans_stamp: None,
            },
            frto: false,
            frto_rexmit_new: false,
            rexmit_lost: false,
            tlp_high_seq: None,
            tlp_retrans: false,
            reord_seen: 0,
            is_sack_reneg: false,
            bytes_acked: 0,
            bytes_received: 0,
            bytes_sent: 0,
            bytes_retrans: 0,
            total_retrans: 0,
            dsack_dups: 0,
            rcv_ooopack: 0,
            total_rto: 0,
            total_rto_recoveries: 0,
            total_rto_time_ms: 0,
            rto_stamp: None,
            txrehash: cfg.txrehash,
            txhash: 0,
            req_txhash: 0,
            flow_label: 0,
            autoflowlabel: None,
            repflow: cfg.ipv6_flowlabel_reflect & super::flowlabel::FLOWLABEL_REFLECT_ESTABLISHED
                != 0,
            lrcv_flowlabel: 0,
            timeout_rehash: 0,
            segs_out: 0,
            segs_in: 0,
            data_segs_out: 0,
            data_segs_in: 0,
            delivered: 0,
            rate: RateState {
                delivered_mstamp: now,
                first_tx_mstamp: now,
                app_limited: super::consts::APP_LIMITED_UNTIL_ACKED,
                rate_delivered: 0,
                rate_interval_us: 0,
                rate_app_limited: true,
            },
            rtt_samples: 0,
            rtt_sum_us: 0,
            created: now,
            tfo: Default::default(),
            tstamp: Default::default(),
            dst: Dst {
                mtu: cfg.mtu,
                ..Default::default()
            },
            ca_dst_locked: false,
            mtup: Default::default(),
        }
    }
}

#[cfg(test)]
impl Tcb {
    /// A closed connection 10.0.0.1:1 -> 10.0.0.2:2 with ISS 1 at time zero, for unit
    /// tests of the engine's parts.
    pub(crate) fn for_test(cfg: &Config) -> Tcb {
        let t = FourTuple {
            local: "10.0.0.1:1".parse().expect("valid address"),
            remote: "10.0.0.2:2".parse().expect("valid address"),
        };
        Tcb::new(cfg, t, 1, Instant::ZERO)
    }
}

//! Path MTU discovery for TCP (RFC 1191, RFC 8201): what a connection does when an
//! ICMP "fragmentation needed" or ICMPv6 "packet too big" says its segments are too
//! big for the path (`tcp_v4_mtu_reduced`/`tcp_v6_mtu_reduced`, `tcp_sync_mss`,
//! `tcp_simple_retransmit`). The stack checks the ICMP message and keeps the
//! per-destination path MTU (`stack/icmp.rs`).

use super::cong::CaState;
use super::consts::TCPOLEN_TSTAMP_ALIGNED;
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::SocketError;

/// `TCP_MSS_DEFAULT`: below this largest window, `tcp_bound_to_half_wnd` allows the
/// whole window.
const TCP_MSS_DEFAULT: u32 = 536;

pub use super::consts::{
    IP_PMTUDISC_DO, IP_PMTUDISC_DONT, IP_PMTUDISC_INTERFACE, IP_PMTUDISC_OMIT, IP_PMTUDISC_PROBE,
    IP_PMTUDISC_WANT,
};

/// `inet_create` / `inet6_create`: a new socket's `IP_MTU_DISCOVER`,
/// `IP_PMTUDISC_DONT` under `net.ipv4.ip_no_pmtu_disc`, else `IP_PMTUDISC_WANT`.
pub(crate) fn default_pmtudisc(cfg: &crate::config::Config) -> u8 {
    match cfg.ip_no_pmtu_disc {
        0 => IP_PMTUDISC_WANT,
        _ => IP_PMTUDISC_DONT,
    }
}

impl Tcb {
    /// `ip_dont_fragment` for the connection's IPv4 packets: `IP_PMTUDISC_DO`, or
    /// `IP_PMTUDISC_WANT` on a route whose MTU is not locked (`ip_mtu_locked`: the
    /// route's `mtu lock`, or a learned path MTU raised to `ip_rt_min_pmtu`). An
    /// IPv6 connection has no DF bit (its `IPV6_MTU_DISCOVER` is not `IP_`'s).
    pub(crate) fn ip_dont_fragment(&self) -> bool {
        let locked = self.dst.metrics.locked(crate::route::Rtax::Mtu) || self.dst.mtu_locked;
        self.pmtudisc == IP_PMTUDISC_DO || (self.pmtudisc == IP_PMTUDISC_WANT && !locked)
    }

    /// `tcp_v4_mtu_reduced`'s test, `inet->pmtudisc != IP_PMTUDISC_DONT &&
    /// ip_sk_accept_pmtu(sk)`: may an ICMP MTU report shrink the MSS at once? IPv6
    /// connections have no such test here: `tcp_v6_err` checks `IPV6_MTU_DISCOVER`
    /// (`ip6_sk_accept_pmtu`) before the route learns anything (`stack/icmp.rs`).
    fn accepts_pmtu(&self) -> bool {
        self.tuple.remote.is_ipv6()
            || !matches!(
                self.pmtudisc,
                IP_PMTUDISC_DONT | IP_PMTUDISC_INTERFACE | IP_PMTUDISC_OMIT
            )
    }

    /// `tcp_mtu_to_mss`: the MSS for a path MTU, at most the clamp of the handshake
    /// (the peer's MSS, `TCP_MAXSEG`, the device), at least `tcp_min_snd_mss`, minus
    /// the timestamp option's room.
    pub(crate) fn mtu_to_mss(&self, pmtu: u32, min_snd_mss: u32) -> u32 {
        let net_header = if self.tuple.local.is_ipv6() { 40 } else { 20 };
        // __tcp_mtu_to_mss: the floor applies before the options' room, whatever the
        // peer's MSS option says (CVE-2019-11479); tcp_min_snd_mss is at least 48.
        let mss = pmtu
            .saturating_sub(net_header + 20)
            .min(self.rx_opt.mss_clamp)
            .max(min_snd_mss);
        mss.saturating_sub(self.ts_option_len())
    }

    /// `tcp_sync_mss`: the MSS for path MTU `pmtu`, no more than half the peer's
    /// largest window, becomes `mss_cache`, and `pmtu` the connection's
    /// `icsk_pmtu_cookie`. The MTU search never goes above `pmtu`, and while MTU
    /// probing is on the MSS stays at what the search has shown to work
    /// (`tcp/mtu_probe.rs`).
    pub(crate) fn sync_mss(&mut self, pmtu: u32, min_snd_mss: u32) -> u32 {
        self.mtup.search_high = self.mtup.search_high.min(pmtu);
        let mut mss = self.bound_to_half_wnd(self.mtu_to_mss(pmtu, min_snd_mss));
        self.pmtu_cookie = pmtu;
        if self.mtup.enabled {
            mss = mss.min(self.mtu_to_mss(self.mtup.search_low, min_snd_mss));
        }
        self.mss_cache = mss;
        self.mss_cache
    }

    /// Room the timestamp option takes in every segment (`tp->tcp_header_len` less
    /// the bare header): if negotiated, or in SYN-SENT if our SYN offers it.
    pub(super) fn ts_option_len(&self) -> u32 {
        if self.rx_opt.tstamp_ok || self.connect_ts {
            TCPOLEN_TSTAMP_ALIGNED
        } else {
            0
        }
    }

    /// `tcp_bound_to_half_wnd`: a segment no larger than half the peer's largest
    /// window (the whole of a window under 536 bytes), and no smaller than 68 bytes
    /// of IP datagram.
    pub(super) fn bound_to_half_wnd(&self, mss: u32) -> u32 {
        let cutoff = if self.max_window > TCP_MSS_DEFAULT {
            self.max_window / 2
        } else {
            self.max_window
        };
        if cutoff > 0 && mss > cutoff {
            cutoff.max(68u32.saturating_sub(20 + self.ts_option_len()))
        } else {
            mss
        }
    }

    /// `tcp_v4_mtu_reduced`/`tcp_v6_mtu_reduced`: an ICMP message reported path MTU
    /// `reported`, and the route learned it (`inet_csk_update_pmtu`, perhaps raised to
    /// `ip_rt_min_pmtu` and locked: `rt_mtu_locked`); the connection reads the
    /// route's MTU, lock and expiry again ([`Tcb::refresh_dst_mtu`]). Smaller than the
    /// connection's `icsk_pmtu_cookie`, it shrinks the MSS (`tcp_sync_mss`) and
    /// resends what no longer fits (`tcp_simple_retransmit`); a larger one is
    /// ignored ([RFC 1191 section 3](https://www.rfc-editor.org/rfc/rfc1191#section-3)).
    /// Returns whether the MSS changed.
    ///
    /// An IPv4 connection that sends with DF where the route keeps a larger MTU
    /// than reported remembers `EMSGSIZE` as its soft error, the error it reports
    /// if it times out ("Something is about to be wrong...").
    ///
    /// With `IP_MTU_DISCOVER` `IP_PMTUDISC_DONT`, `INTERFACE` or `OMIT` only the
    /// route learns the MTU (`inet_csk_update_pmtu`): the MSS follows it at the next
    /// `tcp_current_mss`, with no retransmission.
    pub(crate) fn mtu_reduced(&mut self, ctx: &mut Ctx, reported: u32) -> bool {
        if matches!(self.state, TcpState::Listen | TcpState::Closed) {
            return false;
        }
        // inet_csk_update_pmtu's __sk_dst_check: the route as the table holds it now.
        self.refresh_dst_mtu(ctx);
        let mtu = self.dst.mtu;
        if self.tuple.remote.is_ipv4() && reported < mtu && self.ip_dont_fragment() {
            self.sk_err_soft = Some(SocketError::MessageTooLong);
        }
        if !self.accepts_pmtu() || mtu >= self.pmtu_cookie {
            return false;
        }
        let old = self.mss_cache;
        // In every state but LISTEN and CLOSE, SYN-SENT too: the MSS follows the
        // new path MTU at once (`tcpi_snd_mss`), and the handshake syncs it from
        // the cookie again. In SYN-SENT, tcp_simple_retransmit finds a bare SYN
        // never too long, but after Fast Open SYN data the SYN and its data are
        // lost, and the SYN goes again at once as the queue's head, with the
        // route's smaller MSS (tcp_advertise_mss); the data waits for the SYN-ACK,
        // outside the peer's window until then (tcp_rcv_fastopen_synack resends
        // it).
        self.sync_mss(mtu, ctx.cfg.tcp_min_snd_mss);
        self.simple_retransmit(ctx);
        self.mss_cache != old
    }

    /// `tcp_current_mss` finding the route's MTU other than `icsk_pmtu_cookie` (the
    /// device's MTU or the route changed): `tcp_sync_mss` to it, larger or smaller,
    /// with no retransmission (nothing says a packet was lost), in whatever state
    /// calls it: in SYN-SENT a SYN's retransmission (`__tcp_retransmit_skb`) syncs
    /// `mss_cache` too, under `mss_clamp` (`TCP_MSS_DEFAULT`, or `TCP_MAXSEG`'s).
    pub(crate) fn route_mtu_changed(&mut self, ctx: &mut Ctx, mtu: u32) {
        self.dst.mtu = mtu;
        if matches!(self.state, TcpState::Listen | TcpState::Closed) || mtu == self.pmtu_cookie {
            return;
        }
        self.sync_mss(mtu, ctx.cfg.tcp_min_snd_mss);
    }

    /// `tcp_simple_retransmit`: every skb with a segment over the new MSS is lost;
    /// unless already in Loss, the connection enters it with ssthresh kept ("we do
    /// not increase the amount of data in the network, units changed") and no undo,
    /// and the retransmit queue goes out again at the new size.
    pub(crate) fn simple_retransmit(&mut self, ctx: &mut Ctx) {
        // "A fastopen SYN request is stored as two separate packets": in SYN-SENT
        // after SYN data, MSS -1 takes every skb as lost.
        let lost_retrans = match self.tfo.syn_data && self.state == TcpState::SynSent {
            true => self.rtx.mark_all_lost(),
            false => self
                .rtx
                .mark_lost_longer_than(self.current_mss(ctx.cfg, ctx.now)),
        };
        ctx.mib
            .add(Mib::TcpExtTCPLostRetransmit, lost_retrans as u64);
        // tcp_clear_retrans_hints_partial.
        self.retransmit_hint = self.snd_una;
        if self.rtx.lost_out == 0 {
            return;
        }
        if !self.rx_opt.sack_ok {
            self.limit_reno_sacked();
        }
        // "Don't muck with the congestion window here": units changed, not the
        // amount of data in the network.
        self.non_congestion_loss_retransmit(ctx);
    }

    /// `tcp_non_congestion_loss_retransmit` (tcp_input.c): a loss that says nothing of
    /// congestion (a smaller path MTU, `tcp_simple_retransmit`; Fast Open data the
    /// SYN-ACK did not cover, `tcp_rcv_fastopen_synack`) resends what cwnd allows
    /// without reducing cwnd, in Loss, so that `retrans_stamp` is cleared once every
    /// retransmission is ACKed.
    pub(crate) fn non_congestion_loss_retransmit(&mut self, ctx: &mut Ctx) {
        self.enter_non_congestion_loss();
        self.xmit_retransmit_queue(ctx);
    }

    /// `tcp_non_congestion_loss_retransmit`'s state change: unless already in Loss,
    /// `high_seq` at `snd_nxt`, ssthresh at `tcp_current_ssthresh`, nothing to undo
    /// (`prior_ssthresh` and `undo_marker` cleared), and Loss through
    /// `tcp_set_ca_state` (the congestion control's `set_state`).
    fn enter_non_congestion_loss(&mut self) {
        if self.ca_state != CaState::Loss {
            self.high_seq = self.snd_nxt;
            self.cw.snd_ssthresh = self.current_ssthresh();
            self.undo.prior_ssthresh = 0;
            self.undo.marker = None;
            self.set_ca_state(CaState::Loss);
        }
    }
}

#[cfg(test)]
mod non_congestion_loss_tests {
    use crate::config::Config;
    use crate::tcp::cong::{CaCtx, CaState, CongestionOps, CwndState};
    use crate::tcp::Tcb;
    use std::sync::{Arc, Mutex};

    /// A congestion control that records the states `tcp_set_ca_state` gives it.
    #[derive(Debug, Default)]
    struct Spy(Arc<Mutex<Vec<CaState>>>);

    impl CongestionOps for Spy {
        fn name(&self) -> &'static str {
            "spy"
        }
        fn ssthresh(&mut self, cw: &CwndState) -> u32 {
            cw.snd_ssthresh
        }
        fn cong_avoid(&mut self, _cw: &mut CwndState, _acked: u32, _ctx: &CaCtx) {}
        fn set_state(&mut self, _cw: &mut CwndState, _old: CaState, new: CaState) {
            self.0.lock().expect("not poisoned").push(new);
        }
    }

    /// A connection in `state` with cwnd 10 and ssthresh 4, `snd_nxt` 5000, an undo
    /// marker set, after `tcp_non_congestion_loss_retransmit`'s state change; with
    /// the states its congestion control was told.
    fn entered(state: CaState) -> (Tcb, Vec<CaState>) {
        let mut t = Tcb::for_test(&Config::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        t.cc = Box::new(Spy(seen.clone()));
        (t.ca_state, t.cw.snd_cwnd, t.cw.snd_ssthresh) = (state, 10, 4);
        (t.snd_nxt, t.high_seq) = (5000, 1000);
        (t.undo.marker, t.undo.prior_ssthresh) = (Some(1), 20);
        t.enter_non_congestion_loss();
        let seen = seen.lock().expect("not poisoned").clone();
        (t, seen)
    }

    #[test]
    fn open_enters_loss_with_current_ssthresh_and_nothing_to_undo() {
        let (t, seen) = entered(CaState::Open);
        // tcp_current_ssthresh: max(4, 10/2 + 10/4); cwnd kept.
        let cw = (t.cw.snd_cwnd, t.cw.snd_ssthresh);
        assert_eq!((t.ca_state, cw, t.high_seq), (CaState::Loss, (10, 7), 5000));
        assert_eq!((t.undo.marker, t.undo.prior_ssthresh), (None, 0));
        assert_eq!(seen, [CaState::Loss]);
    }

    #[test]
    fn a_cwnd_reduction_keeps_its_ssthresh_and_loss_is_left_alone() {
        // Recovery (tcp_in_cwnd_reduction): tcp_current_ssthresh is ssthresh.
        let (t, seen) = entered(CaState::Recovery);
        let got = (t.ca_state, t.cw.snd_ssthresh, t.high_seq, t.undo.marker);
        assert_eq!(
            (got, seen),
            ((CaState::Loss, 4, 5000, None), vec![CaState::Loss])
        );
        // Loss already: nothing changes, the congestion control is told nothing.
        let (t, seen) = entered(CaState::Loss);
        let got = (t.ca_state, t.cw.snd_ssthresh, t.high_seq, t.undo.marker);
        assert_eq!((got, seen), ((CaState::Loss, 4, 1000, Some(1)), vec![]));
        assert_eq!(t.undo.prior_ssthresh, 20);
    }
}

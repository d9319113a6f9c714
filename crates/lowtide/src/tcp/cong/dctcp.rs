//! DataCenter TCP, Linux's net/ipv4/tcp_dctcp.c and tcp_dctcp.h (Alizadeh et al.,
//! "Data Center TCP (DCTCP)", SIGCOMM 2010; RFC 8257).
//!
//! Reno's growth; on an ECE the window shrinks by `alpha / 2`, where `alpha` is an
//! EWMA (gain `1 / 2^dctcp_shift_g`) of the fraction of packets delivered CE-marked
//! per window of data. The receiver echoes each CE mark exactly: ECE follows the CE
//! state of the last data segment, and a change of state is ACKed at once (with
//! the ACK it delayed sent first, for the state before). DCTCP needs ECN
//! (`TCP_CONG_NEEDS_ECN`); a connection that did not negotiate it falls back to
//! Reno (`dctcp-reno`).

use super::reno::Reno;
use super::{CaCtx, CaEvent, CaState, CcContext, CcInfo, CeAckState, CongestionOps, CwndState};
use crate::tcp::ecn::TCP_ECN_DEMAND_CWR;
use crate::tcp::Tcb;
use serde::Serialize;

/// `DCTCP_MAX_ALPHA`: alpha is kept scaled to 10 bits.
pub const DCTCP_MAX_ALPHA: u32 = 1024;

/// DCTCP's module parameters (`/sys/module/tcp_dctcp/parameters/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DctcpParams {
    /// `dctcp_shift_g`: g = 1/2^shift_g (0..=10; 4).
    pub shift_g: u32,
    /// `dctcp_alpha_on_init`: alpha at `dctcp_init` (1024).
    pub alpha_on_init: u32,
}

impl Default for DctcpParams {
    fn default() -> DctcpParams {
        DctcpParams {
            shift_g: 4,
            alpha_on_init: DCTCP_MAX_ALPHA,
        }
    }
}

impl DctcpParams {
    /// The module parameters `cfg` holds.
    pub fn from_cfg(cfg: &crate::Config) -> DctcpParams {
        DctcpParams {
            shift_g: cfg.tcp_dctcp_shift_g.min(10),
            alpha_on_init: cfg.tcp_dctcp_alpha_on_init,
        }
    }
}

/// `struct tcp_dctcp_info`, as `TCP_CC_INFO` and `ss -i` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DctcpInfo {
    /// `dctcp_enabled`: 0 once the connection fell back to Reno.
    pub dctcp_enabled: u16,
    /// `dctcp_ce_state`: the receiver's CE state.
    pub dctcp_ce_state: u16,
    /// `dctcp_alpha`, out of 1024.
    pub dctcp_alpha: u32,
    /// `dctcp_ab_ecn`: bytes delivered CE-marked in this observation window.
    pub dctcp_ab_ecn: u32,
    /// `dctcp_ab_tot`: bytes delivered in this observation window.
    pub dctcp_ab_tot: u32,
}

impl DctcpInfo {
    /// The 16 bytes `TCP_CC_INFO` copies out (`struct tcp_dctcp_info`).
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..2].copy_from_slice(&self.dctcp_enabled.to_ne_bytes());
        b[2..4].copy_from_slice(&self.dctcp_ce_state.to_ne_bytes());
        b[4..8].copy_from_slice(&self.dctcp_alpha.to_ne_bytes());
        b[8..12].copy_from_slice(&self.dctcp_ab_ecn.to_ne_bytes());
        b[12..16].copy_from_slice(&self.dctcp_ab_tot.to_ne_bytes());
        b
    }
}

/// `struct dctcp` and its ops; `reno` is `dctcp_reno`, the fallback without ECN.
#[derive(Debug, Clone)]
pub struct Dctcp {
    params: DctcpParams,
    /// `old_delivered`: `tp->delivered` when this observation window began.
    old_delivered: u64,
    /// `old_delivered_ce`.
    old_delivered_ce: u64,
    /// `prior_rcv_nxt` and `ce_state`.
    ce: CeAckState,
    /// `dctcp_alpha`, out of [`DCTCP_MAX_ALPHA`].
    alpha: u32,
    /// `next_seq`: the window ends when `snd_una` reaches it (stream offset).
    next_seq: u64,
    /// `loss_cwnd`: cwnd at the last reduction, for `dctcp_cwnd_undo`.
    loss_cwnd: u32,
    /// `icsk_ca_ops == &dctcp_reno`: no ECN was negotiated.
    reno: bool,
}

impl Dctcp {
    /// A DCTCP socket before `dctcp_init` (its private area zeroed, as
    /// `tcp_assign_congestion_control` leaves it).
    pub fn new(params: DctcpParams) -> Dctcp {
        Dctcp {
            params,
            old_delivered: 0,
            old_delivered_ce: 0,
            ce: CeAckState::default(),
            alpha: 0,
            next_seq: 0,
            loss_cwnd: 0,
            reno: false,
        }
    }

    /// `dctcp_alpha`.
    pub fn alpha(&self) -> u32 {
        self.alpha
    }

    /// `dctcp_reset`: a new observation window, from `snd_nxt`.
    fn reset(&mut self, snd_nxt: u64, delivered: u64, delivered_ce: u64) {
        self.next_seq = snd_nxt;
        self.old_delivered = delivered;
        self.old_delivered_ce = delivered_ce;
    }

    /// `dctcp_react_to_loss`: Reno's halving.
    fn react_to_loss(&mut self, cw: &mut CwndState) {
        self.loss_cwnd = cw.snd_cwnd;
        cw.snd_ssthresh = (cw.snd_cwnd >> 1).max(2);
    }
}

/// `min_not_zero`.
fn min_not_zero(x: u32, y: u32) -> u32 {
    match (x, y) {
        (0, y) => y,
        (x, 0) => x,
        (x, y) => x.min(y),
    }
}

impl CongestionOps for Dctcp {
    fn name(&self) -> &'static str {
        match self.reno {
            false => "dctcp",
            true => "dctcp-reno",
        }
    }

    /// `dctcp_ssthresh`: cwnd less `cwnd * alpha / 2` (alpha out of 1024), at least
    /// 2; `tcp_reno_ssthresh` after the fallback.
    fn ssthresh(&mut self, cw: &CwndState) -> u32 {
        if self.reno {
            return (cw.snd_cwnd >> 1).max(2);
        }
        self.loss_cwnd = cw.snd_cwnd;
        let cut = cw.snd_cwnd.wrapping_mul(self.alpha) >> 11;
        cw.snd_cwnd.wrapping_sub(cut).max(2)
    }

    /// `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, cw: &mut CwndState, acked: u32, ctx: &CaCtx) {
        Reno.cong_avoid(cw, acked, ctx);
    }

    /// `dctcp_state`: entering Recovery from another state halves as Reno (an RTO
    /// is handled in `cwnd_event`, so that only one reduction per RTT is made).
    fn set_state(&mut self, cw: &mut CwndState, old: CaState, new: CaState) {
        if !self.reno && new == CaState::Recovery && old != new {
            self.react_to_loss(cw);
        }
    }

    /// `dctcp_cwnd_event`: `CA_EVENT_LOSS` halves; the ECN events are the engine's
    /// (`Tcb::dctcp_ece_ack_update` through [`CongestionOps::ce_ack_state`]).
    fn cwnd_event(&mut self, cw: &mut CwndState, ev: CaEvent, _ctx: &CaCtx) {
        if !self.reno && ev == CaEvent::Loss {
            self.react_to_loss(cw);
        }
    }

    /// `dctcp_cwnd_undo` (`tcp_reno_undo_cwnd` after the fallback).
    fn undo_cwnd(&mut self, cw: &CwndState, prior_cwnd: u32) -> u32 {
        match self.reno {
            false => cw.snd_cwnd.max(self.loss_cwnd),
            true => cw.snd_cwnd.max(prior_cwnd),
        }
    }

    /// `dctcp_init`: with ECN negotiated, alpha from `dctcp_alpha_on_init` and a
    /// first observation window; without, `dctcp_reno` from now on (and the
    /// engine stops sending ECT: [`CongestionOps::needs_ecn`] is false).
    fn init(&mut self, ctx: &mut CcContext) {
        if !ctx.ecn_ok {
            self.reno = true;
            return;
        }
        self.ce.prior_rcv_nxt = ctx.rcv_nxt;
        self.alpha = self.params.alpha_on_init.min(DCTCP_MAX_ALPHA);
        self.loss_cwnd = 0;
        self.ce.ce_state = 0;
        self.reset(ctx.snd_nxt, ctx.delivered, ctx.delivered_ce);
    }

    /// `dctcp_shift_g` and `dctcp_alpha_on_init` are read at each use.
    fn module_params_changed(&mut self, cfg: &crate::Config) {
        self.params = DctcpParams::from_cfg(cfg);
    }

    fn needs_ecn(&self) -> bool {
        !self.reno
    }

    /// `dctcp_update_alpha`: once `snd_una` passes the window's end, alpha =
    /// (1 - g) * alpha + g * F, F the fraction of the window's delivered packets
    /// that an ECE ACK reported.
    fn in_ack_event(&mut self, _flags: u32, ctx: &CaCtx) {
        if self.reno || ctx.snd_una < self.next_seq {
            return;
        }
        let mut delivered_ce = ctx.delivered_ce.wrapping_sub(self.old_delivered_ce) as u32;
        let mut alpha = self.alpha;
        let g = self.params.shift_g;
        alpha -= min_not_zero(alpha, alpha >> g);
        if delivered_ce != 0 {
            let delivered = ctx.delivered.wrapping_sub(self.old_delivered) as u32;
            // "If dctcp_shift_g == 1, a 32bit value would overflow after 8 M
            // packets."
            delivered_ce <<= 10 - g;
            delivered_ce /= delivered.max(1);
            alpha = alpha.saturating_add(delivered_ce).min(DCTCP_MAX_ALPHA);
        }
        self.alpha = alpha;
        self.reset(ctx.snd_nxt, ctx.delivered, ctx.delivered_ce);
    }

    fn ce_ack_state(&mut self) -> Option<&mut CeAckState> {
        match self.reno {
            false => Some(&mut self.ce),
            true => None,
        }
    }

    /// `dctcp_get_info`: all zero but `dctcp_enabled` after the fallback.
    fn get_info(&self, ctx: &CaCtx) -> Option<CcInfo> {
        let mut i = DctcpInfo::default();
        if !self.reno {
            i.dctcp_enabled = 1;
            i.dctcp_ce_state = self.ce.ce_state as u16;
            i.dctcp_alpha = self.alpha;
            let ecn = ctx.delivered_ce.wrapping_sub(self.old_delivered_ce) as u32;
            let tot = ctx.delivered.wrapping_sub(self.old_delivered) as u32;
            i.dctcp_ab_ecn = ctx.mss.wrapping_mul(ecn);
            i.dctcp_ab_tot = ctx.mss.wrapping_mul(tot);
        }
        Some(CcInfo::Dctcp(i))
    }
}

impl Tcb {
    /// `tcp_ca_event(sk, CA_EVENT_ECN_IS_CE / CA_EVENT_ECN_NO_CE)` for a congestion
    /// control that keeps the receiver's CE state machine: `dctcp_ece_ack_update`
    /// (tcp_dctcp.h). When the CE state changes, an ACK the delayed-ACK timer holds
    /// goes first, for `prior_rcv_nxt` and with the old state's ECE
    /// (`__tcp_send_ack(sk, prior_rcv_nxt)`), and this segment is ACKed at once
    /// (`ICSK_ACK_NOW`). ECE then follows the new state (`dctcp_ece_ack_cwr`).
    pub(crate) fn dctcp_ece_ack_update(&mut self, ctx: &mut crate::tcp::Ctx, is_ce: bool) {
        let Some(st) = self.cc.ce_ack_state().copied() else {
            return;
        };
        let new_ce_state = is_ce as u32;
        if st.ce_state != new_ce_state {
            if self.ack.timeout.is_some() {
                self.dctcp_ece_ack_cwr(st.ce_state);
                self.send_ack_for(ctx, st.prior_rcv_nxt);
            }
            self.ack.now = true;
        }
        if let Some(s) = self.cc.ce_ack_state() {
            s.prior_rcv_nxt = self.rcv_nxt;
            s.ce_state = new_ce_state;
        }
        self.dctcp_ece_ack_cwr(new_ce_state);
    }

    /// `dctcp_ece_ack_cwr`: ECE on our ACKs while the state is CE.
    fn dctcp_ece_ack_cwr(&mut self, ce_state: u32) {
        match ce_state {
            1 => self.ecn_flags |= TCP_ECN_DEMAND_CWR,
            _ => self.ecn_flags &= !TCP_ECN_DEMAND_CWR,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(snd_una: u64, snd_nxt: u64, delivered: u64, delivered_ce: u64) -> CaCtx {
        CaCtx {
            snd_una,
            snd_nxt,
            delivered,
            delivered_ce,
            mss: 1000,
            ..Default::default()
        }
    }

    /// An established DCTCP socket (ECN negotiated) at window end `snd_nxt`.
    fn established(params: DctcpParams) -> Dctcp {
        let mut d = Dctcp::new(params);
        d.ce.ce_state = 1;
        d.init_for_test(true, 0);
        d
    }

    impl Dctcp {
        fn init_for_test(&mut self, ecn_ok: bool, snd_nxt: u64) {
            let mut cw = CwndState::new(10);
            let now = crate::time::Instant::ZERO;
            super::super::with_test_cc_context(&mut cw, now, (snd_nxt, 7), ecn_ok, |c| {
                self.init(c)
            });
        }
    }

    #[test]
    fn init_takes_alpha_on_init_capped_and_falls_back_without_ecn() {
        let d = established(DctcpParams::default());
        assert_eq!(d.alpha, 1024);
        assert_eq!(
            d.ce,
            CeAckState {
                prior_rcv_nxt: 7,
                ce_state: 0
            }
        );
        assert!(d.needs_ecn());
        let d = established(DctcpParams {
            alpha_on_init: 5000,
            ..DctcpParams::default()
        });
        assert_eq!(d.alpha, DCTCP_MAX_ALPHA, "min(dctcp_alpha_on_init, 1024)");
        let mut r = Dctcp::new(DctcpParams::default());
        r.init_for_test(false, 0);
        assert_eq!(r.name(), "dctcp-reno");
        assert!(!r.needs_ecn(), "INET_ECN_dontxmit");
        assert!(r.ce_ack_state().is_none());
        let cw = CwndState {
            snd_cwnd: 100,
            ..CwndState::new(10)
        };
        assert_eq!(r.ssthresh(&cw), 50, "tcp_reno_ssthresh");
        assert_eq!(r.undo_cwnd(&cw, 120), 120, "tcp_reno_undo_cwnd");
        assert_eq!(
            r.get_info(&ctx(0, 0, 0, 0)),
            Some(CcInfo::Dctcp(DctcpInfo::default())),
            "dctcp_enabled 0, the rest zero"
        );
    }

    #[test]
    fn ssthresh_cuts_alpha_over_two() {
        let mut d = established(DctcpParams::default());
        let cw = |c| CwndState {
            snd_cwnd: c,
            ..CwndState::new(10)
        };
        // alpha 1024: cwnd - cwnd/2.
        assert_eq!(d.ssthresh(&cw(100)), 50);
        assert_eq!(d.loss_cwnd, 100);
        d.alpha = 512; // a quarter off
        assert_eq!(d.ssthresh(&cw(100)), 100 - ((100 * 512) >> 11));
        assert_eq!(d.ssthresh(&cw(100)), 75);
        d.alpha = 0;
        assert_eq!(d.ssthresh(&cw(100)), 100, "no marks: no cut");
        d.alpha = 1024;
        assert_eq!(d.ssthresh(&cw(3)), 2, "at least 2");
        // Undo returns to the window before the cut.
        assert_eq!(d.undo_cwnd(&cw(2), 0), 3);
    }

    #[test]
    fn alpha_converges_to_the_marked_fraction() {
        for (marked_of_16, g) in [(4u64, 4u32), (8, 4), (1, 4), (16, 4), (4, 2), (8, 0)] {
            let mut d = established(DctcpParams {
                shift_g: g,
                ..DctcpParams::default()
            });
            let (mut una, mut delivered, mut ce) = (0u64, 0u64, 0u64);
            for _ in 0..400 {
                // One window: 16 packets delivered, `marked_of_16` of them by ECE
                // ACKs; the window ends as snd_una reaches next_seq.
                delivered += 16;
                ce += marked_of_16;
                una += 16_000;
                d.in_ack_event(CA_ACK_SLOWPATH_FOR_TEST, &ctx(una, una, delivered, ce));
            }
            let want = (marked_of_16 * 1024 / 16) as i64;
            // The fixed point loses up to 2^g - 1 to the truncated decay.
            let slack = (1i64 << g) + 1;
            assert!(
                (d.alpha as i64 - want).abs() <= slack,
                "F = {marked_of_16}/16, g = 1/2^{g}: alpha {} vs {want}",
                d.alpha
            );
        }
    }

    const CA_ACK_SLOWPATH_FOR_TEST: u32 = super::super::CA_ACK_SLOWPATH;

    #[test]
    fn alpha_moves_once_per_window_by_g() {
        let mut d = established(DctcpParams::default());
        // Window [0, 10000): ACKs short of next_seq change nothing.
        d.reset(10_000, 0, 0);
        d.in_ack_event(0, &ctx(5_000, 12_000, 5, 5));
        assert_eq!(d.alpha, 1024);
        // The window ends with nothing marked: alpha -= alpha >> 4.
        d.in_ack_event(0, &ctx(10_000, 20_000, 10, 0));
        assert_eq!(d.alpha, 1024 - 64);
        assert_eq!(d.next_seq, 20_000, "next window to snd_nxt");
        // Half marked: alpha = 960 - 60 + (5 << 6) / 10 = 932.
        d.in_ack_event(0, &ctx(20_000, 30_000, 20, 5));
        assert_eq!(d.alpha, 960 - 60 + (5 << 6) / 10);
        // A small alpha decays to zero (min_not_zero).
        d.alpha = 15;
        d.in_ack_event(0, &ctx(30_000, 40_000, 30, 5));
        assert_eq!(d.alpha, 0);
        // get_info: the bytes of the window so far.
        d.reset(50_000, 30, 5);
        match d.get_info(&ctx(40_000, 50_000, 34, 6)) {
            Some(CcInfo::Dctcp(i)) => {
                assert_eq!(i.dctcp_enabled, 1);
                assert_eq!(i.dctcp_ab_ecn, 1000);
                assert_eq!(i.dctcp_ab_tot, 4000);
            }
            None => panic!("dctcp exports tcp_dctcp_info"),
        }
    }

    #[test]
    fn recovery_and_rto_halve_as_reno() {
        let mut d = established(DctcpParams::default());
        d.alpha = 0;
        let mut cw = CwndState {
            snd_cwnd: 40,
            ..CwndState::new(10)
        };
        // tcp_enter_recovery: ssthresh() first (no marks: no cut), then Recovery.
        cw.snd_ssthresh = d.ssthresh(&cw);
        assert_eq!(cw.snd_ssthresh, 40);
        d.set_state(&mut cw, CaState::Open, CaState::Recovery);
        assert_eq!(cw.snd_ssthresh, 20, "dctcp_react_to_loss");
        assert_eq!(d.loss_cwnd, 40);
        // tcp_set_ca_state(Recovery) again in Recovery: dctcp_state compares with
        // icsk_ca_state, no second reduction.
        d.set_state(&mut cw, CaState::Recovery, CaState::Recovery);
        assert_eq!(cw.snd_ssthresh, 20);
        cw.snd_ssthresh = 1000;
        d.set_state(&mut cw, CaState::Recovery, CaState::Cwr);
        assert_eq!(cw.snd_ssthresh, 1000, "CWR is alpha's");
        cw.snd_cwnd = 30;
        d.cwnd_event(&mut cw, CaEvent::Loss, &CaCtx::default());
        assert_eq!((cw.snd_ssthresh, d.loss_cwnd), (15, 30));
    }

    /// The ACKs `st` holds: (ack offset from the peer's ISN + 1, ECE, IP ECN).
    fn acks(t: &Tcb, st: &mut crate::tcp::TestStack) -> Vec<(u32, bool, u8)> {
        use lowtide_wire::ip::IpRepr;
        use lowtide_wire::tcp::{TcpFlags, TcpRepr};
        st.out
            .drain(..)
            .map(|tx| {
                let ip = IpRepr::parse(&tx.packet, false).expect("ip");
                let (th, _) = TcpRepr::parse(&tx.packet[ip.header_len..]).expect("tcp");
                let ack = th.ack.wrapping_sub(t.rcv_seq(1).0) + 1;
                (ack, th.flags.contains(TcpFlags::ECE), ip.ecn)
            })
            .collect()
    }

    #[test]
    fn a_ce_change_is_acked_at_once_after_the_delayed_ack_of_the_old_state() {
        use crate::tcp::ecn::{INET_ECN_CE, INET_ECN_ECT_0, TCP_ECN_OK};
        use crate::tcp::TcpState;
        let cfg = crate::Config::default();
        let mut st = crate::tcp::TestStack::default();
        let now = crate::time::Instant(1_000_000_000);
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.ecn_flags = TCP_ECN_OK;
        t.cc = Box::new(established(DctcpParams::default()));
        t.cc.ce_ack_state().unwrap().prior_rcv_nxt = 1;
        // Segment [1, 1001) arrives ECT: no change of state, nothing sent.
        t.rcv_nxt = 1001;
        t.ecn_check_ce(&mut st.ctx(&cfg, now, false), INET_ECN_ECT_0);
        assert!(!t.ack.now && st.out.is_empty());
        // Its ACK is delayed; [1001, 2001) arrives CE: the delayed ACK goes first,
        // for 1001 and without ECE (the state before), then this one at once.
        t.ack.timeout = Some(now);
        t.ack.pending = true;
        t.rcv_nxt = 2001;
        t.ecn_check_ce(&mut st.ctx(&cfg, now, false), INET_ECN_CE);
        assert_eq!(acks(&t, &mut st), vec![(1001, false, INET_ECN_ECT_0)]);
        assert!(
            t.ack.timeout.is_some() && t.ack.pending,
            "the owed ACK stays owed"
        );
        assert!(t.ack.now, "ICSK_ACK_NOW");
        assert_eq!(
            t.cc.ce_ack_state().copied(),
            Some(CeAckState {
                prior_rcv_nxt: 2001,
                ce_state: 1
            })
        );
        assert!(t.ecn_flags & TCP_ECN_DEMAND_CWR != 0, "ECE while CE");
        t.send_ack(&mut st.ctx(&cfg, now, false));
        assert_eq!(acks(&t, &mut st), vec![(2001, true, INET_ECN_ECT_0)]);
        assert!(!t.ack.now && t.ack.timeout.is_none());
        // Another CE: no change, no immediate ACK (RFC 3168's quick ACKs are for a
        // first CE only, and DCTCP's CE already demanded CWR).
        t.rcv_nxt = 3001;
        t.ecn_check_ce(&mut st.ctx(&cfg, now, false), INET_ECN_CE);
        assert!(!t.ack.now && st.out.is_empty());
        // Back to ECT with no ACK delayed: no extra ACK, ECE off, ACK now.
        t.rcv_nxt = 4001;
        t.ecn_check_ce(&mut st.ctx(&cfg, now, false), INET_ECN_ECT_0);
        assert!(t.ack.now && st.out.is_empty());
        assert_eq!(t.ecn_flags & TCP_ECN_DEMAND_CWR, 0);
        t.send_ack(&mut st.ctx(&cfg, now, false));
        assert_eq!(acks(&t, &mut st), vec![(4001, false, INET_ECN_ECT_0)]);
    }

    #[test]
    fn module_parameters_follow_the_config() {
        let mut cfg = crate::Config::default();
        assert_eq!(DctcpParams::from_cfg(&cfg), DctcpParams::default());
        cfg.set("module.tcp_dctcp.dctcp_shift_g", "2").unwrap();
        cfg.set("module.tcp_dctcp.dctcp_alpha_on_init", "0")
            .unwrap();
        assert!(cfg.set("module.tcp_dctcp.dctcp_shift_g", "11").is_err());
        let mut d = established(DctcpParams::default());
        d.module_params_changed(&cfg);
        assert_eq!(
            d.params,
            DctcpParams {
                shift_g: 2,
                alpha_on_init: 0
            }
        );
        d.in_ack_event(0, &ctx(0, 0, 0, 0));
        assert_eq!(d.alpha, 1024 - 256, "g = 1/4 at once");
    }
}

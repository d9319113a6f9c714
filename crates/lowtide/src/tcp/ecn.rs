//! Explicit Congestion Notification, RFC 3168, as Linux does it (the RFC 3168 parts
//! of include/net/tcp_ecn.h, tcp_input.c and tcp_output.c): negotiation in the
//! handshake (`net.ipv4.tcp_ecn`: 1 asks and accepts, 2 only accepts, 0 neither), ECT(0)
//! on new data, ECE echoed from a CE mark until the sender's CWR, and one cwnd
//! reduction per window for an ECE (`tcp_enter_cwr`). AccECN (tcp_ecn 3-5) is not
//! modelled.
//!
//! <https://www.rfc-editor.org/rfc/rfc3168#section-6.1>

use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::config::Config;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// `TCP_ECN_OK`: ECN was negotiated.
pub(crate) const TCP_ECN_OK: u8 = 1;
/// `TCP_ECN_QUEUE_CWR`: the next new data segment carries CWR.
pub(crate) const TCP_ECN_QUEUE_CWR: u8 = 2;
/// `TCP_ECN_DEMAND_CWR`: a CE mark arrived; ECE on every segment until CWR.
pub(crate) const TCP_ECN_DEMAND_CWR: u8 = 4;
/// `TCP_ECN_SEEN`: the peer sent ECT (or CE) at least once.
pub(crate) const TCP_ECN_SEEN: u8 = 8;

/// `INET_ECN_NOT_ECT`, `INET_ECN_ECT_0`, `INET_ECN_CE`: the IP header's ECN field
/// ([RFC 3168 section 5](https://www.rfc-editor.org/rfc/rfc3168#section-5)).
pub(crate) const INET_ECN_NOT_ECT: u8 = 0;
pub(crate) const INET_ECN_ECT_0: u8 = 2;
pub(crate) const INET_ECN_CE: u8 = 3;
/// `INET_ECN_MASK`: the ECN bits of the TOS / traffic class byte.
pub(crate) const INET_ECN_MASK: u8 = 3;

impl Tcb {
    /// `tcp_ecn_send_syn`: an active open asks for ECN with `tcp_ecn = 1`, or when
    /// its congestion control needs ECN (`tcp_ca_needs_ecn`, DCTCP).
    pub(crate) fn ecn_send_syn(&mut self, cfg: &Config) {
        // A route with `features ecn` asks for it too.
        let use_ecn = cfg.tcp_ecn == 1 || self.cc.needs_ecn() || self.dst.metrics.ecn();
        self.ecn_flags = if use_ecn { TCP_ECN_OK } else { 0 };
    }

    /// The ECN flags of our SYN or SYN-ACK: ECE|CWR on a SYN that asks for ECN, but
    /// not on a retransmitted SYN with `tcp_ecn_fallback` (`tcp_ecn_clear_syn`: a
    /// middlebox may drop ECN SYNs); ECE on a SYN-ACK that agrees
    /// (`tcp_ecn_make_synack`).
    pub(crate) fn ecn_syn_flags(&self, cfg: &Config) -> TcpFlags {
        if self.ecn_flags & TCP_ECN_OK == 0 {
            return TcpFlags(0);
        }
        match self.state {
            TcpState::SynSent if cfg.tcp_ecn_fallback && self.syn_sent_again() => TcpFlags(0),
            TcpState::SynSent => TcpFlags::ECE | TcpFlags::CWR,
            _ => TcpFlags::ECE,
        }
    }

    /// `tcp_ecn_rcv_synack`: a SYN-ACK without ECE, or with CWR too, refuses ECN.
    /// `tcp_ecn_rcv_syn` (simultaneous open): a SYN without both ECE and CWR does.
    pub(crate) fn ecn_rcv_syn(&mut self, th: &TcpRepr) {
        let (ece, cwr) = (
            th.flags.contains(TcpFlags::ECE),
            th.flags.contains(TcpFlags::CWR),
        );
        let refused = if th.flags.contains(TcpFlags::ACK) {
            !ece || cwr
        } else {
            !ece || !cwr
        };
        if refused {
            self.ecn_flags &= !TCP_ECN_OK;
        }
    }

    /// `tcp_ecn_create_request` + `tcp_ecn_openreq_child`: a SYN with ECE and CWR,
    /// itself not ECT (an ECT SYN comes from a broken middlebox), gets ECN when
    /// `tcp_ecn` is not 0; any such SYN does when the listener's congestion control
    /// needs ECN (`tcp_ca_needs_ecn(listen_sk)`: DCTCP's SYNs are ECT).
    pub(crate) fn ecn_create_request(&mut self, cfg: &Config, ip: &IpRepr, th: &TcpRepr) {
        let needs = self.cc.needs_ecn();
        self.ecn_flags = if syn_agrees(cfg, ip, th, self.dst.metrics.ecn(), needs) {
            TCP_ECN_OK
        } else {
            0
        };
    }

    /// `cookie_ecn_ok`: a SYN cookie's timestamp remembers ECN; it holds while
    /// `tcp_ecn` is on.
    pub(crate) fn ecn_cookie_ok(&mut self, cfg: &Config, ts_ecn: bool) {
        self.ecn_flags = if ts_ecn && cfg.tcp_ecn != 0 {
            TCP_ECN_OK
        } else {
            0
        };
    }

    /// `tcp_ecn_send` for a segment other than a SYN: new data is sent ECT(0) and
    /// carries a queued CWR; ACKs and retransmissions are not ECT, unless the
    /// congestion control needs ECN (the socket's own ECT, `INET_ECN_xmit` at
    /// `tcp_assign_congestion_control`, which `tcp_ecn_send` then leaves alone). ECE
    /// while a CE mark waits for the sender's CWR. Returns the IP ECN field and the
    /// TCP flags to add.
    pub(crate) fn ecn_send(&mut self, new_data: bool) -> (u8, TcpFlags) {
        let sk_ect = match self.cc.needs_ecn() {
            true => INET_ECN_ECT_0,
            false => INET_ECN_NOT_ECT,
        };
        if self.ecn_flags & TCP_ECN_OK == 0 {
            return (sk_ect, TcpFlags(0));
        }
        let mut flags = TcpFlags(0);
        let mut ip_ecn = sk_ect;
        if new_data {
            ip_ecn = INET_ECN_ECT_0;
            if self.ecn_flags & TCP_ECN_QUEUE_CWR != 0 {
                self.ecn_flags &= !TCP_ECN_QUEUE_CWR;
                flags |= TcpFlags::CWR;
            }
        }
        if self.ecn_flags & TCP_ECN_DEMAND_CWR != 0 {
            flags |= TcpFlags::ECE;
        }
        (ip_ecn, flags)
    }

    /// `tcp_ecn_check_ce` on received data (`tcp_event_data_recv`, out-of-order
    /// queueing): a CE mark demands CWR and is ACKed at once; not-ECT data after ECT
    /// was seen is probably a retransmission, also ACKed quickly. A congestion
    /// control that needs ECN hears of every CE and ECT segment first
    /// (`CA_EVENT_ECN_IS_CE`/`CA_EVENT_ECN_NO_CE`: DCTCP's CE state machine).
    pub(crate) fn ecn_check_ce(&mut self, ctx: &mut Ctx, ip_ecn: u8) {
        if self.ecn_flags & TCP_ECN_OK == 0 {
            return;
        }
        match ip_ecn {
            INET_ECN_NOT_ECT => {
                if self.ecn_flags & TCP_ECN_SEEN != 0 {
                    self.enter_quickack_mode(2);
                }
            }
            INET_ECN_CE => {
                if self.cc.needs_ecn() {
                    self.dctcp_ece_ack_update(ctx, true);
                }
                if self.ecn_flags & TCP_ECN_DEMAND_CWR == 0 {
                    // Better not delay ACKs: the sender's cwnd may be very low.
                    self.enter_quickack_mode(2);
                    self.ecn_flags |= TCP_ECN_DEMAND_CWR;
                }
                self.ecn_flags |= TCP_ECN_SEEN;
            }
            _ => {
                if self.cc.needs_ecn() {
                    self.dctcp_ece_ack_update(ctx, false);
                }
                self.ecn_flags |= TCP_ECN_SEEN;
            }
        }
    }

    /// `tcp_ecn_accept_cwr` (in `tcp_ack`, for pure ACKs too, as Linux 5.10+): the
    /// sender reduced its window; a data segment with CWR is ACKed at once, since
    /// the sender's cwnd may be down to one segment.
    pub(crate) fn ecn_accept_cwr(&mut self, th: &TcpRepr, payload_len: usize) {
        if th.flags.contains(TcpFlags::CWR) {
            self.ecn_flags &= !TCP_ECN_DEMAND_CWR;
            if payload_len > 0 {
                self.ack.now = true;
            }
        }
    }

    /// `tcp_ecn_rcv_ecn_echo`: an ACK with ECE on an ECN connection (`FLAG_ECE`).
    pub(crate) fn ecn_rcv_ecn_echo(&self, th: &TcpRepr) -> bool {
        th.flags.contains(TcpFlags::ECE)
            && !th.flags.contains(TcpFlags::SYN)
            && self.ecn_flags & TCP_ECN_OK != 0
    }

    /// `tcp_ecn_queue_cwr`: a cwnd reduction began; tell the receiver with CWR.
    pub(crate) fn ecn_queue_cwr(&mut self) {
        if self.ecn_flags & TCP_ECN_OK != 0 {
            self.ecn_flags |= TCP_ECN_QUEUE_CWR;
        }
    }

    /// `tcp_ecn_withdraw_cwr`: the reduction was undone; no CWR to send.
    pub(crate) fn ecn_withdraw_cwr(&mut self) {
        self.ecn_flags &= !TCP_ECN_QUEUE_CWR;
    }
}

/// `tcp_ecn_create_request`'s rule: a SYN with ECE and CWR, not itself ECT, while
/// `tcp_ecn` is not 0 or the route has `features ecn`; or any SYN with ECE and CWR
/// when the listener's congestion control needs ECN (`ca_needs_ecn`). An ECT SYN
/// may still have ECN when it sets AE or a reserved bit (`th->ae`, `th->res1`): a
/// future TCP extension such as AccECN may send ECT SYNs
/// ([RFC 8311 section 4.3](https://www.rfc-editor.org/rfc/rfc8311#section-4.3)).
pub(crate) fn syn_agrees(
    cfg: &Config,
    ip: &IpRepr,
    th: &TcpRepr,
    route_ecn: bool,
    ca_needs_ecn: bool,
) -> bool {
    let th_ecn = th.flags.contains(TcpFlags::ECE) && th.flags.contains(TcpFlags::CWR);
    let ect = ip.ecn != INET_ECN_NOT_ECT;
    let extension = th.flags.intersects(TcpFlags::AE | TcpFlags::RES1);
    th_ecn && (((!ect || extension) && (cfg.tcp_ecn != 0 || route_ecn)) || ca_needs_ecn)
}

/// Counts `TcpExtTCPDeliveredCE` as `tcp_newly_delivered` does for an ECE ACK.
pub(crate) fn count_delivered_ce(ctx: &mut Ctx, delivered: u64) {
    ctx.mib
        .add(crate::mib::Mib::TcpExtTCPDeliveredCE, delivered);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;
    use lowtide_wire::ip::PROTO_TCP;

    fn syn(flags: TcpFlags) -> TcpRepr {
        TcpRepr {
            flags,
            ..TcpRepr::default()
        }
    }

    fn ip(ecn: u8) -> IpRepr {
        IpRepr {
            src: "10.0.0.2".parse().expect("addr"),
            dst: "10.0.0.1".parse().expect("addr"),
            protocol: PROTO_TCP,
            hop_limit: 64,
            ecn,
            tos: 0,
            header_len: 20,
            payload_len: 20,
        }
    }

    fn cfg(ecn: u8) -> Config {
        Config {
            tcp_ecn: ecn,
            ..Config::default()
        }
    }

    #[test]
    fn only_tcp_ecn_1_asks_and_a_retransmitted_syn_falls_back() {
        let mut t = Tcb::for_test(&cfg(1));
        t.state = TcpState::SynSent;
        t.ecn_send_syn(&cfg(1));
        let none = crate::tcp::rtx::skb::SkbData::EMPTY;
        let syn = crate::tcp::rtx::skb::FLAG_SYN;
        t.connect_queue_skb(crate::Instant::ZERO, 0, none, syn, 0);
        assert_eq!(t.ecn_syn_flags(&cfg(1)), TcpFlags::ECE | TcpFlags::CWR);
        // __tcp_retransmit_skb marks the queued SYN sent again before it leaves.
        let ever = crate::tcp::rtx::skb::EVER_RETRANS;
        t.rtx.update(0, ever, 0);
        assert_eq!(t.ecn_syn_flags(&cfg(1)), TcpFlags(0), "tcp_ecn_fallback");
        let mut no_fallback = cfg(1);
        no_fallback.tcp_ecn_fallback = false;
        assert_eq!(t.ecn_syn_flags(&no_fallback), TcpFlags::ECE | TcpFlags::CWR);
        for sysctl in [0, 2] {
            t.ecn_send_syn(&cfg(sysctl));
            assert_eq!(t.ecn_flags, 0, "tcp_ecn={sysctl} does not ask");
        }
    }

    #[test]
    fn the_synack_decides_for_the_client() {
        let mut t = Tcb::for_test(&cfg(1));
        for (flags, ok) in [
            (TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE, true),
            (TcpFlags::SYN | TcpFlags::ACK, false),
            (
                TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE | TcpFlags::CWR,
                false,
            ),
        ] {
            t.ecn_flags = TCP_ECN_OK;
            t.ecn_rcv_syn(&syn(flags));
            assert_eq!(t.ecn_flags & TCP_ECN_OK != 0, ok, "{flags:?}");
        }
        // Simultaneous open: the peer's SYN must carry both.
        t.ecn_flags = TCP_ECN_OK;
        t.ecn_rcv_syn(&syn(TcpFlags::SYN | TcpFlags::ECE));
        assert_eq!(t.ecn_flags, 0);
    }

    #[test]
    fn a_listener_agrees_unless_off_or_the_syn_is_ect() {
        let ecn_syn = syn(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
        let mut t = Tcb::for_test(&cfg(2));
        for (sysctl, ip_ecn, th, ok) in [
            (2, INET_ECN_NOT_ECT, ecn_syn, true),
            (1, INET_ECN_NOT_ECT, ecn_syn, true),
            (0, INET_ECN_NOT_ECT, ecn_syn, false),
            (2, INET_ECN_ECT_0, ecn_syn, false),
            (
                2,
                INET_ECN_NOT_ECT,
                syn(TcpFlags::SYN | TcpFlags::ECE),
                false,
            ),
            // RFC 8311 section 4.3: AE or a reserved bit makes an ECT SYN acceptable.
            (2, INET_ECN_ECT_0, syn(ecn_syn.flags | TcpFlags::AE), true),
            (1, INET_ECN_CE, syn(ecn_syn.flags | TcpFlags(0x800)), true),
            (0, INET_ECN_ECT_0, syn(ecn_syn.flags | TcpFlags::AE), false),
            (
                2,
                INET_ECN_ECT_0,
                syn(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::AE),
                false,
            ),
        ] {
            t.ecn_create_request(&cfg(sysctl), &ip(ip_ecn), &th);
            assert_eq!(
                t.ecn_flags == TCP_ECN_OK,
                ok,
                "tcp_ecn={sysctl} ect={ip_ecn}"
            );
        }
        t.state = TcpState::SynRecv;
        t.ecn_flags = TCP_ECN_OK;
        assert_eq!(
            t.ecn_syn_flags(&cfg(2)),
            TcpFlags::ECE,
            "SYN-ACK: ECE alone"
        );
    }

    #[test]
    fn ect0_on_new_data_cwr_once_and_ece_until_cwr() {
        let mut t = Tcb::for_test(&cfg(1));
        assert_eq!(t.ecn_send(true), (INET_ECN_NOT_ECT, TcpFlags(0)), "no ECN");
        t.ecn_flags = TCP_ECN_OK;
        assert_eq!(t.ecn_send(true), (INET_ECN_ECT_0, TcpFlags(0)));
        assert_eq!(
            t.ecn_send(false).0,
            INET_ECN_NOT_ECT,
            "ACK or retransmission"
        );
        t.ecn_queue_cwr();
        assert_eq!(t.ecn_send(false).1, TcpFlags(0), "CWR waits for new data");
        assert_eq!(t.ecn_send(true).1, TcpFlags::CWR);
        assert_eq!(t.ecn_send(true).1, TcpFlags(0), "once");
        t.ecn_queue_cwr();
        t.ecn_withdraw_cwr();
        assert_eq!(t.ecn_send(true).1, TcpFlags(0), "undone");
        // Receiver side: CE demands CWR, ECE on every segment until a CWR arrives.
        let c = cfg(1);
        let mut st = crate::tcp::TestStack::default();
        t.ecn_check_ce(&mut st.ctx(&c, Instant::ZERO, false), INET_ECN_CE);
        assert_eq!(t.ecn_send(false).1, TcpFlags::ECE);
        assert_eq!(t.ecn_send(true).1, TcpFlags::ECE);
        t.ecn_accept_cwr(&syn(TcpFlags::ACK | TcpFlags::CWR), 0);
        assert_eq!(t.ecn_send(false).1, TcpFlags(0));
        assert!(!t.ack.now, "a pure ACK with CWR needs no ACK");
        t.ecn_accept_cwr(&syn(TcpFlags::ACK | TcpFlags::CWR), 100);
        assert!(t.ack.now, "data with CWR is ACKed at once");
    }

    #[test]
    fn ce_and_not_ect_after_ect_ask_for_quick_acks() {
        let c = cfg(1);
        let mut st = crate::tcp::TestStack::default();
        let mut t = Tcb::for_test(&c);
        t.ecn_flags = TCP_ECN_OK;
        t.ack.quick = 0;
        t.ecn_check_ce(&mut st.ctx(&c, Instant::ZERO, false), INET_ECN_NOT_ECT);
        assert_eq!(t.ack.quick, 0, "nothing seen yet");
        t.ecn_check_ce(&mut st.ctx(&c, Instant::ZERO, false), INET_ECN_ECT_0);
        assert_eq!(t.ecn_flags, TCP_ECN_OK | TCP_ECN_SEEN);
        t.ecn_check_ce(&mut st.ctx(&c, Instant::ZERO, false), INET_ECN_NOT_ECT);
        assert!(t.ack.quick > 0, "probably a retransmission");
    }

    #[test]
    fn ece_counts_only_on_ecn_connections_and_not_on_syns() {
        let mut t = Tcb::for_test(&cfg(1));
        let ece = syn(TcpFlags::ACK | TcpFlags::ECE);
        assert!(!t.ecn_rcv_ecn_echo(&ece));
        t.ecn_flags = TCP_ECN_OK;
        assert!(t.ecn_rcv_ecn_echo(&ece));
        assert!(!t.ecn_rcv_ecn_echo(&syn(TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE)));
    }

    #[test]
    fn a_cookie_keeps_ecn_while_tcp_ecn_is_on() {
        let mut t = Tcb::for_test(&cfg(2));
        t.ecn_cookie_ok(&cfg(2), true);
        assert_eq!(t.ecn_flags, TCP_ECN_OK);
        t.ecn_cookie_ok(&cfg(0), true);
        assert_eq!(t.ecn_flags, 0, "turned off since the SYN");
        t.ecn_cookie_ok(&cfg(1), false);
        assert_eq!(t.ecn_flags, 0);
    }
}

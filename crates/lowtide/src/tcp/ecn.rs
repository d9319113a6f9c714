//! Explicit Congestion Notification as Linux 6.18 does it (include/net/tcp_ecn.h,
//! tcp_input.c, tcp_output.c, tcp_minisocks.c): RFC 3168's negotiation in the
//! handshake (`net.ipv4.tcp_ecn`: 1 asks and accepts, 2 only accepts, 0 neither),
//! ECT(0) on new data, ECE echoed from a CE mark until the sender's CWR, and one cwnd
//! reduction per window for an ECE (`tcp_enter_cwr`); and Accurate ECN's handshake
//! and receiver side ([RFC 9768](https://www.rfc-editor.org/rfc/rfc9768)): `tcp_ecn`
//! 3 asks for AccECN and 3 to 5 accept it, the SYN-ACK's AE, CWR and ECE (the ACE
//! field) echo the IP-ECN field the SYN arrived with, the third ACK the SYN-ACK's,
//! and every later segment is ECT(0) and carries the count of CE-marked packets
//! received (`received_ce`) in ACE. What the sender makes of ACE and of the peer's
//! AccECN option is `tcp/accecn.rs` (`tcp_accecn_process`); the option we send,
//! `tcp/accecn_opt.rs`.
//!
//! <https://www.rfc-editor.org/rfc/rfc3168#section-6.1>

use super::accecn::TCP_ACCECN_OPT_COUNTER_SEEN;
use super::sock::{AccEcn, Tcb};
use super::{Ctx, TcpState};
use crate::config::Config;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// `TCP_ECN_MODE_RFC3168` (formerly `TCP_ECN_OK`): classic ECN feedback.
pub(crate) const TCP_ECN_OK: u8 = 1;
/// `TCP_ECN_QUEUE_CWR`: the next new data segment carries CWR.
pub(crate) const TCP_ECN_QUEUE_CWR: u8 = 2;
/// `TCP_ECN_DEMAND_CWR`: a CE mark arrived; ECE on every segment until CWR.
pub(crate) const TCP_ECN_DEMAND_CWR: u8 = 4;
/// `TCP_ECN_SEEN`: the peer sent ECT (or CE) at least once.
pub(crate) const TCP_ECN_SEEN: u8 = 8;
/// `TCP_ECN_MODE_ACCECN`: Accurate ECN feedback.
pub(crate) const TCP_ECN_MODE_ACCECN: u8 = 16;
/// `TCP_ECN_MODE_ANY` and `TCP_ECN_MODE_PENDING` (both mode bits: an AccECN SYN
/// sent, its answer not yet seen).
pub(crate) const TCP_ECN_MODE_ANY: u8 = TCP_ECN_OK | TCP_ECN_MODE_ACCECN;

/// `INET_ECN_NOT_ECT`, `INET_ECN_ECT_1`, `INET_ECN_ECT_0`, `INET_ECN_CE`: the IP
/// header's ECN field ([RFC 3168 section 5](https://www.rfc-editor.org/rfc/rfc3168#section-5)).
pub(crate) const INET_ECN_NOT_ECT: u8 = 0;
pub(crate) const INET_ECN_ECT_1: u8 = 1;
pub(crate) const INET_ECN_ECT_0: u8 = 2;
pub(crate) const INET_ECN_CE: u8 = 3;
/// `INET_ECN_MASK`: the ECN bits of the TOS / traffic class byte.
pub(crate) const INET_ECN_MASK: u8 = 3;

/// `TCP_ACCECN_CEP_INIT_OFFSET`: ACE starts at 5, not 0, so that zeroed flags show.
pub(crate) const TCP_ACCECN_CEP_INIT_OFFSET: u32 = 5;
/// `tp->accecn_fail_mode`'s `TCP_ACCECN_ACE_FAIL_RECV`: the peer's ACE feedback
/// was found invalid in the handshake; no more ECT on our packets.
pub(crate) const TCP_ACCECN_ACE_FAIL_RECV: u8 = 2;

/// `GENMASK_U32(31, 22)` of `tcp_ecn_received_counters`: a byte counter whose
/// bits from 22 up changed has grown past a 2^22-byte boundary.
const ACCECN_OPT_BYTES_MASK: u32 = !((1 << 22) - 1);

/// `tcp_ecnfield_to_accecn_optfield`: the fields an order-1 option (ECT(1), CE,
/// ECT(0)) needs to carry the counter of the IP-ECN field `ecnfield`; 0 for
/// not-ECT, which has none.
pub(crate) fn ecnfield_to_accecn_optfield(ecnfield: u8) -> u8 {
    match ecnfield & INET_ECN_MASK {
        INET_ECN_ECT_1 => 1,
        INET_ECN_CE => 2,
        INET_ECN_ECT_0 => 3,
        _ => 0,
    }
}

/// `tcp_accecn_ace`: AE, CWR and ECE as a number, AE the high bit.
pub(crate) fn accecn_ace(flags: TcpFlags) -> u8 {
    ((flags.0 & TcpFlags::ACE.0) >> 6) as u8
}

/// The ACE field `ace` (0-7) as TCP flags.
pub(crate) fn ace_flags(ace: u32) -> TcpFlags {
    TcpFlags(((ace & 7) << 6) as u16)
}

/// `tcp_accecn_extract_syn_ect`: the IP-ECN field our SYN (or SYN-ACK) arrived with,
/// as the peer's ACE echoes it (RFC 9768's table 2; the undefined values read as
/// ECT(1) or ECT(0), as Linux's table has them).
pub(crate) fn accecn_extract_syn_ect(ace: u8) -> u8 {
    const ACE_TO_ECN: [u8; 8] = [
        INET_ECN_ECT_0,
        INET_ECN_ECT_1,
        INET_ECN_NOT_ECT,
        INET_ECN_ECT_1,
        INET_ECN_ECT_0,
        INET_ECN_ECT_1,
        INET_ECN_CE,
        INET_ECN_ECT_1,
    ];
    ACE_TO_ECN[(ace & 7) as usize]
}

/// `tcp_ect_transition_valid`: the IP-ECN field a packet was sent with (`snt`) may
/// have become `rcv` on the path: unchanged, or ECT to another ECT or CE.
pub(crate) fn ect_transition_valid(snt: u8, rcv: u8) -> bool {
    rcv == snt || (snt != INET_ECN_NOT_ECT && rcv != INET_ECN_NOT_ECT && snt != INET_ECN_CE)
}

/// `tcp_accecn_reflector_flags`: the ACE of a SYN-ACK (or third ACK) echoing the
/// IP-ECN field `ect` the SYN (or SYN-ACK) arrived with: 0b010 for Not-ECT, 0b011
/// ECT(1), 0b100 ECT(0), 0b110 CE.
pub(crate) fn accecn_reflector_flags(ect: u8) -> TcpFlags {
    const ECN_TO_ACE: [u32; 4] = [0b010, 0b011, 0b100, 0b110];
    ace_flags(ECN_TO_ACE[(ect & INET_ECN_MASK) as usize])
}

/// `tcp_accecn_syn_requested`: a SYN asks for AccECN unless its AE, CWR and ECE
/// are 000 (no ECN) or 011 (classic ECN); RFC 9768 takes any other combination as
/// 111.
pub(crate) fn accecn_syn_requested(th: &TcpRepr) -> bool {
    let ace = accecn_ace(th.flags);
    ace != 0 && ace != 3
}

impl Tcb {
    /// `tcp_ecn_mode_any`: classic or Accurate ECN (or an AccECN SYN pending).
    pub(crate) fn ecn_mode_any(&self) -> bool {
        self.ecn_flags & TCP_ECN_MODE_ANY != 0
    }

    /// `tcp_ecn_mode_rfc3168`: classic ECN feedback.
    pub(crate) fn ecn_mode_rfc3168(&self) -> bool {
        self.ecn_flags & TCP_ECN_MODE_ANY == TCP_ECN_OK
    }

    /// `tcp_ecn_mode_accecn`: Accurate ECN feedback.
    pub(crate) fn ecn_mode_accecn(&self) -> bool {
        self.ecn_flags & TCP_ECN_MODE_ANY == TCP_ECN_MODE_ACCECN
    }

    /// `tcp_ecn_mode_pending`: our AccECN SYN is not answered yet.
    fn ecn_mode_pending(&self) -> bool {
        self.ecn_flags & TCP_ECN_MODE_ANY == TCP_ECN_MODE_ANY
    }

    /// `tcp_ecn_mode_set`.
    fn ecn_mode_set(&mut self, mode: u8) {
        self.ecn_flags = (self.ecn_flags & !TCP_ECN_MODE_ANY) | mode;
    }

    /// The socket's own ECT (`INET_ECN_xmit` at `tcp_assign_congestion_control` for a
    /// congestion control that needs ECN).
    fn sk_ect(&self) -> u8 {
        match self.cc.needs_ecn() {
            true => INET_ECN_ECT_0,
            false => INET_ECN_NOT_ECT,
        }
    }

    /// `tcp_ecn_send_syn`: an active open asks for AccECN with `tcp_ecn = 3`, for
    /// classic ECN with 1 or 4, or when its congestion control needs ECN
    /// (`tcp_ca_needs_ecn`, DCTCP) or its route has `features ecn`.
    pub(crate) fn ecn_send_syn(&mut self, cfg: &Config) {
        let use_accecn = cfg.tcp_ecn == 3;
        let use_ecn = matches!(cfg.tcp_ecn, 1 | 4)
            || use_accecn
            || self.cc.needs_ecn()
            || self.dst.metrics.ecn();
        self.ecn_flags = 0;
        self.accecn = AccEcn::default();
        if use_ecn && use_accecn {
            self.ecn_mode_set(TCP_ECN_MODE_ANY);
            self.accecn.syn_ect_snt = self.sk_ect();
        } else if use_ecn {
            self.ecn_mode_set(TCP_ECN_OK);
        }
    }

    /// The ECN flags of our SYN or SYN-ACK. A SYN: ECE|CWR when it asks for ECN, AE
    /// too for AccECN (`tcp_ecn_send_syn`), none on a retransmitted SYN with
    /// `tcp_ecn_fallback` (`tcp_ecn_clear_syn`: a middlebox may drop ECN SYNs). A
    /// SYN-ACK: ECE for classic ECN, for AccECN the ACE that echoes the SYN's IP-ECN
    /// field (`tcp_ecn_make_synack`, `tcp_ecn_send_synack`).
    pub(crate) fn ecn_syn_flags(&mut self, cfg: &Config) -> TcpFlags {
        if !self.ecn_mode_any() {
            return TcpFlags(0);
        }
        match self.state {
            TcpState::SynSent if cfg.tcp_ecn_fallback && self.syn_sent_again() => TcpFlags(0),
            TcpState::SynSent if self.ecn_mode_pending() => TcpFlags::ACE,
            TcpState::SynSent => TcpFlags::ECE | TcpFlags::CWR,
            _ if self.ecn_flags & TCP_ECN_MODE_ACCECN != 0 => {
                self.accecn.syn_ect_snt = self.sk_ect();
                accecn_reflector_flags(self.accecn.syn_ect_rcv)
            }
            _ => TcpFlags::ECE,
        }
    }

    /// `tcp_ecn_rcv_synack` on a SYN-ACK (RFC 9768's table 2: AE, CWR and ECE of
    /// the SYN-ACK decide): 000 or 111 is no ECN; 001 (and 101) classic ECN, if we
    /// asked for AccECN; anything else AccECN, whatever we asked (Linux 6.18 takes
    /// an AccECN SYN-ACK to a classic SYN as AccECN too), with the SYN-ACK's IP-ECN
    /// field kept for the third ACK, its AccECN option checked
    /// (`tcp_accecn_option_init`) and a CE mark on it counted if the feedback is
    /// valid. `tcp_ecn_rcv_syn` (simultaneous open) on a SYN: an AccECN request
    /// keeps AccECN, else classic ECN needs both ECE and CWR.
    pub(crate) fn ecn_rcv_syn(&mut self, cfg: &Config, th: &TcpRepr, ip_ecn: u8) {
        if !th.flags.contains(TcpFlags::ACK) {
            if self.ecn_mode_pending() {
                if accecn_syn_requested(th) {
                    self.accecn.syn_ect_rcv = ip_ecn;
                    self.accecn.prev_ecnfield = ip_ecn;
                    self.ecn_mode_set(TCP_ECN_MODE_ACCECN);
                } else {
                    self.ecn_mode_set(TCP_ECN_OK);
                }
            }
            if self.ecn_mode_rfc3168() && !th.flags.contains(TcpFlags::ECE | TcpFlags::CWR) {
                self.ecn_mode_set(0);
            }
            return;
        }
        if !self.ecn_mode_any() {
            return;
        }
        let ace = accecn_ace(th.flags);
        match ace {
            0 | 7 => self.ecn_mode_set(0),
            1 | 5 => {
                if self.ecn_mode_pending() {
                    self.ecn_mode_set(TCP_ECN_OK);
                }
            }
            _ => {
                self.ecn_mode_set(TCP_ECN_MODE_ACCECN);
                self.accecn.syn_ect_rcv = ip_ecn;
                // tcp_ecn_rcv_synack_accecn: a first option on the SYN-ACK is
                // checked, and answered with the option on our next two segments.
                if let Some(opt) = th.options.accecn.as_ref() {
                    if self.accecn.saw_opt < TCP_ACCECN_OPT_COUNTER_SEEN {
                        self.accecn_option_seen(opt);
                        self.accecn.opt_demand = 2;
                    }
                }
                if ip_ecn == INET_ECN_CE && self.accecn_validate_syn_feedback(cfg, ace) {
                    self.accecn.received_ce += 1;
                    self.accecn.received_ce_pending += 1;
                }
            }
        }
    }

    /// `tcp_accecn_validate_syn_feedback`: with `tcp_ecn_fallback`, the ECT the peer
    /// says our SYN or SYN-ACK arrived with must be one the path could have made of
    /// what we sent; else `TCP_ACCECN_ACE_FAIL_RECV`.
    fn accecn_validate_syn_feedback(&mut self, cfg: &Config, ace: u8) -> bool {
        if !cfg.tcp_ecn_fallback {
            return true;
        }
        let ect = accecn_extract_syn_ect(ace);
        if !ect_transition_valid(self.accecn.syn_ect_snt, ect) {
            self.accecn.fail_mode |= TCP_ACCECN_ACE_FAIL_RECV;
            return false;
        }
        true
    }

    /// `tcp_accecn_third_ack` (the listener's child, `tcp_ecn_openreq_child` and
    /// `tcp_rcv_state_process`'s SYN-RECV): ACE 0 on the third ACK is invalid
    /// feedback; 1, 5 and 7 are unused but legal; otherwise a pure ACK's ACE must echo
    /// a valid transition of our SYN-ACK's ECT, and a CE-marked SYN-ACK counts as
    /// delivered CE.
    pub(crate) fn accecn_third_ack(&mut self, cfg: &Config, th: &TcpRepr, payload_len: usize) {
        let ace = accecn_ace(th.flags);
        match ace {
            0 => self.accecn.fail_mode |= TCP_ACCECN_ACE_FAIL_RECV,
            1 | 5 | 7 => {}
            _ => {
                if payload_len == 0
                    && !th.flags.contains(TcpFlags::FIN)
                    && th.options.sack_len == 0
                    && self.accecn_validate_syn_feedback(cfg, ace)
                    && accecn_extract_syn_ect(ace) == INET_ECN_CE
                    && self.delivered_ce == 0
                {
                    self.delivered_ce += 1;
                }
            }
        }
    }

    /// `tcp_ecn_create_request` + `tcp_ecn_openreq_child`: a SYN asking for AccECN
    /// gets it when `tcp_ecn` is 3 to 5, its IP-ECN field kept for the SYN-ACK's ACE.
    /// Else classic ECN for a SYN with ECE and CWR, itself not ECT (an ECT SYN comes
    /// from a broken middlebox, unless it sets AE or a reserved bit), when `tcp_ecn`
    /// is not 0; any such SYN when the listener's congestion control needs ECN
    /// (`tcp_ca_needs_ecn(listen_sk)`: DCTCP's SYNs are ECT).
    pub(crate) fn ecn_create_request(&mut self, cfg: &Config, ip: &IpRepr, th: &TcpRepr) {
        self.accecn = AccEcn::default();
        if accecn_syn_requested(th) && cfg.tcp_ecn >= 3 {
            self.ecn_flags = TCP_ECN_MODE_ACCECN;
            self.accecn.syn_ect_rcv = ip.ecn & INET_ECN_MASK;
            self.accecn.prev_ecnfield = self.accecn.syn_ect_rcv;
            return;
        }
        let needs = self.cc.needs_ecn();
        self.ecn_flags = if syn_agrees(cfg, ip, th, self.dst.metrics.ecn(), needs) {
            TCP_ECN_OK
        } else {
            0
        };
    }

    /// `cookie_ecn_ok`: a SYN cookie's timestamp remembers ECN; it holds while
    /// `tcp_ecn` is on. `cookie_accecn_ok`: a third ACK whose ACE is 2 to 7 shows
    /// the peer negotiated AccECN, and the child takes it
    /// ([RFC 9768](https://www.rfc-editor.org/rfc/rfc9768): a server without state
    /// reads AccECN from the ACK).
    pub(crate) fn ecn_cookie_ok(&mut self, cfg: &Config, ts_ecn: bool, th: &TcpRepr) {
        self.accecn = AccEcn::default();
        let ecn_ok = ts_ecn && cfg.tcp_ecn != 0;
        self.ecn_flags = match (ecn_ok, accecn_ace(th.flags) > 1) {
            (true, true) => TCP_ECN_MODE_ACCECN,
            (true, false) => TCP_ECN_OK,
            (false, _) => 0,
        };
    }

    /// `tcp_ecn_send` for a segment other than a SYN. Classic ECN: new data is sent
    /// ECT(0) and carries a queued CWR; ACKs and retransmissions are not ECT, unless
    /// the congestion control needs ECN (the socket's own ECT, `INET_ECN_xmit` at
    /// `tcp_assign_congestion_control`, which `tcp_ecn_send` then leaves alone); ECE
    /// while a CE mark waits for the sender's CWR. AccECN: every segment ECT(0)
    /// (`INET_ECN_xmit`, unless the handshake's feedback failed), ACE the count of CE
    /// packets received plus 5 (`tcp_accecn_set_ace`), or the SYN-ACK's IP-ECN field
    /// on the third ACK. Returns the IP ECN field and the TCP flags to add; the
    /// field stays in the socket's `inet->tos` (`tos_ecn`), as `INET_ECN_xmit` and
    /// `INET_ECN_dontxmit` leave it there.
    pub(crate) fn ecn_send(&mut self, new_data: bool) -> (u8, TcpFlags) {
        let (ip_ecn, flags) = self.ecn_send_marks(new_data);
        self.tos_ecn = ip_ecn;
        (ip_ecn, flags)
    }

    /// [`Tcb::ecn_send`]'s marks.
    fn ecn_send_marks(&mut self, new_data: bool) -> (u8, TcpFlags) {
        let sk_ect = self.sk_ect();
        if self.ecn_mode_accecn() {
            let ip_ecn = match self.accecn.fail_mode & TCP_ACCECN_ACE_FAIL_RECV {
                0 => INET_ECN_ECT_0,
                _ => sk_ect,
            };
            if core::mem::take(&mut self.accecn.reflect) {
                return (ip_ecn, accecn_reflector_flags(self.accecn.syn_ect_rcv));
            }
            self.accecn.received_ce_pending = 0;
            let wire_ace = self
                .accecn
                .received_ce
                .wrapping_add(TCP_ACCECN_CEP_INIT_OFFSET);
            return (ip_ecn, ace_flags(wire_ace));
        }
        if !self.ecn_mode_rfc3168() {
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

    /// `tcp_ecn_received_counters` (every segment `tcp_rcv_established` takes, pure
    /// ACKs too, and the third ACK of an AccECN child): counts CE-marked packets
    /// (`received_ce`, which ACE feeds back) and the payload bytes per ECT/CE
    /// codepoint; an ECT or CE segment sets `TCP_ECN_SEEN` outside classic ECN. The
    /// AccECN option is told what to carry: the counter that moved sets how many
    /// fields it needs (`accecn_minlen`), a counter crossing a 2^22-byte boundary
    /// demands it once, and on an AccECN connection a change of the IP-ECN field
    /// (ACKed at once) or a CE mark demands it twice (`accecn_opt_demand`).
    pub(crate) fn ecn_received_counters(&mut self, ip_ecn: u8, len: usize) {
        let ecnfield = ip_ecn & INET_ECN_MASK;
        let is_ce = ecnfield == INET_ECN_CE;
        if ecnfield != INET_ECN_NOT_ECT {
            if !self.ecn_mode_rfc3168() {
                self.ecn_flags |= TCP_ECN_SEEN;
            }
            let pcount = is_ce as u32; // lowtide's segments are one packet each here
            self.accecn.received_ce = self.accecn.received_ce.wrapping_add(pcount);
            self.accecn.received_ce_pending =
                (self.accecn.received_ce_pending as u32 + pcount).min(15) as u8;
            if len > 0 {
                let c = &mut self.accecn.received_ecn_bytes[(ecnfield - 1) as usize];
                let old = *c;
                *c = c.wrapping_add(len as u32);
                let minlen = ecnfield_to_accecn_optfield(ecnfield);
                self.accecn.minlen = self.accecn.minlen.max(minlen);
                // "Send AccECN option at least once per 2^22-byte increase in any
                // ECN byte counter."
                if (*c ^ old) & ACCECN_OPT_BYTES_MASK != 0 {
                    self.accecn.opt_demand = self.accecn.opt_demand.max(1);
                }
            }
        }
        let ecn_edge = self.accecn.prev_ecnfield != ecnfield;
        if ecn_edge || is_ce {
            self.accecn.prev_ecnfield = ecnfield;
            // Change-triggered ACKs: "Two ACK are demanded to indicate
            // unambiguously the ecnfield value in the latter ACK."
            if self.ecn_mode_accecn() {
                if ecn_edge {
                    self.ack.now = true;
                }
                self.accecn.opt_demand = 2;
            }
        }
    }

    /// `tcp_data_ecn_check` (ex `tcp_ecn_check_ce`) on received data
    /// (`tcp_event_data_recv`, out-of-order queueing), on an ECN connection: not-ECT
    /// data after ECT was seen is probably a retransmission, ACKed quickly. Classic
    /// ECN: a CE mark demands CWR and is ACKed at once; ECT or CE sets
    /// `TCP_ECN_SEEN` (AccECN's is `tcp_ecn_received_counters`'). A congestion
    /// control that needs ECN hears of every CE and ECT segment first
    /// (`CA_EVENT_ECN_IS_CE`/`CA_EVENT_ECN_NO_CE`: DCTCP's CE state machine).
    pub(crate) fn ecn_check_ce(&mut self, ctx: &mut Ctx, ip_ecn: u8) {
        if !self.ecn_mode_any() {
            return;
        }
        let rfc3168 = self.ecn_mode_rfc3168();
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
                if self.ecn_flags & TCP_ECN_DEMAND_CWR == 0 && rfc3168 {
                    // Better not delay ACKs: the sender's cwnd may be very low.
                    self.enter_quickack_mode(2);
                    self.ecn_flags |= TCP_ECN_DEMAND_CWR;
                }
                if rfc3168 {
                    self.ecn_flags |= TCP_ECN_SEEN;
                }
            }
            _ => {
                if self.cc.needs_ecn() {
                    self.dctcp_ece_ack_update(ctx, false);
                }
                if rfc3168 {
                    self.ecn_flags |= TCP_ECN_SEEN;
                }
            }
        }
    }

    /// `tcp_ecn_accept_cwr` (in `tcp_ack`, for pure ACKs too, as Linux 5.10+), classic
    /// ECN only (CWR is part of ACE under AccECN): the sender reduced its window; a
    /// data segment with CWR is ACKed at once, since the sender's cwnd may be down to
    /// one segment.
    pub(crate) fn ecn_accept_cwr(&mut self, th: &TcpRepr, payload_len: usize) {
        if self.ecn_mode_rfc3168() && th.flags.contains(TcpFlags::CWR) {
            self.ecn_flags &= !TCP_ECN_DEMAND_CWR;
            if payload_len > 0 {
                self.ack.now = true;
            }
        }
    }

    /// `tcp_ecn_rcv_ecn_echo`: an ACK with ECE on a classic ECN connection
    /// (`FLAG_ECE`).
    pub(crate) fn ecn_rcv_ecn_echo(&self, th: &TcpRepr) -> bool {
        th.flags.contains(TcpFlags::ECE)
            && !th.flags.contains(TcpFlags::SYN)
            && self.ecn_mode_rfc3168()
    }

    /// `tcp_ecn_queue_cwr`: a cwnd reduction began; tell the receiver with CWR
    /// (classic ECN only: "Do not set CWR if in AccECN mode!").
    pub(crate) fn ecn_queue_cwr(&mut self) {
        if self.ecn_mode_rfc3168() {
            self.ecn_flags |= TCP_ECN_QUEUE_CWR;
        }
    }

    /// `tcp_ecn_withdraw_cwr`: the reduction was undone; no CWR to send.
    pub(crate) fn ecn_withdraw_cwr(&mut self) {
        self.ecn_flags &= !TCP_ECN_QUEUE_CWR;
    }
}

/// `tcp_ecn_create_request`'s classic rule: a SYN with ECE and CWR, not itself ECT,
/// while `tcp_ecn` is not 0 or the route has `features ecn`; or any SYN with ECE and
/// CWR when the listener's congestion control needs ECN (`ca_needs_ecn`). An ECT SYN
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

    const SYNACK: TcpFlags = TcpFlags(TcpFlags::SYN.0 | TcpFlags::ACK.0);

    /// The SYN-ACK's ACE field as flags.
    fn synack_ace(ace: u32) -> TcpRepr {
        syn(SYNACK | ace_flags(ace))
    }

    #[test]
    fn the_synack_decides_for_the_client() {
        let c = cfg(1);
        let mut t = Tcb::for_test(&c);
        // A classic ECN SYN: ECE alone keeps ECN, no ECE (or AE|CWR|ECE) refuses it,
        // ECE with CWR or any other AccECN answer makes it AccECN (Linux 6.18's
        // tcp_ecn_rcv_synack, as this machine's kernel shows).
        for (ace, mode) in [
            (0b001, TCP_ECN_OK),
            (0b101, TCP_ECN_OK),
            (0b000, 0),
            (0b111, 0),
            (0b011, TCP_ECN_MODE_ACCECN),
            (0b010, TCP_ECN_MODE_ACCECN),
        ] {
            t.ecn_flags = TCP_ECN_OK;
            t.ecn_rcv_syn(&c, &synack_ace(ace), INET_ECN_NOT_ECT);
            assert_eq!(t.ecn_flags & TCP_ECN_MODE_ANY, mode, "ACE {ace:03b}");
        }
        // No ECN asked: nothing changes.
        t.ecn_flags = 0;
        t.ecn_rcv_syn(&c, &synack_ace(0b010), INET_ECN_NOT_ECT);
        assert_eq!(t.ecn_flags, 0);
        // Simultaneous open: the peer's SYN must carry both.
        t.ecn_flags = TCP_ECN_OK;
        t.ecn_rcv_syn(&c, &syn(TcpFlags::SYN | TcpFlags::ECE), INET_ECN_NOT_ECT);
        assert_eq!(t.ecn_flags, 0);
    }

    #[test]
    fn an_accecn_syn_and_its_answers_as_table_2() {
        let c = cfg(3);
        let mut t = Tcb::for_test(&c);
        t.state = TcpState::SynSent;
        t.ecn_send_syn(&c);
        assert!(t.ecn_mode_pending());
        assert_eq!(t.ecn_syn_flags(&c), TcpFlags::ACE, "AE, CWR and ECE");
        for (ace, mode) in [
            (0b000, 0),
            (0b111, 0),
            (0b001, TCP_ECN_OK),
            (0b101, TCP_ECN_OK),
            (0b010, TCP_ECN_MODE_ACCECN),
            (0b011, TCP_ECN_MODE_ACCECN),
            (0b100, TCP_ECN_MODE_ACCECN),
            (0b110, TCP_ECN_MODE_ACCECN),
        ] {
            t.ecn_send_syn(&c);
            t.ecn_rcv_syn(&c, &synack_ace(ace), INET_ECN_ECT_1);
            assert_eq!(t.ecn_flags & TCP_ECN_MODE_ANY, mode, "ACE {ace:03b}");
            if mode == TCP_ECN_MODE_ACCECN {
                assert_eq!(t.accecn.syn_ect_rcv, INET_ECN_ECT_1);
            }
        }
        // A CE-marked SYN-ACK counts when its feedback is a valid transition of our
        // not-ECT SYN (0b010: it arrived not-ECT), not when it claims ECT(0).
        t.ecn_send_syn(&c);
        t.ecn_rcv_syn(&c, &synack_ace(0b010), INET_ECN_CE);
        assert_eq!((t.accecn.received_ce, t.accecn.fail_mode), (1, 0));
        t.ecn_send_syn(&c);
        t.ecn_rcv_syn(&c, &synack_ace(0b100), INET_ECN_CE);
        assert_eq!(
            (t.accecn.received_ce, t.accecn.fail_mode),
            (0, TCP_ACCECN_ACE_FAIL_RECV)
        );
        let mut no_fallback = cfg(3);
        no_fallback.tcp_ecn_fallback = false;
        t.ecn_send_syn(&no_fallback);
        t.ecn_rcv_syn(&no_fallback, &synack_ace(0b100), INET_ECN_CE);
        assert_eq!((t.accecn.received_ce, t.accecn.fail_mode), (1, 0));
        // tcp_ecn 4 asks for classic ECN, 5 for none.
        for (sysctl, flags) in [(4, TcpFlags::ECE | TcpFlags::CWR), (5, TcpFlags(0))] {
            t.ecn_send_syn(&cfg(sysctl));
            assert_eq!(t.ecn_syn_flags(&cfg(sysctl)), flags, "tcp_ecn={sysctl}");
        }
    }

    #[test]
    fn ace_tables_as_linux() {
        let echoed: Vec<u8> = [
            INET_ECN_NOT_ECT,
            INET_ECN_ECT_1,
            INET_ECN_ECT_0,
            INET_ECN_CE,
        ]
        .iter()
        .map(|&e| accecn_ace(accecn_reflector_flags(e)))
        .collect();
        assert_eq!(echoed, [0b010, 0b011, 0b100, 0b110]);
        for e in [
            INET_ECN_NOT_ECT,
            INET_ECN_ECT_1,
            INET_ECN_ECT_0,
            INET_ECN_CE,
        ] {
            let ace = accecn_ace(accecn_reflector_flags(e));
            assert_eq!(accecn_extract_syn_ect(ace), e, "round trip");
        }
        assert!(ect_transition_valid(INET_ECN_ECT_0, INET_ECN_CE));
        assert!(ect_transition_valid(INET_ECN_ECT_0, INET_ECN_ECT_1));
        assert!(!ect_transition_valid(INET_ECN_NOT_ECT, INET_ECN_ECT_0));
        assert!(!ect_transition_valid(INET_ECN_ECT_0, INET_ECN_NOT_ECT));
        assert!(!ect_transition_valid(INET_ECN_CE, INET_ECN_ECT_0));
        let requested = |ace: u32| accecn_syn_requested(&syn(TcpFlags::SYN | ace_flags(ace)));
        assert_eq!(
            (0..8).filter(|&a| requested(a)).count(),
            6,
            "all but 000, 011"
        );
        assert!(!requested(0b011) && !requested(0));
    }

    #[test]
    fn accecn_segments_are_ect0_and_carry_the_ce_count() {
        let c = cfg(3);
        let mut t = Tcb::for_test(&c);
        t.ecn_flags = TCP_ECN_MODE_ACCECN;
        t.accecn.syn_ect_rcv = INET_ECN_ECT_0;
        t.accecn.reflect = true;
        assert_eq!(
            t.ecn_send(false),
            (INET_ECN_ECT_0, TcpFlags::AE),
            "third ACK"
        );
        assert_eq!(
            t.ecn_send(false),
            (INET_ECN_ECT_0, TcpFlags::AE | TcpFlags::ECE)
        );
        t.ecn_received_counters(INET_ECN_CE, 0);
        t.ecn_received_counters(INET_ECN_CE, 100);
        assert_eq!(t.accecn.received_ce_pending, 2);
        assert_eq!(t.ecn_send(true), (INET_ECN_ECT_0, TcpFlags::ACE), "5 + 2");
        assert_eq!(t.accecn.received_ce_pending, 0);
        t.ecn_received_counters(INET_ECN_CE, 0);
        assert_eq!(t.ecn_send(true).1, TcpFlags(0), "5 + 3 wraps to 0");
        // CWR is ACE's under AccECN: no queued CWR, no ECE echo, no CWR accepted.
        t.ecn_queue_cwr();
        assert_eq!(t.ecn_flags & TCP_ECN_QUEUE_CWR, 0);
        assert!(!t.ecn_rcv_ecn_echo(&syn(TcpFlags::ACK | TcpFlags::ECE)));
        // Invalid handshake feedback: no more ECT.
        t.accecn.fail_mode = TCP_ACCECN_ACE_FAIL_RECV;
        assert_eq!(t.ecn_send(true).0, INET_ECN_NOT_ECT);
    }

    /// `tcp_send_active_reset`'s skb goes through `__tcp_transmit_skb`, whose
    /// `tcp_ecn_send` marks every skb but a SYN: a classic ECN reset echoes ECE while
    /// a CE mark waits for CWR and is not ECT (no data); an AccECN reset is ECT(0)
    /// with ACE, the CE count plus 5.
    #[test]
    fn an_active_reset_carries_the_marks_of_tcp_ecn_send() {
        let cases = [
            (0, 0, INET_ECN_NOT_ECT, TcpFlags(0)),
            (TCP_ECN_OK, 0, INET_ECN_NOT_ECT, TcpFlags(0)),
            (
                TCP_ECN_OK | TCP_ECN_DEMAND_CWR,
                0,
                INET_ECN_NOT_ECT,
                TcpFlags::ECE,
            ),
            (
                TCP_ECN_MODE_ACCECN,
                1,
                INET_ECN_ECT_0,
                TcpFlags::AE | TcpFlags::CWR,
            ),
        ];
        for (ecn_flags, received_ce, ip_ecn, flags) in cases {
            let c = cfg(1);
            let mut st = crate::tcp::TestStack::default();
            let mut t = Tcb::for_test(&c);
            t.state = TcpState::Established;
            t.ecn_flags = ecn_flags;
            t.accecn.received_ce = received_ce;
            t.send_active_reset(&mut st.ctx(&c, Instant::ZERO, false));
            let tx = st.out.pop_front().expect("the reset");
            let ip = IpRepr::parse(&tx.packet, false).expect("ip");
            let (th, _) = TcpRepr::parse(&tx.packet[ip.header_len..]).expect("tcp");
            let marks = TcpFlags(th.flags.0 & !(TcpFlags::RST | TcpFlags::ACK).0);
            assert_eq!((ip.ecn, marks), (ip_ecn, flags), "ecn_flags {ecn_flags}");
        }
    }

    #[test]
    fn received_counters_count_on_every_connection() {
        // Linux 6.18 counts CE packets and ECT/CE bytes whatever the ECN mode, and a
        // connection without classic ECN sees ECT (tcpi_options' ECN_SEEN).
        let c = cfg(0);
        let mut t = Tcb::for_test(&c);
        t.ecn_received_counters(INET_ECN_ECT_0, 100);
        t.ecn_received_counters(INET_ECN_CE, 100);
        t.ecn_received_counters(INET_ECN_ECT_1, 7);
        t.ecn_received_counters(INET_ECN_NOT_ECT, 9);
        assert_eq!(t.accecn.received_ce, 1);
        assert_eq!(t.accecn.received_ecn_bytes, [7, 100, 100]);
        assert_eq!(t.ecn_flags, TCP_ECN_SEEN);
        assert!(!t.ack.now, "change-triggered ACKs are AccECN's only");
        let mut classic = Tcb::for_test(&c);
        classic.ecn_flags = TCP_ECN_OK;
        classic.ecn_received_counters(INET_ECN_ECT_0, 100);
        assert_eq!(classic.ecn_flags, TCP_ECN_OK, "tcp_ecn_check_ce's to set");
        let mut acc = Tcb::for_test(&c);
        acc.ecn_flags = TCP_ECN_MODE_ACCECN;
        acc.ecn_received_counters(INET_ECN_NOT_ECT, 100);
        assert!(!acc.ack.now, "no edge");
        acc.ecn_received_counters(INET_ECN_ECT_0, 100);
        assert!(acc.ack.now, "an IP-ECN change is ACKed at once");
        assert_eq!(
            (acc.accecn.opt_demand, acc.accecn.minlen),
            (2, 3),
            "ECT(0): 3 fields"
        );
    }

    #[test]
    fn received_counters_tell_the_option_what_to_carry() {
        let c = cfg(3);
        let mut t = Tcb::for_test(&c);
        t.ecn_flags = TCP_ECN_MODE_ACCECN;
        t.accecn.prev_ecnfield = INET_ECN_ECT_1;
        t.ecn_received_counters(INET_ECN_ECT_1, 100);
        assert_eq!(
            (t.accecn.opt_demand, t.accecn.minlen),
            (0, 1),
            "no edge, no CE"
        );
        t.ecn_received_counters(INET_ECN_ECT_1, 0);
        assert_eq!(t.accecn.minlen, 1, "no payload");
        // A counter crossing 2^22 bytes demands one option.
        t.accecn.received_ecn_bytes[0] = (1 << 22) - 100;
        t.ecn_received_counters(INET_ECN_ECT_1, 99);
        assert_eq!(t.accecn.opt_demand, 0);
        t.ecn_received_counters(INET_ECN_ECT_1, 1);
        assert_eq!(t.accecn.opt_demand, 1);
        // CE, even unchanged, demands two, without forcing an ACK.
        t.accecn.prev_ecnfield = INET_ECN_CE;
        t.ack.now = false;
        t.ecn_received_counters(INET_ECN_CE, 10);
        assert_eq!((t.accecn.opt_demand, t.accecn.minlen), (2, 2));
        assert!(!t.ack.now);
        // Not on a classic ECN connection.
        t.ecn_flags = TCP_ECN_OK;
        t.accecn.opt_demand = 0;
        t.ecn_received_counters(INET_ECN_ECT_0, 10);
        assert_eq!(t.accecn.opt_demand, 0);
    }

    #[test]
    fn the_third_ack_checks_the_feedback() {
        let c = cfg(3);
        let mut t = Tcb::for_test(&c);
        let ack = |ace: u32| syn(TcpFlags::ACK | ace_flags(ace));
        for (ace, fail, delivered_ce) in [
            (0b000, TCP_ACCECN_ACE_FAIL_RECV, 0),
            (0b010, 0, 0),
            (0b101, 0, 0),
            (0b100, TCP_ACCECN_ACE_FAIL_RECV, 0),
        ] {
            t.ecn_flags = TCP_ECN_MODE_ACCECN;
            t.accecn = AccEcn::default();
            t.accecn_third_ack(&c, &ack(ace), 0);
            assert_eq!(t.accecn.fail_mode, fail, "ACE {ace:03b}");
            assert_eq!(t.delivered_ce, delivered_ce);
        }
        // An ECT(0) SYN-ACK reported CE-marked counts as delivered CE, once.
        t.accecn = AccEcn {
            syn_ect_snt: INET_ECN_ECT_0,
            ..AccEcn::default()
        };
        t.accecn_third_ack(&c, &ack(0b110), 0);
        t.accecn_third_ack(&c, &ack(0b110), 0);
        assert_eq!((t.accecn.fail_mode, t.delivered_ce), (0, 1));
        // Data on the third ACK is not checked.
        t.accecn = AccEcn::default();
        t.accecn_third_ack(&c, &ack(0b100), 10);
        assert_eq!(t.accecn.fail_mode, 0);
    }

    #[test]
    fn a_listener_with_tcp_ecn_3_to_5_echoes_the_syn_ect() {
        let acc_syn = syn(TcpFlags::SYN | TcpFlags::ACE);
        for sysctl in 3..=5 {
            let c = cfg(sysctl);
            let mut t = Tcb::for_test(&c);
            t.ecn_create_request(&c, &ip(INET_ECN_ECT_0), &acc_syn);
            assert_eq!(t.ecn_flags, TCP_ECN_MODE_ACCECN, "tcp_ecn={sysctl}");
            t.state = TcpState::SynRecv;
            assert_eq!(t.ecn_syn_flags(&c), TcpFlags::AE, "ECT(0) echoed");
        }
        // tcp_ecn 2: an AccECN SYN (not ECT) gets classic ECN.
        let mut t = Tcb::for_test(&cfg(2));
        t.ecn_create_request(&cfg(2), &ip(INET_ECN_NOT_ECT), &acc_syn);
        assert_eq!(t.ecn_flags, TCP_ECN_OK);
        // A classic SYN stays classic with tcp_ecn 3.
        let classic = syn(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
        t.ecn_create_request(&cfg(3), &ip(INET_ECN_NOT_ECT), &classic);
        assert_eq!(t.ecn_flags, TCP_ECN_OK);
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
        let ack = syn(TcpFlags::ACK);
        t.ecn_cookie_ok(&cfg(2), true, &ack);
        assert_eq!(t.ecn_flags, TCP_ECN_OK);
        t.ecn_cookie_ok(&cfg(0), true, &ack);
        assert_eq!(t.ecn_flags, 0, "turned off since the SYN");
        t.ecn_cookie_ok(&cfg(1), false, &ack);
        assert_eq!(t.ecn_flags, 0);
        // cookie_accecn_ok: a third ACK with ACE 2 to 7.
        t.ecn_cookie_ok(&cfg(3), true, &syn(TcpFlags::ACK | TcpFlags::CWR));
        assert_eq!(t.ecn_flags, TCP_ECN_MODE_ACCECN);
    }
}

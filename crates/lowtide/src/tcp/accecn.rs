//! Accurate ECN's sender side as Linux 6.18 does it (tcp_input.c
//! `tcp_accecn_process`, `__tcp_accecn_process`, `tcp_accecn_process_option`;
//! [RFC 9768 section 3.2.2](https://www.rfc-editor.org/rfc/rfc9768#section-3.2.2)):
//! every ACK of an AccECN connection that made progress reads the ACE field, the
//! count of CE-marked packets the peer received (mod 8, plus 5), and turns the
//! increase since the last one into newly delivered CE packets (`delivered_ce`,
//! `TcpExtTCPDeliveredCE`, `tcpi_delivered_ce`) and a congestion signal
//! (`FLAG_ECE`: `CA_ACK_ECE`, and `tcp_enter_cwr` once per window as for classic ECN).
//! An ACK that covers more than 7 packets may hide whole wraps of ACE: the safe
//! delta (`safe_delta`: the most CE marks consistent with ACE) is taken unless the
//! ACKs have been arriving thinned (`pkts_acked_ewma`) or the AccECN option's CE
//! byte counter shows fewer. The AccECN option's byte counters (kind 172/174, read
//! on the slow path) become `delivered_ecn_bytes` (`tcpi_delivered_*_bytes`); a
//! connection that never saw one after 8 MiB sent gives up on it
//! (`TCP_ACCECN_OPT_FAIL_RECV`). The option we send is `tcp/accecn_opt.rs`.

use super::cong::CaState;
use super::ecn::TCP_ACCECN_CEP_INIT_OFFSET;
use super::ecn::{accecn_ace, INET_ECN_CE, INET_ECN_ECT_0, INET_ECN_ECT_1};
use super::sock::Tcb;
use lowtide_wire::tcp::{AccEcnOption, TcpRepr};

/// `TCP_ACCECN_CEP_ACE_MASK`: ACE counts CE packets mod 8.
pub(crate) const TCP_ACCECN_CEP_ACE_MASK: u32 = 0x7;
/// `TCP_ACCECN_ACE_MAX_DELTA`: CE marks not yet fed back that make the receiver ACK
/// at once, before ACE could wrap.
pub(crate) const TCP_ACCECN_ACE_MAX_DELTA: u8 = 6;
/// `TCP_ACCECN_SAFETY_SHIFT`: RFC 9768's SAFETY_FACTOR (A.2.2) as a shift.
const TCP_ACCECN_SAFETY_SHIFT: u32 = 1;
/// `PKTS_ACKED_WEIGHT`, `PKTS_ACKED_PREC`: the packets-per-ACK average's weight
/// (1/64) and fixed point.
const PKTS_ACKED_WEIGHT: u32 = 6;
const PKTS_ACKED_PREC: u32 = 6;
/// `ACK_COMP_THRESH`: more than 4 packets per ACK on average means ACKs are thinned
/// (compressed, or coalesced on the path), not lost.
const ACK_COMP_THRESH: u32 = 4;
/// `TCP_ACCECN_OPT_EMPTY_SEEN` (`tp->saw_accecn_opt`): an option without fields.
pub(crate) const TCP_ACCECN_OPT_EMPTY_SEEN: u8 = 0x1;
/// `TCP_ACCECN_OPT_COUNTER_SEEN`: an option with counters.
pub(crate) const TCP_ACCECN_OPT_COUNTER_SEEN: u8 = 0x2;
/// `TCP_ACCECN_OPT_FAIL_SEEN`: the option is unusable.
pub(crate) const TCP_ACCECN_OPT_FAIL_SEEN: u8 = 0x3;
/// `TCP_ACCECN_OPT_FAIL_RECV` (`tp->accecn_fail_mode`): the peer's option feedback
/// is not to be used.
pub(crate) const TCP_ACCECN_OPT_FAIL_RECV: u8 = 8;
/// Bytes sent after which a connection that has not seen the option gives up on it
/// (the option's 24-bit byte counters may have wrapped since): 2^23 - 1.
const OPT_LATE_BYTES: u64 = (1 << 23) - 1;

/// What `tcp_ack` knows of an ACK when it calls `tcp_accecn_process`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AccEcnAck {
    /// `tp->delivered - delivered`: packets this ACK delivered (ACKed or SACKed).
    pub delivered_pkts: u32,
    /// `sack_state.delivered_bytes`: the bytes of those packets.
    pub delivered_bytes: u32,
    /// `FLAG_SLOWPATH`: the ACK did not come by header prediction.
    pub slowpath: bool,
    /// `FLAG_FORWARD_PROGRESS | FLAG_TS_PROGRESS`: something was ACKed or newly
    /// SACKed, or the timestamp advanced `ts_recent`.
    pub progress: bool,
    /// `FLAG_SYN_ACKED`: the ACK covers our SYN or SYN-ACK.
    pub syn_acked: bool,
}

impl Tcb {
    /// `tcp_accecn_process`: the CE packets this ACK newly reports. A non-zero count
    /// adds to `delivered_ce` and is the ACK's `FLAG_ECE` (header prediction then
    /// expects the new ACE: `tcp_fast_path_on`, computed in `header_predicted`).
    pub(crate) fn accecn_process(&mut self, th: &TcpRepr, a: &AccEcnAck) -> u32 {
        let delta = self.accecn_delta(th, a);
        self.delivered_ce += delta as u64; // tcp_count_delivered_ce
        delta
    }

    /// `__tcp_accecn_process`: the ACE delta, with the ACE wrap rules.
    fn accecn_delta(&mut self, th: &TcpRepr, a: &AccEcnAck) -> u32 {
        // "Reordered ACK or uncertain due to lack of data to send and ts".
        if !a.progress {
            return 0;
        }
        let old_ceb = self.accecn.delivered_ecn_bytes[2];
        let opt_deltas_valid = self.accecn_process_option(th.options.accecn.as_ref(), a);
        if a.delivered_pkts > 0 {
            let prev = self.accecn.pkts_acked_ewma as u32;
            let ewma = match prev {
                0 => a.delivered_pkts << PKTS_ACKED_PREC,
                _ => {
                    (((prev << PKTS_ACKED_WEIGHT) - prev) + (a.delivered_pkts << PKTS_ACKED_PREC))
                        >> PKTS_ACKED_WEIGHT
                }
            };
            self.accecn.pkts_acked_ewma = ewma.min(0xFFFF) as u16;
        }
        // The fast path matched the ACE it expected: no change, unless the ACE
        // counter might have overflowed on a large ACK.
        if !a.slowpath && a.delivered_pkts <= TCP_ACCECN_CEP_ACE_MASK {
            return 0;
        }
        // "ACE field is not available during handshake".
        if a.syn_acked {
            return 0;
        }
        if self.accecn.received_ce_pending >= TCP_ACCECN_ACE_MAX_DELTA {
            self.ack.now = true;
        }
        let corrected_ace = (accecn_ace(th.flags) as u32).wrapping_sub(TCP_ACCECN_CEP_INIT_OFFSET);
        let delta = corrected_ace.wrapping_sub(self.delivered_ce as u32) & TCP_ACCECN_CEP_ACE_MASK;
        if a.delivered_pkts <= TCP_ACCECN_CEP_ACE_MASK {
            return delta;
        }
        let safe_delta =
            a.delivered_pkts - (a.delivered_pkts.wrapping_sub(delta) & TCP_ACCECN_CEP_ACE_MASK);
        if opt_deltas_valid {
            let d_ceb = self.accecn.delivered_ecn_bytes[2].wrapping_sub(old_ceb);
            if d_ceb == 0 {
                return delta;
            }
            let open = matches!(self.ca_state, CaState::Open | CaState::Cwr);
            if a.delivered_pkts >= (TCP_ACCECN_CEP_ACE_MASK + 1) * 2
                && (self.rx_opt.sack_ok || open)
            {
                if a.delivered_bytes <= d_ceb {
                    return safe_delta;
                }
                let est_d_cep = (d_ceb as u64 * a.delivered_pkts as u64)
                    .div_ceil(a.delivered_bytes as u64) as u32;
                return safe_delta.min(delta + (est_d_cep & !TCP_ACCECN_CEP_ACE_MASK));
            }
            let mss = self.mss_cache;
            if d_ceb > delta.wrapping_mul(mss) {
                return safe_delta;
            }
            if d_ceb < safe_delta.wrapping_mul(mss) >> TCP_ACCECN_SAFETY_SHIFT {
                return delta;
            }
        } else if self.accecn.pkts_acked_ewma as u32 > ACK_COMP_THRESH << PKTS_ACKED_PREC {
            return delta;
        }
        safe_delta
    }

    /// `tcp_accecn_process_option`: the AccECN option's byte counters into
    /// `delivered_ecn_bytes`. Without an option on the ACK (or on the fast path) the
    /// counters move only by estimate, `delivered_bytes` to the codepoint the
    /// option last showed changing (`est_ecnfield`); a connection that has seen no
    /// option by the time 2^23 - 1 bytes were sent never will use one (its 24-bit
    /// counters may have wrapped unseen). With one, the first sighting is checked
    /// (`tcp_accecn_option_init`: zeroed counters make the option unusable), then
    /// each field read as a 24-bit delta; a counter that went back, or two that
    /// moved, make the estimate ambiguous. True if the byte counters can be used
    /// for this ACK.
    fn accecn_process_option(&mut self, opt: Option<&AccEcnOption>, a: &AccEcnAck) -> bool {
        if self.accecn.fail_mode & TCP_ACCECN_OPT_FAIL_RECV != 0 {
            return false;
        }
        if let Some(opt) = opt.filter(|_| a.slowpath) {
            return self.accecn_read_option(opt);
        }
        if self.accecn.saw_opt == 0 {
            if self.bytes_sent >= OPT_LATE_BYTES {
                // tcp_accecn_saw_opt_fail_recv
                self.accecn.saw_opt = TCP_ACCECN_OPT_FAIL_SEEN;
                self.accecn.fail_mode |= TCP_ACCECN_OPT_FAIL_RECV;
            }
            return false;
        }
        match self.accecn.est_ecnfield {
            0 => false,
            e => {
                let c = &mut self.accecn.delivered_ecn_bytes[(e - 1) as usize];
                *c = c.wrapping_add(a.delivered_bytes);
                true
            }
        }
    }

    /// `tcp_accecn_process_option` with an option on the ACK.
    fn accecn_read_option(&mut self, opt: &AccEcnOption) -> bool {
        self.accecn_option_seen(opt);
        let estimate = self.accecn.est_ecnfield;
        let mut res = estimate != 0;
        let (mut first_changed, mut ambiguous) = (false, false);
        for i in 0..opt.fields.min(3) as usize {
            let ecnfield = optfield_to_ecnfield(i, opt.order1);
            let cnt = &mut self.accecn.delivered_ecn_bytes[(ecnfield - 1) as usize];
            let delta = update_ecn_bytes(cnt, opt.counters[i], field_init_offset(ecnfield));
            if delta < 0 {
                res = false;
                ambiguous = true;
            }
            if delta != 0 && ecnfield != estimate {
                if !first_changed {
                    self.accecn.est_ecnfield = ecnfield;
                    first_changed = true;
                } else {
                    res = false;
                    ambiguous = true;
                }
            }
        }
        if ambiguous {
            self.accecn.est_ecnfield = 0;
        }
        res
    }

    /// `tcp_accecn_saw_opt_fail_recv` after `tcp_accecn_option_init`, where
    /// `tcp_ecn_rcv_synack` (the SYN-ACK) and `tcp_check_req` (the third ACK) first
    /// see an option: a zeroed counter makes the peer's options unusable.
    pub(crate) fn accecn_option_seen(&mut self, opt: &AccEcnOption) {
        if self.accecn.saw_opt < TCP_ACCECN_OPT_COUNTER_SEEN {
            self.accecn.saw_opt = accecn_option_init(opt);
            if self.accecn.saw_opt == TCP_ACCECN_OPT_FAIL_SEEN {
                self.accecn.fail_mode |= TCP_ACCECN_OPT_FAIL_RECV;
            }
        }
    }
}

/// `tcp_accecn_option_init`: what a first option shows. An empty one is
/// `TCP_ACCECN_OPT_EMPTY_SEEN`; a first or third field of 0 (the ECT counters start
/// at 1: "MAY check that the initial value of the EE0B field or the EE1B field is
/// non-zero") is zeroing on the path, `TCP_ACCECN_OPT_FAIL_SEEN`; else
/// `TCP_ACCECN_OPT_COUNTER_SEEN`.
pub(crate) fn accecn_option_init(opt: &AccEcnOption) -> u8 {
    match opt.fields {
        0 => TCP_ACCECN_OPT_EMPTY_SEEN,
        _ if opt.counters[0] == 0 => TCP_ACCECN_OPT_FAIL_SEEN,
        1 | 2 => TCP_ACCECN_OPT_COUNTER_SEEN,
        _ if opt.counters[2] == 0 => TCP_ACCECN_OPT_FAIL_SEEN,
        _ => TCP_ACCECN_OPT_COUNTER_SEEN,
    }
}

/// `tcp_accecn_optfield_to_ecnfield` (RFC 9768's table 5): the codepoint of field
/// `i` in order 0 (ECT(0), CE, ECT(1)) or order 1 (ECT(1), CE, ECT(0)).
fn optfield_to_ecnfield(i: usize, order1: bool) -> u8 {
    const ORDER: [[u8; 3]; 2] = [
        [INET_ECN_ECT_0, INET_ECN_CE, INET_ECN_ECT_1],
        [INET_ECN_ECT_1, INET_ECN_CE, INET_ECN_ECT_0],
    ];
    ORDER[order1 as usize][i % 3]
}

/// `tcp_accecn_field_init_offset`: `TCP_ACCECN_E1B_INIT_OFFSET` and
/// `_E0B_INIT_OFFSET` 1, `_CEB_INIT_OFFSET` 0 (so that zeroing shows).
pub(crate) fn field_init_offset(ecnfield: u8) -> u32 {
    match ecnfield {
        INET_ECN_ECT_1 | INET_ECN_ECT_0 => 1,
        _ => 0,
    }
}

/// `tcp_update_ecn_bytes`: a 24-bit field read into the 32-bit counter `cnt` as a
/// signed 24-bit delta (the field wraps; a negative delta went back). Returns it.
fn update_ecn_bytes(cnt: &mut u32, field: u32, init_offset: u32) -> i32 {
    let truncated = field.wrapping_sub(init_offset) & 0xFF_FFFF;
    let delta = truncated.wrapping_sub(*cnt) & 0xFF_FFFF;
    // sign_extend32(delta, 23)
    let delta = ((delta << 8) as i32) >> 8;
    *cnt = cnt.wrapping_add(delta as u32);
    delta
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::ecn::TCP_ECN_MODE_ACCECN;
    use lowtide_wire::tcp::TcpFlags;

    fn acc() -> Tcb {
        let mut t = Tcb::for_test(&Config {
            tcp_ecn: 3,
            ..Config::default()
        });
        t.ecn_flags = TCP_ECN_MODE_ACCECN;
        t.mss_cache = 1000;
        t
    }

    /// An ACK whose ACE field says `ace` (the wire value, 0-7).
    fn ace(ace: u32) -> TcpRepr {
        TcpRepr {
            flags: TcpFlags(TcpFlags::ACK.0 | ((ace & 7) << 6) as u16),
            ..TcpRepr::default()
        }
    }

    fn slow(delivered_pkts: u32) -> AccEcnAck {
        AccEcnAck {
            delivered_pkts,
            delivered_bytes: delivered_pkts * 1000,
            slowpath: true,
            progress: true,
            syn_acked: false,
        }
    }

    #[test]
    fn ace_minus_five_is_the_ce_count_mod_8() {
        let mut t = acc();
        // ACE 5: no CE yet.
        assert_eq!(t.accecn_process(&ace(5), &slow(1)), 0);
        // ACE 7: two CE packets.
        assert_eq!(t.accecn_process(&ace(7), &slow(1)), 2);
        assert_eq!(t.delivered_ce, 2);
        // ACE wraps: 7 -> 1 is 2 more (5 + 4 = 9 = 1 mod 8).
        assert_eq!(t.accecn_process(&ace(1), &slow(2)), 2);
        assert_eq!(t.delivered_ce, 4);
        // The same ACE again: nothing new.
        assert_eq!(t.accecn_process(&ace(1), &slow(1)), 0);
    }

    #[test]
    fn no_progress_fast_path_and_the_handshake_read_nothing() {
        let mut t = acc();
        let stale = AccEcnAck {
            progress: false,
            ..slow(1)
        };
        assert_eq!(t.accecn_process(&ace(7), &stale), 0, "reordered ACK");
        let fast = AccEcnAck {
            slowpath: false,
            ..slow(7)
        };
        assert_eq!(t.accecn_process(&ace(7), &fast), 0, "header predicted");
        let syn = AccEcnAck {
            syn_acked: true,
            ..slow(1)
        };
        assert_eq!(t.accecn_process(&ace(6), &syn), 0, "third ACK's ACE");
        assert_eq!(t.delivered_ce, 0);
        // A fast-path ACK of more than 7 packets is read: ACE may have wrapped.
        let big_fast = AccEcnAck {
            slowpath: false,
            ..slow(8)
        };
        assert_eq!(t.accecn_process(&ace(6), &big_fast), 1);
    }

    /// A connection whose ACKs so far each covered one packet.
    fn acked_one_by_one() -> Tcb {
        let mut t = acc();
        t.accecn_process(&ace(5), &slow(1));
        t
    }

    #[test]
    fn a_large_ack_takes_the_safe_delta_unless_acks_are_thinned() {
        // 10 packets ACKed, ACE up by 1: 1 or 9 CE packets; safe_delta is 9.
        let mut t = acked_one_by_one();
        assert_eq!(t.accecn_process(&ace(6), &slow(10)), 9);
        assert_eq!(t.delivered_ce, 9);
        // ACE up by 0 over 10 packets: 0 or 8; safe is 8.
        let mut t = acked_one_by_one();
        assert_eq!(t.accecn_process(&ace(5), &slow(10)), 8);
        // ACKs have carried more than 4 packets each on average (the first one
        // counts whole): thinned ACKs, so the plain delta.
        let mut t = acc();
        assert_eq!(t.accecn_process(&ace(6), &slow(10)), 1);
        assert!(t.accecn.pkts_acked_ewma as u32 > ACK_COMP_THRESH << PKTS_ACKED_PREC);
    }

    #[test]
    fn the_packets_per_ack_average() {
        let mut t = acc();
        t.accecn_process(&ace(5), &slow(2));
        assert_eq!(t.accecn.pkts_acked_ewma, 2 << 6, "first sample taken whole");
        t.accecn_process(&ace(5), &slow(66));
        // (128 * 63 + 66 * 64) / 64 = 192
        assert_eq!(t.accecn.pkts_acked_ewma, 192);
        t.accecn_process(&ace(5), &slow(0));
        assert_eq!(t.accecn.pkts_acked_ewma, 192, "nothing delivered");
    }

    #[test]
    fn pending_ce_marks_ask_for_an_immediate_ack() {
        let mut t = acc();
        t.accecn.received_ce_pending = TCP_ACCECN_ACE_MAX_DELTA;
        t.accecn_process(&ace(5), &slow(1));
        assert!(t.ack.now);
    }

    #[test]
    fn the_byte_counters_refine_the_safe_delta() {
        // The option showed CE bytes changing last (est_ecnfield = CE): the bytes
        // this ACK delivered count as CE, so d_ceb > 0.
        let mut t = acc();
        t.accecn.saw_opt = 2;
        t.accecn.est_ecnfield = crate::tcp::ecn::INET_ECN_CE;
        // 10 packets (< 16), 10000 CE bytes > delta(1) * mss: safe_delta.
        assert_eq!(t.accecn_process(&ace(6), &slow(10)), 9);
        assert_eq!(t.accecn.delivered_ecn_bytes[2], 10_000);
        // 16 or more packets with SACK or in Open: scaled by bytes; all bytes CE
        // (delivered_bytes <= d_ceb) is the safe delta.
        let mut t = acc();
        t.accecn.saw_opt = 2;
        t.accecn.est_ecnfield = crate::tcp::ecn::INET_ECN_CE;
        assert_eq!(t.accecn_process(&ace(6), &slow(17)), 17);
        // Another codepoint estimated: no CE bytes, the plain delta.
        let mut t = acc();
        t.accecn.saw_opt = 2;
        t.accecn.est_ecnfield = crate::tcp::ecn::INET_ECN_ECT_0;
        assert_eq!(t.accecn_process(&ace(6), &slow(17)), 1);
        assert_eq!(t.accecn.delivered_ecn_bytes[1], 17_000);
    }

    /// An ACK with ACE 5 and an order-1 AccECN option (e1b, ceb, e0b as sent).
    fn with_opt(fields: u8, counters: [u32; 3]) -> TcpRepr {
        let mut th = ace(5);
        th.options.accecn = Some(AccEcnOption {
            order1: true,
            fields,
            counters,
        });
        th
    }

    #[test]
    fn option_init_as_tcp_accecn_option_init() {
        let o = |fields, counters| {
            accecn_option_init(&AccEcnOption {
                order1: true,
                fields,
                counters,
            })
        };
        assert_eq!(o(0, [0; 3]), TCP_ACCECN_OPT_EMPTY_SEEN);
        assert_eq!(o(1, [0; 3]), TCP_ACCECN_OPT_FAIL_SEEN, "zeroed e1b");
        assert_eq!(o(2, [1, 0, 0]), TCP_ACCECN_OPT_COUNTER_SEEN);
        assert_eq!(o(3, [1, 0, 0]), TCP_ACCECN_OPT_FAIL_SEEN, "zeroed e0b");
        assert_eq!(o(3, [1, 0, 1]), TCP_ACCECN_OPT_COUNTER_SEEN);
        // A zeroed first option makes every later one unusable.
        let mut t = acc();
        assert!(!t.accecn_process_option(Some(&AccEcnOption::default()), &slow(1)));
        t.accecn_option_seen(&AccEcnOption {
            fields: 1,
            ..AccEcnOption::default()
        });
        assert_eq!(t.accecn.fail_mode, TCP_ACCECN_OPT_FAIL_RECV);
        let good = with_opt(3, [1, 0, 1001]);
        assert!(!t.accecn_process_option(good.options.accecn.as_ref(), &slow(1)));
        assert_eq!(t.accecn.delivered_ecn_bytes, [0; 3]);
    }

    #[test]
    fn option_counters_become_delivered_bytes_and_the_estimate() {
        let mut t = acc();
        let read = |t: &mut Tcb, th: &TcpRepr, a: &AccEcnAck| {
            t.accecn_process_option(th.options.accecn.as_ref(), a)
        };
        // The initial values (1, 0, 1) are no bytes; nothing estimated yet.
        assert!(!read(&mut t, &with_opt(3, [1, 0, 1]), &slow(1)));
        assert_eq!(t.accecn.saw_opt, TCP_ACCECN_OPT_COUNTER_SEEN);
        // 1000 ECT(0) bytes: ECT(0) becomes the estimate (not yet usable).
        assert!(!read(&mut t, &with_opt(3, [1, 0, 1001]), &slow(1)));
        assert_eq!(t.accecn.delivered_ecn_bytes, [0, 1000, 0]);
        assert_eq!(t.accecn.est_ecnfield, INET_ECN_ECT_0);
        // Again ECT(0) only: usable.
        assert!(read(&mut t, &with_opt(3, [1, 0, 2001]), &slow(1)));
        // Without an option (or on the fast path) the bytes go to the estimate.
        assert!(read(&mut t, &ace(5), &slow(1)));
        assert_eq!(t.accecn.delivered_ecn_bytes[1], 3000);
        let fast = AccEcnAck {
            slowpath: false,
            ..slow(1)
        };
        assert!(
            read(&mut t, &with_opt(3, [1, 0, 9]), &fast),
            "fast path: no option"
        );
        assert_eq!(t.accecn.delivered_ecn_bytes[1], 4000);
        // A counter that goes back (3001 < 4000) is ambiguous.
        assert!(!read(&mut t, &with_opt(3, [1, 0, 3002]), &slow(1)));
        assert_eq!(
            (t.accecn.delivered_ecn_bytes[1], t.accecn.est_ecnfield),
            (3001, 0)
        );
        // Two counters moving at once: ambiguous too.
        assert!(!read(&mut t, &with_opt(3, [1, 500, 3502]), &slow(1)));
        assert_eq!(t.accecn.delivered_ecn_bytes, [0, 3501, 500]);
        assert_eq!(t.accecn.est_ecnfield, 0);
        // 2 fields (order 1: e1b, ceb): CE alone moves.
        assert!(!read(&mut t, &with_opt(2, [1, 1500, 0]), &slow(1)));
        assert_eq!(t.accecn.est_ecnfield, INET_ECN_CE);
        // A 24-bit counter wraps.
        t.accecn.delivered_ecn_bytes[2] = 0xFF_FFF0;
        assert!(read(&mut t, &with_opt(2, [1, 0x10, 0]), &slow(1)));
        assert_eq!(t.accecn.delivered_ecn_bytes[2], 0x100_0010);
        // Order 0 (kind 172): e0b, ceb, e1b.
        let mut o0 = with_opt(1, [0x11, 0, 0]);
        if let Some(o) = o0.options.accecn.as_mut() {
            o.order1 = false;
        }
        read(&mut t, &o0, &slow(1));
        assert_eq!(t.accecn.delivered_ecn_bytes[1], 0x10);
    }

    #[test]
    fn no_option_by_8_mib_gives_up_on_it() {
        let mut t = acc();
        t.bytes_sent = OPT_LATE_BYTES - 1;
        t.accecn_process(&ace(5), &slow(1));
        assert_eq!(t.accecn.fail_mode, 0);
        t.bytes_sent = OPT_LATE_BYTES;
        t.accecn_process(&ace(5), &slow(1));
        assert_eq!(t.accecn.fail_mode, TCP_ACCECN_OPT_FAIL_RECV);
        assert_eq!(t.accecn.saw_opt, TCP_ACCECN_OPT_FAIL_SEEN);
    }
}

//! The AccECN option we send, as Linux 6.18 sends it (tcp_output.c
//! `tcp_options_fit_accecn`, `tcp_established_options`, `tcp_synack_options`,
//! `tcp_syn_options`, `tcp_options_write`; include/net/tcp_ecn.h
//! `tcp_accecn_option_beacon_check`;
//! [RFC 9768 section 3.2.3](https://www.rfc-editor.org/rfc/rfc9768#section-3.2.3)):
//! always kind 174 (order 1: ECT(1), CE, ECT(0) bytes received, ECT counters from
//! 1), as many fields as fit in the option space the other options leave, but at
//! least those up to the counter that moved since the last one (`accecn_minlen`;
//! a SACK block gives way for them when there are more than two). A SYN-ACK
//! carries it with no bytes counted (`synack_ecn_bytes`), unless it is a
//! retransmission; later segments once the peer has sent an option
//! (`saw_accecn_opt`) and unless it seems to be lost on the path
//! (`TCP_ACCECN_OPT_FAIL_SEND`): on every segment with `net.ipv4.tcp_ecn_option`
//! 2, with 1 only while demanded (a change of the IP-ECN field or a CE mark
//! demands two, a counter crossing 2^22 bytes one, the SYN-ACK's option two, the
//! third ACK's one) or when no option went out for a third of an RTT
//! (`net.ipv4.tcp_ecn_option_beacon` 3: three beacons per RTT). Its bytes come off
//! the segment size (`tcp_current_mss`).

use super::accecn::field_init_offset;
use super::accecn::TCP_ACCECN_OPT_COUNTER_SEEN;
use super::sock::Tcb;
use crate::config::Config;
use crate::time::Instant;
use lowtide_wire::tcp::{AccEcnOption, TcpFlags, TcpOptions, TcpRepr};
use lowtide_wire::tcp::{MAX_OPTIONS_LEN, TCPOLEN_ACCECN_PERFIELD, TCP_ACCECN_NUMFIELDS};

/// `TCP_ACCECN_OPT_FAIL_SEND` (`tp->accecn_fail_mode`): our options seem not to
/// reach the peer; no more are sent.
pub(crate) const TCP_ACCECN_OPT_FAIL_SEND: u8 = 4;
/// `TCP_ACCECN_OPTION_FULL`: `net.ipv4.tcp_ecn_option` 2, the option on every
/// segment.
const TCP_ACCECN_OPTION_FULL: u8 = 2;
/// `TCP_ACCECN_MAXSIZE`: the option with its three fields.
const TCP_ACCECN_MAXSIZE: usize = 2 + TCP_ACCECN_NUMFIELDS * TCPOLEN_ACCECN_PERFIELD;
/// `TCPOLEN_SACK_PERBLOCK`.
const TCPOLEN_SACK_PERBLOCK: usize = 8;

/// What `tcp_options_fit_accecn` decides: the option's fields, the bytes it adds
/// (alignment the other options leave included), and the SACK blocks left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AccEcnFit {
    /// `num_accecn_fields`.
    pub fields: u8,
    /// The option's bytes, as `tcp_options_fit_accecn` returns them before taking
    /// the SACK blocks it removed off: what `remaining` loses to it.
    pub size: usize,
    /// `num_sack_blocks` after the fit.
    pub sack_blocks: usize,
}

/// `tcp_options_fit_accecn`: the most fields (3 down to `required`) that fit in
/// `remaining` bytes, each size padded to a word unless its odd bytes fit in the
/// alignment of the options after it (`max_combine_saving`: 2 before SACK blocks
/// or a lone SACK-permitted, 1 before the window scale); with more than two SACK
/// blocks and required fields that do not fit, SACK blocks give way one by one.
/// None if even `required` fields do not fit. Every caller's `remaining` is a
/// whole number of words, so an empty option always fits when nothing is
/// required (Linux's 7-bit field count never wraps).
pub(crate) fn options_fit_accecn(
    required: u8,
    remaining: usize,
    max_combine_saving: usize,
    sack_blocks: usize,
) -> Option<AccEcnFit> {
    let required = required as i32;
    let mut size = TCP_ACCECN_MAXSIZE;
    let mut sack = sack_blocks;
    let mut reduce = 0;
    let mut rem = remaining;
    let mut fields = TCP_ACCECN_NUMFIELDS as i32;
    while fields >= required {
        let align = match size & 3 > max_combine_saving {
            true => (size + 3) & !3,
            false => size & !3,
        };
        if rem >= align {
            size = align;
            break;
        } else if fields == required && sack > 2 && required > 0 {
            // "Try to fit the option by removing one SACK block."
            sack -= 1;
            reduce += 1;
            rem += TCPOLEN_SACK_PERBLOCK;
            fields = TCP_ACCECN_NUMFIELDS as i32;
            size = TCP_ACCECN_MAXSIZE;
            continue;
        }
        fields -= 1;
        if fields < 0 {
            break;
        }
        size -= TCPOLEN_ACCECN_PERFIELD;
    }
    if fields < required || fields < 0 {
        return None;
    }
    Some(AccEcnFit {
        fields: fields as u8,
        size: size.saturating_sub(reduce * TCPOLEN_SACK_PERBLOCK),
        sack_blocks: sack,
    })
}

/// The option with `fields` of the counters `bytes` (ECT(1), ECT(0), CE bytes as
/// `received_ecn_bytes` keeps them), in order 1 and with their initial offsets,
/// as `tcp_options_write` writes it.
fn accecn_option(fields: u8, bytes: [u32; 3]) -> AccEcnOption {
    use super::ecn::{INET_ECN_CE, INET_ECN_ECT_0, INET_ECN_ECT_1};
    let field = |ecnfield: u8| {
        bytes[(ecnfield - 1) as usize].wrapping_add(field_init_offset(ecnfield)) & 0xFF_FFFF
    };
    let mut counters = [
        field(INET_ECN_ECT_1),
        field(INET_ECN_CE),
        field(INET_ECN_ECT_0),
    ];
    for c in counters.iter_mut().skip(fields as usize) {
        *c = 0;
    }
    AccEcnOption {
        order1: true,
        fields,
        counters,
    }
}

/// Bytes of `o` as laid out on the wire (`tcp_syn_options`' and
/// `tcp_synack_options`' `MAX_TCP_OPTION_SPACE - remaining`).
fn options_len(o: &TcpOptions) -> usize {
    let r = TcpRepr {
        flags: TcpFlags::SYN,
        options: *o,
        ..TcpRepr::default()
    };
    r.header_len() - lowtide_wire::tcp::TCP_HEADER_LEN
}

impl Tcb {
    /// `tcp_accecn_option_beacon_check`: with `net.ipv4.tcp_ecn_option_beacon` n,
    /// an option is due when none went out for 1/n of the smoothed RTT.
    fn accecn_option_beacon_check(&self, cfg: &Config, now: Instant) -> bool {
        let beacon = cfg.tcp_ecn_option_beacon as u64;
        if beacon == 0 {
            return false;
        }
        let since = now.saturating_since(self.accecn.opt_tstamp).as_micros() as u64;
        since * beacon >= self.rtt.srtt_us as u64
    }

    /// `tcp_established_options`' AccECN part, once `size` bytes of options (the
    /// TCP-MD5 option, timestamps, `sack_blocks` SACK blocks) are laid out: the
    /// option this segment carries (and the SACK blocks it leaves), if the
    /// connection is AccECN, `net.ipv4.tcp_ecn_option` is on, the peer has sent
    /// an option (of any kind, even a zeroed one), ours do not seem lost, and the
    /// option is due: always with `tcp_ecn_option` 2, else while demanded or as a
    /// beacon.
    pub(crate) fn established_accecn(
        &self,
        cfg: &Config,
        now: Instant,
        size: usize,
        sack_blocks: usize,
    ) -> Option<(AccEcnOption, AccEcnFit)> {
        let ecn_opt = cfg.tcp_ecn_option;
        let a = &self.accecn;
        if !self.ecn_mode_accecn()
            || ecn_opt == 0
            || a.saw_opt == 0
            || a.fail_mode & TCP_ACCECN_OPT_FAIL_SEND != 0
        {
            return None;
        }
        if ecn_opt < TCP_ACCECN_OPTION_FULL
            && a.opt_demand == 0
            && !self.accecn_option_beacon_check(cfg, now)
        {
            return None;
        }
        let saving = if sack_blocks > 0 { 2 } else { 0 };
        let remaining = MAX_OPTIONS_LEN.saturating_sub(size);
        let fit = options_fit_accecn(a.minlen, remaining, saving, sack_blocks)?;
        Some((accecn_option(fit.fields, a.received_ecn_bytes), fit))
    }

    /// The AccECN option of our SYN-ACK laid out with the options `o` so far: a
    /// request's (`tcp_synack_options`: `accecn_ok`, none on a SYN-ACK after a
    /// timeout, `req->num_timeout`) or a simultaneous open's (`tcp_syn_options`
    /// for a SYN with ACK: up to the first retransmission, "as mentioned in
    /// 3.1.4.1. Retransmitted SYNs"), with no bytes counted
    /// (`synack_ecn_bytes`), as many fields as fit. A SYN carries none.
    pub(crate) fn synack_accecn(&self, cfg: &Config, o: &TcpOptions) -> Option<AccEcnOption> {
        let request = self.synack_of_request();
        let retries_ok = match request {
            true => self.icsk.retransmits < 1,
            false => self.icsk.retransmits < 2,
        };
        let accecn = match request {
            true => self.ecn_flags & super::ecn::TCP_ECN_MODE_ACCECN != 0,
            false => self.ecn_mode_accecn(),
        };
        let remaining = MAX_OPTIONS_LEN.saturating_sub(options_len(o));
        if !accecn || cfg.tcp_ecn_option == 0 || !retries_ok || remaining < 2 {
            return None;
        }
        // tcp_synack_options_combine_saving
        let saving = match (
            o.sack_permitted && o.timestamp.is_none(),
            o.wscale.is_some(),
        ) {
            (true, _) => 2,
            (false, true) => 1,
            (false, false) => 0,
        };
        let fit = options_fit_accecn(0, remaining, saving, 0)?;
        Some(accecn_option(fit.fields, [0; 3]))
    }

    /// `tcp_options_write`'s bookkeeping for a segment of ours (a request's
    /// SYN-ACK has no `tp`): an option sent satisfies `accecn_minlen` and one
    /// demand, restarts the beacon's clock, and remembers whether a D-SACK went
    /// with it (`accecn_opt_sent_w_dsack`).
    pub(crate) fn accecn_option_written(&mut self, now: Instant, sent: bool, dsack: bool) {
        let a = &mut self.accecn;
        if !sent {
            a.opt_sent_w_dsack = false;
            return;
        }
        a.minlen = 0;
        a.opt_tstamp = now;
        a.opt_sent_w_dsack = dsack;
        a.opt_demand = a.opt_demand.saturating_sub(1);
    }

    /// Our SYN-ACK is a request's (`tcp_make_synack`, no `tp`: a listener's child
    /// or a Fast Open child), not a simultaneous open's (`tcp_transmit_skb`).
    pub(crate) fn synack_of_request(&self) -> bool {
        self.parent.is_some() || self.tfo.rsk.is_some()
    }

    /// `tcp_validate_incoming`'s step 4 on an AccECN connection: a SYN's AccECN
    /// option, the first the peer sent, is checked (`tcp_accecn_option_init`) and
    /// answered with one.
    pub(crate) fn accecn_syn_option(&mut self, th: &TcpRepr) {
        if !self.ecn_mode_accecn() {
            return;
        }
        if let Some(opt) = th.options.accecn.as_ref() {
            if self.accecn.saw_opt < TCP_ACCECN_OPT_COUNTER_SEEN {
                self.accecn_option_seen(opt);
                self.accecn.opt_demand = self.accecn.opt_demand.max(1);
            }
        }
    }

    /// `tcp_rcv_spurious_retrans`' AccECN part, for data wholly or partly below
    /// `rcv_nxt` starting at `seq`: our last segment carried the option and a
    /// D-SACK of this very data, which came again: that segment was lost after
    /// the second retransmission, probably for its option; no more are sent.
    pub(crate) fn rcv_spurious_retrans(&mut self, seq: u64) {
        if self.ecn_mode_accecn()
            && self.accecn.opt_sent_w_dsack
            && self.accecn.last_dsack_start == Some(seq)
        {
            self.accecn.fail_mode |= TCP_ACCECN_OPT_FAIL_SEND;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(
        required: u8,
        remaining: usize,
        saving: usize,
        sack: usize,
    ) -> Option<(u8, usize, usize)> {
        options_fit_accecn(required, remaining, saving, sack)
            .map(|f| (f.fields, f.size, f.sack_blocks))
    }

    #[test]
    fn fit_as_tcp_options_fit_accecn() {
        // Timestamps only: 28 bytes left, all three fields, padded to 12.
        assert_eq!(fit(0, 28, 0, 0), Some((3, 12, 0)));
        // TCP-MD5 and timestamps leave 8: two fields.
        assert_eq!(fit(0, 8, 0, 0), Some((2, 8, 0)));
        // 4 bytes: one field needs 8 padded; an empty option a word of its own.
        assert_eq!(fit(0, 4, 0, 0), Some((0, 4, 0)));
        // Before SACK blocks (saving 2): one field's last byte and an empty
        // option fill the SACK option's NOPs.
        assert_eq!(fit(0, 4, 2, 1), Some((1, 4, 1)));
        assert_eq!(fit(0, 0, 2, 3), Some((0, 0, 3)));
        // A SYN-ACK's window scale NOP takes one byte (saving 1): one field in 4.
        assert_eq!(fit(0, 4, 1, 0), Some((1, 4, 0)));
        // Required fields that do not fit: nothing...
        assert_eq!(fit(1, 4, 0, 0), None);
        assert_eq!(fit(3, 8, 0, 0), None);
        assert_eq!(fit(1, 0, 2, 2), None, "two SACK blocks stay");
        // ...unless a third SACK block gives way: 8 bytes, two fields; the option
        // costs nothing beyond the block's bytes.
        assert_eq!(fit(1, 0, 2, 3), Some((2, 0, 2)));
        assert_eq!(fit(3, 0, 2, 3), None, "12 bytes do not fit in 8");
        assert_eq!(fit(2, 0, 2, 4), Some((2, 0, 3)));
    }

    use crate::tcp::accecn::TCP_ACCECN_OPT_FAIL_SEEN;
    use crate::tcp::ecn::{TCP_ECN_MODE_ACCECN, TCP_ECN_OK};
    use core::time::Duration;

    fn cfg(option: u8, beacon: u8) -> Config {
        Config {
            tcp_ecn: 3,
            tcp_ecn_option: option,
            tcp_ecn_option_beacon: beacon,
            ..Config::default()
        }
    }

    /// An AccECN connection that has seen the peer's option, sent one at time 1 s,
    /// with an RTT of 300 ms.
    fn acc() -> Tcb {
        let mut t = Tcb::for_test(&cfg(2, 3));
        t.ecn_flags = TCP_ECN_MODE_ACCECN;
        t.accecn.saw_opt = TCP_ACCECN_OPT_COUNTER_SEEN;
        t.accecn.opt_tstamp = Instant::ZERO + Duration::from_secs(1);
        t.rtt.srtt_us = 300_000;
        t
    }

    fn sent(t: &Tcb, c: &Config, ms: u64) -> Option<u8> {
        let now = Instant::ZERO + Duration::from_millis(1000 + ms);
        t.established_accecn(c, now, 12, 0).map(|(o, _)| o.fields)
    }

    #[test]
    fn established_segments_carry_it_as_tcp_established_options() {
        let mut t = acc();
        assert_eq!(sent(&t, &cfg(2, 3), 0), Some(3), "tcp_ecn_option 2: always");
        assert_eq!(sent(&t, &cfg(0, 3), 0), None, "tcp_ecn_option 0: never");
        // tcp_ecn_option 1: while demanded, or as a beacon every srtt / 3.
        assert_eq!(sent(&t, &cfg(1, 3), 99), None);
        assert_eq!(sent(&t, &cfg(1, 3), 100), Some(3), "beacon");
        assert_eq!(sent(&t, &cfg(1, 0), 10_000), None, "no beacons");
        t.accecn.opt_demand = 1;
        assert_eq!(sent(&t, &cfg(1, 0), 0), Some(3), "demanded");
        // Not before the peer sent one (a zeroed one counts), nor once ours seem
        // lost, nor on a classic ECN connection.
        let mut t = acc();
        t.accecn.saw_opt = 0;
        assert_eq!(sent(&t, &cfg(2, 3), 0), None);
        t.accecn.saw_opt = TCP_ACCECN_OPT_FAIL_SEEN;
        assert_eq!(sent(&t, &cfg(2, 3), 0), Some(3));
        t.accecn.fail_mode = TCP_ACCECN_OPT_FAIL_SEND;
        assert_eq!(sent(&t, &cfg(2, 3), 0), None);
        let mut t = acc();
        t.ecn_flags = TCP_ECN_OK;
        assert_eq!(sent(&t, &cfg(2, 3), 0), None);
        // accecn_minlen: an ECT(0) change needs all three fields, which do not fit
        // beside TCP-MD5 and timestamps (8 bytes left).
        let mut t = acc();
        let now = Instant::ZERO;
        assert_eq!(
            t.established_accecn(&cfg(2, 3), now, 32, 0)
                .map(|(o, _)| o.fields),
            Some(2)
        );
        t.accecn.minlen = 3;
        assert!(t.established_accecn(&cfg(2, 3), now, 32, 0).is_none());
    }

    #[test]
    fn writing_it_keeps_the_books_of_tcp_options_write() {
        let mut t = acc();
        t.accecn.minlen = 3;
        t.accecn.opt_demand = 2;
        let now = Instant::ZERO + Duration::from_secs(5);
        t.accecn_option_written(now, true, true);
        let a = &t.accecn;
        assert_eq!(
            (a.minlen, a.opt_demand, a.opt_tstamp, a.opt_sent_w_dsack),
            (0, 1, now, true)
        );
        t.accecn_option_written(now, true, false);
        t.accecn_option_written(now, true, false);
        assert_eq!(t.accecn.opt_demand, 0);
        t.accecn.opt_sent_w_dsack = true;
        t.accecn.minlen = 2;
        t.accecn_option_written(now + Duration::from_secs(1), false, true);
        let a = &t.accecn;
        assert_eq!(
            (a.minlen, a.opt_tstamp, a.opt_sent_w_dsack),
            (2, now, false)
        );
    }

    #[test]
    fn a_dsacked_retransmission_after_an_option_stops_them() {
        let mut t = acc();
        t.accecn.last_dsack_start = Some(1000);
        t.rcv_spurious_retrans(1000);
        assert_eq!(
            t.accecn.fail_mode, 0,
            "the last segment had no option and D-SACK"
        );
        t.accecn.opt_sent_w_dsack = true;
        t.rcv_spurious_retrans(2000);
        assert_eq!(t.accecn.fail_mode, 0, "another D-SACK's data");
        t.rcv_spurious_retrans(1000);
        assert_eq!(t.accecn.fail_mode, TCP_ACCECN_OPT_FAIL_SEND);
    }

    #[test]
    fn the_synack_carries_zero_counts_until_retransmitted() {
        let c = cfg(2, 3);
        let mut t = acc();
        t.state = crate::tcp::TcpState::SynRecv;
        let mut o = TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            timestamp: Some((1, 2)),
            wscale: Some(7),
            ..TcpOptions::default()
        };
        // 20 bytes used: three fields, zero bytes counted (ECT counters from 1).
        let opt = t.synack_accecn(&c, &o).expect("option");
        assert_eq!((opt.fields, opt.counters), (3, [1, 0, 1]));
        assert!(
            t.synack_accecn(&cfg(0, 3), &o).is_none(),
            "tcp_ecn_option 0"
        );
        // A simultaneous open's SYN-ACK keeps it on its first retransmission.
        t.icsk.retransmits = 1;
        assert!(t.synack_accecn(&c, &o).is_some());
        t.icsk.retransmits = 2;
        assert!(t.synack_accecn(&c, &o).is_none());
        // A request's loses it after a timeout.
        t.parent = Some(0);
        t.icsk.retransmits = 1;
        assert!(t.synack_accecn(&c, &o).is_none());
        t.icsk.retransmits = 0;
        // After a 12-byte Fast Open cookie 4 bytes are left: one field, its last
        // byte in the window scale's NOP; after a 16-byte one, none.
        let cookie = |n: usize| {
            Some(lowtide_wire::tcp::FastOpenOption::cookie(
                false,
                &[7; 16][..n],
            ))
        };
        o.fastopen = cookie(12);
        assert_eq!(t.synack_accecn(&c, &o).map(|o| o.fields), Some(1));
        o.fastopen = cookie(16);
        assert!(t.synack_accecn(&c, &o).is_none());
        // Without timestamps, a lone SACK-permitted's two NOPs: 8 bytes left.
        o.timestamp = None;
        assert_eq!(t.synack_accecn(&c, &o).map(|o| o.fields), Some(2));
    }

    #[test]
    fn the_option_counts_from_its_offsets_in_order_1() {
        // received_ecn_bytes: ECT(1), ECT(0), CE.
        let o = accecn_option(3, [10, 2000, 300]);
        assert!(o.order1);
        assert_eq!(o.counters, [11, 300, 2001]);
        assert_eq!(accecn_option(1, [0; 3]).counters, [1, 0, 0]);
        assert_eq!(
            accecn_option(3, [0xFF_FFFF, 0, 0]).counters[0],
            0,
            "24 bits"
        );
    }
}

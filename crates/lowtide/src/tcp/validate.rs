//! tcp_input.c `tcp_validate_incoming` (Linux 6.18): PAWS with its disordered-ACK
//! exemption, `tcp_sequence`, the RST and SYN rules of RFC 5961, and the replies
//! they draw (`tcp_send_dupack`, challenge ACKs); `tcp_reset`; `tcp_paws_check` and
//! `tcp_replace_ts_recent` (RFC 7323 sections [4.3](https://www.rfc-editor.org/rfc/rfc7323#section-4.3) and
//! [5](https://www.rfc-editor.org/rfc/rfc7323#section-5)).

use super::consts::{TCP_MAX_QUICKACKS, TCP_PAWS_WINDOW, TCP_PAWS_WRAP_SECS};
use super::seq::Seq;
use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::SocketError;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use tracing::trace;

/// Why `tcp_sequence` or PAWS refused a segment (Linux's drop reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reject {
    /// `SKB_DROP_REASON_TCP_RFC7323_PAWS`.
    Paws,
    /// `SKB_DROP_REASON_TCP_RFC7323_PAWS_ACK`: an old pure ACK (reordered).
    PawsAck,
    /// `SKB_DROP_REASON_TCP_OLD_SEQUENCE`: it ends before `rcv_wup`.
    OldSequence,
    /// `SKB_DROP_REASON_TCP_INVALID_SEQUENCE`: it starts beyond the window.
    InvalidSequence,
    /// `SKB_DROP_REASON_TCP_INVALID_END_SEQUENCE`: it ends beyond the window while
    /// data waits in the receive queue.
    InvalidEndSequence,
}

/// A segment's sequence space as `TCP_SKB_CB`: `seq`, `end_seq` (data, SYN and FIN
/// counted; `None` when it would wrap below the peer's ISN) and its flags.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegSpace {
    /// Stream offset of the first sequence number.
    pub seq: u64,
    /// Stream offset after the last one, if representable.
    pub end: Option<u64>,
}

impl SegSpace {
    /// `seq != end_seq`: the segment occupies sequence space (data, SYN or FIN).
    fn occupies(&self) -> bool {
        self.end != Some(self.seq)
    }
}

impl Tcb {
    /// `tcp_validate_incoming`: true when the segment goes on to `tcp_ack`.
    /// `syn_inerr`: ESTABLISHED (`tcp_rcv_established`) counts a bad SYN in
    /// `TcpInErrs` too.
    pub(crate) fn validate_incoming(
        &mut self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        sp: SegSpace,
        syn_inerr: bool,
    ) -> bool {
        let (rst, syn) = (
            th.flags.contains(TcpFlags::RST),
            th.flags.contains(TcpFlags::SYN),
        );
        // RFC 7323 section 5.3 (H1): PAWS first; a reset is accepted even if it fails.
        if let Some(reason) = self.paws_reject(ctx, th, sp) {
            if !rst {
                if syn {
                    return self.syn_challenge(ctx, syn_inerr);
                }
                // Old ACKs are common (reordering): counted, no duplicate ACK.
                if reason == Reject::PawsAck {
                    ctx.mib.inc(Mib::TcpExtPAWSOldAck);
                    return self.discard();
                }
                ctx.mib.inc(Mib::TcpExtPAWSEstab);
                trace!(ts_recent = self.rx_opt.ts_recent, "drop: PAWS");
                if !self.oow_rate_limited_seg(ctx, Mib::TcpExtTCPACKSkippedPAWS, sp.occupies(), syn)
                {
                    self.send_dupack(ctx, sp);
                }
                return self.discard();
            }
        }
        // Step 1: the sequence number (RFC 9293 section 3.10.7.4).
        if let Err(reason) = self.tcp_sequence(sp, th.flags.contains(TcpFlags::FIN)) {
            if !rst {
                if syn {
                    return self.syn_challenge(ctx, syn_inerr);
                }
                if matches!(reason, Reject::InvalidSequence | Reject::InvalidEndSequence) {
                    ctx.mib.inc(Mib::TcpExtBeyondWindow);
                }
                if !self.oow_rate_limited_seg(ctx, Mib::TcpExtTCPACKSkippedSeq, sp.occupies(), syn)
                {
                    trace!(seq = th.seq, ?reason, "out of window: duplicate ACK");
                    self.send_dupack(ctx, sp);
                }
            } else if self.reset_check(sp.seq) {
                // `reset:`: tcp_reset, then __kfree_skb (not a drop).
                self.tcp_reset(ctx);
                return false;
            }
            return self.discard();
        }
        // Step 2: RST (RFC 5961 section 3.2, extended to rcv_nxt - 1 after a FIN and
        // to the right edge of our highest SACK block).
        if rst {
            if sp.seq == self.rcv_nxt || self.reset_check(sp.seq) || self.rst_at_max_sack(sp.seq) {
                self.tcp_reset(ctx);
                return false;
            }
            // An out-of-order reset before any data on an active Fast Open
            // connection: a middlebox may be at work (tcp_fastopen_active_disable).
            if self.tfo.syn_fastopen
                && self.data_segs_in == 0
                && self.state == TcpState::Established
            {
                self.tfo.blackhole = true;
            }
            self.challenge_ack(ctx);
            return self.discard(); // SKB_DROP_REASON_TCP_RESET
        }
        // Step 4: SYN (RFC 5961 section 4.2): a challenge ACK, except the peer's
        // SYN-ACK retransmitted in a simultaneous open that it completes.
        if syn {
            self.accecn_syn_option(th);
            let ack = self.snd_off(Seq(th.ack));
            let synack_again = self.state == TcpState::SynRecv
                && self.parent.is_none()
                && th.flags.contains(TcpFlags::ACK)
                && sp
                    .seq
                    .checked_add(1)
                    .is_some_and(|n| sp.end == Some(n) && n == self.rcv_nxt)
                && ack == self.snd_nxt;
            if !synack_again {
                return self.syn_challenge(ctx, syn_inerr);
            }
        }
        true
    }

    /// `syn_challenge:` of `tcp_validate_incoming`. Always false (discard).
    fn syn_challenge(&mut self, ctx: &mut Ctx, syn_inerr: bool) -> bool {
        if syn_inerr {
            ctx.mib.inc(Mib::TcpInErrs);
        }
        ctx.mib.inc(Mib::TcpExtTCPSYNChallenge);
        self.challenge_ack(ctx);
        self.discard() // SKB_DROP_REASON_TCP_INVALID_SYN
    }

    /// `tcp_validate_incoming`'s `discard:` (`tcp_drop_reason`, tcp/drops.rs).
    /// Always false.
    fn discard(&mut self) -> bool {
        self.tcp_drop();
        false
    }

    /// `tcp_paws_check`: is the timestamp `tsval` acceptable against `ts_recent`
    /// with a replay window of `paws_win` ticks? A `ts_recent` older than
    /// `TCP_PAWS_WRAP` seconds, or zero (some stacks send TSval 0 in SYNs), is no
    /// reference.
    pub(crate) fn paws_check(&self, ctx: &Ctx, tsval: u32, paws_win: i32) -> bool {
        if (self.rx_opt.ts_recent.wrapping_sub(tsval) as i32) <= paws_win {
            return true;
        }
        let stamp = self.rx_opt.ts_recent_stamp.as_nanos() / 1_000_000_000;
        ctx.now.as_nanos() / 1_000_000_000 >= stamp + TCP_PAWS_WRAP_SECS
            || self.rx_opt.ts_recent == 0
    }

    /// PAWS in `tcp_validate_incoming`: `tcp_paws_check` with `TCP_PAWS_WINDOW`,
    /// then `tcp_disordered_ack_check`. `None`: acceptable.
    fn paws_reject(&self, ctx: &Ctx, th: &TcpRepr, sp: SegSpace) -> Option<Reject> {
        let (tsval, _) = th.options.timestamp.filter(|_| self.rx_opt.tstamp_ok)?;
        if self.paws_check(ctx, tsval, TCP_PAWS_WINDOW) {
            return None;
        }
        self.disordered_ack_check(th, sp, tsval)
    }

    /// `tcp_disordered_ack_check`
    /// ([RFC 7323 section 5.2](https://www.rfc-editor.org/rfc/rfc7323#section-5.2)'s
    /// exception for ACKs): a pure duplicate ACK at `rcv_nxt` that changes no window and
    /// whose timestamp is within the replay window (`tcp_tsval_replay`: 1.2 RTO in ms
    /// ticks) is accepted although PAWS failed.
    fn disordered_ack_check(&self, th: &TcpRepr, sp: SegSpace, tsval: u32) -> Option<Reject> {
        if !th.flags.contains(TcpFlags::ACK) || sp.occupies() {
            return Some(Reject::Paws);
        }
        if sp.seq != self.rcv_nxt {
            return Some(if sp.seq < self.rcv_nxt {
                Reject::PawsAck
            } else {
                Reject::Paws
            });
        }
        let ack = self.snd_off(Seq(th.ack));
        let nwin = (th.window as u32) << self.rx_opt.snd_wscale;
        if ack != self.snd_una || self.may_update_window(ack, sp.seq, nwin) {
            return Some(Reject::Paws);
        }
        let replay = (self.icsk.rto.as_millis() as u64 * 1200 / 1000) as i64;
        if self.rx_opt.ts_recent.wrapping_sub(tsval) as i32 as i64 > replay {
            return Some(Reject::Paws);
        }
        None
    }

    /// `tcp_may_update_window`: the ACK advances `snd_una`, or the segment is newer
    /// than the one that last set the window, or as new with a larger (or zero)
    /// window.
    pub(crate) fn may_update_window(&self, ack: u64, seq: u64, nwin: u32) -> bool {
        ack > self.snd_una
            || seq > self.snd_wl1
            || (seq == self.snd_wl1 && (nwin > self.snd_wnd || nwin == 0))
    }

    /// `tcp_sequence`: does the segment fit the receive window? One that ends beyond
    /// it is taken only while the receive queue is empty (a buggy peer must not
    /// freeze), and a FIN may stick out by its own sequence number (Linux
    /// 6.18.y: "tcp: re-enable acceptance of FIN packets when RWIN is 0").
    pub(crate) fn tcp_sequence(&self, sp: SegSpace, fin: bool) -> Result<(), Reject> {
        let Some(end) = sp.end else {
            return Err(Reject::OldSequence);
        };
        if end < self.rcv_wup {
            return Err(Reject::OldSequence);
        }
        let limit = self.rcv_nxt + self.receive_window() as u64;
        if end > limit {
            if end - fin as u64 <= limit {
                return Ok(());
            }
            if sp.seq > limit {
                return Err(Reject::InvalidSequence);
            }
            if !self.rcv_queue.is_empty() {
                return Err(Reject::InvalidEndSequence);
            }
        }
        Ok(())
    }

    /// `tcp_reset_check`: after the peer's FIN (CLOSE-WAIT, LAST-ACK, CLOSING) a reset
    /// at `rcv_nxt - 1` is taken (some stacks send it with the FIN's sequence).
    fn reset_check(&self, seq: u64) -> bool {
        // A sequence number before the peer's ISN unwraps to near u64::MAX.
        seq.checked_add(1) == Some(self.rcv_nxt)
            && matches!(
                self.state,
                TcpState::CloseWait | TcpState::LastAck | TcpState::Closing
            )
    }

    /// A reset at the right edge of the highest SACK block we report.
    fn rst_at_max_sack(&self, seq: u64) -> bool {
        self.rx_opt.sack_ok && self.ofo.sack_blocks().map(|(_, e)| e).max() == Some(seq)
    }

    /// `tcp_send_dupack`: an immediate ACK; for a segment reaching below `rcv_nxt`
    /// also quick-ACK mode (our ACK was probably lost) and a D-SACK of its old part.
    pub(crate) fn send_dupack(&mut self, ctx: &mut Ctx, sp: SegSpace) {
        if let (true, Some(end)) = (sp.occupies() && sp.seq < self.rcv_nxt, sp.end) {
            ctx.mib.inc(Mib::TcpExtDelayedACKLost);
            self.enter_quickack_mode(TCP_MAX_QUICKACKS);
            if self.rx_opt.sack_ok && ctx.cfg.tcp_dsack {
                self.rehash_on_duplicate_data(ctx);
                self.rcv_spurious_retrans(sp.seq);
            }
            self.dsack_set(ctx, sp.seq, end.min(self.rcv_nxt));
        }
        self.send_ack(ctx);
    }

    /// `tcp_dsack_set` (RFC 2883): report `[seq, end)` as a D-SACK, counted as old
    /// (below `rcv_nxt`) or out-of-order data.
    pub(crate) fn dsack_set(&mut self, ctx: &mut Ctx, seq: u64, end: u64) {
        if !self.rx_opt.sack_ok || !ctx.cfg.tcp_dsack {
            return;
        }
        ctx.mib.inc(match seq < self.rcv_nxt {
            true => Mib::TcpExtTCPDSACKOldSent,
            false => Mib::TcpExtTCPDSACKOfoSent,
        });
        self.dsack = Some((seq, end));
        self.accecn.last_dsack_start = Some(seq);
    }

    /// `tcp_reset`: the connection ends with the error BSD gives (`ECONNREFUSED` in
    /// SYN-SENT, `EPIPE` in CLOSE-WAIT, else `ECONNRESET`).
    pub(crate) fn tcp_reset(&mut self, ctx: &mut Ctx) {
        trace!(tuple = ?self.tuple, "reset by peer");
        let err = match self.state {
            TcpState::Closed => return,
            // A child no one has accepted yet (inet_csk_reqsk_queue_drop) goes
            // without an error (TIME-WAIT is a timewait socket's, tcp/minisocks.rs).
            TcpState::SynRecv if self.parent.is_some() => return self.set_closed(ctx),
            TcpState::SynSent => SocketError::ConnectionRefused,
            TcpState::CloseWait => SocketError::BrokenPipe,
            _ => SocketError::ConnectionReset,
        };
        self.done_with_error(ctx, err);
    }

    /// `tcp_replace_ts_recent`: after `tcp_ack` accepted the segment, a timestamp
    /// from a segment at or before `rcv_wup` that is not older (`tcp_paws_check`
    /// with window 0) becomes `ts_recent` (`tcp_store_ts_recent`).
    pub(crate) fn replace_ts_recent(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64) {
        let Some((tsval, _)) = th.options.timestamp.filter(|_| self.rx_opt.tstamp_ok) else {
            return;
        };
        if seq <= self.rcv_wup && self.paws_check(ctx, tsval, 0) {
            self.rx_opt.ts_recent = tsval;
            self.rx_opt.ts_recent_stamp = ctx.now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::rcvqueue::Payload;
    use crate::tcp::skbuff::rx_truesize;
    use crate::tcp::TestStack;
    use crate::time::Instant;
    use core::time::Duration;
    use lowtide_wire::tcp::TcpOptions;

    /// ESTABLISHED, 10,000 bytes of window from rcv_nxt 1001, timestamps and SACK
    /// on, ts_recent 5000 stored at time zero.
    fn established(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        (t.rcv_nxt, t.rcv_wup, t.rcv_wnd) = (1001, 1001, 10_000);
        (t.snd_una, t.snd_nxt, t.snd_wl1, t.snd_wnd) = (1, 1, 1001, 65535);
        (t.rx_opt.tstamp_ok, t.rx_opt.sack_ok, t.rx_opt.ts_recent) = (true, true, 5000);
        t.icsk.rto = Duration::from_millis(300);
        t
    }

    fn seg(t: &Tcb, flags: TcpFlags, seq: u64, tsval: Option<u32>) -> TcpRepr {
        TcpRepr {
            seq: t.rcv_seq(seq).0,
            ack: t.snd_seq(t.snd_una).0,
            flags,
            window: 65535,
            options: TcpOptions {
                timestamp: tsval.map(|v| (v, 1)),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn space(seq: u64, len: u64) -> SegSpace {
        SegSpace {
            seq,
            end: Some(seq + len),
        }
    }

    #[test]
    fn tcp_sequence_takes_an_overlong_segment_only_with_an_empty_queue() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = established(&cfg);
        let limit = 1001 + 10_000;
        assert_eq!(
            t.tcp_sequence(space(0, 500), false),
            Err(Reject::OldSequence)
        );
        assert_eq!(
            t.tcp_sequence(
                SegSpace {
                    seq: u64::MAX,
                    end: None
                },
                false
            ),
            Err(Reject::OldSequence)
        );
        assert_eq!(
            t.tcp_sequence(space(limit + 1, 1), false),
            Err(Reject::InvalidSequence)
        );
        assert_eq!(
            t.tcp_sequence(space(limit - 10, 100), false),
            Ok(()),
            "queue empty"
        );
        assert_eq!(
            t.tcp_sequence(space(limit, 0), false),
            Ok(()),
            "empty at the edge"
        );
        let ctx = st.ctx(&cfg, Instant::ZERO, false);
        t.rcv_queue.push_payload(
            ctx.frag,
            Payload::Flat(&[7; 10]),
            (rx_truesize(10), false),
            0,
        );
        assert_eq!(
            t.tcp_sequence(space(limit - 10, 100), false),
            Err(Reject::InvalidEndSequence)
        );
        // A FIN may stick out by its own sequence number, no more.
        assert_eq!(t.tcp_sequence(space(limit - 10, 11), true), Ok(()));
        assert_eq!(
            t.tcp_sequence(space(limit - 10, 12), true),
            Err(Reject::InvalidEndSequence)
        );
        t.rcv_wnd = 0;
        assert_eq!(
            t.tcp_sequence(space(1001, 1), false),
            Err(Reject::InvalidEndSequence),
            "zero-window probe"
        );
        assert_eq!(
            t.tcp_sequence(space(1001, 1), true),
            Ok(()),
            "bare FIN at a closed window"
        );
    }

    #[test]
    fn paws_check_window_zero_reference_and_wrap() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = established(&cfg);
        let ctx = st.ctx(&cfg, Instant::ZERO, false);
        assert!(
            t.paws_check(&ctx, 4999, 1),
            "one tick older: within TCP_PAWS_WINDOW"
        );
        assert!(!t.paws_check(&ctx, 4998, 1));
        assert!(
            !t.paws_check(&ctx, 4999, 0),
            "tcp_replace_ts_recent's window is 0"
        );
        assert!(t.paws_check(&ctx, 6000, 0));
        let late = Instant::ZERO + Duration::from_secs(TCP_PAWS_WRAP_SECS);
        let ctx = st.ctx(&cfg, late, false);
        assert!(
            t.paws_check(&ctx, 1, 1),
            "ts_recent older than TCP_PAWS_WRAP"
        );
        let ctx = st.ctx(&cfg, Instant::ZERO, false);
        t.rx_opt.ts_recent = 0;
        assert!(
            t.paws_check(&ctx, 0x8000_0000, 1),
            "ts_recent 0 is no reference"
        );
    }

    #[test]
    fn disordered_ack_check_branches() {
        let cfg = Config::default();
        let t = established(&cfg);
        let ack = |seq| seg(&t, TcpFlags::ACK, seq, Some(4990));
        // A pure duplicate ACK at rcv_nxt, no window update, 10 ms old: accepted.
        assert_eq!(
            t.disordered_ack_check(&ack(1001), space(1001, 0), 4990),
            None
        );
        // Older than 1.2 RTO (360 ms).
        assert_eq!(
            t.disordered_ack_check(&ack(1001), space(1001, 0), 4600),
            Some(Reject::Paws)
        );
        // Below rcv_nxt: an old ACK; above: not.
        assert_eq!(
            t.disordered_ack_check(&ack(900), space(900, 0), 4990),
            Some(Reject::PawsAck)
        );
        assert_eq!(
            t.disordered_ack_check(&ack(1100), space(1100, 0), 4990),
            Some(Reject::Paws)
        );
        // Data, or a window it would update.
        assert_eq!(
            t.disordered_ack_check(&ack(1001), space(1001, 10), 4990),
            Some(Reject::Paws)
        );
        let mut w = ack(1001);
        w.window = 0;
        assert_eq!(
            t.disordered_ack_check(&w, space(1001, 0), 4990),
            Some(Reject::Paws)
        );
        assert!(t.may_update_window(t.snd_una, 1001, 70_000));
        assert!(
            !t.may_update_window(t.snd_una, 1001, 60_000),
            "a smaller window, same segment"
        );
    }

    #[test]
    fn validate_incoming_replies_and_counts() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = established(&cfg);
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        t.rcv_queue.push_payload(
            ctx.frag,
            Payload::Flat(&[7; 10]),
            (rx_truesize(10), false),
            0,
        );
        // Ends beyond the window with data queued: a duplicate ACK.
        let th = seg(&t, TcpFlags::ACK, 10_900, Some(5000));
        assert!(!t.validate_incoming(&mut ctx, &th, space(10_900, 200), true));
        assert_eq!(ctx.mib.get(Mib::TcpExtBeyondWindow), 1);
        assert_eq!(ctx.out.len(), 1);
        // An old pure ACK failing PAWS: counted, no reply.
        let th = seg(&t, TcpFlags::ACK, 900, Some(4000));
        assert!(!t.validate_incoming(&mut ctx, &th, space(900, 0), true));
        assert_eq!(ctx.mib.get(Mib::TcpExtPAWSOldAck), 1);
        assert_eq!(ctx.mib.get(Mib::TcpExtPAWSEstab), 0);
        assert_eq!(ctx.out.len(), 1);
        // One tick old with data: passes.
        let th = seg(&t, TcpFlags::ACK, 1001, Some(4999));
        assert!(t.validate_incoming(&mut ctx, &th, space(1001, 100), true));
        // A SYN in window: TcpInErrs in ESTABLISHED, and a challenge ACK.
        ctx.now += Duration::from_secs(1);
        let th = seg(&t, TcpFlags::SYN, 1001, Some(5000));
        assert!(!t.validate_incoming(&mut ctx, &th, space(1001, 1), true));
        assert_eq!(ctx.mib.get(Mib::TcpInErrs), 1);
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPSYNChallenge), 1);
        assert_eq!(ctx.out.len(), 2);
    }

    #[test]
    fn resets_at_rcv_nxt_minus_one_after_fin_and_at_the_sack_edge() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = established(&cfg);
        // ESTABLISHED: rcv_nxt - 1 is before rcv_wup, out of window: dropped.
        let rst = seg(&t, TcpFlags::RST, 1000, None);
        assert!(!t.validate_incoming(&mut ctx, &rst, space(1000, 0), true));
        assert_eq!(t.state, TcpState::Established);
        assert!(ctx.out.is_empty(), "no reply to an out-of-window reset");
        // In the window but not at rcv_nxt: a challenge ACK.
        let rst = seg(&t, TcpFlags::RST, 1500, None);
        assert!(!t.validate_incoming(&mut ctx, &rst, space(1500, 0), true));
        assert_eq!(t.state, TcpState::Established);
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPChallengeACK), 1);
        // CLOSE-WAIT (the FIN took 1000): taken, EPIPE.
        t.state = TcpState::CloseWait;
        assert!(!t.validate_incoming(&mut ctx, &rst, space(1000, 0), false));
        assert_eq!(
            (t.state, t.sk_err),
            (TcpState::Closed, Some(SocketError::BrokenPipe))
        );
        assert_eq!(ctx.mib.get(Mib::TcpEstabResets), 1);
        // The right edge of the highest SACK block.
        let mut t = established(&cfg);
        t.ofo.insert(
            2001,
            vec![1; 100].into(),
            crate::tcp::skbuff::RxSkb::page_frag(rx_truesize(100), true),
        );
        t.ofo.insert(
            3001,
            vec![1; 100].into(),
            crate::tcp::skbuff::RxSkb::page_frag(rx_truesize(100), true),
        );
        let rst = seg(&t, TcpFlags::RST, 2101, None);
        assert!(!t.validate_incoming(&mut ctx, &rst, space(2101, 0), true));
        assert_eq!(t.state, TcpState::Established, "not the highest block");
        let rst = seg(&t, TcpFlags::RST, 3101, None);
        assert!(!t.validate_incoming(&mut ctx, &rst, space(3101, 0), true));
        assert_eq!(
            (t.state, t.sk_err),
            (TcpState::Closed, Some(SocketError::ConnectionReset))
        );
    }

    #[test]
    fn data_queue_drops_at_a_closed_window_and_beyond_it() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = established(&cfg);
        t.rcv_wnd = 0;
        // In sequence at a closed window (tcp_sequence let it in: queue empty).
        let th = seg(&t, TcpFlags::ACK, 1001, None);
        t.data_queue(&mut ctx, &th, 1001, Payload::Flat(&[1; 100]));
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPZeroWindowDrop), 1);
        assert_eq!(t.rcv_nxt, 1001);
        assert!(
            t.in_quickack_mode(&cfg) && t.ack.pending,
            "out_of_window: quick ACK"
        );
        // A partial duplicate at a closed window: its head D-SACKed, its tail dropped.
        let th = seg(&t, TcpFlags::ACK, 951, None);
        t.data_queue(&mut ctx, &th, 951, Payload::Flat(&[1; 100]));
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPZeroWindowDrop), 2);
        assert_eq!(t.dsack, Some((951, 1001)));
        assert_eq!(t.rcv_nxt, 1001);
        // Above rcv_nxt at or past the window's end: dropped, not queued out of order.
        t.rcv_wnd = 100;
        let th = seg(&t, TcpFlags::ACK, 1101, None);
        t.data_queue(&mut ctx, &th, 1101, Payload::Flat(&[1; 100]));
        assert!(t.ofo.is_empty());
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPOFOQueue), 0);
        // Inside it: queued out of order.
        let th = seg(&t, TcpFlags::ACK, 1051, None);
        t.data_queue(&mut ctx, &th, 1051, Payload::Flat(&[1; 100]));
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPOFOQueue), 1);
    }

    /// `tcp_data_queue` keeps a FIN with its segment: a FIN on a segment dropped at a
    /// closed window or beyond it is forgotten with it (the peer sends it again), a
    /// bare FIN at a closed window is taken, and one above a hole waits in the
    /// out-of-order queue until `tcp_ofo_queue` reaches it.
    #[test]
    fn data_queue_takes_a_fin_only_with_its_segment() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = established(&cfg);
        let fin = TcpFlags::ACK | TcpFlags::FIN;
        // Data and FIN at a closed window: both dropped.
        t.rcv_wnd = 0;
        let th = seg(&t, fin, 1001, None);
        t.data_queue(&mut ctx, &th, 1001, Payload::Flat(&[1; 100]));
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPZeroWindowDrop), 1);
        t.rcv_wnd = 10_000;
        let th = seg(&t, TcpFlags::ACK, 1001, None);
        t.data_queue(&mut ctx, &th, 1001, Payload::Flat(&[1; 100]));
        assert_eq!((t.rcv_nxt, t.state), (1101, TcpState::Established));
        // A bare FIN at the right edge of the window: out of window, forgotten.
        t.rcv_wup = t.rcv_nxt;
        t.rcv_wnd = 100;
        let th = seg(&t, fin, 1201, None);
        t.data_queue(&mut ctx, &th, 1201, Payload::Flat(&[]));
        assert!(t.ofo.is_empty());
        let th = seg(&t, TcpFlags::ACK, 1101, None);
        t.data_queue(&mut ctx, &th, 1101, Payload::Flat(&[1; 100]));
        assert_eq!((t.rcv_nxt, t.state), (1201, TcpState::Established));
        // Inside the window above a hole: queued with its FIN and SACKed with it.
        t.rcv_wup = t.rcv_nxt;
        t.rcv_wnd = 10_000;
        let th = seg(&t, fin, 1301, None);
        t.data_queue(&mut ctx, &th, 1301, Payload::Flat(&[2; 100]));
        assert_eq!(t.ofo.sack_blocks().next(), Some((1301, 1402)));
        assert_eq!(t.state, TcpState::Established);
        let th = seg(&t, TcpFlags::ACK, 1201, None);
        t.data_queue(&mut ctx, &th, 1201, Payload::Flat(&[1; 100]));
        assert_eq!((t.rcv_nxt, t.state), (1402, TcpState::CloseWait));
        assert_eq!(t.rcv_queue.len(), 400);
        // A bare FIN at a closed window is taken.
        let mut t = established(&cfg);
        t.rcv_wnd = 0;
        let th = seg(&t, fin, 1001, None);
        t.data_queue(&mut ctx, &th, 1001, Payload::Flat(&[]));
        assert_eq!((t.rcv_nxt, t.state), (1002, TcpState::CloseWait));
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPZeroWindowDrop), 1);
    }

    /// `tcp_data_queue` forgets a D-SACK not yet sent when the next segment with
    /// data arrives (`tp->rx_opt.dsack = 0`), and `tcp_fin` resets the SACK state.
    #[test]
    fn data_queue_forgets_an_unsent_dsack() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = established(&cfg);
        let th = seg(&t, TcpFlags::ACK, 901, None);
        t.data_queue(&mut ctx, &th, 901, Payload::Flat(&[1; 100]));
        assert_eq!(t.dsack, Some((901, 1001)));
        let th = seg(&t, TcpFlags::ACK, 2001, None);
        t.data_queue(&mut ctx, &th, 2001, Payload::Flat(&[1; 100]));
        assert_eq!(t.dsack, None, "new data: the old D-SACK is gone");
        // A partial duplicate carrying the FIN: D-SACKed, then tcp_fin resets it.
        let th = seg(&t, TcpFlags::ACK | TcpFlags::FIN, 951, None);
        t.data_queue(&mut ctx, &th, 951, Payload::Flat(&[1; 100]));
        assert_eq!(ctx.mib.get(Mib::TcpExtTCPDSACKOldSent), 2);
        assert_eq!((t.dsack, t.state), (None, TcpState::CloseWait));
        assert!(t.ofo.is_empty(), "tcp_fin purges the out-of-order queue");
    }

    /// `icsk_ack.lrcvtime` moves in `tcp_event_data_recv` only: in-order data, not
    /// out-of-order, old, over-window data or a FIN without data.
    #[test]
    fn lrcvtime_moves_with_in_order_data_only() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let ms = |n| Instant::ZERO + Duration::from_millis(n);
        let mut t = established(&cfg);
        t.ack.lrcvtime = ms(0);
        let mut ctx = st.ctx(&cfg, ms(10), false);
        let th = seg(&t, TcpFlags::ACK, 1101, None);
        t.data_queue(&mut ctx, &th, 1101, Payload::Flat(&[1; 100]));
        assert_eq!(
            (t.ofo.is_empty(), t.ack.lrcvtime),
            (false, ms(0)),
            "out of order"
        );
        ctx.now = ms(20);
        let th = seg(&t, TcpFlags::ACK, 901, None);
        t.data_queue(&mut ctx, &th, 901, Payload::Flat(&[1; 100]));
        assert_eq!((t.dsack, t.ack.lrcvtime), (Some((901, 1001)), ms(0)), "old");
        ctx.now = ms(30);
        let th = seg(&t, TcpFlags::ACK, 20_001, None);
        t.data_queue(&mut ctx, &th, 20_001, Payload::Flat(&[1; 100]));
        assert_eq!(t.ack.lrcvtime, ms(0), "beyond the window");
        ctx.now = ms(40);
        let th = seg(&t, TcpFlags::ACK, 1001, None);
        t.data_queue(&mut ctx, &th, 1001, Payload::Flat(&[1; 100]));
        assert_eq!((t.rcv_nxt, t.ack.lrcvtime), (1201, ms(40)), "in order");
        ctx.now = ms(50);
        let th = seg(&t, TcpFlags::ACK | TcpFlags::FIN, 1201, None);
        t.data_queue(&mut ctx, &th, 1201, Payload::Flat(&[]));
        assert_eq!((t.rcv_nxt, t.ack.lrcvtime), (1202, ms(40)), "a bare FIN");
    }
}

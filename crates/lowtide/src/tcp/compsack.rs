//! SACK compression (Linux 4.18+, 5d9f4262b7ea "tcp: add SACK compression";
//! tcp_input.c `__tcp_ack_snd_check`, `tcp_sack_compress_send_ack`,
//! `tcp_sack_new_ofo_skb`; tcp_timer.c `tcp_compressed_ack_kick`): while
//! out-of-order data is held, a receiver sends the first three ACKs for one
//! `rcv_nxt` at once (the sender's duplicate-ACK threshold), then holds further ACKs
//! for 5 % of the RTT, at most `tcp_comp_sack_delay_ns` (1 ms), plus the timer's
//! slack `tcp_comp_sack_slack_ns` (100 us), or until
//! `tcp_comp_sack_nr` (44) are held, or until a SACK block would leave the first
//! two of the ACK. Each ACK not sent counts in `TcpExtTCPAckCompressed`.

use super::consts::TCP_FASTRETRANS_THRESH;
use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;
use core::time::Duration;

/// `TCP_SACK_BLOCKS_EXPECTED`: SACK blocks a sender is sure to see (4 fit, 3 with
/// timestamps; "given that SACK packets might be lost, be conservative and use 2").
pub(crate) const TCP_SACK_BLOCKS_EXPECTED: usize = 2;

impl Tcb {
    /// `__tcp_ack_snd_check`'s tail, with out-of-order data held and no reason to
    /// ACK at once: send now, or hold this ACK and arm the compression timer.
    pub(crate) fn ack_or_compress(&mut self, ctx: &mut Ctx) {
        if !self.rx_opt.sack_ok || self.comp_sack.held >= ctx.cfg.tcp_comp_sack_nr as u32 {
            return self.send_ack(ctx);
        }
        let c = &mut self.comp_sack;
        if c.rcv_nxt != self.rcv_nxt {
            c.rcv_nxt = self.rcv_nxt;
            c.dup_acks = 0;
        }
        if c.dup_acks < TCP_FASTRETRANS_THRESH {
            c.dup_acks += 1;
            return self.send_ack(ctx);
        }
        c.held += 1;
        if c.timer_at.is_some() {
            return;
        }
        let delay = self.comp_sack_delay(ctx.cfg.tcp_comp_sack_delay_ns);
        // hrtimer_start_range_ns(delay, tcp_comp_sack_slack_ns, ..._SOFT): a soft
        // hrtimer runs from HRTIMER_SOFTIRQ, raised once the clock passes the
        // earliest hard expiry of the soft timers (hrtimer.c hrtimer_interrupt,
        // softirq_expires_next), so it fires at the range's end, delay + slack.
        let slack = Duration::from_nanos(ctx.cfg.tcp_comp_sack_slack_ns);
        self.comp_sack.timer_at = Some(ctx.now + delay + slack);
    }

    /// The compression timer's delay: 5 % of the receiver's RTT estimate (or of the
    /// smoothed RTT if smaller), at most `max_ns`; both x8-scaled as Linux's
    /// `rcv_rtt_est.rtt_us` and `srtt_us`, so no microsecond is rounded off.
    fn comp_sack_delay(&self, max_ns: u64) -> Duration {
        let mut rtt8 = self.rcv_rtt.rtt_us8 as u64;
        let srtt8 = self.rtt.est.srtt8 as u64;
        if srtt8 > 0 && srtt8 < rtt8 {
            rtt8 = srtt8;
        }
        // rtt * (NSEC_PER_USEC >> 3) / 20: 5 % in ns.
        Duration::from_nanos((rtt8 * 125 / 20).min(max_ns))
    }

    /// `tcp_sack_compress_send_ack`: a SACK block is about to move past the first
    /// two, so the ACKs held go out now, as one.
    pub(crate) fn sack_compress_send_ack(&mut self, ctx: &mut Ctx) {
        if self.comp_sack.held == 0 {
            return;
        }
        self.comp_sack.timer_at = None;
        ctx.mib
            .add(Mib::TcpExtTCPAckCompressed, self.comp_sack.held as u64 - 1);
        self.comp_sack.held = 0;
        self.send_ack(ctx);
    }

    /// `tcp_compressed_ack_kick`: the timer sends one ACK for those held.
    pub(crate) fn comp_sack_timer(&mut self, ctx: &mut Ctx) {
        self.comp_sack.timer_at = None;
        if self.comp_sack.held > 0 {
            self.comp_sack.held -= 1;
            self.send_ack(ctx);
        }
    }

    /// `tcp_event_ack_sent`'s part: an ACK went out, so none is held any more.
    pub(crate) fn comp_sack_ack_sent(&mut self, mib: &mut crate::mib::Counters) {
        if self.comp_sack.held > 0 {
            mib.add(Mib::TcpExtTCPAckCompressed, self.comp_sack.held as u64);
            self.comp_sack.held = 0;
            self.comp_sack.timer_at = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::mib::Mib;
    use crate::tcp::rcvqueue::Payload;
    use crate::tcp::sock::Tcb;
    use crate::tcp::{TcpState, TestStack};
    use crate::time::Instant;
    use lowtide_wire::ip::IpRepr;
    use lowtide_wire::tcp::TcpRepr;

    /// A receiver with `rcv_nxt` 1 holding `[1001, 6001)`, `[7001, 8001)` and
    /// `[9001, 16001)` above the hole (blocks most recent first), and `held` ACKs
    /// held back; then `[seq, end)` arrives. Returns it, the SACK blocks of each ACK
    /// sent (relative to `rcv_nxt` 1) and the stack.
    fn ofo_after_three_blocks(
        held: u32,
        seq: u64,
        end: u64,
    ) -> (Tcb, Vec<Vec<(u32, u32)>>, TestStack) {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.rx_opt.sack_ok = true;
        (t.rcv_nxt, t.copied_seq, t.rcv_wnd, t.ack.rcv_mss) = (1, 1, 1 << 20, 1000);
        let mut st = TestStack::default();
        let now = Instant(1_000_000_000);
        let data = [0u8; 7000];
        for (s, e) in [(1001, 6001), (7001, 8001), (9001, 16001)] {
            let p = Payload::Flat(&data[..(e - s) as usize]);
            t.ofo_data(&mut st.ctx(&cfg, now, false), &TcpRepr::default(), s, p);
        }
        assert!(st.out.is_empty());
        t.comp_sack.held = held;
        st.mib = Default::default();
        let p = Payload::Flat(&data[..(end - seq) as usize]);
        t.ofo_data(&mut st.ctx(&cfg, now, false), &TcpRepr::default(), seq, p);
        let mut acks = Vec::new();
        while let Some(tx) = st.out.pop_front() {
            let ip = IpRepr::parse(&tx.packet, false).expect("ip");
            let (th, _) = TcpRepr::parse(&tx.packet[ip.header_len..]).expect("tcp");
            let base = th.ack.wrapping_sub(1);
            let blocks = th.options.sack_blocks().iter();
            acks.push(blocks.map(|b| (b.start - base, b.end - base)).collect());
        }
        (t, acks, st)
    }

    /// `tcp_data_queue_ofo` sets the D-SACK of a duplicate (`tcp_dsack_set`) and
    /// schedules the ACK (`inet_csk_schedule_ack`) before `add_sack:`, where
    /// `tcp_sack_new_ofo_skb` finds the block it extends past the first two and
    /// sends the held ACKs (`tcp_sack_compress_send_ack`): that ACK carries the
    /// D-SACK and the blocks as they were, and takes the one scheduled.
    #[test]
    fn held_acks_go_out_with_the_dsack_before_the_blocks_move() {
        let (t, acks, st) = ofo_after_three_blocks(1, 2001, 3001);
        let was = vec![(2001, 3001), (9001, 16001), (7001, 8001), (1001, 6001)];
        assert_eq!(acks, vec![was]);
        assert_eq!((t.comp_sack.held, t.ack.pending, t.dsack), (0, false, None));
        let now: Vec<_> = t.ofo.sack_blocks().collect();
        assert_eq!(now, vec![(1001, 6001), (9001, 16001), (7001, 8001)]);
        assert_eq!(st.mib.get(Mib::TcpExtTCPDSACKOfoSent), 1);
        assert_eq!(st.mib.get(Mib::TcpExtTCPAckCompressed), 0);
    }

    /// Nothing held: no ACK from `tcp_sack_new_ofo_skb`; the ACK stays scheduled
    /// with its D-SACK for `tcp_ack_snd_check`. A block among the first two sends
    /// nothing either.
    #[test]
    fn no_ack_held_or_a_block_among_the_first_two_sends_nothing() {
        for (held, seq, end) in [(0, 2001, 3001), (2, 7001, 8001), (2, 16001, 17001)] {
            let (t, acks, _) = ofo_after_three_blocks(held, seq, end);
            assert!(acks.is_empty(), "{held} [{seq}, {end})");
            assert!(t.ack.pending);
            assert_eq!(t.comp_sack.held, held);
        }
    }
}

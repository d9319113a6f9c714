//! Receive-buffer autotuning (tcp_input.c `tcp_rcv_rtt_measure`,
//! `tcp_rcv_rtt_measure_ts`, `tcp_rcv_space_adjust`): the receiver estimates the RTT
//! itself (a pure receiver has no srtt of its own) and sizes the buffer each RTT to
//! twice what the application read in it, plus room for the sender's growth.
//!
//! The estimate matters once a queue builds: the window must cover the RTT as it is,
//! queueing included, or it caps the sender's flight at twice the bytes of the
//! handshake's RTT and no buffer ever fills.

use super::sock::Tcb;
use super::Ctx;
use crate::time::Instant;

impl Tcb {
    /// `tcp_rcv_rtt_update`: the minimum of window-based samples (`win_dep`), a
    /// smoothed average of timestamp samples taken while the receive queue is empty.
    /// A peer's TSecr picks the sample (up to `INT_MAX / 1000` ms): the scaled
    /// estimate is a u32 that wraps, as Linux's `new_sample`.
    fn rcv_rtt_update(&mut self, sample_us: u32, win_dep: bool) {
        let old = self.rcv_rtt.rtt_us8;
        let m = sample_us.wrapping_mul(8);
        self.rcv_rtt.rtt_us8 = if old == 0 || m < old {
            m
        } else if win_dep || self.rcv_nxt != self.copied_seq {
            return;
        } else {
            (old - (old >> 3)).wrapping_add(sample_us)
        };
    }

    /// `tcp_rcv_rtt_measure` (from `tcp_event_data_recv`): the time to receive one
    /// window's worth of data is at least an RTT.
    pub(crate) fn rcv_rtt_measure(&mut self, now: Instant) {
        if let Some(t) = self.rcv_rtt.time {
            if self.rcv_nxt < self.rcv_rtt.seq {
                return;
            }
            let d = now.saturating_since(t).as_micros().max(1) as u32;
            self.rcv_rtt_update(d, true);
        }
        self.rcv_rtt.seq = self.rcv_nxt + self.rcv_wnd as u64;
        self.rcv_rtt.time = Some(now);
    }

    /// `tcp_rcv_rtt_measure_ts`: each TSecr is looked at once (`rcv_rtt_last_tsecr`),
    /// and gives an RTT sample if its segment spans at least `rcv_mss` (`len`, its
    /// end_seq less its seq) and the delay is not zero (Linux 6.16 'tcp: remove zero TCP TS samples
    /// for autotuning'; ms ticks, as Linux's TCP_TS_HZ = 1000).
    pub(crate) fn rcv_rtt_measure_ts(&mut self, ctx: &Ctx, tsecr: u32, len: usize) {
        if tsecr == self.rcv_rtt.last_tsecr {
            return;
        }
        self.rcv_rtt.last_tsecr = tsecr;
        if len < self.ack.rcv_mss as usize {
            return;
        }
        let delta_ms = self.tsval(ctx.now).wrapping_sub(tsecr);
        if delta_ms > 0 && delta_ms < i32::MAX as u32 / 1000 {
            self.rcv_rtt_update(delta_ms * 1000, false);
        }
    }

    /// `tcp_rcv_space_adjust`: once per receiver RTT, if the application read more
    /// than in the previous one, grow the buffer for it (`tcp_rcvbuf_grow`).
    pub(crate) fn rcv_space_adjust(&mut self, ctx: &mut Ctx) {
        let rtt_us = (self.rcv_rtt.rtt_us8 >> 3) as u128;
        let elapsed = ctx.now.saturating_since(self.rcvq_space_time).as_micros();
        if rtt_us == 0 || elapsed < rtt_us {
            return;
        }
        // Bytes read in the last RTT, less what still waits in the receive queue
        // (Linux 6.16, ea33537d8292 'tcp: add receive queue awareness in
        // tcp_rcv_space_adjust()').
        let copied = (self.copied_seq - self.rcvq_space_seq) as i64;
        let copied = copied - (self.rcv_nxt - self.copied_seq) as i64;
        if copied > self.rcvq_space as i64 {
            self.rcvbuf_grow(ctx, copied as u32);
        }
        self.rcvq_space_seq = self.copied_seq;
        self.rcvq_space_time = ctx.now;
    }

    /// `tcp_rcvbuf_grow` (Linux 6.18): `rcvq_space` becomes `newval`, and the
    /// buffer grows to hold twice that ("DRS is always one RTT late"), plus twice
    /// the growth over the previous RTT (a sender in slow start doubles per RTT),
    /// plus the span of the out-of-order queue above `rcv_nxt` ("tcp: adjust rcvbuf
    /// in presence of reorders"), converted to memory by `scaling_ratio`
    /// (`tcp_space_from_win`), up to `tcp_rmem[2]`; `window_clamp` follows.
    pub(crate) fn rcvbuf_grow(&mut self, ctx: &Ctx, newval: u32) {
        let oldval = self.rcvq_space.max(1) as u64;
        self.rcvq_space = newval;
        if !ctx.cfg.tcp_moderate_rcvbuf || self.rcvbuf_locked {
            return;
        }
        let mut rcvwin = (newval as u64) << 1;
        let grow = rcvwin * (newval as u64).saturating_sub(oldval) / oldval;
        rcvwin += grow << 1;
        rcvwin += self.ofo.last_end().map_or(0, |e| e - self.rcv_nxt);
        let rcvbuf = self.space_from_win(rcvwin).min(ctx.cfg.tcp_rmem[2] as u64) as u32;
        if rcvbuf > self.rcvbuf {
            self.rcvbuf = rcvbuf;
            // "Make the window clamp follow along."
            self.window_clamp = self.full_space();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sock::Tcb;
    use crate::time::Instant;

    /// Linux 6.16+ `tcp_data_queue_ofo` calls `tcp_rcvbuf_grow`: data held above a
    /// hole counts toward the buffer, so that a loss does not cap the window while
    /// the reads that autotuning measures wait behind the hole.
    /// Not for a child not yet accepted or a closed socket ("do not grow rcvbuf for
    /// not-yet-accepted or orphaned sockets": no `sk->sk_socket`), as Linux 6.18
    /// (tests/packetdrill/rcv-ofo-before-accept-no-rcvbuf-grow.pkt).
    #[test]
    fn ofo_data_grows_the_buffer_by_its_span() {
        for who in ["accepted", "in accept queue", "orphan"] {
            let t = ofo_far_above_a_hole(|t| match who {
                "in accept queue" => t.parent = Some(0),
                "orphan" => t.errq.dead = true,
                _ => {}
            });
            let grown = match who {
                "accepted" => 2 * (2 * 100_000 + 1_000_000 - 1),
                _ => 131_072,
            };
            assert_eq!(t.rcvbuf, grown, "{who}");
        }
    }

    /// A receiver that gets 1000 bytes ending 1,000,000 above `rcv_nxt`, after `setup`.
    fn ofo_far_above_a_hole(setup: impl Fn(&mut Tcb)) -> Tcb {
        use crate::tcp::TcpState;
        let cfg = crate::config::Config::default();
        let mut t = Tcb::for_test(&cfg);
        setup(&mut t);
        t.state = TcpState::Established;
        t.rcv_nxt = 1;
        t.copied_seq = 1;
        t.rcv_wnd = 1 << 20;
        t.rcvq_space = 100_000;
        t.rcvbuf = 131_072;
        // Segments of the size already measured (tcp_measure_rcv_mss, which
        // tcp_data_queue_ofo calls first, leaves scaling_ratio and rcvq_space alone).
        t.ack.rcv_mss = 1000;
        let span = 1_000_000;
        let mut st = crate::tcp::TestStack::default();
        t.ofo_data(
            &mut st.ctx(&cfg, Instant(1_000_000_000), false),
            &lowtide_wire::tcp::TcpRepr::default(),
            span - 1000,
            crate::tcp::rcvqueue::Payload::Flat(&[0u8; 1000]),
        );
        // rcvwin = 2 * 100,000 + 1,000,000 (ooo_last_skb end - rcv_nxt); buffer 2x.
        t
    }

    /// A receiver 100 ms into a 100 ms RTT that read 100,000 bytes the last RTT,
    /// `read` bytes past the mark since, with `unread` bytes more queued.
    /// Returns it after `tcp_rcv_space_adjust` at 1 s.
    fn adjusted_reader(read: u64, unread: u64) -> Tcb {
        let cfg = crate::config::Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.rcv_rtt.rtt_us8 = 8 * 100_000;
        t.rcvq_space = 100_000;
        t.copied_seq = t.rcvq_space_seq + read;
        t.rcv_nxt = t.copied_seq + unread;
        t.rcvbuf = 131_072;
        let mut st = crate::tcp::TestStack::default();
        t.rcv_space_adjust(&mut st.ctx(&cfg, Instant(1_000_000_000), false));
        t
    }

    /// Linux 6.18's `tcp_rcvbuf_grow` (since "tcp: fix sk_rcvbuf overshoot"): twice
    /// what was read plus twice its growth, without the former `16 * advmss`.
    #[test]
    fn reads_grow_the_buffer_as_tcp_rcvbuf_grow() {
        let t = adjusted_reader(200_000, 0);
        // rcvwin = 2 * 200,000 + 2 * (400,000 * 100,000 / 100,000); buffer 2x.
        assert_eq!(t.rcvbuf, 2 * (400_000 + 800_000));
        assert_eq!(t.rcvq_space, 200_000);
    }

    /// Linux 6.16+ `tcp_rcv_space_adjust` counts what was read less what still waits
    /// unread: 200,000 bytes read past the mark but 150,000 of the queue unread is
    /// 50,000, not more than the 100,000 of the last RTT: no growth.
    #[test]
    fn unread_bytes_do_not_count_as_read() {
        let t = adjusted_reader(200_000, 150_000);
        assert_eq!((t.rcvbuf, t.rcvq_space), (131_072, 100_000));
    }

    /// `tcp_recvmsg_locked` calls `tcp_rcv_space_adjust` after each skb it copies
    /// (Linux 6.18, tests/packetdrill/rcv-space-adjust-drs.pkt): reading three
    /// 1000-byte skbs at once measures after the first, with the other two still
    /// queued (102,000 read past the mark less 2000 unread), and the next two
    /// fall within the new measure's RTT.
    #[test]
    fn a_read_measures_after_its_first_skb() {
        let cfg = crate::config::Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = crate::tcp::TcpState::Established;
        t.rcv_rtt.rtt_us8 = 8 * 100_000;
        t.rcvq_space = 50_000;
        t.copied_seq = t.rcvq_space_seq + 100_000;
        for _ in 0..3 {
            t.rcv_queue.push(vec![0u8; 1000].into(), 2304);
        }
        t.rcv_nxt = t.copied_seq + 3000;
        let mut st = crate::tcp::TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant(1_000_000_000), false);
        assert_eq!(t.recvmsg_with(&mut ctx, 3000, |_| {}), Ok(3000));
        assert_eq!(t.rcvq_space, 101_000 - 2000);
        assert_eq!(t.rcvq_space_seq, t.copied_seq - 2000);
    }

    #[test]
    fn window_samples_only_lower_the_estimate() {
        let mut t = Tcb::for_test(&crate::config::Config::default());
        t.rcv_rtt_update(40_000, true);
        assert_eq!(t.rcv_rtt.rtt_us8, 320_000);
        t.rcv_rtt_update(80_000, true);
        assert_eq!(t.rcv_rtt.rtt_us8, 320_000);
        t.rcv_rtt_update(30_000, true);
        assert_eq!(t.rcv_rtt.rtt_us8, 240_000);
    }

    #[test]
    fn timestamp_samples_follow_a_rising_rtt() {
        let mut t = Tcb::for_test(&crate::config::Config::default());
        t.copied_seq = t.rcv_nxt; // the application has read everything
        t.rcv_rtt_update(40_000, false);
        for _ in 0..40 {
            t.rcv_rtt_update(80_000, false);
        }
        let rtt = t.rcv_rtt.rtt_us8 >> 3;
        assert!(rtt > 79_000 && rtt <= 80_000, "{rtt}");
    }
}

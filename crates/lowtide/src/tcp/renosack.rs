//! SACK emulation for connections without SACK (NewReno, RFC 6582), as tcp_input.c
//! does it: each duplicate ACK counts as one SACKed segment in `sacked_out`
//! (`tcp_add_reno_sack`), so `tcp_packets_in_flight` shrinks by one per duplicate
//! ACK and new data may go out (limited transmit, RFC 3042, falls out of this); a
//! cumulative ACK eats them again (`tcp_remove_reno_sacks`). More duplicates than
//! segments out means reordering (`tcp_check_reno_reordering`).

use super::{Ctx, Tcb};
use crate::mib::Mib;

impl Tcb {
    /// `tp->sacked_out`: segments SACKed or, without SACK, the duplicate ACKs
    /// counted as SACKed segments.
    pub fn sacked_out(&self) -> u32 {
        self.rtx.sacked_out + self.reno_sacked_out
    }

    /// `tcp_limit_reno_sacked`: `sacked_out + lost_out` never exceed `packets_out`,
    /// one hole at least kept; true if `sacked_out` had to be cut.
    pub(crate) fn limit_reno_sacked(&mut self) -> bool {
        let packets_out = self.rtx.packets_out;
        let holes = self.rtx.lost_out.max(1).min(packets_out);
        if self.reno_sacked_out + holes > packets_out {
            self.reno_sacked_out = packets_out - holes;
            return true;
        }
        false
    }

    /// `tcp_check_reno_reordering`: more duplicate ACKs than segments that could
    /// have caused them, read as reordering (`TCPRenoReorder`).
    fn check_reno_reordering(&mut self, ctx: &mut Ctx, addend: u32) {
        if !self.limit_reno_sacked() {
            return;
        }
        self.reordering = (self.rtx.packets_out + addend).min(ctx.cfg.tcp_max_reordering);
        self.reord_seen += 1;
        ctx.mib.inc(Mib::TcpExtTCPRenoReorder);
    }

    /// `tcp_add_reno_sack`: `num_dupack` duplicate ACKs, each a SACKed segment.
    /// Returns how many segments they delivered (`tcp_count_delivered`).
    pub(crate) fn add_reno_sack(&mut self, ctx: &mut Ctx, num_dupack: u32) -> u32 {
        if num_dupack == 0 {
            return 0;
        }
        let prior_sacked = self.reno_sacked_out;
        self.reno_sacked_out += num_dupack;
        self.check_reno_reordering(ctx, 0);
        self.reno_sacked_out.saturating_sub(prior_sacked)
    }

    /// `tcp_remove_reno_sacks`: a cumulative ACK of `acked` segments filled one hole;
    /// the rest were counted already as duplicate ACKs. Returns the segments
    /// delivered: at least one, the hole.
    pub(crate) fn remove_reno_sacks(&mut self, ctx: &mut Ctx, acked: u32) -> u32 {
        let mut delivered = 0;
        if acked > 0 {
            delivered = acked.saturating_sub(self.reno_sacked_out).max(1);
            self.reno_sacked_out = self.reno_sacked_out.saturating_sub(acked - 1);
        }
        self.check_reno_reordering(ctx, acked);
        delivered
    }

    /// `tcp_reset_reno_sack`.
    pub(crate) fn reset_reno_sack(&mut self) {
        self.reno_sacked_out = 0;
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::mib::Mib;
    use crate::tcp::{Tcb, TestStack};
    use crate::time::Instant;

    fn tcb(packets_out: u32) -> Tcb {
        let mut t = Tcb::for_test(&Config::default());
        t.rtx.packets_out = packets_out;
        t
    }

    #[test]
    fn dupacks_count_as_sacked_until_one_hole_is_left() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = tcb(4);
        assert_eq!(t.add_reno_sack(&mut ctx, 1), 1);
        assert_eq!(t.add_reno_sack(&mut ctx, 1), 1);
        assert_eq!(t.add_reno_sack(&mut ctx, 1), 1);
        assert_eq!((t.sacked_out(), t.reordering, t.reord_seen), (3, 3, 0));
        assert_eq!(t.packets_in_flight(), 1);
        // A fourth duplicate for four segments out: one must still be a hole, so
        // this is reordering, of degree packets_out.
        assert_eq!(t.add_reno_sack(&mut ctx, 1), 0);
        assert_eq!((t.sacked_out(), t.reordering, t.reord_seen), (3, 4, 1));
        assert_eq!(st.mib.get(Mib::TcpExtTCPRenoReorder), 1);
    }

    #[test]
    fn lost_segments_are_holes_too() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        let mut t = tcb(5);
        t.rtx.lost_out = 2;
        t.reno_sacked_out = 3;
        assert!(!t.limit_reno_sacked());
        assert_eq!(t.add_reno_sack(&mut ctx, 1), 0);
        assert_eq!(t.sacked_out(), 3);
        // Nothing out: nothing can be SACKed.
        t.rtx.packets_out = 0;
        t.rtx.lost_out = 0;
        assert!(t.limit_reno_sacked());
        assert_eq!(t.sacked_out(), 0);
    }

    #[test]
    fn cumulative_ack_fills_one_hole_and_eats_dupacks() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        // Three dupacks, then an ACK of four segments: the hole and three counted.
        let mut t = tcb(6);
        t.reno_sacked_out = 3;
        t.rtx.packets_out = 2; // after tcp_clean_rtx_queue freed four
        assert_eq!(t.remove_reno_sacks(&mut ctx, 4), 1);
        assert_eq!(t.sacked_out(), 0);
        // A partial ACK of two with three counted: one hole, one dupack eaten.
        let mut t = tcb(4);
        t.reno_sacked_out = 3;
        t.rtx.packets_out = 4;
        assert_eq!(t.remove_reno_sacks(&mut ctx, 2), 1);
        assert_eq!(t.sacked_out(), 2);
        // An ACK of more than was counted delivers the difference.
        t.reno_sacked_out = 1;
        assert_eq!(t.remove_reno_sacks(&mut ctx, 5), 4);
        assert_eq!(t.sacked_out(), 0);
        assert_eq!(st.mib.get(Mib::TcpExtTCPRenoReorder), 0);
    }

    #[test]
    fn more_dupacks_than_left_after_an_ack_is_reordering() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        // Three counted, an ACK of one segment leaves two out: one hole and one
        // SACKed at most; the degree is what was out before the ACK.
        let mut t = tcb(2);
        t.reno_sacked_out = 3;
        assert_eq!(t.remove_reno_sacks(&mut ctx, 1), 1);
        assert_eq!((t.sacked_out(), t.reordering, t.reord_seen), (1, 3, 1));
        t.reset_reno_sack();
        assert_eq!(t.sacked_out(), 0);
    }

    #[test]
    fn reno_reordering_is_capped_by_tcp_max_reordering() {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.tcp_max_reordering", "3").unwrap();
        let mut st = TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        // Four duplicates for four segments out: degree packets_out, capped at 3.
        let mut t = tcb(4);
        t.reno_sacked_out = 3;
        assert_eq!(t.add_reno_sack(&mut ctx, 1), 0);
        assert_eq!((t.reordering, t.reord_seen), (3, 1));
        t.reordering = 1;
        t.rtx.packets_out = 8;
        t.reno_sacked_out = 8;
        t.add_reno_sack(&mut ctx, 1);
        assert_eq!(t.reordering, 3);
    }
}

//! TCP Reno/NewReno (RFC 5681), Linux's `tcp_reno_*` in tcp_cong.c.

use super::{CaCtx, CongestionOps, CwndState};

/// Reno: slow start, then one segment per window per RTT; halve on loss.
#[derive(Debug, Default)]
pub struct Reno;

impl CongestionOps for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    /// `tcp_reno_ssthresh`: half the window, at least 2.
    fn ssthresh(&mut self, cw: &CwndState) -> u32 {
        (cw.snd_cwnd >> 1).max(2)
    }

    /// `tcp_reno_cong_avoid`.
    fn cong_avoid(&mut self, cw: &mut CwndState, acked: u32, _ctx: &CaCtx) {
        if !cw.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if cw.in_slow_start() {
            acked = cw.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let w = cw.snd_cwnd;
        cw.cong_avoid_ai(w, acked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_then_linear() {
        let mut cw = CwndState::new(10);
        cw.is_cwnd_limited = true;
        let mut r = Reno;
        r.cong_avoid(&mut cw, 10, &CaCtx::default());
        assert_eq!(cw.snd_cwnd, 20);
        cw.snd_ssthresh = 20;
        for _ in 0..20 {
            r.cong_avoid(&mut cw, 1, &CaCtx::default());
        }
        assert_eq!(cw.snd_cwnd, 21);
        assert_eq!(r.ssthresh(&cw), 10);
    }

    #[test]
    fn slow_start_stops_at_ssthresh() {
        let mut cw = CwndState::new(10);
        cw.is_cwnd_limited = true;
        cw.snd_ssthresh = 12;
        Reno.cong_avoid(&mut cw, 10, &CaCtx::default());
        // 2 acks grow slow start to 12, the other 8 go to cwnd_cnt.
        assert_eq!(cw.snd_cwnd, 12);
        assert_eq!(cw.snd_cwnd_cnt, 8);
    }

    #[test]
    fn not_cwnd_limited_does_not_grow() {
        let mut cw = CwndState::new(10);
        Reno.cong_avoid(&mut cw, 10, &CaCtx::default());
        assert_eq!(cw.snd_cwnd, 10);
    }
}

//! Rate limits on the ACKs a hostile or confused peer can draw from us (tcp_input.c):
//! duplicate ACKs for out-of-window or PAWS-failed segments and RFC 5961 challenge
//! ACKs, per socket (`tcp_oow_rate_limited`, `net.ipv4.tcp_invalid_ratelimit`) and
//! for challenge ACKs also stack-wide (`tcp_send_challenge_ack`,
//! `net.ipv4.tcp_challenge_ack_limit`; unlimited by default since Linux 6.0, whose
//! commit 79e3602caa6f found the shared counter to be a side channel, CVE-2016-5696).

use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;
use crate::rng::Rng;
use crate::time::Instant;

/// The stack-wide challenge-ACK budget (`net->ipv4.tcp_challenge_timestamp` and
/// `tcp_challenge_count`).
#[derive(Debug, Clone)]
pub(crate) struct ChallengeLimit {
    /// The second (of the stack's clock) the budget belongs to.
    second: Option<u64>,
    /// Challenge ACKs left in that second.
    count: u32,
    /// Randomizes each second's budget, as Linux does, so the count leaks less.
    rng: Rng,
}

impl ChallengeLimit {
    /// A budget whose randomization is seeded with `seed`.
    pub fn new(seed: u64) -> ChallengeLimit {
        ChallengeLimit {
            second: None,
            count: 0,
            rng: Rng::new(seed),
        }
    }

    /// Takes one challenge ACK from the budget of `limit` per second; false when this
    /// second's budget (a random count in `[limit/2, 3*limit/2)`) is spent.
    /// `INT_MAX` (the default) is no limit; 0 is, by Linux's unsigned arithmetic
    /// (`get_random_u32_inclusive(0, 0 + 0 - 1)`), a random budget of up to
    /// `u32::MAX`, not none.
    fn take(&mut self, now: Instant, limit: u32) -> bool {
        if limit == i32::MAX as u32 {
            return true;
        }
        let sec = now.as_nanos() / 1_000_000_000;
        if self.second != Some(sec) {
            let half = limit.wrapping_add(1) >> 1;
            let ceil = limit.wrapping_add(half).wrapping_sub(1);
            // A ceiling below the floor (limits of 2^31 and up, from negative
            // ints) wraps in Linux's get_random_u32_inclusive too: any count.
            let (lo, hi) = if ceil < half {
                (0, u32::MAX)
            } else {
                (half, ceil)
            };
            self.second = Some(sec);
            self.count = self.rng.range_u32(lo, hi);
        }
        match self.count {
            0 => false,
            _ => {
                self.count -= 1;
                true
            }
        }
    }
}

/// `__tcp_oow_rate_limited`: at most one such ACK per `tcp_invalid_ratelimit`
/// (500 ms) per socket (`last` is its `last_oow_ack_time`); a limited one is
/// counted in `mib`.
pub(crate) fn oow_limited(ctx: &mut Ctx, mib: Mib, last: &mut Option<Instant>) -> bool {
    let gap = core::time::Duration::from_millis(ctx.cfg.tcp_invalid_ratelimit as u64);
    if let Some(l) = *last {
        if ctx.now >= l && ctx.now.saturating_since(l) < gap {
            ctx.mib.inc(mib);
            return true;
        }
    }
    *last = Some(ctx.now);
    false
}

impl Tcb {
    /// `__tcp_oow_rate_limited` for this connection ([`oow_limited`]).
    pub(crate) fn oow_rate_limited(&mut self, ctx: &mut Ctx, mib: Mib) -> bool {
        oow_limited(ctx, mib, &mut self.last_oow_ack_time)
    }

    /// `tcp_oow_rate_limited`: segments with data (and no SYN) are never limited;
    /// they are unlikely to be part of an ACK loop.
    pub(crate) fn oow_rate_limited_seg(
        &mut self,
        ctx: &mut Ctx,
        mib: Mib,
        has_data: bool,
        syn: bool,
    ) -> bool {
        if has_data && !syn {
            return false;
        }
        self.oow_rate_limited(ctx, mib)
    }

    /// `tcp_send_challenge_ack`
    /// ([RFC 5961 section 7](https://www.rfc-editor.org/rfc/rfc5961#section-7)): first the
    /// per-socket limit, then the stack-wide one.
    pub(crate) fn challenge_ack(&mut self, ctx: &mut Ctx) {
        if self.challenge_allowed(ctx) {
            self.send_ack(ctx);
        }
    }

    /// `tcp_send_challenge_ack`'s limits, counted: true if the challenge ACK may go
    /// (`TcpExtTCPChallengeACK`), false if the socket's rate limit
    /// (`TcpExtTCPACKSkippedChallenge`) or the stack's budget holds it back.
    pub(crate) fn challenge_allowed(&mut self, ctx: &mut Ctx) -> bool {
        if self.oow_rate_limited(ctx, Mib::TcpExtTCPACKSkippedChallenge) {
            return false;
        }
        let go = ctx.challenge.take(ctx.now, ctx.cfg.tcp_challenge_ack_limit);
        if go {
            ctx.mib.inc(Mib::TcpExtTCPChallengeACK);
        }
        go
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_per_second_is_random_around_the_limit() {
        let mut c = ChallengeLimit::new(7);
        let sec = |s: u64| Instant(s * 1_000_000_000);
        for s in 0..20 {
            let n = (0..5000).take_while(|_| c.take(sec(s), 1000)).count();
            assert!((500..1500).contains(&n), "{n} in second {s}");
        }
        assert!((0..5000).all(|_| c.take(sec(30), i32::MAX as u32)));
        assert!(!(0..5).all(|_| c.take(sec(31), 1)));
        // 0: a budget drawn from [0, u32::MAX] (Linux's unsigned wrap), not none.
        let full = (40..60)
            .filter(|&s| (0..100).all(|_| c.take(sec(s), 0)))
            .count();
        assert!(full >= 18, "{full} of 20 seconds kept 100 challenge ACKs");
    }
}

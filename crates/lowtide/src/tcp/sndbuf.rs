//! The send buffer's growth and the writer's wakeup: tcp_input.c
//! `tcp_sndbuf_expand`, `tcp_should_expand_sndbuf`, `tcp_new_space`,
//! `tcp_check_space`; stream.c `sk_stream_write_space`.

use super::sock::Tcb;
use super::Ctx;
use crate::socket::EventKind;

impl Tcb {
    /// `tcp_sndbuf_expand`: room for `sndbuf_expand() * max(10, cwnd, reordering + 1)`
    /// segments of per-segment truesize, up to `tcp_wmem[2]`.
    pub(crate) fn sndbuf_expand(&mut self, ctx: &mut Ctx) {
        if self.sndbuf_locked {
            return;
        }
        // per_mss = roundup_pow_of_two(mss + MAX_TCP_HEADER + shinfo) + sk_buff.
        let per_mss =
            (self.mss_cache + super::consts::MAX_TCP_HEADER + 320).next_power_of_two() + 256;
        let segs = self.cw.snd_cwnd.max(10).max(self.reordering + 1);
        let sndmem = self.cc.sndbuf_expand() as u64 * segs as u64 * per_mss as u64;
        let sndmem = sndmem.min(ctx.cfg.tcp_wmem[2] as u64) as u32;
        self.sndbuf = self.sndbuf.max(sndmem);
    }

    /// `tcp_check_space`: only for a writer that ran out of space (`SOCK_NOSPACE`),
    /// `tcp_new_space`: grow the send buffer if `tcp_should_expand_sndbuf`, then
    /// `sk_write_space`; the `SNDBUF_LIMITED` chrono stops once that cleared
    /// `SOCK_NOSPACE`. Linux calls it after each push and each new skb sent
    /// (`tcp_event_new_data_sent`), so a queue that fills cwnd does not grow the
    /// buffer.
    pub(crate) fn check_space(&mut self, ctx: &mut Ctx) {
        if !self.nospace || !self.state.is_synchronized() {
            return;
        }
        if self.should_expand_sndbuf(ctx) {
            self.sndbuf_expand(ctx);
        }
        self.write_space(ctx);
        if !self.nospace {
            self.chrono_stop(ctx.now, super::chrono::Chrono::SndbufLimited);
        }
    }

    /// `tcp_should_expand_sndbuf` (the lock is `sndbuf_expand`'s): not under
    /// memory pressure nor past `tcp_mem[0]`, and while the flight is below cwnd.
    fn should_expand_sndbuf(&self, ctx: &Ctx) -> bool {
        ctx.mem.below_low(ctx.cfg) && self.packets_in_flight() < self.cw.snd_cwnd
    }

    /// `sk_stream_write_space`: once writable (`__sk_stream_is_writeable(sk, 1)`),
    /// clear `SOCK_NOSPACE` and wake the socket's waiters, whether or not a writer
    /// ran out of space: `tcp_new_space` calls it for one that did, the
    /// `TCP_NOTSENT_LOWAT` and `SO_SNDBUF` setsockopts for anyone (an
    /// edge-triggered epoll item reports it). An unwritable socket keeps its
    /// `SOCK_NOSPACE` as it was. (lowtide wakes only connections past the
    /// handshake: `tcp_poll` reports no `EPOLLOUT` before.)
    pub(crate) fn write_space(&mut self, ctx: &mut Ctx) {
        if self.state.is_synchronized() && self.is_writeable(ctx.cfg) {
            self.nospace = false;
            self.wakeups += 1;
            self.notify(ctx, EventKind::Writable);
        }
    }
}

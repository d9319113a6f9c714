//! The caps on sockets the application has let go: orphans
//! (`net.ipv4.tcp_max_orphans`: `tcp_too_many_orphans`, `tcp_check_oom`,
//! `tcp_out_of_resources`) and TIME-WAIT sockets (`net.ipv4.tcp_max_tw_buckets`:
//! `inet_twsk_alloc` in `tcp_time_wait`), and orphans holding data once the stack
//! is over `tcp_mem`'s hard limit (tcp/mem.rs). Without them a peer that leaves
//! connections half-closed, or a stream of short connections, grows the stack's
//! memory without bound.

use super::consts::TCP_TIMEWAIT_LEN;
use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;
use tracing::debug;

impl Tcb {
    /// `tcp_check_oom` for an orphan: more orphans, shifted left by `shift` (the
    /// penalty of a dubious connection), than `tcp_max_orphans`, or the stack over
    /// `tcp_mem`'s hard limit with this socket holding data (`tcp_out_of_memory`).
    pub(crate) fn check_oom(&self, ctx: &Ctx, shift: u32) -> bool {
        let orphans = (ctx.death_row.orphans as u64) << shift;
        let too_many = orphans > ctx.cfg.tcp_max_orphans as u64;
        if too_many {
            debug!(tuple = ?self.tuple, "too many orphaned sockets");
        }
        let out_of_memory = self.out_of_memory(ctx);
        if out_of_memory {
            debug!(tuple = ?self.tuple, "out of memory -- consider tuning tcp_mem");
        }
        too_many || out_of_memory
    }

    /// `__tcp_close` after the FIN: an orphan over the cap is reset at once
    /// (`tcp_set_state(TCP_CLOSE)`, `tcp_send_active_reset`, TcpExtTCPAbortOnMemory).
    /// Returns whether it was.
    pub(crate) fn close_check_oom(&mut self, ctx: &mut Ctx) -> bool {
        if !self.check_oom(ctx, 0) {
            return false;
        }
        self.send_active_reset(ctx);
        self.set_closed(ctx);
        ctx.mib.inc(Mib::TcpExtTCPAbortOnMemory);
        true
    }

    /// `tcp_out_of_resources`, from an orphan's retransmission or probe timer: a
    /// connection idle for over 2 x `tcp_rto_max`, or one that would not be reset
    /// (`!do_reset`), and one with a soft error counts double, then quadruple,
    /// against the cap. Over it the connection is done, with a reset if it sent
    /// within `TCP_TIMEWAIT_LEN` or its peer's window is shut with nothing in flight.
    /// Returns whether it was done.
    pub(crate) fn out_of_resources(&mut self, ctx: &mut Ctx, mut do_reset: bool) -> bool {
        let idle = ctx.now.saturating_since(self.lsndtime);
        let shift =
            (idle > 2 * self.icsk.rto_max || !do_reset) as u32 + self.sk_err_soft.is_some() as u32;
        if !self.check_oom(ctx, shift) {
            return false;
        }
        if idle <= TCP_TIMEWAIT_LEN || (self.snd_wnd == 0 && self.rtx.packets_out == 0) {
            do_reset = true;
        }
        if do_reset {
            self.send_active_reset(ctx);
        }
        self.set_closed(ctx);
        ctx.mib.inc(Mib::TcpExtTCPAbortOnMemory);
        true
    }

    /// `inet_twsk_alloc` in `tcp_time_wait`: no timewait socket once
    /// `tcp_max_tw_buckets` are taken; the connection just closes
    /// (TcpExtTCPTimeWaitOverflow). Returns whether it was refused.
    pub(crate) fn time_wait_overflow(&mut self, ctx: &mut Ctx) -> bool {
        if ctx.death_row.time_wait < ctx.cfg.tcp_max_tw_buckets {
            return false;
        }
        ctx.mib.inc(Mib::TcpExtTCPTimeWaitOverflow);
        true
    }
}

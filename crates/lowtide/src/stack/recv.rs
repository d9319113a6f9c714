//! What a blocked `recvmsg(2)` looks at between its copies (`tcp_recvmsg_locked`'s
//! loop, posix/recv_wait.rs).

use super::Stack;
use crate::socket::{SocketError, SocketHandle};
use crate::time::Instant;

impl Stack {
    /// For a reader `offset` bytes past `copied_seq` (a peek's `peek_seq`; 0 for a
    /// read): the bytes queued beyond it, and whether it sits at the urgent mark
    /// (`tcp_recvmsg_locked`: "Are we at urgent data? Stop if we have read
    /// anything").
    pub fn recv_ahead(&self, h: SocketHandle, offset: usize) -> Result<(usize, bool), SocketError> {
        let t = self.tcb(h)?;
        Ok((t.rcv_queue_len().saturating_sub(offset), t.mark_at(offset)))
    }

    /// `tcp_recvmsg_locked`'s `found_fin_ok` for a reader that finds no bytes
    /// left: a FIN-only skb behind them is freed (`tcp_eat_recv_skb`).
    pub fn recv_eat_fin(&mut self, now: Instant, h: SocketHandle) -> Result<(), SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, _| tcb.rcv_queue.eat_fin());
        Ok(())
    }

    /// `tcp_cleanup_rbuf(sk, copied)` of a reader that has `copied` bytes and is
    /// about to sleep or return: the ACK the input path left to it, or a window
    /// update.
    pub fn cleanup_rbuf(
        &mut self,
        now: Instant,
        h: SocketHandle,
        copied: usize,
    ) -> Result<(), SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.cleanup_rbuf(ctx, copied));
        Ok(())
    }
}

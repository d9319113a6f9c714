//! The receive side of the socket calls (tcp.c): `tcp_recvmsg`, `tcp_read_sock`,
//! `MSG_PEEK`, and `tcp_cleanup_rbuf`'s window update after a read.

use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::socket::SocketError;

impl Tcb {
    /// `tcp_recvmsg`: copies received bytes; `Ok(0)` is end of stream.
    pub(crate) fn recvmsg(&mut self, ctx: &mut Ctx, buf: &mut [u8]) -> Result<usize, SocketError> {
        let mut at = 0;
        self.recvmsg_with(ctx, buf.len(), |chunk| {
            buf[at..at + chunk.len()].copy_from_slice(chunk);
            at += chunk.len();
        })
    }

    /// [`Tcb::recvmsg`] that hands up to `max` bytes of the receive queue to `read`
    /// in place (one slice per queued buffer, in order) instead of copying them
    /// out, then consumes them the same way. A read stops before the urgent byte
    /// and, starting at it, skips it unless `SO_OOBINLINE` (`tcp_recvmsg_locked`).
    pub(crate) fn recvmsg_with(
        &mut self,
        ctx: &mut Ctx,
        max: usize,
        read: impl FnMut(&[u8]),
    ) -> Result<usize, SocketError> {
        self.readable_signaled = false;
        let u = self.urg_read(self.copied_seq, self.rcv_queue.len(), max);
        if u.skip {
            // The urgent byte leaves the stream (urg_hole); tcp_recvmsg_locked's
            // skip_copy: past it, the urgent state ends.
            self.rcv_queue.read(1, |_| {});
            self.copied_seq += 1;
            self.urg_passed();
        }
        self.read_queue(ctx, u.limit, read, true)
    }

    /// `tcp_read_sock` (splice, in-kernel readers): [`Tcb::recvmsg_with`] that
    /// stops at the urgent mark, `SO_OOBINLINE` or not, and never skips the
    /// urgent byte: `Ok(0)` with data queued when it is next.
    pub(crate) fn read_sock(
        &mut self,
        ctx: &mut Ctx,
        max: usize,
        read: impl FnMut(&[u8]),
    ) -> Result<usize, SocketError> {
        self.readable_signaled = false;
        let limit = max.min(self.urg_read_sock_limit());
        if limit == 0 && max > 0 && !self.rcv_queue.is_empty() {
            return Ok(0);
        }
        self.read_queue(ctx, limit, read, false)
    }

    /// Consumes up to `max` bytes of the receive queue into `read`, or reports why
    /// there are none (`empty_read`). Receive-buffer autotuning runs after each
    /// skb's bytes (`per_skb`: `tcp_recvmsg_locked` calls `tcp_rcv_space_adjust`
    /// once it moved `copied_seq` past them, so the bytes still queued behind it
    /// count as not read yet) or once at the end (`tcp_read_sock`).
    fn read_queue(
        &mut self,
        ctx: &mut Ctx,
        max: usize,
        mut read: impl FnMut(&[u8]),
        per_skb: bool,
    ) -> Result<usize, SocketError> {
        if self.rcv_queue.is_empty() {
            let verdict = self.empty_read();
            if verdict.is_err() && verdict.err() == self.sk_err {
                self.sk_err = None; // sock_error: a pending error is reported once
            }
            if verdict == Ok(0) {
                // found_fin_ok: tcp_eat_recv_skb frees a FIN-only skb.
                self.rcv_queue.eat_fin();
            }
            return verdict;
        }
        let mut n = 0;
        while n < max {
            let k = match per_skb {
                true => self.rcv_queue.read_skb(max - n, &mut read),
                false => self.rcv_queue.read(max - n, &mut read),
            };
            if k == 0 {
                break;
            }
            n += k;
            self.copied_seq += k as u64;
            self.rcv_space_adjust(ctx);
        }
        self.urg_passed();
        self.cleanup_rbuf(ctx, n);
        Ok(n)
    }

    /// `tcp_recvmsg` with `MSG_PEEK` from `offset` bytes past `copied_seq`
    /// (`SO_PEEK_OFF`, 0 without it): copies without consuming, stopping at and
    /// skipping the urgent byte as a read would.
    pub(crate) fn peek(&self, offset: usize, buf: &mut [u8]) -> Result<usize, SocketError> {
        let (skip, n) = self.peek_span(offset, buf.len())?;
        Ok(self.rcv_queue.peek_from(skip, &mut buf[..n]))
    }

    /// Where a peek of up to `len` bytes from `offset` starts in the receive queue
    /// (past an urgent byte it skips) and how many bytes it takes; `MSG_PEEK |
    /// MSG_TRUNC` returns the count alone (`tcp_recvmsg_locked` copies nothing).
    /// From the end of the data or past it, what an empty queue reads.
    pub(crate) fn peek_span(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<(usize, usize), SocketError> {
        let queued = self.rcv_queue.len();
        let seq = self.copied_seq + offset as u64;
        let u = self.urg_read(seq, queued.saturating_sub(offset), len);
        let skip = offset.saturating_add(u.skip as usize);
        if queued <= skip {
            return self.empty_read().map(|n| (skip, n));
        }
        Ok((skip, u.limit.min(queued - skip)))
    }

    /// What `tcp_recvmsg` returns when the receive queue is empty: end of stream
    /// once the peer's FIN was taken (`SOCK_DONE`, even if a reset followed), a
    /// pending error (`sock_error`), end of stream after `SHUT_RD` or `tcp_done`,
    /// `ENOTCONN` when never connected, else `EAGAIN`.
    fn empty_read(&self) -> Result<usize, SocketError> {
        if self.fin_seq.is_some_and(|f| self.rcv_nxt > f) {
            return Ok(0);
        }
        if let Some(e) = self.sk_err {
            return Err(e);
        }
        if self.rcv_shutdown || self.shut_rd {
            return Ok(0);
        }
        match self.state {
            TcpState::Closed | TcpState::Listen => Err(SocketError::NotConnected),
            _ => Err(SocketError::WouldBlock),
        }
    }

    /// `__tcp_cleanup_rbuf` after a read of `copied` bytes: the ACK the input path
    /// left to the reader (`Tcb::read_needs_ack`), else a window update if the window
    /// can grow by a lot: the peer was told at most half of `window_clamp`, and the
    /// window `tcp_select_window` would now offer (not zero) is at least twice that.
    pub(crate) fn cleanup_rbuf(&mut self, ctx: &mut Ctx, copied: usize) {
        if !self.state.is_synchronized() {
            return;
        }
        if self.read_needs_ack(ctx.cfg, copied) {
            return self.send_ack(ctx);
        }
        if copied == 0 || self.rcv_shutdown {
            return;
        }
        let advertised_left = self.receive_window() as u64;
        if 2 * advertised_left > self.window_clamp as u64 {
            return;
        }
        let new_window = self.compute_window(ctx.mem, ctx.cfg) as u64;
        if new_window > 0 && new_window >= 2 * advertised_left {
            self.send_ack(ctx);
        }
    }
}

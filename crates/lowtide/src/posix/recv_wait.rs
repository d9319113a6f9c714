//! A blocking `recvmsg(2)` across its sleeps, as `tcp_recvmsg_locked` runs it: it
//! copies what is queued, and short of its target (`sock_rcvlowat`: `len` with
//! `MSG_WAITALL`, else `SO_RCVLOWAT` up to `len`) it sleeps (`tcp_cleanup_rbuf`,
//! `sk_wait_data`) until the socket's wait queue is woken, then copies again.
//! The data wakeup is `tcp_data_ready`'s: only once `tcp_epollin_ready` holds for
//! `sk_rcvlowat` past the bytes already taken (or the stream is done), so a
//! reader that took 1000 bytes under a mark of 3000 wakes when 3000 more are in.
//! Any other wakeup of the queue (an error, a state change, write space) makes it
//! look again too (`woken_wake_function` does not filter on the key).
//!
//! The caller (a harness that blocks) keeps a [`RecvWait`] for the call and calls
//! [`Host::recvmsg_wait`] again after each event, and once more when its
//! `SO_RCVTIMEO` runs out.

use super::consts::*;
use super::poll::WAKE_KEYS;
use super::{Errno, Fd, Host, RecvMsg, SockState};
use crate::socket::SocketHandle;
use crate::time::Instant;

/// A blocking receive between its copies: what `tcp_recvmsg_locked` keeps on its
/// stack while it sleeps.
#[derive(Debug, Default)]
pub struct RecvWait {
    /// `copied`: the bytes taken so far.
    copied: usize,
    /// `target` and the peek's starting offset (`sk_peek_offset`), fixed at the
    /// first copy.
    start: Option<(usize, usize)>,
    /// `tss`: the stamp of the last stamped skb read so far.
    tss: Option<Option<Instant>>,
    /// The socket's wakeup counts as the reader went to sleep; `None` while awake.
    slept: Option<([u64; WAKE_KEYS], u64)>,
}

/// The call a step belongs to.
#[derive(Debug, Clone, Copy)]
struct Call {
    now: Instant,
    fd: Fd,
    h: SocketHandle,
    flags: i32,
    /// `timeo` left: false for a non-blocking call or once `SO_RCVTIMEO` ran out.
    may_sleep: bool,
}

/// What one step of a blocking receive ends in.
#[derive(Debug, PartialEq, Eq)]
pub enum RecvStep {
    /// The call returns this.
    Done(Result<RecvMsg, Errno>),
    /// It sleeps until the socket is woken; call [`Host::recvmsg_wait`] again.
    Wait,
}

impl Host {
    /// One step of a `recvmsg(2)` that may block (`tcp_recvmsg_locked`'s loop):
    /// unless woken since it went to sleep, it waits on; else it copies into
    /// `buf` after the bytes it has and returns once its target is copied, or
    /// the end of the stream, an error, a closed or shut socket, or the urgent
    /// mark stops it with bytes copied; with nothing copied it returns what a
    /// non-blocking call would, but sleeps for `EAGAIN`. `may_sleep` false
    /// (`MSG_DONTWAIT`, a non-blocking socket, or `SO_RCVTIMEO` run out: `timeo`
    /// 0) makes this step the last: what was copied, else `EAGAIN`. Pipes,
    /// unconnected sockets, `MSG_OOB` and `MSG_ERRQUEUE` are tried as they are
    /// ([`Host::recvmsg`]), again after any event.
    pub fn recvmsg_wait(
        &mut self,
        now: Instant,
        fd: Fd,
        buf: &mut [u8],
        flags: i32,
        w: &mut RecvWait,
        may_sleep: bool,
    ) -> RecvStep {
        let h = match self.sock(fd).map(|s| s.state) {
            Ok(SockState::Conn { h, .. }) if flags & (MSG_OOB | MSG_ERRQUEUE) == 0 => h,
            _ => {
                return match self.recvmsg(now, fd, buf, flags) {
                    Err(Errno(errno::EAGAIN)) if may_sleep => RecvStep::Wait,
                    r => RecvStep::Done(r),
                }
            }
        };
        let c = Call {
            now,
            fd,
            h,
            flags,
            may_sleep,
        };
        if w.slept.is_some() {
            if may_sleep && !self.recv_woken(fd, w) {
                return RecvStep::Wait;
            }
            w.slept = None;
            // "while (len > 0)": a read of no bytes that slept returns.
            if buf.is_empty() {
                return RecvStep::Done(Ok(self.recv_done(fd, h, 0, None)));
            }
        }
        if w.start.is_none() {
            let lowat = self.stack.socket_ref(h).rcvlowat().unwrap_or(1) as usize;
            // sock_rcvlowat: "v = waitall ? len : min(sk_rcvlowat, len); v ?: 1".
            let target = match flags & MSG_WAITALL {
                0 => lowat.min(buf.len()),
                _ => buf.len(),
            };
            w.start = Some((target.max(1), self.peek_offset(fd, flags)));
        }
        if w.copied == 0 {
            return self.recv_first(c, buf, w);
        }
        let n = self.recv_more(c, buf, w);
        self.recv_after(c, buf.len(), w, n)
    }

    /// The first copy, with nothing copied yet: what a non-blocking read gives,
    /// but `EAGAIN` sleeps.
    fn recv_first(&mut self, c: Call, buf: &mut [u8], w: &mut RecvWait) -> RecvStep {
        let off = self.recv_offset(c, w);
        match self.recv_copy(c.now, c.fd, c.h, buf, c.flags, off) {
            Err(Errno(errno::EAGAIN)) if c.may_sleep => {
                self.recv_sleep(c.fd, w);
                RecvStep::Wait
            }
            Err(e) => RecvStep::Done(Err(e)),
            // Nothing to copy and nothing to wait for: the end of the stream (or
            // a read of no bytes).
            Ok((0, tss)) => RecvStep::Done(Ok(self.recv_done(c.fd, c.h, 0, tss))),
            Ok((n, tss)) => {
                w.copied = n;
                w.tss = tss.or(w.tss);
                self.recv_after(c, buf.len(), w, n)
            }
        }
    }

    /// A later copy, with bytes copied: it stops at the urgent mark, and reads
    /// only when there are bytes (a read of an empty queue would report the error
    /// or the end of the stream, which the caller then sees with its bytes
    /// instead); without bytes the walk still finds a FIN-only skb and a read
    /// frees it (`found_fin_ok`). Returns the bytes it took.
    fn recv_more(&mut self, c: Call, buf: &mut [u8], w: &mut RecvWait) -> usize {
        let off = self.recv_offset(c, w);
        match self.stack.recv_ahead(c.h, off) {
            Ok((avail, false)) if avail > 0 => {}
            Ok((_, false)) if c.flags & MSG_PEEK == 0 => {
                let _ = self.stack.recv_eat_fin(c.now, c.h);
                return 0;
            }
            _ => return 0,
        }
        let rest = &mut buf[w.copied..];
        let Ok((n, tss)) = self.recv_copy(c.now, c.fd, c.h, rest, c.flags, off) else {
            return 0;
        };
        w.copied += n;
        w.tss = tss.or(w.tss);
        n
    }

    /// Where the next copy starts past `copied_seq`: a peek's `peek_seq` (its
    /// first offset plus what it copied), 0 for a read.
    fn recv_offset(&self, c: Call, w: &RecvWait) -> usize {
        match c.flags & MSG_PEEK {
            0 => 0,
            _ => w.start.map_or(0, |s| s.1) + w.copied,
        }
    }

    /// `tcp_recvmsg_locked` after a copy (this one took `n` bytes, `w.copied` in
    /// all, of `len`): done when `len` is used up, at the urgent mark, at the
    /// target, on an error, a closed socket or `RCV_SHUTDOWN`, or without
    /// `timeo`; else `tcp_cleanup_rbuf` and `sk_wait_data`.
    fn recv_after(&mut self, c: Call, len: usize, w: &mut RecvWait, n: usize) -> RecvStep {
        let target = w.start.map_or(1, |s| s.0);
        let off = self.recv_offset(c, w);
        let at_mark = self.stack.recv_ahead(c.h, off).is_ok_and(|(_, m)| m);
        let st = self.stack.socket_ref(c.h).status();
        let ended = st.map_or(true, |st| {
            st.err || st.state == crate::TcpState::Closed || st.rcv_shutdown
        });
        let done = w.copied >= len || at_mark || w.copied >= target || ended || !c.may_sleep;
        // A copy that took bytes ran tcp_cleanup_rbuf for them (Stack::recv);
        // one that took none leaves it to this call, before it sleeps or returns.
        if n == 0 {
            let _ = self.stack.cleanup_rbuf(c.now, c.h, w.copied);
            self.sync_events();
        }
        if done {
            return RecvStep::Done(Ok(self.recv_done(c.fd, c.h, w.copied, w.tss)));
        }
        self.recv_sleep(c.fd, w);
        RecvStep::Wait
    }

    /// `sk_wait_data`: the reader notes the socket's wakeups as it goes to sleep.
    fn recv_sleep(&mut self, fd: Fd, w: &mut RecvWait) {
        self.sync_events();
        w.slept = self.wake_state(fd).ok();
    }

    /// Whether the socket's wait queue was woken since the reader went to sleep.
    fn recv_woken(&mut self, fd: Fd, w: &RecvWait) -> bool {
        self.sync_events();
        self.wake_state(fd).ok() != w.slept
    }
}

//! Urgent data ([RFC 9293 section 3.8.5](https://www.rfc-editor.org/rfc/rfc9293#section-3.8.5),
//! RFC 6093) as Linux keeps it: one urgent pointer each way and one urgent byte.
//!
//! Sender (tcp.c `tcp_mark_urg`, tcp_output.c `__tcp_transmit_skb`): a send with
//! `MSG_OOB` moves `snd_up` to the end of what was written, and every segment sent
//! while `snd_up` is ahead of its sequence carries URG and the urgent pointer, BSD's
//! way (one past the urgent byte), capped at 0xFFFF, until the peer acknowledges
//! `snd_up` (`tcp_clean_rtx_queue`).
//!
//! Receiver (tcp_input.c `tcp_urg`, `tcp_check_urg`): a new urgent pointer makes the
//! byte it names pending (`TCP_URG_NOTYET`) until a segment holding it arrives
//! (`TCP_URG_VALID`, `POLLPRI`); `recv(MSG_OOB)` reads it once (`tcp_recv_urg`,
//! then `TCP_URG_READ`). The byte stays in the receive queue: reads stop at it
//! (`tcp_recvmsg_locked`) and skip it unless `SO_OOBINLINE`; `tcp_read_sock`
//! (splice) stops at it for good. `SIOCATMARK` says a reader is at it, `SIOCINQ`
//! counts only the bytes before it (`tcp_inq`).

use super::sock::Tcb;
use super::Ctx;
use crate::socket::{EventKind, OobRead, SocketError};
use crate::TcpState;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// `TCP_URG_VALID`: the urgent byte arrived; it is in the low 8 bits.
pub(crate) const TCP_URG_VALID: u16 = 0x0100;
/// `TCP_URG_NOTYET`: an urgent pointer names a byte not received yet.
pub(crate) const TCP_URG_NOTYET: u16 = 0x0200;
/// `TCP_URG_READ`: the urgent byte was read with `MSG_OOB`.
pub(crate) const TCP_URG_READ: u16 = 0x0400;

/// How a normal read meets the urgent mark (`tcp_recvmsg_locked`'s `urg_data` checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UrgRead {
    /// The read starts at the urgent byte and skips it (not `SO_OOBINLINE`).
    pub skip: bool,
    /// Bytes the read may take after any skip (up to the mark, or all).
    pub limit: usize,
}

impl Tcb {
    // ---- sender ------------------------------------------------------------------

    /// `tcp_urg_mode`: our urgent pointer is ahead of `snd_una`.
    pub(crate) fn urg_mode(&self) -> bool {
        self.urg.snd_up > self.snd_una
    }

    /// `tcp_mark_urg`: a send with `MSG_OOB` puts the urgent pointer after the last
    /// byte written.
    pub(crate) fn mark_urg(&mut self) {
        self.urg.snd_up = self.write_seq;
    }

    /// `tcp_clean_rtx_queue`: once an ACK covers `snd_up`, urgent mode ends.
    pub(crate) fn urg_acked(&mut self, prior_snd_una: u64) {
        if (prior_snd_una..=self.snd_una).contains(&self.urg.snd_up) {
            self.urg.snd_up = self.snd_una;
        }
    }

    /// `__tcp_transmit_skb`: URG and the urgent pointer for a segment starting at
    /// `seq`: the distance to `snd_up` when it fits 16 bits, else 0xFFFF while the
    /// segment is more than 0xFFFF below `snd_nxt` ("the urg_mode check is necessary
    /// during a below snd_una win probe"), else none.
    pub(crate) fn urgent_field(&self, seq: u64) -> Option<u16> {
        if !self.urg_mode() || seq >= self.urg.snd_up {
            return None;
        }
        if self.urg.snd_up < seq + 0x10000 {
            Some((self.urg.snd_up - seq) as u16)
        } else if seq + 0xFFFF > self.snd_nxt {
            Some(0xFFFF)
        } else {
            None
        }
    }

    /// `tcp_write_wakeup`'s extra probe: with nothing to send, an urgent pointer
    /// within 0xFFFF of `snd_una` gets a probe at `snd_una` itself (which carries
    /// it) before the usual one below `snd_una`.
    pub(crate) fn urg_probe_due(&self) -> bool {
        (self.snd_una + 1..=self.snd_una + 0xFFFF).contains(&self.urg.snd_up)
    }

    // ---- receiver ----------------------------------------------------------------

    /// `tcp_urg`: a segment's urgent pointer (URG set), then, while a named byte is
    /// pending, whether this segment holds it (in order or not): the byte is kept
    /// and the reader woken (`sk_data_ready`, for `POLLPRI`). `seq` is the segment's
    /// offset.
    pub(crate) fn urg(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64, payload: &[u8]) {
        if th.flags.contains(TcpFlags::URG) {
            self.check_urg(ctx, th, seq);
        }
        if self.urg.data != TCP_URG_NOTYET {
            return;
        }
        // Linux's offset counts from the TCP header (`urg_seq - seq + doff * 4 -
        // syn`); a pointer a little below `seq` (a later segment before the one
        // with the byte) reads a header byte there. lowtide takes only payload.
        let syn = th.flags.contains(TcpFlags::SYN) as u64;
        let Some(at) = self.urg.seq.checked_sub(seq + syn) else {
            return;
        };
        if let Some(&b) = payload.get(at as usize) {
            self.urg.data = TCP_URG_VALID | b as u16;
            self.notify(ctx, EventKind::Readable);
        }
    }

    /// `tcp_check_urg`: a new urgent pointer. `tcp_stdurg` off (BSD) reads it as one
    /// past the urgent byte. Ignored if already read past, before `rcv_nxt` ("do not
    /// replay urg ptr"), or not newer than the one we have. If the reader sits on
    /// the old urgent byte (not inline) with more data after it, that byte leaves
    /// the stream now, so it is not read again as data.
    fn check_urg(&mut self, ctx: &mut Ctx, th: &TcpRepr, seq: u64) {
        let mut ptr = th.urgent as u64;
        if ptr != 0 && !ctx.cfg.tcp_stdurg {
            ptr -= 1;
        }
        ptr += seq;
        if self.copied_seq > ptr || ptr < self.rcv_nxt {
            return;
        }
        if self.urg.data != 0 && ptr <= self.urg.seq {
            return;
        }
        // sk_send_sigurg: lowtide raises no signals (POLLPRI says it).
        if self.urg.seq == self.copied_seq
            && self.urg.data != 0
            && !self.urg.inline
            && self.copied_seq != self.rcv_nxt
        {
            self.copied_seq += 1;
            self.rcv_queue.read(1, |_| {});
        }
        self.urg.data = TCP_URG_NOTYET;
        self.urg.seq = ptr;
        self.fast_path_off(); // Disable header prediction.
    }

    /// `tcp_recvmsg_locked` on the urgent mark for a read of `max` bytes from
    /// `seq` with `avail` bytes queued: at the mark, the urgent byte is skipped
    /// unless `SO_OOBINLINE` (and the read goes on past it); before it, the read
    /// stops at it.
    pub(crate) fn urg_read(&self, seq: u64, avail: usize, max: usize) -> UrgRead {
        let all = UrgRead {
            skip: false,
            limit: max,
        };
        if self.urg.data == 0 || max == 0 || self.urg.seq < seq {
            return all;
        }
        let to_mark = (self.urg.seq - seq) as usize;
        match to_mark {
            0 if self.urg.inline => all,
            // The skipped byte does not count against `max`.
            0 => UrgRead {
                skip: avail > 0,
                limit: max,
            },
            n => UrgRead {
                skip: false,
                limit: n.min(max),
            },
        }
    }

    /// `tcp_recvmsg_locked`'s `skip_copy:` after a read moved `copied_seq`: past the
    /// urgent byte, the urgent state ends.
    pub(crate) fn urg_passed(&mut self) {
        if self.urg.data != 0 && self.copied_seq > self.urg.seq {
            self.urg.data = 0;
            self.fast_path_check();
        }
    }

    /// `__tcp_read_sock`'s stop: bytes from `copied_seq` before the urgent mark
    /// (`usize::MAX` without one). It holds with `SO_OOBINLINE` too, and only a
    /// normal read (which skips the byte) clears it.
    pub(crate) fn urg_read_sock_limit(&self) -> usize {
        if self.urg.data == 0 || self.urg.seq < self.copied_seq {
            return usize::MAX;
        }
        (self.urg.seq - self.copied_seq) as usize
    }

    /// `tcp_recv_urg`: `recv(MSG_OOB)` takes the urgent byte (`peek` keeps it
    /// readable); `EINVAL` with `SO_OOBINLINE`, with no urgent data or once it was
    /// read; `ENOTCONN` on a connection that never was; end of stream (0) once the
    /// peer closed; else `EAGAIN`, never blocking.
    pub(crate) fn recv_urg(&mut self, peek: bool, len: usize) -> Result<OobRead, SocketError> {
        if self.urg.inline || self.urg.data == 0 || self.urg.data == TCP_URG_READ {
            return Err(SocketError::InvalidInput);
        }
        let closed = self.state == TcpState::Closed;
        let done = self.fin_seq.is_some_and(|f| self.rcv_nxt > f);
        if closed && !done {
            return Err(SocketError::NotConnected);
        }
        if self.urg.data & TCP_URG_VALID != 0 {
            let b = self.urg.data as u8;
            if !peek {
                self.urg.data = TCP_URG_READ;
            }
            return Ok(match len {
                0 => OobRead::Truncated,
                _ => OobRead::Byte(b),
            });
        }
        if closed || self.rcv_shutdown || self.shut_rd {
            return Ok(OobRead::End);
        }
        Err(SocketError::WouldBlock)
    }

    /// `SIOCATMARK`: urgent data is pending and the reader is at its mark.
    pub(crate) fn at_mark(&self) -> bool {
        self.mark_at(0)
    }

    /// `tcp_recvmsg_locked`'s "are we at urgent data?" for a reader `offset` bytes
    /// past `copied_seq` (a peek's `peek_seq`): urgent state and `urg_seq` there.
    pub(crate) fn mark_at(&self, offset: usize) -> bool {
        self.urg.data != 0 && self.urg.seq == self.copied_seq + offset as u64
    }

    /// `tcp_poll`'s `EPOLLPRI`: the urgent byte arrived and was not read.
    pub(crate) fn urg_valid(&self) -> bool {
        self.urg.data & TCP_URG_VALID != 0
    }
}

#[cfg(test)]
mod tests;

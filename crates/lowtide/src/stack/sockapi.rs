//! The stack's socket API for TCP: sends and receives (`send(2)`, `sendmsg(2)`,
//! `recv(2)` and its flags), `shutdown(2)`, `close(2)`, abort and disconnect,
//! sysctls, and a socket's state, error, addresses and `tcp_info`. Each call finds
//! its socket's slot and runs the engine's call (tcp/api.rs) with the stack's
//! context (stack/mod.rs).

#[cfg(doc)]
use super::SocketMut;
use super::{Sock, Stack};
use crate::config::ConfigError;
use crate::socket::*;
use crate::tcp::{self, TcpState};
use crate::time::Instant;
use std::net::SocketAddr;

impl Stack {
    /// Queues bytes for sending (`send(2)`): returns how many were taken; a partial
    /// count or `WouldBlock` when the send buffer is full. [`Stack::sendmsg`] of one
    /// buffer without flags.
    pub fn send(
        &mut self,
        now: Instant,
        h: SocketHandle,
        data: &[u8],
    ) -> Result<usize, SocketError> {
        self.sendmsg(now, h, &[data], SendFlags::default())
    }

    /// `sendmsg(2)` of the buffers `iov`, in order, with [`SendFlags`] (`MSG_MORE`,
    /// `MSG_EOR`, `MSG_ZEROCOPY`): every send enters here. With
    /// [`SendFlags::zerocopy`] each non-empty buffer is one page fragment of the
    /// skbs (the caller splits them at page boundaries), and the send takes the
    /// next `MSG_ZEROCOPY` notification id (`SO_ZEROCOPY`,
    /// [`SocketMut::set_zerocopy`]); its completion, once no skb holds its bytes
    /// (acknowledged, or purged by a reset), is read with [`SocketMut::recv_errqueue`] ([`EventKind::ErrQueue`]
    /// signals it). This call copies the bytes, so the completion carries
    /// `SO_EE_CODE_ZEROCOPY_COPIED`; [`Stack::send_zerocopy`] does not.
    pub fn sendmsg(
        &mut self,
        now: Instant,
        h: SocketHandle,
        iov: &[&[u8]],
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        let index = self.user_slot(h)?;
        // One buffer (send(2), the common case) is taken as it is, uncopied.
        let joined;
        let data = match iov {
            [one] => *one,
            _ => {
                joined = iov.concat();
                &joined[..]
            }
        };
        // Each buffer's page offset: the joined copy of several has its own.
        let frags: Vec<crate::tcp::api::ZcFrag> = match flags.zerocopy {
            true => iov
                .iter()
                .filter(|b| !b.is_empty())
                .map(|b| (b.len(), b.as_ptr() as usize % crate::tcp::api::ZC_PAGE))
                .collect(),
            false => Vec::new(),
        };
        self.with_tcb(now, index, |tcb, ctx| tcb.sendmsg(ctx, data, &frags, flags))
    }

    /// Ends a blocking `sendmsg(2)` whose caller stopped waiting before all was
    /// copied ([`crate::SendPart::First`]/[`crate::SendPart::Cont`] attempts left
    /// waiting): `tcp_sendmsg_locked`'s `out:` with the call's `flags`. Nothing if
    /// no call waits.
    pub fn send_end(&mut self, now: Instant, h: SocketHandle, flags: SendFlags) {
        if let Ok(index) = self.user_slot(h) {
            self.with_tcb(now, index, |tcb, ctx| tcb.send_end(ctx, flags));
        }
    }

    /// `sendmsg(2)` with `MSG_ZEROCOPY` that does not copy: the write and
    /// retransmit queues hold slices of `data` itself, and every packet carries
    /// them to the device as [`crate::TxPayload::Bytes`] slices of the same
    /// allocation (`skb_zerocopy_iter_stream`: the user's pages become the skb's
    /// fragments; laid out in 4 KiB page fragments from its start, at most
    /// `MAX_SKB_FRAGS` per skb). Returns how many bytes were taken, as
    /// [`Stack::sendmsg`]: send the rest as `data.slice(n..)`. With `SO_ZEROCOPY`
    /// on ([`SocketMut::set_zerocopy`]) the send takes the next notification id;
    /// once no skb holds its bytes (acknowledged, or purged by a reset) and the
    /// device holds none of its packets (their TX completions), the completion ([`EventKind::ErrQueue`],
    /// [`SocketMut::recv_errqueue`]) carries `ee_code` 0, or
    /// `SO_EE_CODE_ZEROCOPY_COPIED` when a device that copies carried it
    /// ([`Stack::set_tx_orphan_frags`]). Without `SO_ZEROCOPY` the flag is
    /// ignored and the bytes are copied, as Linux does; a device that takes no
    /// payload apart ([`Stack::set_tx_payload_apart`] off, Linux's device without
    /// `NETIF_F_SG`) gets them copied too, the completion saying
    /// `SO_EE_CODE_ZEROCOPY_COPIED`. `flags` as for [`Stack::sendmsg`]
    /// (`zerocopy` implied).
    pub fn send_zerocopy(
        &mut self,
        now: Instant,
        h: SocketHandle,
        data: bytes::Bytes,
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.send_zerocopy(ctx, &data, flags))
    }

    /// Pattern mode's `send(2)`: queues `len` bytes of the socket's payload source
    /// ([`SocketMut::set_payload_source`]) as [`Stack::send`] queues bytes: returns
    /// how many were taken. [`SocketError::InvalidInput`] on a socket without one.
    pub fn send_pattern(
        &mut self,
        now: Instant,
        h: SocketHandle,
        len: usize,
    ) -> Result<usize, SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.send_pattern(ctx, len))
    }

    /// Reads received bytes (`recv(2)`): `Ok(0)` is the end of the stream.
    pub fn recv(
        &mut self,
        now: Instant,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Result<usize, SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.recvmsg(ctx, buf))
    }

    /// `recv(2)` with `MSG_PEEK`: copies without consuming.
    pub fn peek(&self, h: SocketHandle, buf: &mut [u8]) -> Result<usize, SocketError> {
        self.peek_at(h, 0, buf)
    }

    /// [`Stack::peek`] from `offset` bytes past the next byte to read
    /// (`SO_PEEK_OFF`: `tcp_recvmsg_locked`'s `peek_seq = copied_seq +
    /// peek_offset`); an offset at or past the end of the data reads as an empty
    /// queue does (`EAGAIN`, or 0 once the peer's FIN is in).
    pub fn peek_at(
        &self,
        h: SocketHandle,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<usize, SocketError> {
        self.tcb(h)?.peek(offset, buf)
    }

    /// `recv(2)` with `MSG_TRUNC` (`tcp_recvmsg_locked`: the data is taken, up to
    /// `len` bytes, as [`Stack::recv`] takes it, and copied nowhere); with `peek`
    /// (`MSG_PEEK | MSG_TRUNC`, from that offset as [`Stack::peek_at`]) only
    /// counted. Returns the byte count.
    pub fn recv_trunc(
        &mut self,
        now: Instant,
        h: SocketHandle,
        len: usize,
        peek: Option<usize>,
    ) -> Result<usize, SocketError> {
        if let Some(offset) = peek {
            return self.tcb(h)?.peek_span(offset, len).map(|(_, n)| n);
        }
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.recvmsg_with(ctx, len, |_| {}))
    }

    /// `recv(2)` with `MSG_OOB` (`tcp_recv_urg`): the peer's urgent byte, once
    /// (`peek` leaves it), never waiting: `EINVAL` with `SO_OOBINLINE`, with none
    /// or once read; `EAGAIN` while the byte is still to come.
    pub fn recv_oob(
        &mut self,
        h: SocketHandle,
        peek: bool,
        len: usize,
    ) -> Result<crate::socket::OobRead, SocketError> {
        self.tcb_mut(h)?.recv_urg(peek, len)
    }

    /// Bytes ready to read.
    pub fn recv_queue_len(&self, h: SocketHandle) -> Result<usize, SocketError> {
        Ok(self.tcb(h)?.rcv_queue_len())
    }

    /// `shutdown(2)`.
    pub fn shutdown(
        &mut self,
        now: Instant,
        h: SocketHandle,
        how: Shutdown,
    ) -> Result<(), SocketError> {
        let index = self.user_slot(h)?;
        self.with_tcb(now, index, |tcb, ctx| tcb.shutdown(ctx, how))
    }

    /// `close(2)`: the handle becomes invalid; the connection finishes in the
    /// background (FIN after queued data, or RST if unread data remains).
    pub fn close(&mut self, now: Instant, h: SocketHandle) -> Result<(), SocketError> {
        let index = self.handle_slot(h)?;
        if let Some(Sock::Listener(l)) = &self.slots[index as usize].sock {
            let (local, queued): (SocketAddr, Vec<u32>) =
                (l.local, l.accept_queue.iter().copied().collect());
            self.listen_unhash(local, index);
            if self.catch_all == Some(index) {
                self.catch_all = None;
            }
            self.listen_stop(now, index, &queued);
            self.free_slot(now, index);
            return Ok(());
        }
        self.slots[index as usize].orphan = true;
        // __tcp_close counts the orphan (tcp_orphan_count) before tcp_check_oom.
        self.count_death_row(index);
        self.with_tcb(now, index, |tcb, ctx| tcb.close(ctx, false));
        Ok(())
    }

    /// [`Stack::close`] of a socket with `SO_LINGER` on and a time, whose closer
    /// waits for the ACK of its FIN (`sk_stream_wait_close`) before the socket is
    /// orphaned: call [`Stack::close_linger_done`] when that wait ends (the ACK, the
    /// time up, or the connection gone). A listener closes as [`Stack::close`].
    pub fn close_lingering(&mut self, now: Instant, h: SocketHandle) -> Result<(), SocketError> {
        let index = self.handle_slot(h)?;
        if !matches!(self.slots[index as usize].sock, Some(Sock::Tcp(_))) {
            return self.close(now, h);
        }
        self.slots[index as usize].orphan = true;
        self.count_death_row(index);
        self.with_tcb(now, index, |tcb, ctx| {
            tcb.close_lingering(ctx, false, true);
        });
        Ok(())
    }

    /// The end of a lingering close's wait ([`Stack::close_lingering`]):
    /// `adjudge_to_death`, which orphans the socket. Nothing when the connection is
    /// gone or was orphaned already.
    pub fn close_linger_done(&mut self, now: Instant, h: SocketHandle) {
        let Some(slot) = self.slots.get(h.index as usize) else {
            return;
        };
        let pending = matches!(&slot.sock, Some(Sock::Tcp(t)) if t.adjudge_pending);
        if slot.generation == h.generation && pending {
            self.with_tcb(now, h.index, |tcb, ctx| tcb.adjudge_to_death(ctx));
        }
    }

    /// `close(2)` with `SO_LINGER` on and a zero time (`__tcp_close`): a reset for
    /// unread data (`TcpExtTCPAbortOnClose`), else `tcp_disconnect`'s
    /// (`TcpExtTCPAbortOnData`), which only the states still in the exchange send.
    pub fn abort(&mut self, now: Instant, h: SocketHandle) -> Result<(), SocketError> {
        let index = self.user_slot(h)?;
        self.slots[index as usize].orphan = true;
        self.count_death_row(index);
        self.with_tcb(now, index, |tcb, ctx| tcb.close(ctx, true));
        Ok(())
    }

    /// `tcp_disconnect` of a connection whose socket stays with its caller
    /// (`connect(2)` with `AF_UNSPEC`): a reset where `tcp_need_reset` says, the
    /// error `ECONNRESET`, no counter (those are `__tcp_close`'s); the connection
    /// ends and its handle goes.
    /// Returns the error it leaves (`sk_err`), which the socket reports once.
    pub fn disconnect(
        &mut self,
        now: Instant,
        h: SocketHandle,
    ) -> Result<Option<SocketError>, SocketError> {
        let index = self.user_slot(h)?;
        self.slots[index as usize].orphan = true;
        self.count_death_row(index);
        Ok(self.with_tcb(now, index, |tcb, ctx| {
            tcb.disconnect(ctx);
            tcb.sk_err
        }))
    }

    /// Changes a sysctl at run time; sockets read most sysctls at every use, so e.g.
    /// `net.ipv4.tcp_notsent_lowat` applies at once to sockets without their own value,
    /// and so do module parameters (CUBIC's `hystart_detect`).
    pub fn set_sysctl(&mut self, now: Instant, name: &str, value: &str) -> Result<(), ConfigError> {
        self.cfg.set(name, value)?;
        // A sysctl write wakes nobody (proc_douintvec): a writer that a new
        // net.ipv4.tcp_notsent_lowat makes writable waits for the next
        // tcp_check_space (an ACK, a segment sent) or a poll.
        let live: Vec<u32> = (0..self.slots.len() as u32)
            .filter(|&i| matches!(self.slots[i as usize].sock, Some(Sock::Tcp(_))))
            .collect();
        for i in live {
            self.with_tcb(now, i, |tcb, ctx| tcb.cc.module_params_changed(ctx.cfg));
        }
        Ok(())
    }

    /// The connection's state.
    pub fn state(&self, h: SocketHandle) -> Result<TcpState, SocketError> {
        match self.slot_sock(h)? {
            Sock::Listener(_) => Ok(TcpState::Listen),
            Sock::Tcp(t) => Ok(t.state),
            Sock::TimeWait(_) => Err(SocketError::BadHandle),
        }
    }

    /// The pending socket error (`SO_ERROR`), cleared by reading it.
    pub fn socket_error(&mut self, h: SocketHandle) -> Result<Option<SocketError>, SocketError> {
        // sock_getsockopt: the hard error, else the soft one, each read once.
        let t = self.tcb_mut(h)?;
        Ok(t.sk_err.take().or_else(|| t.sk_err_soft.take()))
    }

    /// The local and remote addresses of a connection.
    pub fn addresses(&self, h: SocketHandle) -> Result<(SocketAddr, SocketAddr), SocketError> {
        let t = self.tcb(h)?;
        Ok((t.tuple.local, t.tuple.remote))
    }

    /// A `tcp_info` snapshot of a connection.
    pub fn info(&self, now: Instant, h: SocketHandle) -> Result<tcp::info::TcpInfo, SocketError> {
        Ok(self.tcb(h)?.info(now))
    }

    /// Connections in the connection table: live ones, orphans included (a reset or
    /// timed-out socket the application still holds has left it, as `tcp_done` unhashes).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Live connections neither in TIME-WAIT nor closed (a failed connect whose handle
    /// is still held): those with a handshake still to finish.
    /// A program about to exit serves the stack until this is 0; TIME-WAIT only
    /// answers a retransmitted FIN and does not keep a Linux process alive either.
    pub fn closing_count(&self) -> usize {
        let tcp = |i: u32| match &self.slots[i as usize].sock {
            Some(Sock::Tcp(t)) => Some(t.state),
            _ => None,
        };
        let live = self.conns.values().filter_map(tcp);
        live.filter(|s| !matches!(s, TcpState::TimeWait | TcpState::Closed))
            .count()
    }
}

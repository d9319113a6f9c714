//! A socket's options as a view of the stack ([`Stack::socket`] to set them, with
//! Linux's side effects; [`Stack::socket_ref`] to read them and the state
//! `tcp_poll`/`tcp_ioctl` read), and the stack-wide settings beside them: opening
//! with socket options, routes, the device's transmit model, addresses.

use super::{Sock, Stack};
use crate::socket::{EventKind, SocketError, SocketEvent, SocketHandle};
use crate::tcp::keepalive::{Keepalive, MAX_TCP_KEEPCNT, MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL};
use crate::tcp::sockopt::{rto_max_valid, rto_min_valid, SockOptions, SockStatus, MAX_TCP_SYNCNT};
use crate::time::Instant;
use std::net::SocketAddr;

impl Stack {
    /// [`Stack::listen`] with options the children inherit. A second listener on
    /// the same address joins the first's `SO_REUSEPORT` group when both set the
    /// option (`inet_reuseport_add_sock`), else the address is in use.
    pub fn listen_with(
        &mut self,
        local: SocketAddr,
        backlog: u32,
        opts: &SockOptions,
    ) -> Result<SocketHandle, SocketError> {
        if local.port() == 0 {
            return Err(SocketError::InvalidInput);
        }
        if !local.ip().is_unspecified() && !self.addrs.contains(&local.ip()) {
            return Err(SocketError::AddrNotAvailable);
        }
        if !self.reuseport_may_join(local, opts) {
            return Err(SocketError::AddrInUse);
        }
        let backlog = backlog.min(self.cfg.somaxconn);
        let mut l = crate::tcp::Listener::new(local, backlog);
        l.opts = opts.clone();
        self.listen_seq += 1;
        l.hash_seq = self.listen_seq;
        self.note_bound_dev(opts.bound_dev_if);
        let h = self.alloc(Sock::Listener(Box::new(l)));
        self.listeners.entry(local).or_default().push(h.index);
        self.syn_headers.on |= opts.save_syn != 0;
        self.fastopen_listen(h.index, backlog);
        Ok(h)
    }

    /// [`Stack::connect`] with options applied before the SYN (`TCP_MAXSEG`,
    /// `SO_RCVBUF`, ... set between `socket(2)` and `connect(2)`).
    pub fn connect_with(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        opts: &SockOptions,
    ) -> Result<SocketHandle, SocketError> {
        self.active_open(now, local, remote, Some(opts))
    }

    /// `ip route add|change|replace`: the route of `route.dst/route.prefix_len` and
    /// its metrics, whole. Connections look their route up again at their next
    /// transmission, as after a FIB change (`tcp/dst.rs`); new ones take it.
    pub fn route_replace(&mut self, route: crate::route::Route) {
        self.routes.replace(route);
    }

    /// `ip route del`: whether a route of that prefix was there.
    pub fn route_delete(&mut self, dst: std::net::IpAddr, prefix_len: u8) -> bool {
        self.routes.delete(dst, prefix_len)
    }

    /// The routes and learned path MTUs.
    pub fn routes(&self) -> &crate::route::RouteTable {
        &self.routes
    }

    /// Declares that the device frees each packet as soon as it takes it, as tun
    /// does (`skb_orphan` in `tun_net_xmit`): TX completion is immediate, so
    /// `sk_wmem_alloc` never holds a socket back (TCP Small Queues). Completions
    /// reported later through [`Stack::handle_tx_complete`] are then no-ops.
    pub fn set_tx_orphan(&mut self, on: bool) {
        self.tx_orphan = on;
    }

    /// Declares that the device copies each packet's payload before it sends it,
    /// as tun does (`tun_net_xmit`'s `skb_orphan_frags_rx`, whose `skb_copy_ubufs`
    /// clears `uarg->zerocopy`): a [`Stack::send_zerocopy`] whose bytes it carried
    /// completes with `SO_EE_CODE_ZEROCOPY_COPIED`, and the device holds no
    /// reference to them once it has taken the packet. Off by default: a device
    /// that sends the [`crate::Transmit`]'s payload slice as it is (a NIC's
    /// scatter-gather DMA) holds it until its TX completion.
    pub fn set_tx_orphan_frags(&mut self, on: bool) {
        self.tx_orphan_frags = on;
    }

    /// Leaves the payload of GSO packets (more than one segment) out of
    /// [`Transmit::packet`], which then holds only the headers in a small buffer: the
    /// payload comes in [`Transmit::payload`], a shared slice of the send queue, for a
    /// device that copies it once into its segments (zero-copy send, as Linux's skbs
    /// reference the socket's page fragments; issue 14). Single-segment packets stay
    /// whole. Off by default: every packet whole, but for a pattern socket's
    /// ([`SocketMut::set_payload_source`]), whose payload the device makes.
    ///
    /// [`Transmit::packet`]: crate::Transmit::packet
    /// [`Transmit::payload`]: crate::Transmit::payload
    pub fn set_tx_payload_apart(&mut self, on: bool) {
        self.tx_apart = on;
    }

    /// Says what the device does with `net.core.default_qdisc` ([`crate::Config::device_fq`]:
    /// `Some(true)` for a device that runs sch_fq and honours [`Transmit::tstamp`]),
    /// for the sockets created from now on.
    ///
    /// [`Transmit::tstamp`]: crate::Transmit::tstamp
    pub fn set_device_fq(&mut self, fq: Option<bool>) {
        self.cfg.device_fq = fq;
    }

    /// Whether `ip` is one of the stack's addresses.
    pub fn has_address(&self, ip: std::net::IpAddr) -> bool {
        self.addrs.contains(&ip)
    }

    /// The source address for a connection to `remote`: the first local address of
    /// its family.
    pub fn source_address(&self, remote: std::net::IpAddr) -> Option<std::net::IpAddr> {
        self.addrs
            .iter()
            .copied()
            .find(|a| a.is_ipv4() == remote.is_ipv4())
    }

    /// The state of a connection, also after `close` made it an orphan; `None` once
    /// it is gone.
    pub fn orphan_state(&self, h: SocketHandle) -> Option<crate::TcpState> {
        let s = self.slots.get(h.index as usize)?;
        match &s.sock {
            Some(Sock::Tcp(t)) if s.generation == h.generation => Some(t.state),
            _ => None,
        }
    }

    /// Whether `h` is a listener.
    pub fn is_listener(&self, h: SocketHandle) -> bool {
        matches!(self.slot_sock(h), Ok(Sock::Listener(_)))
    }

    /// The socket `h`, to set its options (`setsockopt(2)` and the calls beside
    /// it): `stack.socket(h).set_nodelay(true)`. Each call reports a handle that
    /// is no longer valid ([`SocketError::BadHandle`]) or of the wrong kind.
    pub fn socket(&mut self, h: SocketHandle) -> SocketMut<'_> {
        SocketMut { stack: self, h }
    }

    /// The socket `h`, to read its options (`getsockopt(2)`) and what `tcp_poll`
    /// and `tcp_ioctl` read.
    pub fn socket_ref(&self, h: SocketHandle) -> SocketRef<'_> {
        SocketRef { stack: self, h }
    }

    /// `IP_MINTTL` / `IPV6_MINHOPCOUNT` as `tcp_v4_rcv` / `tcp_v6_rcv` check them on
    /// a listener or a full socket (a request's segments, `TCP_NEW_SYN_RECV`, are
    /// not checked): a segment whose TTL is below the minimum is dropped and
    /// counted (`TcpExtTCPMinTTLDrop`).
    pub(super) fn min_ttl_drop(&mut self, index: u32, ip: &lowtide_wire::ip::IpRepr) -> bool {
        let ttl = ip.hop_limit;
        let below = match &self.slots[index as usize].sock {
            // An IPv4-mapped segment to an AF_INET6 listener: tcp_v4_rcv, min_ttl.
            Some(Sock::Listener(l)) => match ip.src.is_ipv6() {
                true => ttl < l.opts.min_hopcount,
                false => ttl < l.opts.min_ttl,
            },
            Some(Sock::Tcp(t)) if t.state == crate::TcpState::SynRecv && t.parent.is_some() => {
                false
            }
            Some(Sock::Tcp(t)) => t.below_min_ttl(ttl),
            _ => false,
        };
        if below {
            self.mib.inc(crate::Mib::TcpExtTCPMinTTLDrop);
        }
        below
    }
}

/// One socket of a [`Stack`], to change ([`Stack::socket`]): its options, with
/// Linux's side effects (`do_tcp_setsockopt`, `sock_setsockopt`,
/// `do_ip_setsockopt`), and the calls of the POSIX layer on it.
pub struct SocketMut<'a> {
    pub(super) stack: &'a mut Stack,
    pub(super) h: SocketHandle,
}

/// One socket of a [`Stack`], to read ([`Stack::socket_ref`]): `getsockopt(2)`
/// and the state `tcp_poll` and the ioctls read.
#[derive(Clone, Copy)]
pub struct SocketRef<'a> {
    pub(super) stack: &'a Stack,
    pub(super) h: SocketHandle,
}

impl SocketMut<'_> {
    /// `IP_RECVERR` and `IPV6_RECVERR` (`do_ip_setsockopt`, `do_ipv6_setsockopt`):
    /// whether ICMP errors on the synchronized connection are hard errors (a
    /// listener's children inherit them); `purge` (a 0 written) drops the error
    /// queue's ICMP entries (`skb_errqueue_purge`).
    pub fn set_recverr(&mut self, v4: bool, v6: bool, purge: bool) -> Result<(), SocketError> {
        let index = self.stack.handle_slot(self.h)?;
        match &mut self.stack.slots[index as usize].sock {
            Some(Sock::Tcp(t)) => {
                t.recverr = (v4, v6);
                if purge {
                    t.errq.purge_icmp();
                }
            }
            Some(Sock::Listener(l)) => (l.opts.recverr, l.opts.recverr6) = (v4, v6),
            _ => return Err(SocketError::BadHandle),
        }
        Ok(())
    }

    /// `SO_OOBINLINE` (`SOCK_URGINLINE`): the peer's urgent byte stays in the
    /// stream, read in order, instead of apart with `MSG_OOB`.
    pub fn set_oobinline(&mut self, on: bool) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.urg.inline = on;
        Ok(())
    }

    /// `SO_RCVLOWAT` (`tcp_set_rcvlowat`): the bytes that make the socket readable
    /// (poll, `tcp_data_ready`'s wakeup, a blocking read's target, and an ACK sent
    /// at once while fewer are in); an unlocked receive buffer grows to hold them.
    /// Negative is `INT_MAX`; capped at half the buffer; 0 is 1.
    pub fn set_rcvlowat(&mut self, now: Instant, val: i32) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_rcvlowat(ctx, val));
        Ok(())
    }

    /// Replaces the options a listener's future children inherit.
    pub fn set_listener_options(&mut self, opts: &SockOptions) -> Result<(), SocketError> {
        self.stack.listener_mut(self.h)?.opts = opts.clone();
        self.stack.note_bound_dev(opts.bound_dev_if);
        self.stack.syn_headers.on |= opts.save_syn != 0;
        Ok(())
    }

    /// `SO_BINDTODEVICE` / `SO_BINDTOIFINDEX` on a connection
    /// (`sock_bindtoindex_locked`): from now on it takes segments from that device
    /// only (`inet_match`) and sends on it (`sk_dst_reset`: the next transmit looks
    /// the route up again); 0 unbinds (stack/netdev.rs).
    pub fn set_bound_dev_if(&mut self, ifindex: u32) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        if let Some(Sock::Tcp(t)) = &mut self.stack.slots[index as usize].sock {
            t.bind.bound_dev_if = ifindex;
        }
        self.stack.note_bound_dev(ifindex);
        Ok(())
    }

    /// `TCP_CORK`; clearing it sends what it held.
    pub fn set_cork(&mut self, now: Instant, on: bool) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_cork(ctx, on));
        Ok(())
    }

    /// `TCP_NODELAY` with Linux's side effect: turning it on pushes pending data.
    pub fn set_nodelay_push(&mut self, now: Instant, on: bool) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_nodelay(ctx, on));
        Ok(())
    }

    /// `TCP_SYNCNT` (`tcp_sock_set_syncnt`): SYN retransmissions before giving up,
    /// 1..=127 (`MAX_TCP_SYNCNT`).
    pub fn set_syn_retries(&mut self, n: u8) -> Result<(), SocketError> {
        if !(1..=MAX_TCP_SYNCNT).contains(&n) {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.icsk.syn_retries = n;
        Ok(())
    }

    /// `TCP_THIN_LINEAR_TIMEOUTS` (`tp->thin_lto`): linear RTOs while the stream is
    /// thin, as `net.ipv4.tcp_thin_linear_timeouts` for this socket.
    pub fn set_thin_linear_timeouts(&mut self, on: bool) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.thin_lto = on;
        Ok(())
    }

    /// `TCP_RTO_MAX_MS` (Linux 6.15+, `icsk_rto_max`): the RTO's and every transmit
    /// timer's upper bound, 1 to 120 s.
    pub fn set_rto_max(&mut self, d: core::time::Duration) -> Result<(), SocketError> {
        if !rto_max_valid(d) {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.icsk.rto_max = d;
        Ok(())
    }

    /// `TCP_RTO_MIN_US` (Linux 6.15+, `icsk_rto_min`): the RTO's lower bound, 2 to
    /// 200 ms, unless the route locks `rto_min`.
    pub fn set_rto_min(&mut self, d: core::time::Duration) -> Result<(), SocketError> {
        if !rto_min_valid(d) || !d.as_nanos().is_multiple_of(1_000_000) {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.icsk.rto_min = d;
        Ok(())
    }

    /// `TCP_QUICKACK` (`__tcp_sock_set_quickack`): 0 enters pingpong mode; other
    /// values leave it, sending an owed ACK (`tcp/delack.rs`).
    pub fn set_quickack(&mut self, now: Instant, val: i32) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_quickack(ctx, val));
        Ok(())
    }

    /// A writer starts (`waiting`) or stops waiting for this connection to be
    /// established with data to send (`sk_write_pending`, as
    /// `sk_stream_wait_connect` and a Fast Open `inet_wait_for_connect` count it):
    /// while one waits, the ACK of the SYN-ACK is saved for its data to carry.
    pub fn set_write_pending(&mut self, waiting: bool) -> Result<(), SocketError> {
        let tcb = self.stack.tcb_mut(self.h)?;
        tcb.write_pending = if waiting {
            tcb.write_pending.saturating_add(1)
        } else {
            tcb.write_pending.saturating_sub(1)
        };
        Ok(())
    }

    /// `TCP_WINDOW_CLAMP` (`tcp_set_window_clamp`): the largest window the
    /// connection offers, at least `SOCK_MIN_RCVBUF / 2` (1152); a smaller clamp
    /// lowers `rcv_ssthresh` at once (the window offered shrinks as data arrives,
    /// its right edge never moving back), a larger one lets it grow to the current
    /// window. 0 clears it, only on a closed connection, else `InvalidInput`.
    pub fn set_window_clamp(&mut self, val: i32) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.set_window_clamp_user(val)
    }

    /// `TCP_SAVED_SYN` (getsockopt) for a buffer of `room` bytes: the IP and TCP
    /// headers of the SYN that made this connection, if its listener saved them
    /// (`SockOptions::save_syn`), handed out once; `InvalidInput` when `room` is
    /// short (they stay: [`SocketRef::saved_syn_len`] says how many bytes).
    pub fn take_saved_syn(&mut self, room: usize) -> Result<Option<Box<[u8]>>, SocketError> {
        crate::tcp::saved_syn::take_saved_syn(&mut self.stack.tcb_mut(self.h)?.saved_syn, room)
    }

    /// `TCP_TX_DELAY` (`tcp_enable_tx_delay`): microseconds added to the departure
    /// time of each packet the connection sends from now on (an EDT time: only a
    /// device queue that honours it, as fq, holds the packet); below 2^28, else
    /// `InvalidInput`. On an established connection srtt, the RTO, the min RTT
    /// filter and the pacing rate take the change at once, as Linux 6.18's.
    pub fn set_tx_delay(&mut self, now: Instant, us: i32) -> Result<(), SocketError> {
        let us = crate::tcp::sockopt::tx_delay_from_user(us).ok_or(SocketError::InvalidInput)?;
        let cfg = &self.stack.cfg;
        let index = self.stack.user_slot(self.h)?;
        let Some(super::Sock::Tcp(tcb)) = &mut self.stack.slots[index as usize].sock else {
            return Err(SocketError::BadHandle);
        };
        tcb.set_tx_delay(cfg, now, us);
        Ok(())
    }

    /// `TCP_MAXSEG` (setsockopt) on a connection: kept as `user_mss`.
    pub fn set_user_mss(&mut self, mss: u32) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.rx_opt.user_mss = mss;
        Ok(())
    }

    /// `TCP_NODELAY`: turn Nagle's algorithm off (`true`) or on.
    pub fn set_nodelay(&mut self, nodelay: bool) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.nodelay = nodelay;
        Ok(())
    }

    /// `SO_SNDBUF`: fixes the send buffer (Linux doubles the value and turns off send
    /// buffer autotuning for the socket), then `sk_write_space`: a connection left
    /// writable wakes its waiters.
    pub fn set_sndbuf(&mut self, now: Instant, bytes: u32) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_sndbuf_and_wake(ctx, bytes));
        Ok(())
    }

    /// `SO_RCVBUF`: fixes the receive buffer (doubled, autotuning off), before connect.
    pub fn set_rcvbuf(&mut self, bytes: u32) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.set_rcvbuf(bytes);
        Ok(())
    }

    /// `TCP_NOTSENT_LOWAT` (setsockopt): cap the unsent bytes this socket holds; 0
    /// returns it to the sysctl `net.ipv4.tcp_notsent_lowat`. Re-evaluates
    /// writability at once.
    pub fn set_notsent_lowat(&mut self, now: Instant, bytes: u32) -> Result<(), SocketError> {
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_notsent_lowat(ctx, bytes));
        Ok(())
    }

    /// Pattern mode (no Linux counterpart; the simulator's `--payload pattern`): the
    /// socket's send stream is `source`'s bytes, written with [`Stack::send_pattern`]
    /// (`send` then refuses with [`SocketError::InvalidInput`]); its write and
    /// retransmit queues count the bytes but store none. Each transmission hands
    /// the device a description of its payload ([`crate::TxPayload::Pattern`],
    /// always apart from the headers), and the device makes the bytes when it
    /// sends the packet ([`Stack::make_tx_payload`], [`crate::Transmit::flatten`]),
    /// so a packet waiting in a device queue holds its headers only. Only before
    /// anything was written ([`SocketError::InvalidInput`] after).
    pub fn set_payload_source(&mut self, source: crate::SharedSource) -> Result<(), SocketError> {
        let t = self.stack.tcb_mut(self.h)?;
        // write_seq: 0 before the SYN, 1 after it, more once data was queued.
        if t.write_seq > 1 {
            return Err(SocketError::InvalidInput);
        }
        t.payload_source = Some(source);
        Ok(())
    }

    /// `IP_TOS` (`__ip_sock_set_tos`): the TOS byte of the connection's IPv4
    /// packets, less the ECN bits, which TCP keeps; a change drops the cached route
    /// (`sk_dst_reset`).
    pub fn set_ip_tos(&mut self, tos: u8) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.set_tos(tos);
        Ok(())
    }

    /// `IPV6_TCLASS` (`do_ipv6_setsockopt`): the traffic class of the connection's
    /// IPv6 packets, less the ECN bits, which TCP keeps; a change drops the cached
    /// route. IPv4(-mapped) packets carry `IP_TOS` instead.
    pub fn set_tclass(&mut self, tclass: u8) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.set_tclass(tclass);
        Ok(())
    }

    /// `SO_TXREHASH` (`sk_txrehash`): whether timeouts and duplicate data pick a
    /// new transmit hash (and IPv6 flow label) from now on.
    pub fn set_txrehash(&mut self, on: bool) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.txrehash = on;
        Ok(())
    }

    /// `IPV6_AUTOFLOWLABEL`: whether the connection's IPv6 packets carry a flow
    /// label from its transmit hash (`net.ipv6.auto_flowlabels` 1 or 2 let the
    /// socket choose; 0 and 3 decide for it).
    pub fn set_autoflowlabel(&mut self, on: bool) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.autoflowlabel = Some(on);
        Ok(())
    }

    /// `IP_TTL` (`inet->uc_ttl`): the TTL of the connection's IPv4(-mapped)
    /// packets from the next one on; `None` (-1) is `net.ipv4.ip_default_ttl`.
    /// `Some(0)` is `InvalidInput` (Linux's `EINVAL`: 1 to 255 or -1).
    pub fn set_ttl(&mut self, ttl: Option<u8>) -> Result<(), SocketError> {
        if ttl == Some(0) {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.uc_ttl = ttl;
        Ok(())
    }

    /// `IPV6_UNICAST_HOPS` (`np->hop_limit`): the hop limit of the connection's
    /// IPv6 packets (0 to 255); `None` (-1) is `net.ipv6.conf.all.hop_limit`.
    pub fn set_hop_limit(&mut self, hops: Option<u8>) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.hop_limit = hops;
        Ok(())
    }

    /// `IP_MINTTL` and `IPV6_MINHOPCOUNT` (`inet->min_ttl`, `np->min_hopcount`):
    /// segments that arrive with a lower TTL (IPv4) or hop limit (IPv6) are dropped
    /// (`TcpExtTCPMinTTLDrop`); 0 checks nothing.
    pub fn set_min_ttl(&mut self, min_ttl: u8, min_hopcount: u8) -> Result<(), SocketError> {
        let t = self.stack.tcb_mut(self.h)?;
        (t.min_ttl, t.min_hopcount) = (min_ttl, min_hopcount);
        Ok(())
    }

    /// `IP_MTU_DISCOVER`: one of `IP_PMTUDISC_DONT` (0) ..= `IP_PMTUDISC_OMIT` (5),
    /// else `InvalidInput` (Linux's `EINVAL`). It decides DF on the connection's
    /// IPv4 packets (`ip_dont_fragment`) and whether an ICMP MTU report shrinks
    /// its MSS at once (`tcp_v4_mtu_reduced`).
    pub fn set_pmtudisc(&mut self, val: u8) -> Result<(), SocketError> {
        if val > crate::tcp::pmtu::IP_PMTUDISC_OMIT {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.pmtudisc = val;
        Ok(())
    }

    /// `IPV6_MTU_DISCOVER` (`np->pmtudisc`): one of `IPV6_PMTUDISC_DONT` (0) ..=
    /// `IPV6_PMTUDISC_OMIT` (5), else `InvalidInput` (Linux's `EINVAL`). Under
    /// `INTERFACE` or `OMIT` an ICMPv6 packet too big leaves the connection and the
    /// route alone (`tcp_v6_err`'s `ip6_sk_accept_pmtu`).
    pub fn set_pmtudisc6(&mut self, val: u8) -> Result<(), SocketError> {
        if val > crate::tcp::pmtu::IP_PMTUDISC_OMIT {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.pmtudisc6 = val;
        Ok(())
    }

    /// `SO_ZEROCOPY`: whether sends with [`crate::SendFlags::zerocopy`] report their
    /// completion on the error queue (`SOCK_ZEROCOPY`).
    pub fn set_zerocopy(&mut self, on: bool) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.errq.zerocopy = on;
        Ok(())
    }

    /// `recvmsg(MSG_ERRQUEUE)` (`sock_dequeue_err_skb`): the oldest error-queue entry
    /// (a `MSG_ZEROCOPY` completion: `origin` `SO_EE_ORIGIN_ZEROCOPY`, the ids
    /// `info..=data`; or an `SO_TIMESTAMPING` report), or `None` when it is empty.
    /// Reading an ICMP error clears `SO_ERROR`'s pending error unless another
    /// follows it, and an entry left behind raises [`EventKind::ErrQueue`] again.
    pub fn recv_errqueue(&mut self) -> Result<Option<crate::tcp::errqueue::ErrEntry>, SocketError> {
        let t = self.stack.tcb_mut(self.h)?;
        let socket = t.handle;
        let (e, report) = t.dequeue_err_skb();
        if report {
            let kind = EventKind::ErrQueue; // sk_error_report
            self.stack.events.push_back(SocketEvent { socket, kind });
        }
        Ok(e)
    }

    /// `SO_TIMESTAMPING` (`new`: `SO_TIMESTAMPING_NEW`) on a connection
    /// (`sock_set_timestamping`; `tcp/tstamp.rs`); `SOF_TIMESTAMPING_RX_SOFTWARE`
    /// turns net timestamps on or off (tcp/rx_tstamp.rs).
    pub fn set_timestamping(&mut self, flags: u32, new: bool) -> Result<(), SocketError> {
        self.netstamp_change(|t| t.set_timestamping(flags, new))
    }

    /// `SO_TIMESTAMP` (`ns`: `SO_TIMESTAMPNS`; `new`: their `_NEW` forms) on a
    /// connection (`sock_set_timestamp`): reads carry the arrival time of what
    /// they read (tcp/rx_tstamp.rs).
    pub fn set_rx_timestamp(&mut self, on: bool, new: bool, ns: bool) -> Result<(), SocketError> {
        self.netstamp_change(|t| {
            t.tstamp.rx.set(on, new, ns);
            Ok(())
        })
    }

    /// `f` on the connection, and the stack's count of connections that want net
    /// timestamps after it (`sock_enable_timestamp`, `sock_disable_timestamp`).
    fn netstamp_change(
        &mut self,
        f: impl FnOnce(&mut crate::tcp::Tcb) -> Result<(), SocketError>,
    ) -> Result<(), SocketError> {
        let t = self.stack.tcb_mut(self.h)?;
        let before = t.netstamp_wanted();
        let r = f(t);
        let after = t.netstamp_wanted();
        self.stack.netstamp = self.stack.netstamp + after as u32 - before as u32;
        r
    }

    /// `TCP_USER_TIMEOUT`: how long transmitted data may stay unacknowledged, or the
    /// peer's window stay closed to our probes, before the connection fails with
    /// `ETIMEDOUT` (`icsk_user_timeout`, used by `tcp_write_timeout` and
    /// `tcp_probe_timer`); zero restores the defaults (`tcp_retries2`).
    pub fn set_user_timeout(&mut self, timeout: core::time::Duration) -> Result<(), SocketError> {
        if timeout.as_millis() > i32::MAX as u128 {
            return Err(SocketError::InvalidInput);
        }
        self.stack.tcb_mut(self.h)?.icsk.user_timeout = timeout;
        Ok(())
    }

    /// `TCP_DEFER_ACCEPT` on a connection, as SYN-ACK timeouts (`secs_to_retrans`):
    /// `do_tcp_setsockopt` sets `rskq_defer_accept` on any socket, and one in
    /// SYN-SENT then saves the ACK of its SYN-ACK (`tcp_rcv_synsent_state_process`).
    pub fn set_defer_accept(&mut self, retrans: u8) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.req.defer_accept = retrans;
        Ok(())
    }

    /// `TCP_LINGER2` (`do_tcp_setsockopt`): negative aborts an orphan's FIN-WAIT-2,
    /// 0 restores `tcp_fin_timeout`, seconds are capped at `TCP_FIN_TIMEOUT_MAX`
    /// (120).
    pub fn set_linger2(&mut self, secs: i32) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.linger2 = crate::tcp::sockopt::linger2_from_user(secs);
        Ok(())
    }

    /// `SO_MAX_PACING_RATE` in bytes per second; like Linux, setting it makes TCP pace
    /// the socket itself (`SK_PACING_NEEDED`).
    pub fn set_max_pacing_rate(&mut self, bytes_per_sec: u64) -> Result<(), SocketError> {
        self.stack
            .tcb_mut(self.h)?
            .set_max_pacing_rate(bytes_per_sec);
        Ok(())
    }

    /// `SO_KEEPALIVE` with `TCP_KEEPIDLE`/`TCP_KEEPINTVL`/`TCP_KEEPCNT` on a
    /// connection, with Linux's effect on a running keepalive timer (see
    /// [`crate::tcp::keepalive`]). Out-of-range values are
    /// [`SocketError::InvalidInput`] (`EINVAL`).
    pub fn set_keepalive(&mut self, now: Instant, ka: Keepalive) -> Result<(), SocketError> {
        if !keepalive_in_range(&ka) {
            return Err(SocketError::InvalidInput);
        }
        let index = self.stack.user_slot(self.h)?;
        self.stack
            .with_tcb(now, index, |tcb, ctx| tcb.set_keepalive(ctx, ka));
        Ok(())
    }

    /// `TCP_CONGESTION` (setsockopt) at `now`: `ENOENT`-like
    /// [`SocketError::InvalidInput`] for an unknown name; `EPERM` when the
    /// connection's route locks its congestion control (`ip route ... congctl lock
    /// NAME`, `icsk_ca_dst_locked`). Past `connect` the new one is initialized at
    /// once (`tcp_reinit_congestion_control`): DCTCP on a connection without ECN
    /// falls back to Reno then.
    pub fn set_congestion(&mut self, now: Instant, name: &str) -> Result<(), SocketError> {
        let cc = crate::tcp::cong::by_name_cfg(name, &self.stack.cfg)
            .ok_or(SocketError::InvalidInput)?;
        let tcb = self.stack.tcb_mut(self.h)?;
        if tcb.ca_dst_locked {
            return Err(SocketError::PermissionDenied);
        }
        tcb.reinit_congestion_control(now, cc);
        Ok(())
    }

    /// `tcp_poll` saw no space: the next freed space wakes the socket.
    pub fn mark_nospace(&mut self) -> Result<(), SocketError> {
        self.stack.tcb_mut(self.h)?.mark_nospace();
        Ok(())
    }
}

impl SocketRef<'_> {
    /// `SO_OOBINLINE`.
    pub fn oobinline(&self) -> Result<bool, SocketError> {
        Ok(self.stack.tcb(self.h)?.urg.inline)
    }

    /// `SO_RCVLOWAT` (getsockopt): `sk_rcvlowat`.
    pub fn rcvlowat(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.rcvlowat)
    }

    /// `sk_omem_alloc` (`SO_MEMINFO`'s `SK_MEMINFO_OPTMEM`): the `MSG_ZEROCOPY`
    /// notification skbs not yet read (`sock_omalloc`) and the TCP-MD5 keys
    /// (`sock_kmalloc`, [`crate::tcp::md5::MD5_KEY_OMEM`] each), of a connection
    /// or a listener.
    pub fn optmem(&self) -> Result<u32, SocketError> {
        let index = self.stack.handle_slot(self.h)?;
        match &self.stack.slots[index as usize].sock {
            Some(Sock::Tcp(t)) => Ok(t.optmem()),
            Some(Sock::Listener(l)) => Ok(l.opts.md5.omem()),
            _ => Err(SocketError::BadHandle),
        }
    }

    /// `TCP_SYNCNT` (getsockopt): the socket's own value, else `tcp_syn_retries`.
    pub fn syn_retries(&self) -> Result<u8, SocketError> {
        Ok(match self.stack.tcb(self.h)?.icsk.syn_retries {
            0 => self.stack.config().tcp_syn_retries,
            n => n,
        })
    }

    /// `TCP_QUICKACK` (getsockopt): 1 unless in pingpong mode.
    pub fn quickack(&self) -> Result<bool, SocketError> {
        Ok(self.stack.tcb(self.h)?.quickack(&self.stack.cfg))
    }

    /// `TCP_TIMESTAMP` (getsockopt): the TSval the connection would send at `now`
    /// (`tcp_clock_ts` plus `tsoffset`), its low bit (the microsecond flag) clear.
    pub fn tcp_timestamp(&self, now: Instant) -> Result<u32, SocketError> {
        let t = self.stack.tcb(self.h)?;
        let v = crate::tcp::sockopt::tcp_timestamp_to_user(now.as_millis() as u32, t.ts_offset);
        Ok(v as u32)
    }

    /// The length of the saved SYN's headers (`tcp_saved_syn_len`), if any.
    pub fn saved_syn_len(&self) -> Result<Option<usize>, SocketError> {
        Ok(self.stack.tcb(self.h)?.saved_syn.as_ref().map(|s| s.len()))
    }

    /// `TCP_TX_DELAY` (getsockopt): microseconds.
    pub fn tx_delay(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.tx_delay)
    }

    /// `TCP_WINDOW_CLAMP` (getsockopt): `window_clamp`, 0 when none was chosen yet.
    pub fn window_clamp(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.window_clamp)
    }

    /// `TCP_MAXSEG` (getsockopt).
    pub fn maxseg(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.maxseg())
    }

    /// What the socket keeps of this connection once `tcp_disconnect` ended it at
    /// `now` (`SockOptions::disconnected`): `mss_cache` (`TCP_MAXSEG` reads it
    /// without a `user_mss`), `TCP_INFO`'s fields, the next connect's `rcv_wnd`.
    pub fn disconnected(
        &self,
        now: Instant,
    ) -> Result<crate::tcp::disconnect::Disconnected, SocketError> {
        Ok(self.stack.tcb(self.h)?.disconnected(now))
    }

    /// The `write_seq` `tcp_disconnect` leaves the socket of this connection for
    /// its next connect (`SockOptions::write_seq`).
    pub fn disconnect_write_seq(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.disconnect_write_seq())
    }

    /// `IP_MTU` (getsockopt): the MTU of the connection's route (`dst_mtu`).
    pub fn path_mtu(&self) -> Result<u32, SocketError> {
        let t = self.stack.tcb(self.h)?;
        Ok(match t.dst.mtu {
            0 => t.pmtu_cookie,
            m => m,
        })
    }

    /// `SO_TIMESTAMPING` (getsockopt): the connection's `sk_tsflags`.
    pub fn timestamping(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.timestamping())
    }

    /// The receive timestamp bits of the connection's `sk_flags` (`SO_TIMESTAMP`,
    /// `SO_TIMESTAMPNS`, their `_NEW` forms, `SO_TIMESTAMPING_NEW`).
    pub fn rx_timestamp(&self) -> Result<crate::tcp::rx_tstamp::RcvTstamp, SocketError> {
        Ok(self.stack.tcb(self.h)?.tstamp.rx)
    }

    /// The arrival time a read (or a peek from `offset`) of up to `len` bytes would report now
    /// (`tcp_recvmsg_locked`'s `tss`): `None` when none of the skbs it would take
    /// bytes from was stamped, `Some(None)` when the last stamped one lost its time
    /// to `tcp_collapse`.
    pub fn recv_tstamp(
        &self,
        offset: usize,
        len: usize,
    ) -> Result<Option<Option<Instant>>, SocketError> {
        Ok(self.stack.tcb(self.h)?.recv_tstamp(offset, len))
    }

    /// `TCP_LINGER2` (getsockopt): -1, or the FIN-WAIT-2 time in seconds (the
    /// sysctl's when unset).
    pub fn linger2(&self) -> Result<i32, SocketError> {
        let v = self.stack.tcb(self.h)?.linger2;
        Ok(crate::tcp::sockopt::linger2_to_user(
            v,
            self.stack.config().tcp_fin_timeout,
        ))
    }

    /// `TCP_RTO_MAX_MS` (getsockopt): `tcp_rto_max`.
    pub fn rto_max(&self) -> Result<core::time::Duration, SocketError> {
        Ok(self.stack.tcb(self.h)?.icsk.rto_max)
    }

    /// `TCP_RTO_MIN_US` (getsockopt): the socket's own `icsk_rto_min`.
    pub fn rto_min(&self) -> Result<core::time::Duration, SocketError> {
        Ok(self.stack.tcb(self.h)?.icsk.rto_min)
    }

    /// `TCP_USER_TIMEOUT` (getsockopt); zero when unset.
    pub fn user_timeout(&self) -> Result<core::time::Duration, SocketError> {
        Ok(self.stack.tcb(self.h)?.icsk.user_timeout)
    }

    /// `TCP_NOTSENT_LOWAT` (getsockopt): the socket's own value, 0 when unset.
    pub fn notsent_lowat(&self) -> Result<u32, SocketError> {
        Ok(self.stack.tcb(self.h)?.notsent_lowat)
    }

    /// The connection's keepalive settings as set (`None`: the sysctl applies).
    pub fn keepalive(&self) -> Result<Keepalive, SocketError> {
        Ok(self.stack.tcb(self.h)?.keepalive)
    }

    /// The connection's `IP_TOS` (`inet->tos`) and `IPV6_TCLASS` (`np->tclass`), ECN
    /// bits aside: a listener's child has its listener's, or with
    /// `net.ipv4.tcp_reflect_tos` its SYN's (`tcp_v4_syn_recv_sock`).
    pub fn dsfields(&self) -> Result<(u8, u8), SocketError> {
        let t = self.stack.tcb(self.h)?;
        Ok((t.tos, t.tclass))
    }

    /// The ECN bits of the connection's `inet->tos` / `np->tclass`, which TCP sets
    /// itself as it sends (`tcp_ecn_send`: ECT(0) after new data of an ECN
    /// connection, every segment of an AccECN one, Not-ECT after an ACK or a
    /// retransmission of a classic one); `getsockopt(IP_TOS)` and `IPV6_TCLASS`
    /// read them with the rest.
    pub fn tos_ecn(&self) -> Result<u8, SocketError> {
        Ok(self.stack.tcb(self.h)?.tos_ecn)
    }

    /// `TCP_CONGESTION` (getsockopt).
    pub fn congestion(&self) -> Result<&'static str, SocketError> {
        Ok(self.stack.tcb(self.h)?.cc.name())
    }

    /// `TCP_CC_INFO` (getsockopt): the congestion control's `tcp_cc_info`
    /// (`get_info`), if it exports one (DCTCP's `tcp_dctcp_info`).
    pub fn cc_info(&self) -> Result<Option<crate::tcp::cong::CcInfo>, SocketError> {
        let t = self.stack.tcb(self.h)?;
        Ok(t.cc.get_info(&t.ca_ctx(Instant::ZERO)))
    }

    /// What `tcp_poll` and the ioctls read.
    pub fn status(&self) -> Result<SockStatus, SocketError> {
        let pressure = self.stack.tcp_mem.under_pressure();
        Ok(self.stack.tcb(self.h)?.status(&self.stack.cfg, pressure))
    }

    /// A listener's backlog (`sk_max_ack_backlog`).
    pub fn accept_backlog(&self) -> Result<u32, SocketError> {
        match self.stack.slot_sock(self.h)? {
            Sock::Listener(l) => Ok(l.backlog),
            _ => Err(SocketError::InvalidInput),
        }
    }

    /// Connections waiting in a listener's accept queue.
    pub fn accept_queue_len(&self) -> Result<usize, SocketError> {
        match self.stack.slot_sock(self.h)? {
            Sock::Listener(l) => Ok(l.accept_queue.len()),
            _ => Err(SocketError::InvalidInput),
        }
    }
}

/// `tcp_sock_set_keepidle_locked`, `tcp_sock_set_keepintvl`, `tcp_sock_set_keepcnt`:
/// 1..=32767 seconds, 1..=127 probes.
fn keepalive_in_range(ka: &Keepalive) -> bool {
    let secs = |d: Option<core::time::Duration>, max: u32| {
        d.is_none_or(|d| d.subsec_nanos() == 0 && (1..=max as u64).contains(&d.as_secs()))
    };
    secs(ka.idle, MAX_TCP_KEEPIDLE)
        && secs(ka.interval, MAX_TCP_KEEPINTVL)
        && ka.probes.is_none_or(|n| (1..=MAX_TCP_KEEPCNT).contains(&n))
}

//! `UdpSocket`: tokio's shape over the stack's UDP sockets (`Stack::udp_*`).

use crate::driver::{self, Shared};
use crate::Net;
use lowtide::posix::Errno;
use lowtide::{Datagram, SocketError, Stack, UdpHandle};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::task::Poll;

/// The `io::Error` of a socket error: the errno's, as a kernel socket gives it.
fn io_err(e: SocketError) -> io::Error {
    Errno::from(e).into()
}

/// A UDP socket on a lowtide stack, like `tokio::net::UdpSocket`: datagrams go out
/// at once (UDP has no send queue), reads wait for one. Closed on drop.
///
/// For a transparent proxy, [`UdpSocket::bind_catch_all`] receives datagrams to
/// any address with their original destination ([`UdpSocket::recv_datagram`])
/// and answers from it ([`UdpSocket::send_from`]).
pub struct UdpSocket {
    shared: Shared,
    h: UdpHandle,
}

impl UdpSocket {
    /// `bind(2)`: a socket on `addr` (an address of the stack or unspecified; port
    /// 0 picks a free one). `addr` is anything [`std::net::ToSocketAddrs`] takes;
    /// of several addresses, the first that binds.
    pub fn bind(net: &Net, addr: impl std::net::ToSocketAddrs) -> io::Result<UdpSocket> {
        crate::tcp::each_addr(addr.to_socket_addrs()?, |a| {
            UdpSocket::open(net, |st| st.udp_bind(a))
        })
    }

    /// A catch-all socket: every datagram, to any address and port, that no other
    /// socket of the stack takes (as tun2socks needs; Linux: `IP_TRANSPARENT` and a
    /// `TPROXY` rule). One per stack (`AddrInUse` otherwise).
    pub fn bind_catch_all(net: &Net) -> io::Result<UdpSocket> {
        UdpSocket::open(net, Stack::udp_bind_catch_all)
    }

    fn open(
        net: &Net,
        f: impl FnOnce(&mut Stack) -> Result<UdpHandle, SocketError>,
    ) -> io::Result<UdpSocket> {
        let mut g = driver::lock(net.first());
        g.alive()?;
        let h = f(g.host.stack_mut()).map_err(io_err)?;
        Ok(UdpSocket {
            shared: net.first().clone(),
            h,
        })
    }

    /// Runs `f` on the stack with its clock, then wakes the driver (to send).
    fn call<R>(
        &self,
        f: impl FnOnce(&mut Stack, lowtide::Instant, UdpHandle) -> Result<R, SocketError>,
    ) -> io::Result<R> {
        let mut g = driver::lock(&self.shared);
        g.alive()?;
        let now = g.now();
        let r = f(g.host.stack_mut(), now, self.h);
        g.kick();
        r.map_err(io_err)
    }

    /// `connect(2)`: `addr` becomes the destination of [`UdpSocket::send`] and the
    /// only sender [`UdpSocket::recv`] hears. `addr` is anything
    /// `tokio::net::ToSocketAddrs` takes; the first address is used.
    pub async fn connect(&self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<()> {
        let a = first_addr(addr).await?;
        self.call(|st, _, h| st.udp_connect(h, a))
    }

    /// `sendto(2)`: one datagram to `target`; its length is returned.
    /// Fragmented over the path MTU as Linux's default `IP_PMTUDISC_WANT` does;
    /// `EMSGSIZE` past IP's 64 KB.
    pub async fn send_to(
        &self,
        buf: &[u8],
        target: impl tokio::net::ToSocketAddrs,
    ) -> io::Result<usize> {
        let dst = first_addr(target).await?;
        self.call(|st, now, h| st.udp_send_to(now, h, buf, dst))
    }

    /// `send(2)` to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.call(|st, now, h| st.udp_send(now, h, buf))
    }

    /// From a catch-all socket: one datagram from any `src` (the original
    /// destination of the datagram being answered) to `dst`.
    pub async fn send_from(
        &self,
        buf: &[u8],
        src: SocketAddr,
        dst: SocketAddr,
    ) -> io::Result<usize> {
        self.call(|st, now, h| st.udp_send_from(now, h, buf, src, dst))
    }

    /// Waits for the next datagram: its payload, sender and destination.
    pub async fn recv_datagram(&self) -> io::Result<Datagram> {
        poll_fn(|cx| {
            let mut g = driver::lock(&self.shared);
            if let Err(e) = g.alive() {
                return Poll::Ready(Err(e));
            }
            match g.host.stack_mut().udp_recv_from(self.h) {
                Err(SocketError::WouldBlock) => {
                    g.wait_udp(self.h, cx);
                    Poll::Pending
                }
                r => Poll::Ready(r.map_err(io_err)),
            }
        })
        .await
    }

    /// `recvfrom(2)`: the next datagram into `buf` (cut to its length, the rest
    /// lost, as without `MSG_TRUNC`) and its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let d = self.recv_datagram().await?;
        let n = d.data.len().min(buf.len());
        buf[..n].copy_from_slice(&d.data[..n]);
        Ok((n, d.src))
    }

    /// `recv(2)`: [`UdpSocket::recv_from`] without the sender.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.recv_from(buf).await?.0)
    }

    /// `setsockopt(UDP_SEGMENT)`: a send of more than `size` bytes leaves as
    /// datagrams of `size` bytes (the last shorter) in one GSO super-packet, which a
    /// TUN device with UDP segmentation offload takes whole
    /// ([`TunPacketDevice`](crate::TunPacketDevice)). One send may carry up to 128
    /// datagrams and 64 KB; one datagram must fit the path MTU (`EMSGSIZE`), more
    /// than 128 is `EINVAL`. 0 turns it off.
    pub fn set_segment_size(&self, size: u16) -> io::Result<()> {
        self.call(|st, _, h| st.udp_set_segment(h, size))
    }

    /// `getsockopt(UDP_SEGMENT)`: the segment size (0: off).
    pub fn segment_size(&self) -> io::Result<u16> {
        self.call(|st, _, h| st.udp_segment(h))
    }

    /// The bound address (`getsockname(2)`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.call(|st, _, h| st.udp_local_addr(h))
    }

    /// The connected peer (`getpeername(2)`): `NotConnected` if none.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.call(|st, _, h| st.udp_peer_addr(h))
    }
}

/// The first address `addr` resolves to.
async fn first_addr(addr: impl tokio::net::ToSocketAddrs) -> io::Result<SocketAddr> {
    tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(crate::tcp::no_address)
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let mut g = driver::lock(&self.shared);
        let _ = g.host.stack_mut().udp_close(self.h);
        g.forget_udp(self.h);
    }
}

impl std::fmt::Debug for UdpSocket {
    /// The handle and, unless the stack is locked, the addresses.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("UdpSocket");
        d.field("handle", &self.h);
        if let Ok(g) = self.shared.try_lock() {
            let st = g.host.stack();
            if let Ok(l) = st.udp_local_addr(self.h) {
                d.field("local", &l);
            }
            if let Ok(p) = st.udp_peer_addr(self.h) {
                d.field("peer", &p);
            }
        }
        d.finish()
    }
}

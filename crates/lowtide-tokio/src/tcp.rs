//! `TcpListener` and `TcpStream`: tokio's shapes over the socket layer's calls
//! (`socket`, `bind`, `listen`, `accept`, `connect`, `recv`, `send`, `shutdown`,
//! `setsockopt`), each retried when the driver reports the socket ready.

use crate::driver::{self, Shared};
use crate::Net;
use lowtide::posix::consts::*;
use lowtide::posix::{errno, Errno, Fd};
use lowtide::TcpInfo;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Listen backlog of [`TcpListener::bind`] (Linux's `SOMAXCONN` since 5.4).
const BACKLOG: i32 = 4096;

/// A socket of the socket layer; closed (`close(2)`) on drop.
struct Socket {
    shared: Shared,
    fd: Fd,
}

impl Socket {
    /// `socket(2)` for `addr`'s family on one shard, registered with its driver.
    fn open(shared: &Shared, addr: &SocketAddr) -> io::Result<Socket> {
        let mut g = driver::lock(shared);
        g.alive()?;
        let domain = if addr.is_ipv4() { AF_INET } else { AF_INET6 };
        let fd = g.host.socket(domain, SOCK_STREAM | SOCK_NONBLOCK, 0)?;
        let s = Socket {
            shared: shared.clone(),
            fd,
        };
        g.watch(fd)?;
        Ok(s)
    }

    /// Runs one socket call under the lock with the stack's clock, then wakes the
    /// driver.
    fn call<R>(
        &self,
        f: impl FnOnce(&mut lowtide::posix::Host, lowtide::Instant, Fd) -> Result<R, Errno>,
    ) -> io::Result<R> {
        Ok(self.call_errno(f)??)
    }

    /// [`Socket::call`] keeping the errno (the outer error: the driver stopped).
    fn call_errno<R>(
        &self,
        f: impl FnOnce(&mut lowtide::posix::Host, lowtide::Instant, Fd) -> Result<R, Errno>,
    ) -> io::Result<Result<R, Errno>> {
        let mut g = driver::lock(&self.shared);
        g.alive()?;
        let now = g.now();
        let r = f(&mut g.host, now, self.fd);
        g.kick();
        Ok(r)
    }

    /// A socket call that may block: `EAGAIN` (or `EALREADY` for connect) parks
    /// the task until the driver reports the socket ready for reading or writing.
    fn poll_call<R>(
        &self,
        cx: &mut Context<'_>,
        write: bool,
        f: impl FnOnce(&mut lowtide::posix::Host, lowtide::Instant, Fd) -> Result<R, Errno>,
    ) -> Poll<io::Result<R>> {
        let mut g = driver::lock(&self.shared);
        if let Err(e) = g.alive() {
            return Poll::Ready(Err(e));
        }
        let now = g.now();
        let r = f(&mut g.host, now, self.fd);
        g.kick();
        match r {
            Err(Errno(errno::EAGAIN | errno::EALREADY)) => {
                g.wait(self.fd, write, cx);
                Poll::Pending
            }
            r => Poll::Ready(r.map_err(io::Error::from)),
        }
    }

    fn int_opt(&self, level: i32, name: i32, v: i32) -> io::Result<()> {
        self.call(|h, now, fd| h.setsockopt(now, fd, level, name, &v.to_ne_bytes()))
    }

    fn get_int_opt(&self, level: i32, name: i32) -> io::Result<i32> {
        let mut b = [0u8; 4];
        self.call(|h, now, fd| h.getsockopt(now, fd, level, name, &mut b))?;
        Ok(i32::from_ne_bytes(b))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.call(|h, _, fd| h.local_addr(fd))?
            .ok_or_else(|| Errno(errno::EINVAL).into())
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        driver::lock(&self.shared).close(self.fd);
    }
}

impl std::fmt::Debug for Socket {
    /// The descriptor and, while the stack has them, the addresses (not if the
    /// stack is locked, e.g. inside [`Net::with_host`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs = match self.shared.try_lock() {
            Ok(g) => (g.host.local_addr(self.fd).ok().flatten())
                .map(|l| (l, g.host.peer_addr(self.fd).ok().flatten())),
            Err(_) => None,
        };
        let mut d = f.debug_struct("Socket");
        d.field("fd", &self.fd);
        if let Some((local, peer)) = addrs {
            d.field("local", &local);
            if let Some(p) = peer {
                d.field("peer", &p);
            }
        }
        d.finish()
    }
}

/// The error when a name resolves to no address (std's text).
pub(crate) fn no_address() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "could not resolve to any addresses",
    )
}

/// Runs `f` on each address until one succeeds; the last error otherwise (as
/// std's `each_addr`).
pub(crate) fn each_addr<T>(
    addrs: impl Iterator<Item = SocketAddr>,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in addrs {
        match f(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(no_address))
}

/// A TCP listener on a lowtide stack, like `tokio::net::TcpListener`. On a sharded
/// [`Net`] it listens on every shard and accepts from all of them.
#[derive(Debug)]
pub struct TcpListener {
    /// One listening socket per shard.
    socks: Vec<Socket>,
    /// The shard whose queue [`TcpListener::accept`] looks at first (turns, so that
    /// no shard's connections wait behind another's).
    next: std::sync::atomic::AtomicUsize,
}

impl TcpListener {
    /// `socket` + `bind` + `listen`: listens on `addr` (an address of the stack, or
    /// unspecified for all; port 0 picks one, see [`TcpListener::local_addr`]).
    /// `addr` is anything [`std::net::ToSocketAddrs`] takes (`"10.9.0.2:7"`, a
    /// `SocketAddr`, `(ip, port)`); of several addresses, the first that binds.
    pub fn bind(net: &Net, addr: impl std::net::ToSocketAddrs) -> io::Result<TcpListener> {
        each_addr(addr.to_socket_addrs()?, |a| TcpListener::bind_one(net, a))
    }

    fn bind_one(net: &Net, mut addr: SocketAddr) -> io::Result<TcpListener> {
        let mut socks = Vec::with_capacity(net.all().len());
        for shared in net.all() {
            let sock = Socket::open(shared, &addr)?;
            sock.int_opt(SOL_SOCKET, SO_REUSEADDR, 1)?;
            sock.call(|h, _, fd| h.bind(fd, addr))?;
            sock.call(|h, _, fd| h.listen(fd, BACKLOG))?;
            // Port 0: the first shard picks it, the others listen on the same.
            addr.set_port(sock.local_addr()?.port());
            socks.push(sock);
        }
        Ok(TcpListener::on(socks))
    }

    fn on(socks: Vec<Socket>) -> TcpListener {
        TcpListener {
            socks,
            next: Default::default(),
        }
    }

    /// A catch-all listener for a transparent proxy: it accepts connections to *any*
    /// address and port that reach the device (as tun2socks and tun2proxy do); each
    /// stream's [`TcpStream::original_dst`] is the destination its peer asked for.
    /// Linux does this with an `IP_TRANSPARENT` socket and a `TPROXY` rule. One per
    /// stack (`AddrInUse` otherwise).
    pub fn bind_catch_all(net: &Net) -> io::Result<TcpListener> {
        let any = SocketAddr::from(([0, 0, 0, 0], 0));
        let socks = (net.all().iter())
            .map(|shared| {
                let sock = Socket::open(shared, &any)?;
                sock.call(|h, _, fd| h.listen_catch_all(fd, BACKLOG))?;
                Ok(sock)
            })
            .collect::<io::Result<Vec<Socket>>>()?;
        Ok(TcpListener::on(socks))
    }

    /// Waits for a connection (`accept(2)`): the stream and the peer's address.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (k, fd, peer) = poll_fn(|cx| self.poll_accept(cx)).await?;
        let shared = &self.socks[k].shared;
        let mut g = driver::lock(shared);
        let s = Socket {
            shared: shared.clone(),
            fd,
        };
        g.watch(fd)?;
        drop(g);
        Ok((TcpStream::from_socket(s), peer))
    }

    /// `accept(2)` on each shard's socket in turn, from the one after the shard
    /// that gave the last connection; parks the task on all of them.
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(usize, Fd, SocketAddr)>> {
        let n = self.socks.len();
        let first = self.next.load(std::sync::atomic::Ordering::Relaxed);
        for i in 0..n {
            let k = (first + i) % n;
            let sock = &self.socks[k];
            if let Poll::Ready(r) = sock.poll_call(cx, false, |h, _, fd| h.accept(fd)) {
                self.next.store(k + 1, std::sync::atomic::Ordering::Relaxed);
                return Poll::Ready(r.map(|(fd, peer)| (k, fd, peer)));
            }
        }
        Poll::Pending
    }

    /// The address it listens on (`getsockname(2)`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socks[0].local_addr()
    }
}

/// A TCP connection on a lowtide stack, like `tokio::net::TcpStream`: implements
/// [`AsyncRead`](tokio::io::AsyncRead) and [`AsyncWrite`](tokio::io::AsyncWrite)
/// (`poll_shutdown` sends FIN); split it with
/// `tokio::io::split` or [`TcpStream::into_split`]. Dropping it closes the
/// connection (`close(2)`: FIN after the queued data, RST if unread data remains).
#[derive(Debug)]
pub struct TcpStream {
    sock: Arc<Socket>,
}

impl TcpStream {
    fn from_socket(sock: Socket) -> TcpStream {
        TcpStream {
            sock: Arc::new(sock),
        }
    }

    /// Opens a connection to `addr` (`connect(2)`) from the stack's address for it,
    /// and waits for the handshake. `addr` is anything `tokio::net::ToSocketAddrs`
    /// takes, as for `tokio::net::TcpStream::connect` (a name is resolved by the
    /// host's resolver, not through lowtide); each address is tried in turn, and
    /// the last error returned. Errors: `ConnectionRefused` (RST), `TimedOut` (SYN
    /// retries exhausted, `net.ipv4.tcp_syn_retries`), ...
    pub async fn connect(net: &Net, addr: impl tokio::net::ToSocketAddrs) -> io::Result<TcpStream> {
        let mut last = None;
        for a in tokio::net::lookup_host(addr).await? {
            match TcpStream::connect_one(net, a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(no_address))
    }

    async fn connect_one(net: &Net, addr: SocketAddr) -> io::Result<TcpStream> {
        let sock = Socket::open(net.pick(), &addr)?;
        match sock.call_errno(|h, now, fd| h.connect(now, fd, addr))? {
            Err(Errno(errno::EINPROGRESS)) => {}
            Err(e) => return Err(e.into()),
            Ok(()) => return Ok(TcpStream::from_socket(sock)),
        }
        poll_fn(|cx| sock.poll_call(cx, true, |h, now, fd| h.connect(now, fd, addr))).await?;
        Ok(TcpStream::from_socket(sock))
    }

    /// The peer's address (`getpeername(2)`).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock
            .call(|h, _, fd| h.peer_addr(fd))?
            .ok_or_else(|| Errno(errno::ENOTCONN).into())
    }

    /// The local address (`getsockname(2)`).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// The destination the peer connected to: for a stream from
    /// [`TcpListener::bind_catch_all`], the original destination of a transparent
    /// proxy (Linux: `getsockname(2)` on a `TPROXY` connection); otherwise the
    /// listener's address. Same as [`TcpStream::local_addr`].
    pub fn original_dst(&self) -> io::Result<SocketAddr> {
        self.local_addr()
    }

    /// `TCP_NODELAY`: `true` turns Nagle's algorithm off.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.sock.int_opt(SOL_TCP, TCP_NODELAY, nodelay as i32)
    }

    /// `TCP_NODELAY` (getsockopt).
    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(self.sock.get_int_opt(SOL_TCP, TCP_NODELAY)? != 0)
    }

    /// `TCP_NOTSENT_LOWAT`: the socket holds at most about `bytes` unsent; a writer
    /// that filled it wakes when fewer than `bytes / 2` remain unsent. 0 returns
    /// it to `net.ipv4.tcp_notsent_lowat`.
    pub fn set_notsent_lowat(&self, bytes: u32) -> io::Result<()> {
        let v = i32::try_from(bytes).map_err(|_| io::Error::from(Errno(errno::EINVAL)))?;
        self.sock.int_opt(SOL_TCP, TCP_NOTSENT_LOWAT, v)
    }

    /// `TCP_NOTSENT_LOWAT` (getsockopt): the socket's own value, 0 if unset.
    pub fn notsent_lowat(&self) -> io::Result<u32> {
        Ok(self.sock.get_int_opt(SOL_TCP, TCP_NOTSENT_LOWAT)? as u32)
    }

    /// `SO_KEEPALIVE` with `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and `TCP_KEEPCNT` (as
    /// socket2's `set_tcp_keepalive`): probes after `idle` of silence, one per
    /// `interval`, and `ETIMEDOUT` after `probes` unanswered ones; a `None` field
    /// keeps the socket's current value (initially the `net.ipv4.tcp_keepalive_*`
    /// sysctl). `enabled: false` stops the probes.
    pub fn set_keepalive(&self, ka: lowtide::tcp::keepalive::Keepalive) -> io::Result<()> {
        let secs = |d: std::time::Duration| i32::try_from(d.as_secs()).unwrap_or(i32::MAX);
        if let Some(d) = ka.idle {
            self.sock.int_opt(SOL_TCP, TCP_KEEPIDLE, secs(d))?;
        }
        if let Some(d) = ka.interval {
            self.sock.int_opt(SOL_TCP, TCP_KEEPINTVL, secs(d))?;
        }
        if let Some(n) = ka.probes {
            self.sock.int_opt(SOL_TCP, TCP_KEEPCNT, n as i32)?;
        }
        self.sock
            .int_opt(SOL_SOCKET, SO_KEEPALIVE, ka.enabled as i32)
    }

    /// `getsockopt(TCP_INFO)`: RTT, cwnd, retransmissions, delivery rate, ...
    pub fn tcp_info(&self) -> io::Result<TcpInfo> {
        self.sock.call(|h, now, fd| h.tcp_info(now, fd))
    }

    /// Splits into a read half and a write half that can move to different tasks
    /// (dropping the write half sends FIN; the connection closes when both are gone).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (
            OwnedReadHalf {
                sock: self.sock.clone(),
            },
            OwnedWriteHalf {
                sock: self.sock,
                shut: false,
            },
        )
    }
}

fn poll_read(sock: &Socket, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
    let out = buf.initialize_unfilled();
    let r = sock.poll_call(cx, false, |h, now, fd| h.recv(now, fd, out, 0));
    r.map_ok(|n| buf.advance(n))
}

fn poll_write(sock: &Socket, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
    sock.poll_call(cx, true, |h, now, fd| h.send(now, fd, data, MSG_NOSIGNAL))
}

fn shutdown_write(sock: &Socket) -> io::Result<()> {
    match sock.call(|h, now, fd| h.shutdown(now, fd, SHUT_WR)) {
        // Already closed by the peer's reset: nothing left to shut.
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r,
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        poll_read(&self.sock, cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        poll_write(&self.sock, cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(shutdown_write(&self.sock))
    }
}

/// The read half of [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    sock: Arc<Socket>,
}

/// The write half of [`TcpStream::into_split`]; dropping it sends FIN
/// (`shutdown(SHUT_WR)`), as tokio's does.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    sock: Arc<Socket>,
    shut: bool,
}

impl AsyncRead for OwnedReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        poll_read(&self.sock, cx, buf)
    }
}

impl AsyncWrite for OwnedWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        poll_write(&self.sock, cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shut = true;
        Poll::Ready(shutdown_write(&self.sock))
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if !self.shut {
            let _ = shutdown_write(&self.sock);
        }
    }
}

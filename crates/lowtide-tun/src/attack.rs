//! A hostile peer on the real path (issue 27): hand-written TCP segments sent from a
//! raw IPv4 socket (`IPPROTO_RAW`, so any source address) and the victim's answers
//! read from an `AF_PACKET` socket bound to the device they cross. The peer's
//! address is one no host owns (the kernel drops the victim's answers after the
//! packet socket saw them, and no kernel TCP resets the handshake), so it must be
//! on the device's subnet but not the kernel's own.
//!
//! Made for network namespaces: open the peer on a thread inside the victim's
//! namespace (`netns::NetNs::spawn`). Needs `CAP_NET_RAW`.

use lowtide_wire::build::{syn_options, tcp_packet, Csum};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// `ETH_P_IP`, in network order for `AF_PACKET`.
const ETH_P_IP_BE: u16 = (libc::ETH_P_IP as u16).to_be();

/// One connection of the peer, after its handshake.
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    /// The peer's ISN.
    pub isn: u32,
    /// The victim's ISN.
    pub irs: u32,
    /// The victim's window scale.
    pub wscale: u8,
    /// The victim's last TSval (echoed).
    pub ts_recent: u32,
}

/// A raw-socket TCP peer from `src` to `dst`.
pub struct RawPeer {
    tx: OwnedFd,
    rx: OwnedFd,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    start: Instant,
    /// Segments sent.
    pub sent: u64,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    match r {
        -1 => Err(io::Error::last_os_error()),
        r => Ok(r),
    }
}

impl RawPeer {
    /// Opens the sockets: the raw sender, and the packet socket on `iface` (in this
    /// thread's namespace).
    pub fn open(iface: &str, src: SocketAddrV4, dst: SocketAddrV4) -> io::Result<RawPeer> {
        // SAFETY: socket(2) with constant arguments; each result is checked and owned.
        let tx = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) })?;
        let tx = unsafe { OwnedFd::from_raw_fd(tx) };
        let rx = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM,
                ETH_P_IP_BE as libc::c_int,
            )
        })?;
        let rx = unsafe { OwnedFd::from_raw_fd(rx) };
        let name = std::ffi::CString::new(iface).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a zeroed sockaddr_ll filled with the family, protocol and index.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_IP_BE;
        sll.sll_ifindex = ifindex as i32;
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: bind(2) with a valid sockaddr_ll of its size.
        check(unsafe {
            libc::bind(
                rx.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                len,
            )
        })?;
        // A large receive buffer: the victim answers every segment.
        let size: libc::c_int = 8 << 20;
        // SAFETY: setsockopt(2) with an int.
        unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const _ as *const libc::c_void,
                4,
            )
        };
        Ok(RawPeer {
            tx,
            rx,
            src,
            dst,
            start: Instant::now(),
            sent: 0,
        })
    }

    /// Sends an IPv4 packet (raw sockets take the whole packet, `IP_HDRINCL`).
    pub fn send(&mut self, pkt: &[u8]) -> io::Result<()> {
        // SAFETY: a zeroed sockaddr_in with the destination.
        let mut to: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        to.sin_family = libc::AF_INET as u16;
        to.sin_addr.s_addr = u32::from(*self.dst.ip()).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        loop {
            // SAFETY: sendto(2) of a buffer of its length to a valid address.
            let r = unsafe {
                libc::sendto(
                    self.tx.as_raw_fd(),
                    pkt.as_ptr() as *const libc::c_void,
                    pkt.len(),
                    0,
                    &to as *const _ as *const libc::sockaddr,
                    len,
                )
            };
            match r {
                -1 if io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) => {
                    std::thread::sleep(Duration::from_micros(50));
                }
                -1 => return Err(io::Error::last_os_error()),
                _ => {
                    self.sent += 1;
                    return Ok(());
                }
            }
        }
    }

    /// The next segment the victim sent to the peer, waiting at most `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> io::Result<Option<TcpRepr>> {
        let end = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.rx.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll(2) on one valid pollfd.
            let n = check(unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) })?;
            if n == 0 {
                continue;
            }
            // SAFETY: recv(2) into a buffer of its length.
            let len = check(unsafe {
                libc::recv(
                    self.rx.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                )
            } as libc::c_int)? as usize;
            if let Some(th) = self.parse(&buf[..len]) {
                return Ok(Some(th));
            }
        }
    }

    /// A TCP segment from the victim to the peer in `pkt`, if it is one.
    fn parse(&self, pkt: &[u8]) -> Option<TcpRepr> {
        let ip = IpRepr::parse(pkt, false).ok()?;
        let to_us = ip.dst == std::net::IpAddr::V4(*self.src.ip());
        let from_victim = ip.src == std::net::IpAddr::V4(*self.dst.ip());
        let (th, _) = TcpRepr::parse(pkt.get(ip.header_len..)?).ok()?;
        (to_us && from_victim && th.dst_port == self.src.port()).then_some(th)
    }

    /// TSval: milliseconds since the peer opened.
    fn ts(&self) -> u32 {
        self.start.elapsed().as_millis() as u32
    }

    /// A segment of `c` at `off` bytes above the first data byte.
    pub fn segment(&self, c: &Conn, flags: TcpFlags, off: u32, payload: &[u8]) -> Vec<u8> {
        let th = TcpRepr {
            seq: c.isn.wrapping_add(1).wrapping_add(off),
            ack: c.irs.wrapping_add(1),
            flags,
            window: 65535,
            options: TcpOptions {
                timestamp: Some((self.ts(), c.ts_recent)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let (src, dst) = (SocketAddr::V4(self.src), SocketAddr::V4(self.dst));
        tcp_packet(src, dst, &th, payload, 1, Csum::Full)
    }

    /// A SYN (MSS 1460, window scale 7, SACK, timestamps) from the peer's address
    /// and `port`, with `isn`.
    pub fn syn(&self, port: u16, isn: u32) -> Vec<u8> {
        let th = TcpRepr {
            seq: isn,
            flags: TcpFlags::SYN,
            window: 65535,
            options: syn_options(self.ts()),
            ..TcpRepr::default()
        };
        let src = SocketAddr::new((*self.src.ip()).into(), port);
        tcp_packet(src, SocketAddr::V4(self.dst), &th, &[], 1, Csum::Full)
    }

    /// The three-way handshake from the peer's own port, its SYN sent again each
    /// second until `timeout`.
    pub fn handshake(&mut self, isn: u32, timeout: Duration) -> io::Result<Conn> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            let syn = self.syn(self.src.port(), isn);
            self.send(&syn)?;
            let wait = Instant::now() + Duration::from_secs(1);
            while let Some(th) = self.recv(wait.saturating_duration_since(Instant::now()))? {
                if th.flags.contains(TcpFlags::SYN | TcpFlags::ACK) && th.ack == isn.wrapping_add(1)
                {
                    let c = Conn {
                        isn,
                        irs: th.seq,
                        wscale: th.options.wscale.unwrap_or(0).min(14),
                        ts_recent: th.options.timestamp.map_or(0, |t| t.0),
                    };
                    let ack = self.segment(&c, TcpFlags::ACK, 0, &[]);
                    self.send(&ack)?;
                    return Ok(c);
                }
            }
        }
        Err(io::Error::new(io::ErrorKind::TimedOut, "no SYN-ACK"))
    }

    /// The victim's window over `c` (bytes): a 1-byte probe out of order, and the
    /// window of the duplicate ACK it draws.
    pub fn window(&mut self, c: &mut Conn, timeout: Duration) -> io::Result<u32> {
        let probe = self.segment(c, TcpFlags::ACK, 1, &[0]);
        self.send(&probe)?;
        while let Some(th) = self.recv(timeout)? {
            if !th.flags.contains(TcpFlags::SYN) && th.ack == c.isn.wrapping_add(1) {
                if let Some(t) = th.options.timestamp {
                    c.ts_recent = t.0;
                }
                return Ok((th.window as u32) << c.wscale);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no ACK of the probe",
        ))
    }

    /// Drains what the victim sent (its duplicate ACKs), without waiting.
    pub fn drain(&mut self) -> io::Result<u64> {
        let mut n = 0;
        while self.recv(Duration::ZERO)?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}

/// What an out-of-order fill did.
#[derive(Debug, Clone, Copy, Default)]
pub struct FillReport {
    /// The victim's window when the fill started (bytes).
    pub window: u32,
    /// 1-byte segments sent.
    pub segments: u64,
    /// Wall time the fill took.
    pub elapsed: Duration,
}

/// The 1-byte out-of-order fill: a handshake from `src` to `dst`, then 1-byte
/// segments with 1-byte gaps over the victim's window (its upper half first, then
/// the lower half), never the byte at `rcv_nxt`, `rounds` times over.
pub fn ofo_fill(
    iface: &str,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    rounds: u32,
) -> io::Result<FillReport> {
    let mut p = RawPeer::open(iface, src, dst)?;
    let mut c = p.handshake(0x1234_5678, Duration::from_secs(10))?;
    let window = p.window(&mut c, Duration::from_secs(5))?;
    let start = Instant::now();
    let n = window / 2;
    let half = n / 2;
    for _ in 0..rounds {
        for i in 0..n {
            let k = if i < n - half {
                half + i
            } else {
                i - (n - half)
            };
            let seg = p.segment(&c, TcpFlags::ACK, 2 * k + 1, &[0]);
            p.send(&seg)?;
            if i % 4096 == 0 {
                p.drain()?;
            }
        }
    }
    Ok(FillReport {
        window,
        segments: p.sent,
        elapsed: start.elapsed(),
    })
}

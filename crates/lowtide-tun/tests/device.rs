//! The TUN device against the real kernel, each test in its own network namespace
//! (nothing touches the root namespace). Needs root: see `netns::privileged`.
//!
//! lowtide's side of each TCP connection is played by hand here (packets built with
//! lowtide-wire), so that exactly what the kernel accepts and emits is visible.

use lowtide_tun::device::{Offload, TunDevice, RECV_BUF_LEN};
use lowtide_tun::netns::{self, privileged, NetNs};
use lowtide_tun::vnet::{self, VnetHdr, VIRTIO_NET_HDR_GSO_TCPV4};
use lowtide_wire::checksum;
use lowtide_wire::gso;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use lowtide_wire::testing::{tcp_packet, Csum};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Failure guard only: no test waits this long when things work.
const TIMEOUT: Duration = Duration::from_secs(5);
const MTU: usize = 1500;
const SYN: u16 = TcpFlags::SYN.0;
const ACK: u16 = TcpFlags::ACK.0;
const PSH: u16 = TcpFlags::PSH.0;
const FIN: u16 = TcpFlags::FIN.0;
const RST: u16 = TcpFlags::RST.0;

/// A namespace with one TUN device in it; the kernel's side is `kernel_addr`.
/// Fields drop in order: the device before the namespace.
struct Setup {
    dev: TunDevice,
    ns: NetNs,
}

fn setup(offload: Offload) -> Setup {
    let ns = NetNs::create(&netns::unique_name("lt")).expect("create netns");
    let dev = open_tun(&ns, "ltun0", offload, "10.9.0.1/24");
    Setup { dev, ns }
}

/// Opens a TUN in `ns` with the kernel's address `cidr`, MTU 1500, up, non-blocking.
fn open_tun(ns: &NetNs, name: &str, offload: Offload, cidr: &str) -> TunDevice {
    let dev = TunDevice::open_in(ns.name(), name, offload).expect("open tun");
    assert_eq!(dev.name(), name);
    assert_eq!(dev.offload(), offload);
    let (addr, len) = cidr.split_once('/').unwrap();
    let len: u8 = len.parse().unwrap();
    match addr.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => dev.set_ipv4(a, len).expect("set_ipv4"),
        IpAddr::V6(a) => dev.set_ipv6(a, len).expect("set_ipv6"),
    }
    dev.set_mtu(MTU as u32).expect("set_mtu");
    dev.set_up().expect("set_up");
    dev.set_nonblocking(true).expect("set_nonblocking");
    dev
}

/// Waits (poll(2), at most until `deadline`) for the next packet on `dev`.
fn recv(dev: &TunDevice, deadline: Instant) -> (VnetHdr, Vec<u8>) {
    let mut buf = vec![0u8; RECV_BUF_LEN];
    loop {
        match dev.recv(&mut buf) {
            Ok(n) => {
                let (hdr, pkt) = VnetHdr::parse(&buf[..n]).expect("vnet header");
                return (hdr, pkt.to_vec());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("recv: {e}"),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out waiting for a packet");
        let mut pfd = libc::pollfd {
            fd: dev.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32 + 1) };
    }
}

/// The next TCP packet from `from` to `to` (skipping e.g. IPv6 router solicitations
/// and MLD reports the kernel sends when the link comes up).
fn recv_tcp(
    dev: &TunDevice,
    from: SocketAddr,
    to: SocketAddr,
    deadline: Instant,
) -> (VnetHdr, Vec<u8>) {
    loop {
        let (hdr, pkt) = recv(dev, deadline);
        if lowtide_wire::tcp::four_tuple(&pkt) == Ok((from, to)) {
            return (hdr, pkt);
        }
    }
}

/// IP header, TCP header and payload of a received packet, checksums not checked.
fn parse(pkt: &[u8]) -> (IpRepr, TcpRepr, &[u8]) {
    let ip = IpRepr::parse(pkt, true).expect("IP header");
    let tcp_bytes = &pkt[ip.header_len..ip.header_len + ip.payload_len];
    let (tcp, hl) = TcpRepr::parse(tcp_bytes).expect("TCP header");
    (ip, tcp, &tcp_bytes[hl..])
}

/// True if the packet's TCP checksum is complete and correct.
fn tcp_checksum_ok(pkt: &[u8]) -> bool {
    let ip = IpRepr::parse(pkt, true).expect("IP header");
    checksum::verify_tcp(
        ip.src,
        ip.dst,
        &pkt[ip.header_len..ip.header_len + ip.payload_len],
    )
}

/// lowtide's end of one TCP connection, played by hand.
struct Conn {
    us: SocketAddr,
    kernel: SocketAddr,
    snd_nxt: u32,
    rcv_nxt: u32,
    offload: Offload,
}

impl Conn {
    fn new(us: &str, kernel: SocketAddr, offload: Offload) -> Conn {
        Conn {
            us: us.parse().unwrap(),
            kernel,
            snd_nxt: 1_000_000,
            rcv_nxt: 0,
            offload,
        }
    }

    /// An IP + TCP packet with the pseudo-header sum in its checksum field, exactly as
    /// lowtide's `Transmit` carries it.
    fn packet(&self, flags: u16, options: TcpOptions, payload: &[u8]) -> Vec<u8> {
        partial_packet(
            self.us,
            self.kernel,
            self.snd_nxt,
            self.rcv_nxt,
            flags,
            options,
            payload,
        )
    }

    /// Sends a (super-)packet as the runtime would: with `Offload::Full` as it is,
    /// partial checksum and GSO in the vnet header; with `Offload::None` cut into
    /// segments with full checksums.
    fn send(&mut self, dev: &TunDevice, flags: u16, options: TcpOptions, payload: &[u8], gso: u16) {
        let pkt = self.packet(flags, options, payload);
        transmit(dev, self.offload, &pkt, gso);
        let syn_fin = (flags & (SYN | FIN) != 0) as u32;
        self.snd_nxt = self.snd_nxt.wrapping_add(payload.len() as u32 + syn_fin);
    }

    /// Our SYN (MSS 1460, window scale 7, SACK permitted), the kernel's SYN-ACK, our
    /// ACK. Returns the SYN-ACK's vnet header.
    fn handshake(&mut self, dev: &TunDevice) -> VnetHdr {
        let syn = TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            ..TcpOptions::default()
        };
        self.send(dev, SYN, syn, &[], 0);
        let (hdr, pkt) = recv_tcp(dev, self.kernel, self.us, Instant::now() + TIMEOUT);
        let (_, tcp, _) = parse(&pkt);
        assert_eq!(tcp.flags.0, SYN | ACK, "expected a SYN-ACK, got {tcp:?}");
        assert_eq!(tcp.ack, self.snd_nxt);
        self.check_rx_checksum(&hdr, &pkt);
        self.rcv_nxt = tcp.seq.wrapping_add(1);
        self.ack(dev);
        hdr
    }

    fn ack(&mut self, dev: &TunDevice) {
        self.send(dev, ACK, TcpOptions::default(), &[], 0);
    }

    /// Checks the checksum convention of a packet from the kernel: with
    /// `Offload::Full` a partial sum that `finish_rx_checksum` completes, with
    /// `Offload::None` a complete checksum and no `NEEDS_CSUM`.
    fn check_rx_checksum(&self, hdr: &VnetHdr, pkt: &[u8]) {
        match self.offload {
            Offload::Full => {
                assert!(hdr.needs_csum(), "Full: expected NEEDS_CSUM, got {hdr:?}");
                let mut done = pkt.to_vec();
                vnet::finish_rx_checksum(hdr, &mut done).expect("finish");
                assert!(tcp_checksum_ok(&done), "finished checksum does not verify");
            }
            Offload::None => {
                assert!(!hdr.needs_csum() && !hdr.is_gso(), "None: got {hdr:?}");
                assert!(tcp_checksum_ok(pkt), "None: bad checksum from the kernel");
            }
        }
    }
}

/// Builds an IP + TCP packet with a partial checksum (pseudo-header sum only).
fn partial_packet(
    src: SocketAddr,
    dst: SocketAddr,
    seq: u32,
    ack: u32,
    flags: u16,
    options: TcpOptions,
    payload: &[u8],
) -> Vec<u8> {
    let tcp = TcpRepr {
        seq,
        ack,
        flags: TcpFlags(flags),
        window: 65535,
        options,
        ..TcpRepr::default()
    };
    tcp_packet(src, dst, &tcp, payload, 1, Csum::Partial)
}

/// Writes `pkt` (partial checksum, maybe a super-packet) the way `offload` asks.
fn transmit(dev: &TunDevice, offload: Offload, pkt: &[u8], gso: u16) {
    match offload {
        Offload::Full => {
            let hdr = VnetHdr::for_transmit(pkt, gso).expect("for_transmit");
            dev.send(&hdr, pkt).expect("send");
        }
        Offload::None => {
            gso::segment(pkt, gso, |seg| {
                assert!(seg.len() <= MTU);
                dev.send(&VnetHdr::plain(), &seg).expect("send");
            })
            .expect("segment");
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A kernel listener on `addr` (port 0: any) inside the namespace.
fn listen(ns: &NetNs, addr: &str) -> TcpListener {
    let addr = addr.to_owned();
    let l = ns.spawn(move || TcpListener::bind(addr)).unwrap();
    l.join().unwrap().expect("bind inside the namespace")
}

/// Accepts one connection on another thread and hands it to `f`.
fn serve<T: Send + 'static>(
    l: TcpListener,
    f: impl FnOnce(TcpStream) -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        let (s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.set_write_timeout(Some(TIMEOUT)).unwrap();
        f(s)
    })
}

/// Test 1: the kernel accepts our SYN and data with partial checksums (Full: one GSO
/// super-packet of 3 x 1000 bytes) or full checksums (None: three segments).
#[test]
fn kernel_accepts_our_packets() {
    if !privileged("kernel_accepts_our_packets") {
        return;
    }
    for offload in [Offload::Full, Offload::None] {
        let s = setup(offload);
        let l = listen(&s.ns, "10.9.0.1:0");
        let kernel = l.local_addr().unwrap();
        let reader = serve(l, |mut s| {
            let mut got = vec![0u8; 3000];
            s.read_exact(&mut got).expect("kernel socket read");
            got
        });
        let mut c = Conn::new("10.9.0.2:40000", kernel, offload);
        c.handshake(&s.dev);
        let data = pattern(3000);
        c.send(&s.dev, ACK | PSH, TcpOptions::default(), &data, 1000);
        assert_eq!(reader.join().unwrap(), data, "{offload:?}");
        // The kernel acknowledges all of it.
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let (hdr, pkt) = recv_tcp(&s.dev, kernel, c.us, deadline);
            c.check_rx_checksum(&hdr, &pkt);
            let (_, tcp, _) = parse(&pkt);
            assert_eq!(tcp.flags.0 & RST, 0, "{offload:?}: reset");
            if tcp.ack == c.snd_nxt {
                break;
            }
        }
    }
}

/// The receiving side of test 2: what lowtide saw of the kernel's 200 KB.
#[derive(Default)]
struct Received {
    data: Vec<u8>,
    largest: usize,
    gso_packets: usize,
    packets: usize,
}

/// Test 2: the kernel sends TSO super-packets with `Offload::Full`, and only
/// MTU-sized, fully checksummed segments with `Offload::None`.
#[test]
fn kernel_sends_super_packets_only_with_offload() {
    if !privileged("kernel_sends_super_packets_only_with_offload") {
        return;
    }
    const LEN: usize = 200 * 1024;
    for offload in [Offload::Full, Offload::None] {
        let s = setup(offload);
        let l = listen(&s.ns, "10.9.0.1:0");
        let kernel = l.local_addr().unwrap();
        let writer = serve(l, |mut s| {
            s.write_all(&pattern(LEN)).expect("kernel socket write");
            s.shutdown(std::net::Shutdown::Write).unwrap();
            s // keep it open until we have read everything
        });
        let mut c = Conn::new("10.9.0.2:40001", kernel, offload);
        c.handshake(&s.dev);
        let got = receive_all(&s.dev, &mut c, LEN);
        drop(writer.join().unwrap());
        assert_eq!(got.data, pattern(LEN), "{offload:?}");
        eprintln!(
            "{offload:?}: {} packets, {} GSO, largest {} bytes",
            got.packets, got.gso_packets, got.largest
        );
        match offload {
            Offload::Full => assert!(got.gso_packets > 0 && got.largest > MTU),
            Offload::None => assert!(got.gso_packets == 0 && got.largest <= MTU),
        }
    }
}

/// Reads the kernel's data until its FIN, ACKing every packet.
fn receive_all(dev: &TunDevice, c: &mut Conn, len: usize) -> Received {
    let mut r = Received::default();
    let deadline = Instant::now() + TIMEOUT * 4;
    loop {
        let (hdr, pkt) = recv_tcp(dev, c.kernel, c.us, deadline);
        r.packets += 1;
        r.largest = r.largest.max(pkt.len());
        if hdr.is_gso() {
            assert_eq!(hdr.gso_type, VIRTIO_NET_HDR_GSO_TCPV4, "{hdr:?}");
            assert!(hdr.gso_size as usize <= MTU - 40);
            r.gso_packets += 1;
        }
        c.check_rx_checksum(&hdr, &pkt);
        let fin = take_in_order(c, &mut r.data, &hdr, &pkt);
        c.ack(dev);
        if fin {
            assert_eq!(r.data.len(), len);
            return r;
        }
    }
}

/// Appends the payload of each wire segment of `pkt` that starts at `rcv_nxt`
/// (retransmissions are ignored). True once the FIN is reached.
fn take_in_order(c: &mut Conn, data: &mut Vec<u8>, hdr: &VnetHdr, pkt: &[u8]) -> bool {
    let mut fin = false;
    gso::segment(pkt, hdr.gso_size, |seg| {
        assert!(seg.len() <= MTU, "segment of {} bytes", seg.len());
        let (_, tcp, payload) = parse(&seg);
        assert_eq!(tcp.flags.0 & RST, 0, "reset");
        if tcp.seq != c.rcv_nxt {
            return;
        }
        data.extend_from_slice(payload);
        c.rcv_nxt = c.rcv_nxt.wrapping_add(payload.len() as u32);
        if tcp.flags.0 & FIN != 0 {
            c.rcv_nxt = c.rcv_nxt.wrapping_add(1);
            fin = true;
        }
    })
    .expect("segment");
    fin
}

/// The checksum convention checked where the kernel cannot skip it: a packet with a
/// partial checksum (and a GSO one) enters through a `Full` device and is forwarded
/// out of a `None` device, so the kernel must complete (and segment) it in software
/// (`skb_checksum_help`, `tcp_gso_segment`). Locally delivered `CHECKSUM_PARTIAL`
/// packets are trusted without any check, so test 1 alone could not tell.
#[test]
fn kernel_finishes_our_partial_checksums_when_forwarding() {
    if !privileged("kernel_finishes_our_partial_checksums_when_forwarding") {
        return;
    }
    for v6 in [false, true] {
        let ns = NetNs::create(&netns::unique_name("lt")).unwrap();
        let (a_cidr, b_cidr, src, dst) = if v6 {
            (
                "fd09::1/64",
                "fd08::1/64",
                "[fd09::2]:40000",
                "[fd08::2]:80",
            )
        } else {
            (
                "10.9.0.1/24",
                "10.8.0.1/24",
                "10.9.0.2:40000",
                "10.8.0.2:80",
            )
        };
        let a = open_tun(&ns, "ltin", Offload::Full, a_cidr);
        let b = open_tun(&ns, "ltout", Offload::None, b_cidr);
        enable_forwarding(&ns);
        let (src, dst) = (src.parse().unwrap(), dst.parse().unwrap());
        for (len, gso) in [(500, 0), (3000, 1000), (2500, 1200)] {
            let data = pattern(len);
            let pkt = partial_packet(src, dst, 7, 9, ACK, TcpOptions::default(), &data);
            transmit(&a, Offload::Full, &pkt, gso);
            let got = forwarded(&b, src, dst, len);
            assert_eq!(got, data, "v6 {v6}, {len} bytes, gso {gso}");
        }
        // A complemented "partial" sum comes out wrong: the kernel really used ours.
        let mut pkt = partial_packet(src, dst, 7, 9, ACK, TcpOptions::default(), &[1; 100]);
        let at = pkt.len() - 100 - 20 + 16;
        let bad = !u16::from_be_bytes([pkt[at], pkt[at + 1]]);
        pkt[at..at + 2].copy_from_slice(&bad.to_be_bytes());
        transmit(&a, Offload::Full, &pkt, 0);
        let (_, out) = recv_tcp(&b, src, dst, Instant::now() + TIMEOUT);
        assert!(
            !tcp_checksum_ok(&out),
            "a wrong partial sum must not verify"
        );
        drop((a, b));
    }
}

/// Sets `ip_forward` and IPv6 forwarding inside `ns` (`/proc/sys/net` is per
/// namespace, resolved by the writing thread's namespace).
fn enable_forwarding(ns: &NetNs) {
    ns.spawn(|| {
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")?;
        std::fs::write("/proc/sys/net/ipv6/conf/all/forwarding", "1")
    })
    .unwrap()
    .join()
    .unwrap()
    .expect("enable forwarding");
}

/// Reads forwarded segments until `len` payload bytes arrived; each must be a
/// complete, valid segment of at most the MTU.
fn forwarded(dev: &TunDevice, src: SocketAddr, dst: SocketAddr, len: usize) -> Vec<u8> {
    let mut data = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while data.len() < len {
        let (hdr, pkt) = recv_tcp(dev, src, dst, deadline);
        assert!(!hdr.needs_csum() && !hdr.is_gso(), "{hdr:?}");
        assert!(pkt.len() <= MTU);
        assert!(
            tcp_checksum_ok(&pkt),
            "forwarded segment has a bad checksum"
        );
        data.extend_from_slice(parse(&pkt).2);
    }
    data
}

/// `send` reports the headers `virtio_net_hdr_to_skb` refuses as `InvalidInput`.
#[test]
fn kernel_rejects_bad_vnet_headers() {
    if !privileged("kernel_rejects_bad_vnet_headers") {
        return;
    }
    let s = setup(Offload::Full);
    let (src, dst) = ("10.9.0.2:1".parse().unwrap(), "10.9.0.1:2".parse().unwrap());
    let pkt = partial_packet(src, dst, 1, 0, ACK, TcpOptions::default(), &[0; 3000]);
    let good = VnetHdr::for_transmit(&pkt, 1000).unwrap();
    let bad = [
        VnetHdr {
            csum_offset: 60000,
            ..good
        },
        VnetHdr {
            gso_size: 0,
            ..good
        },
        VnetHdr {
            gso_type: vnet::VIRTIO_NET_HDR_GSO_TCPV6,
            ..good
        },
    ];
    for h in bad {
        let e = s.dev.send(&h, &pkt).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{h:?}: {e}");
    }
    s.dev.send(&good, &pkt).expect("the good header");
}

/// Test 3: dropping a `NetNs` deletes it.
#[test]
fn netns_is_deleted_on_drop() {
    if !privileged("netns_is_deleted_on_drop") {
        return;
    }
    let name = netns::unique_name("lt");
    let listed = |n: &str| {
        let out = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.split_whitespace().next() == Some(n))
    };
    let ns = NetNs::create(&name).unwrap();
    assert!(listed(&name));
    let out = ns
        .command("ip")
        .args(["link", "show", "lo"])
        .output()
        .unwrap();
    assert!(out.status.success());
    drop(ns);
    assert!(!listed(&name));
    // Also on panic: the namespace of a panicking scope is gone afterwards.
    let name2 = netns::unique_name("lt");
    let n2 = name2.clone();
    let r = std::panic::catch_unwind(move || {
        let _ns = NetNs::create(&n2).unwrap();
        panic!("test panic");
    });
    assert!(r.is_err());
    assert!(!listed(&name2));
}

/// `enter` moves only the calling thread, and the guard moves it back.
#[test]
fn enter_is_per_thread_and_restored() {
    if !privileged("enter_is_per_thread_and_restored") {
        return;
    }
    let ns_id = || std::fs::read_link("/proc/thread-self/ns/net").unwrap();
    let ns = NetNs::create(&netns::unique_name("lt")).unwrap();
    let before = ns_id();
    // A thread that already exists when we enter.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let existing = std::thread::spawn(move || {
        wait.recv().unwrap();
        ns_id()
    });
    let inside = {
        let _g = ns.enter().unwrap();
        go.send(()).unwrap();
        assert_eq!(existing.join().unwrap(), before, "other threads stay put");
        // A thread spawned while inside starts inside (clone copies the nsproxy).
        let spawned = std::thread::spawn(ns_id).join().unwrap();
        assert_eq!(spawned, ns_id());
        ns_id()
    };
    assert_ne!(inside, before);
    assert_eq!(ns_id(), before);
    assert_eq!(ns.spawn(ns_id).unwrap().join().unwrap(), inside);
}

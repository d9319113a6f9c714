//! IP output fragmentation side by side with the kernel: a kernel peer pings with
//! 3000 bytes of data (`ping -s 3000`, here through a kernel ping socket), once
//! lowtide on its TUN device (MTU 1500) and once a kernel target over a veth pair
//! (MTU 1500), in IPv4 and IPv6. Both must answer, in the same fragments (sizes,
//! offsets, MF, DF, one identification per reply; captured with tcpdump), with the
//! same fragmentation counters (`IpFragOKs`/`IpFragCreates`/`IpFragFails` and
//! their `Ip6` twins, and the extra packets fragmentation made: `OutTransmits`
//! minus `OutRequests`). Before lowtide fragmented, its 3048-byte replies never
//! reached the peer. Needs root and tcpdump: skipped with a message otherwise, a
//! failure under LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

mod common;

use common::*;
use lowtide_tun::netns::{self, privileged, NetNs};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::time::Duration;

/// Pings per family.
const PINGS: u16 = 3;
/// `ping -s 3000`.
const SIZE: usize = 3000;

/// One fragment as the wire shows it: (IP length, offset, MF, DF, id).
type Frag = (usize, usize, bool, bool, u32);

/// Lets root open ping sockets in `ns` (`net.ipv4.ping_group_range`, both families).
fn allow_ping(ns: &NetNs) {
    let ok = ns
        .command("sysctl")
        .args(["-qw", "net.ipv4.ping_group_range=0 2147483647"])
        .status();
    assert!(ok.expect("sysctl").success());
}

/// `ping -c PINGS -s SIZE to` through a kernel ping socket (`SOCK_DGRAM`,
/// `IPPROTO_ICMP[V6]`); how many replies came back whole.
fn ping(to: IpAddr) -> u16 {
    let (family, proto, request, reply) = match to {
        IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP, 8, 0),
        IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6, 128, 129),
    };
    // SAFETY: socket(2) with constant arguments; the fd is owned by the UdpSocket.
    let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM, proto) };
    assert!(fd >= 0, "ping socket: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh datagram socket fd nobody else owns.
    let sock = unsafe { UdpSocket::from_raw_fd(fd) };
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut answered = 0;
    for seq in 1..=PINGS {
        let mut msg = vec![request, 0, 0, 0, 0, 0];
        msg.extend_from_slice(&seq.to_be_bytes());
        msg.extend((0..SIZE).map(|i| (i % 251) as u8));
        sock.send_to(&msg, SocketAddr::new(to, 0))
            .expect("send echo");
        let mut buf = vec![0u8; 65536];
        if let Ok(n) = sock.recv(&mut buf) {
            answered += u16::from(n == msg.len() && buf[0] == reply && buf[8..n] == msg[8..]);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    answered
}

/// tcpdump on `dev` in `ns` writing `file`; stopped (and flushed) by the caller.
fn tcpdump(ns: &NetNs, dev: &str, file: &Path) -> ChildGuard {
    let child = ns
        .command("tcpdump")
        .args(["-U", "--immediate-mode", "-n", "-s", "0", "-i", dev, "-w"])
        .arg(file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn tcpdump");
    std::thread::sleep(Duration::from_millis(1500));
    ChildGuard::new(child)
}

/// The IP packets of a pcap file (Ethernet or raw IP link types).
fn pcap_packets(file: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(file).expect("pcap");
    assert!(b.len() >= 24, "pcap header");
    let le = b[0] == 0xd4 || b[0] == 0x4d;
    let u32_at = |at: usize| {
        let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    let link = u32_at(20);
    let (mut at, mut out) = (24, Vec::new());
    while at + 16 <= b.len() {
        let caplen = u32_at(at + 8) as usize;
        let frame = &b[at + 16..(at + 16 + caplen).min(b.len())];
        at += 16 + caplen;
        let ip = match link {
            1 if frame.len() > 14 => &frame[14..],
            1 => continue,
            _ => frame,
        };
        out.push(ip.to_vec());
    }
    out
}

/// The fragments of the echo replies (ICMP type 0 / ICMPv6 type 129 in the first
/// fragment, the rest by their identification) `from` sent, in order.
fn reply_fragments(packets: &[Vec<u8>], from: IpAddr) -> Vec<Frag> {
    let mut ids = std::collections::HashSet::new();
    let mut out = Vec::new();
    for p in packets {
        let (src, frag, first_type) = match p.first().map(|b| b >> 4) {
            Some(4) if p.len() >= 28 => {
                let src = IpAddr::from([p[12], p[13], p[14], p[15]]);
                let w = u16::from_be_bytes([p[6], p[7]]);
                let id = u16::from_be_bytes([p[4], p[5]]) as u32;
                let frag = (
                    p.len(),
                    (w & 0x1fff) as usize * 8,
                    w & 0x2000 != 0,
                    w & 0x4000 != 0,
                    id,
                );
                let hlen = (p[0] & 0x0f) as usize * 4;
                (src, frag, (p[9] == 1 && frag.1 == 0).then(|| p[hlen]))
            }
            Some(6) if p.len() >= 56 && p[6] == 44 => {
                let src = IpAddr::from(<[u8; 16]>::try_from(&p[8..24]).unwrap());
                let w = u16::from_be_bytes([p[42], p[43]]);
                let id = u32::from_be_bytes([p[44], p[45], p[46], p[47]]);
                let frag = (p.len(), (w & !7) as usize, w & 1 != 0, false, id);
                (src, frag, (p[40] == 58 && frag.1 == 0).then(|| p[48]))
            }
            _ => continue,
        };
        if src != from {
            continue;
        }
        if matches!(first_type, Some(0 | 129)) {
            ids.insert(frag.4);
        }
        if ids.contains(&frag.4) {
            out.push(frag);
        }
    }
    out
}

/// The fragments without their identifications, after checking each reply's
/// fragments share one.
fn layout(frags: &[Frag]) -> Vec<(usize, usize, bool, bool)> {
    for reply in frags.split_inclusive(|f| !f.2) {
        assert!(reply.iter().all(|f| f.4 == reply[0].4), "{reply:?}");
    }
    frags.iter().map(|f| (f.0, f.1, f.2, f.3)).collect()
}

/// A namespace's counters (`nstat -az`).
fn nstat(ns: &NetNs) -> std::collections::HashMap<String, u64> {
    ns_output(ns, "nstat", &["-az"])
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// The counters compared: the fragmentation counters, and how many more packets
/// left than datagrams were sent.
fn frag_counters(get: impl Fn(&str) -> u64) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for v in ["Ip", "Ip6"] {
        for c in ["FragOKs", "FragCreates", "FragFails"] {
            out.push((format!("{v}{c}"), get(&format!("{v}{c}"))));
        }
        let extra = get(&format!("{v}OutTransmits")) - get(&format!("{v}OutRequests"));
        out.push((format!("{v}OutTransmits-OutRequests"), extra));
    }
    out
}

/// What a kernel target does: a second namespace over a veth pair of MTU 1500,
/// pinged from the first; (v4 reply fragments, v6 reply fragments, counters).
fn kernel_as_target(dir: &Path) -> (Vec<Frag>, Vec<Frag>, Vec<(String, u64)>) {
    let peer = NetNs::create(&netns::unique_name("fragp")).expect("create netns");
    let target = NetNs::create(&netns::unique_name("fragt")).expect("create netns");
    let (p_if, t_if) = ("fragP", "fragT");
    ip(
        &peer,
        &["link", "add", p_if, "type", "veth", "peer", "name", t_if],
    );
    ip(&peer, &["link", "set", t_if, "netns", target.name()]);
    for (ns, dev, v4, v6) in [
        (&peer, p_if, "10.9.0.1/24", "fd00:9::1/64"),
        (&target, t_if, "10.9.0.2/24", "fd00:9::2/64"),
    ] {
        ip(ns, &["link", "set", "lo", "up"]);
        ip(ns, &["addr", "add", v4, "dev", dev]);
        ip(ns, &["-6", "addr", "add", v6, "dev", dev, "nodad"]);
        ip(ns, &["link", "set", dev, "mtu", "1500", "up"]);
    }
    allow_ping(&peer);
    let file = dir.join("kernel.pcap");
    let dump = tcpdump(&peer, p_if, &file);
    for to in ["10.9.0.2", "fd00:9::2"] {
        let to: IpAddr = to.parse().unwrap();
        let n = peer.spawn(move || ping(to)).unwrap().join().unwrap();
        assert_eq!(n, PINGS, "the kernel target answers {to}");
    }
    std::thread::sleep(Duration::from_millis(500));
    dump.terminate(Duration::from_secs(5));
    let packets = pcap_packets(&file);
    let c = nstat(&target);
    let counters = frag_counters(|n| c.get(n).copied().unwrap_or(0));
    (
        reply_fragments(&packets, "10.9.0.2".parse().unwrap()),
        reply_fragments(&packets, "fd00:9::2".parse().unwrap()),
        counters,
    )
}

#[test]
fn a_ping_of_3000_bytes_is_answered_in_the_kernels_fragments() {
    if !privileged("a_ping_of_3000_bytes_is_answered_in_the_kernels_fragments") {
        return;
    }
    let dir = std::env::temp_dir().join(netns::unique_name("fragcap"));
    std::fs::create_dir_all(&dir).unwrap();
    let (k4, k6, kc) = kernel_as_target(&dir);

    let env = Env::new("fragl");
    allow_ping(&env.ns);
    let args = [
        "transfer",
        "--listen",
        "5000",
        "--recv",
        "--timeout",
        "60s",
        "--tun",
        "lt0",
        "--tun-addr",
        "10.7.0.1/24",
        "--local6",
        "fd00:7::2",
        "--json",
    ];
    let mut lt = env.lowtide(&args);
    let ready = lt.ready(Duration::from_secs(30));
    assert!(ready.contains("listening on"), "{ready}");
    ip(
        &env.ns,
        &["-6", "addr", "add", "fd00:7::1/64", "dev", "lt0", "nodad"],
    );
    let file = dir.join("lowtide.pcap");
    let dump = tcpdump(&env.ns, "lt0", &file);
    for to in [LOWTIDE, "fd00:7::2"] {
        let to: IpAddr = to.parse().unwrap();
        let n = env.kernel(move || ping(to)).join().unwrap();
        assert_eq!(n, PINGS, "lowtide answers {to}");
    }
    std::thread::sleep(Duration::from_millis(500));
    dump.terminate(Duration::from_secs(5));
    // A transfer ends lowtide's run, which prints its counters.
    let to: SocketAddr = format!("{LOWTIDE}:5000").parse().unwrap();
    let sent = env
        .kernel(move || kernel_send(to, stream(1_000_000, 3)))
        .join();
    assert_eq!(sent.unwrap(), 1_000_000);
    let out = lt.wait(Duration::from_secs(30));
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    let packets = pcap_packets(&file);
    let l4 = reply_fragments(&packets, LOWTIDE.parse().unwrap());
    let l6 = reply_fragments(&packets, "fd00:7::2".parse().unwrap());
    let lc = frag_counters(|n| report["counters"][n].as_u64().unwrap_or(0));
    let _ = std::fs::remove_dir_all(&dir);

    let want4 = [
        (1500, 0, true, false),
        (1500, 1480, true, false),
        (68, 2960, false, false),
    ];
    assert_eq!(
        layout(&k4),
        want4.repeat(PINGS.into()),
        "the kernel's IPv4 replies"
    );
    assert_eq!(
        layout(&l4),
        layout(&k4),
        "lowtide's IPv4 replies as the kernel's"
    );
    let want6 = [
        (1496, 0, true, false),
        (1496, 1448, true, false),
        (160, 2896, false, false),
    ];
    assert_eq!(
        layout(&k6),
        want6.repeat(PINGS.into()),
        "the kernel's IPv6 replies"
    );
    assert_eq!(
        layout(&l6),
        layout(&k6),
        "lowtide's IPv6 replies as the kernel's"
    );
    assert_eq!(lc, kc, "lowtide's counters (left) as the kernel's (right)");
}

//! The TUN examples (`tun_echo`, `tun_fetch`, `tun_forward`) run as programs inside a
//! fresh network namespace, against kernel peers there. Needs root: see
//! `lowtide_tun::netns::privileged` (CI sets LOWTIDE_REQUIRE_PRIVILEGED_TESTS=1).

use lowtide_tun::netns::{self, privileged, NetNs};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Failure guard only: no step waits this long when things work.
const TIMEOUT: Duration = Duration::from_secs(20);

/// The example's binary, built by `cargo test` (or built here if it is missing).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    if !path.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "-p", "lowtide-tokio", "--example", name])
            .status()
            .expect("run cargo");
        assert!(st.success(), "building example {name}");
    }
    path
}

/// A namespace with loopback up.
fn namespace() -> NetNs {
    let ns = NetNs::create(&netns::unique_name("ltx")).expect("create netns");
    let st = ns
        .command("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .unwrap();
    assert!(st.success());
    ns
}

/// An example running in `ns`; killed on drop.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(ns: &NetNs, name: &str, args: &[&str]) -> Running {
        let mut child = ns
            .command(example(name).to_str().unwrap())
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn example");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Running { child, lines }
    }

    /// Waits for the example to exit by itself; whether it succeeded.
    fn wait(&mut self) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < TIMEOUT {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.success();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("example still running after {TIMEOUT:?}");
    }

    /// The next line the example prints.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(TIMEOUT)
            .expect("example printed nothing")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr.parse().unwrap(), TIMEOUT).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

#[test]
fn tun_echo_serves_the_kernel() {
    if !privileged("tun_echo_serves_the_kernel") {
        return;
    }
    let ns = namespace();
    let ex = Running::start(&ns, "tun_echo", &["ltecho0"]);
    assert!(ex.line().contains("10.9.0.2:7"));
    let got = ns
        .spawn(|| {
            let mut s = connect("10.9.0.2:7");
            let data = pattern(2_000_000);
            let mut w = s.try_clone().unwrap();
            let send = data.clone();
            let t = std::thread::spawn(move || {
                w.write_all(&send).unwrap();
                w.shutdown(Shutdown::Write).unwrap();
            });
            let mut back = Vec::new();
            s.read_to_end(&mut back).unwrap();
            t.join().unwrap();
            back == data
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(got, "echoed bytes differ");
}

#[test]
fn tun_fetch_reads_a_kernel_server() {
    if !privileged("tun_fetch_reads_a_kernel_server") {
        return;
    }
    let ns = namespace();
    let body = pattern(3_000_000);
    let sent = body.clone();
    let (ready_tx, ready) = mpsc::channel();
    let server = ns
        .spawn(move || {
            let l = TcpListener::bind("0.0.0.0:8000").unwrap();
            ready_tx.send(()).unwrap();
            let (mut s, peer) = l.accept().unwrap();
            let mut req = [0u8; 256];
            let n = s.read(&mut req).unwrap();
            assert!(req[..n].starts_with(b"GET / HTTP/1.0"));
            s.write_all(&sent).unwrap();
            peer
        })
        .unwrap();
    ready.recv_timeout(TIMEOUT).unwrap();
    let ex = Running::start(&ns, "tun_fetch", &["ltfetch0", "10.9.0.1:8000"]);
    let line = ex.line();
    assert!(
        line.starts_with(&format!("fetched {} bytes from 10.9.0.1:8000", body.len())),
        "{line}"
    );
    let peer = server.join().unwrap();
    assert_eq!(peer.ip().to_string(), "10.9.0.2");
    let mut ex = ex;
    assert!(ex.wait(), "tun_fetch failed");
    // The kernel closed first; once lowtide's ACK and FIN have left, its socket is
    // in TIME-WAIT, not left in FIN-WAIT-1/2 or CLOSING by a program that ended.
    let tcp = ns.command("cat").arg("/proc/net/tcp").output().unwrap();
    let states: Vec<String> = String::from_utf8_lossy(&tcp.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .collect();
    // tcp_states.h: 04 FIN_WAIT1, 05 FIN_WAIT2, 0B CLOSING.
    assert!(
        !states
            .iter()
            .any(|s| ["04", "05", "0B"].contains(&s.as_str())),
        "kernel sockets left closing: {states:?}"
    );
    assert!(states.iter().any(|s| s == "06"), "no TIME-WAIT: {states:?}");
}

#[test]
fn tun_forward_relays_any_destination() {
    if !privileged("tun_forward_relays_any_destination") {
        return;
    }
    let ns = namespace();
    // The upstream: a kernel server on loopback that answers "up:" + what it read.
    let (ready_tx, ready) = mpsc::channel();
    ns.spawn(move || {
        let l = TcpListener::bind("127.0.0.1:9000").unwrap();
        ready_tx.send(()).unwrap();
        for s in l.incoming() {
            let mut s = s.unwrap();
            let mut req = Vec::new();
            s.read_to_end(&mut req).unwrap();
            s.write_all(b"up:").unwrap();
            s.write_all(&req).unwrap();
        }
    })
    .unwrap();
    ready.recv_timeout(TIMEOUT).unwrap();
    let ex = Running::start(&ns, "tun_forward", &["ltfwd0", "127.0.0.1:9000"]);
    assert!(ex.line().starts_with("forwarding"));
    for dst in ["10.9.0.77:80", "10.9.0.200:443"] {
        let reply = ns
            .spawn(move || {
                let mut s = connect(dst);
                s.write_all(dst.as_bytes()).unwrap();
                s.shutdown(Shutdown::Write).unwrap();
                let mut r = Vec::new();
                s.read_to_end(&mut r).unwrap();
                r
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(reply, format!("up:{dst}").into_bytes());
        let log = ex.line();
        assert!(log.contains(&format!("Some({dst})")), "{log}");
    }
}

/// Runs `ip ARGS` in `ns`.
fn ip(ns: &NetNs, args: &[&str]) {
    let st = ns.command("ip").args(args).status().unwrap();
    assert!(st.success(), "ip {args:?}");
}

/// A DNS server that answers every A question with 192.0.2.80
/// ([RFC 1035 4.1](https://www.rfc-editor.org/rfc/rfc1035#section-4.1)).
fn dns_answer(q: &[u8]) -> Vec<u8> {
    let mut r = q.to_vec();
    r[2] = 0x81; // QR, RD
    r[3] = 0x80; // RA
    r[6..8].copy_from_slice(&1u16.to_be_bytes()); // ANCOUNT
                                                  // A pointer to the question's name, A, IN, TTL 60, 4 bytes.
    r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 80]);
    r
}

/// A DNS query for `lowtide.test` A and its answer, from a Python resolver.
const PY_RESOLVE: &str = r#"
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x4c54, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l for l in (b"lowtide", b"test")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(20)
s.sendto(q, ("192.0.2.1", 53))
r, peer = s.recvfrom(512)
assert peer == ("192.0.2.1", 53), peer
ident, flags, qd, an = struct.unpack(">HHHH", r[:8])
assert ident == 0x4c54 and flags & 0x8000 and an == 1, r
print(socket.inet_ntoa(r[-4:]))
"#;

/// An ICMP echo to 192.0.2.1 over a raw socket (ping without ping(8)).
const PY_PING: &str = r#"
import socket, struct
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
payload = b"lowtide ping"
hdr = struct.pack("!BBHHH", 8, 0, 0, 0x1d1d, 1)
pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + payload), 0x1d1d, 1) + payload
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(20)
s.sendto(pkt, ("192.0.2.1", 0))
while True:
    r, peer = s.recvfrom(1500)
    icmp = r[(r[0] & 15) * 4:]
    if icmp[0] == 0:
        break
assert peer[0] == "192.0.2.1" and icmp[4:8] == pkt[4:8] and icmp[8:] == payload, r
print("echo reply from", peer[0])
"#;

#[test]
fn tun2socks_carries_curl_dns_and_ping() {
    if !privileged("tun2socks_carries_curl_dns_and_ping") {
        return;
    }
    // Clients in `inner` route everything into the device; the program, and the
    // servers it reaches with its own sockets, are in `outer`.
    let (inner, outer) = (namespace(), namespace());
    ip(&outer, &["addr", "add", "192.0.2.1/32", "dev", "lo"]);
    let (ready_tx, ready) = mpsc::channel();
    outer
        .spawn(move || {
            let http = TcpListener::bind("192.0.2.1:8080").unwrap();
            let dns = std::net::UdpSocket::bind("192.0.2.1:53").unwrap();
            ready_tx.send(()).unwrap();
            std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                while let Ok((n, peer)) = dns.recv_from(&mut buf) {
                    dns.send_to(&dns_answer(&buf[..n]), peer).unwrap();
                }
            });
            for s in http.incoming() {
                let mut s = s.unwrap();
                let mut req = Vec::new();
                let mut b = [0u8; 1024];
                while !req.ends_with(b"\r\n\r\n") {
                    let n = s.read(&mut b).unwrap();
                    assert!(n > 0, "request cut");
                    req.extend_from_slice(&b[..n]);
                }
                let body = pattern(200_000);
                let head = format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                s.write_all(head.as_bytes()).unwrap();
                s.write_all(&body).unwrap();
            }
        })
        .unwrap();
    ready.recv_timeout(TIMEOUT).unwrap();
    let ex = Running::start(&outer, "tun2socks", &["ltsocks0", inner.name()]);
    assert!(ex.line().starts_with("forwarding TCP and UDP"));
    ip(&inner, &["route", "add", "default", "dev", "ltsocks0"]);

    let curl = inner
        .command("curl")
        .args(["-sS", "--max-time", "20", "http://192.0.2.1:8080/"])
        .output()
        .expect("run curl");
    assert!(
        curl.status.success(),
        "{}",
        String::from_utf8_lossy(&curl.stderr)
    );
    assert!(
        curl.stdout == pattern(200_000),
        "curl got {} bytes",
        curl.stdout.len()
    );

    let dig = inner
        .command("python3")
        .args(["-c", PY_RESOLVE])
        .output()
        .unwrap();
    assert!(
        dig.status.success(),
        "{}",
        String::from_utf8_lossy(&dig.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&dig.stdout).trim(), "192.0.2.80");

    let ping = inner
        .command("python3")
        .args(["-c", PY_PING])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stderr)
    );

    // The flows the program logged: the DNS flow, then curl's when it ended.
    let mut log = String::new();
    while !(log.contains("udp 10.9.0.1:") && log.contains("tcp 10.9.0.1:")) {
        log += &ex.line();
        log.push('\n');
    }
    assert!(
        log.contains("-> 192.0.2.1:53") && log.contains("-> 192.0.2.1:8080"),
        "{log}"
    );
}

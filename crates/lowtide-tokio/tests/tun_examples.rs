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

//! Issue 27's comparison: the same 1-byte out-of-order fill as `hostile_real.rs`, with
//! this machine's kernel as the victim. Two namespaces joined by a veth pair: the
//! attacker's (a kernel client streaming to the victim, verified by SHA-256, and
//! `lowtide_tun::attack`'s raw-socket peer from an address nobody owns, whose
//! answers the victim reaches through a static neighbour entry) and the victim's (a
//! kernel listener that accepts the transfer and leaves the attacker's connection
//! in its accept queue, as lowtide's test does, with the same `tcp_rmem`). Measured:
//! the victim namespace's TCP memory in pages (`/proc/net/sockstat`, sampled during
//! the fill) and its counters (`nstat`). A measurement, not a check: run with
//! `cargo test --release -p lowtide-cli --test hostile_kernel -- --ignored --nocapture`
//! as root; BENCHMARKS.md has its figures.

mod common;

use common::*;
use lowtide_tun::attack;
use lowtide_tun::netns::{self, privileged, NetNs};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn ip(ns: &NetNs, args: &[&str]) {
    let ok = ns.command("ip").args(args).status().expect("run ip");
    assert!(ok.success(), "ip {args:?} in {}", ns.name());
}

fn output(ns: &NetNs, program: &str, args: &[&str]) -> String {
    let out = ns.command(program).args(args).output().expect(program);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The namespace's TCP memory (pages), from sockstat's "TCP: ... mem N".
fn tcp_mem_pages(ns: &NetNs) -> u64 {
    let s = output(ns, "cat", &["/proc/net/sockstat"]);
    s.lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "mem")
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "a measurement beside lowtide's (BENCHMARKS.md): run with --ignored as root"]
fn kernel_under_the_same_ofo_fill() {
    if !privileged("kernel_under_the_same_ofo_fill") {
        return;
    }
    let a = Env::new("hka");
    let v = NetNs::create(&netns::unique_name("hkv")).expect("netns");
    ip(&v, &["link", "set", "lo", "up"]);
    let (ia, iv) = ("hkA", "hkV");
    ip(
        &a.ns,
        &["link", "add", ia, "type", "veth", "peer", "name", iv],
    );
    ip(&a.ns, &["link", "set", iv, "netns", v.name()]);
    ip(&a.ns, &["addr", "add", "10.9.0.1/24", "dev", ia]);
    ip(&a.ns, &["link", "set", ia, "up"]);
    ip(&v, &["addr", "add", "10.9.0.2/24", "dev", iv]);
    ip(&v, &["link", "set", iv, "up"]);
    let mac = output(&a.ns, "cat", &[&format!("/sys/class/net/{ia}/address")]);
    ip(
        &v,
        &["neigh", "add", "10.9.0.99", "lladdr", mac.trim(), "dev", iv],
    );
    let set = v
        .command("sysctl")
        .args(["-qw", "net.ipv4.tcp_rmem=4096 1048576 6291456"])
        .status();
    assert!(set.expect("sysctl").success());
    let _ = output(&v, "nstat", &["-n"]);
    let listener = v
        .spawn(|| TcpListener::bind("10.9.0.2:7000"))
        .expect("thread")
        .join()
        .expect("bind")
        .expect("listen");
    let server = std::thread::spawn(move || kernel_recv(listener));
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let legit = a.kernel(move || {
        let s = TcpStream::connect("10.9.0.2:7000").expect("connect");
        write_hashed_until(s, &s2)
    });
    std::thread::sleep(Duration::from_millis(500));
    let before = tcp_mem_pages(&v);
    let src: SocketAddrV4 = "10.9.0.99:40000".parse().unwrap();
    let dst: SocketAddrV4 = "10.9.0.2:7000".parse().unwrap();
    let fill = a.kernel(move || attack::ofo_fill(ia, src, dst, 1));
    let mut peak = before;
    while !fill.is_finished() {
        peak = peak.max(tcp_mem_pages(&v));
        std::thread::sleep(Duration::from_millis(20));
    }
    let fill = fill.join().expect("attacker").expect("attack");
    peak = peak.max(tcp_mem_pages(&v));
    stop.store(true, Ordering::Relaxed);
    let (n, sha) = legit.join().expect("legit");
    let (got, got_sha) = server.join().expect("server");
    assert_eq!((got, &got_sha), (n, &sha), "the transfer verifies");
    let counters = output(
        &v,
        "nstat",
        &[
            "-az",
            "TcpExtTCPOFOQueue",
            "TcpExtTCPOFODrop",
            "TcpExtPruneCalled",
            "TcpExtOfoPruned",
            "TcpExtTCPRcvCollapsed",
        ],
    );
    eprintln!(
        "kernel fill: window {} B, {} segments in {:?}; TCP mem {before} pages before, \
         peak {peak} pages\n{counters}",
        fill.window, fill.segments, fill.elapsed
    );
}

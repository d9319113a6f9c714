//! A connect that cannot succeed fails as Linux's `connect(2)` would, early and in
//! one line on stderr (`lowtide: connect ADDR: strerror`, exit 1): a reset
//! (ECONNREFUSED), an ICMP network or host unreachable from the kernel
//! (ENETUNREACH, EHOSTUNREACH), no answer after `tcp_syn_retries` (ETIMEDOUT, each
//! retry said as it happens); a `--local` the kernel cannot route back to fails at
//! once. Repeated runs use fresh ports and ISNs and exit as soon as they are done.
//! Needs root; skipped with a message otherwise (a failure in CI).

mod common;

use common::*;
use lowtide_tun::netns::privileged;
use std::process::Output;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);
const TUN: [&str; 4] = ["--tun", "lt0", "--tun-addr", "10.7.0.1/24"];

/// `lowtide transfer --connect TO --send 1000` (plus `extra`) in `env`, timed.
fn connect(env: &Env, to: &str, extra: &[&str]) -> (Output, Duration) {
    let mut args = vec!["transfer", "--connect", to, "--send", "1000"];
    args.extend_from_slice(&TUN);
    args.extend_from_slice(extra);
    let start = Instant::now();
    let out = env.lowtide(&args).wait(LIMIT);
    (out, start.elapsed())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn sh(env: &Env, cmd: &[&str]) {
    let ok = env.ns.command(cmd[0]).args(&cmd[1..]).status();
    assert!(ok.expect(cmd[0]).success(), "{cmd:?}");
}

#[test]
fn refused_unreachable_and_timed_out_connects() {
    if !privileged("refused_unreachable_and_timed_out_connects") {
        return;
    }
    let env = Env::new("cer");
    // The kernel answers a SYN to a closed port with RST.
    let (out, took) = connect(&env, "10.7.0.1:6001", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "lowtide: connect 10.7.0.1:6001: Connection refused\n"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    // A forwarding kernel answers with ICMP: no route at all, an unreachable route.
    sh(&env, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    sh(&env, &["ip", "route", "add", "unreachable", "10.98.0.0/16"]);
    for (to, why) in [
        ("10.99.0.1:80", "Network is unreachable"),
        ("10.98.0.1:80", "No route to host"),
    ] {
        let (out, took) = connect(&env, to, &[]);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(stderr(&out), format!("lowtide: connect {to}: {why}\n"));
        assert!(took < Duration::from_secs(2), "{to}: {took:?}");
    }
    // A kernel that drops the SYNs (not its address, no forwarding): why, each retry,
    // then ETIMEDOUT: with tcp_syn_retries 1 the SYN timeouts stay at 1 s
    // (tcp_syn_linear_timeouts) and tcp_model_timeout(1, 1 s) = 3 s ends it.
    sh(&env, &["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    let retries = ["--sysctl", "net.ipv4.tcp_syn_retries=1", "--json"];
    let (out, took) = connect(&env, "10.7.0.99:80", &retries);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "lowtide: connect 10.7.0.99:80: 10.7.0.99 is not an address of the kernel's side \
         and net.ipv4.ip_forward is 0: the kernel drops these SYNs\n\
         lowtide: connect 10.7.0.99:80: no SYN-ACK, retry 1 (RTO 1 s)\n\
         lowtide: connect 10.7.0.99:80: no SYN-ACK, retry 2 (RTO 1 s)\n\
         lowtide: connect 10.7.0.99:80: Connection timed out\n"
    );
    assert!(
        took > Duration::from_millis(2900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let report = json_of(&out);
    assert_eq!(
        report["error"], "connection timed out (ETIMEDOUT)",
        "{report}"
    );
}

#[test]
fn bad_local_address_fails_at_once() {
    if !privileged("bad_local_address_fails_at_once") {
        return;
    }
    let env = Env::new("cel");
    let (out, took) = connect(&env, "10.7.0.1:6001", &["--local", "10.9.9.9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with(
            "lowtide: --local 10.9.9.9: Network is unreachable: the kernel has no route to it"
        ),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    let (out, _) = connect(&env, "10.7.0.1:6001", &["--local", "10.7.0.1"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the kernel's own address: usage"
    );
    assert!(stderr(&out).starts_with("lowtide: --local 10.7.0.1: "));
}

#[test]
fn iperf3_client_connect_refused() {
    if !privileged("iperf3_client_connect_refused") {
        return;
    }
    let env = Env::new("cei");
    let mut args = vec!["iperf3", "-c", KERNEL, "-p", "5299"];
    args.extend_from_slice(&TUN);
    let out = env.lowtide(&args).wait(LIMIT);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "lowtide: connect 10.7.0.1:5299: Connection refused\n"
    );
}

/// Back to back in one namespace against the same kernel listener: each run exits
/// as soon as its FIN handshake is done (no linger), and a fresh port keeps the
/// kernel's TIME-WAIT from the previous run out of the way (the ISN test is
/// transfer.rs's `real_path_isns_and_ports_do_not_follow_the_seed`).
#[test]
fn repeated_runs_exit_when_done_from_fresh_ports() {
    if !privileged("repeated_runs_exit_when_done_from_fresh_ports") {
        return;
    }
    let env = Env::new("cep");
    let mut ports = Vec::new();
    for run in 0..3 {
        let server = kernel_listen(&env, 6000, |l| {
            let (mut s, peer) = l.accept().expect("accept");
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut s, &mut all).expect("read");
            (all.len(), peer.port())
        });
        // The same --seed every time: the port comes from the OS's randomness.
        let (out, took) = connect(&env, "10.7.0.1:6000", &["--seed", "7"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let (n, port) = server.join().expect("server");
        assert_eq!(n, 1000);
        // Start-up plus a handshake and a FIN exchange on a clean link; the old
        // 2 s linger, or a SYN held by TIME-WAIT (1 s), would not fit.
        assert!(took < Duration::from_millis(900), "run {run} took {took:?}");
        ports.push(port);
    }
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3, "fresh ports {ports:?}");
}

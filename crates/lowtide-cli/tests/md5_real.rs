//! TCP-MD5 (RFC 2385) against the kernel's own: a kernel listener in lowtide's
//! namespace holds a `TCP_MD5SIG` key for lowtide's address, and `lowtide transfer
//! --md5-key` connects to it over TUN. With the same key the kernel accepts every
//! signed segment and its signed ACKs pass lowtide's check, so the bytes arrive and
//! verify; with another key the kernel drops every SYN (its TcpExtTCPMD5Failure
//! counts them) and lowtide never connects. Needs root: skipped with a message
//! otherwise, a failure under LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

mod common;

use common::*;
use lowtide_tun::netns::privileged;
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::AsRawFd;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// `setsockopt(TCP_MD5SIG)` with a `struct tcp_md5sig` for `peer` (216 bytes:
/// sockaddr_storage, flags, prefix length, key length, ifindex, key).
fn set_md5sig(l: &TcpListener, peer: Ipv4Addr, key: &[u8]) {
    let mut b = [0u8; 216];
    b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    b[4..8].copy_from_slice(&peer.octets());
    b[130..132].copy_from_slice(&(key.len() as u16).to_ne_bytes());
    b[136..136 + key.len()].copy_from_slice(key);
    // SAFETY: setsockopt(2) on the listener's own fd with a buffer of its length.
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MD5SIG,
            b.as_ptr().cast(),
            b.len() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "TCP_MD5SIG: {}", std::io::Error::last_os_error());
}

/// `TcpExtTCPMD5Failure` in the namespace's /proc/net/netstat.
fn kernel_md5_failures(env: &Env) -> u64 {
    let text = ns_output(&env.ns, "cat", &["/proc/net/netstat"]);
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "TCPMD5Failure")
        .and_then(|(_, v)| v.parse().ok())
        .expect("TCPMD5Failure in /proc/net/netstat")
}

/// lowtide sends `bytes` to a kernel listener keyed with `kernel_key`, signing with
/// `lowtide_key`; returns lowtide's output and the kernel's result (none if it
/// accepted nothing).
fn signed_transfer(
    env: &Env,
    kernel_key: &'static [u8],
    lowtide_key: &str,
    bytes: u64,
) -> (std::process::Output, Option<(u64, String)>) {
    let server = kernel_listen(env, 6000, move |l| {
        set_md5sig(&l, LOWTIDE.parse().unwrap(), kernel_key);
        l.set_nonblocking(true).unwrap();
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_secs(8) {
            if let Ok((s, _)) = l.accept() {
                s.set_nonblocking(false).unwrap();
                return Some(read_hashed(s));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    });
    let size = bytes.to_string();
    let args = [
        "transfer",
        "--connect",
        "10.7.0.1:6000",
        "--send",
        &size,
        "--md5-key",
        lowtide_key,
        "--timeout",
        "6s",
        "--tun",
        "lt0",
        "--tun-addr",
        "10.7.0.1/24",
        "--json",
    ];
    let out = env.lowtide(&args).wait(LIMIT);
    (out, server.join().expect("kernel server"))
}

#[test]
fn md5_signed_transfer_to_the_kernel_verifies_and_a_wrong_key_fails() {
    if !privileged("md5_signed_transfer_to_the_kernel_verifies_and_a_wrong_key_fails") {
        return;
    }
    let env = Env::new("md5");
    let bytes = 5_000_000u64;
    let (out, got) = signed_transfer(&env, b"lowtide-md5-key", "lowtide-md5-key", bytes);
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    let (n, sha) = got.expect("the kernel accepted the signed connection");
    assert_eq!(n, bytes, "kernel received all bytes");
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    assert_eq!(kernel_md5_failures(&env), 0, "every digest verified");

    let env = Env::new("md5x");
    let (out, got) = signed_transfer(&env, b"the-kernels-key", "another-key", bytes);
    assert!(!out.status.success(), "a wrong key must not connect");
    assert!(got.is_none(), "the kernel accepted nothing");
    assert!(
        kernel_md5_failures(&env) >= 1,
        "the kernel counted the bad SYNs"
    );
}

//! TCP-MD5 (RFC 2385) against the kernel's own, both ways. A kernel listener in
//! lowtide's namespace holds a `TCP_MD5SIG` key for lowtide's address, and `lowtide
//! transfer --md5-key` connects to it over TUN: with the same key the kernel accepts
//! every signed segment and its signed ACKs pass lowtide's check, so the bytes
//! arrive and verify; with another key the kernel drops every SYN (its
//! TcpExtTCPMD5Failure counts them) and lowtide never connects. The other way round,
//! a kernel client keyed with `TCP_MD5SIG` connects to `lowtide transfer --listen
//! --md5-key`: with the same key its bytes arrive and verify; with another key, or
//! none, it never connects and lowtide counts TcpExtTCPMD5Failure or
//! TcpExtTCPMD5NotFound. Needs root: skipped with a message otherwise, a failure
//! under LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

mod common;

use common::*;
use lowtide_tun::netns::privileged;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// `setsockopt(TCP_MD5SIG)` with a `struct tcp_md5sig` for `peer` (216 bytes:
/// sockaddr_storage, flags, prefix length, key length, ifindex, key).
fn set_md5sig(fd: RawFd, peer: Ipv4Addr, key: &[u8]) {
    let mut b = [0u8; 216];
    b[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    b[4..8].copy_from_slice(&peer.octets());
    b[130..132].copy_from_slice(&(key.len() as u16).to_ne_bytes());
    b[136..136 + key.len()].copy_from_slice(key);
    // SAFETY: setsockopt(2) on a socket the caller owns with a buffer of its length.
    let r = unsafe {
        libc::setsockopt(
            fd,
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
        set_md5sig(l.as_raw_fd(), LOWTIDE.parse().unwrap(), kernel_key);
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

/// A kernel client keyed with `key` for `to`'s address (no key if `None`),
/// connected to `to`; a connect that has no answer gives up after 3 s
/// (`SO_SNDTIMEO` bounds a blocking connect).
fn keyed_connect(to: SocketAddrV4, key: Option<&[u8]>) -> std::io::Result<TcpStream> {
    // SAFETY: socket(2) with constant arguments; the fd is owned by the stream.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: fd is a fresh socket nothing else owns.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    if let Some(k) = key {
        set_md5sig(fd, *to.ip(), k);
    }
    s.set_write_timeout(Some(Duration::from_secs(3)))?;
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: to.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(to.ip().octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: connect(2) on our fd with a sockaddr_in of its size.
    let r = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(s)
}

/// `lowtide transfer --listen 7000 --recv --md5-key KEY` in `env`, ready.
fn keyed_lowtide_listener(env: &Env, key: &str) -> ChildGuard {
    lowtide_victim(env, "8s", &["--md5-key", key])
}

/// The counter `name` in lowtide's report.
fn counter(report: &serde_json::Value, name: &str) -> u64 {
    report["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} in the report: {report}"))
}

#[test]
fn md5_kernel_client_to_a_keyed_lowtide_listener_verifies_and_a_wrong_key_fails() {
    if !privileged("md5_kernel_client_to_a_keyed_lowtide_listener_verifies_and_a_wrong_key_fails") {
        return;
    }
    let to: SocketAddrV4 = format!("{LOWTIDE}:7000").parse().unwrap();
    let env = Env::new("md5k");
    let lt = keyed_lowtide_listener(&env, "lowtide-md5-key");
    let data = stream(3_000_000, 21);
    let sha = sha256_hex(&data);
    let client = env.kernel(move || {
        let mut s = keyed_connect(to, Some(b"lowtide-md5-key")).expect("connect");
        s.set_write_timeout(None).unwrap();
        s.write_all(&data).expect("kernel write");
        s.shutdown(Shutdown::Write).expect("shutdown");
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        data.len()
    });
    assert_eq!(client.join().expect("kernel client"), 3_000_000);
    let out = lt.wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    assert_eq!(report["bytes"], 3_000_000u64);
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    assert_eq!(counter(&report, "TcpExtTCPMD5Failure"), 0, "{report}");
    assert_eq!(counter(&report, "TcpExtTCPMD5NotFound"), 0, "{report}");

    for (key, counted) in [
        (Some(&b"another-key"[..]), "TcpExtTCPMD5Failure"),
        (None, "TcpExtTCPMD5NotFound"),
    ] {
        let env = Env::new("md5kx");
        let lt = keyed_lowtide_listener(&env, "lowtide-md5-key");
        let client = env.kernel(move || keyed_connect(to, key).map(|_| ()));
        let r = client.join().expect("kernel client");
        assert!(r.is_err(), "{counted}: the kernel client must not connect");
        let out = lt.wait(LIMIT);
        let report = json_of(&out);
        assert!(!out.status.success(), "{counted}: lowtide accepted nothing");
        assert_eq!(report["bytes"], 0u64, "{report}");
        assert!(counter(&report, counted) >= 1, "{counted}: {report}");
    }
}

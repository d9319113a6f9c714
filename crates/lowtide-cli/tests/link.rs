//! `lowtide link` between two network namespaces: kernel TCP from one to the other
//! crosses the emulated path whole (GSO packets pass through) or impaired, every byte
//! verified. Needs root; skipped with a message otherwise (a failure in CI).

mod common;

use common::*;
use lowtide_tun::netns::privileged;
use std::net::SocketAddr;
use std::time::Duration;

/// Kernel client in A's namespace sends `bytes` to a kernel server in B's, through
/// `lowtide link` with `path` flags; returns the link's JSON counters.
fn through_link(name: &str, bytes: usize, path: &[&str]) -> serde_json::Value {
    let a = Env::new(&format!("{name}a"));
    let b = Env::new(&format!("{name}b"));
    let mut args = vec![
        "link",
        "--tun",
        "la",
        "--tun-addr",
        "10.8.0.1/24",
        "--peer-tun",
        "lb",
        "--peer-addr",
        "10.8.0.2/24",
        "--peer-netns",
        b.ns.name(),
        "--json",
    ];
    args.extend_from_slice(path);
    let mut link = a.lowtide(&args);
    assert_eq!(
        link.ready(Duration::from_secs(10)),
        "lowtide link: ready: forwarding between la and lb"
    );
    let server = kernel_server(&b, 7000);
    let data = stream(bytes, 7);
    let sha = sha256_hex(&data);
    let to: SocketAddr = "10.8.0.2:7000".parse().unwrap();
    let client = a.kernel(move || kernel_send(to, data));
    assert_eq!(client.join().expect("client"), bytes);
    let (n, got) = server.join().expect("server");
    assert_eq!(n, bytes as u64);
    assert_eq!(got, sha, "same bytes on both sides of the link");
    let out = link.terminate(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "link: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(&out)
}

#[test]
fn kernel_to_kernel_through_a_clean_link() {
    if !privileged("kernel_to_kernel_through_a_clean_link") {
        return;
    }
    let r = through_link("lk", 50_000_000, &[]);
    assert_eq!(r["a_to_b"]["lost"], 0, "{r}");
    assert!(r["a_to_b"]["delivered"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn kernel_to_kernel_through_delay_and_loss() {
    if !privileged("kernel_to_kernel_through_delay_and_loss") {
        return;
    }
    // This one sleeps between packets (the clean link polls, the default).
    let path = [
        "--rtt",
        "20ms",
        "--loss",
        "1%",
        "--rate",
        "100mbit",
        "--busy-poll",
        "0",
    ];
    let r = through_link("lkl", 2_000_000, &path);
    assert!(r["a_to_b"]["lost"].as_u64().unwrap() > 0, "{r}");
}

/// A run that cannot start (no such peer namespace) fails in one line on stderr,
/// exit 1, nothing on stdout.
#[test]
fn link_that_cannot_start_exits_1_with_the_reason() {
    if !privileged("link_that_cannot_start_exits_1_with_the_reason") {
        return;
    }
    let a = Env::new("lkf");
    let args = [
        "link",
        "--tun",
        "la",
        "--tun-addr",
        "10.8.0.1/24",
        "--peer-tun",
        "lb",
        "--peer-addr",
        "10.8.0.2/24",
        "--peer-netns",
        "lowtide-no-such-ns",
        "--json",
    ];
    let out = a.lowtide(&args).wait(Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("lowtide: TUN device lb in network namespace lowtide-no-such-ns: "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty());
}

//! Path MTU discovery against the kernel as a router: lowtide's TUN device in one
//! namespace, whose kernel forwards over a veth hop of MTU 1400 to a kernel receiver
//! in a second namespace (its own MTU 1500, so it offers MSS 1460 and only the
//! middle hop is narrow). The forwarding kernel drops lowtide's 1500-byte DF
//! segments and answers with ICMP "fragmentation needed"; lowtide must shrink its
//! MSS and finish (before path MTU discovery it stalled forever: a black hole).
//! And the other way: a kernel sender without path MTU discovery
//! (`net.ipv4.ip_no_pmtu_disc=1`, no DF) behind the same router, whose TUN device
//! towards lowtide is the narrow hop, so the router fragments; lowtide must
//! reassemble (before IPv4 reassembly it dropped every fragment: a stall).
//! Needs root: skipped with a message otherwise, a failure under
//! LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

mod common;

use common::*;
use lowtide_tun::netns::{self, privileged, NetNs};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

/// lowtide's namespace (`PREFIX`), whose kernel routes to a second namespace over a
/// veth hop of MTU `mtu` on lowtide's side (10.8.0.1 to 10.8.0.2; the far side's
/// route to lowtide's 10.7.0.0/24 goes back through it).
fn behind_a_router(prefix: &str, mtu: &str) -> (Env, NetNs) {
    let env = Env::new(prefix);
    let far = NetNs::create(&netns::unique_name(&format!("{prefix}k"))).expect("create netns");
    ip(&far, &["link", "set", "lo", "up"]);
    let (near_if, far_if) = (format!("{prefix}A"), format!("{prefix}K"));
    ip(
        &env.ns,
        &[
            "link", "add", &near_if, "type", "veth", "peer", "name", &far_if,
        ],
    );
    ip(&env.ns, &["link", "set", &far_if, "netns", far.name()]);
    ip(&env.ns, &["addr", "add", "10.8.0.1/24", "dev", &near_if]);
    ip(&env.ns, &["link", "set", &near_if, "mtu", mtu, "up"]);
    ip(&far, &["addr", "add", "10.8.0.2/24", "dev", &far_if]);
    ip(&far, &["link", "set", &far_if, "up"]);
    ip(&far, &["route", "add", "10.7.0.0/24", "via", "10.8.0.1"]);
    (env, far)
}

#[test]
fn frag_needed_from_a_kernel_router_shrinks_the_mss() {
    if !privileged("frag_needed_from_a_kernel_router_shrinks_the_mss") {
        return;
    }
    let (env, far) = behind_a_router("pmtu", "1400");
    let fwd = env
        .ns
        .command("sysctl")
        .args(["-qw", "net.ipv4.ip_forward=1"])
        .status();
    assert!(fwd.expect("sysctl").success());
    let listener = far
        .spawn(|| TcpListener::bind("10.8.0.2:6000"))
        .expect("thread in netns")
        .join()
        .expect("bind")
        .expect("listen on 10.8.0.2:6000");
    let server = std::thread::spawn(move || kernel_recv(listener));
    let bytes = 20_000_000u64;
    let size = bytes.to_string();
    let args = [
        "transfer",
        "--connect",
        "10.8.0.2:6000",
        "--send",
        &size,
        "--tun",
        "lt0",
        "--tun-addr",
        "10.7.0.1/24",
        "--json",
    ];
    let out = env.lowtide(&args).wait(Duration::from_secs(60));
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    let (n, sha) = server.join().expect("kernel server");
    assert_eq!(n, bytes, "the kernel behind the narrow hop got every byte");
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    // lowtide learned the hop's MTU from the router's ICMP (`--json` carries the
    // connection's tcp_info and the stack's counters).
    let info = &report["flows"][0]["tcp_info"];
    assert_eq!(info["pmtu"], 1400, "{report}");
    assert_eq!(info["snd_mss"], 1400 - 20 - 20 - 12, "{report}");
    assert!(report["counters"]["IcmpInDestUnreachs"].as_u64() >= Some(1));
    let icmp = env
        .ns
        .command("nstat")
        .args(["-az", "IcmpOutDestUnreachs"])
        .output()
        .expect("nstat");
    let text = String::from_utf8_lossy(&icmp.stdout);
    let sent: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("IcmpOutDestUnreachs"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    assert!(sent >= 1, "the router said fragmentation needed: {text}");
}

/// A kernel sender in a second namespace without DF, through the kernel router
/// whose TUN device towards lowtide has MTU 1400: the router fragments the sender's
/// 1500-byte packets (`ip_fragment`), lowtide reassembles them (`IpReasmOKs`) and
/// gets every byte.
#[test]
fn fragments_from_a_kernel_router_are_reassembled() {
    if !privileged("fragments_from_a_kernel_router_are_reassembled") {
        return;
    }
    let (env, far) = behind_a_router("frag", "1500");
    for (ns, set) in [
        (&env.ns, "net.ipv4.ip_forward=1"),
        (&far, "net.ipv4.ip_no_pmtu_disc=1"),
    ] {
        let ok = ns.command("sysctl").args(["-qw", set]).status();
        assert!(ok.expect("sysctl").success(), "{set}");
    }
    let args = [
        "transfer",
        "--listen",
        "5000",
        "--recv",
        "--tun",
        "lt0",
        "--tun-addr",
        "10.7.0.1/24",
        "--json",
    ];
    let mut child = env.lowtide(&args);
    let ready = child.ready(Duration::from_secs(30));
    assert!(ready.contains("listening on"), "{ready}");
    // The router's hop into lowtide's TUN device is the narrow one; lowtide still
    // offers MSS 1460 (its own MTU is 1500).
    ip(&env.ns, &["link", "set", "lt0", "mtu", "1400"]);
    let to: SocketAddr = ready
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .expect("lowtide's address in the ready line");
    let bytes = 5_000_000usize;
    let data = stream(bytes, 7);
    let sha = sha256_hex(&data);
    let client = far
        .spawn(move || kernel_send(to, data))
        .expect("thread in netns");
    assert_eq!(client.join().expect("kernel client"), bytes);
    let out = child.wait(Duration::from_secs(60));
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    assert_eq!(report["bytes"], bytes as u64);
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    let c = &report["counters"];
    assert!(c["IpReasmOKs"].as_u64() > Some(1000), "{c}");
    assert_eq!(c["IpReasmFails"], 0, "{c}");
    assert_eq!(c["IpExtReasmOverlaps"], 0, "{c}");
}

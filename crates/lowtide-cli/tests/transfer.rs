//! lowtide against the kernel's TCP over a TUN device, every byte verified by SHA-256:
//! both directions, with and without offload, through a clean path and through 20 ms
//! of delay with 1 % loss, a peer that resets mid-transfer, and the pcap of the run.
//! Needs root (network namespaces, TUN): skipped with a message otherwise, and a
//! failure under LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

mod common;

use common::*;
use lowtide_tun::netns::privileged;
use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

fn tun_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--tun", "lt0", "--tun-addr", "10.7.0.1/24", "--json"];
    v.extend_from_slice(extra);
    v
}

/// lowtide sends `bytes` to a kernel server; both hashes must agree.
fn lowtide_to_kernel(name: &str, bytes: u64, extra: &[&str]) -> serde_json::Value {
    let env = Env::new(name);
    let server = kernel_server(&env, 6000);
    let size = bytes.to_string();
    let mut args = vec!["transfer", "--connect", "10.7.0.1:6000", "--send", &size];
    args.extend(tun_args(extra));
    let out = env.lowtide(&args).wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    let (n, sha) = server.join().expect("kernel server");
    assert_eq!(n, bytes, "kernel received all bytes");
    assert_eq!(report["bytes"], bytes);
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    report
}

/// A kernel client sends `bytes` to lowtide; both hashes must agree.
fn kernel_to_lowtide(name: &str, bytes: usize, extra: &[&str]) -> serde_json::Value {
    let env = Env::new(name);
    let mut args = vec!["transfer", "--listen", "5000", "--recv"];
    args.extend(tun_args(extra));
    let mut child = env.lowtide(&args);
    let ready = child.ready(LIMIT);
    assert_eq!(
        ready,
        format!("lowtide transfer: ready: listening on {LOWTIDE}:5000")
    );
    let data = stream(bytes, 42);
    let sha = sha256_hex(&data);
    let to: SocketAddr = format!("{LOWTIDE}:5000").parse().unwrap();
    let client = env.kernel(move || kernel_send(to, data));
    assert_eq!(client.join().expect("kernel client"), bytes);
    let out = child.wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    assert_eq!(report["bytes"], bytes as u64);
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    report
}

#[test]
fn lowtide_sends_to_kernel_with_offload() {
    if !privileged("lowtide_sends_to_kernel_with_offload") {
        return;
    }
    let r = lowtide_to_kernel("lts", 50_000_000, &[]);
    let gso = r["device"]["tx_gso_packets"].as_u64().unwrap();
    assert!(gso > 0, "super-packets written to the device: {r}");
}

#[test]
fn lowtide_sends_to_kernel_without_offload() {
    if !privileged("lowtide_sends_to_kernel_without_offload") {
        return;
    }
    let r = lowtide_to_kernel("ltn", 10_000_000, &["--offload", "off"]);
    assert_eq!(r["device"]["tx_gso_packets"], 0, "{r}");
    assert_eq!(r["device"]["rx_gso_packets"], 0, "{r}");
}

#[test]
fn kernel_sends_to_lowtide_with_offload() {
    if !privileged("kernel_sends_to_lowtide_with_offload") {
        return;
    }
    let r = kernel_to_lowtide("ktl", 50_000_000, &[]);
    let gso = r["device"]["rx_gso_packets"].as_u64().unwrap();
    assert!(gso > 0, "the kernel's TSO packets arrive whole: {r}");
}

#[test]
fn kernel_sends_to_lowtide_without_offload() {
    if !privileged("kernel_sends_to_lowtide_without_offload") {
        return;
    }
    kernel_to_lowtide("ktn", 10_000_000, &["--offload", "off"]);
}

#[test]
fn lowtide_sends_through_delay_and_loss() {
    if !privileged("lowtide_sends_through_delay_and_loss") {
        return;
    }
    let path = ["--rtt", "20ms", "--loss", "1%", "--loss-reverse", "1%"];
    let r = lowtide_to_kernel("ltl", 3_000_000, &path);
    let lost = r["link"]["egress_lost"].as_u64().unwrap();
    assert!(lost > 0, "the path lost segments: {r}");
    assert!(r["retransmits"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn kernel_sends_through_delay_and_loss() {
    if !privileged("kernel_sends_through_delay_and_loss") {
        return;
    }
    let path = ["--rtt", "20ms", "--loss", "1%", "--loss-reverse", "1%"];
    let r = kernel_to_lowtide("ktls", 3_000_000, &path);
    let lost = r["link"]["ingress_lost"].as_u64().unwrap();
    assert!(lost > 0, "the path lost segments: {r}");
}

#[test]
fn five_percent_loss_still_delivers_every_byte() {
    if !privileged("five_percent_loss_still_delivers_every_byte") {
        return;
    }
    let path = ["--rtt", "10ms", "--loss", "5%", "--loss-reverse", "5%"];
    lowtide_to_kernel("lt5", 1_000_000, &path);
}

#[test]
fn a_kernel_reset_mid_transfer_is_reported() {
    if !privileged("a_kernel_reset_mid_transfer_is_reported") {
        return;
    }
    let env = Env::new("ltr");
    let server = kernel_listen(&env, 6000, |l| {
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = vec![0u8; 100_000];
        s.read_exact(&mut buf).expect("read the first 100 KB");
        // SO_LINGER 0: close() sends a reset.
        let sock = socket2_linger_zero(&s);
        drop(s);
        sock
    });
    let args = tun_args(&["--rate", "100mbit"]);
    let mut all = vec!["transfer", "--connect", "10.7.0.1:6000", "--send", "1GB"];
    all.extend(args);
    let out = env.lowtide(&all).wait(LIMIT);
    server.join().expect("kernel server");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("ECONNRESET"), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
    let report = json_of(&out);
    assert!(
        report["error"].as_str().unwrap().contains("reset"),
        "{report}"
    );
}

/// Sets SO_LINGER {on, 0} so that dropping the stream resets the connection.
fn socket2_linger_zero(s: &std::net::TcpStream) -> i32 {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt with a valid fd and a linger struct of the right size.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        )
    }
}

#[test]
fn pcap_of_the_tun_path_reads_back_with_tcpdump() {
    if !privileged("pcap_of_the_tun_path_reads_back_with_tcpdump") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("lowtide-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tun.pcap");
    let path = file.to_str().unwrap().to_string();
    lowtide_to_kernel("ltp", 200_000, &["--pcap", &path]);
    let out = std::process::Command::new("tcpdump")
        .args(["-nn", "-r", &path, "tcp"])
        .output()
        .expect("tcpdump (CI installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "tcpdump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = text.lines().next().unwrap_or("");
    assert!(
        first.contains("10.7.0.2.")
            && first.contains("> 10.7.0.1.6000")
            && first.contains("Flags [S]"),
        "SYN first: {first}"
    );
    let second = text.lines().nth(1).unwrap_or("");
    assert!(second.contains("Flags [S.]"), "SYN-ACK second: {second}");
}

#[test]
fn tcp_small_queues_bound_the_real_device_queue() {
    if !privileged("tcp_small_queues_bound_the_real_device_queue") {
        return;
    }
    // 100 Mbit/s, 20 ms: TX completions come from the emulated link's serializer, so
    // TSQ keeps ~1 ms of data (plus one 64 KB packet) queued; without it the queue
    // holds a large part of the congestion window.
    // Reno's slow start overshoots into the queue when nothing holds it back.
    let path = ["--rate", "100mbit", "--rtt", "20ms", "--cc", "reno"];
    let with = lowtide_to_kernel("tsq1", 20_000_000, &path);
    let mut off = path.to_vec();
    off.extend(["--sysctl", "experimental.tsq=false"]);
    let without = lowtide_to_kernel("tsq0", 20_000_000, &off);
    let q = |r: &serde_json::Value| r["link"]["egress_max_queue_bytes"].as_u64().unwrap();
    assert!(q(&with) <= 300_000, "with TSQ: {with}");
    assert!(q(&without) >= 1_000_000, "without TSQ: {without}");
}

/// A connection refused (no kernel listener) and one that stalls (the kernel
/// accepts and never reads) both exit 1 with the verdict's reason (issue 12).
#[test]
fn never_connected_and_stalled_transfers_exit_1_with_the_reason() {
    if !privileged("never_connected_and_stalled_transfers_exit_1_with_the_reason") {
        return;
    }
    let env = Env::new("ltv");
    let mut all = vec!["transfer", "--connect", "10.7.0.1:6001", "--send", "1MB"];
    all.extend(tun_args(&["--timeout", "5s"]));
    let out = env.lowtide(&all).wait(LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(
        stderr,
        "lowtide: connect 10.7.0.1:6001: Connection refused\n"
    );
    assert_eq!(json_of(&out)["verdict"]["ok"], false);

    let env = Env::new("lts2");
    let server = kernel_listen(&env, 6000, |l| {
        let (s, _) = l.accept().expect("accept");
        std::thread::sleep(Duration::from_secs(8));
        drop(s);
    });
    let mut all = vec!["transfer", "--connect", "10.7.0.1:6000", "--send", "100MB"];
    all.extend(tun_args(&["--timeout", "4s"]));
    let out = env.lowtide(&all).wait(LIMIT);
    server.join().expect("kernel server");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("stalled: time limit reached after"),
        "stderr: {stderr}"
    );
    let report = json_of(&out);
    assert_eq!(
        report["verdict"]["failed"][0]["reason"], "stalled",
        "{report}"
    );
}

/// The first SYN lowtide sent in a capture (LINKTYPE_RAW): (source port, ISN).
fn first_syn(pcap: &std::path::Path) -> (u16, u32) {
    let b = std::fs::read(pcap).expect("pcap");
    let mut at = 24;
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let pkt = &b[at + 16..at + 16 + len];
        at += 16 + len;
        let ihl = (pkt[0] & 0xf) as usize * 4;
        let tcp = &pkt[ihl..];
        if pkt[9] == 6 && tcp[13] & 0x12 == 0x02 {
            let port = u16::from_be_bytes([tcp[0], tcp[1]]);
            return (port, u32::from_be_bytes(tcp[4..8].try_into().unwrap()));
        }
    }
    panic!("no SYN in {}", pcap.display());
}

/// RFC 6528 / RFC 6056 on the real path: two runs with the same --seed choose
/// different ports and ISNs (the secret comes from getrandom, not from the seed).
#[test]
fn real_path_isns_and_ports_do_not_follow_the_seed() {
    if !privileged("real_path_isns_and_ports_do_not_follow_the_seed") {
        return;
    }
    let mut syns = Vec::new();
    for run in 0..2 {
        let env = Env::new(&format!("lti{run}"));
        let server = kernel_server(&env, 6000);
        let pcap = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("isn{run}.pcap"));
        let pcap_s = pcap.to_string_lossy().into_owned();
        let mut args = vec!["transfer", "--connect", "10.7.0.1:6000", "--send", "1000"];
        args.extend(tun_args(&["--seed", "1", "--pcap", &pcap_s]));
        let out = env.lowtide(&args).wait(LIMIT);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        server.join().expect("kernel server");
        syns.push(first_syn(&pcap));
    }
    assert_ne!(syns[0].1, syns[1].1, "ISNs");
    assert_ne!(syns[0].0, syns[1].0, "ports");
}

/// `-P 3`: three connections, each its own stream (seeded by --seed and its number),
/// each verified by the kernel's side; and `--listen -P 2` takes two.
#[test]
fn parallel_connections_each_carry_their_own_stream() {
    if !privileged("parallel_connections_each_carry_their_own_stream") {
        return;
    }
    let env = Env::new("ltp");
    let server = kernel_listen(&env, 6000, |l| {
        let conns: Vec<_> = (0..3).map(|_| l.accept().expect("accept").0).collect();
        let mut got: Vec<(u64, String)> = Vec::new();
        for mut c in conns {
            let mut all = Vec::new();
            c.read_to_end(&mut all).expect("read");
            got.push((all.len() as u64, sha256_hex(&all)));
        }
        got
    });
    let mut args = vec![
        "transfer",
        "--connect",
        "10.7.0.1:6000",
        "--send",
        "2MB",
        "-P",
        "3",
    ];
    args.extend(tun_args(&["--rtt", "4ms"]));
    let out = env.lowtide(&args).wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "{report}");
    assert_eq!(report["bytes"], 6_000_000u64);
    assert!(report["sha256"].is_null(), "no single hash for 3 streams");
    let mut ours: Vec<String> = report["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["sha256"].as_str().unwrap().to_string())
        .collect();
    let mut theirs: Vec<String> = server
        .join()
        .expect("server")
        .into_iter()
        .map(|(n, h)| {
            assert_eq!(n, 2_000_000);
            h
        })
        .collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs, "the same three streams");
    ours.dedup();
    assert_eq!(ours.len(), 3, "three different streams");

    let env = Env::new("ltp2");
    let mut args = vec!["transfer", "--listen", "5000", "--recv", "-P", "2"];
    args.extend(tun_args(&[]));
    let child = env.lowtide(&args);
    let to: SocketAddr = format!("{LOWTIDE}:5000").parse().unwrap();
    let senders: Vec<_> = (0..2u64)
        .map(|i| env.kernel(move || kernel_send(to, stream(1_000_000, 50 + i))))
        .collect();
    for s in senders {
        assert_eq!(s.join().expect("kernel client"), 1_000_000);
    }
    let out = child.wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "{report}");
    assert_eq!(report["bytes"], 2_000_000u64);
    assert_eq!(report["flows"].as_array().unwrap().len(), 2);
}

/// The SHA-256 of every connection in a report, sorted.
fn flow_hashes(report: &serde_json::Value) -> Vec<String> {
    let flows = report["flows"].as_array().expect("flows");
    let mut v: Vec<String> = flows
        .iter()
        .map(|f| f["sha256"].as_str().expect("sha256").to_owned())
        .collect();
    v.sort();
    v
}

/// `--queues 2` (issue 26 §3): four connections lowtide opens, spread over two engine
/// shards, and four the kernel opens to them, every byte verified by SHA-256 at the
/// other end.
#[test]
fn two_queues_carry_parallel_connections_both_ways() {
    if !privileged("two_queues_carry_parallel_connections_both_ways") {
        return;
    }
    const N: usize = 4;
    const BYTES: u64 = 4_000_000;
    let env = Env::new("trq");
    let server = kernel_listen(&env, 6000, |l| {
        let readers: Vec<_> = (0..N)
            .map(|_| {
                let l = l.try_clone().expect("listener clone");
                std::thread::spawn(move || kernel_recv(l))
            })
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().expect("reader"))
            .collect::<Vec<_>>()
    });
    let mut args = vec![
        "transfer",
        "--connect",
        "10.7.0.1:6000",
        "--send",
        "4M",
        "-P",
        "4",
    ];
    args.extend(tun_args(&["--queues", "2"]));
    let out = env.lowtide(&args).wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    let mut theirs: Vec<String> = server
        .join()
        .expect("kernel server")
        .into_iter()
        .map(|(n, sha)| {
            assert_eq!(n, BYTES, "kernel received a whole stream");
            sha
        })
        .collect();
    theirs.sort();
    assert_eq!(
        flow_hashes(&report),
        theirs,
        "the kernel read what lowtide sent"
    );
    assert_eq!(report["bytes"], BYTES * N as u64);

    let env = Env::new("trq");
    let mut args = vec!["transfer", "--listen", "5000", "--recv", "-P", "4"];
    args.extend(tun_args(&["--queues", "2"]));
    let mut child = env.lowtide(&args);
    child.ready(LIMIT);
    let to: SocketAddr = format!("{LOWTIDE}:5000").parse().unwrap();
    let mut sent: Vec<String> = Vec::new();
    let clients: Vec<_> = (0..N as u64)
        .map(|seed| {
            let data = stream(BYTES as usize, seed);
            sent.push(sha256_hex(&data));
            env.kernel(move || kernel_send(to, data))
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().expect("kernel client"), BYTES as usize);
    }
    let out = child.wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    sent.sort();
    assert_eq!(
        flow_hashes(&report),
        sent,
        "lowtide read what the kernel sent"
    );
}

/// `--listen --others MODE`: a kernel client's transfer first, then three more
/// connections; whether each of the three read the end of stream while the transfer
/// ran, and after lowtide ended; and lowtide's report.
fn with_others(name: &str, mode: &str) -> (serde_json::Value, Vec<bool>, Vec<bool>) {
    use std::io::Write;
    let env = Env::new(name);
    let mut args = vec!["transfer", "--listen", "5000", "--recv", "--others", mode];
    args.extend(tun_args(&[]));
    let mut child = env.lowtide(&args);
    child.ready(LIMIT);
    let to: SocketAddr = format!("{LOWTIDE}:5000").parse().unwrap();
    let client = env.kernel(move || {
        let eof = |s: &std::net::TcpStream, wait: u64| {
            s.set_read_timeout(Some(Duration::from_millis(wait)))
                .unwrap();
            matches!((&*s).read(&mut [0u8; 1]), Ok(0))
        };
        let mut first = connect_retry(to);
        let others: Vec<_> = (0..3).map(|_| connect_retry(to)).collect();
        let during: Vec<bool> = others.iter().map(|s| eof(s, 500)).collect();
        first.write_all(&stream(100_000, 7)).expect("write");
        first.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let _ = first.read_to_end(&mut Vec::new());
        let after: Vec<bool> = others.iter().map(|s| eof(s, 10_000)).collect();
        (during, after)
    });
    let (during, after) = client.join().expect("kernel client");
    let out = child.wait(LIMIT);
    let report = json_of(&out);
    assert!(out.status.success(), "{report}");
    assert_eq!(
        report["bytes"], 100_000u64,
        "the first connection's transfer"
    );
    (report, during, after)
}

/// `--others hold` keeps the connections after the transfer's open and silent until
/// the run ends, then closes them; `--others close` closes each at once.
#[test]
fn others_are_held_open_or_closed_at_once() {
    if !privileged("others_are_held_open_or_closed_at_once") {
        return;
    }
    let (report, during, after) = with_others("ltoh", "hold");
    assert_eq!(report["others"], 3, "{report}");
    assert_eq!(during, [false; 3], "held open while the transfer ran");
    assert_eq!(after, [true; 3], "closed when lowtide ended");
    let (report, during, _) = with_others("ltoc", "close");
    assert_eq!(report["others"], 3, "{report}");
    assert_eq!(during, [true; 3], "closed at once");
}

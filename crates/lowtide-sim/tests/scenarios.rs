//! Byte-exact delivery under the link impairments, and determinism.

mod common;

use common::*;
use lowtide_sim::{Scenario, Workload};

#[test]
fn clean_link_single_flow() {
    let r = run_verified(&transfer(1, 1, 1_000_000));
    assert_eq!(r.drops.link_loss, 0);
    assert!(r.goodput_bps > 10e6, "goodput {}", r.goodput_bps);
    assert!(r.counters.get(lowtide::Mib::TcpOutSegs) >= 1_000_000 / 1448);
}

#[test]
fn loss_levels() {
    for (i, loss) in [0.0, 0.01, 0.05, 0.20].into_iter().enumerate() {
        let mut sc = transfer(10 + i as u64, 2, 300_000);
        sc.link_ab.loss = loss;
        let r = run_verified(&sc);
        if loss > 0.0 {
            assert!(r.drops.link_loss > 0, "loss {loss}");
            assert!(r.per_flow.iter().map(|f| f.retrans_segs).sum::<u64>() > 0);
        }
    }
}

#[test]
fn ack_loss() {
    let mut sc = transfer(3, 2, 300_000);
    sc.link_ba.loss = 0.1;
    run_verified(&sc);
}

#[test]
fn reordering_and_jitter() {
    let mut sc = transfer(4, 2, 500_000);
    sc.link_ab.reorder = 0.05;
    sc.link_ab.jitter_ns = 200_000;
    let r = run_verified(&sc);
    assert!(r.links[0].stats.reordered > 0);
}

#[test]
fn duplication() {
    let mut sc = transfer(5, 2, 300_000);
    sc.link_ab.duplicate = 0.05;
    sc.link_ba.duplicate = 0.05;
    let r = run_verified(&sc);
    assert!(r.links[0].stats.duplicated > 0);
}

#[test]
fn corruption_is_caught_by_checksums() {
    for gro in [true, false] {
        let mut sc = transfer(6, 2, 300_000);
        sc.gro = gro;
        sc.link_ab.corrupt = 0.05;
        let r = run_verified(&sc);
        assert!(r.links[0].stats.corrupted > 0);
        let rc = &r.counters_receiver;
        let caught = rc.get(lowtide::Mib::TcpInCsumErrors) + rc.get(lowtide::Mib::IpInHdrErrors);
        assert!(caught > 0, "gro {gro}: no checksum errors counted");
    }
}

#[test]
fn tiny_windows() {
    let mut sc = transfer(7, 2, 200_000);
    sc.config = config(&[
        "net.ipv4.tcp_rmem=4096 4096 8192",
        "net.ipv4.tcp_wmem=4096 4096 8192",
    ]);
    sc.link_ab.loss = 0.02;
    run_verified(&sc);
}

#[test]
fn many_flows() {
    let mut sc = transfer(8, 200, 20_000);
    sc.link_ab.rate_bps = 1_000_000_000;
    sc.link_ba.rate_bps = 1_000_000_000;
    let r = run_verified(&sc);
    assert_eq!(r.per_flow.len(), 200);
}

#[test]
fn small_queue_drops_are_recovered() {
    let mut sc = transfer(9, 8, 300_000);
    sc.queue_limit = 4;
    let r = run_verified(&sc);
    assert!(r.nic_queues[0].stats.peak_packets <= 4);
}

#[test]
fn gro_off_and_small_mss() {
    let mut sc = transfer(11, 2, 200_000);
    sc.gro = false;
    sc.config.mtu = 576;
    run_verified(&sc);
}

#[test]
fn bulk_fills_the_link() {
    let sc = Scenario {
        workload: Workload::Bulk {
            duration_ns: 2_000_000_000,
        },
        link_ab: link(100_000_000, 1_000),
        link_ba: link(100_000_000, 1_000),
        ..Scenario::default()
    };
    let r = run_verified(&sc);
    // 100 Mbit/s of 1538-byte frames carrying 1448 bytes: at most ~94 Mbit/s.
    assert!(
        r.goodput_bps > 80e6 && r.goodput_bps < 95e6,
        "goodput {}",
        r.goodput_bps
    );
    assert!(
        r.per_flow[0].rtt_us >= 2_000,
        "rtt {}",
        r.per_flow[0].rtt_us
    );
}

#[test]
fn same_seed_same_results() {
    let mut sc = transfer(12, 4, 200_000);
    sc.link_ab.loss = 0.03;
    sc.link_ab.jitter_ns = 50_000;
    let a = deterministic_json(&run_verified(&sc));
    let b = deterministic_json(&run_verified(&sc));
    assert_eq!(a, b);
    sc.seed = 13;
    assert_ne!(a, deterministic_json(&run_verified(&sc)));
}

#[test]
fn pcap_is_written() {
    let path = std::env::temp_dir().join(format!("lowtide-sim-test-{}.pcap", std::process::id()));
    let mut sc = transfer(14, 1, 50_000);
    sc.pcap = Some(path.clone());
    let r = run_verified(&sc);
    let data = std::fs::read(&path).expect("pcap written");
    check_with_tcpdump(&path, r.sim_packets);
    std::fs::remove_file(&path).ok();
    // Classic pcap magic (either byte order), LINKTYPE_RAW.
    assert!(data[..4] == [0xd4, 0xc3, 0xb2, 0xa1] || data[..4] == [0xa1, 0xb2, 0xc3, 0xd4]);
    let linktype = u32::from_le_bytes([data[20], data[21], data[22], data[23]]);
    assert!(linktype == 101 || linktype.swap_bytes() == 101);
    let records = count_records(&data);
    assert_eq!(records as u64, r.sim_packets);
}

fn count_records(data: &[u8]) -> usize {
    let le = data[0] == 0xd4;
    let mut off = 24;
    let mut n = 0;
    while off + 16 <= data.len() {
        let b = [data[off + 8], data[off + 9], data[off + 10], data[off + 11]];
        let len = if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        off += 16 + len as usize;
        n += 1;
    }
    n
}

/// If tcpdump is installed: it reads every packet and finds no bad checksum.
fn check_with_tcpdump(path: &std::path::Path, packets: u64) {
    let Ok(out) = std::process::Command::new("tcpdump")
        .arg("-vnr")
        .arg(path)
        .output()
    else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines().filter(|l| l.contains(" > ")).count() as u64,
        packets
    );
    assert!(
        !text.contains("incorrect"),
        "bad checksum in capture:\n{text}"
    );
}

/// The sender-side figures agree with each other: the device queue of host A holds
/// only the flows' packets, the memory grid covers the run, lowat is set per socket.
#[test]
fn sender_resource_figures_are_consistent() {
    let mut sc = Scenario {
        flows: 4,
        workload: Workload::Bulk {
            duration_ns: 500_000_000,
        },
        link_ab: link(100_000_000, 5_000),
        link_ba: link(100_000_000, 5_000),
        notsent_lowat: Some(65_536),
        ..Scenario::default()
    };
    let r = run_verified(&sc);
    // 10 ms RTT: a 1 ms grid, points 0, 1 ms, ..., 499 ms.
    assert_eq!(r.memory.sample_interval_us, 1_000.0);
    assert_eq!(r.memory.samples, 500);
    assert!(r.memory.peak_pages as f64 >= r.memory.mean_pages);
    assert!(r.memory.mean_pages > 0.0);
    for f in &r.per_flow {
        assert_eq!(f.notsent_lowat, 65_536, "flow {}", f.flow);
        assert!(
            f.min_rtt_us >= 10_000 && f.mean_rtt_us >= f.min_rtt_us,
            "{f:?}"
        );
    }
    let nic = &r.nic_queues[0].stats;
    let dq = &r.device_queue;
    assert!(dq.peak_bytes_per_flow > 0 && dq.peak_bytes_per_flow <= nic.peak_bytes);
    // Every byte in A's queue belongs to a flow: the per-flow mean adds up.
    let sum = dq.mean_bytes_per_flow * sc.flows as f64;
    assert!((sum - nic.mean_bytes).abs() < 1e-6 * nic.mean_bytes.max(1.0));
    assert_eq!(dq.peak_delay_us, nic.max_delay_us);
    assert!(dq.mean_delay_us > 0.0 && dq.mean_delay_us <= dq.peak_delay_us);
    let total: u64 = r.per_flow.iter().map(|f| f.wakeups).sum();
    assert_eq!(r.wakeups.total, total);
    let mb = r.per_flow.iter().map(|f| f.bytes_delivered).sum::<u64>() as f64 / 1e6;
    assert!((r.wakeups.per_mb - total as f64 / mb).abs() < 1e-9);
    // Without lowat the sockets queue more.
    sc.notsent_lowat = None;
    let plain = run_verified(&sc);
    assert!(plain.memory.mean_wmem_queued_per_flow > r.memory.mean_wmem_queued_per_flow);
    assert_eq!(plain.per_flow[0].notsent_lowat, 0);
}

/// Regression: a single bulk flow fills a 10 Gbit/s, 1 ms path (the send buffer must
/// grow with cwnd, `tcp_should_expand_sndbuf`), for each congestion control.
#[test]
fn one_flow_fills_10_gbit() {
    for cc in ["reno", "cubic"] {
        let sc = Scenario {
            workload: Workload::Bulk {
                duration_ns: 300_000_000,
            },
            link_ab: link(10_000_000_000, 500),
            link_ba: link(10_000_000_000, 500),
            config: config(&[&format!("net.ipv4.tcp_congestion_control={cc}")]),
            ..Scenario::default()
        };
        let r = run_verified(&sc);
        // 1448 payload bytes per 1538-byte frame: 9.41 Gbit/s at most; slow start
        // costs a little of the 300 ms.
        assert!(r.goodput_bps > 8.5e9, "{cc}: {}", r.goodput_bps);
    }
}

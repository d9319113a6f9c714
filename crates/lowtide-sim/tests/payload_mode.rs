//! The pattern payload mode (issue 26) changes memory and speed only: the same
//! scenarios in both modes report the same figures, every one of them, and put the
//! same bytes on the wire (scripts/check-determinism.sh --payload pattern runs the
//! determinism set the same way).

mod common;

use common::*;
use lowtide_sim::{PayloadMode, Scenario};

fn bulk(flows: u32, rate_bps: u64, rtt_us: u64, ms: u64) -> Scenario {
    bulk_for(flows, rate_bps, rtt_us, ms * 1_000_000)
}

/// Runs `sc` in both modes; the results (wall time aside) must be equal.
fn same_in_both_modes(name: &str, sc: Scenario) {
    let run = |payload| {
        let r = Scenario {
            payload,
            ..sc.clone()
        }
        .run()
        .expect("scenario runs");
        assert!(r.bytes_verified, "{name} {payload:?}: {:?}", r.failure);
        deterministic_json(&r)
    };
    let (stored, pattern) = (run(PayloadMode::Stored), run(PayloadMode::Pattern));
    assert!(stored == pattern, "{name}: the modes differ");
}

#[test]
fn impaired_paths_report_the_same_figures() {
    let mut sc = bulk(3, 1_000_000_000, 10_000, 400);
    sc.link_ab.loss = 0.01;
    sc.link_ab.reorder = 0.02;
    sc.link_ab.jitter_ns = 200_000;
    sc.link_ab.duplicate = 0.005;
    sc.link_ab.corrupt = 0.003;
    sc.link_ba.loss = 0.005;
    same_in_both_modes("impaired", sc);
}

#[test]
fn retransmission_paths_report_the_same_figures() {
    // Without SACK (collapsed retransmissions), with MTU probing (probes built from
    // several skbs), with BBR and GRO off, and a fixed transfer with bursty loss.
    let mut sc = bulk(2, 200_000_000, 5_000, 400);
    sc.link_ab.loss = 0.02;
    sc.config = config(&["net.ipv4.tcp_sack=0", "net.ipv4.tcp_mtu_probing=2"]);
    same_in_both_modes("no sack, mtu probing", sc);
    let mut sc = bulk(4, 2_000_000_000, 1_000, 200);
    sc.gro = false;
    sc.link_ab.loss = 0.005;
    sc.config = config(&["net.ipv4.tcp_congestion_control=bbr"]);
    same_in_both_modes("bbr", sc);
    let mut sc = transfer(7, 2, 1_500_000);
    sc.link_ab.loss = 0.03;
    sc.link_ab.loss_burst = 3.0;
    sc.link_ba.loss = 0.01;
    sc.notsent_lowat = Some(64 * 1024);
    same_in_both_modes("bytes", sc);
}

#[test]
fn the_wire_carries_the_same_bytes() {
    let dir = std::env::temp_dir();
    let pcap = |payload: PayloadMode| {
        let path = dir.join(format!(
            "lowtide-payload-{payload:?}-{}.pcap",
            std::process::id()
        ));
        let mut sc = bulk(2, 100_000_000, 5_000, 300);
        sc.link_ab.loss = 0.01;
        sc.link_ab.corrupt = 0.005;
        sc.pcap = Some(path.clone());
        sc.payload = payload;
        run_verified(&sc);
        let bytes = std::fs::read(&path).expect("pcap written");
        let _ = std::fs::remove_file(&path);
        bytes
    };
    assert!(pcap(PayloadMode::Stored) == pcap(PayloadMode::Pattern));
}

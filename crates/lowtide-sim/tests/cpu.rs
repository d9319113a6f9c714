//! The sender's CPU model: a saturated CPU slows the sender, its backlog fills and
//! overflows; without load it changes nothing but the figures.

mod common;

use common::*;
use lowtide_sim::cpu::CpuModel;
use lowtide_sim::{Scenario, Workload};

fn path() -> Scenario {
    Scenario {
        workload: Workload::Bulk {
            duration_ns: 2_000_000_000,
        },
        link_ab: link(1_000_000_000, 5_000),
        link_ba: link(1_000_000_000, 5_000),
        gro: false,
        ..Scenario::default()
    }
}

fn model(per_packet_in_ns: f64) -> CpuModel {
    CpuModel {
        per_packet_in_ns,
        ..CpuModel::calibrated()
    }
}

#[test]
fn a_saturated_sender_cannot_send_faster() {
    let free = run_verified(&path());
    let mut sc = path();
    sc.cpu = Some(model(1_270.0));
    let light = run_verified(&sc);
    let c = light.cpu.expect("figures");
    assert!(c.utilization < 0.5, "{c:?}");
    let ratio = light.goodput_bps / free.goodput_bps;
    assert!(ratio > 0.95, "a light load changes little: {ratio}");
    // 100 us per ACK: at most 10,000 ACKs processed per second, but the ACKs that
    // wait in the backlog coalesce (tcp_add_backlog: pure ACKs with the same
    // options, so within one TSval tick), so the sender keeps its clock.
    sc.cpu = Some(model(100_000.0));
    let busy = run_verified(&sc);
    let c = busy.cpu.expect("figures");
    assert!(c.utilization > 0.9, "{c:?}");
    assert!(c.backlog_coalesce.unwrap_or(0) > c.packets_in, "{c:?}");
    let ratio = busy.goodput_bps / free.goodput_bps;
    assert!(ratio > 0.9, "coalesced ACKs keep the clock: {ratio}");
    // 2 ms per ACK, longer than a TSval tick (1 ms): ACKs of different ticks stay
    // apart, and the CPU falls behind them.
    sc.cpu = Some(model(2_000_000.0));
    let heavy = run_verified(&sc);
    let c = heavy.cpu.expect("figures");
    assert!(c.utilization > 0.9, "{c:?}");
    assert!(
        heavy.goodput_bps < 0.5 * free.goodput_bps,
        "{} vs {}",
        heavy.goodput_bps,
        free.goodput_bps
    );
    assert!(c.backlog_peak_packets > 10, "{c:?}");
    assert_eq!(free.cpu, None);
}

#[test]
fn a_tiny_backlog_overflows_into_counted_drops() {
    let mut sc = path();
    let mut m = model(50_000.0);
    // Each ACK charged as if it were huge: tcp_add_backlog's limit holds few.
    m.backlog_overhead = 1 << 20;
    sc.cpu = Some(m);
    let r = run_verified(&sc);
    let c = r.cpu.expect("figures");
    assert!(c.backlog_drops > 0, "{c:?}");
}

/// `tcp_xmit_retransmit_queue` stops once `retrans_out >= lost_out`: with nothing
/// left to retransmit, an ACK does not walk the queue (before that check, every ACK
/// under 1 % loss walked on through the SACKed skbs: about 576 nodes per ACK at
/// 2 Gbit/s, 150 ms).
#[test]
fn retransmit_walk_stops_when_nothing_is_lost() {
    let mut sc = path();
    sc.link_ab = link(1_000_000_000, 75_000);
    sc.link_ba = link(1_000_000_000, 75_000);
    sc.link_ab.loss = 0.01;
    sc.workload = Workload::Bulk {
        duration_ns: 4_000_000_000,
    };
    sc.config = config(&[
        "net.ipv4.tcp_congestion_control=bbr",
        "net.ipv4.tcp_rmem=4096 131072 268435456",
        "net.ipv4.tcp_wmem=4096 16384 268435456",
    ]);
    sc.cpu = Some(CpuModel::calibrated());
    let c = run_verified(&sc).cpu.expect("figures");
    assert!(c.nodes_per_packet_in < 150.0, "{c:?}");
}

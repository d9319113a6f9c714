//! Issue 26: thousands of flows from one host, as Linux carries them with fq (or
//! fq_codel) as its default qdisc: every flow connects and they share the link
//! fairly (Jain's index >= 0.9 over the last half of the measured time).
//!
//! Behind the old 1,000-packet pfifo, 2,000 flows at 10 Gbit/s and 1 ms failed:
//! SYNs and first windows were tail-dropped behind the bulk of the others, 568
//! never connected (Jain 0.48). fq gives each socket its own queue (100 packets at
//! most) served round robin, new flows first, so a SYN never waits behind another
//! flow's backlog. 500 flows run for 0.5 s with stored payload (pfifo loses 11 of
//! them at 1 s: BENCHMARKS.md); the 2,000 flows (1 s) and 10,000 flows
//! (0.5 s, a larger fq `limit`, see its test) run with the pattern payload, whose
//! figures are the stored mode's (tests/payload_mode.rs) in a tenth of the memory
//! (10,000 flows: about 0.7 GB, against 5 GB stored), so that CI runs them too.

mod common;

use common::*;
use lowtide_sim::{PayloadMode, RunResults, Scenario, Workload};

/// `flows` bulk flows for `ms` of simulated time at 10 Gbit/s, 1 ms RTT, with
/// `net.core.default_qdisc` = `qdisc` on both hosts.
fn many(flows: u32, ms: u64, qdisc: &str) -> Scenario {
    Scenario {
        flows,
        workload: Workload::Bulk {
            duration_ns: ms * 1_000_000,
        },
        link_ab: link(10_000_000_000, 500),
        link_ba: link(10_000_000_000, 500),
        config: config(&[&format!("net.core.default_qdisc={qdisc}")]),
        ..Scenario::default()
    }
}

/// Every flow connected and delivered, the link is full, and the shares are fair.
fn assert_all_connect_and_share(r: &RunResults, qdisc: &str) {
    let idle: Vec<u32> = (r.per_flow.iter())
        .filter(|f| f.bytes_delivered == 0)
        .map(|f| f.flow)
        .collect();
    assert!(
        idle.is_empty(),
        "{qdisc}: flows that never delivered: {idle:?}"
    );
    assert!(r.goodput_bps > 8.5e9, "{qdisc}: goodput {}", r.goodput_bps);
    assert!(
        r.jain_index >= 0.9,
        "{qdisc}: Jain's index {}",
        r.jain_index
    );
    assert_eq!(
        r.nic_queues[0].qdisc, qdisc,
        "host A's device runs the qdisc"
    );
}

#[test]
fn fq_500_flows_all_connect_and_share_fairly() {
    let r = run_verified(&many(500, 500, "fq"));
    assert_all_connect_and_share(&r, "fq");
    // One fq flow per socket (and per orphan bucket of SYN-ACKs, on host B).
    let xs: std::collections::HashMap<_, _> = r.nic_queues[0].xstats.iter().copied().collect();
    assert!(xs["flows"] >= 500, "{xs:?}");
    // A packet due while no flow is eligible (the first SYNs) takes the fast path.
    assert!(xs["fastpath_packets"] > 0, "{xs:?}");
}

/// fq_codel lets every flow connect too (new flows go first); its drops (CoDel's
/// and the batches from the fattest flow) may leave a flow in RTO backoff at
/// 1 ms RTT, so only connection and delivery are asserted.
#[test]
fn fq_codel_500_flows_all_connect() {
    let r = many(500, 500, "fq_codel").run().expect("runs");
    let idle: Vec<u32> = (r.per_flow.iter())
        .filter(|f| f.bytes_delivered == 0)
        .map(|f| f.flow)
        .collect();
    assert!(idle.is_empty(), "flows that never delivered: {idle:?}");
    assert!(r.drops.queue > 0, "fq_codel dropped nothing");
    assert_eq!(r.nic_queues[0].qdisc, "fq_codel");
}

/// About 2 s of CPU in release, 0.2 GB.
#[test]
fn fq_2000_flows_all_connect_and_share_fairly() {
    let sc = Scenario {
        payload: PayloadMode::Pattern,
        ..many(2000, 1000, "fq")
    };
    let r = run_verified(&sc);
    assert_all_connect_and_share(&r, "fq");
}

/// 10,000 flows starting 1 µs apart overflow fq's default `limit` of 10,000
/// packets within about 10 ms (each flow's first window is one or more GSO packets
/// in the queue; the peak is about 38,700): 3,422 SYNs meet the full queue and
/// wait for the SYN's 1 s RTO (BENCHMARKS.md). With `limit` 100000 on host A's fq,
/// all connect and share. 0.5 s of simulated time (every flow is started within
/// the first 10 ms; the second half is measured): about 4 s of CPU in release,
/// 0.7 GB.
#[test]
fn fq_10000_flows_all_connect_and_share_fairly() {
    let sc = Scenario {
        qdisc: Some(lowtide_sim::qdisc::QdiscSpec::parse("fq,limit=100000").unwrap()),
        payload: PayloadMode::Pattern,
        ..many(10_000, 500, "fq")
    };
    let r = run_verified(&sc);
    assert_all_connect_and_share(&r, "fq");
}

/// Behind fq a socket is SK_PACING_FQ: TCP stamps departure times at its pacing
/// rate and hands packets over at once; fq holds them until then (throttling the
/// flow and waking the device at its time), so one slow-starting flow, paced far
/// below a 10 Gbit/s link, still delivers every byte.
#[test]
fn fq_holds_packets_until_their_edt_time() {
    let sc = Scenario {
        flows: 1,
        workload: Workload::Bulk {
            duration_ns: 300_000_000,
        },
        link_ab: link(10_000_000_000, 5_000),
        link_ba: link(10_000_000_000, 5_000),
        config: config(&["net.core.default_qdisc=fq"]),
        ..Scenario::default()
    };
    let r = run_verified(&sc);
    let xs: std::collections::HashMap<_, _> = r.nic_queues[0].xstats.iter().copied().collect();
    assert!(xs["throttled"] > 0, "{xs:?}");
    assert!(r.per_flow[0].bytes_delivered > 0);
}

/// The bottleneck qdisc of a scenario holds packets back and wakes the device
/// when they are due (its watchdog): fq's `maxrate` caps each flow.
#[test]
fn fq_maxrate_paces_each_flow_through_the_watchdog() {
    let sc = Scenario {
        flows: 2,
        workload: Workload::Bulk {
            duration_ns: 2_000_000_000,
        },
        link_ab: link(1_000_000_000, 5_000),
        link_ba: link(1_000_000_000, 5_000),
        qdisc: Some(lowtide_sim::qdisc::QdiscSpec::parse("fq,maxrate=100mbit").unwrap()),
        ..Scenario::default()
    };
    let r = run_verified(&sc);
    for f in &r.per_flow {
        assert!(
            f.goodput_bps > 80e6 && f.goodput_bps < 101e6,
            "flow {}: {}",
            f.flow,
            f.goodput_bps
        );
    }
    assert_eq!(
        (r.nic_queues[0].qdisc, r.nic_queues[1].qdisc),
        ("fq", "pfifo")
    );
}

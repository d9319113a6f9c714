//! Receive checksums (issue 14): without a corrupting link the receivers trust the
//! TCP checksums (`CHECKSUM_UNNECESSARY`, as Linux trusts CHECKSUM_PARTIAL over veth)
//! and the results are exactly those of full verification; with `corrupt` > 0, or
//! with `verify_checksums`, every checksum is verified and corruption is caught.

mod common;
use common::*;
use lowtide::Mib;
use lowtide_sim::{RunResults, Scenario, Workload};

fn scenario(corrupt: f64, gro: bool, verify_checksums: bool) -> Scenario {
    let mut sc = Scenario {
        seed: 7,
        workload: Workload::Bulk {
            duration_ns: 1_000_000_000,
        },
        link_ab: link(200_000_000, 1_000),
        link_ba: link(200_000_000, 1_000),
        gro,
        verify_checksums,
        ..Scenario::default()
    };
    sc.link_ab.loss = 0.001;
    sc.link_ab.corrupt = corrupt;
    sc
}

/// The results as JSON, without the wall-clock field.
fn json(r: &RunResults) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("sim_wall_s");
    v
}

#[test]
fn trusting_checksums_changes_no_result() {
    for gro in [true, false] {
        let trusted = scenario(0.0, gro, false).run().unwrap();
        let verified = scenario(0.0, gro, true).run().unwrap();
        assert!(trusted.bytes_verified);
        assert!(trusted.sim_packets > 5_000, "{}", trusted.sim_packets);
        assert_eq!(json(&trusted), json(&verified), "gro {gro}");
    }
}

#[test]
fn corruption_is_still_caught() {
    for (gro, verify) in [(true, false), (false, false), (true, true)] {
        let r = scenario(0.01, gro, verify).run().unwrap();
        let corrupted = r.links[0].stats.corrupted;
        let caught = r.counters_receiver.get(Mib::TcpInCsumErrors)
            + r.counters_receiver.get(Mib::IpInHdrErrors);
        assert!(corrupted > 20, "{corrupted} corrupted");
        // Every corrupted segment is dropped and counted: a flipped bit in the IP
        // header is an IP header error, anywhere else a TCP checksum error (a flip in
        // the Ethernet framing that the link model counts is not possible: the model
        // flips a byte of the IP packet).
        assert_eq!(caught, corrupted, "gro {gro}, verify {verify}");
        assert!(r.bytes_verified, "every byte still arrives intact");
    }
}

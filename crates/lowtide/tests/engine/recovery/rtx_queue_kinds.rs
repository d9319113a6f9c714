//! `experimental.rtx_queue`: the tree and the list give the same packets on the wire
//! for the same lossy run (seed 003 changes the cost, not the behaviour).

use crate::common::*;
use lowtide::config::RtxQueueKind;
use lowtide::Config;
use std::time::Duration;

/// A 400 KB transfer with every 23rd data segment from A dropped once; returns the
/// wire trace and what B read.
fn lossy_run(kind: RtxQueueKind) -> (Vec<(lowtide::Instant, Vec<u8>)>, Vec<u8>) {
    let cfg = Config {
        rtx_queue: kind,
        ..Config::default()
    };
    let (mut p, c, s) = establish(cfg);
    let mut n = 0u32;
    p.filter = Some(Box::new(move |dir, pkt| {
        if matches!(dir, Dir::AtoB) && pkt.len() > 100 {
            n += 1;
            if n.is_multiple_of(23) {
                return Verdict::Drop;
            }
        }
        Verdict::Pass
    }));
    let data = pattern(400_000, 9);
    let mut sent = 0;
    let mut got = Vec::new();
    p.drive_until(Duration::from_secs(60), |p| {
        if sent < data.len() {
            if let Ok(k) = p.a.send(p.now, c, &data[sent..]) {
                sent += k;
            }
        }
        got.extend(drain(&mut p.b, p.now, s));
        got.len() == data.len()
    });
    assert_eq!(got, data);
    let mib = p.a.counters();
    assert!(mib.get(lowtide::Mib::TcpRetransSegs) > 0);
    assert!(mib.get(lowtide::Mib::TcpExtTCPSackMerged) > 0);
    let wire = p.wire.iter().map(|(t, _, b)| (*t, b.clone())).collect();
    (wire, got)
}

#[test]
fn tree_and_list_put_the_same_packets_on_the_wire() {
    let (tree, _) = lossy_run(RtxQueueKind::Tree);
    let (list, _) = lossy_run(RtxQueueKind::List);
    assert!(tree.len() > 300);
    assert_eq!(tree.len(), list.len());
    assert!(tree == list, "wire traces differ");
}

//! `tcp_segs_in` (`tcp_v4_rcv`, `tcp_child_process`): `tcpi_segs_in` and
//! `tcpi_data_segs_in` count every segment the socket is handed, before
//! `tcp_validate_incoming` or `tcp_data_queue` can drop it: an old duplicate that
//! `tcp_sequence` drops, or data after a PAWS failure, still counts.

use crate::common::*;
use lowtide::Config;
use lowtide_wire::tcp::TcpFlags;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

#[test]
fn segments_dropped_by_validation_still_count_as_data_segs_in() {
    let (mut p, c, _s) = establish(Config::default());
    p.filter = Some(Box::new(|_, _| Verdict::Drop)); // the test plays B from here
    let mut b = learn(&p, Dir::AtoB);
    let counts = |p: &Pair| {
        let i = p.a.info(p.now, c).unwrap();
        (i.segs_in, i.data_segs_in)
    };
    let (segs, data) = counts(&p);
    // In order: queued.
    p.inject(false, &b.now(TcpFlags::ACK | TcpFlags::PSH, &[7; 100]));
    p.drive_for(MS);
    assert_eq!(counts(&p), (segs + 1, data + 1));
    // The same bytes again, wholly below rcv_wup (A ACKed them at once): tcp_sequence
    // drops the segment (SKB_DROP_REASON_TCP_OLD_SEQUENCE) with a duplicate ACK.
    p.inject(false, &b.now(TcpFlags::ACK | TcpFlags::PSH, &[7; 100]));
    p.drive_for(MS);
    assert_eq!(counts(&p), (segs + 2, data + 2));
    // An old timestamp: tcp_paws_discard drops new data before tcp_data_queue.
    b.seq = b.seq.wrapping_add(100);
    let old_ts = Peer {
        ts_val: b.ts_val.wrapping_sub(1000),
        ..b
    };
    p.inject(false, &old_ts.now(TcpFlags::ACK, &[7; 100]));
    p.drive_for(MS);
    assert_eq!(counts(&p), (segs + 3, data + 3));
    assert_eq!(p.a.info(p.now, c).unwrap().bytes_received, 100);
    // A pure ACK is a segment without data.
    p.inject(false, &b.now(TcpFlags::ACK, &[]));
    p.drive_for(MS);
    assert_eq!(counts(&p), (segs + 4, data + 3));
}

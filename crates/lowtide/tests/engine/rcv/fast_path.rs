//! `tcp_rcv_established`'s fast path for in-order data (tcp/fastpath.rs): when the
//! segment's ACK equals `snd_una`, Linux calls no `tcp_ack` at all ("only one small
//! jumplet in fast path"), so `rcv_tstamp` (`tcpi_last_ack_recv`) stays; a predicted
//! pure ACK and any segment the prediction misses go through `tcp_ack`.

use crate::common::*;
use lowtide::{Config, Mib};
use lowtide_wire::tcp::TcpFlags;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// B's next 100 bytes of data with `flags`, acknowledging what A sent.
fn data(p: &mut Pair, b: &mut Peer, flags: TcpFlags, window: Option<u16>) {
    let mut th = Seg::parse(&b.seg(flags, b.seq, b.ack, &[])).th;
    th.window = window.unwrap_or(th.window);
    p.inject(false, &build(b.src, b.dst, &th, &[7u8; 100], 7));
    b.seq = b.seq.wrapping_add(100);
}

#[test]
fn predicted_data_that_acks_nothing_new_skips_tcp_ack() {
    let (mut p, c, _s) = establish(Config::default());
    p.filter = Some(Box::new(|_, _| Verdict::Drop)); // the test plays B from here
    let mut b = learn(&p, Dir::AtoB);
    let hits = |p: &Pair| p.a.counters().get(Mib::TcpExtTCPHPHits);
    let last_ack = |p: &Pair| p.a.info(p.now, c).unwrap().last_ack_recv;
    // The first data (a new window: the slow path) goes through tcp_ack, and
    // tcp_data_queue arms the prediction (tcp_fast_path_check).
    p.drive_for(50 * MS);
    data(&mut p, &mut b, TcpFlags::ACK, None);
    assert_eq!((hits(&p), last_ack(&p)), (0, 0));
    // Predicted data with ack == snd_una: no tcp_ack, rcv_tstamp stays.
    p.drive_for(50 * MS);
    data(&mut p, &mut b, TcpFlags::ACK | TcpFlags::PSH, None);
    assert_eq!((hits(&p), last_ack(&p)), (1, 50));
    // A predicted pure ACK of nothing new: tcp_ack(sk, skb, 0) all the same.
    p.drive_for(50 * MS);
    p.inject(false, &b.seg(TcpFlags::ACK, b.seq, b.ack, &[]));
    assert_eq!((hits(&p), last_ack(&p)), (1, 0));
    // Data the prediction misses (another window): the slow path's tcp_ack.
    p.drive_for(50 * MS);
    data(&mut p, &mut b, TcpFlags::ACK, Some(1000));
    assert_eq!((hits(&p), last_ack(&p)), (1, 0));
}

/// `tcp_try_coalesce`: in-order data that joins the receive queue's tail
/// (`tcp_queue_rcv`), and out-of-order data that joins the segment ending where it
/// starts (`tcp_ooo_try_coalesce`), count `TcpExtTCPRcvCoalesce`; a segment that
/// starts a queue does not.
#[test]
fn joined_segments_count_rcv_coalesce() {
    let (mut p, _c, _s) = establish(Config::default());
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    let mut b = learn(&p, Dir::AtoB);
    let joined = |p: &Pair| p.a.counters().get(Mib::TcpExtTCPRcvCoalesce);
    data(&mut p, &mut b, TcpFlags::ACK, None);
    assert_eq!(joined(&p), 0, "the first segment starts the queue");
    data(&mut p, &mut b, TcpFlags::ACK, None);
    assert_eq!(joined(&p), 1);
    // Above a hole of 100 bytes: the first starts the out-of-order queue, the
    // second joins it.
    b.seq = b.seq.wrapping_add(100);
    data(&mut p, &mut b, TcpFlags::ACK, None);
    assert_eq!(joined(&p), 1);
    data(&mut p, &mut b, TcpFlags::ACK, None);
    assert_eq!(joined(&p), 2);
}

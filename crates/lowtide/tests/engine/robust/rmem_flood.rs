//! Issue 27 item 1: a peer that spends the receiver's memory with tiny segments.
//! Receive memory is charged per segment as Linux charges skbs (`sk_rmem_alloc`) and
//! bounded by the buffer (`tcp_try_rmem_schedule`, `tcp_prune_queue`): the segments
//! beyond it are dropped with Linux's counters, and the connection still carries the
//! sender's bytes intact (the forged bytes are the stream's own, as a blind attacker
//! who only knows the sequence numbers could not hurt it more).

use crate::common::*;
use lowtide::tcp::skbuff::rx_truesize;
use lowtide::{Config, Mib, SocketHandle};
use lowtide_wire::tcp::TcpFlags;

/// `sk_rmem_alloc` and `sk_rcvbuf` of A's socket.
fn mem(p: &Pair, c: SocketHandle) -> (u64, u32) {
    let i = p.a.info(p.now, c).unwrap();
    (i.rmem_alloc, i.rcvbuf)
}

/// The buffer's ceiling in these tests (`tcp_rmem[2]`): small, so that a flood
/// reaches it in a few thousand segments.
const RMEM_MAX: u32 = 1 << 20;

/// A config whose receive buffers stop growing at `max` bytes.
fn rmem_max(max: u32) -> Config {
    let mut cfg = Config::default();
    cfg.tcp_rmem[2] = max;
    cfg
}

/// 1-byte segments with 1-byte gaps over the whole window (its upper half first,
/// then the lower half). As on Linux 6.18 (`tcp_can_ingest` admits while the memory
/// charged is within `sk_rcvbuf`, and `tcp_clamp_window` raises `sk_rcvbuf` to what
/// is charged), the buffer follows the flood up to `tcp_rmem[2]` and no further;
/// memory stays within the buffer plus one segment; what does not fit is dropped
/// (`TcpExtTCPOFODrop`, `TcpExtRcvPruned`), and the later, lower segments prune the
/// higher ones (`TcpExtOfoPruned`).
#[test]
fn one_byte_out_of_order_fill_stays_within_rcvbuf() {
    let (mut p, c, s) = establish(rmem_max(RMEM_MAX));
    let rcvbuf0 = mem(&p, c).1;
    let forger = learn(&p, Dir::AtoB);
    let win = p.a.info(p.now, c).unwrap().rcv_wnd;
    let data = pattern(400_000, 9);
    let half = (win / 2) & !1;
    let offsets = (half + 1..win).step_by(2).chain((1..half).step_by(2));
    let mut worst = 0i64;
    for off in offsets {
        let seg = forger.seg(
            TcpFlags::ACK,
            forger.seq.wrapping_add(off),
            forger.ack,
            &data[off as usize..off as usize + 1],
        );
        p.inject(false, &seg);
        let (rmem, rcvbuf) = mem(&p, c);
        worst = worst.max(rmem as i64 - rcvbuf as i64);
    }
    assert!(
        worst <= rx_truesize(1) as i64,
        "sk_rmem_alloc exceeded sk_rcvbuf by {worst}"
    );
    let (rmem, rcvbuf) = mem(&p, c);
    assert!(
        rcvbuf > rcvbuf0 && rcvbuf <= RMEM_MAX,
        "the buffer grew from {rcvbuf0} up to tcp_rmem[2] at most: {rcvbuf}"
    );
    assert!(
        rmem > rcvbuf as u64 / 2,
        "the buffer was used: {rmem} of {rcvbuf}"
    );
    let n = |m| p.a.counters().get(m);
    let queued = n(Mib::TcpExtTCPOFOQueue);
    let dropped = n(Mib::TcpExtTCPOFODrop);
    assert_eq!(
        queued + dropped,
        win as u64 / 2,
        "every segment queued or dropped"
    );
    assert!(
        queued <= 2 * (rcvbuf / rx_truesize(1)) as u64 + 200,
        "{queued} queued"
    );
    assert!(n(Mib::TcpExtPruneCalled) >= dropped && dropped > win as u64 / 4);
    assert!(n(Mib::TcpExtRcvPruned) > 0 && n(Mib::TcpExtOfoPruned) > 0);
    assert_eq!(send_all(&mut p, false, s, c, &data), data);
}

/// An ascending fill past `tcp_rmem[2]`: each segment beyond the buffer would land
/// last in the out-of-order queue, so `tcp_prune_ofo_queue` drops nothing and the
/// segment is dropped instead; `TcpExtOfoPruned` counts only calls that pruned
/// (Linux 6.2+), so it stays at zero while `TcpExtPruneCalled` counts every one.
#[test]
fn an_ascending_fill_prunes_nothing_below_it() {
    let (mut p, c, _s) = establish(rmem_max(RMEM_MAX));
    let forger = learn(&p, Dir::AtoB);
    let win = p.a.info(p.now, c).unwrap().rcv_wnd;
    for off in (1..win).step_by(2) {
        let seg = forger.seg(
            TcpFlags::ACK,
            forger.seq.wrapping_add(off),
            forger.ack,
            &[7],
        );
        p.inject(false, &seg);
    }
    let n = |m| p.a.counters().get(m);
    assert!(
        n(Mib::TcpExtTCPOFODrop) > 0,
        "the fill went past the buffer"
    );
    assert!(n(Mib::TcpExtPruneCalled) >= n(Mib::TcpExtTCPOFODrop));
    assert_eq!(
        n(Mib::TcpExtOfoPruned),
        0,
        "nothing above an arriving segment"
    );
}

/// Tiny in-order segments the application does not read: each costs a whole
/// buffer, less the `struct sk_buff` when it joins the tail skb; once the buffer
/// can grow no more (`tcp_rmem[2]`), the receive queue is collapsed into
/// page-sized buffers (`tcp_collapse`, `TcpExtTCPRcvCollapsed` counting skbs) and
/// all of them fit (past `sk_rcvbuf` by at most the fast path's reserve).
#[test]
fn tiny_in_order_segments_are_collapsed() {
    let (mut p, c, _s) = establish(rmem_max(256 << 10));
    let forger = learn(&p, Dir::AtoB);
    let data = pattern(3000, 3);
    for (i, b) in data.iter().enumerate() {
        let seq = forger.seq.wrapping_add(i as u32);
        p.inject(false, &forger.seg(TcpFlags::ACK, seq, forger.ack, &[*b]));
        let (rmem, rcvbuf) = mem(&p, c);
        // tcp_rcv_established's fast path queues a segment on the reserve
        // sk_forward_alloc holds without tcp_can_ingest, so the charge may pass
        // sk_rcvbuf by that much: under a page plus the segment's truesize that
        // tcp_try_rmem_schedule asked for when its bytes joined the tail for
        // less (only sk_mem_uncharge reclaims).
        let reserve = 4096 + rx_truesize(1) as u64;
        assert!(rmem <= rcvbuf as u64 + reserve, "{rmem} {rcvbuf}");
    }
    let n = |m| p.a.counters().get(m);
    // Most segments join the tail skb (tcp_try_coalesce: a head stolen as a frag,
    // up to MAX_SKB_FRAGS), so tcp_collapse frees and counts those skbs.
    let (collapsed, coalesced) = (n(Mib::TcpExtTCPRcvCollapsed), n(Mib::TcpExtTCPRcvCoalesce));
    assert!(collapsed > 50, "collapsed {collapsed}");
    assert!(coalesced > 2000, "coalesced {coalesced}");
    assert_eq!(n(Mib::TcpExtTCPRcvQDrop), 0);
    assert!(mem(&p, c).0 < 3000 * rx_truesize(1) as u64 / 10);
    assert_eq!(drain(&mut p.a, p.now, c), data);
}

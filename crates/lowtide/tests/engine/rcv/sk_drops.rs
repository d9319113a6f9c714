//! `sk_drops` (`SO_MEMINFO`'s `SK_MEMINFO_DROPS`, crates/lowtide/src/tcp/drops.rs):
//! what Linux 6.18 counts through `tcp_drop_reason`, `tcp_v4_rcv`'s
//! `discard_and_relse` and `tcp_listendrop`, and what it consumes uncounted.

use crate::common::*;
use lowtide::{Config, Mib, RxChecksum, SocketHandle, Stack, TcpState};
use lowtide_wire::tcp::TcpFlags;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn drops(st: &Stack, h: SocketHandle) -> u32 {
    st.socket_ref(h).sk_drops().unwrap()
}

/// A plays A's socket `c`; the test plays B from here on.
fn played() -> (Pair, SocketHandle, Peer) {
    let (mut p, c, _s) = establish(Config::default());
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    let b = learn(&p, Dir::AtoB);
    (p, c, b)
}

#[test]
fn validation_and_ack_drops_count_consumed_segments_do_not() {
    let (mut p, c, mut b) = played();
    assert_eq!(drops(&p.a, c), 0);
    let step = |p: &mut Pair, pkt: Vec<u8>, want: u32, what: &str| {
        p.inject(false, &pkt);
        p.drive_for(MS);
        assert_eq!(drops(&p.a, c), want, "{what}");
    };
    // In-order data and a pure ACK: queued, consumed.
    step(
        &mut p,
        b.now(TcpFlags::ACK | TcpFlags::PSH, &[1; 100]),
        0,
        "in order",
    );
    step(
        &mut p,
        b.seg(TcpFlags::ACK, b.seq + 100, b.ack, &[]),
        0,
        "pure ACK",
    );
    // The same bytes again: tcp_sequence's OLD_SEQUENCE (below rcv_wup).
    step(
        &mut p,
        b.now(TcpFlags::ACK | TcpFlags::PSH, &[1; 100]),
        1,
        "old",
    );
    b.seq = b.seq.wrapping_add(100);
    // PAWS: an old TSval on new data.
    let old_ts = Peer {
        ts_val: b.ts_val.wrapping_sub(1000),
        ..b
    };
    step(&mut p, old_ts.now(TcpFlags::ACK, &[2; 100]), 2, "PAWS");
    // Beyond the window: INVALID_SEQUENCE.
    let far = b.seq.wrapping_add(1 << 24);
    step(
        &mut p,
        b.seg(TcpFlags::ACK, far, b.ack, &[3; 10]),
        3,
        "beyond window",
    );
    // An ACK of data never sent: tcp_ack's ACK_UNSENT_DATA.
    step(
        &mut p,
        b.seg(TcpFlags::ACK, b.seq, b.ack + 5000, &[]),
        4,
        "unsent",
    );
    // No ACK, RST or SYN: TCP_FLAGS.
    step(
        &mut p,
        b.seg(TcpFlags::PSH, b.seq, b.ack, &[4; 10]),
        5,
        "flags",
    );
    // A reset not at rcv_nxt but in the window: challenge ACK, dropped.
    step(&mut p, b.seg(TcpFlags::RST, b.seq + 10, 0, &[]), 6, "reset");
    // A SYN in the window: challenge ACK, dropped.
    step(&mut p, b.seg(TcpFlags::SYN, b.seq, 0, &[]), 7, "SYN");
    // An acceptable reset ends the connection uncounted (tcp_reset, __kfree_skb).
    p.inject(false, &b.seg(TcpFlags::RST, b.seq, 0, &[]));
    p.drive_for(MS);
    assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    assert_eq!(drops(&p.a, c), 7);
}

#[test]
fn ofo_merges_count_the_segments_coalesced_into_the_skb_they_drop() {
    let (mut p, c, b) = played();
    let coalesced = p.a.counters().get(Mib::TcpExtTCPRcvCoalesce);
    // Two adjoining segments above a hole: one skb of two segments.
    p.inject(false, &b.seg(TcpFlags::ACK, b.seq + 100, b.ack, &[1; 100]));
    p.inject(false, &b.seg(TcpFlags::ACK, b.seq + 200, b.ack, &[1; 100]));
    p.drive_for(MS);
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPRcvCoalesce), coalesced + 1);
    assert_eq!(drops(&p.a, c), 0);
    // A segment all of whose bytes are there: dropped (TcpExtTCPOFOMerge).
    p.inject(false, &b.seg(TcpFlags::ACK, b.seq + 150, b.ack, &[1; 50]));
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 1);
    // One from the same start covering it replaces the skb of two segments.
    p.inject(false, &b.seg(TcpFlags::ACK, b.seq + 100, b.ack, &[1; 300]));
    p.drive_for(MS);
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPOFOMerge), 2);
    assert_eq!(drops(&p.a, c), 3);
    // The hole filled: everything queued, nothing dropped.
    p.inject(false, &b.now(TcpFlags::ACK, &[1; 100]));
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 3);
    assert_eq!(drain(&mut p.a, p.now, c).len(), 400);
}

#[test]
fn after_the_peers_fin_segments_at_rcv_nxt_are_not_queued_and_count() {
    let (mut p, c, mut b) = played();
    p.inject(false, &b.now(TcpFlags::ACK | TcpFlags::FIN, &[]));
    p.drive_for(MS);
    b.seq = b.seq.wrapping_add(1);
    assert_eq!(p.a.state(c), Ok(TcpState::CloseWait));
    // CLOSE-WAIT: a pure ACK at rcv_nxt goes through tcp_rcv_state_process's
    // `if (!queued)`.
    p.inject(false, &b.now(TcpFlags::ACK, &[]));
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 1);
    // LAST-ACK: an ACK that does not cover our FIN, counted; the one that does
    // ends the connection, consumed.
    p.a.shutdown(p.now, c, lowtide::Shutdown::Write).unwrap();
    p.drive_for(MS);
    assert_eq!(p.a.state(c), Ok(TcpState::LastAck));
    p.inject(false, &b.now(TcpFlags::ACK, &[]));
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 2);
    p.inject(false, &b.seg(TcpFlags::ACK, b.seq, b.ack + 1, &[]));
    p.drive_for(MS);
    assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    assert_eq!(drops(&p.a, c), 2);
}

#[test]
fn listener_counts_its_own_drops_and_its_requests() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    p.filter = Some(Box::new(|_, _| Verdict::Drop)); // the test plays A
    let l = p.b.listen(addr(B, 80), 4).unwrap();
    let peer = Peer {
        src: addr(A, 4000),
        dst: addr(B, 80),
        seq: 1000,
        ack: 0,
        ts_ecr: 0,
        ts_val: 1,
    };
    let listendrops = p.b.counters().get(Mib::TcpExtListenDrops);
    // A reset and a segment without SYN, ACK or RST: tcp_rcv_state_process in
    // LISTEN drops them; an ACK is answered with a reset, uncounted.
    p.inject(true, &peer.seg(TcpFlags::RST, 1000, 0, &[]));
    p.inject(true, &peer.seg(TcpFlags::PSH, 1000, 0, &[1]));
    p.inject(true, &peer.seg(TcpFlags::ACK, 1000, 5, &[]));
    p.drive_for(MS);
    assert_eq!(drops(&p.b, l), 2);
    // A SYN makes a request; the same SYN again is answered by the request
    // (tcp_check_req returns NULL: the listener's discard_and_relse).
    let syn = peer.seg(TcpFlags::SYN, 999, 0, &[]);
    p.inject(true, &syn);
    p.drive_for(MS);
    assert_eq!(drops(&p.b, l), 2);
    p.inject(true, &syn);
    p.drive_for(MS);
    assert_eq!(drops(&p.b, l), 3);
    // A segment without ACK to the request: dropped on the listener's count.
    p.inject(true, &peer.seg(TcpFlags::PSH, 1000, 0, &[1]));
    p.drive_for(MS);
    assert_eq!(drops(&p.b, l), 4);
    assert_eq!(p.b.counters().get(Mib::TcpExtListenDrops), listendrops);
}

#[test]
fn syn_sent_drops_a_reset_without_ack_and_a_segment_without_syn() {
    let (mut p, c) = syn_sent_to_b(MS);
    let a = learn(&p, Dir::AtoB);
    // No ACK: "drop the segment and return".
    p.inject(false, &a.seg(TcpFlags::RST, 5000, 0, &[]));
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 1);
    // An acceptable ACK without SYN: discard_and_undo.
    p.inject(false, &a.seg(TcpFlags::ACK, 5000, a.ack, &[]));
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 2);
    assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
}

#[test]
fn bad_checksums_count_only_on_an_established_connection_past_checksum_break() {
    let (mut p, c, b) = played();
    let corrupt = |mut pkt: Vec<u8>| {
        let n = pkt.len();
        pkt[n - 1] ^= 0xff; // the payload's last byte: the TCP checksum fails
        pkt
    };
    // 32 header bytes and 40 of data: 72 <= CHECKSUM_BREAK, checked by
    // skb_checksum_init before any socket is looked up.
    p.inject_csum(
        false,
        &corrupt(b.now(TcpFlags::ACK, &[1; 40])),
        RxChecksum::Verify,
    );
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 0);
    // Longer: tcp_rcv_established's csum_error, a tcp_drop_reason.
    p.inject_csum(
        false,
        &corrupt(b.now(TcpFlags::ACK, &[1; 100])),
        RxChecksum::Verify,
    );
    p.drive_for(MS);
    assert_eq!(drops(&p.a, c), 1);
    assert_eq!(p.a.counters().get(Mib::TcpInCsumErrors), 2);
}

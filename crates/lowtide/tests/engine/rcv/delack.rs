//! Delayed ACKs as Linux times them (tcp/delack.rs): `ato` follows the peer's
//! inter-arrival time and doubles when a delayed ACK had to go alone; a connection
//! that answers within `ato` is in pingpong mode, where the ACK of a request rides
//! on the reply instead of leaving as a quick ACK; a duplicate ends pingpong mode.

use crate::common::*;
use lowtide::{Config, Mib};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// B's segments since wire index `from`: (pure ACKs, data segments).
fn from_b(p: &Pair, from: usize) -> (usize, usize) {
    let segs = p.sent_since(from, Dir::BtoA);
    let data = segs.iter().filter(|s| !s.payload.is_empty()).count();
    (segs.len() - data, data)
}

/// One request from A, answered by B `think` later; returns B's (pure ACKs, data
/// segments) for the exchange.
fn request_reply(
    p: &mut Pair,
    (c, s): (lowtide::SocketHandle, lowtide::SocketHandle),
    think: Duration,
) -> (usize, usize) {
    let from = p.wire.len();
    p.a.send(p.now, c, b"GET / HTTP/1.1\r\n\r\n").unwrap();
    p.drive_for(p.delay + MS);
    assert_eq!(drain(&mut p.b, p.now, s).len(), 18);
    p.drive_for(think);
    p.b.send(p.now, s, &[7u8; 300]).unwrap();
    p.drive_for(p.delay * 2 + 100 * MS);
    assert_eq!(drain(&mut p.a, p.now, c).len(), 300);
    from_b(p, from)
}

#[test]
fn a_request_is_acked_by_the_reply_in_pingpong_mode() {
    let (mut p, c, s) = establish(Config::default());
    // The first exchange: B has not replied yet, so its quick ACK goes alone.
    assert_eq!(request_reply(&mut p, (c, s), 5 * MS), (1, 1));
    // From then on B answers within ato: pingpong mode, no quick ACK; the reply
    // (5 ms later, under the delayed-ACK timeout) carries the ACK.
    for round in 0..5 {
        assert_eq!(
            request_reply(&mut p, (c, s), 5 * MS),
            (0, 1),
            "round {round}: a pure ACK before the reply"
        );
    }
    // A reply that takes longer than the delayed-ACK timeout: the ACK goes alone
    // at the timeout, pingpong mode ends (tcp_delack_timer_handler).
    assert_eq!(request_reply(&mut p, (c, s), 150 * MS), (1, 1));
    assert_eq!(p.b.counters().get(Mib::TcpExtDelayedACKs), 1);
}

#[test]
fn ato_follows_the_inter_arrival_time_and_doubles_on_a_lone_delayed_ack() {
    let (mut p, c, s) = establish(Config::default());
    // One small segment every 30 ms, never answered nor read (a read would ACK the
    // pushed segment at once, tcp_cleanup_rbuf): after the quick ACKs of the start,
    // each waits for the delayed-ACK timer, which doubles ato each time (up to the
    // RTO), bounded by the RTT (20 ms here, at least 40 ms).
    let mut atos = Vec::new();
    for _ in 0..24 {
        p.a.send(p.now, c, b"x").unwrap();
        p.drive_for(30 * MS);
        atos.push(p.b.info(p.now, s).unwrap().ato);
    }
    p.drive_for(1000 * MS); // Nagle holds the last bytes until their ACK
    assert_eq!(drain(&mut p.b, p.now, s).len(), 24);
    assert_eq!(atos[0], 40_000, "TCP_ATO_MIN at the first data");
    // A gap of 30 ms under ato: ato/2 + m, then the timer's doublings.
    assert!(atos.iter().any(|&a| a > 40_000), "{atos:?}");
    assert!(
        atos.iter().all(|&a| a <= 1_000_000),
        "bounded by the RTO: {atos:?}"
    );
    assert!(p.b.counters().get(Mib::TcpExtDelayedACKs) > 0);
}

#[test]
fn a_duplicate_is_acked_at_once_even_in_pingpong_mode() {
    let (mut p, c, s) = establish(Config::default());
    request_reply(&mut p, (c, s), 5 * MS);
    request_reply(&mut p, (c, s), 5 * MS);
    // Replay A's last data segment to B: tcp_enter_quickack_mode, ACK now.
    let last = p
        .wire
        .iter()
        .rev()
        .find(|(_, d, pkt)| *d == Dir::AtoB && Seg::parse(pkt).payload.len() == 18)
        .map(|(_, _, pkt)| pkt.clone())
        .unwrap();
    let from = p.wire.len();
    p.inject(true, &last);
    assert_eq!(from_b(&p, from), (1, 0), "an immediate ACK");
    assert_eq!(p.b.counters().get(Mib::TcpExtDelayedACKLost), 1);
}

/// After a warm-up, A writes 100 bytes (a pushed segment smaller than the MSS) and
/// B reads them `read_after` the arrival (never, if `None`): when B's pure ACK of
/// them left, counted from their arrival.
fn ack_of_a_small_write(read_after: Option<Duration>) -> Duration {
    let (mut p, c, s) = establish(Config::default());
    let warm = pattern(200_000, 3);
    assert_eq!(send_all(&mut p, true, c, s, &warm).len(), warm.len());
    p.drive_for(50 * MS); // under the RTO: no "too long gap" quick ACKs
    p.a.send(p.now, c, &[5u8; 100]).unwrap();
    let arrival = p.now + p.delay;
    let from = p.wire.len();
    p.drive_for(p.delay);
    if let Some(after) = read_after {
        p.drive_for(after);
        assert_eq!(drain(&mut p.b, p.now, s).len(), 100);
    }
    p.drive_for(300 * MS);
    let acks: Vec<_> = p.wire[from..]
        .iter()
        .filter(|(_, d, pk)| *d == Dir::BtoA && Seg::parse(pk).is_pure_ack())
        .map(|(t, _, _)| t.saturating_since(arrival))
        .collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    acks[0]
}

#[test]
fn a_pushed_small_segment_is_acked_when_the_reader_drains_it() {
    // tcp_measure_rcv_mss marks the segment ICSK_ACK_PUSHED; the read that empties
    // the receive queue sends the ACK at once (__tcp_cleanup_rbuf), not at the
    // delayed-ACK timeout.
    assert_eq!(ack_of_a_small_write(Some(3 * MS)), 3 * MS);
    let unread = ack_of_a_small_write(None);
    assert!(
        unread >= 40 * MS,
        "unread: the delayed-ACK timer ({unread:?})"
    );
}

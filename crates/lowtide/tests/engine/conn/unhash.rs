//! `tcp_done` unhashes: a connection reset by its peer, aborted by the application or
//! timed out leaves the connection table at once, while the application's handle
//! still reads the error. The peer's next segment then finds no socket and is answered
//! as `tcp_v4_send_reset` answers any segment for no connection.

use crate::common::*;
use lowtide::{Config, SocketError, TcpState};
use lowtide_wire::tcp::TcpFlags as F;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Injects `pkt` into A and returns A's replies.
fn poke_a(p: &mut Pair, pkt: &[u8]) -> Vec<Seg> {
    let mark = p.wire.len();
    p.inject(false, pkt);
    p.sent_since(mark, Dir::AtoB)
}

/// The peer's data segment is answered with a RST from its ACK (no ACK flag).
fn assert_data_is_reset(p: &mut Pair, peer: &Peer) {
    let out = poke_a(p, &peer.now(F::ACK | F::PSH, b"late"));
    let rsts: Vec<&Seg> = out.iter().filter(|s| s.has(F::RST)).collect();
    assert_eq!(rsts.len(), 1, "{out:?}");
    assert!(!rsts[0].has(F::ACK), "{out:?}");
    assert_eq!(rsts[0].th.seq, peer.ack);
}

#[test]
fn after_an_exact_rst_the_peers_data_is_reset() {
    let (mut p, c, _s) = warm();
    let peer = learn(&p, Dir::AtoB);
    poke_a(&mut p, &peer.seg(F::RST, peer.seq, 0, &[]));
    assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    assert_eq!(p.a.connection_count(), 0, "unhashed at once");
    assert_data_is_reset(&mut p, &peer);
    // The handle still reads the error, then EOF.
    assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::ConnectionReset)));
    assert_eq!(p.a.recv(p.now, c, &mut [0; 8]), Ok(0));
    p.a.close(p.now, c).unwrap();
}

#[test]
fn after_an_abort_the_peers_data_is_reset() {
    let (mut p, c, _s) = warm();
    let peer = learn(&p, Dir::AtoB);
    p.a.abort(p.now, c).unwrap();
    p.drive_for(MS);
    assert_eq!(p.a.connection_count(), 0);
    assert_data_is_reset(&mut p, &peer);
}

#[test]
fn after_a_retransmission_timeout_the_peers_data_is_reset() {
    let cfg = Config {
        tcp_retries2: 3,
        ..Config::default()
    };
    let (mut p, c, s) = establish(cfg);
    assert_eq!(send_all(&mut p, false, s, c, b"world"), b"world");
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    p.a.send(p.now, c, b"lost").unwrap();
    p.drive_for(Duration::from_secs(120));
    p.filter = None;
    assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::TimedOut)));
    assert_eq!(p.a.connection_count(), 0);
    let mut peer = learn(&p, Dir::AtoB);
    // The peer never saw "lost": it acknowledges what it had.
    peer.ack = peer.ack.wrapping_sub(4);
    assert_data_is_reset(&mut p, &peer);
}

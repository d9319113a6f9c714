//! Closing a listener (Linux's `inet_csk_listen_stop`): children waiting in the accept
//! queue are reset, children still in SYN-RECV are dropped (as Linux drops request
//! socks whose listener is gone), and none of them ends up in a later socket that
//! reuses the listener's slot.

use crate::common::*;
use lowtide::{Config, SocketError, TcpState};
use std::time::Duration;

/// A handshake whose final ACK is held back, the listener closed and reopened (the
/// new listener takes the old one's slot), then the ACK delivered: the new listener
/// must not accept the old listener's child, and the client is reset (Linux answers
/// the ACK, which finds no socket, with a RST).
#[test]
fn syn_recv_child_of_a_closed_listener_is_not_adopted_by_a_new_one() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l1 = p.b.listen(addr(B, 80), 8).unwrap();
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    // SYN to B, SYN-ACK to A: A is established and its ACK is on the wire.
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    let held = p.take_in_flight(true);
    assert_eq!(held.len(), 1, "the final ACK");
    assert_eq!(p.b.connection_count(), 1, "B's child in SYN-RECV");
    p.b.close(p.now, l1).unwrap();
    assert_eq!(
        p.b.connection_count(),
        0,
        "the SYN-RECV child went with its listener"
    );
    let l2 = p.b.listen(addr(B, 80), 8).unwrap();
    assert_eq!(l2.index(), l1.index(), "the slot is reused");
    p.inject(true, &held[0]);
    p.drive_for(Duration::from_millis(50));
    assert_eq!(p.b.accept(l2), Err(SocketError::WouldBlock));
    assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::ConnectionReset)));
}

/// Established children nobody accepted are reset when the listener closes.
#[test]
fn accept_queue_children_are_reset() {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let c1 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_millis(100));
    assert_eq!(p.b.connection_count(), 2);
    p.b.close(p.now, l).unwrap();
    p.drive_for(Duration::from_millis(100));
    assert_eq!(p.b.connection_count(), 0);
    for c in [c1, c2] {
        assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::ConnectionReset)));
    }
}

/// `__sys_listen` and `__inet_listen_sk`: the backlog (`sk_max_ack_backlog`) is at
/// most `net.core.somaxconn`, a negative one (as `u32`) somaxconn; 0 stays 0, and
/// since `sk_acceptq_is_full` is "more than the backlog", one connection still
/// waits in the accept queue, the second's handshake ACK is dropped
/// (`TcpExtListenOverflows`). `listen` again changes only the backlog.
#[test]
fn backlog_zero_queues_one_and_negative_is_somaxconn() {
    let cfg = Config {
        somaxconn: 300,
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    let l = p.b.listen(addr(B, 80), u32::MAX).unwrap();
    assert_eq!(p.b.socket_ref(l).accept_backlog(), Ok(300));
    p.b.set_listen_backlog(l, 5).unwrap();
    assert_eq!(p.b.socket_ref(l).accept_backlog(), Ok(5));
    p.b.set_listen_backlog(l, 0).unwrap();
    assert_eq!(p.b.socket_ref(l).accept_backlog(), Ok(0));
    let c1 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_millis(100));
    assert_eq!(p.b.socket_ref(l).accept_queue_len(), Ok(1));
    assert!(p.b.counters().get(lowtide::Mib::TcpExtListenOverflows) >= 1);
    assert!(p.b.accept(l).is_ok());
    assert_eq!(p.b.accept(l), Err(SocketError::WouldBlock));
    // Both clients think they are connected; the second's ACK is retried later.
    assert_eq!(p.a.state(c1), Ok(TcpState::Established));
    assert_eq!(p.a.state(c2), Ok(TcpState::Established));
}

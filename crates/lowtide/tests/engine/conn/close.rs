//! `__tcp_close`, `tcp_disconnect` and `inet_shutdown` (tcp.c, af_inet.c), branch
//! by branch: unread data resets before a zero linger time is looked at; a zero
//! linger time resets only the states of `tcp_need_reset`, CLOSING and LAST-ACK
//! only while something is unsent; SYN-SENT closes with `ECONNRESET` and no
//! segment; leaving ESTABLISHED or CLOSE-WAIT for CLOSE counts `TcpEstabResets`
//! (`tcp_set_state`) whatever the path.

use crate::common::*;
use lowtide::{Config, Mib, Shutdown, SocketError, SocketHandle, TcpState};
use lowtide_wire::tcp::TcpFlags as F;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn count(p: &Pair, m: Mib) -> u64 {
    p.a.counters().get(m)
}

/// What A sent from `mark` on.
fn a_sent(p: &Pair, mark: usize) -> Vec<Seg> {
    p.sent_since(mark, Dir::AtoB)
}

#[test]
fn zero_linger_resets_an_established_connection_as_abort_on_data() {
    let (mut p, c, s) = warm();
    let mark = p.wire.len();
    p.a.abort(p.now, c).unwrap();
    p.drive_for(50 * MS);
    let out = a_sent(&p, mark);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].has(F::RST | F::ACK), "{out:?}");
    assert_eq!(count(&p, Mib::TcpExtTCPAbortOnData), 1);
    assert_eq!(count(&p, Mib::TcpExtTCPAbortOnClose), 0);
    assert_eq!(count(&p, Mib::TcpEstabResets), 1, "tcp_set_state");
    assert_eq!(
        p.b.recv(p.now, s, &mut [0; 8]),
        Err(SocketError::ConnectionReset)
    );
}

#[test]
fn unread_data_resets_before_the_zero_linger_time_counts() {
    let (mut p, c, s) = establish(Config::default());
    p.b.send(p.now, s, b"unread").unwrap();
    p.drive_for(50 * MS);
    let mark = p.wire.len();
    p.a.abort(p.now, c).unwrap();
    p.drive_for(MS);
    let out = a_sent(&p, mark);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].has(F::RST), "{out:?}");
    assert_eq!(count(&p, Mib::TcpExtTCPAbortOnClose), 1);
    assert_eq!(count(&p, Mib::TcpExtTCPAbortOnData), 0);
    assert_eq!(count(&p, Mib::TcpEstabResets), 1);
}

/// A in LAST-ACK, its FIN sent and not yet acknowledged (B's segments dropped).
fn last_ack_fin_sent() -> (Pair, SocketHandle) {
    let (mut p, c, s) = warm();
    p.b.shutdown(p.now, s, Shutdown::Write).unwrap();
    p.drive_for(50 * MS);
    assert_eq!(p.a.state(c), Ok(TcpState::CloseWait));
    p.filter = Some(Box::new(|d, _| match d {
        Dir::BtoA => Verdict::Drop,
        Dir::AtoB => Verdict::Pass,
    }));
    p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
    p.drive_for(MS);
    assert_eq!(p.a.state(c), Ok(TcpState::LastAck));
    (p, c)
}

#[test]
fn zero_linger_in_last_ack_after_the_fin_sends_nothing() {
    let (mut p, c) = last_ack_fin_sent();
    let mark = p.wire.len();
    p.a.abort(p.now, c).unwrap();
    p.drive_for(MS);
    assert!(a_sent(&p, mark).is_empty(), "{:?}", a_sent(&p, mark));
    assert_eq!(count(&p, Mib::TcpExtTCPAbortOnData), 1);
    assert_eq!(count(&p, Mib::TcpEstabResets), 0, "not from LAST-ACK");
    assert_eq!(p.a.connection_count(), 0);
}

#[test]
fn shutdown_in_syn_sent_closes_with_econnreset_and_sends_nothing() {
    let (mut p, c) = syn_sent_to_b(10 * MS);
    let mark = p.wire.len();
    assert_eq!(p.a.shutdown(p.now, c, Shutdown::Write), Ok(()));
    p.drive_for(5 * MS);
    assert!(a_sent(&p, mark).is_empty(), "no FIN, no RST");
    assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::ConnectionReset)));
    assert_eq!(
        p.a.shutdown(p.now, c, Shutdown::Write),
        Err(SocketError::NotConnected)
    );
    assert_eq!(count(&p, Mib::TcpEstabResets), 0);
}

#[test]
fn a_write_timeout_counts_an_established_reset() {
    let cfg = Config {
        tcp_retries2: 3,
        ..Config::default()
    };
    let (mut p, c, _s) = establish(cfg);
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    p.a.send(p.now, c, b"lost").unwrap();
    p.drive_for(Duration::from_secs(120));
    assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::TimedOut)));
    assert_eq!(count(&p, Mib::TcpExtTCPAbortOnTimeout), 1);
    assert_eq!(count(&p, Mib::TcpEstabResets), 1);
    // tcp_retransmit_timer counts TCPTimeouts before tcp_write_timeout: the timeout
    // that gave up counts too, one more than the RTO retransmissions (the others
    // are loss probes).
    let rto_retrans = count(&p, Mib::TcpRetransSegs) - count(&p, Mib::TcpExtTCPLossProbes);
    assert_eq!(count(&p, Mib::TcpExtTCPTimeouts), rto_retrans + 1);
    // One new segment (tcp_event_new_data_sent); the first RTO found Open without
    // SACKed data: no failure counter.
    assert_eq!(count(&p, Mib::TcpExtTCPOrigDataSent), 1);
    assert_eq!(count(&p, Mib::TcpExtTCPSackFailures), 0);
    // tcp_write_timeout rehashes on each timeout but the one that gives up.
    let rehashes = count(&p, Mib::TcpExtTcpTimeoutRehash);
    assert_eq!(rehashes, rto_retrans);
    assert_eq!(p.a.info(p.now, c).unwrap().rehash as u64, rehashes);
}

#[test]
fn txrehash_off_rehashes_nothing() {
    let cfg = Config {
        tcp_retries2: 3,
        txrehash: false,
        ..Config::default()
    };
    let (mut p, c, _s) = establish(cfg);
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    p.a.send(p.now, c, b"lost").unwrap();
    p.drive_for(Duration::from_secs(120));
    assert!(count(&p, Mib::TcpExtTCPTimeouts) > 1);
    assert_eq!(count(&p, Mib::TcpExtTcpTimeoutRehash), 0);
}

//! TIME-WAIT as a timewait socket (tcp_minisocks.c `tcp_time_wait`,
//! `tcp_timewait_state_process`; inet_hashtables.c `__inet_check_established`):
//! what it costs, what it answers, and who may take its 4-tuple over.

use crate::common::*;
use crate::heap;
use lowtide::{Config, Mib, Shutdown, TcpState};
use lowtide_wire::tcp::TcpFlags as F;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// `n` connections from A to B, established, then closed by A first and by B
/// once it read the EOF: A's ends in TIME-WAIT.
fn closed_by_a(cfg: Config, n: usize) -> Pair {
    let mut p = Pair::new(cfg);
    p.record = n == 1;
    let l = p.b.listen(addr(B, 80), 128).unwrap();
    let (mut cs, mut ss) = (Vec::new(), Vec::new());
    for chunk in 0..n.div_ceil(100) {
        for _ in 0..(n - chunk * 100).min(100) {
            cs.push(p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap());
        }
        p.drive_for(50 * MS);
        while let Ok(s) = p.b.accept(l) {
            ss.push(s);
        }
    }
    assert_eq!(ss.len(), n);
    for &c in &cs {
        p.a.close(p.now, c).unwrap();
    }
    p.drive_for(50 * MS);
    for &s in &ss {
        assert_eq!(p.b.recv(p.now, s, &mut [0u8; 8]), Ok(0));
        p.b.close(p.now, s).unwrap();
    }
    p.drive_for(100 * MS);
    p
}

#[test]
fn a_time_wait_socket_keeps_only_what_linux_keeps() {
    // Issue 27 item 3: a TIME-WAIT socket kept its whole Tcb (2.8 KB in RSS).
    const N: usize = 2000;
    let mut p = closed_by_a(Config::default(), N);
    assert_eq!(p.a.death_row().time_wait, N as u32);
    assert_eq!(p.b.connection_count(), 0);
    let with_tw = heap::held();
    // 60 s, which the timer wheel runs within 4.096 s after.
    p.drive_for(Duration::from_millis(64_100));
    assert_eq!(p.a.death_row().time_wait, 0);
    assert_eq!(p.a.connection_count(), 0);
    let per_tw = (with_tw - heap::held()) / N as i64;
    eprintln!("heap per TIME-WAIT socket: {per_tw} bytes");
    // The boxed tcp_timewait_sock; the slot and the table entry are the same for
    // every socket kind. 251 bytes until tw_txhash and tw_flowlabel joined it,
    // 259 until the time its timer's wheel bucket runs did.
    assert!((64..=272).contains(&per_tw), "{per_tw} bytes");
    assert_eq!(p.a.counters().get(Mib::TcpExtTW), N as u64);
}

#[test]
fn the_socket_reads_closed_and_time_wait_reacks_a_retransmitted_fin() {
    let (mut p, c, s) = establish(Config::default());
    let (local, remote) = p.a.addresses(c).unwrap();
    p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
    p.drive_for(30 * MS);
    assert_eq!(p.a.state(c), Ok(TcpState::FinWait2));
    // B's FIN reaches A; A's ACK of it is lost.
    p.filter = Some(Box::new(|d, _| match d {
        Dir::AtoB => Verdict::Drop,
        Dir::BtoA => Verdict::Pass,
    }));
    assert_eq!(p.b.recv(p.now, s, &mut [0u8; 8]), Ok(0));
    p.b.close(p.now, s).unwrap();
    p.drive_for(30 * MS);
    // tcp_time_wait ends the socket as tcp_done (CLOSED, as Linux's fd reads);
    // a timewait socket holds the 4-tuple.
    assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    assert_eq!(p.a.timewait_state(local, remote), Some(TcpState::TimeWait));
    assert_eq!(p.a.recv(p.now, c, &mut [0u8; 8]), Ok(0));
    // B retransmits its FIN: TIME-WAIT ACKs it again.
    p.filter = None;
    let mark = p.wire.len();
    p.drive_until(Duration::from_secs(5), |p| p.b.connection_count() == 0);
    let acks = p.sent_since(mark, Dir::AtoB);
    assert!(
        acks.iter().any(|s| s.is_pure_ack()),
        "no ACK of the FIN: {acks:?}"
    );
    assert_eq!(p.a.timewait_state(local, remote), Some(TcpState::TimeWait));
    p.drive_for(Duration::from_millis(64_100));
    assert_eq!(p.a.timewait_state(local, remote), None);
}

#[test]
fn a_rst_kills_time_wait_unless_tcp_rfc1337() {
    for rfc1337 in [0u8, 1] {
        let cfg = Config {
            tcp_rfc1337: rfc1337,
            ..Config::default()
        };
        let mut p = closed_by_a(cfg, 1);
        assert_eq!(p.a.death_row().time_wait, 1);
        // A's ACK of B's FIN: an RST from B at A's rcv_nxt is in window.
        let ack = p
            .sent_since(0, Dir::AtoB)
            .into_iter()
            .rev()
            .find(|s| s.is_pure_ack())
            .expect("A's ACK of the FIN")
            .th;
        let th = lowtide_wire::tcp::TcpRepr {
            src_port: ack.dst_port,
            dst_port: ack.src_port,
            seq: ack.ack,
            flags: F::RST,
            ..Default::default()
        };
        p.inject(
            false,
            &build(addr(B, ack.dst_port), addr(A, ack.src_port), &th, &[], 1),
        );
        let want = if rfc1337 == 0 { 0 } else { 1 };
        assert_eq!(p.a.death_row().time_wait, want, "tcp_rfc1337 {rfc1337}");
    }
}

#[test]
fn a_syn_with_a_higher_sequence_reopens_with_the_time_wait_isn() {
    reopen_after_time_wait(Config::default());
}

#[test]
fn a_syn_that_reopens_time_wait_gets_no_cookie_even_with_tcp_syncookies_2() {
    // tcp_conn_request: a tcp_tw_isn SYN skips want_cookie ("TW buckets are
    // converted to open requests without limitations"): the first connection's
    // SYN-ACK was a cookie, the reopening one's is a request's, with the ISN
    // TIME-WAIT chose.
    let cfg = Config {
        tcp_syncookies: 2,
        ..Config::default()
    };
    let p = reopen_after_time_wait(cfg);
    let a = p.a.counters();
    assert_eq!(a.get(Mib::TcpExtSyncookiesSent), 1, "the first SYN's only");
    assert_eq!(a.get(Mib::TcpExtTCPReqQFullDoCookies), 1);
}

/// A server that closed first holds TIME-WAIT; its client comes back from the
/// same port with a SYN above TIME-WAIT's rcv_nxt (tcp_timewait_state_process's
/// TCP_TW_SYN) and is served with the ISN tw_snd_nxt + 65535 + 2.
fn reopen_after_time_wait(cfg: Config) -> Pair {
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.a.listen(addr(A, 80), 16).unwrap();
    let c = p.b.connect(p.now, addr(B, 40000), addr(A, 80)).unwrap();
    p.drive_for(50 * MS);
    let s = p.a.accept(l).unwrap();
    // The server closes first: its side is the one in TIME-WAIT.
    p.a.close(p.now, s).unwrap();
    p.drive_for(30 * MS);
    assert_eq!(p.b.recv(p.now, c, &mut [0u8; 8]), Ok(0));
    p.b.close(p.now, c).unwrap();
    p.drive_for(30 * MS);
    let (local, remote) = (addr(A, 80), addr(B, 40000));
    assert_eq!(p.a.timewait_state(local, remote), Some(TcpState::TimeWait));
    let fin_ack = p
        .sent_since(0, Dir::AtoB)
        .into_iter()
        .rev()
        .find(|s| s.has(F::FIN))
        .expect("A's FIN");
    let tw_isn = fin_ack.th.seq.wrapping_add(1).wrapping_add(65535 + 2);
    // B's new connection from the same port, its ISN above TIME-WAIT's rcv_nxt.
    let mark = p.wire.len();
    let c2 = p.b.connect(p.now, addr(B, 40000), addr(A, 80)).unwrap();
    p.drive_for(50 * MS);
    let synack = p
        .sent_since(mark, Dir::AtoB)
        .into_iter()
        .find(|s| s.has(F::SYN | F::ACK));
    let sa = synack.expect("a SYN-ACK: the SYN reopened the connection");
    assert_eq!(sa.th.seq, tw_isn, "the ISN TIME-WAIT chose");
    assert_eq!(p.b.state(c2), Ok(TcpState::Established));
    assert_eq!(p.a.timewait_state(local, remote), None);
    p
}

//! The caps on what the application let go: `net.ipv4.tcp_max_orphans`
//! (`tcp_check_oom` at close and `tcp_out_of_resources` at an orphan's timers,
//! TcpExtTCPAbortOnMemory) and `net.ipv4.tcp_max_tw_buckets` (`tcp_time_wait`
//! closes without a TIME-WAIT socket, TcpExtTCPTimeWaitOverflow).

use crate::common::*;
use lowtide::{Config, Mib, Shutdown, SocketHandle, TcpState};
use lowtide_wire::tcp::TcpFlags as F;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// `n` established connections from A to B: (pair, A's sockets, B's sockets).
fn conns(cfg: Config, n: usize) -> (Pair, Vec<SocketHandle>, Vec<SocketHandle>) {
    let (mut p, c, s) = establish(cfg);
    let (mut cs, mut ss) = (vec![c], vec![s]);
    let l = p.b.listen(addr(B, 81), 16).unwrap();
    for _ in 1..n {
        cs.push(p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap());
        p.drive_for(50 * MS);
        ss.push(p.b.accept(l).unwrap());
    }
    (p, cs, ss)
}

fn count(st: &lowtide::Stack, m: Mib) -> u64 {
    st.counters().get(m)
}

/// RSTs A sent since `mark`, whether the wire passed or dropped them.
fn rsts_from_a(p: &Pair, mark: usize, dropped_mark: usize) -> usize {
    let passed = p.sent_since(mark, Dir::AtoB).into_iter();
    let dropped = p.dropped[dropped_mark..]
        .iter()
        .filter(|(_, d, _)| *d == Dir::AtoB)
        .map(|(_, _, pk)| Seg::parse(pk));
    passed.chain(dropped).filter(|s| s.has(F::RST)).count()
}

#[test]
fn closing_more_orphans_than_tcp_max_orphans_resets() {
    let cfg = Config {
        tcp_max_orphans: 1,
        ..Config::default()
    };
    let (mut p, cs, _ss) = conns(cfg, 2);
    // Both close at the same instant: the first is the only orphan when it closes.
    let mark = p.wire.len();
    p.a.close(p.now, cs[0]).unwrap();
    assert_eq!(
        p.a.death_row().orphans,
        1,
        "one orphan: not over a cap of 1"
    );
    assert_eq!(count(&p.a, Mib::TcpExtTCPAbortOnMemory), 0);
    p.a.close(p.now, cs[1]).unwrap();
    // Two orphans > 1: the second is reset at once (tcp_check_oom in __tcp_close).
    assert_eq!(count(&p.a, Mib::TcpExtTCPAbortOnMemory), 1);
    assert_eq!(p.a.death_row().orphans, 1);
    p.drive_for(50 * MS);
    // Each sent its FIN (tcp_send_fin comes first); the second then its reset, as
    // tcp_send_active_reset sends it (RST|ACK). The first lives on.
    let out = p.sent_since(mark, Dir::AtoB);
    let active_rst = |port| {
        let rst = |s: &&Seg| s.has(F::RST | F::ACK) && s.th.dst_port == port;
        out.iter().filter(rst).count()
    };
    assert_eq!((active_rst(80), active_rst(81)), (0, 1), "{out:?}");
    assert_eq!(out.iter().filter(|s| s.has(F::FIN)).count(), 2, "{out:?}");
    assert_eq!(p.a.connection_count(), 1);
}

#[test]
fn a_retransmitting_orphan_over_the_cap_is_reset_at_its_timeout() {
    let (mut p, cs, _ss) = conns(Config::default(), 1);
    p.filter = Some(Box::new(|d, _| match d {
        Dir::AtoB => Verdict::Drop,
        Dir::BtoA => Verdict::Pass,
    }));
    p.a.send(p.now, cs[0], b"never acked").unwrap();
    p.a.close(p.now, cs[0]).unwrap();
    p.drive_for(MS);
    assert_eq!(p.a.death_row().orphans, 1);
    assert_eq!(count(&p.a, Mib::TcpExtTCPAbortOnMemory), 0);
    // The cap falls under the orphan: its next RTO finds too many orphans and,
    // having sent within TCP_TIMEWAIT_LEN, resets (tcp_out_of_resources).
    p.a.set_sysctl(p.now, "net.ipv4.tcp_max_orphans", "0")
        .unwrap();
    let (mark, dmark) = (p.wire.len(), p.dropped.len());
    p.drive_for(Duration::from_secs(2));
    assert_eq!(count(&p.a, Mib::TcpExtTCPAbortOnMemory), 1);
    assert_eq!(rsts_from_a(&p, mark, dmark), 1);
    assert_eq!(p.a.connection_count(), 0);
    assert_eq!(p.a.death_row().orphans, 0);
}

/// Takes A's socket `c` to TIME-WAIT (or wherever the cap sends it): A shuts its
/// side, then B closes.
fn active_close(p: &mut Pair, c: SocketHandle, s: SocketHandle) {
    p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
    p.drive_for(30 * MS);
    p.b.close(p.now, s).unwrap();
    p.drive_for(30 * MS);
}

#[test]
fn time_wait_sockets_beyond_tcp_max_tw_buckets_are_not_made() {
    let cfg = Config {
        tcp_max_tw_buckets: 1,
        ..Config::default()
    };
    let (mut p, cs, ss) = conns(cfg, 3);
    active_close(&mut p, cs[0], ss[0]);
    assert!(in_time_wait(&p.a, cs[0]));
    assert_eq!(p.a.death_row().time_wait, 1);
    assert_eq!(count(&p.a, Mib::TcpExtTCPTimeWaitOverflow), 0);
    // The table is full: the next connection closes at once (tcp_done).
    active_close(&mut p, cs[1], ss[1]);
    assert_eq!(p.a.state(cs[1]), Ok(TcpState::Closed));
    assert_eq!(count(&p.a, Mib::TcpExtTCPTimeWaitOverflow), 1);
    assert_eq!(p.a.death_row().time_wait, 1);
    // Once the first TIME-WAIT ends (60 s, which the timer wheel runs within
    // 4.096 s after), there is room again.
    p.drive_for(Duration::from_millis(64_100));
    assert_eq!(p.a.death_row().time_wait, 0);
    active_close(&mut p, cs[2], ss[2]);
    assert!(in_time_wait(&p.a, cs[2]));
    assert_eq!(count(&p.a, Mib::TcpExtTCPTimeWaitOverflow), 1);
}

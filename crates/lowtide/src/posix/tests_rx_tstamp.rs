//! Receive timestamps: `SO_TIMESTAMP`, `SO_TIMESTAMPNS`, their `_NEW` forms and
//! `SO_TIMESTAMPING`'s `RX_SOFTWARE` (`tcp_recv_timestamp`,
//! `tcp_update_recv_tstamps`), the stack-wide net timestamps, and the timestamp
//! cmsgs of error-queue entries (`__sock_recv_timestamp`).

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::run;
use super::*;
use crate::tcp::tstamp::*;
use core::time::Duration;

/// What `CLOCK_REALTIME` reads at [`Instant::ZERO`] in these tests.
const EPOCH: Duration = Duration::from_secs(1_700_000_000);

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

std::thread_local! {
    /// The test's clock: the time of its last send, in milliseconds.
    static NOW: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The test's time now.
fn now() -> Instant {
    at(NOW.with(|n| n.get()))
}

/// A connected pair at time 0: (A, B, A's socket, B's accepted socket, B's
/// listener), `TCP_NODELAY` on A so that each write is a segment of its own. B
/// receives as through a TUN device (`RxAlloc::Tun`): a 1000-byte segment does
/// not join the one before it in the receive queue.
fn pair() -> (Host, Host, Fd, Fd, Fd) {
    pair_with(crate::Config {
        rx_alloc: crate::tcp::skbuff::RxAlloc::Tun,
        ..Default::default()
    })
}

fn pair_with(cfg: crate::Config) -> (Host, Host, Fd, Fd, Fd) {
    NOW.with(|n| n.set(0));
    let mut sb = crate::Stack::new(cfg, 2);
    sb.add_address(B.into());
    let (mut a, mut b) = (host(A, 1), Host::new(sb));
    b.set_realtime_zero(EPOCH);
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    let one = 1i32.to_ne_bytes();
    a.setsockopt(at(0), c, SOL_TCP, TCP_NODELAY, &one).unwrap();
    a.connect(at(0), c, SocketAddr::new(B.into(), 80))
        .unwrap_err();
    run(&mut a, &mut b, at(0));
    let (s, _) = b.accept(l).unwrap();
    (a, b, c, s, l)
}

/// A sends `len` bytes at `ms` (one segment: they stay apart in B's queue when
/// 1000 bytes or more).
fn send_at(a: &mut Host, b: &mut Host, c: Fd, ms: u64, len: usize) {
    NOW.with(|n| n.set(ms));
    assert_eq!(a.send(at(ms), c, &vec![7u8; len], 0), Ok(len));
    run(a, b, at(ms));
}

fn set(h: &mut Host, fd: Fd, name: i32, v: u32) {
    h.setsockopt(now(), fd, SOL_SOCKET, name, &v.to_ne_bytes())
        .unwrap();
}

fn get(h: &mut Host, fd: Fd, name: i32) -> u32 {
    let mut b = [0u8; 4];
    assert_eq!(h.getsockopt(now(), fd, SOL_SOCKET, name, &mut b), Ok(4));
    u32::from_ne_bytes(b)
}

/// The timestamp cmsgs of a read of `len` bytes: (type, seconds, sub-second
/// part) of each.
fn read(h: &mut Host, fd: Fd, len: usize, flags: i32) -> (usize, Vec<(i32, i64, i64)>) {
    let mut buf = vec![0u8; len];
    let m = h.recvmsg(now(), fd, &mut buf, flags).unwrap();
    let ts = m
        .cmsgs
        .iter()
        .filter(|c| c.level == SOL_SOCKET)
        .map(|c| {
            let w = |i: usize| i64::from_ne_bytes(c.data[i * 8..i * 8 + 8].try_into().unwrap());
            let len = if c.kind == SCM_TIMESTAMPING || c.kind == SCM_TIMESTAMPING_NEW {
                48
            } else {
                16
            };
            assert_eq!(c.data.len(), len, "{c:?}");
            (c.kind, w(0) - EPOCH.as_secs() as i64, w(1))
        })
        .collect();
    (m.len, ts)
}

/// sk_getsockopt after sk_setsockopt as Linux 6.18 answers (measured with Python's
/// socket module on this machine's kernel), on a socket and on a connection:
/// SO_TIMESTAMP_OLD only without NS and NEW, SO_TIMESTAMP_NEW with NS too,
/// SO_TIMESTAMPING_NEW the flags only when set through it.
#[test]
fn options_read_back_as_linux_flags_say() {
    let (_a, mut b, _c, s, _l) = pair();
    let fresh = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    for fd in [fresh, s] {
        let names = [
            SO_TIMESTAMP,
            SO_TIMESTAMPNS,
            SO_TIMESTAMP_NEW,
            SO_TIMESTAMPNS_NEW,
        ];
        let all = |b: &mut Host| names.map(|n| get(b, fd, n));
        assert_eq!(all(&mut b), [0, 0, 0, 0]);
        set(&mut b, fd, SO_TIMESTAMP, 1);
        assert_eq!(all(&mut b), [1, 0, 0, 0]);
        set(&mut b, fd, SO_TIMESTAMPNS, 1);
        assert_eq!(all(&mut b), [0, 1, 0, 0]);
        set(&mut b, fd, SO_TIMESTAMPNS_NEW, 1);
        assert_eq!(all(&mut b), [0, 0, 1, 1]);
        set(&mut b, fd, SO_TIMESTAMP_NEW, 1);
        assert_eq!(all(&mut b), [0, 0, 1, 0]);
        set(&mut b, fd, SO_TIMESTAMP, 0);
        assert_eq!(all(&mut b), [0, 0, 0, 0]);
        set(&mut b, fd, SO_TIMESTAMPING_NEW, SOF_TIMESTAMPING_SOFTWARE);
        assert_eq!(
            get(&mut b, fd, SO_TIMESTAMPING_NEW),
            SOF_TIMESTAMPING_SOFTWARE
        );
        assert_eq!(get(&mut b, fd, SO_TIMESTAMPING), SOF_TIMESTAMPING_SOFTWARE);
        set(&mut b, fd, SO_TIMESTAMPING, SOF_TIMESTAMPING_SOFTWARE);
        assert_eq!(get(&mut b, fd, SO_TIMESTAMPING_NEW), 0, "set the old way");
        // Every flag up to SOF_TIMESTAMPING_TX_COMPLETION (1 << 18), no further.
        set(&mut b, fd, SO_TIMESTAMPING, SOF_TIMESTAMPING_TX_COMPLETION);
        let bad = (1u32 << 19).to_ne_bytes();
        let r = b.setsockopt(at(0), fd, SOL_SOCKET, SO_TIMESTAMPING, &bad);
        assert_eq!(r, Err(Errno(errno::EINVAL)));
    }
    // struct so_timestamping: flags, then bind_phc.
    let mut out = [0xffu8; 8];
    assert_eq!(
        b.getsockopt(at(0), s, SOL_SOCKET, SO_TIMESTAMPING, &mut out),
        Ok(8)
    );
    assert_eq!(out, [0u8, 0, 4, 0, 0, 0, 0, 0]);
}

/// A read reports the arrival time of the last skb it takes bytes from
/// (tcp_update_recv_tstamps), a peek and a read of 0 bytes alike;
/// SO_TIMESTAMPNS's cmsg comes first, then SCM_TIMESTAMPING with the time in
/// ts[0], then TCP_CM_INQ.
#[test]
fn a_read_reports_the_last_skb_it_read() {
    let (mut a, mut b, c, s, _l) = pair();
    set(&mut b, s, SO_TIMESTAMPNS, 1);
    let sw = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    set(&mut b, s, SO_TIMESTAMPING, sw);
    b.setsockopt(now(), s, SOL_TCP, TCP_INQ, &1i32.to_ne_bytes())
        .unwrap();
    send_at(&mut a, &mut b, c, 1200, 1000);
    send_at(&mut a, &mut b, c, 2300, 1000);
    let ns = |ms: u64| (ms % 1000) as i64 * 1_000_000;
    let both = |ms: u64| {
        vec![
            (SCM_TIMESTAMPNS, (ms / 1000) as i64, ns(ms)),
            (SCM_TIMESTAMPING, (ms / 1000) as i64, ns(ms)),
        ]
    };
    assert_eq!(read(&mut b, s, 0, 0), (0, both(1200)));
    assert_eq!(read(&mut b, s, 1500, MSG_PEEK), (1500, both(2300)));
    assert_eq!(read(&mut b, s, 500, 0), (500, both(1200)));
    let mut buf = [0u8; 1000];
    let m = b.recvmsg(now(), s, &mut buf, 0).unwrap();
    let kinds: Vec<i32> = m.cmsgs.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [SCM_TIMESTAMPNS, SCM_TIMESTAMPING, TCP_CM_INQ]);
    assert_eq!(m.cmsgs[1].data[16..], [0u8; 32], "ts[1], ts[2] zero");
    assert_eq!(read(&mut b, s, 1000, MSG_TRUNC), (500, both(2300)));
    // SO_TIMESTAMP: a struct timeval (microseconds); the _NEW types.
    send_at(&mut a, &mut b, c, 3400, 1000);
    set(&mut b, s, SO_TIMESTAMP, 1);
    assert_eq!(
        read(&mut b, s, 1, MSG_PEEK).1[0],
        (SCM_TIMESTAMP, 3, 400_000)
    );
    set(&mut b, s, SO_TIMESTAMPNS_NEW, 1);
    set(&mut b, s, SO_TIMESTAMPING_NEW, sw);
    let (_, ts) = read(&mut b, s, 1, MSG_PEEK);
    let kinds: Vec<i32> = ts.iter().map(|t| t.0).collect();
    assert_eq!(kinds, [SCM_TIMESTAMPNS_NEW, SCM_TIMESTAMPING_NEW]);
}

/// A segment that joins the skb before it (a NIC's page-fragment buffers:
/// tcp_try_coalesce) gives that skb its stamp: a read of the earlier bytes
/// reports the later arrival.
#[test]
fn a_joined_segment_gives_its_stamp() {
    let (mut a, mut b, c, s, _l) = pair_with(crate::Config::default());
    let sw = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    set(&mut b, s, SO_TIMESTAMPING, sw);
    send_at(&mut a, &mut b, c, 1000, 1000);
    assert_eq!(read(&mut b, s, 10, MSG_PEEK).1, [(SCM_TIMESTAMPING, 1, 0)]);
    send_at(&mut a, &mut b, c, 2000, 1000);
    assert_eq!(read(&mut b, s, 10, MSG_PEEK).1, [(SCM_TIMESTAMPING, 2, 0)]);
}

/// tcp_recv_timestamp's filter: SOFTWARE alone reports a stamp others asked for,
/// unless SOF_TIMESTAMPING_OPT_RX_FILTER; nothing without SOFTWARE or
/// SO_TIMESTAMP(NS).
#[test]
fn software_alone_and_the_rx_filter() {
    let (mut a, mut b, c, s, _l) = pair();
    set(&mut b, s, SO_TIMESTAMPING, SOF_TIMESTAMPING_RX_SOFTWARE);
    send_at(&mut a, &mut b, c, 1000, 1000);
    assert_eq!(read(&mut b, s, 10, MSG_PEEK).1, []);
    let filter = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_RX_FILTER;
    set(&mut b, s, SO_TIMESTAMPING, filter);
    assert_eq!(read(&mut b, s, 10, MSG_PEEK).1, []);
    set(&mut b, s, SO_TIMESTAMPING, SOF_TIMESTAMPING_SOFTWARE);
    assert_eq!(read(&mut b, s, 10, MSG_PEEK).1, [(SCM_TIMESTAMPING, 1, 0)]);
}

/// Segments are stamped while some connection of the stack wants net timestamps
/// (netstamp_needed_key): not before; another connection's wish counts; turning
/// RX_SOFTWARE off ends it, SO_TIMESTAMP off does not (SOCK_TIMESTAMP stays).
#[test]
fn stamps_while_the_stack_wants_them() {
    let (mut a, mut b, c, s, l) = pair();
    set(&mut b, s, SO_TIMESTAMPING, SOF_TIMESTAMPING_SOFTWARE);
    send_at(&mut a, &mut b, c, 1000, 1000);
    assert_eq!(read(&mut b, s, 1000, 0).1, [], "not stamped on arrival");
    // A second connection asks for them.
    let c2 = a.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    a.connect(now(), c2, SocketAddr::new(B.into(), 80))
        .unwrap_err();
    run(&mut a, &mut b, now());
    let (s2, _) = b.accept(l).unwrap();
    set(&mut b, s2, SO_TIMESTAMPING, SOF_TIMESTAMPING_RX_SOFTWARE);
    send_at(&mut a, &mut b, c, 2000, 1000);
    assert_eq!(read(&mut b, s, 1000, 0).1, [(SCM_TIMESTAMPING, 2, 0)]);
    set(&mut b, s2, SO_TIMESTAMPING, 0);
    send_at(&mut a, &mut b, c, 3000, 1000);
    assert_eq!(read(&mut b, s, 1000, 0).1, [], "RX_SOFTWARE off: none");
    set(&mut b, s2, SO_TIMESTAMP, 1);
    set(&mut b, s2, SO_TIMESTAMP, 0);
    send_at(&mut a, &mut b, c, 4000, 1000);
    assert_eq!(read(&mut b, s, 1000, 0).1, [(SCM_TIMESTAMPING, 4, 0)]);
}

/// __sock_recv_timestamp on a transmit report: SCM_TIMESTAMP(NS) first with
/// SO_TIMESTAMP(NS), then SCM_TIMESTAMPING (the _NEW one after
/// SO_TIMESTAMPING_NEW), then IP_RECVERR.
#[test]
fn error_queue_entries_carry_so_timestamp_too() {
    let (mut a, mut b, c, _s, _l) = pair();
    a.set_realtime_zero(EPOCH);
    let flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    set(&mut a, c, SO_TIMESTAMPING, flags);
    set(&mut a, c, SO_TIMESTAMPNS, 1);
    send_at(&mut a, &mut b, c, 1500, 10);
    let mut buf = [0u8; 64];
    let m = a.recvmsg(now(), c, &mut buf, MSG_ERRQUEUE).unwrap();
    let kinds: Vec<i32> = m.cmsgs.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [SCM_TIMESTAMPNS, SCM_TIMESTAMPING, IP_RECVERR]);
    assert_eq!(
        m.cmsgs[0].data[..16],
        m.cmsgs[1].data[..16],
        "the same time"
    );
    set(&mut a, c, SO_TIMESTAMPING_NEW, flags);
    send_at(&mut a, &mut b, c, 2500, 10);
    let m = a.recvmsg(now(), c, &mut buf, MSG_ERRQUEUE).unwrap();
    let kinds: Vec<i32> = m.cmsgs.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [SCM_TIMESTAMPNS_NEW, SCM_TIMESTAMPING_NEW, IP_RECVERR]
    );
}

/// A listener's children inherit `SO_TIMESTAMPNS` (`sk_clone_lock`) and, as they
/// are made, turn net timestamps on for the stack.
#[test]
fn children_inherit_the_listeners_flags() {
    let (mut a, mut b, _c, _s, l) = pair();
    set(&mut b, l, SO_TIMESTAMPNS, 1);
    let c2 = a.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    a.connect(now(), c2, SocketAddr::new(B.into(), 80))
        .unwrap_err();
    run(&mut a, &mut b, now());
    let (s2, _) = b.accept(l).unwrap();
    assert_eq!(get(&mut b, s2, SO_TIMESTAMPNS), 1);
    send_at(&mut a, &mut b, c2, 1000, 1000);
    assert_eq!(read(&mut b, s2, 1000, 0).1, [(SCM_TIMESTAMPNS, 1, 0)]);
}

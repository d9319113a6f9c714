//! A blocking `recvmsg(2)` across its sleeps (posix/recv_wait.rs): the branches
//! of `tcp_recvmsg_locked`'s loop, checked against Linux 6.18 with
//! tests/packetdrill/rcvlowat-blocking-read-copies-then-sleeps.pkt.

use super::consts::*;
use super::tests_sock::run;
use super::tests_sockopt::{connected_with, set_int};
use super::*;

const NOW: Instant = Instant::ZERO;

/// A connection whose reader (on the second host) has `SO_RCVLOWAT` `lowat`; the
/// writer sends at once (`TCP_NODELAY`). (writer host, reader host, writer,
/// reader).
/// Through packetdrill's tun (`RxAlloc::Tun`: a bare FIN's skb costs 832).
fn pair(lowat: i32) -> (Host, Host, Fd, Fd) {
    let cfg = crate::Config {
        rx_alloc: crate::tcp::skbuff::RxAlloc::Tun,
        ..crate::Config::default()
    };
    let (mut a, mut b, c, _, s) = connected_with(cfg, |_, _| {});
    set_int(&mut a, c, SOL_TCP, TCP_NODELAY, 1).unwrap();
    set_int(&mut b, s, SOL_SOCKET, SO_RCVLOWAT, lowat).unwrap();
    (a, b, c, s)
}

/// `n` bytes of `byte` from the writer, delivered (and ACKed).
fn feed(a: &mut Host, b: &mut Host, c: Fd, byte: u8, n: usize) {
    assert_eq!(a.send(NOW, c, &vec![byte; n], 0), Ok(n));
    run(a, b, NOW);
}

/// A blocking receive with `flags` into `buf`: a step on what is queued, then
/// one after each further 1000-byte segment of `bytes`; each step's result with
/// `SIOCINQ` after it.
fn steps(
    (a, b, c, s): (&mut Host, &mut Host, Fd, Fd),
    buf: &mut [u8],
    flags: i32,
    bytes: &[u8],
) -> Vec<(RecvStep, i32)> {
    let mut w = RecvWait::default();
    let mut out = Vec::new();
    for i in 0..=bytes.len() {
        if i > 0 {
            feed(a, b, c, bytes[i - 1], 1000);
        }
        let step = b.recvmsg_wait(NOW, s, buf, flags, &mut w, true);
        out.push((step, b.ioctl(s, SIOCINQ).unwrap()));
    }
    out
}

/// `SO_MEMINFO`'s `SK_MEMINFO_RMEM_ALLOC`.
fn rmem_alloc(b: &mut Host, s: Fd) -> u32 {
    let mut m = [0u8; 36];
    b.getsockopt(NOW, s, SOL_SOCKET, SO_MEMINFO, &mut m)
        .unwrap();
    u32::from_ne_bytes(m[..4].try_into().unwrap())
}

fn done(len: usize) -> RecvStep {
    RecvStep::Done(Ok(RecvMsg {
        len,
        ..RecvMsg::default()
    }))
}

/// SO_RCVLOWAT 3000 with 1000 bytes queued: the read takes them and sleeps (the
/// queue is empty after), and `tcp_data_ready` does not wake it until 3000 more
/// bytes are in past the moved `copied_seq`: 4000 after three more segments.
#[test]
fn a_blocked_read_copies_then_sleeps_until_the_mark_is_in_again() {
    let (mut a, mut b, c, s) = pair(3000);
    feed(&mut a, &mut b, c, 1, 1000);
    let mut buf = vec![0u8; 5000];
    let got = steps((&mut a, &mut b, c, s), &mut buf, 0, &[2, 3, 4]);
    // Copied before it slept; not woken below the mark.
    let waits: Vec<_> = [0, 1000, 2000].map(|q| (RecvStep::Wait, q)).into();
    assert_eq!(got[..3], waits[..]);
    assert_eq!(got[3], (done(4000), 0));
    let want: Vec<u8> = (1..=4).flat_map(|i| vec![i; 1000]).collect();
    assert_eq!(&buf[..4000], &want[..]);
}

/// The other ends of the wait: `MSG_WAITALL` (its target is `len`; mark 1, so
/// each segment wakes it), no time left (`SO_RCVTIMEO` run out, or a
/// non-blocking call: what was copied), the peer's FIN and a reset (with bytes
/// copied they return those, the error waits for the next read), and a peek
/// (it goes on from `peek_seq` and consumes nothing).
#[test]
fn waitall_timeout_fin_reset_and_peek_end_the_wait_as_linux() {
    let (mut a, mut b, c, s) = pair(1);
    let mut buf = vec![0u8; 2500];
    feed(&mut a, &mut b, c, 1, 1000);
    let got = steps((&mut a, &mut b, c, s), &mut buf, MSG_WAITALL, &[2, 3]);
    assert_eq!(got[2], (done(2500), 500));
    assert!(got[..2].iter().all(|g| g.0 == RecvStep::Wait));
    let mut rest = [0u8; 500];
    assert_eq!(b.recv(NOW, s, &mut rest, 0), Ok(500));

    // Short of the mark when the time is up, or at once without time.
    set_int(&mut b, s, SOL_SOCKET, SO_RCVLOWAT, 3000).unwrap();
    feed(&mut a, &mut b, c, 4, 1000);
    let mut w = RecvWait::default();
    let step = b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true);
    assert_eq!(step, RecvStep::Wait);
    feed(&mut a, &mut b, c, 5, 1000);
    let step = b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, false);
    assert_eq!(step, done(2000));
    feed(&mut a, &mut b, c, 6, 700);
    let mut w = RecvWait::default();
    let step = b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, false);
    assert_eq!(step, done(700));

    // A peek under the mark: 1000 bytes seen, woken at 3000 queued, it returns
    // what it asked for from the front and leaves them.
    feed(&mut a, &mut b, c, 7, 1000);
    let got = steps((&mut a, &mut b, c, s), &mut buf, MSG_PEEK, &[8, 9]);
    assert_eq!(got[2], (done(2500), 3000));
    assert!(got[..2].iter().all(|g| g.0 == RecvStep::Wait));
    assert_eq!((buf[999], buf[1000], buf[2499]), (7, 8, 9));
    let mut all = vec![0u8; 3000];
    assert_eq!(b.recv(NOW, s, &mut all, 0), Ok(3000));

    // The FIN wakes a reader with bytes: it returns them, and its walk of the
    // queue found the bare FIN's skb and freed it (found_fin_ok); then the end.
    feed(&mut a, &mut b, c, 10, 1000);
    let mut w = RecvWait::default();
    assert_eq!(
        b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true),
        RecvStep::Wait
    );
    a.shutdown(NOW, c, SHUT_WR).unwrap();
    run(&mut a, &mut b, NOW);
    assert_eq!(rmem_alloc(&mut b, s), 832, "the FIN's skb");
    assert_eq!(
        b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true),
        done(1000)
    );
    assert_eq!(rmem_alloc(&mut b, s), 0);
    let mut w = RecvWait::default();
    assert_eq!(b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true), done(0));
}

/// A reset wakes a reader with bytes copied: it returns them, and the next read
/// reports the error (`tcp_recvmsg_locked` breaks on `sk_err` without
/// `sock_error` once it has copied).
#[test]
fn a_reset_ends_the_wait_with_the_bytes_and_the_error_follows() {
    let (mut a, mut b, c, s) = pair(3000);
    feed(&mut a, &mut b, c, 1, 1000);
    let mut buf = vec![0u8; 5000];
    let mut w = RecvWait::default();
    assert_eq!(
        b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true),
        RecvStep::Wait
    );
    let lin: Vec<u8> = [1i32, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
    a.setsockopt(NOW, c, SOL_SOCKET, SO_LINGER, &lin).unwrap();
    a.close(NOW, c).unwrap();
    run(&mut a, &mut b, NOW);
    assert_eq!(
        b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true),
        done(1000)
    );
    let mut w = RecvWait::default();
    assert_eq!(
        b.recvmsg_wait(NOW, s, &mut buf, 0, &mut w, true),
        RecvStep::Done(Err(Errno(errno::ECONNRESET)))
    );
}

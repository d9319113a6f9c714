//! The socket layer's tests for the TCP options of issue 21: `TCP_WINDOW_CLAMP`,
//! `TCP_SAVE_SYN`/`TCP_SAVED_SYN`, `TCP_TIMESTAMP`, `TCP_TX_DELAY`, `IPV6_TCLASS`.

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::{deliver, run};
use super::*;

fn get_int(h: &mut Host, fd: Fd, level: i32, name: i32) -> Result<i32, Errno> {
    let mut v = [0u8; 4];
    h.getsockopt(Instant::ZERO, fd, level, name, &mut v)?;
    Ok(i32::from_ne_bytes(v))
}

fn set_int(h: &mut Host, fd: Fd, level: i32, name: i32, v: i32) -> Result<(), Errno> {
    h.setsockopt(Instant::ZERO, fd, level, name, &v.to_ne_bytes())
}

/// A listener on B:80 with `opts` set before `listen`, and a client on A that
/// connects to it; (a, b, client, listener, accepted).
fn connected(listener_opts: impl FnOnce(&mut Host, Fd)) -> (Host, Host, Fd, Fd, Fd) {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    listener_opts(&mut b, l);
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    assert_eq!(
        a.connect(Instant::ZERO, c, to),
        Err(Errno(errno::EINPROGRESS))
    );
    run(&mut a, &mut b, Instant::ZERO);
    assert_eq!(a.connect(Instant::ZERO, c, to), Ok(()));
    let s = b.accept(l).unwrap().0;
    (a, b, c, l, s)
}

/// tcp_set_window_clamp (Linux 6.18): 0 only in CLOSE, any other value at least
/// SOCK_MIN_RCVBUF / 2; a listener's clamp is its SYN-ACK's window and its child's
/// clamp; getsockopt reads window_clamp.
#[test]
fn window_clamp_as_tcp_set_window_clamp() {
    let (mut a, mut b, c, l, s) = connected(|b, l| {
        assert_eq!(get_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP), Ok(0));
        assert_eq!(set_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP, 0), Ok(()));
        set_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP, -5).unwrap();
        assert_eq!(get_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP), Ok(1152));
        set_int(b, l, SOL_TCP, TCP_WINDOW_CLAMP, 20_000).unwrap();
    });
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_WINDOW_CLAMP, 0),
        Err(Errno(errno::EINVAL)),
        "a listener is not CLOSE"
    );
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_WINDOW_CLAMP), Ok(20_000));
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP), Ok(20_000));
    assert_eq!(
        set_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP, 0),
        Err(Errno(errno::EINVAL))
    );
    // Shrink: rcv_ssthresh follows at once; the window offered never goes back on
    // its right edge, so it falls with the data that arrives.
    let now = Instant::ZERO;
    let h = b.conn(s).unwrap().unwrap();
    let info = b.stack.info(now, h).unwrap();
    assert_eq!(info.rcv_wnd, 18_824, "SYN-ACK: 20000 less 20000 % 1448");
    // tcp_measure_rcv_mss: the first segment measures scaling_ratio, and a new
    // ratio sets the clamp to the full space (tcp_set_window_clamp), the
    // listener's value gone.
    a.send(now, c, &[7; 1000], 0).unwrap();
    deliver(&mut a, &mut b, now);
    deliver(&mut b, &mut a, now);
    let full = get_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP).unwrap();
    assert!(full > 20_000, "the full space, {full}");
    let i = b.stack.info(now, h).unwrap();
    let mut edge = 1001 + i.rcv_wnd as u64;
    set_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP, 5000).unwrap();
    assert_eq!(get_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP), Ok(5000));
    assert_eq!(b.stack.info(now, h).unwrap().rcv_ssthresh, 5000);
    let mut sent = 1000u64;
    let mut now = now;
    while b.stack.info(now, h).unwrap().rcv_wnd > 5000 {
        assert!(sent < 1_000_000, "the window never came down to the clamp");
        a.send(now, c, &[7; 1000], 0).unwrap();
        deliver(&mut a, &mut b, now);
        sent += 1000;
        now += core::time::Duration::from_millis(50); // the delayed ACK
        b.handle_timeout(now);
        deliver(&mut b, &mut a, now);
        let mut sink = [0u8; 1000];
        b.recv(now, s, &mut sink, 0).unwrap();
        let i = b.stack.info(now, h).unwrap();
        let right = 1 + sent + i.rcv_wnd as u64;
        assert!(right >= edge, "the right edge never moves back");
        edge = right;
    }
    let i = b.stack.info(now, h).unwrap();
    assert_eq!(i.rcv_wnd, 5000, "down to the clamp, and held there");
    // Raise: rcv_ssthresh may reach the current window, then grows again.
    set_int(&mut b, s, SOL_TCP, TCP_WINDOW_CLAMP, 30_000).unwrap();
    assert_eq!(b.stack.info(now, h).unwrap().rcv_ssthresh, 5000);
}

/// do_tcp_getsockopt(TCP_TIMESTAMP): tcp_clock_ts + tsoffset with the low bit (the
/// usec flag) clear: the TSval the connection sends; without a connection the
/// offset is 0. do_tcp_setsockopt: EINVAL for a short value, then EPERM without
/// TCP_REPAIR.
#[test]
fn tcp_timestamp_is_the_tsval_clock() {
    let (mut a, mut b, c, _l, s) = connected(|b, l| {
        let now = Instant::from_nanos(12_345_678_901);
        let mut v = [0u8; 4];
        b.getsockopt(now, l, SOL_TCP, TCP_TIMESTAMP, &mut v)
            .unwrap();
        assert_eq!(i32::from_ne_bytes(v), 12_344, "12345 ms, the low bit clear");
    });
    assert_eq!(
        b.setsockopt(Instant::ZERO, s, SOL_TCP, TCP_TIMESTAMP, &[1, 2]),
        Err(Errno(errno::EINVAL))
    );
    assert_eq!(
        set_int(&mut b, s, SOL_TCP, TCP_TIMESTAMP, 1000),
        Err(Errno(errno::EPERM))
    );
    for ms in [1000u64, 1001] {
        let now = Instant::from_nanos(ms * 1_000_000);
        let mut v = [0u8; 4];
        a.getsockopt(now, c, SOL_TCP, TCP_TIMESTAMP, &mut v)
            .unwrap();
        a.send(now, c, &[1; 100], 0).unwrap();
        let sent = deliver(&mut a, &mut b, now);
        let tcp = &sent[0][20..];
        let ts = tcp[20..tcp[12] as usize / 4]
            .windows(10)
            .find(|w| w[0] == 8 && w[1] == 10)
            .map(|w| u32::from_be_bytes([w[2], w[3], w[4], w[5]]))
            .expect("a timestamp option");
        assert_eq!(u32::from_ne_bytes(v), ts & !1, "at {ms} ms");
        deliver(&mut b, &mut a, now);
    }
}

/// TCP_SAVE_SYN (0..=2) on a listener: its child's TCP_SAVED_SYN hands out the
/// SYN's IP and TCP headers, exactly as they came, once; a short buffer is EINVAL
/// and keeps them (saved_syn_len is what Linux writes to optlen); a listener, or a
/// child of a listener that did not save, reads length 0.
#[test]
fn saved_syn_hands_out_the_syn_headers_once() {
    let now = Instant::ZERO;
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN, 3),
        Err(Errno(errno::EINVAL))
    );
    assert_eq!(
        set_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN, -1),
        Err(Errno(errno::EINVAL))
    );
    set_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN, 1).unwrap();
    assert_eq!(get_int(&mut b, l, SOL_TCP, TCP_SAVE_SYN), Ok(1));
    b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    b.listen(l, 8).unwrap();
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 80);
    let _ = a.connect(now, c, to);
    let sent = run(&mut a, &mut b, now);
    let syn = &sent[0];
    let s = b.accept(l).unwrap().0;
    assert_eq!(
        get_int(&mut b, s, SOL_TCP, TCP_SAVE_SYN),
        Ok(1),
        "inherited"
    );
    let mut none = [0u8; 100];
    assert_eq!(
        b.getsockopt(now, l, SOL_TCP, TCP_SAVED_SYN, &mut none),
        Ok(0)
    );
    let mut short = vec![0u8; syn.len() - 1];
    assert_eq!(
        b.getsockopt(now, s, SOL_TCP, TCP_SAVED_SYN, &mut short),
        Err(Errno(errno::EINVAL))
    );
    assert_eq!(b.saved_syn_len(s), Ok(Some(syn.len())));
    let mut out = [0u8; 200];
    let n = b
        .getsockopt(now, s, SOL_TCP, TCP_SAVED_SYN, &mut out)
        .unwrap();
    assert_eq!(
        &out[..n],
        &syn[..],
        "the SYN as it came, IP and TCP headers"
    );
    assert_eq!(n, 20 + 40, "IPv4 header, TCP header with its options");
    assert_eq!(
        b.getsockopt(now, s, SOL_TCP, TCP_SAVED_SYN, &mut out),
        Ok(0)
    );
    assert_eq!(b.saved_syn_len(s), Ok(None));
}

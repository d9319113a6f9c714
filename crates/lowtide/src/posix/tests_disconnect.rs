//! What `tcp_disconnect` leaves a socket and what `__inet_bind` allows once a
//! connection ended: the `write_seq` the next connect starts from, and `bind(2)`
//! in `TCP_CLOSE` whatever `sock->state` (checked against Linux 6.18 with
//! tests/packetdrill's `bind-after-*.pkt` and a capture of the SYNs in `unshare -n`).

use super::consts::*;
use super::tests::{host, A, B};
use super::tests_sock::{deliver, run};
use super::*;

const T0: Instant = Instant::ZERO;

fn e(r: Result<(), Errno>) -> Result<(), i32> {
    r.map_err(|e| e.0)
}

/// The sequence number of the first SYN (without ACK) among IPv4 packets.
fn syn_seq(pkts: &[Vec<u8>]) -> u32 {
    let p = pkts.iter().find(|p| p[33] & 0x12 == 0x02).expect("a SYN");
    u32::from_be_bytes([p[24], p[25], p[26], p[27]])
}

/// A socket's SYN after `connect(2)` to B:80 (lost: nothing delivered).
fn connect_syn(a: &mut Host, fd: Fd) -> u32 {
    let mut b = host(B, 9);
    assert_eq!(
        e(a.connect(T0, fd, SocketAddr::new(B.into(), 80))),
        Err(errno::EINPROGRESS)
    );
    syn_seq(&deliver(a, &mut b, T0))
}

fn unspec() -> UserSockAddr {
    UserSockAddr::from_bytes(&[0; 16]).unwrap()
}

/// tcp_disconnect on a socket that never connected moves write_seq from 0 by
/// max_window (0) plus 2, each time; tcp_v4_connect keeps it ("if (!tp->write_seq)").
#[test]
fn disconnect_of_a_fresh_socket_moves_write_seq_by_two() {
    let mut a = host(A, 1);
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.connect_user(T0, c, &unspec())), Ok(()));
    assert_eq!(connect_syn(&mut a, c), 2);
    let d = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.connect_user(T0, d, &unspec())), Ok(()));
    assert_eq!(e(a.connect_user(T0, d, &unspec())), Ok(()));
    assert_eq!(connect_syn(&mut a, d), 4);
    // A listener stopped by shutdown(SHUT_RD) is tcp_disconnect'ed as well.
    let l = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    a.listen(l, 1).unwrap();
    assert_eq!(e(a.shutdown(T0, l, SHUT_RD)), Ok(()));
    assert_eq!(a.sock(l).unwrap().opts.write_seq, 2);
}

/// After a connection, tcp_disconnect's write_seq is its write_seq plus
/// max_window plus 2: a refused connect (max_window 0, the SYN's sequence used) starts the next
/// one 3 past its ISN; an established one past its peer's window too.
#[test]
fn the_next_connect_starts_past_the_last_connection() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let to = SocketAddr::new(B.into(), 80);
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    let isn = syn_seq(&run(&mut a, &mut b, T0)); // B resets: nothing listens
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::ECONNREFUSED));
    assert_eq!(connect_syn(&mut a, c), isn.wrapping_add(3));
    let l = b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    b.bind(l, to).unwrap();
    b.listen(l, 8).unwrap();
    let d = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.connect(T0, d, to)), Err(errno::EINPROGRESS));
    let isn = syn_seq(&run(&mut a, &mut b, T0));
    assert_eq!(e(a.connect(T0, d, to)), Ok(()));
    assert_eq!(a.send(T0, d, &[7; 1000], 0), Ok(1000));
    run(&mut a, &mut b, T0);
    assert_eq!(e(a.connect_user(T0, d, &unspec())), Ok(()));
    let next = connect_syn(&mut a, d);
    let past = next.wrapping_sub(isn.wrapping_add(1001 + 2));
    assert!((65535..1 << 24).contains(&past), "max_window {past}");
}

/// __inet_bind checks sk_state and inet_num ("active socket, double bind"), not
/// sock->state: a connect refused and not yet reported (SS_CONNECTING in
/// TCP_CLOSE) freed its port, so bind(2) succeeds, and the port stays through the
/// connect(2) that reports the error (tcp_disconnect from TCP_CLOSE puts none) and
/// goes with close(2); a port the user bound before connecting stays (EINVAL).
#[test]
fn bind_after_a_connect_ended_follows_inet_num() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let to = SocketAddr::new(B.into(), 80);
    let any = |port: u16| SocketAddr::new([0, 0, 0, 0].into(), port);
    let refused = |a: &mut Host, b: &mut Host| {
        let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
        run(a, b, T0);
        c
    };
    let c = refused(&mut a, &mut b);
    assert_eq!(e(a.bind(c, any(0))), Ok(()));
    let p = a.local_addr(c).unwrap().unwrap().port();
    let f = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.bind(f, any(p))), Err(errno::EADDRINUSE));
    assert_eq!(e(a.bind(c, any(7000))), Err(errno::EINVAL));
    assert_eq!(e(a.listen(c, 1)), Err(errno::EINVAL), "SS_CONNECTING");
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::ECONNREFUSED));
    assert_eq!(a.local_addr(c).unwrap(), Some(any(p)));
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    assert_eq!(a.local_addr(c).unwrap(), Some(SocketAddr::new(A.into(), p)));
    let g = refused(&mut a, &mut b);
    assert_eq!(e(a.bind(g, any(6000))), Ok(()));
    a.close(T0, g).unwrap();
    assert_eq!(e(a.bind(f, any(6000))), Ok(()), "close put the port");
    let d = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    a.bind(d, any(5555)).unwrap();
    assert_eq!(e(a.connect(T0, d, to)), Err(errno::EINPROGRESS));
    run(&mut a, &mut b, T0);
    assert_eq!(
        e(a.bind(d, any(5556))),
        Err(errno::EINVAL),
        "SOCK_BINDPORT_LOCK"
    );
}

/// `TCP_INFO` of socket `fd` (Linux's struct tcp_info).
fn tcp_info(a: &mut Host, fd: Fd) -> [u8; sockopt::TCP_INFO_LEN] {
    let mut i = [0u8; sockopt::TCP_INFO_LEN];
    a.getsockopt(T0, fd, SOL_TCP, TCP_INFO, &mut i).unwrap();
    i
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

/// tcp_done_with_error's tcp_write_queue_purge leaves the refused connection with
/// tcpi_unacked 0; once connect(2) reported the error, tcp_disconnect has reset
/// rcv_mss (TCP_MIN_MSS) but kept mss_cache, advmss, the path MTU, rcv_wnd and
/// rcv_ssthresh, and moved write_seq 2 past snd_nxt (tcpi_notsent_bytes); the
/// next connect's tcp_initialize_rcv_mss reads that rcv_wnd (536 bounds it, then
/// mss_cache: 524), where the first had none (88). Checked against Linux 6.18 with
/// tests/packetdrill's tcp-info-refused-connect-and-the-next-v4.pkt.
#[test]
fn tcp_info_through_a_refused_connect_and_the_next() {
    let (mut a, mut b) = (host(A, 1), host(B, 2));
    let to = SocketAddr::new(B.into(), 80);
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    assert_eq!(u32_at(&tcp_info(&mut a, c), 20), 88, "first rcv_mss");
    run(&mut a, &mut b, T0); // B resets: nothing listens
    let i = tcp_info(&mut a, c);
    assert_eq!((i[0], u32_at(&i, 24)), (7, 0), "TCP_CLOSE, unacked");
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::ECONNREFUSED));
    let i = tcp_info(&mut a, c);
    let mss = (
        u32_at(&i, 16),
        u32_at(&i, 20),
        u32_at(&i, 84),
        u32_at(&i, 60),
    );
    assert_eq!(mss, (524, 88, 1460, 1500), "snd_mss, rcv_mss, advmss, pmtu");
    let (rcv_wnd, rcv_ssthresh) = (u32_at(&i, 232), u32_at(&i, 64));
    assert!(
        rcv_wnd > 1072 && rcv_ssthresh == rcv_wnd,
        "{rcv_wnd} {rcv_ssthresh}"
    );
    assert_eq!(
        (u32_at(&i, 144), u32_at(&i, 8)),
        (2, 1_000_000),
        "notsent, rto"
    );
    assert_eq!(e(a.connect(T0, c, to)), Err(errno::EINPROGRESS));
    let i = tcp_info(&mut a, c);
    assert_eq!((i[0], u32_at(&i, 20)), (2, 524), "SYN-SENT, rcv_mss");
}

/// tcp_disconnect of a socket never connected moves write_seq by 2 past an
/// snd_nxt of 0: tcpi_notsent_bytes counts it.
#[test]
fn notsent_bytes_of_a_fresh_socket_after_disconnect() {
    let mut a = host(A, 1);
    let c = a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(u32_at(&tcp_info(&mut a, c), 144), 0);
    assert_eq!(e(a.connect_user(T0, c, &unspec())), Ok(()));
    assert_eq!(e(a.connect_user(T0, c, &unspec())), Ok(()));
    assert_eq!(u32_at(&tcp_info(&mut a, c), 144), 4);
}

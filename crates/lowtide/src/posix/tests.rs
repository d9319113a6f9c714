//! The socket layer's own tests: two hosts joined by a lossless wire.

use super::consts::*;
use super::*;
use crate::{Config, Stack};
use std::net::{IpAddr, Ipv4Addr};

pub(super) const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(super) const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub(super) fn host(ip: Ipv4Addr, seed: u64) -> Host {
    host_with(Config::default(), ip, seed)
}

/// [`host`] with its stack's configuration.
pub(super) fn host_with(cfg: Config, ip: Ipv4Addr, seed: u64) -> Host {
    let mut s = Stack::new(cfg, seed);
    s.add_address(IpAddr::V4(ip));
    Host::new(s)
}

/// Two hosts joined by a perfect wire.
pub(super) struct HostPair {
    pub(super) a: Host,
    pub(super) b: Host,
    pub(super) now: Instant,
}

impl HostPair {
    pub(super) fn new() -> HostPair {
        HostPair {
            a: host(A, 1),
            b: host(B, 2),
            now: Instant::ZERO,
        }
    }

    /// Moves packets both ways (checksums completed as a device would) until quiet.
    pub(super) fn run(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for (from_a, _) in [(true, 0), (false, 0)] {
                let (src, dst) = if from_a {
                    (&mut self.a, &mut self.b)
                } else {
                    (&mut self.b, &mut self.a)
                };
                while let Some(tx) = src.poll_transmit(self.now) {
                    let mut segs = Vec::new();
                    lowtide_wire::gso::segment(&tx.packet, tx.gso_size, |s| segs.push(s))
                        .expect("valid packet");
                    src.handle_tx_complete(self.now, tx.token);
                    for s in segs {
                        dst.handle_packet(self.now, &s, RxChecksum::Verify);
                    }
                    moved = true;
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Lets `d` of virtual time pass, firing timers.
    fn wait(&mut self, d: core::time::Duration) {
        let end = self.now + d;
        loop {
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .filter(|t| *t <= end)
                .min();
            let Some(t) = next else { break };
            self.now = t.max(self.now);
            self.a.handle_timeout(self.now);
            self.b.handle_timeout(self.now);
            self.run();
        }
        self.now = end;
    }

    /// A connected pair: (client fd on A, accepted fd on B, listener fd on B).
    pub(super) fn connected(&mut self) -> (Fd, Fd, Fd) {
        let l = self.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        self.b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
        self.b.listen(l, 8).unwrap();
        let c = self.a.socket(AF_INET, SOCK_STREAM, IPPROTO_TCP).unwrap();
        let to = SocketAddr::new(B.into(), 80);
        assert_eq!(
            self.a.connect(self.now, c, to),
            Err(Errno(errno::EINPROGRESS))
        );
        assert_eq!(self.a.connect(self.now, c, to), Err(Errno(errno::EALREADY)));
        self.run();
        assert_eq!(self.a.connect(self.now, c, to), Ok(()));
        assert_eq!(self.a.connect(self.now, c, to), Err(Errno(errno::EISCONN)));
        let (s, peer) = self.b.accept(l).unwrap();
        assert_eq!(peer.ip(), IpAddr::V4(A));
        (c, s, l)
    }
}

fn int_opt(h: &mut Host, now: Instant, fd: Fd, level: i32, name: i32) -> i32 {
    let mut b = [0u8; 4];
    assert_eq!(h.getsockopt(now, fd, level, name, &mut b), Ok(4));
    i32::from_ne_bytes(b)
}

#[test]
fn socket_and_bind_errnos_are_linuxs() {
    let mut h = host(A, 1);
    assert_eq!(h.socket(1, SOCK_STREAM, 0), Err(Errno(errno::EAFNOSUPPORT)));
    assert_eq!(h.socket(AF_INET, 2, 0), Err(Errno(errno::ESOCKTNOSUPPORT)));
    assert_eq!(
        h.socket(AF_INET, SOCK_STREAM, 17),
        Err(Errno(errno::EPROTONOSUPPORT))
    );
    let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(fd, 3, "the lowest free descriptor");
    let other = SocketAddr::new(B.into(), 80);
    assert_eq!(h.bind(fd, other), Err(Errno(errno::EADDRNOTAVAIL)));
    h.bind(fd, SocketAddr::new(A.into(), 80)).unwrap();
    assert_eq!(
        h.bind(fd, SocketAddr::new(A.into(), 81)),
        Err(Errno(errno::EINVAL))
    );
    let fd2 = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        h.bind(fd2, SocketAddr::new(A.into(), 80)),
        Err(Errno(errno::EADDRINUSE))
    );
    let mut buf = [0u8; 8];
    // Never connected: reads ENOTCONN, writes EPIPE (sk_stream_wait_connect).
    assert_eq!(
        h.recv(Instant::ZERO, fd, &mut buf, 0),
        Err(Errno(errno::ENOTCONN))
    );
    assert_eq!(h.send(Instant::ZERO, fd, b"x", 0), Err(Errno(errno::EPIPE)));
    assert_eq!(
        h.shutdown(Instant::ZERO, fd, SHUT_WR),
        Err(Errno(errno::ENOTCONN))
    );
    assert_eq!(h.close(Instant::ZERO, 99), Err(Errno(errno::EBADF)));
    h.listen(fd, 4).unwrap();
    assert_eq!(h.accept(fd), Err(Errno(errno::EAGAIN)));
    assert_eq!(h.accept(fd2), Err(Errno(errno::EINVAL)));
    assert_eq!(
        h.ioctl(fd, SIOCINQ),
        Err(Errno(errno::EINVAL)),
        "tcp_ioctl on LISTEN"
    );
}

#[test]
fn refused_connect_reports_econnrefused_once() {
    let mut n = HostPair::new();
    let c = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(B.into(), 9);
    assert_eq!(n.a.connect(n.now, c, to), Err(Errno(errno::EINPROGRESS)));
    n.run();
    assert_ne!(n.a.poll_mask(c).unwrap() & POLLERR, 0);
    assert_eq!(n.a.connect(n.now, c, to), Err(Errno(errno::ECONNREFUSED)));
    assert_eq!(int_opt(&mut n.a, n.now, c, SOL_SOCKET, SO_ERROR), 0);
}

#[test]
fn data_shutdown_and_epipe() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    assert_eq!(n.a.send(n.now, c, b"hello", 0), Ok(5));
    n.run();
    assert_eq!(n.b.ioctl(s, SIOCINQ), Ok(5));
    let mut buf = [0u8; 16];
    assert_eq!(n.b.recv(n.now, s, &mut buf, MSG_PEEK), Ok(5));
    assert_eq!(n.b.ioctl(s, SIOCINQ), Ok(5), "MSG_PEEK leaves the data");
    assert_eq!(n.b.recv(n.now, s, &mut buf, 0), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(n.b.recv(n.now, s, &mut buf, 0), Err(Errno(errno::EAGAIN)));
    n.a.shutdown(n.now, c, SHUT_WR).unwrap();
    assert_eq!(n.a.send(n.now, c, b"x", 0), Err(Errno(errno::EPIPE)));
    n.run();
    assert_eq!(
        n.b.recv(n.now, s, &mut buf, 0),
        Ok(0),
        "FIN reads as end of stream"
    );
    let m = n.b.poll_mask(s).unwrap();
    assert_eq!(
        m & (POLLIN | POLLRDHUP | POLLOUT),
        POLLIN | POLLRDHUP | POLLOUT
    );
    assert_eq!(m & POLLHUP, 0, "only one direction is shut");
}

/// `tcp_recvmsg_locked` with `MSG_TRUNC`: the bytes are taken (with `MSG_PEEK`
/// only counted), never copied into the buffer.
#[test]
fn msg_trunc_reads_without_copying() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    assert_eq!(n.a.send(n.now, c, b"hello world", 0), Ok(11));
    n.run();
    let mut buf = [0xaau8; 8];
    assert_eq!(n.b.recv(n.now, s, &mut buf, MSG_PEEK | MSG_TRUNC), Ok(8));
    assert_eq!(buf, [0xaa; 8], "nothing copied");
    assert_eq!(n.b.ioctl(s, SIOCINQ), Ok(11), "MSG_PEEK leaves the data");
    assert_eq!(n.b.recv(n.now, s, &mut buf[..6], MSG_TRUNC), Ok(6));
    assert_eq!(buf, [0xaa; 8], "nothing copied");
    assert_eq!(n.b.ioctl(s, SIOCINQ), Ok(5), "the bytes are gone");
    assert_eq!(n.b.recv(n.now, s, &mut buf, MSG_PEEK | MSG_TRUNC), Ok(5));
    assert_eq!(n.b.recv(n.now, s, &mut buf, 0), Ok(5));
    assert_eq!(&buf[..5], b"world");
    assert_eq!(
        n.b.recv(n.now, s, &mut buf, MSG_TRUNC),
        Err(Errno(errno::EAGAIN))
    );
    assert_eq!(
        n.b.recv(n.now, s, &mut buf, MSG_TRUNC | MSG_PEEK),
        Err(Errno(errno::EAGAIN))
    );
}

#[test]
fn close_with_unread_data_resets_the_peer() {
    // tcp_close: unread data makes close send RST (RFC 2525 section 2.17).
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    n.a.send(n.now, c, b"unread", 0).unwrap();
    n.run();
    n.b.close(n.now, s).unwrap();
    n.run();
    let mut buf = [0u8; 4];
    assert_eq!(
        n.a.recv(n.now, c, &mut buf, 0),
        Err(Errno(errno::ECONNRESET))
    );
    let m = n.a.poll_mask(c).unwrap();
    assert_eq!(m & POLLHUP, POLLHUP);
}

#[test]
fn linger_zero_close_aborts() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    let lin: Vec<u8> = [1i32, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
    n.a.setsockopt(n.now, c, SOL_SOCKET, SO_LINGER, &lin)
        .unwrap();
    let mut back = [0u8; 8];
    assert_eq!(
        n.a.getsockopt(n.now, c, SOL_SOCKET, SO_LINGER, &mut back),
        Ok(8)
    );
    assert_eq!(&back[..], &lin[..]);
    n.a.close(n.now, c).unwrap();
    n.run();
    let mut buf = [0u8; 4];
    assert_eq!(
        n.b.recv(n.now, s, &mut buf, 0),
        Err(Errno(errno::ECONNRESET))
    );
}

#[test]
fn poll_masks_follow_tcp_poll() {
    let mut n = HostPair::new();
    let fresh = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    // A never-connected socket is TCP_CLOSE: HUP, and writable.
    assert_eq!(n.a.poll_mask(fresh), Ok(POLLOUT | POLLWRNORM | POLLHUP));
    let (c, s, l) = n.connected();
    assert_eq!(n.b.poll_mask(l), Ok(0), "accept queue drained");
    assert_eq!(n.a.poll_mask(c), Ok(POLLOUT | POLLWRNORM));
    n.a.send(n.now, c, b"abc", 0).unwrap();
    n.run();
    let mut p = [
        PollFd {
            fd: s,
            events: POLLIN,
            revents: 0,
        },
        PollFd {
            fd: -1,
            events: POLLIN,
            revents: 0,
        },
        PollFd {
            fd: 77,
            events: POLLIN,
            revents: 0,
        },
    ];
    assert_eq!(n.b.poll(&mut p), 2);
    assert_eq!(p[0].revents, POLLIN, "filtered by events");
    assert_eq!(p[1].revents, 0, "negative fds are ignored");
    assert_eq!(p[2].revents, POLLNVAL);
}

#[test]
fn epoll_level_and_edge_triggered() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    let lt = n.b.epoll_create(1).unwrap();
    let et = n.b.epoll_create(1).unwrap();
    n.b.epoll_ctl(lt, EPOLL_CTL_ADD, s, POLLIN, 7).unwrap();
    n.b.epoll_ctl(et, EPOLL_CTL_ADD, s, POLLIN | POLLOUT | EPOLLET, 9)
        .unwrap();
    assert_eq!(
        n.b.epoll_ctl(et, EPOLL_CTL_ADD, s, POLLIN, 9),
        Err(Errno(errno::EEXIST))
    );
    // ET reports the state found at ADD once.
    let ev = n.b.epoll_wait(et, 4).unwrap();
    assert_eq!(
        ev,
        vec![EpollEvent {
            events: POLLOUT,
            data: 9
        }]
    );
    assert!(n.b.epoll_wait(et, 4).unwrap().is_empty());
    assert!(n.b.epoll_wait(lt, 4).unwrap().is_empty());
    n.a.send(n.now, c, &[1; 100], 0).unwrap();
    n.run();
    // LT repeats while readable; ET once per arrival.
    for _ in 0..2 {
        assert_eq!(
            n.b.epoll_wait(lt, 4).unwrap(),
            vec![EpollEvent {
                events: POLLIN,
                data: 7
            }]
        );
    }
    assert_eq!(n.b.epoll_wait(et, 4).unwrap()[0].events, POLLIN | POLLOUT);
    assert!(n.b.epoll_wait(et, 4).unwrap().is_empty());
    let mut buf = [0u8; 10];
    n.b.recv(n.now, s, &mut buf, 0).unwrap();
    assert!(
        n.b.epoll_wait(et, 4).unwrap().is_empty(),
        "a read is no wakeup"
    );
    n.a.send(n.now, c, &[1; 100], 0).unwrap();
    n.run();
    assert_eq!(
        n.b.epoll_wait(et, 4).unwrap().len(),
        1,
        "new data wakes again"
    );
    n.b.epoll_ctl(lt, EPOLL_CTL_DEL, s, 0, 0).unwrap();
    assert!(n.b.epoll_wait(lt, 4).unwrap().is_empty());
    assert_eq!(
        n.b.epoll_ctl(lt, EPOLL_CTL_DEL, s, 0, 0),
        Err(Errno(errno::ENOENT))
    );
    n.b.close(n.now, s).unwrap();
    assert!(
        n.b.epoll_wait(et, 4).unwrap().is_empty(),
        "close removes the fd"
    );
}

/// do_epoll_ctl's checks, in its order: both files (EBADF), the same file or an epfd
/// that is no epoll (EINVAL), EPOLLEXCLUSIVE only at ADD, with its events and not on
/// an epoll; an exclusive item cannot be modified, only deleted.
#[test]
fn epoll_ctl_checks_and_exclusive_items() {
    let mut n = HostPair::new();
    let (_c, s, _) = n.connected();
    let ep = n.b.epoll_create(1).unwrap();
    let ep2 = n.b.epoll_create(1).unwrap();
    let e = |r: Result<(), Errno>| r.unwrap_err().0;
    assert_eq!(
        e(n.b.epoll_ctl(900, EPOLL_CTL_ADD, 900, POLLIN, 0)),
        errno::EBADF
    );
    assert_eq!(
        e(n.b.epoll_ctl(ep, EPOLL_CTL_ADD, 900, POLLIN, 0)),
        errno::EBADF
    );
    assert_eq!(
        e(n.b.epoll_ctl(ep, EPOLL_CTL_ADD, ep, POLLIN, 0)),
        errno::EINVAL
    );
    assert_eq!(
        e(n.b.epoll_ctl(s, EPOLL_CTL_ADD, ep, POLLIN, 0)),
        errno::EINVAL
    );
    let x = POLLIN | EPOLLEXCLUSIVE;
    assert_eq!(
        e(n.b.epoll_ctl(ep, EPOLL_CTL_ADD, ep2, x, 0)),
        errno::EINVAL
    );
    let rdhup = x | POLLRDHUP;
    assert_eq!(
        e(n.b.epoll_ctl(ep, EPOLL_CTL_ADD, s, rdhup, 0)),
        errno::EINVAL
    );
    assert_eq!(
        e(n.b.epoll_ctl(ep, EPOLL_CTL_ADD, s, x | EPOLLONESHOT, 0)),
        errno::EINVAL
    );
    n.b.epoll_ctl(ep, EPOLL_CTL_ADD, s, x | POLLOUT | EPOLLET, 5)
        .unwrap();
    assert_eq!(
        n.b.epoll_wait(ep, 4).unwrap(),
        vec![EpollEvent {
            events: POLLOUT,
            data: 5
        }],
        "the flags are never reported"
    );
    assert_eq!(e(n.b.epoll_ctl(ep, EPOLL_CTL_MOD, s, x, 0)), errno::EINVAL);
    assert_eq!(
        e(n.b.epoll_ctl(ep, EPOLL_CTL_MOD, s, POLLIN, 0)),
        errno::EINVAL
    );
    n.b.epoll_ctl(ep, EPOLL_CTL_DEL, s, 0, 0).unwrap();
    n.b.epoll_ctl(ep, EPOLL_CTL_ADD, s, POLLIN, 5).unwrap();
    n.b.epoll_ctl(ep, EPOLL_CTL_MOD, s, POLLOUT, 6).unwrap();
}

#[test]
fn option_round_trips() {
    let mut n = HostPair::new();
    let fd = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let now = n.now;
    let one = 1i32.to_ne_bytes();
    // SO_SNDBUF/SO_RCVBUF read back doubled (sock_setsockopt).
    n.a.setsockopt(now, fd, SOL_SOCKET, SO_SNDBUF, &21000i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_SOCKET, SO_SNDBUF), 42000);
    n.a.setsockopt(now, fd, SOL_SOCKET, SO_RCVBUF, &10000i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_SOCKET, SO_RCVBUF), 20000);
    n.a.setsockopt(now, fd, SOL_TCP, TCP_NODELAY, &one).unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_NODELAY), 1);
    // TCP_SYNCNT: tcp_syn_retries until set, 1..=127 (MAX_TCP_SYNCNT).
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_SYNCNT), 6);
    for bad in [0i32, 128] {
        assert_eq!(
            n.a.setsockopt(now, fd, SOL_TCP, TCP_SYNCNT, &bad.to_ne_bytes()),
            Err(Errno(errno::EINVAL))
        );
    }
    n.a.setsockopt(now, fd, SOL_TCP, TCP_SYNCNT, &3i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_SYNCNT), 3);
    // TCP_QUICKACK reads 1 unless in pingpong mode; 0 enters it.
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_QUICKACK), 1);
    n.a.setsockopt(now, fd, SOL_TCP, TCP_QUICKACK, &0i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_QUICKACK), 0);
    n.a.setsockopt(now, fd, SOL_TCP, TCP_QUICKACK, &one)
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_QUICKACK), 1);
    // TCP_MAXSEG: user_mss before the connection, range-checked.
    assert_eq!(
        n.a.setsockopt(now, fd, SOL_TCP, TCP_MAXSEG, &50i32.to_ne_bytes()),
        Err(Errno(errno::EINVAL))
    );
    n.a.setsockopt(now, fd, SOL_TCP, TCP_MAXSEG, &1100i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_MAXSEG), 1100);
    n.a.setsockopt(now, fd, SOL_TCP, TCP_NOTSENT_LOWAT, &32000i32.to_ne_bytes())
        .unwrap();
    assert_eq!(
        int_opt(&mut n.a, now, fd, SOL_TCP, TCP_NOTSENT_LOWAT),
        32000
    );
    n.a.setsockopt(now, fd, SOL_TCP, TCP_USER_TIMEOUT, &3000i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_USER_TIMEOUT), 3000);
    assert_eq!(
        n.a.setsockopt(now, fd, SOL_TCP, TCP_CONGESTION, b"vegas\0"),
        Err(Errno(errno::ENOENT))
    );
    n.a.setsockopt(now, fd, SOL_TCP, TCP_CONGESTION, b"reno")
        .unwrap();
    let mut name = [0u8; 16];
    assert_eq!(
        n.a.getsockopt(now, fd, SOL_TCP, TCP_CONGESTION, &mut name),
        Ok(16)
    );
    assert_eq!(&name[..5], b"reno\0");
    // Unsupported options fail loudly.
    assert_eq!(
        n.a.setsockopt(now, fd, SOL_SOCKET, 12345, &one),
        Err(Errno(errno::ENOPROTOOPT))
    );
    assert_eq!(
        n.a.getsockopt(now, fd, 41, 1, &mut name),
        Err(Errno(errno::ENOPROTOOPT))
    );
    assert_eq!(
        n.a.setsockopt(now, fd, SOL_TCP, TCP_NODELAY, &[1]),
        Err(Errno(errno::EINVAL)),
        "optlen < sizeof(int)"
    );
    assert_eq!(n.a.fcntl_getfl(fd), Ok(O_RDWR));
    n.a.fcntl_setfl(fd, O_RDWR | O_NONBLOCK).unwrap();
    assert_eq!(n.a.fcntl_getfl(fd), Ok(O_RDWR | O_NONBLOCK));
    assert!(n.a.is_nonblocking(fd, 0));
}

#[test]
fn options_set_before_connect_reach_the_connection() {
    let mut n = HostPair::new();
    let l = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    n.b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    // A listener's options are inherited by its children (sk_clone_lock).
    n.b.setsockopt(n.now, l, SOL_SOCKET, SO_SNDBUF, &30000i32.to_ne_bytes())
        .unwrap();
    n.b.listen(l, 4).unwrap();
    let c = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    n.a.setsockopt(n.now, c, SOL_TCP, TCP_MAXSEG, &1000i32.to_ne_bytes())
        .unwrap();
    let _ = n.a.connect(n.now, c, SocketAddr::new(B.into(), 80));
    n.run();
    let (s, _) = n.b.accept(l).unwrap();
    assert_eq!(int_opt(&mut n.b, n.now, s, SOL_SOCKET, SO_SNDBUF), 60000);
    // The peer saw our MSS 1000; with timestamps on, 12 option bytes come off.
    assert_eq!(int_opt(&mut n.b, n.now, s, SOL_TCP, TCP_MAXSEG), 1000 - 12);
    let mut info = [0u8; 300];
    assert_eq!(
        n.a.getsockopt(n.now, c, SOL_TCP, TCP_INFO, &mut info),
        Ok(280)
    );
    assert_eq!(info[0], 1, "tcpi_state TCP_ESTABLISHED");
    assert_eq!(
        u32::from_ne_bytes(info[84..88].try_into().unwrap()),
        1000 - 12,
        "tcpi_advmss: tcp_rcv_synsent_state_process takes the timestamp's room off \
         (6.18 here: 988 after TCP_MAXSEG 1000)"
    );
    assert_eq!(
        u32::from_ne_bytes(info[80..84].try_into().unwrap()),
        10,
        "tcpi_snd_cwnd"
    );
    let mut mem = [0u8; 64];
    assert_eq!(
        n.a.getsockopt(n.now, c, SOL_SOCKET, SO_MEMINFO, &mut mem),
        Ok(36)
    );
}

#[test]
fn send_buffer_full_is_eagain_and_siocoutq_counts_it() {
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    let big = vec![0u8; 1 << 20];
    let mut queued = 0;
    loop {
        match n.a.send(n.now, c, &big, MSG_DONTWAIT) {
            Ok(k) => queued += k,
            Err(Errno(errno::EAGAIN)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(queued > 0);
    assert_eq!(
        n.a.ioctl(c, SIOCOUTQ),
        Ok(queued as i32),
        "nothing acknowledged yet"
    );
    assert!(
        n.a.ioctl(c, SIOCOUTQNSD).unwrap() < queued as i32,
        "some were sent"
    );
    assert_eq!(n.a.poll_mask(c).unwrap() & POLLOUT, 0);
    n.run();
    n.wait(core::time::Duration::from_millis(50));
    assert_ne!(n.a.poll_mask(c).unwrap() & POLLOUT, 0, "ACKs freed space");
}

/// Data segments A has queued for the wire: (payload length, PSH).
fn take_data_segments(n: &mut HostPair) -> Vec<(usize, bool)> {
    let mut out = Vec::new();
    while let Some(tx) = n.a.poll_transmit(n.now) {
        let mut segs = Vec::new();
        lowtide_wire::gso::segment(&tx.packet, tx.gso_size, |s| segs.push(s)).unwrap();
        n.a.handle_tx_complete(n.now, tx.token);
        for s in segs {
            let (th, hl) = lowtide_wire::tcp::TcpRepr::parse(&s[20..]).unwrap();
            let len = s.len() - 20 - hl;
            if len > 0 {
                out.push((len, th.flags.contains(lowtide_wire::tcp::TcpFlags::PSH)));
            }
            n.b.handle_packet(n.now, &s, RxChecksum::Verify);
        }
    }
    n.run();
    out
}

#[test]
fn cork_and_msg_more_hold_sub_mss_data_and_psh() {
    // tcp_nagle_check: TCP_NAGLE_CORK holds a partial segment; __tcp_sock_set_cork and
    // __tcp_sock_set_nodelay push it (TCP_NAGLE_PUSH); tcp_push marks PSH only when
    // the write had no MSG_MORE.
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    let now = n.now;
    n.a.setsockopt(now, c, SOL_TCP, TCP_CORK, &1i32.to_ne_bytes())
        .unwrap();
    n.a.send(now, c, &[0; 40], 0).unwrap();
    n.a.send(now, c, &[0; 40], 0).unwrap();
    assert!(take_data_segments(&mut n).is_empty(), "corked");
    n.a.setsockopt(now, c, SOL_TCP, TCP_CORK, &0i32.to_ne_bytes())
        .unwrap();
    assert_eq!(take_data_segments(&mut n), vec![(80, true)]);
    n.a.setsockopt(now, c, SOL_TCP, TCP_CORK, &1i32.to_ne_bytes())
        .unwrap();
    n.a.send(now, c, &[0; 40], MSG_MORE).unwrap();
    n.a.send(now, c, &[0; 40], MSG_MORE).unwrap();
    assert!(take_data_segments(&mut n).is_empty());
    n.a.setsockopt(now, c, SOL_TCP, TCP_NODELAY, &1i32.to_ne_bytes())
        .unwrap();
    assert_eq!(
        take_data_segments(&mut n),
        vec![(80, false)],
        "MSG_MORE: no PSH"
    );
}

#[test]
fn psh_on_gso_packets_and_on_the_pushed_tail_only() {
    // __tcp_transmit_skb sets PSH on every packet of more than one segment; a
    // 1-MSS fragment of an unpushed skb has none (tcp_fragment keeps PSH on the
    // second part); tcp_push marks the tail of each write.
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    n.a.send(n.now, c, &vec![0u8; 30000], 0).unwrap();
    let mut psh = Vec::new();
    while let Some(tx) = n.a.poll_transmit(n.now) {
        let (ip, _) = (&tx.packet[..20], ());
        let hl = ((ip[0] & 0xf) * 4) as usize;
        let (th, thl) = lowtide_wire::tcp::TcpRepr::parse(&tx.packet[hl..]).unwrap();
        let len = tx.packet.len() - hl - thl;
        psh.push((
            len > 0,
            tx.gso_segs,
            th.flags.contains(lowtide_wire::tcp::TcpFlags::PSH),
        ));
        n.a.handle_tx_complete(n.now, tx.token);
    }
    let data: Vec<_> = psh.into_iter().filter(|p| p.0).collect();
    assert!(!data.is_empty());
    for (_, segs, p) in data {
        assert_eq!(p, segs > 1, "PSH exactly on multi-segment packets here");
    }
}

#[test]
fn linger_with_time_reports_the_wait_for_the_fin_ack() {
    // tcp_close with SOCK_LINGER and sk_lingertime > 0: sk_stream_wait_close sleeps
    // while the state is FIN-WAIT-1, CLOSING or LAST-ACK.
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    let lin: Vec<u8> = [1i32, 5].iter().flat_map(|v| v.to_ne_bytes()).collect();
    n.a.setsockopt(n.now, c, SOL_SOCKET, SO_LINGER, &lin)
        .unwrap();
    let (h, d) =
        n.a.close_linger(n.now, c)
            .unwrap()
            .expect("lingering close");
    assert_eq!(d, Some(core::time::Duration::from_secs(5)));
    assert!(n.a.is_closing(h), "FIN sent, not yet acknowledged");
    n.run();
    // The bare FIN's ACK (ato 0, no data yet) goes when the delayed-ACK timer,
    // armed for the current jiffy, fires at the next tick (tcp_send_delayed_ack,
    // tcp_delack_timer_handler).
    assert!(n.a.is_closing(h), "FIN not yet acknowledged: timer pending");
    n.wait(core::time::Duration::from_millis(1));
    assert!(!n.a.is_closing(h), "FIN acknowledged: FIN-WAIT-2");
    // Without SO_LINGER, close does not wait.
    let (c2, _, _) = {
        let l = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        n.b.bind(l, SocketAddr::new(B.into(), 81)).unwrap();
        n.b.listen(l, 4).unwrap();
        let c = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let _ = n.a.connect(n.now, c, SocketAddr::new(B.into(), 81));
        n.run();
        (c, 0, l)
    };
    assert_eq!(n.a.close_linger(n.now, c2), Ok(None));
}

#[test]
fn keepalive_options_follow_linux_and_children_inherit_them() {
    let mut n = HostPair::new();
    let now = n.now;
    let fd = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    // keepalive_time_when and friends: the sysctls until set.
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_SOCKET, SO_KEEPALIVE), 0);
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_KEEPIDLE), 7200);
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_KEEPINTVL), 75);
    assert_eq!(int_opt(&mut n.a, now, fd, SOL_TCP, TCP_KEEPCNT), 9);
    for (name, bad) in [
        (TCP_KEEPIDLE, 0i32),
        (TCP_KEEPIDLE, 32768),
        (TCP_KEEPCNT, 128),
    ] {
        assert_eq!(
            n.a.setsockopt(now, fd, SOL_TCP, name, &bad.to_ne_bytes()),
            Err(Errno(errno::EINVAL))
        );
    }
    // Set on the listener, inherited by the accepted socket, which then probes.
    let l = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    n.b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    for (level, name, v) in [
        (SOL_SOCKET, SO_KEEPALIVE, 1i32),
        (SOL_TCP, TCP_KEEPIDLE, 5),
        (SOL_TCP, TCP_KEEPINTVL, 1),
        (SOL_TCP, TCP_KEEPCNT, 2),
    ] {
        n.b.setsockopt(now, l, level, name, &v.to_ne_bytes())
            .unwrap();
    }
    n.b.listen(l, 4).unwrap();
    let _ = n.a.connect(n.now, fd, SocketAddr::new(B.into(), 80));
    n.run();
    let (s, _) = n.b.accept(l).unwrap();
    assert_eq!(int_opt(&mut n.b, n.now, s, SOL_SOCKET, SO_KEEPALIVE), 1);
    assert_eq!(int_opt(&mut n.b, n.now, s, SOL_TCP, TCP_KEEPIDLE), 5);
    n.wait(core::time::Duration::from_secs(12));
    let probes = n.b.stack().counters().get(crate::Mib::TcpExtTCPKeepAlive);
    assert_eq!(probes, 2, "probes at 5 s and 10 s, each answered by A");
}

#[test]
fn listener_readiness_oneshot_and_mod_rearm() {
    let mut n = HostPair::new();
    let l = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    n.b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    n.b.listen(l, 4).unwrap();
    let ep = n.b.epoll_create(1).unwrap();
    n.b.epoll_ctl(ep, EPOLL_CTL_ADD, l, POLLIN | EPOLLONESHOT, 1)
        .unwrap();
    assert!(
        n.b.epoll_wait(ep, 8).unwrap().is_empty(),
        "nothing to accept"
    );
    let c = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let _ = n.a.connect(n.now, c, SocketAddr::new(B.into(), 80));
    n.run();
    // inet_csk_listen_poll: a non-empty accept queue is POLLIN.
    assert_eq!(n.b.poll_mask(l), Ok(POLLIN | POLLRDNORM));
    assert_eq!(
        n.b.epoll_wait(ep, 8).unwrap(),
        vec![EpollEvent {
            events: POLLIN,
            data: 1
        }]
    );
    assert!(
        n.b.epoll_wait(ep, 8).unwrap().is_empty(),
        "EPOLLONESHOT disarms"
    );
    n.b.epoll_ctl(ep, EPOLL_CTL_MOD, l, POLLIN, 2).unwrap();
    assert_eq!(
        n.b.epoll_wait(ep, 8).unwrap(),
        vec![EpollEvent {
            events: POLLIN,
            data: 2
        }]
    );
    n.b.accept(l).unwrap();
    assert!(n.b.epoll_wait(ep, 8).unwrap().is_empty());
    assert_eq!(n.b.epoll_wait(ep, 0), Err(Errno(errno::EINVAL)));
    assert_eq!(
        n.b.epoll_ctl(ep, EPOLL_CTL_ADD, ep, POLLIN, 0),
        Err(Errno(errno::EINVAL))
    );
}

/// TCP_INQ: 0 or 1 only (EINVAL otherwise); with it on, every successful recvmsg
/// carries TCP_CM_INQ = tcp_inq_hint, 1 once the FIN is in and all was read.
#[test]
fn tcp_inq_reports_what_is_left_to_read() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    let now = n.now;
    let inq = |m: &RecvMsg| -> Vec<i32> {
        let c = m
            .cmsgs
            .iter()
            .filter(|c| (c.level, c.kind) == (SOL_TCP, TCP_CM_INQ));
        c.map(|c| i32::from_ne_bytes(c.data[..4].try_into().unwrap()))
            .collect()
    };
    let mut buf = [0u8; 4000];
    assert_eq!(n.a.send(now, c, &[1u8; 3000], 0), Ok(3000));
    n.run();
    let m = n.b.recvmsg(now, s, &mut buf[..1000], 0).unwrap();
    assert_eq!((m.len, inq(&m)), (1000, vec![]), "off by default");
    let two = 2i32.to_ne_bytes();
    let e = n.b.setsockopt(now, s, SOL_TCP, TCP_INQ, &two);
    assert_eq!(e, Err(Errno(errno::EINVAL)));
    n.b.setsockopt(now, s, SOL_TCP, TCP_INQ, &1i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.b, now, s, SOL_TCP, TCP_INQ), 1);
    let m = n.b.recvmsg(now, s, &mut buf[..500], 0).unwrap();
    assert_eq!((m.len, inq(&m)), (500, vec![1500]));
    let m = n.b.recvmsg(now, s, &mut buf, 0).unwrap();
    assert_eq!((m.len, inq(&m)), (1500, vec![0]));
    n.a.shutdown(now, c, SHUT_WR).unwrap();
    n.run();
    let m = n.b.recvmsg(now, s, &mut buf, 0).unwrap();
    assert_eq!((m.len, inq(&m)), (0, vec![1]), "EOF: read on");
}

/// An IPv6 listener on `[::]:80` on B, with `IPV6_V6ONLY` as given; A connects over
/// IPv4: (net, listener, client).
fn v6_listener(v6only: bool) -> (HostPair, Fd, Fd) {
    let mut n = HostPair::new();
    let l = n.b.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    let mut v = [0u8; 4];
    assert_eq!(
        n.b.getsockopt(n.now, l, IPPROTO_IPV6, IPV6_V6ONLY, &mut v),
        Ok(4)
    );
    assert_eq!(i32::from_ne_bytes(v), 0, "net.ipv6.bindv6only's default");
    let on = (v6only as i32).to_ne_bytes();
    n.b.setsockopt(n.now, l, IPPROTO_IPV6, IPV6_V6ONLY, &on)
        .unwrap();
    n.b.bind(l, "[::]:80".parse().unwrap()).unwrap();
    // Bound: IPV6_V6ONLY can no longer change (inet_num is set).
    assert_eq!(
        n.b.setsockopt(n.now, l, IPPROTO_IPV6, IPV6_V6ONLY, &on),
        err(errno::EINVAL)
    );
    n.b.listen(l, 8).unwrap();
    let c = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let now = n.now;
    assert_eq!(
        n.a.connect(now, c, SocketAddr::new(B.into(), 80)),
        err(errno::EINPROGRESS)
    );
    n.run();
    (n, l, c)
}

#[test]
fn ipv6_listener_takes_ipv4_as_mapped_unless_v6only() {
    let (mut n, l, c) = v6_listener(false);
    let (fd, peer) = n.b.accept(l).expect("an IPv4 connection");
    let mapped = |ip: Ipv4Addr, port| SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), port);
    let (local_c, _) =
        n.a.stack()
            .addresses(n.a.conn(c).unwrap().unwrap())
            .unwrap();
    assert_eq!(peer, mapped(A, local_c.port()));
    assert_eq!(n.b.peer_addr(fd), Ok(Some(peer)));
    assert_eq!(n.b.local_addr(fd), Ok(Some(mapped(B, 80))));
    assert_eq!(n.b.local_addr(l), Ok(Some("[::]:80".parse().unwrap())));
    // The IPv4 wildcard on the same port is taken by the dual-stack listener.
    let s4 = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        n.b.bind(s4, SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 80)),
        err(errno::EADDRINUSE)
    );
    // An IPv4 socket cannot use IPV6_V6ONLY (ip_setsockopt: ENOPROTOOPT).
    assert_eq!(
        n.b.setsockopt(n.now, s4, IPPROTO_IPV6, IPV6_V6ONLY, &[1, 0, 0, 0]),
        err(errno::ENOPROTOOPT)
    );

    let (mut n, l, c) = v6_listener(true);
    assert_eq!(n.b.accept(l), err(errno::EAGAIN));
    // No listener took the SYN: the client was reset.
    assert_eq!(
        n.a.connect(n.now, c, SocketAddr::new(B.into(), 80)),
        err(errno::ECONNREFUSED)
    );
    let s4 = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let any4 = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 80);
    assert_eq!(
        n.b.bind(s4, any4),
        Ok(()),
        "no conflict with an IPv6-only one"
    );
}

#[test]
fn ipv6_socket_connects_to_a_mapped_address_over_ipv4() {
    let mut n = HostPair::new();
    let l = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    n.b.bind(l, SocketAddr::new(B.into(), 80)).unwrap();
    n.b.listen(l, 8).unwrap();
    let c = n.a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    let to = SocketAddr::new(IpAddr::V6(B.to_ipv6_mapped()), 80);
    let now = n.now;
    assert_eq!(n.a.connect(now, c, to), err(errno::EINPROGRESS));
    n.run();
    assert_eq!(n.a.connect(now, c, to), Ok(()));
    let (fd, peer) = n.b.accept(l).unwrap();
    assert_eq!(peer.ip(), IpAddr::V4(A), "IPv4 on the wire");
    assert_eq!(n.a.peer_addr(c), Ok(Some(to)));
    let local = n.a.local_addr(c).unwrap().unwrap();
    assert_eq!(
        local,
        SocketAddr::new(IpAddr::V6(A.to_ipv6_mapped()), peer.port())
    );
    assert_eq!(n.a.send(now, c, b"hi", 0), Ok(2));
    n.run();
    let mut buf = [0u8; 4];
    assert_eq!(n.b.recv(now, fd, &mut buf, 0), Ok(2));
    // IPV6_V6ONLY: a mapped peer is unreachable; a family mismatch is EAFNOSUPPORT.
    let c6 = n.a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    n.a.setsockopt(now, c6, IPPROTO_IPV6, IPV6_V6ONLY, &[1, 0, 0, 0])
        .unwrap();
    assert_eq!(n.a.connect(now, c6, to), err(errno::ENETUNREACH));
    let c4 = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(n.a.connect(now, c4, to), err(errno::EAFNOSUPPORT));
    // A mapped bind on an IPv6 socket binds the IPv4 address.
    let b6 = n.a.socket(AF_INET6, SOCK_STREAM, 0).unwrap();
    let me = SocketAddr::new(IpAddr::V6(A.to_ipv6_mapped()), 5000);
    assert_eq!(n.a.bind(b6, me), Ok(()));
    assert_eq!(n.a.local_addr(b6), Ok(Some(me)));
    let b4 = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(
        n.a.bind(b4, SocketAddr::new(A.into(), 5000)),
        err(errno::EADDRINUSE)
    );
}

/// MSG_ZEROCOPY: ignored without SO_ZEROCOPY; with it, each send takes the next id,
/// and once all is acknowledged one IP_RECVERR entry covers the ids (COPIED, as
/// lowtide copied the bytes), with POLLERR while it waits; an empty error queue is
/// EAGAIN at once.
#[test]
fn zerocopy_completions_reach_the_error_queue() {
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    let now = n.now;
    let errq = |h: &mut Host| h.recvmsg(now, c, &mut [], MSG_ERRQUEUE);
    assert_eq!(n.a.send(now, c, b"plain", MSG_ZEROCOPY), Ok(5));
    n.run();
    assert_eq!(errq(&mut n.a), Err(Errno(errno::EAGAIN)), "no SO_ZEROCOPY");
    let bad =
        n.a.setsockopt(now, c, SOL_SOCKET, SO_ZEROCOPY, &2i32.to_ne_bytes());
    assert_eq!(bad, Err(Errno(errno::EINVAL)));
    n.a.setsockopt(now, c, SOL_SOCKET, SO_ZEROCOPY, &1i32.to_ne_bytes())
        .unwrap();
    assert_eq!(int_opt(&mut n.a, now, c, SOL_SOCKET, SO_ZEROCOPY), 1);
    assert_eq!(n.a.send(now, c, &[1u8; 3000], MSG_ZEROCOPY), Ok(3000));
    assert_eq!(n.a.poll_mask(c).unwrap() & POLLERR, 0, "not acked yet");
    n.run();
    assert_eq!(n.a.send(now, c, &[2u8; 100], MSG_ZEROCOPY), Ok(100));
    n.run();
    assert_ne!(n.a.poll_mask(c).unwrap() & POLLERR, 0);
    let m = errq(&mut n.a).unwrap();
    assert_eq!((m.len, m.flags), (0, MSG_ERRQUEUE));
    assert_eq!(m.cmsgs.len(), 1);
    let cm = &m.cmsgs[0];
    assert_eq!((cm.level, cm.kind, cm.data.len()), (SOL_IP, IP_RECVERR, 32));
    let mut want = crate::tcp::errqueue::SockExtendedErr {
        origin: crate::tcp::errqueue::SO_EE_ORIGIN_ZEROCOPY,
        code: crate::tcp::errqueue::SO_EE_CODE_ZEROCOPY_COPIED,
        info: 0,
        data: 1,
        ..Default::default()
    }
    .to_bytes()
    .to_vec();
    want.resize(32, 0);
    assert_eq!(cm.data, want, "ids 0..=1 in one entry");
    assert_eq!(errq(&mut n.a), Err(Errno(errno::EAGAIN)));
    assert_eq!(n.a.poll_mask(c).unwrap() & POLLERR, 0);
}

/// SO_TIMESTAMPING: OPT_ID needs a connection and unknown bits are EINVAL; each
/// write's last byte reports SCHED then SND as its segment goes out, ACK when the
/// peer acknowledges it, keys counted from snd_una at setsockopt, the software
/// time in SCM_TIMESTAMPING before IP_RECVERR, MSG_TRUNC for the packet copy.
#[test]
fn so_timestamping_reports_sched_snd_and_ack() {
    use crate::tcp::tstamp::*;
    let mut n = HostPair::new();
    let flags = SOF_TIMESTAMPING_TX_SCHED
        | SOF_TIMESTAMPING_TX_SOFTWARE
        | SOF_TIMESTAMPING_TX_ACK
        | SOF_TIMESTAMPING_SOFTWARE
        | SOF_TIMESTAMPING_OPT_ID;
    let set = |h: &mut Host, fd, f: u32| {
        h.setsockopt(
            Instant::ZERO,
            fd,
            SOL_SOCKET,
            SO_TIMESTAMPING,
            &f.to_ne_bytes(),
        )
    };
    let fresh = n.a.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(set(&mut n.a, fresh, flags), Err(Errno(errno::EINVAL)));
    assert_eq!(set(&mut n.a, fresh, 1 << 20), Err(Errno(errno::EINVAL)));
    let (c, _s, _) = n.connected();
    n.a.set_realtime_zero(core::time::Duration::from_secs(1000));
    assert_eq!(n.a.send(n.now, c, &[0; 100], 0), Ok(100));
    n.run();
    set(&mut n.a, c, flags).unwrap();
    assert_eq!(
        int_opt(&mut n.a, n.now, c, SOL_SOCKET, SO_TIMESTAMPING),
        flags as i32
    );
    n.now += core::time::Duration::from_millis(5);
    assert_eq!(n.a.send(n.now, c, &[1; 2000], 0), Ok(2000));
    assert_eq!(n.a.send(n.now, c, &[2; 2000], 0), Ok(2000));
    n.run();
    let mut got = Vec::new();
    while let Ok(m) = n.a.recvmsg(n.now, c, &mut [], MSG_ERRQUEUE) {
        assert_eq!(m.flags, MSG_ERRQUEUE | MSG_TRUNC);
        let [ts, re] = &m.cmsgs[..] else {
            panic!("two cmsgs: {:?}", m.cmsgs)
        };
        assert_eq!(
            (ts.level, ts.kind, ts.data.len()),
            (SOL_SOCKET, SCM_TIMESTAMPING, 48)
        );
        let sec = i64::from_ne_bytes(ts.data[..8].try_into().unwrap());
        let nsec = i64::from_ne_bytes(ts.data[8..16].try_into().unwrap());
        assert_eq!(
            (sec, nsec),
            (1000, 5_000_000),
            "ts[0]: the realtime of the event"
        );
        assert_eq!(re.kind, IP_RECVERR);
        let u = |i: usize| u32::from_ne_bytes(re.data[i..i + 4].try_into().unwrap());
        assert_eq!(
            (u(0), re.data[4]),
            (42, SO_EE_ORIGIN_TIMESTAMPING),
            "ENOMSG"
        );
        got.push((u(8), u(12)));
    }
    // Keys count from snd_una (100 bytes already acknowledged): 1999 and 3999. The
    // first write leaves a short segment in flight (1460 + 540), so Nagle
    // (tcp_mss_split_point, tcp_minshall_check) holds the second write's short tail,
    // which holds key 3999, until that segment is acknowledged.
    let want = [
        (SCM_TSTAMP_SCHED, 1999),
        (SCM_TSTAMP_SND, 1999),
        (SCM_TSTAMP_ACK, 1999),
        (SCM_TSTAMP_SCHED, 3999),
        (SCM_TSTAMP_SND, 3999),
        (SCM_TSTAMP_ACK, 3999),
    ];
    assert_eq!(got, want);
}

/// Two writes into one unsent skb (corked) keep one mark, the later write's end
/// (tcp_tx_timestamp overwrites shinfo->tskey); OPT_TSONLY reports carry no copy.
#[test]
fn so_timestamping_marks_the_skb_once_and_tsonly_has_no_bytes() {
    use crate::tcp::tstamp::*;
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    let flags = SOF_TIMESTAMPING_TX_ACK | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    n.a.setsockopt(n.now, c, SOL_SOCKET, SO_TIMESTAMPING, &flags.to_ne_bytes())
        .unwrap();
    n.a.setsockopt(n.now, c, SOL_TCP, TCP_CORK, &1i32.to_ne_bytes())
        .unwrap();
    assert_eq!(n.a.send(n.now, c, &[1; 10], 0), Ok(10));
    assert_eq!(n.a.send(n.now, c, &[2; 10], 0), Ok(10));
    n.a.setsockopt(n.now, c, SOL_TCP, TCP_CORK, &0i32.to_ne_bytes())
        .unwrap();
    n.run();
    let m = n.a.recvmsg(n.now, c, &mut [], MSG_ERRQUEUE).unwrap();
    assert_eq!(m.flags, MSG_ERRQUEUE, "TSONLY: nothing to truncate");
    assert_eq!(
        m.cmsgs.len(),
        1,
        "no SOF_TIMESTAMPING_SOFTWARE: no SCM_TIMESTAMPING"
    );
    let re = &m.cmsgs[0].data;
    let u = |i: usize| u32::from_ne_bytes(re[i..i + 4].try_into().unwrap());
    assert_eq!((u(8), u(12)), (SCM_TSTAMP_ACK, 19));
    assert_eq!(
        n.a.recvmsg(n.now, c, &mut [], MSG_ERRQUEUE),
        Err(Errno(errno::EAGAIN))
    );
}

/// SOF_TIMESTAMPING_OPT_STATS with OPT_TSONLY (tcp_get_timestamping_opt_stats): each
/// report's payload is the connection's statistics as netlink attributes, copied
/// into the buffer and, as SCM_TIMESTAMPING_OPT_STATS, between SCM_TIMESTAMPING and
/// IP_RECVERR (__sock_recv_timestamp); an ACK's report adds TCP_NLA_TTL. Without
/// OPT_TSONLY sock_set_timestamping refuses OPT_STATS (EINVAL), and the reports
/// of the flags without it carry none.
#[test]
fn so_timestamping_opt_stats_carry_the_connection_stats() {
    use crate::tcp::opt_stats::nla;
    use crate::tcp::tstamp::*;
    let mut n = HostPair::new();
    let (c, _s, _) = n.connected();
    let stats = SOF_TIMESTAMPING_TX_SOFTWARE
        | SOF_TIMESTAMPING_TX_ACK
        | SOF_TIMESTAMPING_SOFTWARE
        | SOF_TIMESTAMPING_OPT_STATS;
    for tsonly in [false, true] {
        let flags = stats
            | if tsonly {
                SOF_TIMESTAMPING_OPT_TSONLY
            } else {
                0
            };
        let f = flags.to_ne_bytes();
        let r = n.a.setsockopt(n.now, c, SOL_SOCKET, SO_TIMESTAMPING, &f);
        if !tsonly {
            assert_eq!(r, Err(Errno(errno::EINVAL)));
            let f = (flags & !SOF_TIMESTAMPING_OPT_STATS).to_ne_bytes();
            n.a.setsockopt(n.now, c, SOL_SOCKET, SO_TIMESTAMPING, &f)
                .unwrap();
        } else {
            r.unwrap();
        }
        assert_eq!(n.a.send(n.now, c, &[1; 1000], 0), Ok(1000));
        n.run();
        n.wait(core::time::Duration::from_millis(300)); // the delayed ACK
        let mut reports = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(m) = n.a.recvmsg(n.now, c, &mut buf, MSG_ERRQUEUE) {
            reports.push((m.clone(), buf[..m.len].to_vec()));
        }
        assert_eq!(reports.len(), 2, "SND and ACK");
        for (i, (m, payload)) in reports.iter().enumerate() {
            let kinds: Vec<i32> = m.cmsgs.iter().map(|c| c.kind).collect();
            if !tsonly {
                assert_eq!(kinds, [SCM_TIMESTAMPING, IP_RECVERR]);
                continue;
            }
            assert_eq!(m.flags, MSG_ERRQUEUE);
            assert_eq!(
                kinds,
                [SCM_TIMESTAMPING, SCM_TIMESTAMPING_OPT_STATS, IP_RECVERR]
            );
            let data = &m.cmsgs[1].data;
            assert_eq!(payload, data, "the payload is the attributes");
            let mut attrs = std::collections::HashMap::new();
            let mut at = 0;
            while at < data.len() {
                let len = u16::from_ne_bytes([data[at], data[at + 1]]) as usize;
                let kind = u16::from_ne_bytes([data[at + 2], data[at + 3]]);
                attrs.insert(kind, data[at + 4..at + len].to_vec());
                at += len.next_multiple_of(4);
            }
            let u64_of = |k| u64::from_ne_bytes(attrs[&k][..8].try_into().unwrap());
            let u32_of = |k| u32::from_ne_bytes(attrs[&k][..4].try_into().unwrap());
            assert_eq!(u64_of(nla::DATA_SEGS_OUT), 2);
            assert_eq!(u64_of(nla::BYTES_SENT), 2000);
            assert_eq!(u32_of(nla::SND_CWND), 10);
            let ack = i == 1;
            // A send's report comes while the skb is in tcp_transmit_skb: counted in
            // data_segs_out and bytes_sent, not yet in snd_nxt.
            assert_eq!(u32_of(nla::BYTES_NOTSENT), if ack { 0 } else { 1000 });
            assert_eq!(u32_of(nla::SNDQ_SIZE), if ack { 0 } else { 1000 });
            assert_eq!(attrs.get(&nla::TTL).map(|t| t[0]), ack.then_some(64));
        }
    }
    // A buffer smaller than the attributes: cut, MSG_TRUNC.
    assert_eq!(n.a.send(n.now, c, &[1; 10], 0), Ok(10));
    n.run();
    let mut small = [0u8; 8];
    let m = n.a.recvmsg(n.now, c, &mut small, MSG_ERRQUEUE).unwrap();
    assert_eq!((m.len, m.flags), (8, MSG_ERRQUEUE | MSG_TRUNC));
    // Without SOF_TIMESTAMPING_SOFTWARE no SCM_TIMESTAMPING, and so no
    // SCM_TIMESTAMPING_OPT_STATS (__sock_recv_timestamp's "if (!empty)"); the
    // payload is the attributes all the same.
    while n.a.recvmsg(n.now, c, &mut small, MSG_ERRQUEUE).is_ok() {}
    let f = (stats & !SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY).to_ne_bytes();
    n.a.setsockopt(n.now, c, SOL_SOCKET, SO_TIMESTAMPING, &f)
        .unwrap();
    assert_eq!(n.a.send(n.now, c, &[1; 10], 0), Ok(10));
    n.run();
    let mut buf = [0u8; 512];
    let m = n.a.recvmsg(n.now, c, &mut buf, MSG_ERRQUEUE).unwrap();
    let kinds: Vec<i32> = m.cmsgs.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [IP_RECVERR]);
    assert_eq!(
        (m.len, m.flags),
        (248, MSG_ERRQUEUE),
        "an SND report: no TTL"
    );
}

/// `SO_MEMINFO`'s ninth value, `SK_MEMINFO_DROPS` (`sk_drops_read`).
fn meminfo_drops(h: &mut Host, now: Instant, fd: Fd) -> u32 {
    let mut m = [0u8; 36];
    assert_eq!(
        h.getsockopt(now, fd, SOL_SOCKET, SO_MEMINFO, &mut m),
        Ok(36)
    );
    u32::from_ne_bytes(m[32..36].try_into().unwrap())
}

/// In CLOSE-WAIT the peer's ACK of our data is not queued (tcp_rcv_state_process's
/// `if (!queued)`): `sk_drops` counts it, and `tcp_disconnect` leaves the count.
#[test]
fn meminfo_drops_counts_an_ack_in_close_wait_and_outlives_disconnect() {
    let mut n = HostPair::new();
    let (c, s, _l) = n.connected();
    assert_eq!(meminfo_drops(&mut n.b, n.now, s), 0);
    n.a.shutdown(n.now, c, SHUT_WR).unwrap();
    n.run();
    assert_eq!(n.b.send(n.now, s, b"late", 0), Ok(4));
    n.run();
    n.wait(core::time::Duration::from_millis(300)); // A's ACK, delayed or not
    assert_eq!(meminfo_drops(&mut n.b, n.now, s), 1);
    assert_eq!(meminfo_drops(&mut n.a, n.now, c), 0);
    n.b.disconnect(n.now, s).unwrap();
    assert_eq!(meminfo_drops(&mut n.b, n.now, s), 1);
}

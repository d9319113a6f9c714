//! `close(2)` of a descriptor whose file a call in progress holds (`fdget` in
//! another thread): the descriptor goes, the file lives until the last reference
//! drops (checked against Linux 6.18 with tests/packetdrill's
//! `close-while-*-blocked*.pkt`).

use super::consts::*;
use super::tests::HostPair;
use super::*;

/// Whether the connection of `fd` (the peer's side) saw a FIN or a reset.
fn peer_read(n: &mut HostPair, c: Fd) -> Result<usize, i32> {
    let mut buf = [0u8; 16];
    n.a.recv(n.now, c, &mut buf, MSG_DONTWAIT).map_err(|e| e.0)
}

#[test]
fn close_of_a_held_file_leaves_the_socket_until_fdput() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    let pin = n.b.fdget(s).unwrap();
    assert!(pin < 0, "no descriptor the user was given");
    n.b.close(n.now, s).unwrap();
    n.run();
    // Nothing sent: the connection goes on, through the call's reference.
    assert_eq!(peer_read(&mut n, c), Err(errno::EAGAIN));
    assert_eq!(n.b.close(n.now, s), Err(Errno(errno::EBADF)));
    assert_eq!(n.b.send(n.now, s, b"x", 0), Err(Errno(errno::EBADF)));
    assert_eq!(n.b.send(n.now, pin, b"held", 0), Ok(4));
    // The descriptor is free: the next socket takes its number.
    let t = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(t, s);
    n.run();
    let mut buf = [0u8; 16];
    assert_eq!(n.a.recv(n.now, c, &mut buf, 0), Ok(4));
    // The last reference: tcp_close sends the FIN.
    assert_eq!(n.b.fdput(n.now, pin), Ok(None));
    n.run();
    assert_eq!(peer_read(&mut n, c), Ok(0));
    // The new socket at the same number is untouched.
    assert_eq!(n.b.poll_mask(t).unwrap() & POLLHUP, POLLHUP);
    assert_eq!(n.b.fdput(n.now, pin), Err(Errno(errno::EBADF)));
}

#[test]
fn fdput_of_a_file_still_open_releases_nothing() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    let p1 = n.b.fdget(s).unwrap();
    let p2 = n.b.fdget(s).unwrap();
    assert_ne!(p1, p2);
    assert_eq!(n.b.fdput(n.now, p1), Ok(None));
    n.b.close(n.now, s).unwrap();
    n.run();
    assert_eq!(peer_read(&mut n, c), Err(errno::EAGAIN));
    // Unread data at the release: tcp_close resets.
    n.a.send(n.now, c, b"unread", 0).unwrap();
    n.run();
    n.b.fdput(n.now, p2).unwrap();
    n.run();
    assert_eq!(peer_read(&mut n, c), Err(errno::ECONNRESET));
}

#[test]
fn linger_waits_at_the_release_not_at_the_close() {
    let mut n = HostPair::new();
    let (_, s, _) = n.connected();
    let l = [1, 0, 0, 0, 5, 0, 0, 0]; // l_onoff 1, l_linger 5 s
    n.b.setsockopt(n.now, s, SOL_SOCKET, SO_LINGER, &l).unwrap();
    let pin = n.b.fdget(s).unwrap();
    assert_eq!(n.b.close_linger(n.now, s), Ok(None));
    let w = n.b.fdput(n.now, pin).unwrap();
    assert_eq!(
        w.map(|w| w.1),
        Some(Some(core::time::Duration::from_secs(5)))
    );
}

/// An epoll item is keyed by its file and descriptor number: it outlives the
/// descriptor while the file lives, goes at the file's release, and a new file
/// at the same number is another item.
#[test]
fn epoll_items_follow_the_file() {
    let mut n = HostPair::new();
    let (_, s, _) = n.connected();
    let ep = n.b.epoll_create(1).unwrap();
    n.b.epoll_ctl(ep, EPOLL_CTL_ADD, s, POLLOUT, 7).unwrap();
    let pin = n.b.fdget(s).unwrap();
    n.b.close(n.now, s).unwrap();
    let ready = n.b.epoll_wait(ep, 4).unwrap();
    assert_eq!(
        ready,
        vec![EpollEvent {
            events: POLLOUT,
            data: 7
        }]
    );
    assert_eq!(
        n.b.epoll_ctl(ep, EPOLL_CTL_DEL, s, 0, 0),
        Err(Errno(errno::EBADF))
    );
    let t = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(t, s);
    n.b.epoll_ctl(ep, EPOLL_CTL_ADD, t, POLLOUT, 8).unwrap();
    let ready = n.b.epoll_wait(ep, 4).unwrap();
    assert_eq!(ready.iter().map(|e| e.data).collect::<Vec<_>>(), vec![7, 8]);
    n.b.fdput(n.now, pin).unwrap();
    let ready = n.b.epoll_wait(ep, 4).unwrap();
    assert_eq!(ready.iter().map(|e| e.data).collect::<Vec<_>>(), vec![8]);
}

/// A sleeping poll holds its files; a descriptor closed meanwhile is POLLNVAL
/// only at the next wakeup of a polled file (or the timeout), and the poll's
/// references keep the socket until they are dropped.
#[test]
fn poll_sees_a_closed_descriptor_at_its_next_wakeup() {
    let mut n = HostPair::new();
    let (c, s, _) = n.connected();
    let mut fds = [PollFd {
        fd: s,
        events: POLLIN,
        revents: 0,
    }];
    let mut w = PollWait::default();
    assert_eq!(n.b.poll_wait(&mut fds, &mut w), 0);
    n.b.close(n.now, s).unwrap();
    assert_eq!(n.b.poll_wait(&mut fds, &mut w), 0, "not woken");
    n.run();
    assert_eq!(peer_read(&mut n, c), Err(errno::EAGAIN), "socket alive");
    n.a.send(n.now, c, b"data", 0).unwrap();
    n.run();
    assert_eq!(n.b.poll_wait(&mut fds, &mut w), 1);
    assert_eq!(fds[0].revents, POLLNVAL);
    for pin in w.refs() {
        n.b.fdput(n.now, pin).unwrap();
    }
    n.run();
    assert_eq!(peer_read(&mut n, c), Err(errno::ECONNRESET));
    // The timeout's last scan looks at every descriptor.
    let (_, s2, _) = {
        let l = n.b.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        n.b.bind(l, SocketAddr::new(super::tests::B.into(), 81))
            .unwrap();
        n.b.listen(l, 1).unwrap();
        (0, l, 0)
    };
    let mut fds = [PollFd {
        fd: s2,
        events: POLLIN,
        revents: 0,
    }];
    let mut w = PollWait::default();
    assert_eq!(n.b.poll_wait(&mut fds, &mut w), 0);
    n.b.close(n.now, s2).unwrap();
    assert_eq!(n.b.poll_wait(&mut fds, &mut w), 0);
    w.timed_out = true;
    assert_eq!(n.b.poll_wait(&mut fds, &mut w), 1);
    for pin in w.refs() {
        n.b.fdput(n.now, pin).unwrap();
    }
}

//! The C boundary: `struct packetdrill_interface` and its members.

use crate::state::{Attempt, Flags, Shared, State};
use libc::{c_char, c_int, c_long, c_uint, c_ulong, c_void, size_t, socklen_t, ssize_t};
use lowtide::posix::consts::*;
use lowtide::posix::{errno, Errno, Fd, PollFd, RecvMsg, RecvStep, RecvWait, SendTo};
use std::ffi::CStr;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod pipe;
mod poll;
mod send;
use pipe::{pd_pipe, pd_splice};
use poll::{pd_epoll_create, pd_epoll_ctl, pd_epoll_wait, pd_poll};
use send::{pd_send, pd_sendmsg, pd_sendto, pd_write, pd_writev};

type Ud = *mut c_void;

/// `struct packetdrill_interface`, member for member.
#[repr(C)]
pub struct PacketdrillInterface {
    userdata: Ud,
    free: Option<unsafe extern "C" fn(Ud)>,
    socket: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int) -> c_int>,
    bind: Option<unsafe extern "C" fn(Ud, c_int, *const libc::sockaddr, socklen_t) -> c_int>,
    listen: Option<unsafe extern "C" fn(Ud, c_int, c_int) -> c_int>,
    accept: Option<unsafe extern "C" fn(Ud, c_int, *mut libc::sockaddr, *mut socklen_t) -> c_int>,
    connect: Option<unsafe extern "C" fn(Ud, c_int, *const libc::sockaddr, socklen_t) -> c_int>,
    read: Option<unsafe extern "C" fn(Ud, c_int, *mut c_void, size_t) -> ssize_t>,
    readv: Option<unsafe extern "C" fn(Ud, c_int, *const libc::iovec, c_int) -> ssize_t>,
    recv: Option<unsafe extern "C" fn(Ud, c_int, *mut c_void, size_t, c_int) -> ssize_t>,
    recvfrom: Option<
        unsafe extern "C" fn(
            Ud,
            c_int,
            *mut c_void,
            size_t,
            c_int,
            *mut libc::sockaddr,
            *mut socklen_t,
        ) -> ssize_t,
    >,
    recvmsg: Option<unsafe extern "C" fn(Ud, c_int, *mut libc::msghdr, c_int) -> ssize_t>,
    write: Option<unsafe extern "C" fn(Ud, c_int, *const c_void, size_t) -> ssize_t>,
    writev: Option<unsafe extern "C" fn(Ud, c_int, *const libc::iovec, c_int) -> ssize_t>,
    send: Option<unsafe extern "C" fn(Ud, c_int, *const c_void, size_t, c_int) -> ssize_t>,
    sendto: Option<
        unsafe extern "C" fn(
            Ud,
            c_int,
            *const c_void,
            size_t,
            c_int,
            *const libc::sockaddr,
            socklen_t,
        ) -> ssize_t,
    >,
    sendmsg: Option<unsafe extern "C" fn(Ud, c_int, *const libc::msghdr, c_int) -> ssize_t>,
    fcntl: Option<unsafe extern "C" fn(Ud, c_int, c_int, c_long) -> c_int>,
    ioctl: Option<unsafe extern "C" fn(Ud, c_int, c_ulong, *mut c_void) -> c_int>,
    close: Option<unsafe extern "C" fn(Ud, c_int) -> c_int>,
    shutdown: Option<unsafe extern "C" fn(Ud, c_int, c_int) -> c_int>,
    getsockopt:
        Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *mut c_void, *mut socklen_t) -> c_int>,
    setsockopt:
        Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *const c_void, socklen_t) -> c_int>,
    poll: Option<unsafe extern "C" fn(Ud, *mut libc::pollfd, libc::nfds_t, c_int) -> c_int>,
    netdev_send: Option<unsafe extern "C" fn(Ud, *const c_void, size_t) -> c_int>,
    netdev_receive:
        Option<unsafe extern "C" fn(Ud, *mut c_void, *mut size_t, *mut libc::c_longlong) -> c_int>,
    usleep: Option<unsafe extern "C" fn(Ud, c_uint) -> c_int>,
    gettimeofday: Option<unsafe extern "C" fn(Ud, *mut libc::timeval, *mut c_void) -> c_int>,
    epoll_create: Option<unsafe extern "C" fn(Ud, c_int) -> c_int>,
    epoll_ctl:
        Option<unsafe extern "C" fn(Ud, c_int, c_int, c_int, *mut libc::epoll_event) -> c_int>,
    epoll_wait:
        Option<unsafe extern "C" fn(Ud, c_int, *mut libc::epoll_event, c_int, c_int) -> c_int>,
    pipe: Option<unsafe extern "C" fn(Ud, *mut c_int) -> c_int>,
    splice: Option<
        unsafe extern "C" fn(Ud, c_int, *mut i64, c_int, *mut i64, size_t, c_uint) -> ssize_t,
    >,
}

fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Runs `f` with the instance, catching panics; `Err(e)` becomes -1 with errno `e`.
fn guard<T: Copy + From<i8>>(ud: Ud, f: impl FnOnce(&Shared) -> Result<T, i32>) -> T {
    if ud.is_null() {
        set_errno(errno::EINVAL);
        return T::from(-1);
    }
    // SAFETY: userdata is the Box<Shared> leaked by init, alive until `free`.
    let shared = unsafe { &*(ud as *const Shared) };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let r = f(shared);
        // Whatever the call changed shows in /proc/net/tcp before the script's next
        // line (a backtick command may read it).
        shared.lock().publish_proc_net();
        r
    }));
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            set_errno(e);
            T::from(-1)
        }
        Err(_) => {
            set_errno(errno::EFAULT);
            T::from(-1)
        }
    }
}

fn e(x: Errno) -> i32 {
    x.0
}

/// A caller's `struct sockaddr` as `move_addr_to_kernel` copies it, after the
/// descriptor's own errors: `EINVAL` for a negative length or one longer than
/// `struct sockaddr_storage`, `EFAULT` for bytes at NULL.
unsafe fn user_sockaddr(
    host: &lowtide::posix::Host,
    fd: c_int,
    addr: *const libc::sockaddr,
    len: socklen_t,
) -> Result<lowtide::posix::UserSockAddr, i32> {
    host.sockfd_lookup(fd).map_err(e)?;
    let n = len as c_int;
    if n < 0 {
        return Err(errno::EINVAL);
    }
    if n > 0 && addr.is_null() {
        return Err(errno::EFAULT);
    }
    let n = (n as usize).min(lowtide::posix::SOCKADDR_STORAGE_LEN + 1);
    let bytes = match n {
        0 => &[][..],
        _ => std::slice::from_raw_parts(addr as *const u8, n),
    };
    lowtide::posix::UserSockAddr::from_bytes(bytes).map_err(e)
}

unsafe fn sockaddr_from(sa: SocketAddr, addr: *mut libc::sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let mut buf = [0u8; 28];
    let n = match sa {
        SocketAddr::V4(v4) => {
            let mut a: libc::sockaddr_in = std::mem::zeroed();
            a.sin_family = libc::AF_INET as libc::sa_family_t;
            a.sin_port = v4.port().to_be();
            a.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            let n = std::mem::size_of::<libc::sockaddr_in>();
            std::ptr::copy_nonoverlapping(&a as *const _ as *const u8, buf.as_mut_ptr(), n);
            n
        }
        SocketAddr::V6(v6) => {
            let mut a: libc::sockaddr_in6 = std::mem::zeroed();
            a.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            a.sin6_port = v6.port().to_be();
            a.sin6_addr.s6_addr = v6.ip().octets();
            let n = std::mem::size_of::<libc::sockaddr_in6>();
            std::ptr::copy_nonoverlapping(&a as *const _ as *const u8, buf.as_mut_ptr(), n);
            n
        }
    };
    let room = (*len as usize).min(n);
    std::ptr::copy_nonoverlapping(buf.as_ptr(), addr as *mut u8, room);
    *len = n as socklen_t;
}

/// `UIO_MAXIOV`: the most `iovec`s one call takes.
const UIO_MAXIOV: i64 = 1024;

/// The caller's `iovec`s, as `iovec_from_user` takes them: `EINVAL` for a negative
/// count or one above `UIO_MAXIOV` (never read past them).
unsafe fn iov_total(iov: *const libc::iovec, n: i64) -> Result<&'static [libc::iovec], i32> {
    if !(0..=UIO_MAXIOV).contains(&n) || (n > 0 && iov.is_null()) {
        return Err(errno::EINVAL);
    }
    Ok(if n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(iov, n as usize)
    })
}

/// `do_readv`/`do_writev`: the file's checks (`fdget`, `FMODE_READ`/`WRITE`), then
/// `import_iovec`'s; `None` when they add up to no bytes (`vfs_readv`/`vfs_writev`
/// return 0 without calling the file).
unsafe fn vfs_iov(
    sh: &Shared,
    fd: c_int,
    iov: *const libc::iovec,
    n: c_int,
    reading: bool,
) -> Result<Option<&'static [libc::iovec]>, i32> {
    sh.lock().host.io_of_nothing(fd, reading).map_err(e)?;
    let iov = iov_total(iov, n as i64)?;
    Ok(iov.iter().any(|i| i.iov_len > 0).then_some(iov))
}

/// A `msghdr`'s `iovec`s as `__copy_msghdr` takes them, after the descriptor's own
/// errors: `EMSGSIZE` for more than `UIO_MAXIOV`.
unsafe fn msg_iov(sh: &Shared, fd: c_int, m: &libc::msghdr) -> Result<&'static [libc::iovec], i32> {
    sh.lock().host.sockfd_lookup(fd).map_err(e)?;
    if m.msg_iovlen > UIO_MAXIOV as usize {
        return Err(errno::EMSGSIZE);
    }
    iov_total(m.msg_iov, m.msg_iovlen as i64)
}

unsafe fn scatter(iov: &[libc::iovec], data: &[u8]) {
    let mut off = 0;
    for i in iov {
        if off >= data.len() {
            break;
        }
        let n = i.iov_len.min(data.len() - off);
        if n > 0 && !i.iov_base.is_null() {
            std::ptr::copy_nonoverlapping(data[off..].as_ptr(), i.iov_base as *mut u8, n);
        }
        off += n;
    }
}

// ---- the calls, on the instance ---------------------------------------------------

/// What a receive call got: the bytes, the peer, and `recvmsg`'s flags and cmsgs.
pub(crate) struct Received {
    pub data: Vec<u8>,
    pub peer: Option<SocketAddr>,
    pub msg: RecvMsg,
}

/// What a blocking send's `on_timeout` answers before it is told apart (no errno
/// is negative).
const TIMED_OUT: i32 = -1;

/// A blocking call's limit (`SO_RCVTIMEO` / `SO_SNDTIMEO`) in virtual microseconds.
fn timeout_us(d: Option<std::time::Duration>) -> Option<u64> {
    d.map(|d| d.as_micros().min(u64::MAX as u128) as u64)
}

/// `fdget` ... `fdput` around a call that may sleep on `fd`: `call` gets a
/// descriptor of the call's own ([`lowtide::posix::Host::fdget`]) that names the
/// file even once another thread closed `fd`, so the call goes on as if nothing
/// happened; the call's reference dropped at its end releases the file if it was
/// the last (as `close`, `SO_LINGER`'s wait included: Linux's `__fput` runs before
/// the call returns to user space). A descriptor that is none goes to `call` as it
/// is, which reports it in its own order.
pub(crate) fn pinned<T>(
    sh: &Shared,
    fd: Fd,
    call: impl FnOnce(Fd) -> Result<T, i32>,
) -> Result<T, i32> {
    let pin = sh.lock().host.fdget(fd).ok();
    let r = call(pin.unwrap_or(fd));
    if let Some(p) = pin {
        fdput(sh, p);
    }
    r
}

/// Drops a reference [`pinned`] or `poll` took, releasing the file if it was the
/// last one, and waits as `close` would.
pub(crate) fn fdput(sh: &Shared, pin: Fd) {
    let linger = {
        let mut st = sh.enter();
        let now = st.now();
        let r = st.host.fdput(now, pin);
        st.drain_transmit();
        sh.wake_all(&mut st);
        r.ok().flatten()
    };
    let _ = linger_wait(sh, linger);
}

/// SO_LINGER with a time on a released socket: sleep until the FIN is
/// acknowledged or the time is up (`sk_stream_wait_close`).
fn linger_wait(sh: &Shared, linger: lowtide::posix::LingerWait) -> Result<(), i32> {
    let Some((h, d)) = linger else {
        return Ok(());
    };
    let us = d.map(|d| d.as_micros() as u64);
    let r = sh.blocking(
        false,
        us,
        |st: &mut State| match st.host.is_closing(h) {
            true => Attempt::Wait,
            false => Attempt::Done(Ok(())),
        },
        |_| Ok(()),
    );
    // The wait is over: adjudge_to_death orphans the socket now.
    let mut st = sh.enter();
    let now = st.now();
    st.host.close_linger_done(now, h);
    st.drain_transmit();
    sh.wake_all(&mut st);
    r
}

fn do_recv(sh: &Shared, fd: Fd, len: usize, flags: i32) -> Result<Received, i32> {
    pinned(sh, fd, |fd| do_recv_on(sh, fd, len, flags))
}

fn do_recv_on(sh: &Shared, fd: Fd, len: usize, flags: i32) -> Result<Received, i32> {
    // tcp_recvmsg: MSG_ERRQUEUE reads the error queue at once (inet_recv_error),
    // and MSG_OOB never blocks (tcp_recv_urg).
    let (nonblock, timeout) = {
        let st = sh.lock();
        let nonblock = flags & (MSG_ERRQUEUE | MSG_OOB) != 0 || st.host.is_nonblocking(fd, flags);
        (nonblock, timeout_us(st.host.rcvtimeo(fd)))
    };
    let buf = std::cell::RefCell::new(vec![0u8; len]);
    // tcp_recvmsg_locked's loop: it copies what is there and sleeps until its
    // target is in (SO_RCVLOWAT, MSG_WAITALL), woken as Linux wakes it.
    let wait = std::cell::RefCell::new(RecvWait::default());
    let step = |st: &mut State, may_sleep: bool| {
        let now = st.now();
        let (mut b, mut w) = (buf.borrow_mut(), wait.borrow_mut());
        st.host
            .recvmsg_wait(now, fd, &mut b, flags, &mut w, may_sleep)
    };
    let msg = sh.blocking(
        nonblock,
        timeout,
        |st: &mut State| match step(st, !nonblock) {
            RecvStep::Done(r) => Attempt::Done(r.map_err(e)),
            RecvStep::Wait => Attempt::Wait,
        },
        // sock_rcvtimeo's time is up: what was copied short of the target, else
        // EAGAIN ("if (!timeo) { copied = -EAGAIN; break; }").
        |st: &mut State| match step(st, false) {
            RecvStep::Done(r) => r.map_err(e),
            RecvStep::Wait => Err(errno::EAGAIN),
        },
    )?;
    let mut buf = buf.into_inner();
    buf.truncate(msg.len);
    let peer = sh.lock().host.peer_addr(fd).ok().flatten();
    Ok(Received {
        data: buf,
        peer,
        msg,
    })
}

unsafe extern "C" fn pd_free(ud: Ud) {
    if ud.is_null() {
        return;
    }
    let _ = catch_unwind(|| {
        // SAFETY: userdata is the Box<Shared> leaked by init.
        let shared = &*(ud as *const Shared);
        if shared.has_blocked_threads() {
            // A thread still sleeps in a call on this instance: freeing it would
            // pull the mutex from under that thread. Leak it instead (once per run).
            return;
        }
        drop(Box::from_raw(ud as *mut Shared));
    });
}

unsafe extern "C" fn pd_socket(ud: Ud, d: c_int, t: c_int, p: c_int) -> c_int {
    guard(ud, |sh| sh.enter().host.socket(d, t, p).map_err(e))
}

unsafe extern "C" fn pd_bind(ud: Ud, fd: c_int, a: *const libc::sockaddr, l: socklen_t) -> c_int {
    guard(ud, |sh| {
        let mut st = sh.enter();
        let sa = user_sockaddr(&st.host, fd, a, l)?;
        st.host.bind_user(fd, &sa).map(|_| 0).map_err(e)
    })
}

unsafe extern "C" fn pd_listen(ud: Ud, fd: c_int, backlog: c_int) -> c_int {
    guard(ud, |sh| {
        sh.enter().host.listen(fd, backlog).map(|_| 0).map_err(e)
    })
}

unsafe extern "C" fn pd_accept(
    ud: Ud,
    fd: c_int,
    a: *mut libc::sockaddr,
    l: *mut socklen_t,
) -> c_int {
    guard(ud, |sh| pinned(sh, fd, |fd| accept_on(sh, fd, a, l)))
}

unsafe fn accept_on(
    sh: &Shared,
    fd: Fd,
    a: *mut libc::sockaddr,
    l: *mut socklen_t,
) -> Result<c_int, i32> {
    let (nonblock, timeout) = {
        let st = sh.lock();
        (
            st.host.is_nonblocking(fd, 0),
            timeout_us(st.host.rcvtimeo(fd)),
        )
    };
    // inet_csk_accept: inet_csk_wait_for_connect sleeps at most sk_rcvtimeo,
    // then EAGAIN.
    let (nfd, peer) = sh.blocking(
        nonblock,
        timeout,
        |st: &mut State| match st.host.accept(fd) {
            Err(Errno(errno::EAGAIN)) => Attempt::Wait,
            r => Attempt::Done(r.map_err(e)),
        },
        |_| Err(errno::EAGAIN),
    )?;
    sockaddr_from(peer, a, l);
    Ok(nfd)
}

unsafe extern "C" fn pd_connect(
    ud: Ud,
    fd: c_int,
    a: *const libc::sockaddr,
    l: socklen_t,
) -> c_int {
    guard(ud, |sh| pinned(sh, fd, |fd| connect_on(sh, fd, a, l)))
}

unsafe fn connect_on(
    sh: &Shared,
    fd: Fd,
    a: *const libc::sockaddr,
    l: socklen_t,
) -> Result<c_int, i32> {
    let (first, nonblock, timeout, sa) = {
        let mut st = sh.enter();
        let sa = user_sockaddr(&st.host, fd, a, l)?;
        let now = st.now();
        let r = st.host.connect_user(now, fd, &sa);
        st.drain_transmit();
        sh.wake_all(&mut st);
        (r, st.host.is_nonblocking(fd, 0), st.host.sndtimeo(fd), sa)
    };
    // __inet_stream_connect: a blocking connect, a new one (EINPROGRESS) or one
    // on a socket already connecting (EALREADY), sleeps in inet_wait_for_connect
    // until the handshake ends, at most sk_sndtimeo; then that error stands.
    let pending = match first {
        Err(Errno(x @ (errno::EINPROGRESS | errno::EALREADY))) if !nonblock => x,
        r => return r.map(|_| 0).map_err(e),
    };
    sh.blocking(
        false,
        timeout_us(timeout),
        |st: &mut State| {
            let now = st.now();
            match st.host.connect_user(now, fd, &sa) {
                Err(Errno(errno::EALREADY)) => Attempt::Wait,
                r => Attempt::Done(r.map(|_| 0).map_err(e)),
            }
        },
        |_| Err(pending),
    )
}

unsafe extern "C" fn pd_read(ud: Ud, fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if n == 0 {
        return guard(ud, |sh| {
            sh.lock()
                .host
                .io_of_nothing(fd, true)
                .map(|n| n as ssize_t)
                .map_err(e)
        });
    }
    pd_recv(ud, fd, buf, n, 0)
}

unsafe extern "C" fn pd_readv(ud: Ud, fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t {
    guard(ud, |sh| {
        let Some(iov) = vfs_iov(sh, fd, iov, n, true)? else {
            return Ok(0);
        };
        let len = iov.iter().map(|i| i.iov_len).sum();
        let data = do_recv(sh, fd, len, 0)?.data;
        scatter(iov, &data);
        Ok(data.len() as ssize_t)
    })
}

unsafe extern "C" fn pd_recv(
    ud: Ud,
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    pd_recvfrom(
        ud,
        fd,
        buf,
        n,
        flags,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
}

unsafe extern "C" fn pd_recvfrom(
    ud: Ud,
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    a: *mut libc::sockaddr,
    l: *mut socklen_t,
) -> ssize_t {
    guard(ud, |sh| {
        if buf.is_null() && n > 0 && flags & libc::MSG_TRUNC == 0 {
            return recv_to_null(sh, fd, n, flags);
        }
        let Received { data, peer, .. } = do_recv(sh, fd, n, flags)?;
        if !data.is_empty() && !buf.is_null() {
            std::ptr::copy_nonoverlapping(data.as_ptr(), buf as *mut u8, data.len());
        }
        if let Some(p) = peer {
            sockaddr_from(p, a, l);
        }
        Ok(data.len() as ssize_t)
    })
}

/// A read into a NULL buffer: `import_ubuf` takes the pointer (`access_ok` passes
/// for NULL), so `tcp_recvmsg_locked` fails as it would with any buffer (ENOTCONN,
/// EAGAIN, blocking until data) and faults only when it has bytes to copy
/// (`skb_copy_datagram_msg`: "if (!copied) copied = -EFAULT"), which then stay
/// queued; end of stream is 0. `MSG_TRUNC` copies nothing, so it never faults.
/// The fault ends the call at its first copy, whatever its target: a peek of one
/// byte stands for it (sleeping as the read would, until woken with bytes there).
fn recv_to_null(sh: &Shared, fd: Fd, n: usize, flags: i32) -> Result<ssize_t, i32> {
    let r = do_recv(sh, fd, n.min(1), flags | libc::MSG_PEEK)?;
    match r.data.is_empty() {
        true => Ok(0),
        false => Err(errno::EFAULT),
    }
}

unsafe extern "C" fn pd_recvmsg(
    ud: Ud,
    fd: c_int,
    msg: *mut libc::msghdr,
    flags: c_int,
) -> ssize_t {
    guard(ud, |sh| {
        if msg.is_null() {
            return Err(errno::EFAULT);
        }
        let m = &mut *msg;
        let iov = msg_iov(sh, fd, m)?;
        let len = iov.iter().map(|i| i.iov_len).sum();
        let r = do_recv(sh, fd, len, flags)?;
        scatter(iov, &r.data);
        if let Some(p) = r.peer {
            let mut l = m.msg_namelen;
            sockaddr_from(p, m.msg_name as *mut libc::sockaddr, &mut l);
            m.msg_namelen = l;
        }
        m.msg_flags = r.msg.flags;
        crate::cmsg::put_all(m, &r.msg.cmsgs);
        Ok(r.msg.len as ssize_t)
    })
}

unsafe extern "C" fn pd_fcntl(ud: Ud, fd: c_int, cmd: c_int, arg: c_long) -> c_int {
    guard(ud, |sh| {
        let mut st = sh.enter();
        match cmd {
            F_GETFL => st.host.fcntl_getfl(fd).map_err(e),
            F_SETFL => st.host.fcntl_setfl(fd, arg as i32).map(|_| 0).map_err(e),
            _ => Err(errno::EINVAL),
        }
    })
}

#[allow(clippy::unnecessary_cast)] // c_ulong is u32 on 32-bit targets
unsafe extern "C" fn pd_ioctl(ud: Ud, fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    guard(ud, |sh| {
        let v = sh.enter().host.ioctl(fd, req as u64).map_err(e)?;
        if arg.is_null() {
            return Err(errno::EFAULT);
        }
        *(arg as *mut c_int) = v;
        Ok(0)
    })
}

unsafe extern "C" fn pd_close(ud: Ud, fd: c_int) -> c_int {
    guard(ud, |sh| {
        let linger = {
            let mut st = sh.enter();
            let now = st.now();
            let r = st.host.close_linger(now, fd).map_err(e);
            st.drain_transmit();
            sh.wake_all(&mut st);
            r?
        };
        // SO_LINGER with a time: sleep until the FIN is acknowledged or time is up
        // (not when a call in another thread still holds the file: its fdput
        // releases it).
        linger_wait(sh, linger)?;
        Ok(0)
    })
}

unsafe extern "C" fn pd_shutdown(ud: Ud, fd: c_int, how: c_int) -> c_int {
    guard(ud, |sh| {
        let mut st = sh.enter();
        let now = st.now();
        let r = st.host.shutdown(now, fd, how).map(|_| 0).map_err(e);
        st.drain_transmit();
        sh.wake_all(&mut st);
        r
    })
}

unsafe extern "C" fn pd_getsockopt(
    ud: Ud,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    guard(ud, |sh| {
        if len.is_null() {
            return Err(errno::EFAULT);
        }
        let mut st = sh.enter();
        let room = st.host.sockopt_len(fd, *len as c_int).map_err(e)?;
        if room > 0 && val.is_null() {
            return Err(errno::EFAULT);
        }
        // Linux copies at most the option's own size: no option is larger than this.
        let mut buf = vec![0u8; room.min(1 << 16)];
        let now = st.now();
        let r = st.host.getsockopt(now, fd, level, name, &mut buf);
        // do_tcp_getsockopt: a buffer too short for the saved SYN is EINVAL with the
        // length it needs in optlen.
        let saved_syn = (level, name) == (SOL_TCP, TCP_SAVED_SYN);
        if let (Err(er), true) = (r, saved_syn) {
            if let Ok(Some(need)) = st.host.saved_syn_len(fd) {
                *len = need as socklen_t;
            }
            return Err(e(er));
        }
        let n = r.map_err(e)?;
        if n > 0 {
            std::ptr::copy_nonoverlapping(buf.as_ptr(), val as *mut u8, n);
        }
        *len = n as socklen_t;
        Ok(0)
    })
}

unsafe extern "C" fn pd_setsockopt(
    ud: Ud,
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    guard(ud, |sh| {
        let mut st = sh.enter();
        let len = st.host.sockopt_len(fd, len as c_int).map_err(e)?;
        if val.is_null() && len > 0 {
            return Err(errno::EFAULT);
        }
        let v = if len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(val as *const u8, len)
        };
        let now = st.now();
        let r = st
            .host
            .setsockopt(now, fd, level, name, v)
            .map(|_| 0)
            .map_err(e);
        st.drain_transmit();
        sh.wake_all(&mut st);
        r
    })
}

unsafe extern "C" fn pd_netdev_send(ud: Ud, buf: *const c_void, n: size_t) -> c_int {
    guard(ud, |sh| {
        if buf.is_null() {
            return Err(errno::EFAULT);
        }
        let pkt = std::slice::from_raw_parts(buf as *const u8, n);
        let mut st = sh.enter();
        let now = st.now();
        st.host.handle_packet(now, pkt, lowtide::RxChecksum::Verify);
        st.drain_transmit();
        sh.wake_all(&mut st);
        Ok(0)
    })
}

/// The shared object's note when packetdrill waits for a packet that never comes.
pub const NOTHING_TO_SEND: &str =
    "lowtide-packetdrill: Timed out waiting for packet (nothing queued and no timer pending)";

unsafe extern "C" fn pd_netdev_receive(
    ud: Ud,
    buf: *mut c_void,
    n: *mut size_t,
    t: *mut libc::c_longlong,
) -> c_int {
    guard(ud, |sh| {
        if buf.is_null() || n.is_null() || t.is_null() {
            return Err(errno::EFAULT);
        }
        match sh.next_packet() {
            Some((p, at)) => {
                let len = p.len().min(*n);
                std::ptr::copy_nonoverlapping(p.as_ptr(), buf as *mut u8, len);
                *n = len;
                *t = (crate::state::EPOCH_US + at) as libc::c_longlong;
            }
            None => {
                // packetdrill's --so_filename mode has no timeout: it parses the empty
                // packet and fails with "IP header overflows packet: packet of 0
                // bytes". Nothing will ever come (no packet, no timer), which is where
                // the kernel's packetdrill says this; the runner reports it so.
                eprintln!("{NOTHING_TO_SEND}");
                *n = 0
            }
        }
        Ok(0)
    })
}

unsafe extern "C" fn pd_usleep(ud: Ud, us: c_uint) -> c_int {
    guard(ud, |sh| {
        sh.usleep(us as u64);
        Ok(0)
    })
}

unsafe extern "C" fn pd_gettimeofday(ud: Ud, tv: *mut libc::timeval, _tz: *mut c_void) -> c_int {
    guard(ud, |sh| {
        let us = sh.gettimeofday();
        if !tv.is_null() {
            (*tv).tv_sec = (us / 1_000_000) as libc::time_t;
            (*tv).tv_usec = (us % 1_000_000) as libc::suseconds_t;
        }
        Ok(0)
    })
}

/// Fills `ifc` with lowtide's implementation; `flags` is `--so_flags` (may be NULL).
#[no_mangle]
pub unsafe extern "C" fn packetdrill_interface_init(
    flags: *const c_char,
    ifc: *mut PacketdrillInterface,
) {
    if ifc.is_null() {
        return;
    }
    let r = catch_unwind(|| {
        let text = if flags.is_null() {
            None
        } else {
            CStr::from_ptr(flags).to_str().ok().map(str::to_string)
        };
        let (f, bad) = Flags::parse(text.as_deref());
        for b in bad {
            eprintln!("lowtide-packetdrill: unknown so_flags entry {b}");
        }
        let shared = Box::new(Shared::new(f));
        shared.lock().catch_up();
        Box::into_raw(shared) as Ud
    });
    let ud = r.unwrap_or(std::ptr::null_mut());
    *ifc = PacketdrillInterface {
        userdata: ud,
        free: Some(pd_free),
        socket: Some(pd_socket),
        bind: Some(pd_bind),
        listen: Some(pd_listen),
        accept: Some(pd_accept),
        connect: Some(pd_connect),
        read: Some(pd_read),
        readv: Some(pd_readv),
        recv: Some(pd_recv),
        recvfrom: Some(pd_recvfrom),
        recvmsg: Some(pd_recvmsg),
        write: Some(pd_write),
        writev: Some(pd_writev),
        send: Some(pd_send),
        sendto: Some(pd_sendto),
        sendmsg: Some(pd_sendmsg),
        fcntl: Some(pd_fcntl),
        ioctl: Some(pd_ioctl),
        close: Some(pd_close),
        shutdown: Some(pd_shutdown),
        getsockopt: Some(pd_getsockopt),
        setsockopt: Some(pd_setsockopt),
        poll: Some(pd_poll),
        netdev_send: Some(pd_netdev_send),
        netdev_receive: Some(pd_netdev_receive),
        usleep: Some(pd_usleep),
        gettimeofday: Some(pd_gettimeofday),
        epoll_create: Some(pd_epoll_create),
        epoll_ctl: Some(pd_epoll_ctl),
        epoll_wait: Some(pd_epoll_wait),
        pipe: Some(pd_pipe),
        splice: Some(pd_splice),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iovec_counts_as_iovec_from_user_takes_them() {
        let mut b = [0u8; 4];
        let one = [libc::iovec {
            iov_base: b.as_mut_ptr() as *mut c_void,
            iov_len: b.len(),
        }];
        unsafe {
            assert_eq!(iov_total(one.as_ptr(), 1).map(|v| v.len()), Ok(1));
            assert_eq!(iov_total(one.as_ptr(), 0).map(|v| v.len()), Ok(0));
            // Never read past the caller's array: above UIO_MAXIOV is EINVAL.
            assert_eq!(iov_total(one.as_ptr(), -1).err(), Some(errno::EINVAL));
            assert_eq!(iov_total(one.as_ptr(), 1025).err(), Some(errno::EINVAL));
            assert_eq!(iov_total(std::ptr::null(), 1).err(), Some(errno::EINVAL));
        }
    }
}

//! The send members of `struct packetdrill_interface` (`write`, `writev`, `send`,
//! `sendto`, `sendmsg`) and the blocking send loop under them (`tcp_sendmsg_locked`'s
//! waits, `sk_stream_wait_memory` / `sk_stream_wait_connect`).

use super::*;
use lowtide::SendPart;

/// `iov` from byte `skip` on.
fn skip_bytes<'a>(iov: &[&'a [u8]], mut skip: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(iov.len());
    for b in iov {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        out.push(&b[skip..]);
        skip = 0;
    }
    out
}

fn do_send(sh: &Shared, fd: Fd, data: &[&[u8]], flags: i32) -> Result<usize, i32> {
    do_sendto(sh, fd, data, flags, SendTo::None)
}

/// `__sys_sendto`'s destination, after the descriptor's own errors: none for a
/// NULL `addr`, else what `move_addr_to_kernel` copies (a length of 0 copies nothing
/// and still names one, which `__inet_stream_connect` finds too short).
unsafe fn sendto_name(
    sh: &Shared,
    fd: c_int,
    a: *const libc::sockaddr,
    l: socklen_t,
) -> Result<SendTo, i32> {
    let st = sh.lock();
    if a.is_null() {
        return st.host.sockfd_lookup(fd).map(|_| SendTo::None).map_err(e);
    }
    user_sockaddr(&st.host, fd, a, l).map(SendTo::Name)
}

/// `__copy_msghdr`'s `msg_name`: none when NULL or of length 0, `EINVAL` for a
/// negative length, one longer than `struct sockaddr_storage` cut to it.
unsafe fn msg_name(m: &libc::msghdr) -> Result<SendTo, i32> {
    let n = if m.msg_name.is_null() {
        0
    } else {
        m.msg_namelen as c_int
    };
    if n < 0 {
        return Err(errno::EINVAL);
    }
    if n == 0 {
        return Ok(SendTo::None);
    }
    let n = (n as usize).min(lowtide::posix::SOCKADDR_STORAGE_LEN);
    let bytes = std::slice::from_raw_parts(m.msg_name as *const u8, n);
    lowtide::posix::UserSockAddr::from_bytes(bytes)
        .map(SendTo::Name)
        .map_err(e)
}

/// What a send takes from the caller: its buffers, or a length whose copy faults
/// (a NULL buffer).
#[derive(Clone, Copy)]
enum Out<'a> {
    Bytes(&'a [&'a [u8]]),
    Fault(usize),
}

fn do_sendto(sh: &Shared, fd: Fd, data: &[&[u8]], flags: i32, dest: SendTo) -> Result<usize, i32> {
    send_loop(sh, fd, Out::Bytes(data), flags, dest)
}

/// A blocking send: `MSG_FASTOPEN` (and the destination) count for the first try
/// only, which connects; later tries wait for the connection and write the rest,
/// as `tcp_sendmsg_locked` goes on after `__inet_stream_connect`.
fn send_loop(sh: &Shared, fd: Fd, out: Out<'_>, flags: i32, dest: SendTo) -> Result<usize, i32> {
    pinned(sh, fd, |fd| send_loop_on(sh, fd, out, flags, dest))
}

fn send_loop_on(sh: &Shared, fd: Fd, out: Out<'_>, flags: i32, dest: SendTo) -> Result<usize, i32> {
    let total: usize = match out {
        Out::Bytes(data) => data.iter().map(|b| b.len()).sum(),
        Out::Fault(n) => n,
    };
    let mut flags = flags;
    let mut dest = dest;
    // __inet_stream_connect: a blocking Fast Open send waits for the connection
    // even when the SYN took everything.
    let connecting = sh.lock().host.is_fastopen_send(fd, flags);
    let mut wait_connect = false;
    // Only the first try can be the one that connects (and puts data in the SYN).
    let mut syn_try = connecting;
    let (nonblock, timeout) = {
        let st = sh.lock();
        (
            st.host.is_nonblocking(fd, flags),
            timeout_us(st.host.sndtimeo(fd)),
        )
    };
    let mut done = 0usize;
    let mut first = true;
    // One tcp_sendmsg_locked however often it waits for space (SendPart).
    let mut part = if nonblock {
        SendPart::Whole
    } else {
        SendPart::First
    };
    // This writer counts in sk_write_pending while it waits for the handshake.
    let pending = std::cell::Cell::new(false);
    // A blocking write waits for space until all is queued (sk_stream_wait_memory),
    // woken only by sk_stream_write_space (writable as tcp_poll reports it) or an
    // error or shutdown, at most SO_SNDTIMEO: then what it queued, else EAGAIN.
    let r = sh.blocking(
        nonblock,
        timeout,
        |st: &mut State| {
            let wake = POLLOUT | POLLERR | POLLHUP;
            if !std::mem::take(&mut first) && st.host.poll_mask(fd).is_ok_and(|m| m & wake == 0) {
                return Attempt::Wait;
            }
            if pending.take() {
                let _ = st.host.set_write_pending(fd, false);
            }
            let now = st.now();
            if std::mem::take(&mut wait_connect) {
                // __inet_stream_connect failed (RST, timeout): tcp_disconnect freed the
                // Fast Open request, so the write reports the error (sock_error takes
                // it), not the bytes the SYN carried.
                let mut err = [0u8; 4];
                let _ = st.host.getsockopt(now, fd, SOL_SOCKET, SO_ERROR, &mut err);
                match i32::from_ne_bytes(err) {
                    0 if done == total => return Attempt::Done(Ok(done)),
                    0 => {}
                    e => {
                        done = 0;
                        return Attempt::Done(Err(e));
                    }
                }
            }
            // sk_stream_wait_memory woke on an error or SEND_SHUTDOWN: the bytes
            // queued so far, the error left for the next call.
            if done > 0 && st.host.send_wait_stops(fd) {
                return Attempt::Done(Ok(done));
            }
            let r = match out {
                Out::Bytes(data) => {
                    let data = skip_bytes(data, done);
                    (st.host).sendmsg_part(now, fd, &data, flags, dest, part)
                }
                Out::Fault(n) => st.host.sendmsg_fault(now, fd, n, flags, dest),
            };
            if part == SendPart::First {
                part = SendPart::Cont;
            }
            let syn = std::mem::take(&mut syn_try);
            flags &= !MSG_FASTOPEN;
            dest = SendTo::None;
            let attempt = match r {
                Ok(n) if syn && !nonblock => {
                    done += n;
                    wait_connect = true;
                    Attempt::Wait
                }
                Ok(n) => {
                    done += n;
                    if done == total || nonblock {
                        Attempt::Done(Ok(done))
                    } else {
                        Attempt::Wait
                    }
                }
                Err(Errno(errno::EAGAIN)) if total == 0 => Attempt::Done(Ok(0)),
                Err(Errno(errno::EAGAIN)) if done > 0 && nonblock => Attempt::Done(Ok(done)),
                Err(Errno(errno::EAGAIN)) => Attempt::Wait,
                Err(_) if done > 0 => Attempt::Done(Ok(done)),
                Err(x) => Attempt::Done(Err(x.0)),
            };
            // Data left while the handshake runs: sk_stream_wait_connect, or
            // inet_wait_for_connect's write bias when the SYN did not take it all.
            if matches!(attempt, Attempt::Wait) && done < total && !nonblock {
                pending.set(st.host.set_write_pending(fd, true).unwrap_or(false));
            }
            attempt
        },
        |_| Err(TIMED_OUT),
    );
    if pending.take() {
        let _ = sh.lock().host.set_write_pending(fd, false);
    }
    if !nonblock {
        // The call's out: when it stopped before all was copied (a no-op else).
        let mut st = sh.lock();
        let now = st.now();
        st.host.send_end(now, fd, flags);
    }
    let r = match r {
        // The time ran out waiting for a Fast Open handshake: tcp_sendmsg_fastopen's
        // __inet_stream_connect gives EINPROGRESS, which tcp_sendmsg_locked returns
        // when the SYN took no data (else the bytes it took, below).
        Err(TIMED_OUT) if wait_connect => Err(errno::EINPROGRESS),
        Err(TIMED_OUT) => Err(errno::EAGAIN),
        r => r,
    };
    r.or_else(|x| if done > 0 { Ok(done) } else { Err(x) })
}

pub(super) unsafe extern "C" fn pd_write(
    ud: Ud,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
) -> ssize_t {
    pd_send(ud, fd, buf, n, 0)
}

pub(super) unsafe extern "C" fn pd_writev(
    ud: Ud,
    fd: c_int,
    iov: *const libc::iovec,
    n: c_int,
) -> ssize_t {
    guard(ud, |sh| {
        let Some(iov) = vfs_iov(sh, fd, iov, n, false)? else {
            return Ok(0);
        };
        let pieces = crate::cmsg::page_pieces(iov);
        do_send(sh, fd, &pieces, 0).map(|n| n as ssize_t)
    })
}

/// The caller's `n` bytes at `buf` (NULL is a fault unless `n` is 0).
unsafe fn in_bytes<'a>(buf: *const c_void, n: size_t) -> Result<&'a [u8], c_int> {
    if n == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(errno::EFAULT);
    }
    Ok(std::slice::from_raw_parts(buf as *const u8, n))
}

pub(super) unsafe extern "C" fn pd_send(
    ud: Ud,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
) -> ssize_t {
    guard(ud, |sh| {
        if buf.is_null() && n > 0 {
            return send_from_null(sh, fd, n, flags, SendTo::None);
        }
        let data = in_bytes(buf, n)?;
        let pieces = crate::cmsg::page_pieces_of(data);
        do_send(sh, fd, &pieces, flags).map(|n| n as ssize_t)
    })
}

/// A write of `n` bytes from a NULL buffer: `tcp_sendmsg_locked` fails as with
/// any buffer before it copies (EPIPE unconnected, shut or on a listener; the
/// socket's error) and faults only at `skb_copy_to_page_nocache`: the state is
/// checked with a send of nothing, which `tcp_sendmsg_locked` answers without
/// queueing. A Fast Open send (`MSG_FASTOPEN`, or the write a deferred connect
/// waits for) connects with a SYN that could take no data
/// ([`lowtide::posix::Host::sendmsg_fault`]), as a send whose SYN took nothing.
fn send_from_null(sh: &Shared, fd: Fd, n: usize, flags: i32, dest: SendTo) -> Result<ssize_t, i32> {
    if sh.lock().host.is_fastopen_send(fd, flags) {
        return send_loop(sh, fd, Out::Fault(n), flags, dest).map(|n| n as ssize_t);
    }
    do_send(sh, fd, &[], flags | libc::MSG_DONTWAIT)?;
    Err(errno::EFAULT)
}

pub(super) unsafe extern "C" fn pd_sendto(
    ud: Ud,
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    a: *const libc::sockaddr,
    l: socklen_t,
) -> ssize_t {
    // TCP reads the destination only for Fast Open (Host::sendmsg_fastopen).
    guard(ud, |sh| {
        let dest = sendto_name(sh, fd, a, l)?;
        if buf.is_null() && n > 0 {
            return send_from_null(sh, fd, n, flags, dest);
        }
        let data = in_bytes(buf, n)?;
        let pieces = crate::cmsg::page_pieces_of(data);
        do_sendto(sh, fd, &pieces, flags, dest).map(|n| n as ssize_t)
    })
}

pub(super) unsafe extern "C" fn pd_sendmsg(
    ud: Ud,
    fd: c_int,
    msg: *const libc::msghdr,
    flags: c_int,
) -> ssize_t {
    // __sys_sendmsg: the descriptor, then the msghdr (copy_msghdr_from_user).
    guard(ud, |sh| {
        sh.lock().host.sockfd_lookup(fd).map_err(e)?;
        if msg.is_null() {
            return Err(errno::EFAULT);
        }
        let m = &*msg;
        let dest = msg_name(m)?;
        let pieces = crate::cmsg::page_pieces(msg_iov(sh, fd, m)?);
        do_sendto(sh, fd, &pieces, flags, dest).map(|n| n as ssize_t)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// __copy_msghdr: a NULL msg_name or one of length 0 is none, a negative length
    /// EINVAL, one past sockaddr_storage cut to it (sendto's EINVAL is
    /// move_addr_to_kernel's, UserSockAddr::from_bytes).
    #[test]
    fn msg_name_as_copy_msghdr_takes_it() {
        let mut name = [0u8; 200];
        name[..2].copy_from_slice(&(AF_INET as u16).to_ne_bytes());
        let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
        let len = |r: Result<SendTo, i32>| match r {
            Ok(SendTo::Name(a)) => Ok(Some(a.len())),
            Ok(SendTo::None) => Ok(None),
            Err(x) => Err(x),
        };
        unsafe {
            m.msg_namelen = 16;
            assert_eq!(len(msg_name(&m)), Ok(None), "NULL");
            m.msg_name = name.as_mut_ptr() as *mut c_void;
            assert_eq!(len(msg_name(&m)), Ok(Some(16)));
            m.msg_namelen = 0;
            assert_eq!(len(msg_name(&m)), Ok(None));
            m.msg_namelen = 200;
            assert_eq!(len(msg_name(&m)), Ok(Some(128)));
            m.msg_namelen = u32::MAX;
            assert_eq!(len(msg_name(&m)), Err(errno::EINVAL));
        }
    }
}

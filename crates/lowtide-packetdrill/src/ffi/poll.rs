//! poll(2) and epoll(7) (fs/select.c, fs/eventpoll.c) as packetdrill's interface
//! members: readiness from lowtide's socket layer, waiting in virtual time.

use super::*;

fn timeout_us(ms: c_int) -> Option<u64> {
    (ms >= 0).then_some(ms as u64 * 1000)
}

pub(super) unsafe extern "C" fn pd_poll(
    ud: Ud,
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    guard(ud, |sh| {
        if fds.is_null() && n > 0 {
            return Err(errno::EFAULT);
        }
        let pfds = if n == 0 {
            &mut [][..]
        } else {
            std::slice::from_raw_parts_mut(fds, n as usize)
        };
        let v: Vec<PollFd> = pfds
            .iter()
            .map(|p| PollFd {
                fd: p.fd,
                events: p.events as u16 as u32,
                revents: 0,
            })
            .collect();
        let vw = std::cell::RefCell::new((v, lowtide::posix::PollWait::default()));
        let scan = |st: &mut State| {
            let (v, w) = &mut *vw.borrow_mut();
            st.host.poll_wait(v, w)
        };
        let count = sh.blocking(
            timeout == 0,
            timeout_us(timeout),
            |st: &mut State| match scan(st) {
                0 => Attempt::Wait,
                k => Attempt::Done(Ok(k)),
            },
            // do_poll's scan after the timeout looks at every descriptor.
            |st: &mut State| {
                vw.borrow_mut().1.timed_out = true;
                Ok(scan(st))
            },
        );
        let (v, w) = vw.into_inner();
        // poll_freewait: the files' references go (the last one releases a file).
        for pin in w.refs() {
            fdput(sh, pin);
        }
        let count = match count {
            Err(errno::EAGAIN) => 0,
            r => r?,
        };
        for (p, q) in pfds.iter_mut().zip(&v) {
            p.revents = q.revents as u16 as i16;
        }
        Ok(count as c_int)
    })
}

pub(super) unsafe extern "C" fn pd_epoll_create(ud: Ud, size: c_int) -> c_int {
    guard(ud, |sh| sh.enter().host.epoll_create(size).map_err(e))
}

pub(super) unsafe extern "C" fn pd_epoll_ctl(
    ud: Ud,
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut libc::epoll_event,
) -> c_int {
    guard(ud, |sh| {
        let (events, data) = if ev.is_null() {
            if op != EPOLL_CTL_DEL {
                return Err(errno::EFAULT);
            }
            (0, 0)
        } else {
            let ev = std::ptr::read_unaligned(ev);
            (ev.events, ev.u64)
        };
        sh.enter()
            .host
            .epoll_ctl(epfd, op, fd, events, data)
            .map(|_| 0)
            .map_err(e)
    })
}

pub(super) unsafe extern "C" fn pd_epoll_wait(
    ud: Ud,
    epfd: c_int,
    evs: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    guard(ud, |sh| {
        if max <= 0 {
            return Err(errno::EINVAL);
        }
        if evs.is_null() {
            return Err(errno::EFAULT);
        }
        let r = pinned(sh, epfd, |epfd| {
            sh.blocking(
                timeout == 0,
                timeout_us(timeout),
                |st: &mut State| match st.host.epoll_wait(epfd, max as usize) {
                    Ok(v) if v.is_empty() => Attempt::Wait,
                    r => Attempt::Done(r.map_err(e)),
                },
                |_| Ok(Vec::new()),
            )
        });
        let v = match r {
            Err(errno::EAGAIN) => Vec::new(),
            r => r?,
        };
        for (i, x) in v.iter().enumerate() {
            let out = libc::epoll_event {
                events: x.events,
                u64: x.data,
            };
            std::ptr::write_unaligned(evs.add(i), out);
        }
        Ok(v.len() as c_int)
    })
}

//! `poll(2)` and `epoll(7)` over [`Host`] sockets, with `tcp_poll`'s exact mask.

use super::consts::*;
use super::fdtable::FileId;
use super::{err, Errno, Fd, File, Host, SockState};
use crate::TcpState;
use std::collections::BTreeMap;

/// One entry of `poll(2)`'s array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PollFd {
    /// The descriptor (negative: ignored).
    pub fd: Fd,
    /// Requested events.
    pub events: u32,
    /// Returned events.
    pub revents: u32,
}

/// One event `epoll_wait` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpollEvent {
    /// The ready events.
    pub events: u32,
    /// The user data given to `epoll_ctl`.
    pub data: u64,
}

/// The key of a wakeup of a socket's wait queue: which callback woke it
/// (`ep_poll_callback` puts an item on the ready list only for a key in its events,
/// or for a wakeup without a key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// `sk_data_ready` (`sock_def_readable`): `EPOLLIN | EPOLLPRI | EPOLLRDNORM |
    /// EPOLLRDBAND`.
    Data = 0,
    /// `sk_write_space` (`sk_stream_write_space`): `EPOLLOUT | EPOLLWRNORM |
    /// EPOLLWRBAND`.
    Space = 1,
    /// `sk_error_report` (`sock_def_error_report`): `EPOLLERR`.
    Error = 2,
    /// `sk_state_change` (`sock_def_wakeup`): no key, every waiter.
    State = 3,
}

/// How many wakeup keys a socket counts.
pub(crate) const WAKE_KEYS: usize = 4;

/// `EPOLLRDBAND`, `EPOLLWRBAND`.
const POLLRDBAND: u32 = 0x80;
const POLLWRBAND: u32 = 0x200;

impl Wake {
    /// The callbacks Linux runs for an engine event: `Connected` is
    /// `tcp_finish_connect`'s `sk_state_change`; `Acceptable` the listener's
    /// `sk_data_ready`; `Readable` `tcp_data_ready`; `Writable`
    /// `sk_stream_write_space`; `ReadHangUp` `tcp_fin`'s `sk_state_change`; `Error`
    /// `tcp_reset`/`tcp_write_err`'s `sk_error_report` then `tcp_done`'s
    /// `sk_state_change`; `ErrQueue` `sk_error_report`; `HangUp` `tcp_done`'s and
    /// `StateChange` FIN-WAIT-1's `sk_state_change`.
    pub(crate) fn of(kind: crate::socket::EventKind) -> &'static [Wake] {
        use crate::socket::EventKind::*;
        match kind {
            Acceptable | Readable => &[Wake::Data],
            Writable => &[Wake::Space],
            ErrQueue => &[Wake::Error],
            Error(_) => &[Wake::Error, Wake::State],
            Connected | ReadHangUp | HangUp | StateChange => &[Wake::State],
        }
    }

    /// The poll key the callback passes (0: none, every waiter).
    fn key(self) -> u32 {
        match self {
            Wake::Data => POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND,
            Wake::Space => POLLOUT | POLLWRNORM | POLLWRBAND,
            Wake::Error => POLLERR,
            Wake::State => 0,
        }
    }
}

const ALL_WAKES: [Wake; WAKE_KEYS] = [Wake::Data, Wake::Space, Wake::Error, Wake::State];

#[derive(Debug)]
struct Item {
    events: u32,
    data: u64,
    /// On the ready list (`ep_poll_callback` put it there, or `epoll_ctl` found it
    /// ready), not yet looked at by `epoll_wait`.
    ready: bool,
    /// The socket's wakeup counts per key when the item last looked.
    seen_wake: [u64; WAKE_KEYS],
    seen_rcv: u64,
}

impl Item {
    /// `ep_poll_callback` for each wakeup since the item last looked: a disarmed
    /// `EPOLLONESHOT` item ignores them, and a keyed wakeup counts only when its key
    /// meets the item's events.
    fn callback(&mut self, wake: [u64; WAKE_KEYS], rcv: u64) {
        let armed = self.events & !EP_PRIVATE_BITS != 0;
        for w in ALL_WAKES {
            let i = w as usize;
            let key = w.key();
            let woke = self.seen_wake[i] != wake[i]
                // sk_data_ready runs on every in-order arrival.
                || (w == Wake::Data && self.seen_rcv != rcv);
            if woke && armed && (key == 0 || key & self.events != 0) {
                self.ready = true;
            }
        }
        self.seen_wake = wake;
        self.seen_rcv = rcv;
    }
}

/// What a sleeping `poll(2)` holds between its scans (`struct poll_wqueues`):
/// see [`Host::poll_wait`].
#[derive(Debug, Default)]
pub struct PollWait {
    started: bool,
    /// The time is up: the last scan looks at every descriptor.
    pub timed_out: bool,
    /// Each file's reference, the events its entry waits for, and its wakeups
    /// when last looked at.
    refs: Vec<(Fd, u32, Option<Seen>)>,
}

/// A socket's wakeup counts per key and its data sequence ([`Host::wake_state`]).
type Seen = ([u64; WAKE_KEYS], u64);

impl PollWait {
    /// The references the call holds, to drop ([`Host::fdput`]) when it returns.
    pub fn refs(&self) -> Vec<Fd> {
        self.refs.iter().map(|r| r.0).collect()
    }
}

/// An epoll instance: its interest list, each item keyed by its descriptor and
/// the file the descriptor named (`struct epoll_filefd`): closing the descriptor
/// leaves the item while the file lives (a call in progress holds it), and its
/// events are still reported; the file's release removes it.
#[derive(Debug, Default)]
pub(crate) struct Epoll {
    items: BTreeMap<(Fd, FileId), Item>,
}

impl Epoll {
    /// `eventpoll_release`: the file `id` is released.
    pub(crate) fn forget(&mut self, id: FileId) {
        self.items.retain(|k, _| k.1 != id);
    }
}

impl Host {
    /// `tcp_poll`: the full readiness mask of `fd` (`POLLIN`, `POLLOUT`, `POLLHUP`,
    /// ...), unfiltered. Like Linux, a connection found not writable is marked
    /// `SOCK_NOSPACE`, so freed space will wake it.
    pub fn poll_mask(&mut self, fd: Fd) -> Result<u32, Errno> {
        if let Some(m) = self.pipe_poll(fd) {
            return Ok(m);
        }
        let s = self.sock(fd)?;
        // tcp_poll: sk_err (left by tcp_disconnect) is EPOLLERR.
        let err_bit = if s.sk_err.is_some() { POLLERR } else { 0 };
        let h = match s.state {
            // A socket without a connection is TCP_CLOSE: HUP, readable once shut
            // for reading, writable once shut for writing or while
            // __sk_stream_is_writeable(sk, 1) holds (tcp_stream_memory_free: the
            // write_seq tcp_disconnect moved past snd_nxt against the lowat).
            SockState::Unconnected => {
                let mut m = POLLHUP | err_bit;
                if s.opts.shutdown & RCV_SHUTDOWN != 0 {
                    m |= POLLIN | POLLRDNORM | POLLRDHUP;
                }
                let cfg = self.stack.config();
                let wake = cfg.notsent_wake_hysteresis as u32;
                if s.opts.shutdown & SEND_SHUTDOWN != 0
                    || s.opts.closed_stream_memory_free(cfg, wake)
                {
                    m |= POLLOUT | POLLWRNORM;
                }
                return Ok(m);
            }
            // inet_csk_listen_poll.
            SockState::Listening(h) => {
                let n = self
                    .stack
                    .socket_ref(h)
                    .accept_queue_len()
                    .map_err(Errno::from)?;
                return Ok(if n > 0 { POLLIN | POLLRDNORM } else { 0 });
            }
            SockState::Conn { h, .. } => h,
        };
        let st = self.stack.socket_ref(h).status().map_err(Errno::from)?;
        let mut mask = 0;
        if st.rcv_shutdown && st.send_shutdown || st.state == TcpState::Closed {
            mask |= POLLHUP;
        }
        if st.rcv_shutdown {
            mask |= POLLIN | POLLRDNORM | POLLRDHUP;
        }
        // tcp_poll: connected, or a passive Fast Open child; an active one waiting
        // for its first write (DEFER_CONNECT) is writable so that the write comes.
        if st.state == TcpState::SynSent && st.defer_connect {
            mask |= POLLOUT | POLLWRNORM;
        } else if st.state != TcpState::SynSent
            && (st.state != TcpState::SynRecv || st.passive_fastopen)
        {
            if st.readable {
                mask |= POLLIN | POLLRDNORM;
            }
            if st.send_shutdown || st.writeable {
                mask |= POLLOUT | POLLWRNORM;
            } else {
                self.stack.socket(h).mark_nospace().map_err(Errno::from)?;
            }
            if st.urg_valid {
                mask |= POLLPRI;
            }
        }
        // tcp_poll: "if (sk->sk_err || !skb_queue_empty_lockless(&sk->sk_error_queue))".
        if st.err || st.err_queue {
            mask |= POLLERR;
        }
        Ok(mask)
    }

    /// `poll(2)` without waiting: fills `revents` and returns how many are non-zero.
    /// A blocking caller waits for the next wakeup or its timeout and calls again.
    pub fn poll(&mut self, fds: &mut [PollFd]) -> usize {
        let mut n = 0;
        for p in fds.iter_mut() {
            p.revents = if p.fd < 0 {
                0
            } else {
                match self.poll_mask(p.fd) {
                    Ok(m) => m & (p.events | POLLERR | POLLHUP),
                    Err(_) => POLLNVAL,
                }
            };
            n += (p.revents != 0) as usize;
        }
        n
    }

    /// `poll(2)` of a caller that sleeps between scans (`do_poll`): the first scan
    /// takes a reference to each file it looks at (`__pollwait`'s `get_file`,
    /// dropped with [`Host::fdput`] of [`PollWait::refs`] when the call returns),
    /// so a descriptor closed meanwhile leaves its file alive. Linux scans again
    /// only when one of those files is woken with a key its entry waits for
    /// (`pollwake`), or at the timeout ([`PollWait::timed_out`]): a closed
    /// descriptor is `POLLNVAL` only then. Descriptors still open are scanned at
    /// every call, as [`Host::poll`].
    pub fn poll_wait(&mut self, fds: &mut [PollFd], w: &mut PollWait) -> usize {
        let woke = match w.started {
            false => {
                w.started = true;
                for p in fds.iter().filter(|p| p.fd >= 0) {
                    let Ok(pin) = self.fdget(p.fd) else { continue };
                    let seen = self.wake_state(pin).ok();
                    let key = p.events | POLLERR | POLLHUP;
                    w.refs.push((pin, key, seen));
                }
                true
            }
            true => {
                let mut woke = std::mem::take(&mut w.timed_out);
                for (pin, key, seen) in w.refs.iter_mut() {
                    let now = self.wake_state(*pin).ok();
                    woke |= match (*seen, now) {
                        (Some((w0, r0)), Some((w1, r1))) => ALL_WAKES.iter().any(|k| {
                            let i = *k as usize;
                            let changed = w0[i] != w1[i] || (*k == Wake::Data && r0 != r1);
                            changed && (k.key() == 0 || k.key() & *key != 0)
                        }),
                        // Not a socket (a pipe end): its wakeups are not counted.
                        _ => true,
                    };
                    *seen = now;
                }
                woke
            }
        };
        let n = self.poll(fds);
        if woke {
            return n;
        }
        // Not woken: Linux does not look; a descriptor gone since is not seen.
        for p in fds.iter_mut().filter(|p| p.revents == POLLNVAL) {
            p.revents = 0;
        }
        fds.iter().filter(|p| p.revents != 0).count()
    }

    /// `epoll_create(2)`.
    pub fn epoll_create(&mut self, size: i32) -> Result<Fd, Errno> {
        if size <= 0 {
            return err(errno::EINVAL);
        }
        Ok(self.alloc_fd(File::Epoll(Epoll::default())))
    }

    /// `epoll_ctl(2)`.
    pub fn epoll_ctl(
        &mut self,
        epfd: Fd,
        op: i32,
        fd: Fd,
        events: u32,
        data: u64,
    ) -> Result<(), Errno> {
        // do_epoll_ctl (fs/eventpoll.c), in its order: both files (EBADF), then the
        // same file or an epfd that is not an epoll (EINVAL), then EPOLLEXCLUSIVE's
        // limits (EINVAL).
        let ep_is_epoll = match self.files.get(&epfd) {
            Some(f) => matches!(f, File::Epoll(_)),
            None => return err(errno::EBADF),
        };
        let target_is_epoll = match self.files.get(&fd) {
            Some(f) => matches!(f, File::Epoll(_)),
            None => return err(errno::EBADF),
        };
        if self.files.id(epfd) == self.files.id(fd) || !ep_is_epoll {
            return err(errno::EINVAL);
        }
        if op == EPOLL_CTL_MOD && events & EPOLLEXCLUSIVE != 0 {
            return err(errno::EINVAL); // added to the wait queue at ADD time only
        }
        if op == EPOLL_CTL_ADD
            && events & EPOLLEXCLUSIVE != 0
            && (target_is_epoll || events & !EPOLLEXCLUSIVE_OK_BITS != 0)
        {
            return err(errno::EINVAL); // no nested exclusive wakeups
        }
        let (wake, rcv) = self.wake_state(fd)?;
        let key = (fd, self.files.id(fd).ok_or(Errno(errno::EBADF))?);
        // ep_insert/ep_modify poll the file once: ready now, it goes on the list.
        let events = events | POLLERR | POLLHUP; // do_epoll_ctl, for ADD and MOD
        let now_ready = match op {
            EPOLL_CTL_ADD | EPOLL_CTL_MOD => self.poll_mask(fd)? & events & !EP_PRIVATE_BITS != 0,
            _ => false,
        };
        let Some(File::Epoll(ep)) = self.files.get_mut(&epfd) else {
            return err(errno::EINVAL);
        };
        let item = Item {
            events,
            data,
            ready: now_ready,
            seen_wake: wake,
            seen_rcv: rcv,
        };
        match op {
            EPOLL_CTL_ADD if ep.items.contains_key(&key) => err(errno::EEXIST),
            EPOLL_CTL_ADD => {
                ep.items.insert(key, item);
                Ok(())
            }
            EPOLL_CTL_MOD | EPOLL_CTL_DEL if !ep.items.contains_key(&key) => err(errno::ENOENT),
            // An exclusive item cannot be modified, only deleted.
            EPOLL_CTL_MOD if ep.items[&key].events & EPOLLEXCLUSIVE != 0 => err(errno::EINVAL),
            EPOLL_CTL_MOD => {
                ep.items.insert(key, item);
                Ok(())
            }
            EPOLL_CTL_DEL => {
                ep.items.remove(&key);
                Ok(())
            }
            _ => err(errno::EINVAL),
        }
    }

    /// The wakeup counts and data sequence of a socket: a change in either is a
    /// wakeup (`sk_data_ready` fires on every in-order arrival, the engine's events
    /// cover the rest).
    pub(super) fn wake_state(&self, fd: Fd) -> Result<([u64; WAKE_KEYS], u64), Errno> {
        let s = self.sock(fd)?;
        let rcv = match s.state {
            SockState::Conn { h, .. } => self
                .stack
                .socket_ref(h)
                .status()
                .map_or(0, |st| st.data_ready),
            _ => 0,
        };
        Ok((s.wake, rcv))
    }

    /// `epoll_wait(2)` without waiting: up to `max` ready events. Level-triggered
    /// items are reported while ready; `EPOLLET` items only after a new wakeup;
    /// `EPOLLONESHOT` items are disarmed once reported.
    pub fn epoll_wait(&mut self, epfd: Fd, max: usize) -> Result<Vec<EpollEvent>, Errno> {
        if max == 0 {
            return err(errno::EINVAL);
        }
        let keys: Vec<(Fd, FileId)> = match self.files.get(&epfd) {
            Some(File::Epoll(ep)) => ep.items.keys().copied().collect(),
            Some(_) => return err(errno::EINVAL),
            None => return err(errno::EBADF),
        };
        let mut out = Vec::new();
        for key in keys {
            if out.len() == max {
                break;
            }
            // The item's file through its descriptor, or through a call's own
            // reference once the user closed that.
            let Some(fd) = self.files.fd_of(key.1, key.0) else {
                continue;
            };
            let Ok((wake, rcv)) = self.wake_state(fd) else {
                continue;
            };
            let Some(File::Epoll(ep)) = self.files.get_mut(&epfd) else {
                break;
            };
            let Some(it) = ep.items.get_mut(&key) else {
                continue;
            };
            it.callback(wake, rcv);
            let edge = it.events & EPOLLET != 0;
            if edge && !it.ready {
                continue;
            }
            it.ready = false;
            // ep_send_events: ep_item_poll, which may set SOCK_NOSPACE (tcp_poll).
            let mask = self.poll_mask(fd).unwrap_or(0);
            let Some(File::Epoll(ep)) = self.files.get_mut(&epfd) else {
                break;
            };
            let Some(it) = ep.items.get_mut(&key) else {
                continue;
            };
            // A disarmed EPOLLONESHOT item (only the private bits left) reports
            // nothing, EPOLLERR and EPOLLHUP included (ep_poll_callback).
            let ev = mask & it.events & !EP_PRIVATE_BITS;
            if ev == 0 {
                continue;
            }
            if it.events & EPOLLONESHOT != 0 {
                it.events &= EP_PRIVATE_BITS;
            }
            out.push(EpollEvent {
                events: ev,
                data: it.data,
            });
        }
        Ok(out)
    }
}

//! Real time for the engine: `CLOCK_MONOTONIC` since the runtime started, and a
//! `timerfd` that wakes the event loop at the engine's next deadline with nanosecond
//! resolution (epoll's own timeout has only milliseconds, too coarse for pacing).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The runtime's clock: [`lowtide::Instant`]s are nanoseconds since `start`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: u64,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Clock {
        Clock {
            start: monotonic_ns(),
        }
    }

    /// The current time.
    pub fn now(&self) -> lowtide::Instant {
        lowtide::Instant(monotonic_ns().saturating_sub(self.start))
    }

    /// Busy polling (`net.core.busy_poll`, `sk_busy_loop`): calls `poll` until it
    /// finds work (returns true) or `until` passes; true if it found work.
    pub fn busy_poll(
        &self,
        until: lowtide::Instant,
        mut poll: impl FnMut() -> io::Result<bool>,
    ) -> io::Result<bool> {
        while self.now() < until {
            if poll()? {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        Ok(false)
    }

    /// `CLOCK_MONOTONIC` nanoseconds of an instant of this clock.
    pub fn to_monotonic(&self, at: lowtide::Instant) -> u64 {
        self.start + at.as_nanos()
    }
}

/// A non-blocking `timerfd` on `CLOCK_MONOTONIC`, armed with absolute deadlines.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// Creates a disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Timers of this thread fire on time rather than up to 50 µs late
        // (PR_SET_TIMERSLACK; the default slack of a normal task is 50 µs).
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        Ok(TimerFd { fd })
    }

    /// Fires at `monotonic_ns` (absolute; a time in the past fires at once).
    pub fn arm_at(&self, monotonic_ns: u64) -> io::Result<()> {
        let ns = monotonic_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid fd and itimerspec; old value not requested.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Consumes an expiry, if any, so that the fd stops being readable.
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into our buffer; EAGAIN is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The event loop's wait: epoll (mio) on some descriptors plus a timerfd for the next
/// deadline.
pub struct Sleeper {
    clock: Clock,
    timer: TimerFd,
    poll: mio::Poll,
    events: mio::Events,
    /// Wakeups so far.
    pub wakeups: u64,
}

/// A deadline closer than this is waited for by polling again rather than sleeping:
/// a timerfd wakeup costs tens of microseconds.
pub const SPIN_NS: u64 = 20_000;

impl Sleeper {
    /// Waits on `fds` (readable) and the timer, with `clock`'s time.
    pub fn new(clock: Clock, fds: &[RawFd]) -> io::Result<Sleeper> {
        let poll = mio::Poll::new()?;
        let timer = TimerFd::new()?;
        let reg = poll.registry();
        let timer_fd = timer.as_raw_fd();
        reg.register(
            &mut mio::unix::SourceFd(&timer_fd),
            mio::Token(usize::MAX),
            mio::Interest::READABLE,
        )?;
        for (i, fd) in fds.iter().enumerate() {
            let src = &mut mio::unix::SourceFd(fd);
            reg.register(src, mio::Token(i), mio::Interest::READABLE)?;
        }
        Ok(Sleeper {
            clock,
            timer,
            poll,
            events: mio::Events::with_capacity(8),
            wakeups: 0,
        })
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Sleeps until a descriptor is readable or `deadline` (if it is more than
    /// [`SPIN_NS`] away; otherwise returns at once).
    pub fn sleep_until(&mut self, deadline: lowtide::Instant) -> io::Result<()> {
        let now = self.clock.now();
        if deadline.as_nanos() <= now.as_nanos() + SPIN_NS {
            return Ok(());
        }
        self.timer.arm_at(self.clock.to_monotonic(deadline))?;
        match self.poll.poll(&mut self.events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        self.wakeups += 1;
        self.timer.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_starts_near_zero_and_advances() {
        let c = Clock::start();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert_eq!(c.to_monotonic(a) - a.as_nanos(), c.start);
    }

    #[test]
    fn busy_poll_stops_at_work_or_at_its_end() {
        let clock = Clock::start();
        let mut calls = 0;
        let until = clock.now() + std::time::Duration::from_secs(10);
        let found = clock.busy_poll(until, || {
            calls += 1;
            Ok(calls == 3)
        });
        assert!(found.unwrap());
        assert_eq!(calls, 3, "returns at the first poll that finds work");
        let until = clock.now() + std::time::Duration::from_micros(200);
        assert!(!clock.busy_poll(until, || Ok(false)).unwrap());
        assert!(clock.now() >= until, "polled until its end");
        let past = clock.busy_poll(lowtide::Instant(0), || panic!("not polled"));
        assert!(!past.unwrap(), "an end in the past polls nothing");
    }

    #[test]
    fn timer_in_the_past_fires() {
        let t = TimerFd::new().unwrap();
        t.arm_at(1).unwrap();
        let mut pfd = libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 5_000) };
        assert_eq!(n, 1);
        t.clear();
    }
}

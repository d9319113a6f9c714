//! The driver task: runs the socket layer ([`lowtide::posix::Host`]) on a
//! [`PacketDevice`] with tokio's timers, and wakes the tasks waiting on sockets.
//!
//! Readiness comes from the socket layer's own `epoll` in edge-triggered mode, as
//! tokio's reactor uses the kernel's: every socket is registered with
//! `EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET`, and after each round of packets and
//! timers the driver wakes the readers and writers of the sockets `epoll_wait`
//! reports. A writer therefore waits as a Linux writer does: `tcp_poll` says
//! writable below `TCP_NOTSENT_LOWAT`, and the stack's `sk_write_space` wakeup comes
//! once the unsent bytes fall below half of it (seed 001).

use crate::device::PacketDevice;
use crate::shard::Steer;
use lowtide::posix::consts::*;
use lowtide::posix::{Fd, Host};
use lowtide::Instant;
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::{Instant as TokioInstant, Sleep};

/// Packets read from the device per round before the driver yields to other tasks
/// (NAPI's budget plays the same role).
const RX_BUDGET: usize = 64;
/// Events taken from `epoll_wait` per call.
const EPOLL_MAX: usize = 1024;

/// Tasks waiting on one socket.
#[derive(Default)]
pub(crate) struct Waiters {
    pub read: Option<Waker>,
    pub write: Option<Waker>,
}

/// Everything behind the lock that the driver and the sockets share.
pub(crate) struct Inner {
    pub host: Host,
    epfd: Fd,
    base: TokioInstant,
    driver: Option<Waker>,
    waiters: HashMap<Fd, Waiters>,
    /// Tasks waiting for a datagram on a UDP socket.
    udp_readers: HashMap<lowtide::UdpHandle, Waker>,
    /// Why the driver stopped, if it did (a device error).
    dead: Option<(io::ErrorKind, String)>,
    /// Every connection had finished closing at the end of the last round, and no
    /// socket call came since (what [`crate::Net::shutdown`] waits for).
    settled: bool,
    /// Tasks in [`crate::Net::shutdown`].
    closers: Vec<Waker>,
}

impl Inner {
    /// The stack's clock: tokio's time since the driver started (virtual under
    /// `tokio::time::pause`).
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.base.elapsed().as_nanos() as u64)
    }

    /// Fails if the driver has stopped.
    pub fn alive(&self) -> io::Result<()> {
        match &self.dead {
            None => Ok(()),
            Some((kind, why)) => Err(io::Error::new(
                *kind,
                format!("lowtide driver stopped: {why}"),
            )),
        }
    }

    /// Wakes the driver after a socket call (it may have queued packets or moved a
    /// timer).
    pub fn kick(&mut self) {
        self.settled = false;
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }

    /// Whether the stack has nothing left to close, as of a round of the driver
    /// that sent everything queued before it; otherwise parks `cx`'s task until
    /// the next round (call [`Inner::kick`] first, so that one runs). A stopped
    /// driver is settled: nothing more can be sent.
    pub fn poll_settled(&mut self, cx: &Context<'_>) -> Poll<()> {
        if self.settled || self.dead.is_some() {
            return Poll::Ready(());
        }
        self.closers.push(cx.waker().clone());
        Poll::Pending
    }

    /// Registers a new socket with the epoll set.
    pub fn watch(&mut self, fd: Fd) -> io::Result<()> {
        let ev = POLLIN | POLLOUT | POLLRDHUP | EPOLLET;
        self.host
            .epoll_ctl(self.epfd, EPOLL_CTL_ADD, fd, ev, fd as u64)?;
        self.waiters.insert(fd, Waiters::default());
        Ok(())
    }

    /// Closes a socket (`close(2)`: FIN after queued data) and forgets its waiters.
    pub fn close(&mut self, fd: Fd) {
        let now = self.now();
        let _ = self.host.close(now, fd);
        self.waiters.remove(&fd);
        self.kick();
    }

    /// Parks `cx`'s task until `fd` is readable (or writable).
    pub fn wait(&mut self, fd: Fd, write: bool, cx: &Context<'_>) {
        let w = self.waiters.entry(fd).or_default();
        let slot = if write { &mut w.write } else { &mut w.read };
        *slot = Some(cx.waker().clone());
        if write {
            // tcp_poll marks a full socket SOCK_NOSPACE, so freed space wakes it.
            let _ = self.host.poll_mask(fd);
        }
    }

    /// Parks `cx`'s task until UDP socket `h` has a datagram.
    pub fn wait_udp(&mut self, h: lowtide::UdpHandle, cx: &Context<'_>) {
        self.udp_readers.insert(h, cx.waker().clone());
    }

    /// Forgets the reader of a closed UDP socket.
    pub fn forget_udp(&mut self, h: lowtide::UdpHandle) {
        self.udp_readers.remove(&h);
    }

    /// Wakes the readers of UDP sockets that have a datagram (or are gone).
    fn wake_udp(&mut self) {
        let stack = self.host.stack();
        self.udp_readers.retain(|h, w| {
            let ready = stack.udp_readable(*h) != Ok(false);
            if ready {
                w.wake_by_ref();
            }
            !ready
        });
    }

    /// Wakes the tasks of the sockets epoll reports ready.
    fn wake_ready(&mut self) {
        let Ok(events) = self.host.epoll_wait(self.epfd, EPOLL_MAX) else {
            return;
        };
        for ev in events {
            let Some(w) = self.waiters.get_mut(&(ev.data as Fd)) else {
                continue;
            };
            if ev.events & (POLLIN | POLLRDHUP | POLLHUP | POLLERR) != 0 {
                wake(&mut w.read);
            }
            if ev.events & (POLLOUT | POLLHUP | POLLERR) != 0 {
                wake(&mut w.write);
            }
        }
    }

    fn wake_all(&mut self) {
        for w in self.waiters.values_mut() {
            wake(&mut w.read);
            wake(&mut w.write);
        }
        self.udp_readers.drain().for_each(|(_, w)| w.wake());
        self.closers.drain(..).for_each(Waker::wake);
    }

    /// After a round sent all it had: records whether every connection has reached
    /// a final state (closed, or TIME-WAIT: `Stack::closing_count`) and wakes the
    /// tasks waiting for that.
    fn settle(&mut self) {
        self.settled = self.host.stack().closing_count() == 0;
        self.closers.drain(..).for_each(Waker::wake);
    }
}

/// Wakes the task parked in `slot`, if any.
fn wake(slot: &mut Option<Waker>) {
    if let Some(w) = slot.take() {
        w.wake();
    }
}

/// The shared state.
pub(crate) type Shared = Arc<Mutex<Inner>>;

/// Locks the shared state (a poisoned lock means a socket call panicked; the
/// state is still consistent at call boundaries, so carry on).
pub(crate) fn lock(s: &Shared) -> MutexGuard<'_, Inner> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds the shared state around `host` and an epoll instance.
pub(crate) fn shared(mut host: Host) -> Shared {
    let epfd = host
        .epoll_create(1)
        .expect("epoll_create(1) on a fresh host");
    Arc::new(Mutex::new(Inner {
        host,
        epfd,
        base: TokioInstant::now(),
        driver: None,
        waiters: HashMap::new(),
        udp_readers: HashMap::new(),
        dead: None,
        settled: false,
        closers: Vec::new(),
    }))
}

/// Runs the stack on `dev` until every handle on `shared` is gone, or the device
/// fails (then every socket call returns the error). A shard of a sharded
/// [`crate::Net`] has its `steer`: packets of other shards' connections go to them,
/// and theirs for this one come in through its mailbox.
pub(crate) async fn drive<D: PacketDevice>(shared: Shared, mut dev: D, steer: Option<Steer>) {
    let mut buf = Vec::with_capacity(65536 + 64);
    let mut sleep: Pin<Box<Sleep>> = Box::pin(tokio::time::sleep(Duration::ZERO));
    poll_fn(|cx| {
        if Arc::strong_count(&shared) == 1 {
            return Poll::Ready(());
        }
        if let Some(s) = &steer {
            s.mine().register(cx.waker());
        }
        let mut g = lock(&shared);
        g.driver = Some(cx.waker().clone());
        loop {
            match round(&mut g, &mut dev, &mut buf, steer.as_ref(), cx) {
                Ok(true) => {
                    // Budget spent: let other tasks run, then come back.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(error = %e, "lowtide driver: device failed");
                    g.dead = Some((e.kind(), e.to_string()));
                    g.wake_all();
                    return Poll::Ready(());
                }
            }
            let Some(at) = g.host.poll_timeout() else {
                return Poll::Pending;
            };
            let when = g.base + Duration::from_nanos(at.as_nanos());
            sleep.as_mut().reset(when);
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    })
    .await
}

/// One round: device input (up to the budget), due timers, output to the device,
/// wakeups. Returns whether the input budget ran out.
fn round<D: PacketDevice>(
    g: &mut Inner,
    dev: &mut D,
    buf: &mut Vec<u8>,
    steer: Option<&Steer>,
    cx: &mut Context<'_>,
) -> io::Result<bool> {
    if let Some(s) = steer {
        for (packet, csum) in s.mine().take() {
            let now = g.now();
            g.host.handle_packet(now, &packet, csum);
        }
    }
    let mut budget_out = true;
    for _ in 0..RX_BUDGET {
        match dev.poll_recv(cx, buf) {
            Poll::Ready(Ok(csum)) => {
                if steer.is_some_and(|s| s.hand_over(buf, csum)) {
                    continue;
                }
                let now = g.now();
                g.host.handle_packet(now, buf, csum);
            }
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => {
                budget_out = false;
                break;
            }
        }
    }
    let now = g.now();
    g.host.handle_timeout(now);
    while let Some(tx) = g.host.poll_transmit(now) {
        dev.send(&tx)?;
        // The device has the packet: TX completion (tcp_wfree), so TCP Small
        // Queues lets the socket send more.
        g.host.handle_tx_complete(now, tx.token);
    }
    g.wake_ready();
    g.wake_udp();
    g.settle();
    Ok(budget_out)
}

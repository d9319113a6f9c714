//! One engine shard per queue of a multi-queue TUN device, each on its own thread:
//! the real path on every core (issue 26 §3).
//!
//! Every shard is a [`Runtime`] with its own [`lowtide::Stack`] on one queue
//! ([`TunDevice::open_queues`](crate::device::TunDevice::open_queues)); shards share
//! nothing but the interface, and a connection lives on the shard whose queue carries
//! its packets. The application runs on its own thread and reaches a shard's sockets
//! through [`Shards::with`].
//!
//! # How the kernel spreads flows over the queues
//!
//! `drivers/net/tun.c` (Linux 6.18), for a packet the kernel transmits into the
//! device, `tun_select_queue`: with no steering eBPF program (`TUNSETSTEERINGEBPF`,
//! which lowtide does not set), `tun_automq_select_queue` takes the packet's
//! *symmetric* flow hash (`__skb_get_hash_symmetric`: addresses and ports, sorted so
//! that both directions hash alike, keyed by a random per-boot secret) and looks it up
//! in the device's flow table (`tun_flow_find`): a flow found there goes to the
//! queue recorded for it (`e->queue_index`); any other to
//! `reciprocal_scale(hash, numqueues)`. The table is written on the other direction:
//! `tun_get_user`, for every packet written on a queue of a device with more than one
//! queue, computes the same symmetric hash and `tun_flow_update` records that queue
//! for it (`MAX_TAP_FLOWS` 4096 entries, aged out after `TUN_FLOW_EXPIRE`, 3 s,
//! without writes). So:
//!
//! - A connection the kernel opens (its SYN) lands on `reciprocal_scale(hash, n)`;
//!   the shard of that queue answers on the same queue, which records the flow there:
//!   every shard listens on the same ports, and the one that got the SYN owns the flow.
//! - A connection a shard opens: its SYN is written on the shard's queue, but
//!   `tun_get_user` records the flow only *after* handing the packet to the stack
//!   (`tun_rx_batched`, `netif_receive_skb` in the writer's context), and the
//!   kernel's SYN-ACK is sent from there, synchronously: it is steered by the hash
//!   alone and lands on a random queue (observed in `tests/shard.rs`: with two queues
//!   about half the SYN-ACKs went to the other shard, whose stack answered with a RST
//!   written on *its* queue, which moved the flow there for good). Every packet after
//!   the SYN-ACK finds the learned entry. So each shard opens connections from its own
//!   slice of the ephemeral ports ([`port_range`]), and a shard that reads a packet
//!   for a port of another shard's slice hands it over ([`Shards::handed`] counts
//!   them), as sharded stacks forward packets their NIC steered to the wrong core.
//!   Choosing a source port whose hash picks the shard's queue (what RFS-aware stacks
//!   do with a NIC's Toeplitz key) is impossible from user space: the hash is keyed
//!   by a per-boot secret.
//! - A flow idle for more than 3 s on lowtide's side loses its entry and falls back
//!   to the hash; lowtide's next packet on it (an ACK, a keepalive) restores it.

use crate::clock::Sleeper;
use crate::link::Frame;
use crate::runtime::{Handoff, Runtime};
use lowtide_wire::tcp::four_tuple_apart;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest sleep of a shard thread with nothing due (it checks for the stop).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// One shard: its runtime and its mailbox.
struct Cell {
    rt: Mutex<Runtime>,
    mail: Arc<Mailbox>,
}

/// What other threads hand a shard: packets that arrived on another queue for one of
/// its connections, and wakeups (an eventfd its thread sleeps on).
struct Mailbox {
    inbox: Mutex<Vec<Frame>>,
    wake: OwnedFd,
    /// Packets handed in so far.
    handed: AtomicU64,
    /// Set by whoever gave the shard work (socket calls, packets): its thread turns
    /// once more before it sleeps.
    dirty: AtomicBool,
    /// The thread is (about to be) asleep: work must come with an eventfd write.
    sleeping: AtomicBool,
    /// The shard's ephemeral ports (its stack's `net.ipv4.ip_local_port_range`).
    ports: [u16; 2],
}

impl Mailbox {
    /// Gives the shard's thread work: it sees `dirty` before it sleeps, or it is
    /// asleep and the eventfd wakes it (both flags sequentially consistent, so one of
    /// the two always happens). A busy thread costs no system call.
    fn wake(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        if !self.sleeping.load(Ordering::SeqCst) {
            return;
        }
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a live u64 to our eventfd. A full counter
        // (EAGAIN) means the thread is woken anyway.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// Shard `me`'s [`Handoff`]: a TCP packet to a port in another shard's ephemeral
/// range belongs to a connection that shard opened (the SYN-ACK the kernel steered
/// before it learned the flow, see the module docs): it goes to that shard's inbox.
fn handoff(me: usize, mail: Vec<Arc<Mailbox>>) -> Handoff {
    Box::new(move |frame: Frame| {
        let Ok((_, to)) = four_tuple_apart(&frame.data, frame.payload.len()) else {
            return Some(frame);
        };
        let port = to.port();
        let owner = mail
            .iter()
            .position(|m| (m.ports[0]..=m.ports[1]).contains(&port));
        match owner {
            Some(k) if k != me => {
                let m = &mail[k];
                lock(&m.inbox).push(frame);
                m.handed.fetch_add(1, Ordering::Relaxed);
                m.wake();
                None
            }
            _ => Some(frame),
        }
    })
}

/// What the shards share with the application thread.
struct Common {
    /// Bumped after every turn of a shard that moved packets: the application's
    /// sockets may have changed.
    progress: AtomicU64,
    /// The application waits in [`Shards::wait`]: progress must be signalled.
    waiting: AtomicBool,
    /// Held to signal `changed`, and by the waiting application.
    gate: Mutex<()>,
    changed: Condvar,
    stop: AtomicBool,
}

/// The running shards (see the module docs).
pub struct Shards {
    cells: Vec<Arc<Cell>>,
    common: Arc<Common>,
    threads: Vec<JoinHandle<io::Result<()>>>,
}

impl Shards {
    /// Starts one thread per runtime (one per queue of the device), each driving its
    /// runtime until [`Shards::stop`].
    pub fn start(runtimes: Vec<Runtime>) -> io::Result<Shards> {
        let common = Arc::new(Common {
            progress: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            gate: Mutex::new(()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let mut mail = Vec::new();
        for rt in &runtimes {
            mail.push(Arc::new(Mailbox {
                inbox: Mutex::new(Vec::new()),
                wake: eventfd()?,
                handed: AtomicU64::new(0),
                dirty: AtomicBool::new(false),
                sleeping: AtomicBool::new(false),
                ports: rt.stack_ref().config().ip_local_port_range,
            }));
        }
        let mut shards = Shards {
            cells: Vec::new(),
            common,
            threads: Vec::new(),
        };
        for (i, mut rt) in runtimes.into_iter().enumerate() {
            if mail.len() > 1 {
                rt.set_handoff(handoff(i, mail.clone()));
            }
            let cell = Arc::new(Cell {
                rt: Mutex::new(rt),
                mail: mail[i].clone(),
            });
            let (c, common) = (cell.clone(), shards.common.clone());
            let t = std::thread::Builder::new()
                .name(format!("lowtide-shard{i}"))
                .spawn(move || serve(&c, &common))?;
            shards.cells.push(cell);
            shards.threads.push(t);
        }
        Ok(shards)
    }

    /// Packets that arrived on another shard's queue and were handed to shard `k`.
    pub fn handed(&self, k: usize) -> u64 {
        self.cells[k].mail.handed.load(Ordering::Relaxed)
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Runs `f` on shard `k`'s runtime (its socket API, between two of its turns),
    /// then wakes the shard's thread so that what `f` queued goes out at once.
    pub fn with<R>(&self, k: usize, f: impl FnOnce(&mut Runtime) -> R) -> R {
        let cell = &self.cells[k];
        let r = f(&mut lock(&cell.rt));
        cell.mail.wake();
        r
    }

    /// [`Shards::with`] without waking the shard: for what sends nothing (draining
    /// its events).
    pub fn peek_mut<R>(&self, k: usize, f: impl FnOnce(&mut Runtime) -> R) -> R {
        f(&mut lock(&self.cells[k].rt))
    }

    /// [`Shards::with`] without waking the shard: for reads of its state.
    pub fn peek<R>(&self, k: usize, f: impl FnOnce(&Runtime) -> R) -> R {
        f(&lock(&self.cells[k].rt))
    }

    /// The progress count now: give it to [`Shards::wait`] after looking at the
    /// sockets, so that progress in between is not slept through.
    pub fn progress(&self) -> u64 {
        self.common.progress.load(Ordering::SeqCst)
    }

    /// Waits until some shard moved packets since `seen` (from [`Shards::progress`]),
    /// or `timeout`.
    pub fn wait(&self, seen: u64, timeout: Duration) {
        let c = &self.common;
        let g = lock(&c.gate);
        // Before the check: a shard that moves after it sees this and signals.
        c.waiting.store(true, Ordering::SeqCst);
        let still = |_: &mut ()| c.progress.load(Ordering::SeqCst) == seen;
        let _ = c.changed.wait_timeout_while(g, timeout, still);
        c.waiting.store(false, Ordering::SeqCst);
    }

    /// Stops the threads and gives the runtimes back (for their counters and
    /// capture files); the first error a thread met, if any.
    pub fn stop(self) -> io::Result<Vec<Runtime>> {
        self.common.stop.store(true, Ordering::Relaxed);
        for k in 0..self.cells.len() {
            self.with(k, |_| ());
        }
        let mut first_err = None;
        for t in self.threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("shard thread panicked")));
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let rts = self.cells.into_iter().map(|c| match Arc::try_unwrap(c) {
            Ok(c) => c.rt.into_inner().unwrap_or_else(|e| e.into_inner()),
            Err(_) => unreachable!("the threads that held the cells have ended"),
        });
        Ok(rts.collect())
    }
}

/// A shard's thread: turns its runtime (reading the device, running what is due)
/// without holding its lock while it waits, busy-polls for the runtime's
/// `busy_poll` after traffic, then sleeps on the device, its eventfd and the next
/// deadline.
fn serve(cell: &Cell, common: &Common) -> io::Result<()> {
    let (dev_fd, clock, busy_poll) = {
        let rt = lock(&cell.rt);
        (rt.device().as_raw_fd(), rt.clock(), rt.busy_poll())
    };
    let mut sleeper = Sleeper::new(clock, &[dev_fd, cell.mail.wake.as_raw_fd()])?;
    let mut busy_until = clock.now();
    while !common.stop.load(Ordering::Relaxed) {
        // Cleared before the turn: a wake after this point is seen by the sleep.
        cell.mail.dirty.store(false, Ordering::SeqCst);
        let handed = std::mem::take(&mut *lock(&cell.mail.inbox));
        let (moved, deadline) = {
            let mut rt = lock(&cell.rt);
            let before = rt.device_packets();
            for frame in handed {
                rt.receive_handed(frame);
            }
            rt.turn(None, Duration::ZERO)?;
            (rt.device_packets() != before, rt.poll_deadline())
        };
        let now = clock.now();
        if moved {
            common.progress.fetch_add(1, Ordering::SeqCst);
            if common.waiting.load(Ordering::SeqCst) {
                let _g = lock(&common.gate);
                common.changed.notify_all();
            }
            busy_until = now + busy_poll;
            continue;
        }
        if now < busy_until && deadline.is_none_or(|d| d > now) {
            std::hint::spin_loop();
            continue;
        }
        let mail = &cell.mail;
        mail.sleeping.store(true, Ordering::SeqCst);
        if mail.dirty.load(Ordering::SeqCst) {
            mail.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        let limit = now + IDLE_WAIT;
        let slept = sleeper.sleep_until(deadline.map_or(limit, |d| d.min(limit)));
        mail.sleeping.store(false, Ordering::SeqCst);
        // Cleared after the sleep: a write while awake only makes a later sleep return
        // at once, and the work it announced is in `dirty`.
        drain(&mail.wake);
        slept?;
        busy_until = clock.now() + busy_poll;
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicked shard thread leaves its runtime as it was; the others go on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A non-blocking, close-on-exec eventfd.
fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2); the descriptor is owned by us.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Resets an eventfd's counter.
fn drain(fd: &OwnedFd) {
    let mut v: u64 = 0;
    // SAFETY: an 8-byte read into a live u64; EAGAIN (already zero) is fine.
    unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
}

/// Shard `k` of `n`'s slice of the ephemeral port range `[lo, hi]` (inclusive, as
/// `net.ipv4.ip_local_port_range`): consecutive, disjoint slices that together cover
/// the range (the last takes the remainder).
pub fn port_range([lo, hi]: [u16; 2], k: usize, n: usize) -> [u16; 2] {
    let (lo32, span) = (u32::from(lo), u32::from(hi.max(lo) - lo) + 1);
    let (k, n) = (k as u32, (n as u32).clamp(1, span));
    let k = k.min(n - 1);
    let start = lo32 + span * k / n;
    let end = lo32 + span * (k + 1) / n - 1;
    [start as u16, end as u16]
}

#[cfg(test)]
mod tests {
    use super::port_range;

    #[test]
    fn port_slices_cover_the_range_without_overlap() {
        let r = [32768, 60999];
        assert_eq!(port_range(r, 0, 1), r);
        assert_eq!(port_range(r, 0, 2), [32768, 46883]);
        assert_eq!(port_range(r, 1, 2), [46884, 60999]);
        for n in [3, 7, 256] {
            let mut next = 32768u32;
            for k in 0..n {
                let [a, b] = port_range(r, k, n);
                assert_eq!(
                    u32::from(a),
                    next,
                    "slice {k} of {n} starts where the last ended"
                );
                assert!(b >= a);
                next = u32::from(b) + 1;
            }
            assert_eq!(next, 61000);
        }
        assert_eq!(
            port_range([5, 5], 1, 2),
            [5, 5],
            "more shards than ports: they share"
        );
    }
}

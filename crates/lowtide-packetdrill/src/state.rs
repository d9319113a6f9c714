//! The library's state: the socket layer, the virtual clock, the packets for
//! packetdrill, and the bookkeeping that lets calls block on a condvar.

use crate::device::DeviceDir;
use crate::procnet::ProcNetDir;
use crate::sysctl::SysctlDir;
use lowtide::posix::{errno, Host};
use lowtide::tcp::skbuff::RxAlloc;
use lowtide::{Config, Instant, Stack, Transmit};
use lowtide_sim::qdisc::fq::{Fq, FqConfig};
use lowtide_sim::qdisc::{NetXmit, Qdisc, Skb};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::Duration;

/// Wall-clock bound on waiting for a woken thread: a safety net, never reached when
/// packetdrill behaves as documented.
const HOLD_LIMIT: Duration = Duration::from_millis(200);
/// Real time a call blocked with a deadline sleeps before it looks whether every
/// other thread is idle (see [`Shared::advance_if_idle`]).
const IDLE_CHECK: Duration = Duration::from_millis(10);
/// packetdrill's read buffer per packet (`PACKET_READ_BYTES` in its packet.h).
const PACKET_READ_BYTES: usize = 64 * 1024;
/// The first descriptor the library hands out (below `FD_SETSIZE`).
pub const LIVE_FD_BASE: i32 = 1000;
/// `gettimeofday` of virtual time zero (2026-01-01), so times look like real ones.
pub const EPOCH_US: u64 = 1_767_225_600_000_000;

/// Settings from `--so_flags`.
#[derive(Debug, Clone)]
pub struct Flags {
    /// Our address.
    pub local_ip: IpAddr,
    /// packetdrill's address.
    pub remote_ip: IpAddr,
    /// The sysctl directory.
    pub sysctl_dir: Option<std::path::PathBuf>,
    /// Where to report unknown or rejected settings.
    pub report: Option<std::path::PathBuf>,
    /// The device directory (`device.rs`).
    pub device_dir: Option<std::path::PathBuf>,
    /// Where to keep `/proc/net/tcp` and `tcp6` (`procnet.rs`).
    pub proc_net_dir: Option<std::path::PathBuf>,
}

impl Flags {
    /// Parses whitespace-separated `key=value` pairs; unknown keys are returned.
    pub fn parse(s: Option<&str>) -> (Flags, Vec<String>) {
        let mut f = Flags {
            local_ip: IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1)),
            remote_ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            sysctl_dir: None,
            report: None,
            device_dir: None,
            proc_net_dir: None,
        };
        let mut bad = Vec::new();
        for kv in s.unwrap_or("").split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "local_ip" if v.parse::<IpAddr>().is_ok() => {
                    f.local_ip = v.parse().expect("checked")
                }
                "remote_ip" if v.parse::<IpAddr>().is_ok() => {
                    f.remote_ip = v.parse().expect("checked")
                }
                "sysctl_dir" if !v.is_empty() => f.sysctl_dir = Some(v.into()),
                "report" if !v.is_empty() => f.report = Some(v.into()),
                "device_dir" if !v.is_empty() => f.device_dir = Some(v.into()),
                "proc_net_dir" if !v.is_empty() => f.proc_net_dir = Some(v.into()),
                _ => bad.push(kv.to_string()),
            }
        }
        (f, bad)
    }
}

/// A thread waiting in a blocking call.
#[derive(Debug)]
struct Blocked {
    /// Virtual time at which its call gives up (poll/epoll timeouts).
    deadline: Option<u64>,
    /// Woken and not yet re-checked its condition: clock advances wait for it.
    recheck: bool,
}

/// Everything behind the mutex.
pub struct State {
    pub host: Host,
    /// Virtual microseconds since the start.
    pub now_us: u64,
    /// Packets the stack sent, with their virtual send time.
    pub out: VecDeque<(Vec<u8>, u64)>,
    pub sysctl: SysctlDir,
    pub device: DeviceDir,
    pub proc_net: ProcNetDir,
    pub flags: Flags,
    /// tun0's root qdisc when it is fq (`tc qdisc replace dev tun0 root fq`, or
    /// `net.core.default_qdisc=fq`): Linux's sch_fq, which holds each packet until
    /// its EDT time and paces the sockets it sees (`SK_PACING_FQ`).
    fq: Option<Fq<Transmit>>,
    blocked: HashMap<u64, Blocked>,
    next_block_id: u64,
    /// Threads that returned from a blocking call and have not read the clock yet.
    owed: HashSet<ThreadId>,
    /// Threads that read the clock after a blocking call returned, by OS thread id,
    /// until they are seen asleep again (see [`Shared::settle`]).
    settling: HashMap<ThreadId, libc::pid_t>,
    /// The OS threads that read this instance's clock (packetdrill's main thread
    /// and its system call thread).
    callers: HashSet<libc::pid_t>,
}

/// The library instance packetdrill holds as `userdata`.
pub struct Shared {
    pub m: Mutex<State>,
    pub cv: Condvar,
}

// packetdrill calls in from two threads: the state must be shareable.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Shared>();
};

/// A blocking call's verdict on one attempt.
pub enum Attempt<T> {
    /// Finished (success or error).
    Done(Result<T, i32>),
    /// Must wait for a wakeup.
    Wait,
}

impl Shared {
    /// A fresh stack with Linux's defaults and `flags`.
    pub fn new(flags: Flags) -> Shared {
        // packetdrill's device is a tun: each packet it writes is one linear skb.
        let cfg = Config {
            rx_alloc: RxAlloc::Tun,
            ..Config::default()
        };
        let mut stack = Stack::new(cfg, 1);
        stack.add_address(flags.local_ip);
        // packetdrill's device is a tun, which orphans skbs at transmit.
        stack.set_tx_orphan(true);
        // ... and copies their page fragments (skb_orphan_frags_rx): MSG_ZEROCOPY
        // data it carries completes SO_EE_CODE_ZEROCOPY_COPIED.
        stack.set_tx_orphan_frags(true);
        // The script's device, tun0 (ifindex 2 after lo in its namespace), is lowtide.
        stack.set_device_name("tun0");
        let sysctl = SysctlDir::new(flags.sysctl_dir.clone(), flags.report.clone());
        let device = DeviceDir::new(flags.device_dir.clone());
        let proc_net = ProcNetDir::new(flags.proc_net_dir.clone());
        let mut host = Host::new(stack);
        // packetdrill's open() of a file is the kernel's, in the same process: its
        // descriptors are small, so lowtide's start far above them.
        host.set_fd_base(LIVE_FD_BASE);
        // Timestamps in cmsgs read the same clock as gettimeofday.
        host.set_realtime_zero(Duration::from_micros(EPOCH_US));
        let mut st = State {
            host,
            now_us: 0,
            out: VecDeque::new(),
            sysctl,
            device,
            proc_net,
            flags,
            fq: None,
            blocked: HashMap::new(),
            next_block_id: 0,
            owed: HashSet::new(),
            settling: HashMap::new(),
            callers: HashSet::new(),
        };
        st.publish_proc_net();
        Shared {
            m: Mutex::new(st),
            cv: Condvar::new(),
        }
    }

    /// Locks the state (a poisoned lock is still usable: every call is atomic).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Entry of every socket call: apply sysctl changes, run due timers.
    pub fn enter(&self) -> MutexGuard<'_, State> {
        let mut st = self.lock();
        st.catch_up();
        st
    }

    /// Wakes every blocked thread to re-check its condition.
    pub fn wake_all(&self, st: &mut State) {
        for b in st.blocked.values_mut() {
            b.recheck = true;
        }
        self.cv.notify_all();
    }

    /// Waits (bounded) until no woken thread is pending and every returned one has
    /// read the clock: only then may the clock move.
    pub fn hold<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let me = std::thread::current().id();
        let start = std::time::Instant::now();
        while (st.blocked.values().any(|b| b.recheck) || st.owed.iter().any(|t| *t != me))
            && start.elapsed() < HOLD_LIMIT
        {
            st = self
                .cv
                .wait_timeout(st, HOLD_LIMIT)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        self.settle(st, start)
    }

    /// Waits (bounded) until every thread that returned from a blocking call and read
    /// the clock sleeps again. packetdrill's syscall thread reads the clock at once
    /// (`end_syscall`) but only then takes packetdrill's own lock to record the
    /// result (e.g. `accept()`'s new fd as the socket under test); if the clock
    /// moved before that, the main thread's next event could run first and see the
    /// old state. The thread sleeps again (`/proc/self/task/TID/stat` state `S`)
    /// once it waits for its next call, or on packetdrill's lock while the main
    /// thread holds it: either way the main thread may go on.
    fn settle<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        start: std::time::Instant,
    ) -> MutexGuard<'a, State> {
        let me = std::thread::current().id();
        loop {
            let tids: Vec<_> = st
                .settling
                .iter()
                .filter(|(t, _)| **t != me)
                .map(|(t, tid)| (*t, *tid))
                .collect();
            if tids.is_empty() || start.elapsed() >= HOLD_LIMIT {
                return st;
            }
            // The settling thread may need this lock on its way to sleep.
            drop(st);
            let asleep: Vec<_> = tids
                .into_iter()
                .filter(|(_, tid)| thread_asleep(*tid))
                .collect();
            if asleep.is_empty() {
                std::thread::yield_now();
            }
            st = self.lock();
            for (t, _) in asleep {
                st.settling.remove(&t);
            }
        }
    }

    /// Moves the clock to the nearest deadline of a blocked call (timers firing on
    /// the way) when every other thread that reads the clock sleeps, twice a
    /// moment apart, and nothing changed meanwhile; or, when no other thread reads
    /// it, to that deadline or the stack's next timer.
    /// packetdrill starts a blocking call right after another one by waiting in
    /// real time (up to 1 s, `await_idle_thread`) for the first to end, reading no
    /// clock, and runs a call expected to return at once on its main thread: on
    /// the kernel real time passes and the call's timeout (`SO_RCVTIMEO`, a
    /// poll's) or a timer's work (an error, data: a timer runs after its expiry)
    /// ends it; here only this can.
    fn advance_if_idle<'a>(&'a self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let me = os_tid();
        let others: Vec<_> = st.callers.iter().copied().filter(|t| *t != me).collect();
        let stamp = st.now_us;
        drop(st);
        let idle = || others.iter().all(|t| thread_asleep(*t));
        // With no other thread reading the clock, this blocked call is the
        // script's own (packetdrill runs a call without `...` on its main thread):
        // only this can move the clock, to a deadline or the next timer.
        let alone = others.is_empty();
        let quiet = alone
            || idle() && {
                std::thread::sleep(Duration::from_millis(2));
                idle()
            };
        let mut st = self.lock();
        let busy = st.blocked.values().any(|b| b.recheck) || !st.owed.is_empty();
        if !quiet || busy || st.now_us != stamp {
            return st;
        }
        let deadline = st.blocked.values().filter_map(|b| b.deadline).min();
        let timer = match alone {
            true => [
                st.host.poll_timeout().map(|t| t.as_micros()),
                st.fq_wake_us(),
            ],
            false => [None, None],
        };
        if let Some(d) = timer.into_iter().chain([deadline]).flatten().min() {
            let d = d.max(st.now_us);
            st.advance_to(d);
            self.wake_all(&mut st);
        }
        st
    }

    /// Whether a thread sleeps in a blocking call on this instance.
    pub fn has_blocked_threads(&self) -> bool {
        !self.lock().blocked.is_empty()
    }

    /// `gettimeofday`: the clock moves 1 us per read (packetdrill spins on it).
    pub fn gettimeofday(&self) -> u64 {
        let mut st = self.lock();
        st.callers.insert(os_tid());
        let me = std::thread::current().id();
        if st.owed.remove(&me) {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            st.settling.insert(me, tid);
            self.cv.notify_all();
            return EPOCH_US + st.now_us;
        }
        let t = st.now_us + 1;
        st.advance_to(t);
        self.wake_all(&mut st);
        EPOCH_US + st.now_us
    }

    /// `usleep`: virtual time passes, timers fire on the way. With a call
    /// blocked, the clock stops at each timer so that the call can see its work
    /// (an error, data) when it happens, as real time on the kernel lets it.
    pub fn usleep(&self, us: u64) {
        let st = self.enter();
        let mut st = self.hold(st);
        let t = st.now_us + us;
        loop {
            let stop = match st.blocked.is_empty() {
                true => t,
                false => st.next_timer_us().map_or(t, |n| n.clamp(st.now_us, t)),
            };
            st.advance_to(stop);
            self.wake_all(&mut st);
            if st.now_us >= t {
                break;
            }
            st = self.hold(st);
        }
    }

    /// `netdev_receive`: the next packet; with none queued, the clock jumps to the
    /// next timer (or a blocked call's deadline). `None` when nothing is left.
    pub fn next_packet(&self) -> Option<(Vec<u8>, u64)> {
        let mut st = self.enter();
        loop {
            if let Some(p) = st.out.pop_front() {
                return Some(p);
            }
            st = self.hold(st);
            // What a woken thread sent while we waited (its write ran in a call of
            // its own), before the clock may move on.
            st.drain_transmit();
            if let Some(p) = st.out.pop_front() {
                return Some(p);
            }
            let timer = st.host.poll_timeout().map(|t| t.as_micros().max(st.now_us));
            let timer = [timer, st.fq_wake_us()].into_iter().flatten().min();
            let deadline = st.blocked.values().filter_map(|b| b.deadline).min();
            let next = match (timer, deadline) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b)?,
            };
            let next = next.max(st.now_us);
            st.advance_to(next);
            self.wake_all(&mut st);
        }
    }

    /// Runs a call that may block: `attempt` is retried after every wakeup until
    /// it is done, the socket is non-blocking, or `timeout_us` (virtual us) has
    /// passed since the call began; then `on_timeout` answers, with the state (a
    /// read that times out returns what is there).
    pub fn blocking<T>(
        &self,
        nonblock: bool,
        timeout_us: Option<u64>,
        mut attempt: impl FnMut(&mut State) -> Attempt<T>,
        on_timeout: impl FnOnce(&mut State) -> Result<T, i32>,
    ) -> Result<T, i32> {
        let mut st = self.enter();
        let deadline = timeout_us.map(|t| st.now_us.saturating_add(t));
        let mut id = None;
        let r = loop {
            let a = attempt(&mut st);
            if let Some(b) = id.and_then(|i| st.blocked.get_mut(&i)) {
                b.recheck = false;
            }
            match a {
                Attempt::Done(r) => break r,
                Attempt::Wait if nonblock => break Err(errno::EAGAIN),
                Attempt::Wait => {}
            }
            if deadline.is_some_and(|d| st.now_us >= d) {
                break on_timeout(&mut st);
            }
            let i = *id.get_or_insert_with(|| {
                st.next_block_id += 1;
                st.next_block_id
            });
            st.blocked.entry(i).or_insert(Blocked {
                deadline,
                recheck: false,
            });
            // The clock may move now that this thread has re-checked (hold()).
            self.cv.notify_all();
            // Sleep until a wakeup is addressed to this thread; spurious or foreign
            // wakeups do not make it retry (so two blocked threads never ping-pong).
            // Look now and then whether only the clock can end the wait (a
            // deadline, or a timer that ends it).
            loop {
                st = {
                    let (g, w) =
                        (self.cv.wait_timeout(st, IDLE_CHECK)).unwrap_or_else(|e| e.into_inner());
                    match w.timed_out() {
                        true => self.advance_if_idle(g),
                        false => g,
                    }
                };
                if st.blocked.get(&i).is_none_or(|b| b.recheck) {
                    break;
                }
            }
        };
        if let Some(i) = id {
            st.blocked.remove(&i);
            st.owed.insert(std::thread::current().id());
        }
        // What this call did may unblock others.
        self.wake_all(&mut st);
        r
    }
}

/// This thread's OS id (cached: packetdrill reads the clock in a loop).
fn os_tid() -> libc::pid_t {
    thread_local!(static TID: std::cell::Cell<libc::pid_t> = const { std::cell::Cell::new(0) });
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::gettid() });
        }
        t.get()
    })
}

/// Whether OS thread `tid` of this process sleeps (state `S` in
/// `/proc/self/task/TID/stat`), as packetdrill itself tells a blocked call; a thread
/// that is gone or unreadable counts as asleep.
fn thread_asleep(tid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return true;
    };
    // The state follows the command name in parentheses, which may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .is_none_or(|c| c != 'R')
}

impl State {
    /// Virtual time as the engine sees it.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.now_us * 1000)
    }

    /// Applies sysctl changes and runs the timers due now.
    pub fn catch_up(&mut self) {
        let now = self.now();
        self.sysctl.rescan(&mut self.host, now);
        self.device.rescan(&mut self.host, now, &mut self.sysctl);
        self.set_root_qdisc();
        let t = self.now_us;
        self.advance_to(t);
    }

    /// Puts fq at tun0's root when `net.core.default_qdisc` became `fq` (the tc
    /// shim writes a root qdisc's kind there), or takes it away, sending what it
    /// held; sockets created from then on know (`Stack::set_device_fq`).
    fn set_root_qdisc(&mut self) {
        let fq = self.host.stack().config().default_qdisc == "fq";
        if fq == self.fq.is_some() {
            return;
        }
        self.host.stack_mut().set_device_fq(Some(fq));
        match fq {
            true => {
                let psched_mtu = self.host.stack().config().mtu + 14;
                self.fq = Some(Fq::new(FqConfig::for_mtu(psched_mtu)));
            }
            false => {
                self.drain_transmit();
                let held = std::mem::take(&mut self.fq);
                let mut dropped = Vec::new();
                let mut q = held.expect("fq is set");
                let never = u64::MAX / 2;
                while let Some(skb) = q.dequeue(never, &mut dropped) {
                    self.emit(skb.item);
                }
            }
        }
    }

    /// When fq's watchdog fires: its next departure time, in the clock's whole
    /// microseconds.
    fn fq_wake_us(&self) -> Option<u64> {
        (self.fq.as_ref()?.next_ready()).map(|ns| ns.div_ceil(1000))
    }

    /// The next time a timer (the stack's, or fq's watchdog) needs the clock.
    fn next_timer_us(&mut self) -> Option<u64> {
        let timer = self.host.poll_timeout().map(|a| a.as_micros());
        let wake = self.fq_wake_us().filter(|&w| w > self.now_us);
        [timer, wake].into_iter().flatten().min()
    }

    /// Moves the clock to `t` (never back), firing each timer (and fq's watchdog)
    /// at its own time.
    pub fn advance_to(&mut self, t: u64) {
        loop {
            self.drain_transmit();
            let timer = self.host.poll_timeout();
            match self.next_timer_us() {
                Some(at) if at <= t => {
                    self.now_us = self.now_us.max(at);
                    if let Some(timer) = timer.filter(|a| a.as_micros() <= at) {
                        let now = self.now();
                        self.host.handle_timeout(now.max(timer));
                    }
                }
                _ => break,
            }
        }
        self.now_us = self.now_us.max(t);
        self.drain_transmit();
        self.sysctl.publish_counters(self.host.stack().counters());
    }

    /// Rewrites the `/proc/net/tcp(6)` view if it changed (after every call:
    /// packetdrill's clock reads and sleeps are where timers fire).
    pub fn publish_proc_net(&mut self) {
        let now = self.now();
        self.proc_net.publish(&self.host, now);
    }

    /// Moves what the stack sent to packetdrill's queue with complete checksums:
    /// whole, as Linux's tun with TSO on hands a GSO packet to its reader (so the
    /// script sees the stack's skb boundaries), or cut into wire segments once a
    /// script turned segmentation offload off (or the packet would not fit
    /// packetdrill's 64 KB read buffer). The device completes each at once, or drops
    /// each when its queue holds nothing (`pfifo limit 0`).
    pub fn drain_transmit(&mut self) {
        let now = self.now();
        while let Some(tx) = self.host.poll_transmit(now) {
            if self.device.drop_all {
                self.host.handle_tx_dropped(now, tx.token);
                continue;
            }
            match self.fq.as_mut() {
                Some(q) => {
                    let mut dropped = Vec::new();
                    if q.enqueue(now.as_nanos(), fq_skb(tx, now), &mut dropped) == NetXmit::Drop {
                        for d in dropped {
                            self.host.handle_tx_dropped(now, d.item.token);
                        }
                    }
                }
                None => self.emit(tx),
            }
        }
        let mut dropped = Vec::new();
        while let Some(skb) =
            (self.fq.as_mut()).and_then(|q| q.dequeue(now.as_nanos(), &mut dropped))
        {
            self.emit(skb.item);
        }
    }

    /// Hands `tx` to packetdrill and completes it.
    fn emit(&mut self, mut tx: Transmit) {
        let (now, t) = (self.now(), self.now_us);
        if trace_tx() {
            let head = &tx.packet[..tx.packet.len().min(TRACE_BYTES)];
            eprintln!(
                "lowtide-packetdrill: tx at {t} us, {} bytes, gso_size {}: {head:02x?}",
                tx.packet.len(),
                tx.gso_size
            );
        }
        let out = &mut self.out;
        let whole = !self.device.segment && tx.packet.len() <= PACKET_READ_BYTES;
        if whole && lowtide_wire::gso::finish_checksum(&mut tx.packet).is_ok() {
            out.push_back((std::mem::take(&mut tx.packet), t));
        } else {
            let _ = lowtide_wire::gso::segment(&tx.packet, tx.gso(), |seg| out.push_back((seg, t)));
        }
        self.host.handle_tx_complete(now, tx.token);
    }
}

/// `tx` as fq sees it: its socket (none for a SYN-ACK, which a listener's request
/// sends, nor for a reset or TIME-WAIT's ACK: fq files those under the hash of
/// their ports), its EDT time.
fn fq_skb(tx: Transmit, now: Instant) -> Skb<Transmit> {
    let syn_ack = lowtide_sim::qdisc::tcp_flags(&tx.packet).is_some_and(|f| f & 0x12 == 0x12);
    let sk = tx.token.socket().filter(|_| !syn_ack);
    let ports = lowtide_wire::tcp::four_tuple(&tx.packet).ok();
    let tstamp = tx.tstamp.as_nanos();
    let mut skb = Skb::new(tx, now.as_nanos());
    skb.sk = sk;
    skb.hash = ports.map_or(0, |(s, d)| (s.port() as u32) << 16 | d.port() as u32);
    skb.tstamp = tstamp;
    skb
}

/// How much of a packet `LOWTIDE_PD_TRACE` prints: every header of a TCP packet
/// with full options, over IPv6 too (40 + 60 bytes), and a little payload.
const TRACE_BYTES: usize = 128;

/// `LOWTIDE_PD_TRACE=1`: every packet lowtide hands packetdrill is printed on stderr
/// (size, GSO size, the first [`TRACE_BYTES`] bytes), for debugging a script.
fn trace_tx() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LOWTIDE_PD_TRACE").is_some_and(|v| v == "1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowtide::posix::consts::*;
    use std::net::SocketAddr;
    use std::sync::Arc;

    #[test]
    fn flags_default_and_override() {
        let (f, bad) = Flags::parse(None);
        assert_eq!(f.local_ip.to_string(), "192.168.0.1");
        assert_eq!(f.remote_ip.to_string(), "192.0.2.1");
        assert!(f.sysctl_dir.is_none() && bad.is_empty());
        let (f, bad) = Flags::parse(Some("local_ip=10.0.0.1 sysctl_dir=/x report=/r bogus=1"));
        assert_eq!(f.local_ip.to_string(), "10.0.0.1");
        assert_eq!(f.sysctl_dir.as_deref(), Some(std::path::Path::new("/x")));
        assert_eq!(bad, vec!["bogus=1".to_string()]);
    }

    #[test]
    fn clock_moves_one_microsecond_per_read_and_idle_device_is_empty() {
        let sh = Shared::new(Flags::parse(None).0);
        let a = sh.gettimeofday();
        let b = sh.gettimeofday();
        assert_eq!(b - a, 1);
        sh.usleep(1000);
        assert_eq!(sh.gettimeofday() - b, 1001);
        // No socket, no timer: netdev_receive reports nothing (len = 0).
        assert!(sh.next_packet().is_none());
    }

    /// Moves packets from the library to `peer` and back until both are quiet.
    fn exchange(sh: &Shared, peer: &mut Host) {
        for _ in 0..20 {
            let mut moved = false;
            while let Some(tx) = peer.poll_transmit(Instant::ZERO) {
                let mut segs = Vec::new();
                lowtide_wire::gso::segment(&tx.packet, tx.gso(), |s| segs.push(s)).unwrap();
                peer.handle_tx_complete(Instant::ZERO, tx.token);
                let mut st = sh.enter();
                for s in segs {
                    let now = st.now();
                    st.host.handle_packet(now, &s, lowtide::RxChecksum::Verify);
                }
                st.drain_transmit();
                sh.wake_all(&mut st);
                moved = true;
            }
            loop {
                let p = sh.lock().out.pop_front();
                let Some((p, _)) = p else { break };
                peer.handle_packet(Instant::ZERO, &p, lowtide::RxChecksum::Verify);
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    /// A listener on 192.168.0.1:8080 in `sh`, a peer connected to it, and the
    /// accepted descriptor.
    fn accepted(sh: &Shared) -> (Host, i32) {
        let l = {
            let mut st = sh.enter();
            let l = st.host.socket(AF_INET, SOCK_STREAM, 0).unwrap();
            let at = "192.168.0.1:8080".parse().unwrap();
            st.host.bind(l, at).unwrap();
            st.host.listen(l, 4).unwrap();
            l
        };
        let mut peer = {
            let mut s = Stack::new(Config::default(), 7);
            s.add_address("192.0.2.1".parse().unwrap());
            Host::new(s)
        };
        let c = peer.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let _ = peer.connect(Instant::ZERO, c, "192.168.0.1:8080".parse().unwrap());
        exchange(sh, &mut peer);
        let fd = sh.enter().host.accept(l).unwrap().0;
        (peer, fd)
    }

    #[test]
    fn device_dir_sets_the_mtu_and_a_drop_all_queue() {
        let dir = std::env::temp_dir().join(format!("lowtide-pd-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mtu"), "1400\n").unwrap();
        let (mut flags, _) = Flags::parse(None);
        flags.device_dir = Some(dir.clone());
        let sh = Shared::new(flags);
        let (_peer, fd) = accepted(&sh);
        let info = |sh: &Shared| {
            let st = sh.enter();
            let now = st.now();
            st.host.tcp_info(now, fd).unwrap()
        };
        // The SYN-ACK offered the device's MSS (tcp_v4: MTU - 40; tcpi_advmss less the
        // timestamps' 12 bytes).
        assert_eq!(info(&sh).advmss, 1348);
        assert_eq!(info(&sh).pmtu, 1400);
        // A larger device MTU re-syncs the connection (tcp_sync_mss), not its advmss,
        // at its next tcp_current_mss (a send), as Linux 6.18; not at once.
        let send = |sh: &Shared| {
            let mut st = sh.enter();
            let now = st.now();
            assert_eq!(st.host.send(now, fd, &[7; 100], 0), Ok(100));
            st.drain_transmit();
            st.out.clear();
        };
        std::fs::write(dir.join("mtu"), "1500\n").unwrap();
        assert_eq!(info(&sh).pmtu, 1400);
        send(&sh);
        assert_eq!(info(&sh).pmtu, 1500);
        assert_eq!(info(&sh).advmss, 1348);
        // An impossible MTU is refused and changes nothing.
        std::fs::write(dir.join("mtu"), "20\n").unwrap();
        send(&sh);
        assert_eq!(info(&sh).pmtu, 1500);
        // pfifo limit 0: what the stack sends never reaches packetdrill.
        std::fs::write(dir.join("tx_queue_limit"), "0\n").unwrap();
        {
            let mut st = sh.enter();
            let now = st.now();
            assert_eq!(st.host.send(now, fd, &[7; 100], 0), Ok(100));
            st.drain_transmit();
            assert!(st.out.is_empty(), "dropped by the device queue");
        }
        // A queue with room again: the dropped data goes out from the retry timer.
        std::fs::remove_file(dir.join("tx_queue_limit")).unwrap();
        sh.usleep(1_000_000);
        let sent: usize = sh.lock().out.iter().map(|(p, _)| p.len()).sum();
        assert!(sent >= 100 + 40, "sent {sent} bytes");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn gso_packets_reach_packetdrill_whole_until_tso_is_turned_off() {
        let dir = std::env::temp_dir().join(format!("lowtide-pd-gso-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut flags, _) = Flags::parse(None);
        flags.device_dir = Some(dir.clone());
        let sh = Shared::new(flags);
        let (_peer, fd) = accepted(&sh);
        let send = |sh: &Shared| {
            let mut st = sh.enter();
            let now = st.now();
            st.out.clear();
            assert_eq!(st.host.send(now, fd, &[7; 4000], 0), Ok(4000));
            st.drain_transmit();
            let lens: Vec<usize> = st.out.iter().map(|(p, _)| p.len()).collect();
            // Every packet's TCP checksum is complete.
            for (p, _) in &st.out {
                let ip = lowtide_wire::ip::IpRepr::parse(p, true).unwrap();
                assert!(lowtide_wire::checksum::verify_tcp(ip.src, ip.dst, &p[20..]));
            }
            lens
        };
        // tun with TSO on: one GSO packet, as Linux's tun hands it to packetdrill.
        assert!(send(&sh).iter().any(|&l| l > 1500));
        // ethtool -K tun0 tso off: wire segments.
        std::fs::write(dir.join("features"), "tso off\n").unwrap();
        sh.usleep(1);
        assert!(send(&sh).iter().all(|&l| l <= 1500));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What the thread of [`blocked_accept`] returns: accept()'s fd and peer.
    type Accepted = std::thread::JoinHandle<Result<(i32, SocketAddr), i32>>;

    /// A listener on 192.168.0.1:8080 and a thread blocked in `accept()` on it, which
    /// then runs `after` (packetdrill's bookkeeping after `end_syscall`).
    fn blocked_accept(
        after: impl FnOnce(&Shared) + Send + 'static,
    ) -> (Arc<Shared>, i32, Accepted) {
        let sh = Arc::new(Shared::new(Flags::parse(None).0));
        let l = {
            let mut st = sh.enter();
            let l = st.host.socket(AF_INET, SOCK_STREAM, 0).unwrap();
            st.host
                .bind(l, "192.168.0.1:8080".parse().unwrap())
                .unwrap();
            st.host.listen(l, 4).unwrap();
            l
        };
        let sh2 = Arc::clone(&sh);
        let t = std::thread::spawn(move || {
            let r = sh2.blocking(
                false,
                None,
                |st: &mut State| match st.host.accept(l) {
                    Err(lowtide::posix::Errno(errno::EAGAIN)) => Attempt::Wait,
                    r => Attempt::Done(r.map_err(|e| e.0)),
                },
                |_| Err(errno::EAGAIN),
            );
            // packetdrill reads the clock when a blocking call returns.
            sh2.gettimeofday();
            after(&sh2);
            r
        });
        (sh, l, t)
    }

    /// Connects a peer at 192.0.2.1 to the listener of [`blocked_accept`].
    fn connect_peer(sh: &Shared) {
        let mut peer = {
            let mut s = Stack::new(Config::default(), 7);
            s.add_address("192.0.2.1".parse().unwrap());
            Host::new(s)
        };
        let c = peer.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let to: SocketAddr = "192.168.0.1:8080".parse().unwrap();
        let _ = peer.connect(Instant::ZERO, c, to);
        exchange(sh, &mut peer);
    }

    #[test]
    fn blocking_accept_waits_on_the_condvar_until_the_handshake() {
        let (sh, l, t) = blocked_accept(|_| {});
        // The thread blocks: nothing to accept yet.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished());
        connect_peer(&sh);
        let (fd, from) = t.join().unwrap().unwrap();
        assert!(fd > l);
        assert_eq!(from.ip().to_string(), "192.0.2.1");
        // The woken thread has read the clock and exited: time may move on at once.
        let start = std::time::Instant::now();
        sh.usleep(10);
        assert!(start.elapsed() < HOLD_LIMIT);
    }

    /// A blocking call with a limit (SO_RCVTIMEO / SO_SNDTIMEO) gives up when the
    /// virtual clock reaches it: netdev_receive, with nothing sent and no timer,
    /// moves the clock to the deadline, and `on_timeout` answers with the state.
    #[test]
    fn a_blocking_call_gives_up_at_its_deadline() {
        let sh = Arc::new(Shared::new(Flags::parse(None).0));
        let start = sh.lock().now_us;
        let sh2 = Arc::clone(&sh);
        let t = std::thread::spawn(move || {
            let r = sh2.blocking(
                false,
                Some(100_000),
                |_| Attempt::<u64>::Wait,
                |st| Ok(st.now_us),
            );
            sh2.gettimeofday();
            r
        });
        while !sh.has_blocked_threads() {
            std::thread::yield_now();
        }
        assert!(sh.next_packet().is_none(), "nothing sent, no timer left");
        assert_eq!(t.join().unwrap(), Ok(start + 100_000));
    }

    /// The clock does not move while a thread that returned from a blocking call is
    /// still running (recording the call's result) after it read the clock: the CI
    /// flake of basic-non-tfo-listener.pkt, whose `%{ }%` 5 ms after a blocking
    /// accept() ran before packetdrill knew the accepted fd.
    #[test]
    fn usleep_waits_for_a_returned_thread_to_sleep_again() {
        let recorded = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r2 = Arc::clone(&recorded);
        let (sh, _, t) = blocked_accept(move |_| {
            // Busy (state R) as packetdrill is between end_syscall and its idle wait.
            let spin = std::time::Instant::now();
            while spin.elapsed() < std::time::Duration::from_millis(30) {
                std::hint::spin_loop();
            }
            r2.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        while !sh.has_blocked_threads() {
            std::thread::yield_now();
        }
        connect_peer(&sh);
        // usleep first waits for the woken thread to retry and read the clock (hold).
        sh.usleep(5000);
        assert!(recorded.load(std::sync::atomic::Ordering::SeqCst));
        t.join().unwrap().unwrap();
    }
}

//! lowtide's side of the real-path experiments: lowtide's stack on a TUN device in a
//! namespace, sending through its own emulated link (rate, delay, loss, pfifo queue:
//! `lowtide_tun::link`) to kernel receivers in the same namespace; and `lowtide link`
//! (the same path as a bridge) between two namespaces for kernel-to-kernel runs.

use super::kernel::{self, Send};
use lowtide::{Config, Instant, Mib, Shutdown, SocketError, SocketHandle, Stack, TcpState};
use lowtide_tun::bridge::Bridge;
use lowtide_tun::device::{configure, open_device};
use lowtide_tun::device::{Offload, TunDevice};
use lowtide_tun::link::PathConfig;
use lowtide_tun::netns::{self, NetNs};
use lowtide_tun::runtime::{Runtime, RuntimeConfig};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The kernel's side of lowtide's device, and lowtide's address.
const KERNEL_ADDR: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 1);
const LOWTIDE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);
const PORT: u16 = 5201;

/// One lowtide run: `flows` connections from lowtide to kernel receivers.
#[derive(Debug, Clone)]
pub struct StackRun {
    /// Connections.
    pub flows: usize,
    /// (lowtide -> kernel, kernel -> lowtide) path.
    pub path: (PathConfig, PathConfig),
    /// TSO/checksum offload on the device (off: the kernel gets single segments, the
    /// receiver has nothing to coalesce, as with GRO off).
    pub offload: Offload,
    /// lowtide's sysctls (`name=value`).
    pub sysctls: Vec<String>,
    /// The kernel receiver's namespace sysctls.
    pub kernel_sysctls: Vec<(String, String)>,
    /// What each flow sends.
    pub what: Send,
    /// `SO_SNDBUF` of each flow.
    pub sndbuf: Option<u32>,
    /// Interval of the device-queue time series.
    pub sample_every: Duration,
}

/// What a lowtide run measured.
#[derive(Debug, Clone, Default)]
pub struct StackOutcome {
    /// Bytes the kernel receivers read.
    pub received: u64,
    /// From every flow established to every flow closed by its peer (s).
    pub seconds: f64,
    /// Time-weighted mean and peak of the egress queue's backlog (bytes).
    pub queue_mean_bytes: f64,
    /// Peak backlog.
    pub queue_peak_bytes: u64,
    /// (s, backlog bytes) every `sample_every`.
    pub queue_series: Vec<(f64, u64)>,
    /// Time-weighted mean of the stack's TCP memory (4 KB pages) while sending.
    pub mean_pages: f64,
    /// lowtide's counters.
    pub ip_out_requests: u64,
    /// Segments sent.
    pub tcp_out_segs: u64,
    /// Packets received (ACKs).
    pub ip_in_receives: u64,
    /// Segments retransmitted.
    pub retrans_segs: u64,
    /// CPU time of the thread running the stack, the link and the device (s).
    pub cpu_user_s: f64,
    /// System time of the same thread (includes the kernel's work on its TUN writes).
    pub cpu_sys_s: f64,
    /// Writer wakeups (`tcp_info` wakeups: writable events) of all flows while they
    /// wrote.
    pub wakeups: u64,
    /// How long the flows wrote (s).
    pub write_seconds: f64,
    /// The first flow's `tcp_info` when it stopped writing, in words (`ss -ti` names).
    pub info_at_end: String,
}

/// The calling thread's (user, system) CPU seconds (`getrusage(RUSAGE_THREAD)`).
pub fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD on the calling thread, a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

/// Time-weighted mean and peak of a piecewise-constant value observed at times.
#[derive(Debug, Default)]
struct Gauge {
    last: Option<(u64, u64)>,
    area: f64,
    span: u64,
    peak: u64,
}

impl Gauge {
    fn observe(&mut self, t_ns: u64, v: u64) {
        if let Some((t0, v0)) = self.last {
            let dt = t_ns.saturating_sub(t0);
            self.area += v0 as f64 * dt as f64;
            self.span += dt;
        }
        self.peak = self.peak.max(v);
        self.last = Some((t_ns, v));
    }

    fn mean(&self) -> f64 {
        match self.span {
            0 => self.last.map_or(0.0, |(_, v)| v as f64),
            s => self.area / s as f64,
        }
    }
}

/// Runs `run`: a namespace with kernel receivers, lowtide's device in it, the flows.
pub fn run_stack(run: &StackRun, seed: u64) -> Result<StackOutcome, String> {
    let ns = kernel::namespace("ltt")?;
    for (k, v) in &run.kernel_sysctls {
        kernel::sysctl(&ns, k, v)?;
    }
    let sink = kernel::sink(&ns, PORT, run.flows)?;
    let dev = {
        let _in = netns::enter(ns.name()).map_err(|e| format!("entering {}: {e}", ns.name()))?;
        let name = netns::unique_name("ltx");
        open_device(&name, run.offload, Some((KERNEL_ADDR, 24)))?
    };
    let mut cfg = Config::default();
    for s in &run.sysctls {
        cfg.set_assignment(s).map_err(|e| e.to_string())?;
    }
    let busy_poll = Duration::from_micros(cfg.busy_poll_us.into());
    let mut stack = Stack::new(cfg, seed);
    let secret = lowtide_tun::random::os_secret().map_err(|e| format!("getrandom: {e}"))?;
    stack.set_secret(secret);
    stack.add_address(LOWTIDE_ADDR.into());
    let rc = RuntimeConfig {
        offload: run.offload,
        egress: run.path.0.clone(),
        ingress: run.path.1.clone(),
        seed,
        busy_poll,
    };
    let mut rt = Runtime::new(stack, dev, rc).map_err(|e| format!("runtime: {e}"))?;
    let out = drive(&mut rt, run);
    let received = sink
        .join()
        .map_err(|_| "kernel receiver panicked".to_string())?;
    let mut out = out?;
    out.received = received?;
    drop(ns);
    Ok(out)
}

/// One flow of lowtide's.
struct Flow {
    h: SocketHandle,
    sent: u64,
    shut: bool,
    closed: bool,
    wakeups: u64,
    info_at_end: String,
    /// The socket refused part of a write: wait for its writable event (EPOLLOUT), as
    /// a blocking writer sleeps in sk_stream_wait_memory until sk_stream_write_space.
    blocked: bool,
}

fn drive(rt: &mut Runtime, run: &StackRun) -> Result<StackOutcome, String> {
    let to = SocketAddr::new(KERNEL_ADDR.into(), PORT);
    let from = SocketAddr::new(LOWTIDE_ADDR.into(), 0);
    let mut flows = Vec::new();
    for _ in 0..run.flows {
        let now = rt.now();
        let h = (rt.stack().connect(now, from, to)).map_err(|e| format!("connect: {e}"))?;
        if let Some(b) = run.sndbuf {
            rt.stack()
                .socket(h)
                .set_sndbuf(now, b)
                .map_err(|e| e.to_string())?;
        }
        flows.push(Flow {
            h,
            sent: 0,
            shut: false,
            closed: false,
            wakeups: 0,
            info_at_end: String::new(),
            blocked: false,
        });
    }
    let cpu0 = thread_cpu();
    let t0 = rt.now();
    let limit = match run.what {
        Send::For(d) => d + Duration::from_secs(30),
        Send::Bytes(_) => Duration::from_secs(60),
    };
    let deadline = t0 + limit;
    let buf = vec![0u8; 64 * 1024];
    let mut start: Option<Instant> = None;
    let (mut queue, mut mem) = (Gauge::default(), Gauge::default());
    let mut series = Vec::new();
    let mut next_sample = t0;
    let every = run.sample_every.as_nanos() as u64;
    loop {
        while let Some(ev) = rt.stack().poll_event() {
            match ev.kind {
                lowtide::EventKind::Error(e) => return Err(format!("lowtide flow: {e}")),
                lowtide::EventKind::Writable => {
                    for f in flows.iter_mut().filter(|f| f.h == ev.socket) {
                        f.blocked = false;
                    }
                }
                _ => {}
            }
        }
        let now = rt.now();
        let all_up =
            (flows.iter()).all(|f| f.closed || rt.stack_ref().state(f.h) != Ok(TcpState::SynSent));
        if start.is_none() && all_up {
            start = Some(now);
        }
        if let Some(s) = start {
            let elapsed = Duration::from_nanos(now.saturating_since(s).as_nanos() as u64);
            for f in flows.iter_mut().filter(|f| !f.closed) {
                step(rt, f, &buf, run.what, elapsed)?;
            }
            let q = rt.egress_queue_bytes();
            let t = now.saturating_since(s).as_nanos() as u64;
            queue.observe(t, q);
            if (flows.iter()).any(|f| !f.shut) {
                mem.observe(t, rt.stack_ref().tcp_memory().pages);
            }
            if now >= next_sample {
                series.push((t as f64 / 1e9, q));
                next_sample = now + Duration::from_nanos(every);
            }
        }
        if flows.iter().all(|f| f.closed) {
            break;
        }
        if now > deadline {
            return Err(format!("lowtide flows did not finish within {limit:?}"));
        }
        rt.turn(Some(next_sample), Duration::from_millis(5))
            .map_err(|e| format!("event loop: {e}"))?;
    }
    let end = rt.now();
    let cpu1 = thread_cpu();
    linger(rt);
    let c = rt.stack_ref().counters();
    Ok(StackOutcome {
        received: 0,
        seconds: start.map_or(0.0, |s| end.saturating_since(s).as_nanos() as f64 / 1e9),
        queue_mean_bytes: queue.mean(),
        queue_peak_bytes: queue.peak,
        queue_series: series,
        mean_pages: mem.mean(),
        ip_out_requests: c.get(Mib::IpOutRequests),
        tcp_out_segs: c.get(Mib::TcpOutSegs),
        ip_in_receives: c.get(Mib::IpInReceives),
        retrans_segs: c.get(Mib::TcpRetransSegs),
        cpu_user_s: cpu1.0 - cpu0.0,
        cpu_sys_s: cpu1.1 - cpu0.1,
        wakeups: flows.iter().map(|f| f.wakeups).sum(),
        info_at_end: flows
            .first()
            .map_or(String::new(), |f| f.info_at_end.clone()),
        write_seconds: match run.what {
            Send::For(d) => d.as_secs_f64(),
            Send::Bytes(_) => 0.0,
        },
    })
}

/// Writes what the flow may, half-closes when done, closes on the peer's FIN.
fn step(
    rt: &mut Runtime,
    f: &mut Flow,
    buf: &[u8],
    what: Send,
    elapsed: Duration,
) -> Result<(), String> {
    let now = rt.now();
    let done_writing = match what {
        Send::For(d) => elapsed >= d,
        Send::Bytes(total) => f.sent >= total,
    };
    if !done_writing {
        while !f.blocked {
            let n = match what {
                Send::Bytes(total) => ((total - f.sent) as usize).min(buf.len()),
                Send::For(_) => buf.len(),
            };
            if n == 0 {
                break;
            }
            match rt.stack().send(now, f.h, &buf[..n]) {
                Ok(k) => {
                    f.sent += k as u64;
                    f.blocked = k < n;
                }
                Err(SocketError::WouldBlock) => f.blocked = true,
                Err(e) => return Err(format!("lowtide send: {e}")),
            }
        }
        return Ok(());
    }
    if !f.shut {
        if let Ok(i) = rt.stack_ref().info(now, f.h) {
            f.wakeups = i.wakeups;
            f.info_at_end = format!(
                "cwnd {}, ssthresh {}, snd_wnd {}, pacing_rate {:.0} Mbit/s, delivery_rate {:.0} Mbit/s, \
                 rwnd_limited {} ms, sndbuf_limited {} ms, busy {} ms, retrans {}",
                i.snd_cwnd,
                i.snd_ssthresh,
                i.snd_wnd,
                i.pacing_rate as f64 * 8.0 / 1e6,
                i.delivery_rate as f64 * 8.0 / 1e6,
                i.rwnd_limited / 1000,
                i.sndbuf_limited / 1000,
                i.busy_time / 1000,
                i.total_retrans
            );
        }
        (rt.stack().shutdown(now, f.h, Shutdown::Write)).map_err(|e| format!("shutdown: {e}"))?;
        f.shut = true;
    }
    let mut scratch = [0u8; 2048];
    match rt.stack().recv(now, f.h, &mut scratch) {
        Ok(0) => {
            let _ = rt.stack().close(now, f.h);
            f.closed = true;
        }
        Ok(_) | Err(SocketError::WouldBlock) => {}
        Err(e) => return Err(format!("lowtide recv: {e}")),
    }
    Ok(())
}

/// Serves the stack a little longer so that the closing handshakes complete.
fn linger(rt: &mut Runtime) {
    let until = rt.now() + Duration::from_secs(1);
    while rt.now() < until && rt.stack_ref().connection_count() > 0 {
        while rt.stack().poll_event().is_some() {}
        if rt.turn(Some(until), Duration::from_millis(20)).is_err() {
            return;
        }
    }
}

/// `lowtide link` in this process: two namespaces, a TUN device in each (sender
/// 10.10.0.1/24, receiver 10.10.0.2/24), bridged through the emulated path.
pub struct TunLink {
    /// The sender's namespace.
    pub sender: NetNs,
    /// The receiver's namespace.
    pub receiver: NetNs,
    /// The sender's TUN device (where a qdisc on the sender's egress goes).
    pub sender_dev: String,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<(), String>>>,
}

/// The receiver's address on a [`TunLink`].
pub const LINK_RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 2);

impl TunLink {
    /// Starts the bridge on its own thread.
    pub fn start(
        path: (PathConfig, PathConfig),
        offload: Offload,
        seed: u64,
    ) -> Result<Self, String> {
        let sender = kernel::namespace("lka")?;
        let receiver = kernel::namespace("lkb")?;
        let a = open_in(&sender, offload, Ipv4Addr::new(10, 10, 0, 1))?;
        let b = open_in(&receiver, offload, LINK_RECEIVER)?;
        let sender_dev = a.name().to_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("lowtide link".into())
            .spawn(move || {
                let mut br =
                    Bridge::new(a, b, path.0, path.1, seed).map_err(|e| format!("bridge: {e}"))?;
                br.run(Duration::from_millis(20), || s.load(Ordering::Relaxed))
                    .map_err(|e| format!("bridge: {e}"))
            })
            .map_err(|e| format!("bridge thread: {e}"))?;
        Ok(TunLink {
            sender,
            receiver,
            sender_dev,
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the bridge.
    pub fn stop(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("bridge thread panicked".into()),
            None => Ok(()),
        }
    }
}

impl Drop for TunLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn open_in(ns: &NetNs, offload: Offload, addr: Ipv4Addr) -> Result<TunDevice, String> {
    let name = netns::unique_name("ltk");
    let dev = TunDevice::open_in(ns.name(), &name, offload)
        .map_err(|e| format!("TUN device {name} in {}: {e}", ns.name()))?;
    configure(&dev, (addr, 24))?;
    Ok(dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_is_time_weighted() {
        let mut g = Gauge::default();
        g.observe(0, 100);
        g.observe(10, 0);
        g.observe(40, 0);
        assert_eq!(g.peak, 100);
        assert!((g.mean() - 25.0).abs() < 1e-9, "{}", g.mean());
        assert_eq!(Gauge::default().mean(), 0.0);
    }
}

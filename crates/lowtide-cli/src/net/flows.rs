//! The kernel's side of `lowtide net run`: each flow of the scenario as a kernel
//! TCP connection between two hosts' namespaces, a sender thread in the sending
//! host's namespace (`TCP_CONGESTION` set before connect, `TCP_NODELAY` for a
//! probe, `TCP_NOTSENT_LOWAT` if asked, `tcp_info` sampled every 10 ms) and a
//! receiver thread in the receiving host's, which verifies every byte against the
//! stream the simulator's flows send ([`Payload`]). A request/response flow's
//! sender is its client and its receiver its server ([`super::rr`]); an on/off
//! flow's sender writes nothing in its off periods, as the simulator's.

use lowtide::SocketError;
use lowtide_lab::real::kernel::{connect_with_cc, tcp_info_of};
use lowtide_sim::network::topology::{FlowDef, NodeKind, Topology};
use lowtide_sim::network::GridRecorder;
use lowtide_sim::payload::{Payload, Verifier};
use lowtide_tun::clock::Clock;
use lowtide_tun::netns::NetNs;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The first flow's listening port; flow `i` listens on `BASE_PORT + i`.
pub const BASE_PORT: u16 = 20_000;
/// How long after the run's end the flows may take to close.
pub const GRACE: Duration = Duration::from_secs(3);
/// How often a sender samples its `tcp_info`.
pub(super) const INFO_EVERY_NS: u64 = 10_000_000;

/// What the run and its flows share.
pub struct Shared {
    /// The run's clock (ns since its start).
    pub clock: Clock,
    /// Set when the run's time is over: timed senders stop.
    pub stop: AtomicBool,
    /// Set when the flows must give up (the grace time is over).
    pub abort: AtomicBool,
    /// Bytes each receiver has read so far.
    pub read: Vec<AtomicU64>,
    /// Flows whose sender and receiver have both ended.
    pub ended: AtomicU64,
    /// The run's series grid: interval and end (ns; `run.series_interval`, the
    /// run's duration).
    pub grid: (u64, u64),
}

impl Shared {
    /// A recorder on the run's series grid, `initial` until set.
    pub fn recorder(&self, initial: Option<u64>) -> GridRecorder {
        GridRecorder::new(self.grid.0, self.grid.1, initial)
    }
}

/// A sender's outcome.
#[derive(Debug, Default)]
pub struct SenderOut {
    /// When the connection was established (ns).
    pub connected_ns: Option<u64>,
    /// Bytes written.
    pub written: u64,
    /// The first socket error.
    pub error: Option<SocketError>,
    /// A probe's write times (ns).
    pub probe_writes: Vec<u64>,
    /// Sum and count of the `tcpi_rtt` samples (µs), and the last `tcpi_min_rtt`.
    pub rtt: (u64, u64, u32),
    /// `tcpi_total_retrans` at the end.
    pub retrans: u32,
    /// A request/response client's transactions: each one's latency, request
    /// written to response read whole (ns).
    pub latencies: Vec<u64>,
    /// A request/response client's check of the responses it read.
    pub responses: Option<Verifier>,
    /// `tcpi_snd_cwnd` at each `tcp_info` sample, on the run's series grid
    /// (`None` before the connection and after the sender's end).
    pub cwnd: GridRecorder,
}

/// A receiver's outcome.
#[derive(Debug)]
pub struct ReceiverOut {
    /// What it read, checked against the stream.
    pub verifier: Verifier,
    /// When it read its last byte (ns).
    pub last_byte_ns: u64,
    /// When each probe message's last byte was read (ns).
    pub probe_reads: Vec<u64>,
    /// The first socket error.
    pub error: Option<SocketError>,
    /// Bytes read, on the run's series grid.
    pub read: GridRecorder,
}

/// One flow's threads: a side on a lowtide host has none
/// ([`super::lowtide_host`]).
pub struct KernelFlow {
    /// The sending thread.
    pub sender: Option<JoinHandle<SenderOut>>,
    /// The receiving thread.
    pub receiver: Option<JoinHandle<ReceiverOut>>,
}

/// The address of host `h`.
pub fn addr_of(t: &Topology, h: usize) -> IpAddr {
    match &t.nodes[h].kind {
        NodeKind::Host { addr, .. } => *addr,
        NodeKind::Router => unreachable!("flows run between hosts"),
    }
}

/// The congestion control flow `def` runs: its own, else its host's.
pub fn cc_of(t: &Topology, def: &FlowDef) -> String {
    match (&def.cc, &t.nodes[def.from].kind) {
        (Some(cc), _) => cc.clone(),
        (None, NodeKind::Host { config, .. }) => config.tcp_congestion_control.clone(),
        (None, NodeKind::Router) => String::new(),
    }
}

/// Starts every flow's kernel sides: the receivers listening first (each in its
/// host's namespace), then the senders, which wait for their start time; a host
/// without a namespace in `ns` runs lowtide, and its sides run elsewhere.
pub fn start(
    t: &Topology,
    ns: &[Option<&NetNs>],
    shared: &Arc<Shared>,
) -> Result<Vec<KernelFlow>, String> {
    let mut receivers = Vec::new();
    for (i, def) in t.flows.iter().enumerate() {
        let Some(to) = ns[def.to] else {
            receivers.push(None);
            continue;
        };
        let at = SocketAddr::new(addr_of(t, def.to), BASE_PORT + i as u16);
        let (tx, rx) = std::sync::mpsc::channel();
        let (sh, def2, seed) = (shared.clone(), def.clone(), t.seed);
        let h = to
            .spawn(move || match TcpListener::bind(at) {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    receive(l, i, &def2, seed, &sh)
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("flow {}: listen on {at}: {e}", def2.name)));
                    ReceiverOut {
                        verifier: Verifier::new(Payload::new(seed, i as u32), def2.bytes),
                        last_byte_ns: 0,
                        probe_reads: Vec::new(),
                        error: Some(SocketError::AddrInUse),
                        read: sh.recorder(Some(0)),
                    }
                }
            })
            .map_err(|e| format!("receiver thread: {e}"))?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| "a kernel receiver did not start".to_string())??;
        receivers.push(Some(h));
    }
    let mut flows = Vec::new();
    for ((i, def), receiver) in t.flows.iter().enumerate().zip(receivers) {
        let to = SocketAddr::new(addr_of(t, def.to), BASE_PORT + i as u16);
        let (sh, def2, cc, seed) = (shared.clone(), def.clone(), cc_of(t, def), t.seed);
        let dur = t.duration_ns;
        let sender = match ns[def.from] {
            Some(from) => Some(
                from.spawn(move || send(to, i, &def2, &cc, (seed, dur), &sh))
                    .map_err(|e| format!("sender thread: {e}"))?,
            ),
            None => None,
        };
        flows.push(KernelFlow { sender, receiver });
    }
    Ok(flows)
}

/// The socket error an I/O error stands for.
pub(super) fn socket_error(e: &std::io::Error) -> SocketError {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => SocketError::ConnectionRefused,
        Some(libc::ECONNRESET) => SocketError::ConnectionReset,
        Some(libc::ETIMEDOUT) => SocketError::TimedOut,
        Some(libc::EPIPE) => SocketError::BrokenPipe,
        Some(libc::EHOSTUNREACH) => SocketError::HostUnreachable,
        Some(libc::ENETUNREACH) => SocketError::NetworkUnreachable,
        Some(libc::EPERM) => SocketError::PermissionDenied,
        Some(libc::ENOTCONN) => SocketError::NotConnected,
        _ => SocketError::InvalidInput,
    }
}

fn set_int(s: &TcpStream, level: i32, opt: i32, v: i32) {
    // SAFETY: setsockopt on a socket we own, with a c_int option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

/// Sleeps until `at` (ns on the run's clock).
pub(super) fn sleep_until(clock: &Clock, at: u64) {
    let now = clock.now().as_nanos();
    if at > now {
        std::thread::sleep(Duration::from_nanos(at - now));
    }
}

/// A flow's sender: connects at its start, writes its stream (bulk until its stop
/// or the run's end, a fixed size, or a probe's messages), shuts down its side and
/// waits for the receiver's close.
fn send(
    to: SocketAddr,
    i: usize,
    def: &FlowDef,
    cc: &str,
    run: (u64, u64),
    sh: &Shared,
) -> SenderOut {
    let mut out = SenderOut {
        cwnd: sh.recorder(None),
        ..SenderOut::default()
    };
    sleep_until(&sh.clock, def.start_ns);
    match connect_with_cc(to, cc) {
        Ok(mut s) => {
            out.connected_ns = Some(sh.clock.now().as_nanos());
            if send_on(&mut s, i, def, run, sh, &mut out).is_ok() {
                finish(&mut s, sh, &mut out);
            }
        }
        Err(e) => {
            // The message ends with the errno (`... (os error N)`).
            let errno = e
                .rsplit("os error ")
                .next()
                .and_then(|n| n.trim_end_matches(')').parse().ok());
            let errno = std::io::Error::from_raw_os_error(errno.unwrap_or(libc::EINVAL));
            out.error = Some(socket_error(&errno));
        }
    }
    out.cwnd.set(sh.clock.now().as_nanos(), None);
    sh.ended.fetch_add(1, Ordering::Relaxed);
    out
}

/// An on/off flow's off period that `at` (ns) falls in, as (from, until): on for
/// `on` from its start, then off for `off`, in turn.
pub fn off_period(def: &FlowDef, at: u64) -> Option<(u64, u64)> {
    let (on, off) = def.onoff?;
    let since = at.checked_sub(def.start_ns)?;
    let period = on + off;
    let from = def.start_ns + since / period * period + on;
    (at >= from).then_some((from, from + off))
}

/// A connected sender's writing: a request/response client's transactions, or
/// its stream (bulk until its stop or the run's end, in its on periods if it is
/// on/off; a fixed size; a probe's messages). `Err` after a socket error (in
/// `out`).
fn send_on(
    s: &mut TcpStream,
    i: usize,
    def: &FlowDef,
    (seed, duration_ns): (u64, u64),
    sh: &Shared,
    out: &mut SenderOut,
) -> Result<(), ()> {
    let clock = sh.clock;
    if def.probe.is_some() {
        let _ = s.set_nodelay(true);
    }
    if let Some(b) = def.notsent_lowat {
        set_int(s, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, b as i32);
    }
    let _ = s.set_write_timeout(Some(Duration::from_millis(10)));
    let stop_at = def.stop_ns.unwrap_or(duration_ns);
    if let Some(rr) = def.rr {
        return super::rr::client(s, (i, rr), (seed, stop_at), sh, out);
    }
    let payload = Payload::new(seed, i as u32);
    let mut buf = vec![0u8; 64 * 1024];
    let mut next_info = 0;
    let mut next_probe = def.start_ns;
    loop {
        let now = clock.now().as_nanos();
        sample(s, out, now, &mut next_info);
        let timed_out = def.bytes.is_none() && (now >= stop_at || sh.stop.load(Ordering::Relaxed));
        if timed_out || sh.abort.load(Ordering::Relaxed) {
            break;
        }
        if let Some((_, until)) = off_period(def, now) {
            sleep_until(&clock, until.min(now + INFO_EVERY_NS));
            continue;
        }
        let want = match (def.bytes, def.probe) {
            (Some(n), _) if out.written >= n => break,
            (Some(n), _) => ((n - out.written) as usize).min(buf.len()),
            (None, Some((size, interval))) => {
                if now < next_probe {
                    sleep_until(&clock, next_probe.min(now + INFO_EVERY_NS));
                    continue;
                }
                out.probe_writes.push(now);
                next_probe += interval;
                size as usize
            }
            (None, None) => buf.len(),
        };
        let chunk = &mut buf[..want];
        payload.fill(out.written, chunk);
        // A probe's message goes whole (its delay counts from this write).
        let mut done = 0;
        while done < want && !sh.abort.load(Ordering::Relaxed) {
            match s.write(&chunk[done..]) {
                Ok(k) => done += k,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if def.probe.is_none() {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    out.error = Some(socket_error(&e));
                    out.written += done as u64;
                    return Err(());
                }
            }
        }
        out.written += done as u64;
    }
    Ok(())
}

/// A sender's end: a last `tcp_info` sample, its write side shut down, and what
/// comes back read (a client's last responses verified) until the receiver's
/// close.
fn finish(s: &mut TcpStream, sh: &Shared, out: &mut SenderOut) {
    let now = sh.clock.now().as_nanos();
    sample(s, out, now, &mut 0);
    let _ = s.shutdown(Shutdown::Write);
    // The receiver closes once it has read the end of the stream.
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut rest = [0u8; 4096];
    while !sh.abort.load(Ordering::Relaxed) {
        match s.read(&mut rest) {
            Ok(0) => break,
            Ok(k) => {
                if let Some(v) = out.responses.as_mut() {
                    v.consume(&rest[..k]);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                out.error.get_or_insert(socket_error(&e));
                break;
            }
        }
    }
}

/// Adds a `tcp_info` sample to `out` if one is due at `now` (`next`: when).
pub(super) fn sample(s: &TcpStream, out: &mut SenderOut, now: u64, next: &mut u64) {
    if now < *next {
        return;
    }
    *next = now + INFO_EVERY_NS;
    if let Some(info) = tcp_info_of(s) {
        out.rtt.0 += info.tcpi_rtt as u64;
        out.rtt.1 += 1;
        out.rtt.2 = info.tcpi_min_rtt;
        out.retrans = info.tcpi_total_retrans;
        out.cwnd.set(now, Some(info.tcpi_snd_cwnd as u64));
    }
}

/// A flow's receiver: accepts its one connection and reads to the end of the
/// stream, verifying every byte; a request/response server answers each request
/// it has read whole.
fn receive(l: TcpListener, i: usize, def: &FlowDef, seed: u64, sh: &Shared) -> ReceiverOut {
    let clock = sh.clock;
    let mut out = ReceiverOut {
        verifier: Verifier::new(Payload::new(seed, i as u32), def.bytes),
        last_byte_ns: 0,
        probe_reads: Vec::new(),
        error: None,
        read: sh.recorder(Some(0)),
    };
    let _ = l.set_nonblocking(true);
    let mut s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if sh.abort.load(Ordering::Relaxed) {
                    sh.ended.fetch_add(1, Ordering::Relaxed);
                    return out;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                out.error = Some(socket_error(&e));
                sh.ended.fetch_add(1, Ordering::Relaxed);
                return out;
            }
        }
    };
    drop(l);
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = s.set_write_timeout(Some(Duration::from_millis(10)));
    let mut server = def.rr.map(|rr| super::rr::Server::new(seed, i, rr));
    let mut buf = vec![0u8; 256 * 1024];
    while !sh.abort.load(Ordering::Relaxed) {
        match s.read(&mut buf) {
            Ok(0) => {
                out.verifier.end_of_stream();
                break;
            }
            Ok(k) => {
                let now = clock.now().as_nanos();
                out.verifier.consume(&buf[..k]);
                sh.read[i].fetch_add(k as u64, Ordering::Relaxed);
                out.read.set(now, Some(out.verifier.received()));
                out.last_byte_ns = now;
                if let Some((size, _)) = def.probe {
                    let whole = out.verifier.received() / size as u64;
                    while (out.probe_reads.len() as u64) < whole {
                        out.probe_reads.push(now);
                    }
                }
                if let Some(srv) = server.as_mut() {
                    if let Err(e) = srv.answer(&mut s, out.verifier.received(), sh) {
                        out.error = Some(e);
                        break;
                    }
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                out.error = Some(socket_error(&e));
                break;
            }
        }
    }
    drop(s);
    sh.ended.fetch_add(1, Ordering::Relaxed);
    out
}

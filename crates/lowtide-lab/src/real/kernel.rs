//! The kernel's side of the real-path experiments: namespaces, an htb and pfifo
//! bottleneck (on the sender's TUN device for E3's A and B, on a router's veth one
//! hop away for R), per-namespace sysctls, kernel TCP senders and receivers
//! run as threads inside a namespace, samplers (the qdisc's backlog with `tc -s -j`,
//! socket memory with `ss -tm`) and the namespace's SNMP counters (what `nstat`
//! reads).

use lowtide_tun::netns::{self, NetNs};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A namespace with its loopback up. Every real-path run starts by making one, so
/// none is made once SIGINT or SIGTERM has come ([`lowtide_tun::stop`]): the plan
/// runs out at once, each run failing with that reason.
pub fn namespace(prefix: &str) -> Result<NetNs, String> {
    if lowtide_tun::stop::requested() {
        return Err("interrupted (SIGINT or SIGTERM)".into());
    }
    let ns = NetNs::create(&netns::unique_name(prefix))
        .map_err(|e| format!("creating a network namespace: {e}"))?;
    exec(&ns, &["ip", "link", "set", "lo", "up"])?;
    Ok(ns)
}

/// Runs `args` inside `ns` (`ip netns exec`); an error carries its stderr.
pub fn exec(ns: &NetNs, args: &[&str]) -> Result<String, String> {
    let out = ns
        .command(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("running {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{} in {}: {} ({})",
            args.join(" "),
            ns.name(),
            String::from_utf8_lossy(&out.stderr).trim(),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sysctl -w NAME=VALUE` inside `ns` (the net.* sysctls set here are per namespace).
pub fn sysctl(ns: &NetNs, name: &str, value: &str) -> Result<(), String> {
    exec(ns, &["sysctl", "-q", "-w", &format!("{name}={value}")]).map(|_| ())
}

/// Reads a sysctl inside `ns`.
pub fn read_sysctl(ns: &NetNs, name: &str) -> Result<String, String> {
    exec(ns, &["sysctl", "-n", name]).map(|s| s.trim().to_owned())
}

/// Creates a veth pair, `a` in namespace `na` and `b` in `nb`, with addresses
/// (CIDR), both up.
fn veth(na: &NetNs, a: (&str, &str), nb: &NetNs, b: (&str, &str)) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["link", "add", a.0, "netns", na.name(), "type", "veth"])
        .args(["peer", "name", b.0, "netns", nb.name()])
        .output()
        .map_err(|e| format!("ip link add: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip link add (veth): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    for (ns, (dev, addr)) in [(na, a), (nb, b)] {
        exec(ns, &["ip", "addr", "add", addr, "dev", dev])?;
        exec(ns, &["ip", "link", "set", dev, "up"])?;
    }
    Ok(())
}

/// The E3 bottleneck on `dev`: htb (one class at `rate_bps`) with a pfifo of 1000
/// packets under it (handle 10:).
pub fn htb_pfifo(ns: &NetNs, dev: &str, rate_bps: u64) -> Result<(), String> {
    let r = format!("{rate_bps}bit");
    let tc = |args: &[&str]| {
        let mut v = vec!["tc"];
        v.extend_from_slice(args);
        exec(ns, &v)
    };
    tc(&[
        "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
    ])?;
    tc(&[
        "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &r,
    ])?;
    tc(&[
        "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "pfifo", "limit", "1000",
    ])?;
    Ok(())
}

/// A kernel sender and receiver in two namespaces with the E3 bottleneck (htb +
/// pfifo) on a router's device one hop away between them: forwarded packets are no
/// longer charged to the sender's socket, so TCP Small Queues does not limit that
/// queue and only the congestion window does, as before TSQ. (The bottleneck on the
/// sender's own device is a [`super::tun::TunLink`] with [`htb_pfifo`] on its sender
/// TUN: that path has the propagation delay veth cannot give.)
pub struct Bottleneck {
    /// The sender's namespace.
    pub sender: NetNs,
    /// The receiver's namespace.
    pub receiver: NetNs,
    /// The router's namespace.
    pub router: NetNs,
    /// The device with the bottleneck (the router's, towards the receiver).
    pub dev: String,
    /// The receiver's address.
    pub receiver_addr: [u8; 4],
}

impl Bottleneck {
    /// Sender 10.9.0.1/24 -> router 10.9.0.254 / 10.9.1.254 -> receiver 10.9.1.2/24,
    /// with the bottleneck at `rate_bps` on the router's device towards the receiver.
    pub fn routed(rate_bps: u64) -> Result<Bottleneck, String> {
        let sender = namespace("lts")?;
        let receiver = namespace("ltr")?;
        let (s_dev, r_dev) = (netns::unique_name("lv"), netns::unique_name("lw"));
        let router = namespace("ltg")?;
        let (g_in, g_out) = (netns::unique_name("lg"), netns::unique_name("lh"));
        veth(
            &sender,
            (&s_dev, "10.9.0.1/24"),
            &router,
            (&g_in, "10.9.0.254/24"),
        )?;
        veth(
            &router,
            (&g_out, "10.9.1.254/24"),
            &receiver,
            (&r_dev, "10.9.1.2/24"),
        )?;
        exec(
            &sender,
            &["ip", "route", "add", "default", "via", "10.9.0.254"],
        )?;
        exec(
            &receiver,
            &["ip", "route", "add", "default", "via", "10.9.1.254"],
        )?;
        sysctl(&router, "net.ipv4.ip_forward", "1")?;
        htb_pfifo(&router, &g_out, rate_bps)?;
        Ok(Bottleneck {
            sender,
            receiver,
            router,
            dev: g_out,
            receiver_addr: [10, 9, 1, 2],
        })
    }

    /// The namespace of the bottleneck's device.
    pub fn queue_ns(&self) -> &NetNs {
        &self.router
    }
}

/// The backlog (bytes) of the qdisc `handle` on `dev`, from `tc -s -j qdisc show`
/// run by a thread inside the device's namespace.
fn qdisc_backlog(dev: &str, handle: &str) -> Option<u64> {
    let out = Command::new("tc")
        .args(["-s", "-j", "qdisc", "show", "dev", dev])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    (v.as_array()?.iter())
        .find(|q| q["handle"] == handle)
        .and_then(|q| q["backlog"].as_u64())
}

/// The sender-side TCP memory of the namespace in bytes: the sum over its sockets of
/// `ss -tmn`'s skmem r (sk_rmem_alloc), w (sk_wmem_queued) and f (sk_forward_alloc),
/// what /proc/net/sockstat's `mem` counts for them.
pub fn ss_memory() -> Option<u64> {
    let out = Command::new("ss").args(["-tmn"]).output().ok()?;
    Some(parse_skmem(&String::from_utf8_lossy(&out.stdout)))
}

/// Sums r + w + f over every `skmem:(...)` of `ss -m` output.
pub fn parse_skmem(text: &str) -> u64 {
    let mut total = 0;
    for part in text.split("skmem:(").skip(1) {
        let body = part.split(')').next().unwrap_or("");
        for field in body.split(',') {
            let digits = field.trim_start_matches(|c: char| c.is_ascii_alphabetic());
            let key = &field[..field.len() - digits.len()];
            if matches!(key, "r" | "w" | "f") {
                total += digits.parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

/// Samples a figure every `every` until stopped: (seconds since the start, value).
/// The sampling thread is inside the namespace, and so are the programs it starts
/// (`tc`, `ss`: `clone(2)` copies the calling thread's namespaces).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<(f64, u64)>>,
}

impl Sampler {
    /// Starts sampling `f` in `ns`.
    pub fn start(
        ns: &NetNs,
        every: Duration,
        f: impl Fn() -> Option<u64> + std::marker::Send + 'static,
    ) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = ns
            .spawn(move || {
                let start = Instant::now();
                let mut out = Vec::new();
                while !s.load(Ordering::Relaxed) {
                    if let Some(b) = f() {
                        out.push((start.elapsed().as_secs_f64(), b));
                    }
                    std::thread::sleep(every);
                }
                out
            })
            .map_err(|e| format!("sampler thread: {e}"))?;
        Ok(Sampler { stop, handle })
    }

    /// Samples the backlog of qdisc `handle` on `dev` in `ns`.
    pub fn backlog(ns: &NetNs, dev: &str, handle: &str, every: Duration) -> Result<Self, String> {
        let (dev, handle) = (dev.to_owned(), handle.to_owned());
        Sampler::start(ns, every, move || qdisc_backlog(&dev, &handle))
    }

    /// Stops and returns the samples.
    pub fn finish(self) -> Vec<(f64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// A kernel receiver: listens on `port` in `ns`, accepts `flows` connections and reads
/// each to its end (then closes); yields the bytes read. Listening when this returns.
pub fn sink(
    ns: &NetNs,
    port: u16,
    flows: usize,
) -> Result<JoinHandle<Result<u64, String>>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = ns
        .spawn(move || {
            let l = match TcpListener::bind(("0.0.0.0", port)) {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(format!("bind port {port}: {e}")));
                    return Err(format!("bind port {port}: {e}"));
                }
            };
            let _ = tx.send(Ok(()));
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut readers = Vec::new();
            while readers.len() < flows {
                match l.accept() {
                    Ok((s, _)) => readers.push(std::thread::spawn(move || read_all(s))),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if Instant::now() > deadline {
                            return Err(format!(
                                "kernel receiver: {} of {flows} connections after 30 s",
                                readers.len()
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => return Err(format!("accept: {e}")),
                }
            }
            let mut total = 0;
            for r in readers {
                total += r.join().map_err(|_| "reader panicked".to_string())??;
            }
            Ok(total)
        })
        .map_err(|e| format!("receiver thread: {e}"))?;
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| "kernel receiver did not start".to_string())??;
    Ok(h)
}

fn read_all(mut s: TcpStream) -> Result<u64, String> {
    let _ = s.set_nonblocking(false);
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => n += k as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("kernel receiver read: {e}")),
        }
    }
}

/// What a kernel sender does.
#[derive(Debug, Clone, Copy)]
pub enum Send {
    /// Writes for this long, then closes.
    For(Duration),
    /// Writes this many bytes, then closes.
    Bytes(u64),
}

/// One kernel sender's result.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sent {
    /// Bytes written.
    pub bytes: u64,
    /// From connect to the peer's close (s).
    pub seconds: f64,
    /// The thread's context switches (voluntary + involuntary) while it wrote.
    pub ctx_switches: u64,
    /// tcp_info when the writing ended.
    pub info: EndInfo,
}

/// A kernel sender's `tcp_info` when its writing ended (zeros if getsockopt failed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndInfo {
    /// `tcpi_snd_cwnd` (segments).
    pub cwnd: u32,
    /// `tcpi_snd_ssthresh` (segments).
    pub ssthresh: u32,
    /// `tcpi_total_retrans`.
    pub retrans: u32,
    /// `tcpi_min_rtt` (µs): what tcp_tso_autosize shifts by tcp_tso_rtt_log.
    pub min_rtt_us: u32,
    /// `tcpi_pacing_rate` (bytes/s): what TSQ's limit and the size goal use.
    pub pacing_rate: u64,
}

impl std::fmt::Display for EndInfo {
    /// As the run's "tcp_info at the end" parameter.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cwnd {}, ssthresh {}, retrans {}, min_rtt {} us, pacing_rate {:.0} Mbit/s",
            self.cwnd,
            self.ssthresh,
            self.retrans,
            self.min_rtt_us,
            self.pacing_rate as f64 * 8.0 / 1e6
        )
    }
}

/// Starts `flows` kernel senders in `ns` to `to` (each on its own thread) with
/// congestion control `cc` and `SO_SNDBUF` if given; each writes, half-closes and
/// waits for the peer's close.
pub fn senders(
    ns: &NetNs,
    to: SocketAddr,
    flows: usize,
    (what, cc): (Send, &'static str),
    sndbuf: Option<u32>,
) -> Result<Vec<JoinHandle<Result<Sent, String>>>, String> {
    (0..flows)
        .map(|_| {
            ns.spawn(move || send_one(to, (what, cc), sndbuf))
                .map_err(|e| format!("sender thread: {e}"))
        })
        .collect()
}

/// One kernel sender on the calling thread (see [`senders`]).
pub fn send_one(
    to: SocketAddr,
    (what, cc): (Send, &'static str),
    sndbuf: Option<u32>,
) -> Result<Sent, String> {
    let start = Instant::now();
    let cs0 = ctx_switches();
    let mut s = connect_with_cc(to, cc)?;
    if let Some(b) = sndbuf {
        set_sndbuf(&s, b)?;
    }
    s.set_write_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| e.to_string())?;
    let buf = vec![0x5au8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = match what {
            Send::For(d) if start.elapsed() >= d => break,
            Send::For(_) => buf.len(),
            Send::Bytes(total) if bytes >= total => break,
            Send::Bytes(total) => ((total - bytes) as usize).min(buf.len()),
        };
        match s.write(&buf[..n]) {
            Ok(k) => bytes += k as u64,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("kernel sender write: {e}")),
        }
    }
    let ctx = ctx_switches().saturating_sub(cs0);
    let info = tcp_info(&s);
    s.shutdown(Shutdown::Write).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    Ok(Sent {
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        ctx_switches: ctx,
        info,
    })
}

/// The calling thread's context switches (`/proc/thread-self/status`).
fn ctx_switches() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    (text.lines())
        .filter(|l| l.contains("ctxt_switches:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// [`EndInfo`] from `getsockopt(TCP_INFO)`.
fn tcp_info(s: &TcpStream) -> EndInfo {
    match tcp_info_of(s) {
        Some(i) => EndInfo {
            cwnd: i.tcpi_snd_cwnd,
            ssthresh: i.tcpi_snd_ssthresh,
            retrans: i.tcpi_total_retrans,
            min_rtt_us: i.tcpi_min_rtt,
            pacing_rate: i.tcpi_pacing_rate,
        },
        None => EndInfo::default(),
    }
}

/// `getsockopt(TCP_INFO)`, the kernel's `struct tcp_info`.
pub fn tcp_info_of(s: &TcpStream) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain data; getsockopt fills at most `len` bytes of it.
    let mut i: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a socket we own, a valid buffer and length.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut i as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(i)
}

/// `setsockopt(SO_SNDBUF)` (the kernel doubles it and stops autotuning the socket).
/// A TCP connection to `to` (IPv4) from a socket given congestion control `cc`
/// before connect(2). A new namespace here inherits the machine's default, bbr, and
/// cannot be given cubic (not in `tcp_allowed_congestion_control`; root may still
/// pick it per socket); set after connect, as `iperf3 -C` does, cubic would keep the
/// pacing bbr's init turned on (`sk_pacing_status`).
pub fn connect_with_cc(to: SocketAddr, cc: &str) -> Result<TcpStream, String> {
    use std::os::fd::FromRawFd;
    let err = |what: &str| {
        format!(
            "kernel sender: {what} {to}: {}",
            std::io::Error::last_os_error()
        )
    };
    let SocketAddr::V4(v4) = to else {
        return Err(format!("kernel sender: {to}: IPv4 only"));
    };
    // SAFETY: a new socket; the TcpStream owns (and closes) it from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err("socket"));
    }
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: setsockopt with a byte string and its length, on the socket we own.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr() as *const libc::c_void,
            cc.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(err(&format!("TCP_CONGESTION {cc} for")));
    }
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a sockaddr_in of the right length, on the socket we own (blocking).
    let r = unsafe {
        libc::connect(
            fd,
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    match r {
        0 => Ok(s),
        _ => Err(err("connect")),
    }
}

fn set_sndbuf(s: &TcpStream, bytes: u32) -> Result<(), String> {
    let v = bytes as libc::c_int;
    // SAFETY: setsockopt on a socket we own, with a c_int option value.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(format!("SO_SNDBUF: {}", std::io::Error::last_os_error())),
    }
}

/// The calling thread's namespace's SNMP counters (`/proc/thread-self/net/snmp`, what
/// `nstat` reads): (`Ip`/`Tcp` + field name, value).
pub fn snmp() -> Result<Vec<(String, u64)>, String> {
    let p = "/proc/thread-self/net/snmp";
    let text = std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?;
    Ok(parse_snmp(&text))
}

/// Parses /proc/net/snmp's pairs of lines (`Ip: Forwarding ...` then `Ip: 1 ...`).
pub fn parse_snmp(text: &str) -> Vec<(String, u64)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((_, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<i64>() {
                out.push((format!("{proto}{n}"), v.max(0) as u64));
            }
        }
    }
    out
}

/// A counter from [`snmp`]'s list (0 if absent).
pub fn counter(list: &[(String, u64)], name: &str) -> u64 {
    list.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_pairs_parse() {
        let t = "Ip: Forwarding DefaultTTL InReceives OutRequests\nIp: 1 64 695 552\n\
                 Tcp: RtoAlgorithm MaxConn OutSegs\nTcp: 1 -1 1385\n";
        let c = parse_snmp(t);
        assert_eq!(counter(&c, "IpOutRequests"), 552);
        assert_eq!(counter(&c, "IpInReceives"), 695);
        assert_eq!(counter(&c, "TcpOutSegs"), 1385);
        assert_eq!(counter(&c, "TcpMaxConn"), 0, "negative counts as 0");
        assert_eq!(counter(&c, "Nope"), 0);
    }

    #[test]
    fn skmem_sums_r_w_f() {
        let t = "ESTAB 0 0 10.0.0.1:1 10.0.0.2:2\n\t skmem:(r10,rb131072,t5,tb46080,f100,w1000,o0,bl0,d0)\n\
                 ESTAB 0 0 10.0.0.1:3 10.0.0.2:2\n\t skmem:(r0,rb131072,t0,tb46080,f4000,w20,o0,bl0,d2)\n";
        assert_eq!(parse_skmem(t), 10 + 100 + 1000 + 4000 + 20);
        assert_eq!(parse_skmem("nothing"), 0);
    }
}

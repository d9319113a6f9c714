//! Issue 27's measurement: each attack of `lowtide_tun::attack`, paced so that every
//! segment reaches the victim, against lowtide (`transfer --listen` on TUN) and
//! against this machine's kernel (a listener across a veth pair), each beside a
//! legitimate kernel client's transfer to the same victim at 100 Mbit/s, verified by
//! SHA-256. Both victims have `tcp_rmem` `4096 1048576 6291456` and leave the
//! attacker's connections in their accept queues, never read (the worst case), except
//! under the held flood and the TIME-WAIT churn, whose servers accept every
//! connection, so that the handshakes complete rather than overflow the accept queue,
//! and hold it open or close it at once (lowtide's `transfer --listen --others
//! hold|close`; the kernel's, Python processes).
//!
//! Measured per attack and victim:
//! - memory: lowtide's peak RSS (`VmHWM`) over its RSS when the attack began; the
//!   kernel's peak TCP memory (`/proc/net/sockstat`'s pages, the machine's) plus the
//!   growth of the TCP socket slabs (`TCP`, `request_sock_TCP`, `tw_sock_TCP` in
//!   /proc/slabinfo, the machine's): upper bounds of the victim's, other work on the
//!   machine included; and the peak `sk_rmem_alloc` of the kernel's sockets to the
//!   attacker (`ss -tm`, sampled every 50 ms), which is what lowtide bounds;
//!   under the held flood and the churn, the kernel's memory is the growth of the
//!   slabs an accepted socket takes (`TCP`, `request_sock_TCP`, `tw_sock_TCP`,
//!   `sock_inode_cache`, `filp`, `dentry`), and both victims' is divided by the
//!   connections their servers accepted;
//! - CPU: lowtide's process (user + system) during the attack less its rate over the
//!   two seconds before (the legitimate transfer alone). The kernel processes a
//!   segment in the softirq that the attacker's `sendto` raises on veth, charged to
//!   the attacker's thread (tick accounting without `IRQ_TIME_ACCOUNTING`, as here);
//!   so the kernel's cost is the attacker thread's CPU against the kernel less its
//!   CPU against lowtide (where a send ends in TUN's queue);
//! - segments that reached the victim: all of them on veth; on TUN, those sent less
//!   the device's `tx_dropped`.
//!
//! A measurement, not a check: `cargo test --release -p lowtide-cli --test
//! hostile_bench -- --ignored --nocapture --test-threads 1` as root; BENCHMARKS.md
//! has the figures.

mod common;

use common::*;
use lowtide_tun::attack::{self, AfterHandshake, AttackReport};
use lowtide_tun::netns::{self, privileged, NetNs};
use std::net::{SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The legitimate transfer's rate: 100 Mbit/s.
const LEGIT_RATE: u64 = 12_500_000;
/// The attacker's source address on each path: on the subnet, owned by no one.
const LT_SRC: &str = "10.7.0.99:20000";
const K_SRC: &str = "10.9.0.99:20000";

/// An attack of the bench, with its size and pace.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// The 1-byte out-of-order fill over the window, once, 20,000 segments/s.
    OfoFill,
    /// 50,000 prepended 200-byte segments, 10,000/s.
    Prepend,
    /// 200,000 SYNs, 50,000/s.
    SynFlood,
    /// 20,000 handshakes left silent, 5,000 SYNs/s.
    ConnFlood,
    /// 40,000 handshakes left silent, 5,000 SYNs/s, to a server that accepts and
    /// holds every connection.
    HeldFlood,
    /// 20,000 handshakes, 5,000 SYNs/s, to a server that closes each at once: the
    /// victim holds the TIME-WAIT, `tcp_max_tw_buckets` 10,000.
    TwChurn,
}

impl Shape {
    fn run(self, iface: &str, src: SocketAddrV4, dst: SocketAddrV4) -> AttackReport {
        const RATE: Option<f64> = Some(5_000.0);
        const SILENT: AfterHandshake = AfterHandshake::Silent;
        const FIN: AfterHandshake = AfterHandshake::AnswerFin;
        let r = match self {
            Shape::OfoFill => attack::ofo_fill(iface, src, dst, 1, Some(20_000.0)),
            Shape::Prepend => attack::prepend(iface, src, dst, 50_000, Some(10_000.0)),
            Shape::SynFlood => attack::syn_flood(iface, src, dst, 200_000, Some(50_000.0)),
            Shape::ConnFlood => attack::conn_flood(iface, src, dst, 20_000, RATE, SILENT),
            Shape::HeldFlood => attack::conn_flood(iface, src, dst, 40_000, RATE, SILENT),
            Shape::TwChurn => attack::conn_flood(iface, src, dst, 20_000, RATE, FIN),
        };
        r.unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }

    /// The victim's counters worth printing for this attack.
    fn counters(self) -> &'static [&'static str] {
        match self {
            Shape::OfoFill | Shape::Prepend => &[
                "TcpExtTCPOFOQueue",
                "TcpExtTCPOFODrop",
                "TcpExtTCPOFOMerge",
                "TcpExtPruneCalled",
                "TcpExtOfoPruned",
                "TcpExtTCPRcvCollapsed",
            ],
            Shape::TwChurn => &[
                "TcpPassiveOpens",
                "TcpExtTCPTimeWaitOverflow",
                "TcpExtTCPAbortOnMemory",
                "TcpExtListenOverflows",
            ],
            Shape::SynFlood | Shape::ConnFlood | Shape::HeldFlood => &[
                "TcpPassiveOpens",
                "TcpExtSyncookiesSent",
                "TcpExtSyncookiesRecv",
                "TcpExtListenOverflows",
                "TcpExtListenDrops",
                "TcpExtTCPReqQFullDrop",
                "TcpExtTCPReqQFullDoCookies",
            ],
        }
    }
}

impl Shape {
    /// What the victims' servers do with every connection they accept, if they
    /// accept them all: `hold` or `close` (`transfer --others`).
    fn others(self) -> Option<&'static str> {
        match self {
            Shape::HeldFlood => Some("hold"),
            Shape::TwChurn => Some("close"),
            _ => None,
        }
    }

    /// The victims' sysctls besides `tcp_rmem`.
    fn sysctls(self) -> &'static [&'static str] {
        match self {
            Shape::TwChurn => &["net.ipv4.tcp_max_tw_buckets=10000"],
            _ => &[],
        }
    }
}

/// This thread's CPU time (user + system).
fn thread_cpu() -> Duration {
    // SAFETY: getrusage(2) into a zeroed rusage of its size.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// An attack run on a thread in `ns`, with that thread's CPU time.
fn attack_in(
    ns: &NetNs,
    shape: Shape,
    iface: &'static str,
    src: &str,
    dst: SocketAddrV4,
) -> JoinHandle<(AttackReport, Duration)> {
    let src: SocketAddrV4 = src.parse().unwrap();
    ns.spawn(move || {
        let t0 = thread_cpu();
        let r = shape.run(iface, src, dst);
        (r, thread_cpu() - t0)
    })
    .expect("attacker thread")
}

/// A process's CPU time (user + system) from /proc/PID/stat.
fn process_cpu(pid: u32) -> Duration {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf(3) with a constant name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

/// The TCP socket slabs.
const TCP_SLABS: &[&str] = &["TCP", "request_sock_TCP", "tw_sock_TCP"];
/// The slabs an accepted TCP socket takes: its `tcp_sock`, its request while in
/// the SYN queue, its TIME-WAIT, and its file (socket inode, `struct file`, dentry).
const ACCEPTED_SLABS: &[&str] = &[
    "TCP",
    "request_sock_TCP",
    "tw_sock_TCP",
    "sock_inode_cache",
    "filp",
    "dentry",
];

/// The bytes of the active objects of the `names` slabs (the machine's).
fn slab_bytes(names: &[&str]) -> u64 {
    let slab = std::fs::read_to_string("/proc/slabinfo").unwrap_or_default();
    slab.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let ours = names.contains(w.first()?);
            let objs: u64 = w.get(1)?.parse().ok()?;
            let size: u64 = w.get(3)?.parse().ok()?;
            ours.then_some(objs * size)
        })
        .sum()
}

/// Kernel TCP memory (kB): sockstat's pages in `ns` plus the TCP socket slabs; when
/// the server accepts every connection, only the slabs of an accepted socket (its
/// buffers are empty, and sockstat's pages then carry the legitimate transfer's).
fn kernel_mem_kb(ns: &NetNs, shape: Shape) -> u64 {
    match shape.others() {
        Some(_) => slab_bytes(ACCEPTED_SLABS) / 1024,
        None => kernel_tcp_kb(ns),
    }
}

/// Kernel TCP memory (kB): sockstat's pages in `ns` plus the TCP socket slabs.
fn kernel_tcp_kb(ns: &NetNs) -> u64 {
    let s = ns_output(ns, "cat", &["/proc/net/sockstat"]);
    let pages: u64 = s
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "mem")
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    pages * 4 + slab_bytes(TCP_SLABS) / 1024
}

/// The kernel's sockets to the attacker's address in `ns`: their `sk_rmem_alloc`
/// summed and the largest `sk_rcvbuf` (bytes), from `ss -tm`'s `skmem:(rN,rbN,...)`.
fn attacker_socket_rmem(ns: &NetNs) -> (u64, u64) {
    let s = ns_output(ns, "ss", &["-tmnH", "state", "all", "dst", "10.9.0.99"]);
    let field = |l: &str, key: &str| -> u64 {
        l.split(['(', ',', ')'])
            .find_map(|f| f.strip_prefix(key)?.parse().ok())
            .unwrap_or(0)
    };
    s.lines()
        .filter(|l| l.contains("skmem:"))
        .fold((0, 0), |(r, rb), l| {
            (r + field(l, "r"), rb.max(field(l, "rb")))
        })
}

/// One victim's figures under one attack.
struct Row {
    victim: &'static str,
    attack: AttackReport,
    reached: u64,
    mem_before_kb: u64,
    mem_peak_kb: u64,
    victim_cpu: Option<Duration>,
    attacker_cpu: Duration,
    counters: String,
    /// Connections the victim's server accepted after the legitimate one (the held
    /// flood, the churn).
    held: Option<u64>,
}

impl Row {
    fn print(&self, shape: Shape) {
        let cpu = self
            .victim_cpu
            .map_or("-".into(), |c| format!("{:.2} s", c.as_secs_f64()));
        let grew = self.mem_peak_kb.saturating_sub(self.mem_before_kb);
        let held = match self.held {
            Some(n) if n > 0 => format!(", {n} accepted, {} B each", grew * 1024 / n),
            Some(_) => ", none accepted".into(),
            None => String::new(),
        };
        eprintln!(
            "| {shape:?} | {} | {} sent in {:.1} s, {} reached{}{held} | {} kB | {} kB (+{grew} kB) | {cpu} | {:.2} s | {} |",
            self.victim,
            self.attack.segments,
            self.attack.elapsed.as_secs_f64(),
            self.reached,
            match (self.attack.handshakes, self.attack.fins) {
                (0, _) => String::new(),
                (n, 0) => format!(", {n} handshakes"),
                (n, f) => format!(", {n} handshakes, {f} FINs answered"),
            },
            self.mem_before_kb,
            self.mem_peak_kb,
            self.attacker_cpu.as_secs_f64(),
            self.counters.trim(),
        );
    }
}

/// lowtide as the victim: `transfer --listen` on TUN in its namespace.
fn against_lowtide(shape: Shape) -> Row {
    let env = Env::new("hbl");
    let mut extra = Vec::new();
    if let Some(o) = shape.others() {
        extra.extend(["--others", o]);
    }
    for s in shape.sysctls() {
        extra.extend(["--sysctl", s]);
    }
    let lt = lowtide_victim(&env, "300s", &extra);
    let pid = lt.id();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let to = format!("{LOWTIDE}:7000").parse().unwrap();
    let legit = env.kernel(move || legit_client(to, s2, Some(LEGIT_RATE)));
    std::thread::sleep(Duration::from_millis(500));
    let (c0, t0) = (process_cpu(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let quiet = (process_cpu(pid) - c0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let (mem_before_kb, drops0, c1) = (
        status_kb(pid, "VmRSS"),
        tx_dropped(&env.ns, "lt0"),
        process_cpu(pid),
    );
    let dst: SocketAddrV4 = format!("{LOWTIDE}:7000").parse().unwrap();
    let (attack, attacker_cpu) = attack_in(&env.ns, shape, "lt0", LT_SRC, dst)
        .join()
        .expect("attacker");
    let busy = process_cpu(pid) - c1;
    let victim_cpu = busy.saturating_sub(attack.elapsed.mul_f64(quiet));
    let (mem_peak_kb, drops) = (status_kb(pid, "VmHWM"), tx_dropped(&env.ns, "lt0") - drops0);
    stop.store(true, Ordering::Relaxed);
    let (n, sha) = legit.join().expect("legit client");
    let out = lt.wait(Duration::from_secs(120));
    let report = json_of(&out);
    assert!(out.status.success(), "lowtide failed: {report}");
    assert_eq!(report["bytes"].as_u64(), Some(n), "every byte: {report}");
    assert_eq!(report["sha256"].as_str(), Some(sha.as_str()), "same bytes");
    let counters = shape
        .counters()
        .iter()
        .map(|m| format!("{m} {}", report["counters"][m].as_u64().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(", ");
    Row {
        victim: "lowtide (TUN)",
        held: shape
            .others()
            .map(|_| report["others"].as_u64().unwrap_or(0)),
        reached: attack.segments.saturating_sub(drops),
        attack,
        mem_before_kb,
        mem_peak_kb,
        victim_cpu: Some(victim_cpu),
        attacker_cpu,
        counters,
    }
}

/// The kernel as the victim: a listener in its own namespace across a veth pair from
/// the attacker's and the legitimate client's, which reaches the attacker's unowned
/// address through a static neighbour entry.
fn against_kernel(shape: Shape) -> Row {
    let a = Env::new("hbka");
    let v = NetNs::create(&netns::unique_name("hbkv")).expect("netns");
    ip(&v, &["link", "set", "lo", "up"]);
    let (ia, iv) = ("hbA", "hbV");
    ip(
        &a.ns,
        &["link", "add", ia, "type", "veth", "peer", "name", iv],
    );
    ip(&a.ns, &["link", "set", iv, "netns", v.name()]);
    ip(&a.ns, &["addr", "add", "10.9.0.1/24", "dev", ia]);
    ip(&a.ns, &["link", "set", ia, "up"]);
    ip(&v, &["addr", "add", "10.9.0.2/24", "dev", iv]);
    ip(&v, &["link", "set", iv, "up"]);
    let mac = ns_output(&a.ns, "cat", &[&format!("/sys/class/net/{ia}/address")]);
    ip(
        &v,
        &["neigh", "add", "10.9.0.99", "lladdr", mac.trim(), "dev", iv],
    );
    let set = v
        .command("sysctl")
        .args(["-qw", "net.ipv4.tcp_rmem=4096 1048576 6291456"])
        .status();
    assert!(set.expect("sysctl").success());
    for s in shape.sysctls() {
        let set = v.command("sysctl").args(["-qw", s]).status();
        assert!(set.expect("sysctl").success());
    }
    let _ = ns_output(&v, "nstat", &["-n"]);
    let listener = v
        .spawn(|| TcpListener::bind("10.9.0.2:7000"))
        .expect("thread")
        .join()
        .expect("bind")
        .expect("listen");
    let server = std::thread::spawn(move || kernel_recv(listener));
    let holders = shape.others().map(|o| hold_servers(&v, o));
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let to = "10.9.0.2:7000".parse().unwrap();
    let legit = a.kernel(move || legit_client(to, s2, Some(LEGIT_RATE)));
    std::thread::sleep(Duration::from_millis(2500));
    let mem_before_kb = kernel_mem_kb(&v, shape);
    let port = if shape.others().is_some() {
        HELD_PORT
    } else {
        7000
    };
    let dst = SocketAddrV4::new([10, 9, 0, 2].into(), port);
    let fill = attack_in(&a.ns, shape, ia, K_SRC, dst);
    let (mut mem_peak_kb, mut rmem, mut rcvbuf) = (mem_before_kb, 0, 0);
    let mut sample = || {
        let (r, rb) = attacker_socket_rmem(&v);
        (rmem, rcvbuf) = (rmem.max(r), rcvbuf.max(rb));
        mem_peak_kb = mem_peak_kb.max(kernel_mem_kb(&v, shape));
    };
    while !fill.is_finished() {
        sample();
        std::thread::sleep(Duration::from_millis(50));
    }
    sample();
    let (attack, attacker_cpu) = fill.join().expect("attacker");
    stop.store(true, Ordering::Relaxed);
    let (n, sha) = legit.join().expect("legit");
    let (got, got_sha) = server.join().expect("server");
    let held = holders.map(stop_hold_servers);
    let sockstat = ns_output(&v, "cat", &["/proc/net/sockstat"]);
    let tcp_line = sockstat.lines().find(|l| l.starts_with("TCP:"));
    assert_eq!((got, &got_sha), (n, &sha), "the transfer verifies");
    let mut args = vec!["-az"];
    args.extend_from_slice(shape.counters());
    let counters = ns_output(&v, "nstat", &args)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some(format!("{} {}", w.first()?, w.get(1)?))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let counters = format!(
        "{counters}; attacker's sockets: peak rmem_alloc {rmem} B, rcvbuf {rcvbuf} B; \
         sockstat after: {}",
        tcp_line.unwrap_or("-")
    );
    Row {
        victim: "Linux (veth)",
        held,
        reached: attack.segments,
        attack,
        mem_before_kb,
        mem_peak_kb,
        victim_cpu: None,
        attacker_cpu,
        counters,
    }
}

/// The kernel's servers under the held flood and the churn: processes that each
/// accept every connection to `HELD_PORT` (`SO_REUSEPORT`: the kernel spreads the
/// connections over them) and close it at once (`close`), or hold it open, never read,
/// until SIGTERM (`hold`) and then reset it (`SO_LINGER` 0, so that none lingers in
/// FIN-WAIT towards the attacker's unowned address); they print how many they
/// accepted. Processes, not threads of this test: each held socket is a file, and a
/// process may open at most `ulimit -n` (20,000 here, which root without
/// `CAP_SYS_RESOURCE` cannot raise).
const HOLD_SERVER: &str = r#"
import signal, socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("10.9.0.2", int(sys.argv[1])))
s.listen(4096)
held = []
def stop(*_):
    for c in held:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    print("accepted", accepted, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
accepted = 0
while True:
    c = s.accept()[0]
    accepted += 1
    if sys.argv[2] == "close":
        c.close()
    else:
        held.append(c)
"#;
/// The kernel's port for the held flood (the legitimate transfer has 7000).
const HELD_PORT: u16 = 7001;
/// Processes holding the kernel's connections under the held flood.
const HOLD_SERVERS: usize = 3;

/// Starts [`HOLD_SERVER`] `HOLD_SERVERS` times in `ns` in `mode` (`hold`, `close`),
/// each listening when this returns.
fn hold_servers(ns: &NetNs, mode: &str) -> Vec<ChildGuard> {
    (0..HOLD_SERVERS)
        .map(|_| {
            let mut c = ns
                .command("python3")
                .args(["-c", HOLD_SERVER, &HELD_PORT.to_string(), mode])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("python3");
            let mut line = String::new();
            let out = c.stdout.as_mut().expect("stdout");
            std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
                .expect("ready line");
            assert_eq!(line.trim(), "ready", "hold server");
            ChildGuard::new(c)
        })
        .collect()
}

/// Stops the hold servers; the connections they accepted.
fn stop_hold_servers(servers: Vec<ChildGuard>) -> u64 {
    servers
        .into_iter()
        .map(|c| {
            let out = c.terminate(Duration::from_secs(30));
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines()
                .find_map(|l| l.strip_prefix("accepted ")?.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("hold server printed {text:?}"))
        })
        .sum()
}

/// Both victims under `shape`; the table's two rows, and the kernel's CPU as the
/// difference of the attacker's.
fn bench(shape: Shape, name: &str) {
    if !privileged(name) {
        return;
    }

    let lt = against_lowtide(shape);
    let k = against_kernel(shape);
    eprintln!("| attack | victim | segments | memory before | peak | victim CPU | attacker thread CPU | counters |");
    eprintln!("|---|---|---|---|---|---|---|---|");
    lt.print(shape);
    k.print(shape);
    let kcpu = k.attacker_cpu.saturating_sub(lt.attacker_cpu);
    eprintln!(
        "{shape:?}: lowtide CPU {:.2} s, kernel CPU (attacker thread against the kernel less against lowtide) {:.2} s",
        lt.victim_cpu.unwrap_or_default().as_secs_f64(),
        kcpu.as_secs_f64()
    );
}

#[test]
#[ignore = "a measurement (BENCHMARKS.md): run with --ignored as root"]
fn ofo_fill_lowtide_and_kernel() {
    bench(Shape::OfoFill, "ofo_fill_lowtide_and_kernel");
}

#[test]
#[ignore = "a measurement (BENCHMARKS.md): run with --ignored as root"]
fn prepend_lowtide_and_kernel() {
    bench(Shape::Prepend, "prepend_lowtide_and_kernel");
}

#[test]
#[ignore = "a measurement (BENCHMARKS.md): run with --ignored as root"]
fn syn_flood_lowtide_and_kernel() {
    bench(Shape::SynFlood, "syn_flood_lowtide_and_kernel");
}

#[test]
#[ignore = "a measurement (BENCHMARKS.md): run with --ignored as root"]
fn conn_flood_lowtide_and_kernel() {
    bench(Shape::ConnFlood, "conn_flood_lowtide_and_kernel");
}

#[test]
#[ignore = "a measurement (BENCHMARKS.md): run with --ignored as root"]
fn held_flood_lowtide_and_kernel() {
    bench(Shape::HeldFlood, "held_flood_lowtide_and_kernel");
}

#[test]
#[ignore = "a measurement (BENCHMARKS.md): run with --ignored as root"]
fn tw_churn_lowtide_and_kernel() {
    bench(Shape::TwChurn, "tw_churn_lowtide_and_kernel");
}

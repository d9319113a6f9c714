//! Benchmark: a lowtide server through this crate's tokio API on a TUN device with 1
//! and with 2 queues ([`Net::new_sharded`]: one stack and driver task per queue, on
//! a two-worker runtime), and the kernel itself as the server over a veth pair, each
//! with STREAMS parallel kernel client streams (`iperf3 -P`), both ways: the clients
//! send to the server (lowtide receives) and read from it (lowtide sends). Every
//! stream is a byte pattern checked at its receiver. Needs root: it makes its own
//! namespaces.
//!
//! Reports aggregate goodput and the process's CPU seconds (user + system, servers
//! and the kernel clients' threads together: the clients cost the same in every
//! row) per GB carried, for REPS interleaved repetitions.
//!
//! Run: `cargo run --release -p lowtide-tokio --example tun_shards -- [STREAMS] [MB_PER_STREAM] [REPS]`
use lowtide::{Config, Stack};
use lowtide_tokio::{Net, TcpListener, TunPacketDevice};
use lowtide_tun::device::{Offload, TunDevice};
use lowtide_tun::netns::{unique_name, NetNs};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Port the server reads (and checks) a stream on.
const SINK: u16 = 9;
/// Port the server writes a stream on.
const SOURCE: u16 = 10;
const CHUNK: usize = 256 * 1024;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize| args.next().map_or(default, |a| a.parse().expect("number"));
    let (streams, mb, reps) = (arg(4), arg(500), arg(3));
    let ns = NetNs::create(&unique_name("ltsh"))?;
    let kernel_ns = NetNs::create(&unique_name("ltshk"))?;
    for n in [&ns, &kernel_ns] {
        n.command("ip").args(["link", "set", "lo", "up"]).status()?;
    }
    veth(&ns, &kernel_ns)?;
    kernel_ns.spawn(|| serve_kernel("10.9.9.2"))?;
    // lowtide with 1 queue on 10.9.1.0/24, with 2 on 10.9.2.0/24 (kernel .1, lowtide .2).
    for q in [1, 2] {
        let devs = TunDevice::open_queues_in(ns.name(), &format!("ltsh{q}"), Offload::Full, q)?;
        devs[0].set_ipv4(format!("10.9.{q}.1").parse().unwrap(), 24)?;
        devs[0].set_up()?;
        std::thread::spawn(move || serve_tokio(devs, q));
    }
    println!("{streams} streams x {mb} MB each way, {reps} repetitions, interleaved");
    println!("| server | direction | goodput (Gbit/s) | CPU s per GB |");
    println!("|---|---|---|---|");
    for rep in 0..reps {
        for (name, ip) in [
            ("lowtide, 1 queue", "10.9.1.2"),
            ("lowtide, 2 queues", "10.9.2.2"),
            ("kernel (veth)", "10.9.9.2"),
        ] {
            for (dir, port) in [("to server", SINK), ("from server", SOURCE)] {
                let ip = ip.to_string();
                let (gbps, cpu_per_gb) = ns
                    .spawn(move || run(&ip, port, streams, mb))?
                    .join()
                    .expect("client");
                println!(
                    "| {name} (rep {}) | {dir} | {gbps:.2} | {cpu_per_gb:.2} |",
                    rep + 1
                );
            }
        }
    }
    Ok(())
}

/// A veth pair: 10.9.9.1 in `a`, 10.9.9.2 in `b`.
fn veth(a: &NetNs, b: &NetNs) -> std::io::Result<()> {
    let run = |ns: &NetNs, args: &[&str]| -> std::io::Result<()> {
        let st = ns.command("ip").args(args).status()?;
        assert!(st.success(), "ip {args:?}");
        Ok(())
    };
    run(
        a,
        &[
            "link",
            "add",
            "vsh0",
            "type",
            "veth",
            "peer",
            "name",
            "vsh1",
            "netns",
            b.name(),
        ],
    )?;
    run(a, &["addr", "add", "10.9.9.1/24", "dev", "vsh0"])?;
    run(a, &["link", "set", "vsh0", "up"])?;
    run(b, &["addr", "add", "10.9.9.2/24", "dev", "vsh1"])?;
    run(b, &["link", "set", "vsh1", "up"])
}

/// Stream `id`: byte `at` is `(at % 251) + id`, a pattern that differs between
/// streams and positions; kept as one period plus a chunk, so that a chunk of it
/// at any position is one slice (filling and checking are `memcpy` and `memcmp`).
struct Pattern(Vec<u8>);

impl Pattern {
    fn new(id: u8) -> Pattern {
        Pattern(
            (0..CHUNK + 251)
                .map(|i| ((i % 251) as u8).wrapping_add(id))
                .collect(),
        )
    }

    /// The `n` bytes (at most [`CHUNK`]) from position `at`.
    fn at(&self, at: usize, n: usize) -> &[u8] {
        &self.0[at % 251..at % 251 + n]
    }
}

/// `streams` kernel clients on `port` at once, `mb` MB each, checked at the
/// receiver: the aggregate goodput and the process's CPU seconds per GB.
fn run(ip: &str, port: u16, streams: usize, mb: usize) -> (f64, f64) {
    let (cpu0, t) = (cpu_seconds(), Instant::now());
    let clients: Vec<_> = (0..streams)
        .map(|i| {
            let ip = ip.to_string();
            std::thread::spawn(move || client(&ip, port, i as u8 + 1, mb << 20))
        })
        .collect();
    for c in clients {
        assert!(c.join().unwrap(), "a stream arrived damaged");
    }
    let (secs, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    let gb = (streams * (mb << 20)) as f64 / 1e9;
    (gb * 8.0 / secs, cpu / gb)
}

/// One client stream: says its id and length, then sends (SINK: the server checks
/// and answers one byte, 1 if whole) or reads and checks (SOURCE).
fn client(ip: &str, port: u16, id: u8, len: usize) -> bool {
    let mut s = TcpStream::connect((ip, port)).expect("connect");
    let mut head = [0u8; 9];
    head[0] = id;
    head[1..].copy_from_slice(&(len as u64).to_be_bytes());
    s.write_all(&head).unwrap();
    let (p, mut buf, mut at) = (Pattern::new(id), vec![0u8; CHUNK], 0);
    if port == SINK {
        while at < len {
            let n = CHUNK.min(len - at);
            s.write_all(p.at(at, n)).unwrap();
            at += n;
        }
        s.shutdown(Shutdown::Write).unwrap();
        let mut ok = [0u8];
        return s.read_exact(&mut ok).is_ok() && ok[0] == 1;
    }
    let mut whole = true;
    while let Ok(n @ 1..) = s.read(&mut buf) {
        whole &= at + n <= len && buf[..n] == *p.at(at, n);
        at += n;
    }
    whole && at == len
}

/// The process's CPU time so far (`getrusage(RUSAGE_SELF)`, user + system).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The SINK and SOURCE servers through the tokio API, sharded over the device's
/// queues, on a two-worker runtime.
fn serve_tokio(devs: Vec<TunDevice>, q: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stacks = (0..devs.len())
            .map(|_| {
                let mut s = Stack::new(Config::default(), 7);
                s.add_address(format!("10.9.{q}.2").parse().unwrap());
                s
            })
            .collect();
        let devs = devs.into_iter().map(|d| TunPacketDevice::new(d).unwrap());
        let net = Net::new_sharded(stacks, devs.collect()).unwrap();
        for port in [SINK, SOURCE] {
            let l = TcpListener::bind(&net, format!("10.9.{q}.2:{port}")).unwrap();
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    tokio::spawn(serve_stream(s, port));
                }
            });
        }
        std::future::pending::<()>().await
    });
}

/// One stream on the tokio server.
async fn serve_stream(mut s: lowtide_tokio::TcpStream, port: u16) {
    let mut head = [0u8; 9];
    if s.read_exact(&mut head).await.is_err() {
        return;
    }
    let (id, len) = (
        head[0],
        u64::from_be_bytes(head[1..].try_into().unwrap()) as usize,
    );
    let (p, mut buf, mut at) = (Pattern::new(id), vec![0u8; CHUNK], 0);
    if port == SINK {
        let mut whole = true;
        while let Ok(n @ 1..) = s.read(&mut buf).await {
            whole &= at + n <= len && buf[..n] == *p.at(at, n);
            at += n;
        }
        let _ = s.write_all(&[u8::from(whole && at == len)]).await;
        return;
    }
    while at < len {
        let n = CHUNK.min(len - at);
        if s.write_all(p.at(at, n)).await.is_err() {
            return;
        }
        at += n;
    }
    let _ = s.shutdown().await;
}

/// The same servers with kernel sockets, a thread per stream.
fn serve_kernel(ip: &str) {
    for port in [SINK, SOURCE] {
        let l = std::net::TcpListener::bind((ip, port)).unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                std::thread::spawn(move || {
                    let mut head = [0u8; 9];
                    s.read_exact(&mut head).unwrap();
                    let (id, len) = (head[0], u64::from_be_bytes(head[1..].try_into().unwrap()));
                    let (len, mut at, mut buf) = (len as usize, 0, vec![0u8; CHUNK]);
                    let p = Pattern::new(id);
                    if port == SINK {
                        let mut whole = true;
                        while let Ok(n @ 1..) = s.read(&mut buf) {
                            whole &= at + n <= len && buf[..n] == *p.at(at, n);
                            at += n;
                        }
                        let _ = s.write_all(&[u8::from(whole && at == len)]);
                        return;
                    }
                    while at < len {
                        let n = CHUNK.min(len - at);
                        s.write_all(p.at(at, n)).unwrap();
                        at += n;
                    }
                    let _ = s.shutdown(Shutdown::Write);
                });
            }
        });
    }
    std::thread::sleep(Duration::MAX);
}

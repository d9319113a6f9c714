//! Benchmark: echo round trips and bulk goodput from a kernel client to a server
//! that is (1) lowtide through this crate's tokio API, (2) lowtide's raw engine on
//! the same TUN path (`lowtide_tun::runtime::Runtime`, no impairments), or (3) the
//! kernel itself over loopback. The client is always a kernel socket, so the three
//! rows differ only in the server side. Needs root: it makes its own namespace.
//!
//! Shows: how the async API compares with driving the engine by hand.
//! Run: `cargo run --release -p lowtide-tokio --example tun_bench -- [ROUND_TRIPS] [BULK_MB]`
use lowtide::{Config, Stack};
use lowtide_tokio::{Net, TcpListener, TunPacketDevice};
use lowtide_tun::device::{Offload, TunDevice};
use lowtide_tun::netns::{unique_name, NetNs};
use lowtide_tun::runtime::{Runtime, RuntimeConfig};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MSG: usize = 64;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let trips: usize = args
        .next()
        .map_or(20_000, |a| a.parse().expect("ROUND_TRIPS"));
    let bulk_mb: usize = args.next().map_or(2_000, |a| a.parse().expect("BULK_MB"));
    let ns = NetNs::create(&unique_name("ltbench"))?;
    ns.command("ip")
        .args(["link", "set", "lo", "up"])
        .status()?;
    println!("| server | echo RTT mean (us) | p50 | p99 | bulk goodput (Gbit/s) |");
    println!("|---|---|---|---|---|");
    // Each mode gets its own device and subnet (10.9.N.0/24: kernel .1, lowtide .2);
    // a finished server thread keeps running until the process exits.
    for (n, mode) in ["tokio", "raw", "kernel"].into_iter().enumerate() {
        let dev = TunDevice::open_in(ns.name(), &format!("ltb{n}"), Offload::Full)?;
        dev.set_ipv4(format!("10.9.{n}.1").parse().unwrap(), 24)?;
        dev.set_up()?;
        let ip = format!("10.9.{n}.2");
        let server = match mode {
            "tokio" => std::thread::spawn(move || serve_tokio(dev, n)),
            "raw" => std::thread::spawn(move || serve_raw(dev, n)),
            _ => ns.spawn(serve_kernel)?,
        };
        let ip = if mode == "kernel" {
            "127.0.0.1".into()
        } else {
            ip
        };
        let (rtts, gbps) = ns
            .spawn(move || client(&ip, trips, bulk_mb))?
            .join()
            .expect("client");
        drop(server); // detached: it ends with the process
        let us = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize];
        let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
        println!(
            "| {mode} | {mean:.1} | {:.1} | {:.1} | {gbps:.2} |",
            us(0.5),
            us(0.99)
        );
    }
    Ok(())
}

/// The kernel client: `trips` 64-byte echoes on port 7, then `bulk_mb` MB to the
/// discard port 9, timed from the first byte until the server closes after EOF.
fn client(ip: &str, trips: usize, bulk_mb: usize) -> (Vec<f64>, f64) {
    let connect = |port| {
        let a = format!("{ip}:{port}").parse().unwrap();
        for _ in 0..100 {
            if let Ok(s) = TcpStream::connect_timeout(&a, Duration::from_secs(2)) {
                s.set_nodelay(true).unwrap();
                return s;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("cannot connect to {a}");
    };
    let mut s = connect(7);
    let (msg, mut back) = ([7u8; MSG], [0u8; MSG]);
    let mut rtts = Vec::with_capacity(trips);
    for _ in 0..trips {
        let t = Instant::now();
        s.write_all(&msg).unwrap();
        s.read_exact(&mut back).unwrap();
        rtts.push(t.elapsed().as_secs_f64() * 1e6);
    }
    rtts.sort_by(f64::total_cmp);
    let mut s = connect(9);
    let chunk = vec![0u8; 1 << 20];
    let t = Instant::now();
    for _ in 0..bulk_mb {
        s.write_all(&chunk).unwrap();
    }
    s.shutdown(Shutdown::Write).unwrap();
    let _ = s.read(&mut [0u8; 1]);
    let gbps = (bulk_mb << 20) as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e9;
    (rtts, gbps)
}

fn lowtide_stack(n: usize) -> Stack {
    let mut s = Stack::new(Config::default(), 7);
    s.add_address(format!("10.9.{n}.2").parse().unwrap());
    s
}

/// Echo on 7 and discard on 9 through the tokio API.
fn serve_tokio(dev: TunDevice, n: usize) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let net = Net::new(lowtide_stack(n), TunPacketDevice::new(dev).unwrap());
        for port in [7, 9] {
            let l = TcpListener::bind(&net, format!("10.9.{n}.2:{port}")).unwrap();
            tokio::spawn(async move {
                while let Ok((mut s, _)) = l.accept().await {
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 256 * 1024];
                        while let Ok(n @ 1..) = s.read(&mut buf).await {
                            if port == 7 && s.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
        }
        std::future::pending::<()>().await
    });
}

/// Echo on 7 and discard on 9 on the raw engine, driven by hand.
fn serve_raw(dev: TunDevice, n: usize) {
    let cfg = RuntimeConfig {
        offload: Offload::Full,
        egress: Default::default(),
        ingress: Default::default(),
        seed: 1,
        busy_poll: Duration::ZERO,
    };
    let mut rt = Runtime::new(lowtide_stack(n), dev, cfg).unwrap();
    let at = |port| format!("10.9.{n}.2:{port}").parse().unwrap();
    let l7 = rt.stack().listen(at(7), 16).unwrap();
    let l9 = rt.stack().listen(at(9), 16).unwrap();
    let mut conns = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        rt.turn(None, Duration::from_millis(10)).unwrap();
        let now = rt.now();
        let st = rt.stack();
        for (l, echo) in [(l7, true), (l9, false)] {
            while let Ok(h) = st.accept(l) {
                conns.push((h, echo, Vec::<u8>::new()));
            }
        }
        conns.retain_mut(|(h, echo, pending)| {
            if !pending.is_empty() {
                let n = st.send(now, *h, pending).unwrap_or(0);
                pending.drain(..n);
            }
            while pending.is_empty() {
                match st.recv(now, *h, &mut buf) {
                    Ok(0) | Err(lowtide::SocketError::BadHandle) => {
                        let _ = st.close(now, *h);
                        return false;
                    }
                    Ok(n) if *echo => {
                        let sent = st.send(now, *h, &buf[..n]).unwrap_or(0);
                        pending.extend_from_slice(&buf[sent..n]);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            true
        });
    }
}

/// Echo on 7 and discard on 9 with kernel sockets on loopback.
fn serve_kernel() {
    for port in [7u16, 9] {
        let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 256 * 1024];
                    while let Ok(n @ 1..) = s.read(&mut buf) {
                        if port == 7 && s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
    }
    std::thread::sleep(Duration::MAX);
}

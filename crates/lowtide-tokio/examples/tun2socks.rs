//! A small tun2socks: every TCP connection and UDP flow that the kernel routes into
//! the TUN device, to any address and port, is accepted by lowtide's catch-all
//! sockets and carried on over the host's own sockets to the destination the
//! client asked for; pings are answered by lowtide itself.
//!
//! Shows: `TcpListener::bind_catch_all` with `TcpStream::original_dst`,
//! `UdpSocket::bind_catch_all` with `recv_datagram` (the datagram's original
//! destination) and `send_from` (the answer, from that destination), one host UDP
//! socket per flow, closed after `UDP_IDLE` without traffic.
//!
//! The device may live in another network namespace than the program (the second
//! argument, `/run/netns/NAME`): clients there route into it (`ip route add default
//! dev DEVICE`), while the program's own sockets use its namespace's routes. In one
//! namespace, keep the program's sockets out of the device with a mark and a rule
//! instead (`SO_MARK` and `ip rule add not fwmark 1 iif lo table 100`).
//!   cargo run -p lowtide-tokio --example tun2socks -- [DEVICE] [NETNS]
use lowtide_tokio::lowtide::{Config, Stack};
use lowtide_tokio::{Net, Offload, TcpListener, TunDevice, TunPacketDevice, UdpSocket};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A UDP flow without a datagram either way for this long is closed (Linux's
/// conntrack keeps an unreplied UDP flow 30 s).
const UDP_IDLE: Duration = Duration::from_secs(30);

type Flows = Arc<Mutex<HashMap<(SocketAddr, SocketAddr), Arc<tokio::net::UdpSocket>>>>;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "lt0".into());
    let dev = match args.next() {
        Some(ns) => TunDevice::open_in(&ns, &name, Offload::Full)?,
        None => TunDevice::open(&name, Offload::Full)?,
    };
    dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?;
    dev.set_up()?;
    // No address of its own: the catch-all sockets answer for every destination.
    let stack = Stack::new(Config::default(), 0); // Net::new keys it from getrandom(2)
    let net = Net::new(stack, TunPacketDevice::new(dev)?);
    let tcp = TcpListener::bind_catch_all(&net)?;
    let udp = Arc::new(UdpSocket::bind_catch_all(&net)?);
    println!("forwarding TCP and UDP from {name}");
    tokio::spawn(udp_loop(udp));
    loop {
        let (mut inbound, peer) = tcp.accept().await?;
        tokio::spawn(async move {
            let dst = inbound.original_dst()?;
            let mut out = tokio::net::TcpStream::connect(dst).await?;
            let r = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
            println!("tcp {peer} -> {dst}: {r:?}");
            std::io::Result::Ok(())
        });
    }
}

/// Datagrams from the device: each flow (client, destination) gets a host socket
/// connected to the destination, and a task that sends the answers back.
async fn udp_loop(udp: Arc<UdpSocket>) -> std::io::Result<()> {
    let flows: Flows = Arc::default();
    loop {
        let d = udp.recv_datagram().await?;
        let key = (d.src, d.dst);
        let known = flows.lock().unwrap().get(&key).cloned();
        let out = match known {
            Some(out) => out,
            None => {
                let any: SocketAddr = match d.dst {
                    SocketAddr::V4(_) => ([0, 0, 0, 0], 0).into(),
                    SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
                };
                let out = Arc::new(tokio::net::UdpSocket::bind(any).await?);
                out.connect(d.dst).await?;
                flows.lock().unwrap().insert(key, out.clone());
                println!("udp {} -> {}", d.src, d.dst);
                tokio::spawn(udp_answers(udp.clone(), out.clone(), key, flows.clone()));
                out
            }
        };
        // A datagram the host refuses (no route, ...) is lost, as UDP's are.
        let _ = out.send(&d.data).await;
    }
}

/// Sends what the destination answers back to the client, from the destination.
async fn udp_answers(
    udp: Arc<UdpSocket>,
    out: Arc<tokio::net::UdpSocket>,
    (client, dst): (SocketAddr, SocketAddr),
    flows: Flows,
) {
    let mut buf = vec![0u8; 65536];
    while let Ok(Ok(n)) = tokio::time::timeout(UDP_IDLE, out.recv(&mut buf)).await {
        if udp.send_from(&buf[..n], dst, client).await.is_err() {
            break;
        }
    }
    flows.lock().unwrap().remove(&(client, dst));
}

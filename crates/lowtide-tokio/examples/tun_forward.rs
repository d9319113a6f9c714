//! A tun2proxy-style port forwarder: every TCP connection the kernel opens through
//! the TUN device, to *any* address and port, is accepted by lowtide's catch-all
//! listener and relayed to an upstream over a kernel socket.
//!
//! Shows: `TcpListener::bind_catch_all`, `TcpStream::original_dst` (the address the
//! client asked for), and `copy_bidirectional` between a lowtide stream and a
//! `tokio::net::TcpStream`. Route what should be captured to the device (here the
//! whole 10.9.0.0/24 but 10.9.0.1) and name the upstream:
//!   cargo run -p lowtide-tokio --example tun_forward -- [DEVICE] [UPSTREAM]
//! e.g. UPSTREAM 127.0.0.1:9000; then `nc 10.9.0.77 80` reaches the upstream.
use lowtide_tokio::lowtide::{Config, Stack};
use lowtide_tokio::{Net, TcpListener, TunPacketDevice};
use lowtide_tokio::{Offload, TunDevice};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "lt0".into());
    let upstream = args.next().unwrap_or_else(|| "127.0.0.1:9000".into());
    let dev = TunDevice::open(&name, Offload::Full)?;
    dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?;
    dev.set_up()?;
    // No address of its own: the catch-all listener answers for every destination.
    let stack = Stack::new(Config::default(), 0); // Net::new keys it from getrandom(2)
    let net = Net::new(stack, TunPacketDevice::new(dev)?);
    let listener = TcpListener::bind_catch_all(&net)?;
    println!("forwarding every TCP connection on {name} to {upstream}");
    loop {
        let (mut inbound, peer) = listener.accept().await?;
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let dst = inbound.original_dst().ok();
            let relayed = match tokio::net::TcpStream::connect(&upstream).await {
                Ok(mut out) => tokio::io::copy_bidirectional(&mut inbound, &mut out).await,
                Err(e) => Err(e),
            };
            println!("{peer} -> {dst:?} via {upstream}: {relayed:?}");
        });
    }
}

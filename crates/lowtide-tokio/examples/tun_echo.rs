//! An echo server on lowtide, reached by the kernel's TCP through a TUN device.
//!
//! Shows: opening a TUN device with GSO offload (`lowtide-tun`), giving the kernel one
//! address (10.9.0.1/24) and lowtide another (10.9.0.2), `TcpListener::accept` and a
//! task per connection with `into_split` halves.
//! Run as root (best in a namespace: `ip netns add t; ip netns exec t ...`):
//!   cargo run -p lowtide-tokio --example tun_echo -- [DEVICE]
//! then from the kernel: `nc 10.9.0.2 7`.
use lowtide_tokio::lowtide::{Config, Stack};
use lowtide_tokio::{Net, TcpListener, TunPacketDevice};
use lowtide_tokio::{Offload, TunDevice};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "lt0".into());
    let dev = TunDevice::open(&name, Offload::Full)?;
    dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?; // the kernel's side
    dev.set_up()?;
    let mut stack = Stack::new(Config::default(), 0); // Net::new keys it from getrandom(2)
    stack.add_address("10.9.0.2".parse().unwrap()); // lowtide's side
    let net = Net::new(stack, TunPacketDevice::new(dev)?);
    let listener = TcpListener::bind(&net, "10.9.0.2:7")?;
    println!("echo server on 10.9.0.2:7 (device {name})");
    loop {
        let (stream, peer) = listener.accept().await?;
        tokio::spawn(async move {
            let (mut r, mut w) = stream.into_split();
            let n = tokio::io::copy(&mut r, &mut w).await;
            println!("{peer}: echoed {n:?} bytes");
        });
    }
}

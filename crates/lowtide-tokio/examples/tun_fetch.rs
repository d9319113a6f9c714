//! A lowtide client fetching from a kernel server through a TUN device: sends an
//! HTTP/1.0 GET (any server that answers and closes will do) and reads to the end.
//!
//! Shows: `TcpStream::connect` from lowtide's address (10.9.0.2) to the kernel's
//! (10.9.0.1), `set_nodelay`, `read_to_end`, `tcp_info()` after the transfer, and
//! `Net::shutdown` to close cleanly before the program ends.
//! Run as root, with a server on the kernel's side (e.g. `python3 -m http.server
//! --bind 10.9.0.1 8000` once the device exists):
//!   cargo run -p lowtide-tokio --example tun_fetch -- [DEVICE] [10.9.0.1:8000]
use lowtide_tokio::lowtide::{Config, Stack};
use lowtide_tokio::{Net, TcpStream, TunPacketDevice};
use lowtide_tokio::{Offload, TunDevice};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "lt0".into());
    let server = args.next().unwrap_or_else(|| "10.9.0.1:8000".into());
    let server: std::net::SocketAddr = server.parse().map_err(std::io::Error::other)?;
    let dev = TunDevice::open(&name, Offload::Full)?;
    dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?;
    dev.set_up()?;
    let mut stack = Stack::new(Config::default(), 0); // Net::new keys it from getrandom(2)
    stack.add_address("10.9.0.2".parse().unwrap());
    let net = Net::new(stack, TunPacketDevice::new(dev)?);
    let start = std::time::Instant::now();
    let mut s = TcpStream::connect(&net, server).await?;
    s.set_nodelay(true)?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: lowtide\r\n\r\n")
        .await?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).await?;
    let i = s.tcp_info()?;
    println!(
        "fetched {} bytes from {server} in {:?}: srtt {} us, {} retransmits",
        body.len(),
        start.elapsed(),
        i.rtt,
        i.total_retrans
    );
    // Let the ACK of the server's FIN and our own FIN leave before the runtime
    // (and the driver with it) ends, or the server is left in FIN-WAIT.
    drop(s);
    net.shutdown(std::time::Duration::from_secs(5)).await
}

//! Two lowtide stacks in one process, joined by an in-memory link with 10 ms of delay
//! each way, in virtual time: tokio's paused clock jumps whenever every task waits, so
//! a 10 MB transfer takes milliseconds of wall time. No root, no device.
//!
//! Shows: `Net` over `channel_pair`, `TcpListener::bind`/`accept`, `TcpStream::connect`,
//! `write_all` + `shutdown` (FIN), `read_to_end`, `tcp_info()`, `Net::shutdown`.
//! Run: `cargo run -p lowtide-tokio --example sim_pair`
use lowtide::{Config, Stack};
use lowtide_tokio::{channel_pair, Net, TcpListener, TcpStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> std::io::Result<()> {
    let host = |ip: &str, seed| {
        let mut s = Stack::new(Config::default(), seed);
        s.add_address(ip.parse().unwrap());
        s
    };
    let (dev_a, dev_b) = channel_pair(std::time::Duration::from_millis(10));
    let (a, b) = (
        Net::new(host("10.0.0.1", 1), dev_a),
        Net::new(host("10.0.0.2", 2), dev_b),
    );
    let listener = TcpListener::bind(&b, "10.0.0.2:80")?;
    let server = tokio::spawn(async move {
        let (mut s, peer) = listener.accept().await?;
        let mut got = Vec::new();
        s.read_to_end(&mut got).await?;
        Ok::<_, std::io::Error>((got, peer))
    });
    let start = tokio::time::Instant::now();
    let mut c = TcpStream::connect(&a, "10.0.0.2:80").await?;
    let data: Vec<u8> = (0..10_000_000u32).map(|i| (i % 251) as u8).collect();
    c.write_all(&data).await?;
    c.shutdown().await?;
    let (got, peer) = server.await??;
    assert!(got == data && peer == c.local_addr()?, "transfer corrupted");
    let i = c.tcp_info()?;
    let t = start.elapsed();
    println!(
        "{} bytes from {peer} in {t:?} (virtual): srtt {} us, cwnd {}",
        got.len(),
        i.rtt,
        i.snd_cwnd
    );
    // A graceful end: the FIN exchange finishes before the runtime stops.
    drop(c);
    a.shutdown(std::time::Duration::from_secs(5)).await?;
    b.shutdown(std::time::Duration::from_secs(5)).await
}

#[test]
fn sim_pair_transfers_10_mb() {
    main().unwrap();
}

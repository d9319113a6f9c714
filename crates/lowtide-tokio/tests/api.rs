//! The async API over a channel pair in virtual time (tokio's paused clock).

use lowtide::{Config, Stack};
use lowtide_tokio::{channel_pair, Net, TcpListener, TcpStream};
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

fn host(ip: &str, seed: u64) -> Stack {
    let mut s = Stack::new(Config::default(), seed);
    s.add_address(ip.parse().unwrap());
    s
}

/// Two stacks, 10.0.0.1 and 10.0.0.2, 5 ms apart each way.
fn pair() -> (Net, Net) {
    let (da, db) = channel_pair(Duration::from_millis(5));
    (
        Net::new(host("10.0.0.1", 1), da),
        Net::new(host("10.0.0.2", 2), db),
    )
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn echo_over_split_halves() {
    let (a, b) = pair();
    let l = TcpListener::bind(&b, addr("10.0.0.2:7")).unwrap();
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let (mut r, mut w) = s.into_split();
        tokio::io::copy(&mut r, &mut w).await.unwrap();
    });
    let c = TcpStream::connect(&a, addr("10.0.0.2:7")).await.unwrap();
    c.set_nodelay(true).unwrap();
    assert!(c.nodelay().unwrap());
    assert_eq!(c.peer_addr().unwrap(), addr("10.0.0.2:7"));
    let (mut r, mut w) = tokio::io::split(c);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    let send = data.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&send).await.unwrap();
        w.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    r.read_to_end(&mut back).await.unwrap();
    writer.await.unwrap();
    assert_eq!(back, data);
}

#[tokio::test(start_paused = true)]
async fn refused_connect_is_connection_refused() {
    let (a, _b) = pair();
    let e = TcpStream::connect(&a, addr("10.0.0.2:9"))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    // As a kernel socket's: the errno, and std's text for it.
    assert_eq!(e.raw_os_error(), Some(111));
    assert_eq!(e.to_string(), "Connection refused (os error 111)");
}

#[tokio::test(start_paused = true)]
async fn addresses_as_tokio_takes_them_and_debug_output() {
    let (a, b) = pair();
    let l = TcpListener::bind(&b, "10.0.0.2:7").unwrap();
    let c = TcpStream::connect(&a, ("10.0.0.2", 7)).await.unwrap();
    let (s, peer) = l.accept().await.unwrap();
    let (c_dbg, s_dbg) = (format!("{c:?}"), format!("{s:?}"));
    assert!(c_dbg.contains(&format!("local: {peer}")), "{c_dbg}");
    assert!(c_dbg.contains("peer: 10.0.0.2:7"), "{c_dbg}");
    assert!(s_dbg.contains(&format!("peer: {peer}")), "{s_dbg}");
    assert!(format!("{l:?}").contains("local: 10.0.0.2:7"), "{l:?}");
    let net = format!("{b:?}");
    assert!(net.starts_with("Net { connections: 1, live: 1"), "{net}");
    // Inside with_host the stack is locked: Debug says less rather than deadlock.
    let inside = b.with_host(|_| format!("{s:?}"));
    assert!(
        inside.starts_with("TcpStream { sock: Socket { fd: ")
            && inside.ends_with(" } }")
            && !inside.contains("peer"),
        "{inside}"
    );
    // Of several addresses, the first that works; none at all is std's error.
    let none: &[SocketAddr] = &[];
    let e = TcpListener::bind(&b, none).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let two = [addr("10.0.0.2:7"), addr("10.0.0.2:8")];
    let l8 = TcpListener::bind(&b, &two[..]).unwrap();
    assert_eq!(l8.local_addr().unwrap(), addr("10.0.0.2:8"));
}

#[tokio::test(start_paused = true)]
async fn counters_by_nstat_name() {
    let (a, b) = pair();
    let l = TcpListener::bind(&b, "10.0.0.2:7").unwrap();
    let _c = TcpStream::connect(&a, "10.0.0.2:7").await.unwrap();
    // B counts its passive open when the final ACK makes the child
    // (tcp_create_openreq_child), which the accept waits for; connect returns at the
    // SYN-ACK, before that ACK arrives.
    let _s = l.accept().await.unwrap();
    assert_eq!(a.counters().by_name("TcpActiveOpens"), Some(1));
    assert_eq!(b.counters().by_name("TcpPassiveOpens"), Some(1));
    assert_eq!(a.counters().by_name("NoSuchCounter"), None);
}

#[tokio::test(start_paused = true)]
async fn unanswered_connect_times_out() {
    let (da, _db) = channel_pair(Duration::from_millis(5));
    let mut s = host("10.0.0.1", 1);
    s.set_sysctl(lowtide::Instant::ZERO, "net.ipv4.tcp_syn_retries", "2")
        .unwrap();
    let a = Net::new(s, da);
    // Nobody owns 10.0.0.3: B drops the SYNs.
    let e = TcpStream::connect(&a, addr("10.0.0.3:80"))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
}

#[tokio::test(start_paused = true)]
async fn catch_all_listener_sees_original_destination() {
    let (a, b) = pair();
    let l = TcpListener::bind_catch_all(&b).unwrap();
    assert_eq!(
        TcpListener::bind_catch_all(&b).err().unwrap().kind(),
        io::ErrorKind::AddrInUse
    );
    for dst in ["198.51.100.9:443", "203.0.113.1:22"] {
        let mut c = TcpStream::connect(&a, addr(dst)).await.unwrap();
        let (mut s, peer) = l.accept().await.unwrap();
        assert_eq!(s.original_dst().unwrap(), addr(dst));
        assert_eq!(peer, c.local_addr().unwrap());
        c.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
    }
}

/// Runs a writer with TCP_NOTSENT_LOWAT `LOWAT` for 0.5 s of virtual time; returns
/// how often it blocked and the most bytes left unsent when it resumed.
async fn lowat_writer(hysteresis: bool) -> (u32, u32) {
    // A 100 Mbit/s sender side, so that ACKs come one by one and notsent drains
    // gradually, as on a real path (on an unlimited channel a whole flight is
    // acked in one instant and every wake finds the queue empty).
    let (da, db) = channel_pair(Duration::from_millis(5));
    let da = da.with_rate(100_000_000);
    let mut sa = host("10.0.0.1", 1);
    let v = if hysteresis { "true" } else { "false" };
    sa.set_sysctl(
        lowtide::Instant::ZERO,
        "experimental.notsent_wake_hysteresis",
        v,
    )
    .unwrap();
    let (a, b) = (Net::new(sa, da), Net::new(host("10.0.0.2", 2), db));
    let l = TcpListener::bind(&b, addr("10.0.0.2:5001")).unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).await.unwrap();
    });
    let mut c = TcpStream::connect(&a, addr("10.0.0.2:5001")).await.unwrap();
    c.set_notsent_lowat(LOWAT).unwrap();
    assert_eq!(c.notsent_lowat().unwrap(), LOWAT);
    let chunk = vec![0u8; 16 * 1024];
    let (mut blocked, mut worst) = (0, 0);
    let end = tokio::time::Instant::now() + Duration::from_millis(500);
    while tokio::time::Instant::now() < end {
        let mut was_pending = false;
        poll_fn(|cx| match Pin::new(&mut c).poll_write(cx, &chunk) {
            Poll::Pending => {
                was_pending = true;
                Poll::Pending
            }
            Poll::Ready(r) => Poll::Ready(r),
        })
        .await
        .unwrap();
        let notsent = c.tcp_info().unwrap().notsent_bytes as u32;
        // tcp_sendmsg checks sk_stream_memory_free per skb, so a write may overshoot
        // the mark by up to one skb of size_goal (64 KB).
        assert!(
            notsent <= LOWAT + 65536 + chunk.len() as u32,
            "cap: {notsent}"
        );
        if was_pending {
            blocked += 1;
            // The write that ended the wait took at most one chunk.
            worst = worst.max(notsent.saturating_sub(chunk.len() as u32));
        }
    }
    (blocked, worst)
}

const LOWAT: u32 = 64 * 1024;

/// Seed 001 as a tokio user sees it: with TCP_NOTSENT_LOWAT L, a writer that found
/// the socket full resumes only once fewer than L/2 bytes are unsent (and, with the
/// hysteresis switched off, earlier: the test can tell).
#[tokio::test(start_paused = true)]
async fn writer_wakes_below_half_notsent_lowat() {
    let (blocked, worst) = lowat_writer(true).await;
    assert!(blocked > 10, "writer blocked {blocked} times");
    assert!(
        worst < LOWAT / 2,
        "woken with {worst} unsent (lowat {LOWAT})"
    );
    let (blocked, worst) = lowat_writer(false).await;
    assert!(blocked > 10, "writer blocked {blocked} times");
    assert!(
        worst >= LOWAT / 2,
        "without hysteresis: woken with at most {worst} unsent"
    );
}

#[tokio::test(start_paused = true)]
async fn ipv6_connection() {
    let (da, db) = channel_pair(Duration::from_millis(1));
    let (a, b) = (
        Net::new(host("fd00::1", 1), da),
        Net::new(host("fd00::2", 2), db),
    );
    let l = TcpListener::bind(&b, addr("[fd00::2]:80")).unwrap();
    let mut c = TcpStream::connect(&a, addr("[fd00::2]:80")).await.unwrap();
    let (mut s, peer) = l.accept().await.unwrap();
    assert_eq!(peer, c.local_addr().unwrap());
    c.write_all(&[9u8; 100_000]).await.unwrap();
    drop(c);
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, vec![9u8; 100_000]);
}

#[tokio::test(start_paused = true)]
async fn device_error_reaches_the_sockets() {
    let a = Net::new(host("10.0.0.1", 1), Recorder::broken());
    let e = TcpStream::connect(&a, addr("10.0.0.2:80"))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    assert!(e.to_string().contains("tunnel closed"), "{e}");
    let e = TcpListener::bind(&a, addr("10.0.0.1:80")).err().unwrap();
    assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
}

#[tokio::test(start_paused = true)]
async fn keepalive_detects_a_vanished_peer() {
    use lowtide::tcp::keepalive::Keepalive;
    let (a, b) = pair();
    let l = TcpListener::bind(&b, addr("10.0.0.2:80")).unwrap();
    let mut c = TcpStream::connect(&a, addr("10.0.0.2:80")).await.unwrap();
    let (_s, _) = l.accept().await.unwrap();
    let bad = Keepalive {
        enabled: true,
        probes: Some(0),
        ..Keepalive::default()
    };
    assert_eq!(
        c.set_keepalive(bad).unwrap_err().kind(),
        io::ErrorKind::InvalidInput
    );
    c.set_keepalive(Keepalive {
        enabled: true,
        idle: Some(Duration::from_secs(10)),
        interval: Some(Duration::from_secs(2)),
        probes: Some(3),
    })
    .unwrap();
    // The peer's host goes away without a word (its stack and device dropped).
    drop((_s, l, b));
    let start = tokio::time::Instant::now();
    let mut buf = [0u8; 16];
    let e = c.read(&mut buf).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    // idle + probes x interval (tcp_keepalive_timer).
    assert_eq!(start.elapsed().as_secs(), 16);
}

/// A user's device that keeps what the stack sends and never answers; or, broken,
/// fails to send (the driver stops and socket calls say why).
struct Recorder(std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>, bool);

impl Recorder {
    fn broken() -> Recorder {
        Recorder(std::sync::Arc::default(), true)
    }
}

impl lowtide_tokio::PacketDevice for Recorder {
    fn poll_recv(
        &mut self,
        _: &mut std::task::Context<'_>,
        _: &mut Vec<u8>,
    ) -> Poll<io::Result<lowtide::RxChecksum>> {
        Poll::Pending
    }

    fn send(&mut self, tx: &lowtide::Transmit) -> io::Result<()> {
        if self.1 {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "tunnel closed"));
        }
        self.0.lock().unwrap().push(tx.packet.to_vec());
        Ok(())
    }
}

/// The SYN a stack made with seed 1 sends to 10.0.0.2:80 (its port, ISN, TSval).
async fn first_syn(net: impl FnOnce(Stack, Recorder) -> Net) -> Vec<u8> {
    let sent = std::sync::Arc::default();
    let a = net(
        host("10.0.0.1", 1),
        Recorder(std::sync::Arc::clone(&sent), false),
    );
    let connect = tokio::spawn(async move { TcpStream::connect(&a, addr("10.0.0.2:80")).await });
    while sent.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    connect.abort();
    let syn = sent.lock().unwrap()[0].clone();
    syn
}

#[tokio::test(start_paused = true)]
async fn stacks_are_keyed_by_the_os_unless_asked_not_to() {
    // RFC 6528 / RFC 6056: the same seed must not give the same port, ISN, TSval.
    let a = first_syn(Net::new).await;
    let b = first_syn(Net::new).await;
    // The TCP header (IPv4 without options: 20 bytes): port, ISN, then TSval.
    assert_ne!(
        a[20..28],
        b[20..28],
        "same port and ISN from two keyed stacks"
    );
    // The opt-in keeps the seed's keys: identical SYNs.
    let c = first_syn(Net::new_deterministic).await;
    let d = first_syn(Net::new_deterministic).await;
    assert_eq!(c, d);
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_closed_connections_finish() {
    let (a, b) = pair();
    let l = TcpListener::bind(&b, addr("10.0.0.2:80")).unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        s.write_all(&[7u8; 50_000]).await.unwrap();
        s.shutdown().await.unwrap();
        // EOF only if the client's FIN leaves after its program ended.
        let n = s.read(&mut [0u8; 16]).await.unwrap();
        (n, s.tcp_info().unwrap().state)
    });
    let mut c = TcpStream::connect(&a, addr("10.0.0.2:80")).await.unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).await.unwrap();
    assert_eq!(got.len(), 50_000);
    drop(c);
    // The program's end: the client's Net goes with its last handle.
    let start = tokio::time::Instant::now();
    a.shutdown(Duration::from_secs(5)).await.unwrap();
    // One round trip (10 ms): the FIN out, its ACK back.
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "{:?}",
        start.elapsed()
    );
    let (n, state) = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server never saw the client's FIN")
        .unwrap();
    assert_eq!(n, 0);
    // It closed first: TIME-WAIT once the client's FIN came, held by a timewait
    // socket; the server's own socket is done (tcp_time_wait -> tcp_done).
    assert_eq!(state, "CLOSED");
    assert_eq!(b.with_host(|h| h.stack().death_row().time_wait), 1);
    assert_eq!(b.with_host(|h| h.stack().closing_count()), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_times_out_on_a_connection_left_open() {
    let (a, b) = pair();
    let l = TcpListener::bind(&b, addr("10.0.0.2:80")).unwrap();
    let c = TcpStream::connect(&a, addr("10.0.0.2:80")).await.unwrap();
    let _s = l.accept().await.unwrap();
    let e = a.shutdown(Duration::from_secs(2)).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    assert!(e.to_string().contains("1 connection(s)"), "{e}");
    drop(c);
}

//! UDP over a channel pair in virtual time: datagrams both ways, a connected
//! socket, the catch-all with the original destination, port unreachable.

use lowtide::{Config, Stack};
use lowtide_tokio::{channel_pair, Net, UdpSocket};
use std::io;
use std::time::Duration;

fn host(ip: &str, seed: u64) -> Stack {
    let mut s = Stack::new(Config::default(), seed);
    s.add_address(ip.parse().unwrap());
    s
}

fn pair(a: &str, b: &str) -> (Net, Net) {
    let (da, db) = channel_pair(Duration::from_millis(5));
    (Net::new(host(a, 1), da), Net::new(host(b, 2), db))
}

#[tokio::test(start_paused = true)]
async fn echo_server_in_both_families() {
    for (a_ip, b_ip, any) in [
        ("10.0.0.1", "10.0.0.2", "0.0.0.0:0"),
        ("fd00::1", "fd00::2", "[::]:0"),
    ] {
        let (a, b) = pair(a_ip, b_ip);
        let server = UdpSocket::bind(&b, (b_ip, 53)).unwrap();
        let task = tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            for _ in 0..3 {
                let (n, from) = server.recv_from(&mut buf).await.unwrap();
                server.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let c = UdpSocket::bind(&a, any).unwrap();
        c.connect((b_ip, 53)).await.unwrap();
        assert!(format!("{c:?}").contains(&format!("peer: {}", c.peer_addr().unwrap())));
        let start = tokio::time::Instant::now();
        for i in 0..3u8 {
            c.send(&[i; 100]).await.unwrap();
            let mut buf = [0u8; 1500];
            assert_eq!(c.recv(&mut buf).await.unwrap(), 100);
            assert_eq!(buf[..100], [i; 100]);
        }
        // Three round trips of 2 x 5 ms.
        assert_eq!(start.elapsed(), Duration::from_millis(30));
        task.await.unwrap();
        assert_eq!(
            a.counters().by_name("UdpOutDatagrams").unwrap()
                + a.counters().by_name("Udp6OutDatagrams").unwrap(),
            3
        );
    }
}

#[tokio::test(start_paused = true)]
async fn catch_all_answers_from_the_original_destination() {
    let (a, b) = pair("10.0.0.1", "10.0.0.2");
    let proxy = UdpSocket::bind_catch_all(&b).unwrap();
    assert_eq!(
        UdpSocket::bind_catch_all(&b).unwrap_err().kind(),
        io::ErrorKind::AddrInUse
    );
    tokio::spawn(async move {
        loop {
            let d = proxy.recv_datagram().await.unwrap();
            let reply = [b"from ".as_slice(), d.dst.to_string().as_bytes()].concat();
            proxy.send_from(&reply, d.dst, d.src).await.unwrap();
        }
    });
    let c = UdpSocket::bind(&a, "10.0.0.1:0").unwrap();
    for dst in ["192.0.2.53:53", "198.51.100.7:123"] {
        c.send_to(b"q", dst).await.unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = c.recv_from(&mut buf).await.unwrap();
        assert_eq!(from.to_string(), dst);
        assert_eq!(&buf[..n], format!("from {dst}").as_bytes());
    }
}

#[tokio::test(start_paused = true)]
async fn no_socket_means_port_unreachable_and_datagrams_past_64k_are_emsgsize() {
    let (a, b) = pair("10.0.0.1", "10.0.0.2");
    let c = UdpSocket::bind(&a, "0.0.0.0:0").unwrap();
    c.send_to(b"anyone?", "10.0.0.2:9").await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.counters().by_name("UdpNoPorts"), Some(1));
    assert_eq!(b.counters().by_name("IcmpOutDestUnreachs"), Some(1));
    assert_eq!(a.counters().by_name("IcmpInDestUnreachs"), Some(1));
    // Over the MTU: fragmented (IP_PMTUDISC_WANT) and reassembled; past IPv4's
    // 64 KB EMSGSIZE.
    assert_eq!(c.send_to(&[0; 1473], "10.0.0.2:9").await.unwrap(), 1473);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(a.counters().by_name("IpFragCreates"), Some(2));
    assert_eq!(b.counters().by_name("IpReasmOKs"), Some(1));
    let e = c.send_to(&[0; 65_508], "10.0.0.2:9").await.unwrap_err();
    assert_eq!(e.raw_os_error(), Some(90), "{e}");
    let e = UdpSocket::bind(&a, "10.0.0.9:1").unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable);
}

//! UDP GSO on a real TUN device in a network namespace (root: skipped with a
//! message otherwise, a failure under LOWTIDE_REQUIRE_PRIVILEGED_TESTS=1): a kernel
//! socket's `UDP_SEGMENT` send crosses the device as one super-packet and reaches a
//! lowtide socket as its datagrams; a lowtide socket's segmented send crosses as one
//! frame and reaches the kernel's socket as datagrams (Linux 6.2+: USO on TUN).

use lowtide::{Config, Stack};
use lowtide_tokio::{Net, Offload, TunDevice, TunPacketDevice, UdpSocket};
use lowtide_tun::netns::{self, privileged, NetNs};
use std::os::fd::AsRawFd;
use std::time::Duration;

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ salt).collect()
}

/// A counter of `dev` in the calling thread's namespace (/proc/thread-self/net/dev:
/// receive packets is field 2, transmit packets field 10).
fn dev_packets(dev: &str, tx: bool) -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{dev}:")))
        .unwrap_or_else(|| panic!("{dev} in /proc/net/dev:\n{text}"));
    let fields: Vec<u64> = line
        .split(':')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    fields[if tx { 9 } else { 1 }]
}

/// Whether the running kernel is at least 6.2 (USO on TUN).
fn kernel_has_uso() -> bool {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = rel
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (v.next().unwrap_or(0), v.next().unwrap_or(0)) >= (6, 2)
}

#[test]
fn udp_gso_crosses_a_tun_device_whole_both_ways() {
    if !privileged("udp_gso_crosses_a_tun_device_whole_both_ways") {
        return;
    }
    if !kernel_has_uso() {
        eprintln!("skipping udp_gso_crosses_a_tun_device_whole_both_ways: the kernel has no USO on TUN (Linux 6.2+)");
        return;
    }
    let ns = NetNs::create(&netns::unique_name("ltu")).expect("create netns");
    ns.spawn(run).unwrap().join().expect("the test thread");
}

fn run() {
    // No IPv6 on the device: its router solicitations would count as packets.
    std::fs::write("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dev = TunDevice::open("ltgso0", Offload::Full).unwrap();
        dev.set_ipv4("10.9.0.1".parse().unwrap(), 24).unwrap();
        dev.set_up().unwrap();
        let mut stack = Stack::new(Config::default(), 0);
        stack.add_address("10.9.0.2".parse().unwrap());
        let pdev = TunPacketDevice::new(dev).unwrap();
        assert!(
            pdev.device().uso(),
            "TUN_F_USO4|USO6 refused by a 6.2+ kernel"
        );
        let net = Net::new(stack, pdev);
        let ours = UdpSocket::bind(&net, "10.9.0.2:5000").unwrap();
        let kernel = std::net::UdpSocket::bind("10.9.0.1:0").unwrap();
        kernel.set_nonblocking(true).unwrap();
        let kernel = tokio::net::UdpSocket::from_std(kernel).unwrap();
        let seg: libc::c_int = 1000;
        // SAFETY: setsockopt(SOL_UDP, UDP_SEGMENT) reads an int.
        let r = unsafe {
            libc::setsockopt(
                kernel.as_raw_fd(),
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                (&seg as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(r, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
        let wait = Duration::from_secs(5);

        // Kernel -> lowtide: one super-packet on the device, three datagrams here.
        let before = dev_packets("ltgso0", true);
        let data = pattern(2500, 0);
        kernel.send_to(&data, "10.9.0.2:5000").await.unwrap();
        let mut got = Vec::new();
        let mut lens = Vec::new();
        for _ in 0..3 {
            let mut buf = [0u8; 2000];
            let (n, from) = tokio::time::timeout(wait, ours.recv_from(&mut buf))
                .await
                .expect("a datagram")
                .unwrap();
            assert_eq!(from, kernel.local_addr().unwrap());
            lens.push(n);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!((lens, got == data), (vec![1000, 1000, 500], true));
        assert_eq!(
            dev_packets("ltgso0", true) - before,
            1,
            "the kernel sent one GSO frame"
        );

        // lowtide -> kernel: one frame written, three datagrams received.
        let before = dev_packets("ltgso0", false);
        ours.set_segment_size(1200).unwrap();
        let data = pattern(3000, 0x5a);
        assert_eq!(
            ours.send_to(&data, kernel.local_addr().unwrap())
                .await
                .unwrap(),
            3000
        );
        let mut got = Vec::new();
        let mut lens = Vec::new();
        for _ in 0..3 {
            let mut buf = [0u8; 2000];
            let (n, from) = tokio::time::timeout(wait, kernel.recv_from(&mut buf))
                .await
                .expect("a datagram")
                .unwrap();
            assert_eq!(from.to_string(), "10.9.0.2:5000");
            lens.push(n);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!((lens, got == data), (vec![1200, 1200, 600], true));
        assert_eq!(
            dev_packets("ltgso0", false) - before,
            1,
            "lowtide wrote one GSO frame"
        );
        assert_eq!(net.counters().by_name("UdpInDatagrams"), Some(3));
        drop(ours);
        net.shutdown(wait).await.unwrap();
    });
}

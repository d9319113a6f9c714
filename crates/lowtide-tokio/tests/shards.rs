//! A sharded `Net` on the two queues of a multi-queue TUN device, against the
//! kernel's sockets in a network namespace, on a two-worker runtime (issue 26 §3).
//! Needs root: see `lowtide_tun::netns::privileged` (CI sets
//! LOWTIDE_REQUIRE_PRIVILEGED_TESTS=1).
//!
//! A packet the kernel steered to a shard that does not know its connection would be
//! answered with a RST and its transfer would fail: every stream verified on both
//! sides with no RST sent shows that the shards and the kernel's steering agree.

use lowtide::{Config, Stack};
use lowtide_tokio::tun::netns::{self, privileged, NetNs};
use lowtide_tokio::{Net, Offload, TcpListener, TcpStream, TunDevice, TunPacketDevice};
use std::io::{Read, Write};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KERNEL: &str = "10.9.0.1";
const LOWTIDE: &str = "10.9.0.2";
const QUEUES: usize = 2;
/// Connections each way: lowtide opens this many on every shard, and the kernel
/// opens this many to lowtide's listener.
const FLOWS: usize = 4;
const BYTES: usize = 1 << 20;
/// Failure guard only.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Flow `id`'s stream: differs between flows and positions; its first byte is `id`.
fn stream(id: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i % 251) as u8).wrapping_add(id))
        .collect()
}

/// The kernel's side: a listener that checks every stream it receives.
fn kernel_sink(ns: &NetNs, n: usize) -> (u16, std::thread::JoinHandle<Vec<bool>>) {
    let l = ns
        .spawn(|| std::net::TcpListener::bind((KERNEL, 0)))
        .unwrap()
        .join()
        .unwrap()
        .expect("kernel bind");
    let port = l.local_addr().unwrap().port();
    let sink = std::thread::spawn(move || {
        let readers: Vec<_> = (0..n)
            .map(|_| {
                let (mut s, _) = l.accept().expect("kernel accept");
                s.set_read_timeout(Some(TIMEOUT)).unwrap();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).expect("kernel read");
                    got.len() == BYTES && got == stream(got[0], BYTES)
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    (port, sink)
}

#[test]
fn flows_on_every_shard_complete() {
    if !privileged("flows_on_every_shard_complete") {
        return;
    }
    let ns = NetNs::create(&netns::unique_name("ltks")).expect("create netns");
    let devs =
        TunDevice::open_queues_in(ns.name(), "ltks0", Offload::Full, QUEUES).expect("queues");
    devs[0].set_ipv4(KERNEL.parse().unwrap(), 24).unwrap();
    devs[0].set_up().unwrap();
    let (kport, sink) = kernel_sink(&ns, QUEUES * FLOWS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(QUEUES)
        .enable_all()
        .build()
        .unwrap();
    let net = rt.block_on(async {
        let stacks = (0..QUEUES)
            .map(|_| {
                let mut s = Stack::new(Config::default(), 0);
                s.add_address(LOWTIDE.parse().unwrap());
                s
            })
            .collect();
        let devs = devs.into_iter().map(|d| TunPacketDevice::new(d).unwrap());
        Net::new_sharded(stacks, devs.collect()).unwrap()
    });
    assert_eq!(net.shards(), QUEUES);
    let listener = rt.block_on(async { TcpListener::bind(&net, (LOWTIDE, 7000)).unwrap() });

    // The kernel opens FLOWS connections to lowtide's listener.
    let senders: Vec<_> = (0..FLOWS)
        .map(|i| {
            ns.spawn(move || {
                let mut s = std::net::TcpStream::connect((LOWTIDE, 7000)).expect("connect");
                s.write_all(&stream(100 + i as u8, BYTES))
                    .expect("kernel write");
            })
            .unwrap()
        })
        .collect();

    let work = async {
        // lowtide opens QUEUES * FLOWS connections (the shards in turn) and sends.
        let out: Vec<_> = (0..QUEUES * FLOWS)
            .map(|i| {
                let net = net.clone();
                tokio::spawn(async move {
                    let mut s = TcpStream::connect(&net, (KERNEL, kport)).await.unwrap();
                    s.write_all(&stream(i as u8, BYTES)).await.unwrap();
                    s.shutdown().await.unwrap();
                })
            })
            .collect();
        // ... and reads what the kernel opened.
        let mut inbound = Vec::new();
        for _ in 0..FLOWS {
            let (mut s, _) = listener.accept().await.unwrap();
            inbound.push(tokio::spawn(async move {
                let mut got = Vec::new();
                s.read_to_end(&mut got).await.unwrap();
                got.len() == BYTES && got == stream(got[0], BYTES)
            }));
        }
        for t in out {
            t.await.unwrap();
        }
        let mut ok = Vec::new();
        for t in inbound {
            ok.push(t.await.unwrap());
        }
        ok
    };
    let inbound = rt.block_on(async {
        tokio::time::timeout(TIMEOUT, work)
            .await
            .expect("timed out")
    });
    for s in senders {
        s.join().unwrap();
    }
    assert_eq!(
        inbound,
        vec![true; FLOWS],
        "every stream the kernel sent arrived whole"
    );
    let outbound = sink.join().unwrap();
    assert_eq!(
        outbound,
        vec![true; QUEUES * FLOWS],
        "every stream lowtide sent arrived whole"
    );

    let mut opens = Vec::new();
    net.with_each_host(|_, h| {
        let c = h.stack().counters();
        opens.push((c.by_name("TcpActiveOpens"), c.by_name("TcpPassiveOpens")));
        assert_eq!(
            c.by_name("TcpOutRsts"),
            Some(0),
            "a shard sent a RST: {opens:?}"
        );
    });
    let handed: Vec<u64> = (0..QUEUES).map(|k| net.handed(k)).collect();
    eprintln!("per shard (active, passive) opens: {opens:?}; packets handed over: {handed:?}");
    for (active, _) in &opens {
        assert_eq!(
            *active,
            Some(FLOWS as u64),
            "lowtide's connections go to the shards in turn"
        );
    }
    assert!(format!("{net:?}").contains("shards: 2"));
    rt.block_on(async {
        drop(listener);
        net.shutdown(Duration::from_secs(5)).await.unwrap();
    });
}

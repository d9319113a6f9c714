//! Engine shards on the queues of one multi-queue TUN device, against the kernel's
//! sockets in a network namespace (issue 26 §3). Needs root: see `netns::privileged`.
//!
//! A packet the kernel steered to the wrong queue would reach a stack that does not
//! know its connection, which answers with a RST (`TcpOutRsts`) and the transfer
//! fails: every byte arriving verified on both sides, with no RST sent, shows that
//! the kernel's flow steering and the shards agree.

use lowtide::{Config, Mib, SocketHandle, Stack, TcpState};
use lowtide_tun::device::{Offload, TunDevice};
use lowtide_tun::netns::{self, privileged, NetNs};
use lowtide_tun::runtime::{Runtime, RuntimeConfig};
use lowtide_tun::shard::{port_range, Shards};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const KERNEL: &str = "10.9.0.1";
const LOWTIDE: &str = "10.9.0.2";
const QUEUES: usize = 2;
/// Connections each way: lowtide opens this many on every shard, and the kernel
/// opens this many to lowtide's listeners.
const FLOWS: usize = 4;
const BYTES: usize = 2 << 20;
/// Failure guard only.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Flow `id`'s stream: a byte pattern that differs between flows and positions, and
/// whose first byte is `id`.
fn stream(id: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i % 251) as u8).wrapping_add(id))
        .collect()
}

/// One runtime per queue, each with its own stack at lowtide's address.
fn runtimes(devs: Vec<TunDevice>) -> Vec<Runtime> {
    devs.into_iter()
        .enumerate()
        .map(|(i, dev)| {
            let mut cfg = Config::default();
            cfg.ip_local_port_range = port_range(cfg.ip_local_port_range, i, QUEUES);
            let mut stack = Stack::new(cfg, 1 + i as u64);
            stack.add_address(LOWTIDE.parse().unwrap());
            let cfg = RuntimeConfig {
                offload: Offload::Full,
                egress: Default::default(),
                ingress: Default::default(),
                seed: i as u64,
                busy_poll: Duration::ZERO,
            };
            Runtime::new(stack, dev, cfg).expect("runtime")
        })
        .collect()
}

/// A connection on a shard, with what it has sent (or must receive) so far.
struct Flow {
    shard: usize,
    conn: SocketHandle,
    data: Vec<u8>,
    done: usize,
    finished: bool,
}

/// Sends every flow's data, then closes its write side.
fn send_all(shards: &Shards, flows: &mut [Flow], until: Instant) {
    while flows.iter().any(|f| !f.finished) {
        if Instant::now() > until {
            let st: Vec<String> = flows
                .iter()
                .map(|f| {
                    let s = shards.peek(f.shard, |rt| rt.stack_ref().state(f.conn));
                    format!("shard {} {:?} sent {}", f.shard, s, f.done)
                })
                .collect();
            let dev: Vec<String> = (0..shards.len())
                .map(|k| {
                    shards.peek(k, |rt| {
                        format!(
                            "{:?} rsts {}",
                            rt.stats(),
                            rt.stack_ref().counters().get(Mib::TcpOutRsts)
                        )
                    })
                })
                .collect();
            panic!("sending timed out: {st:#?} {dev:#?}");
        }
        let seen = shards.progress();
        for f in flows.iter_mut().filter(|f| !f.finished) {
            shards.with(f.shard, |rt| {
                let now = rt.now();
                let st = rt.stack();
                if st.state(f.conn) != Ok(TcpState::Established) {
                    return;
                }
                if let Ok(n) = st.send(now, f.conn, &f.data[f.done..]) {
                    f.done += n;
                }
                if f.done == f.data.len() {
                    st.close(now, f.conn).expect("close");
                    f.finished = true;
                }
            });
        }
        shards.wait(seen, Duration::from_millis(10));
    }
}

/// Accepts `n` connections over the shards' listeners and reads each to its end,
/// checking it against the stream its first byte names.
fn receive_all(
    shards: &Shards,
    listeners: &[SocketHandle],
    n: usize,
    until: Instant,
) -> Vec<usize> {
    let mut flows: Vec<Flow> = Vec::new();
    let mut per_shard = vec![0; shards.len()];
    let mut buf = vec![0u8; 64 * 1024];
    while flows.len() < n || flows.iter().any(|f| !f.finished) {
        assert!(Instant::now() < until, "receiving timed out");
        let seen = shards.progress();
        for (k, &l) in listeners.iter().enumerate() {
            while let Ok(c) = shards.with(k, |rt| rt.stack().accept(l)) {
                per_shard[k] += 1;
                flows.push(Flow {
                    shard: k,
                    conn: c,
                    data: Vec::new(),
                    done: 0,
                    finished: false,
                });
            }
        }
        for f in flows.iter_mut().filter(|f| !f.finished) {
            shards.with(f.shard, |rt| {
                let now = rt.now();
                let st = rt.stack();
                loop {
                    match st.recv(now, f.conn, &mut buf) {
                        Ok(0) => {
                            let expect = stream(f.data[0], BYTES);
                            assert!(f.data == expect, "a kernel stream arrived altered");
                            st.close(now, f.conn).expect("close");
                            f.finished = true;
                            return;
                        }
                        Ok(n) => f.data.extend_from_slice(&buf[..n]),
                        Err(_) => return,
                    }
                }
            });
        }
        shards.wait(seen, Duration::from_millis(10));
    }
    per_shard
}

/// Flows lowtide opens on two shards and flows the kernel opens to them all complete,
/// every byte verified at its receiver.
#[test]
fn flows_on_every_shard_complete() {
    if !privileged("flows_on_every_shard_complete") {
        return;
    }
    let ns = NetNs::create(&netns::unique_name("ltmq")).expect("create netns");
    let devs =
        TunDevice::open_queues_in(ns.name(), "ltmq0", Offload::Full, QUEUES).expect("open queues");
    assert_eq!(devs.len(), QUEUES);
    devs[0]
        .set_ipv4(KERNEL.parse().unwrap(), 24)
        .expect("set_ipv4");
    devs[0].set_up().expect("set_up");
    let until = Instant::now() + TIMEOUT;

    // The kernel's side: a listener that checks every stream it receives, and
    // senders that connect to lowtide.
    let l = ns
        .spawn(|| TcpListener::bind((KERNEL, 0)))
        .unwrap()
        .join()
        .unwrap()
        .expect("bind");
    let to = l.local_addr().unwrap();
    let sink = std::thread::spawn(move || {
        let readers: Vec<_> = (0..QUEUES * FLOWS)
            .map(|_| {
                let (mut s, _) = l.accept().expect("accept");
                s.set_read_timeout(Some(TIMEOUT)).unwrap();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).expect("kernel read");
                    got.len() == BYTES && got == stream(got[0], BYTES)
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect::<Vec<bool>>()
    });

    let shards = Shards::start(runtimes(devs)).expect("start shards");
    let at: SocketAddr = format!("{LOWTIDE}:7000").parse().unwrap();
    let listeners: Vec<SocketHandle> = (0..QUEUES)
        .map(|k| shards.with(k, |rt| rt.stack().listen(at, 16).expect("listen")))
        .collect();
    let mut flows: Vec<Flow> = (0..QUEUES * FLOWS)
        .map(|i| {
            let shard = i % QUEUES;
            let from = SocketAddr::new(LOWTIDE.parse().unwrap(), 0);
            let conn = shards.with(shard, |rt| {
                let now = rt.now();
                rt.stack().connect(now, from, to).expect("connect")
            });
            let data = stream(i as u8, BYTES);
            Flow {
                shard,
                conn,
                data,
                done: 0,
                finished: false,
            }
        })
        .collect();
    let senders: Vec<_> = (0..FLOWS)
        .map(|i| {
            ns.spawn(move || {
                let mut s = TcpStream::connect(at).expect("kernel connect");
                s.write_all(&stream(100 + i as u8, BYTES))
                    .expect("kernel write");
            })
            .expect("spawn in netns")
        })
        .collect();

    send_all(&shards, &mut flows, until);
    let per_shard = receive_all(&shards, &listeners, FLOWS, until);
    for s in senders {
        s.join().unwrap();
    }
    let verified = sink.join().unwrap();
    assert_eq!(
        verified,
        vec![true; QUEUES * FLOWS],
        "every stream lowtide sent arrived whole"
    );
    // Let the closes finish, then look at each shard's counters.
    std::thread::sleep(Duration::from_millis(200));
    let handed_before_stop: Vec<u64> = (0..QUEUES).map(|k| shards.handed(k)).collect();
    let rts = shards.stop().expect("shard threads");
    for (k, rt) in rts.iter().enumerate() {
        let c = rt.stack_ref().counters();
        assert!(rt.stats().rx_packets > 0, "shard {k} read nothing");
        assert_eq!(
            c.get(Mib::TcpOutRsts),
            0,
            "shard {k} sent a RST: a packet on the wrong queue"
        );
    }
    let handed: Vec<u64> = (0..QUEUES).map(|k| handed_before_stop[k]).collect();
    eprintln!(
        "kernel-opened connections per shard: {per_shard:?}; packets handed over: {handed:?}"
    );
}

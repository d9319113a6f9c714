//! The backlog's rules, branch by branch (`tcp_add_backlog`, `sk_add_backlog`,
//! `__release_sock`, `skb_try_coalesce`).

use super::*;
use lowtide_wire::tcp::{SackBlock, TcpOptions, TcpRepr};
use lowtide_wire::testing::{tcp_packet, Csum};

const OVERHEAD: u64 = lowtide::tcp::consts::SKB_OVERHEAD as u64;

fn seg(seq: u32, ack: u32, flags: TcpFlags, tsval: u32, payload: &[u8]) -> Vec<u8> {
    let th = TcpRepr {
        seq,
        ack,
        flags,
        window: (ack % 60_000) as u16 + 1,
        options: TcpOptions {
            timestamp: Some((tsval, 7)),
            ..TcpOptions::default()
        },
        ..TcpRepr::default()
    };
    let src = "10.0.0.2:5001".parse().unwrap();
    let dst = "10.0.0.1:40000".parse().unwrap();
    tcp_packet(src, dst, &th, payload, 1, Csum::Full)
}

/// A pure ACK of `ack` (its TSval 1).
fn ack(ack: u32) -> Vec<u8> {
    seg(1, ack, TcpFlags::ACK, 1, &[])
}

fn budget(limit: u64) -> impl FnOnce() -> Option<SockLimit> {
    move || {
        Some(SockLimit {
            limit,
            rmem_alloc: 0,
        })
    }
}

/// A backlog whose socket is owned: the CPU works on a packet of it until t = 1000.
fn owned() -> Backlog {
    let mut b = Backlog::new(OVERHEAD);
    assert_eq!(b.add(0, ack(100), true, budget(0)), Added::Direct);
    let w = b.pop().unwrap();
    b.processed(&w, 1000);
    b
}

fn parsed(pkt: &[u8]) -> Seg {
    Seg::parse(pkt).unwrap()
}

#[test]
fn limit_is_twice_rcvbuf_half_sndbuf_and_64k_at_most_uint_max() {
    assert_eq!(
        tcp_add_backlog_limit(1 << 30, 256 << 20),
        (1 << 31) + (128 << 20) + 65_536
    );
    assert_eq!(
        tcp_add_backlog_limit(131_072, 4_194_304),
        262_144 + 2_097_152 + 65_536
    );
    assert_eq!(
        tcp_add_backlog_limit(i32::MAX as u32, i32::MAX as u32),
        u32::MAX as u64
    );
}

#[test]
fn a_socket_not_owned_takes_packets_directly_without_limit() {
    let mut b = Backlog::new(OVERHEAD);
    for i in 0..3 {
        assert_eq!(b.add(0, ack(100 + i), true, budget(0)), Added::Direct);
    }
    assert_eq!(b.len(), 3);
    assert_eq!(b.sock_len(&ack(1)), 0);
}

#[test]
fn an_owned_socket_queues_and_drops_above_its_limit_not_counting_the_packet() {
    let mut b = owned();
    let size = ack(1).len() as u64 + OVERHEAD;
    // A packet that finds the backlog at the limit still gets in (qsize > limit).
    // Distinct TSvals keep the options apart, so nothing coalesces.
    let one = |t| seg(1, 200, TcpFlags::ACK, t, &[]);
    assert_eq!(b.add(10, one(2), true, budget(size)), Added::Queued);
    assert_eq!(b.add(10, one(3), true, budget(size)), Added::Queued);
    assert_eq!(b.sock_len(&one(0)), 2 * size);
    assert_eq!(b.add(10, one(4), true, budget(size)), Added::Dropped);
    // sk_rmem_alloc counts against the same limit.
    let mut c = owned();
    let full = || {
        Some(SockLimit {
            limit: 10,
            rmem_alloc: 11,
        })
    };
    assert_eq!(c.add(10, ack(200), true, full), Added::Dropped);
    // A packet of no socket the model knows is never limited.
    assert_eq!(c.add(10, ack(201), true, || None), Added::Queued);
}

#[test]
fn sk_backlog_len_is_reset_only_when_the_owner_drains_the_backlog() {
    let mut b = owned();
    let size = ack(1).len() as u64 + OVERHEAD;
    let one = |t| seg(1, 200, TcpFlags::ACK, t, &[]);
    assert_eq!(b.add(10, one(2), true, budget(u64::MAX)), Added::Queued);
    // The owner takes it (and the leading direct packet is gone): the backlog is
    // empty, but the CPU works on the packet until 2000, so the socket stays owned
    // and its len keeps what entered.
    let w = b.pop().unwrap();
    b.processed(&w, 2000);
    assert_eq!(b.len(), 0);
    assert_eq!(b.add(1500, one(3), true, budget(u64::MAX)), Added::Queued);
    assert_eq!(
        b.sock_len(&one(0)),
        2 * size,
        "not decremented as packets leave"
    );
    let w = b.pop().unwrap();
    b.processed(&w, 3000);
    // Drained and done: the next packet goes in directly and len starts over.
    assert_eq!(b.add(3000, one(4), true, budget(0)), Added::Direct);
    assert_eq!(b.sock_len(&one(0)), 0);
}

#[test]
fn identical_pure_acks_coalesce_even_above_the_limit() {
    let mut b = owned();
    assert_eq!(b.add(10, ack(200), true, budget(u64::MAX)), Added::Queued);
    let len = b.sock_len(&ack(0));
    assert_eq!(b.add(11, ack(300), true, budget(0)), Added::Coalesced);
    // An older ACK coalesces too but moves neither ack_seq nor the window.
    assert_eq!(b.add(12, ack(250), true, budget(0)), Added::Coalesced);
    assert_eq!(b.sock_len(&ack(0)), len, "a pure ACK adds no truesize");
    assert_eq!(b.len(), 1);
    let w = b.pop().unwrap();
    let s = parsed(&w.pkt);
    assert_eq!(s.ack, 300);
    assert_eq!(&w.pkt[s.th + 14..s.th + 16], &301u16.to_be_bytes());
    assert!(csum_ok(&w.pkt));
}

#[test]
fn acks_that_differ_where_tcp_add_backlog_looks_stay_apart() {
    let sacked = {
        let th = TcpRepr {
            seq: 1,
            ack: 300,
            flags: TcpFlags::ACK,
            options: TcpOptions {
                timestamp: Some((1, 7)),
                sack: [SackBlock {
                    start: 400,
                    end: 500,
                }; 4],
                sack_len: 1,
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let (src, dst) = (
            "10.0.0.2:5001".parse().unwrap(),
            "10.0.0.1:40000".parse().unwrap(),
        );
        tcp_packet(src, dst, &th, &[], 1, Csum::Full)
    };
    let mut tos = ack(300);
    tos[1] = 0x10;
    lowtide_wire::ip::fill_ipv4_checksum(&mut tos[..20]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("another TSval", seg(1, 300, TcpFlags::ACK, 2, &[])),
        ("a SACK block (another header length)", sacked),
        ("another seq", seg(2, 300, TcpFlags::ACK, 1, &[])),
        ("ECE", seg(1, 300, TcpFlags::ACK | TcpFlags::ECE, 1, &[])),
        ("RST", seg(1, 300, TcpFlags::ACK | TcpFlags::RST, 1, &[])),
        ("URG", seg(1, 300, TcpFlags::ACK | TcpFlags::URG, 1, &[])),
        ("no ACK", seg(1, 300, TcpFlags::PSH, 1, &[])),
        ("another DS field", tos),
    ];
    for (what, pkt) in cases {
        let mut b = owned();
        assert_eq!(b.add(10, ack(200), true, budget(u64::MAX)), Added::Queued);
        assert_eq!(
            b.add(11, pkt, true, budget(u64::MAX)),
            Added::Queued,
            "{what}"
        );
    }
    // A corrupt packet is not offered to the tail (nor queued as the next tail).
    let mut b = owned();
    assert_eq!(b.add(10, ack(200), true, budget(u64::MAX)), Added::Queued);
    let mut bad = ack(300);
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert_eq!(b.add(11, bad, true, budget(u64::MAX)), Added::Direct);
    assert_eq!(
        b.add(12, ack(400), true, budget(u64::MAX)),
        Added::Coalesced
    );
}

#[test]
fn nothing_coalesces_into_packets_the_owner_has_taken() {
    let mut b = owned();
    assert_eq!(b.add(10, ack(200), true, budget(u64::MAX)), Added::Queued);
    assert_eq!(
        b.add(
            10,
            seg(1, 201, TcpFlags::ACK, 2, &[]),
            true,
            budget(u64::MAX)
        ),
        Added::Queued
    );
    let w = b.pop().unwrap(); // takes both: sk_backlog.tail = NULL
    b.processed(&w, 5000);
    assert_eq!(
        b.add(
            20,
            seg(1, 202, TcpFlags::ACK, 2, &[]),
            true,
            budget(u64::MAX)
        ),
        Added::Queued
    );
    assert_eq!(
        b.add(
            21,
            seg(1, 203, TcpFlags::ACK, 2, &[]),
            true,
            budget(u64::MAX)
        ),
        Added::Coalesced
    );
    assert_eq!(b.len(), 2);
}

#[test]
fn data_coalesces_as_a_stolen_head_up_to_max_skb_frags() {
    let mut b = owned();
    let data = |i: u32| seg(1000 + 100 * i, 1, TcpFlags::ACK, 1, &[i as u8; 100]);
    assert_eq!(b.add(10, data(0), true, budget(u64::MAX)), Added::Queued);
    let before = b.sock_len(&data(0));
    for i in 1..=MAX_SKB_FRAGS {
        assert_eq!(b.add(10, data(i), true, budget(0)), Added::Coalesced, "{i}");
    }
    let delta = data(1).len() as u64 + OVERHEAD - SK_BUFF_SIZE;
    assert_eq!(b.sock_len(&data(0)), before + MAX_SKB_FRAGS as u64 * delta);
    // The eighteenth payload finds MAX_SKB_FRAGS frags: a packet of its own.
    let n = MAX_SKB_FRAGS + 1;
    assert_eq!(b.add(10, data(n), true, budget(u64::MAX)), Added::Queued);
    let w = b.pop().unwrap();
    let s = parsed(&w.pkt);
    assert_eq!((s.seq, s.len, s.gso_size), (1000, 1800, 100));
    assert!(csum_ok(&w.pkt));
    for i in 0..=MAX_SKB_FRAGS {
        assert_eq!(w.pkt[s.th + s.hdrlen + 100 * i as usize], i as u8);
    }
}

/// The verdict's sender lag reads the oldest packet still waiting for a local port:
/// none before any arrives or after the CPU took them all, the first one in arrival
/// order while they wait, another port's never.
#[test]
fn oldest_to_port_is_the_first_packet_still_waiting_for_that_port() {
    let mut b = owned();
    assert_eq!(b.oldest_to_port(40000), None);
    b.add(10, ack(200), true, budget(u64::MAX));
    b.add(
        20,
        seg(1, 300, TcpFlags::ACK, 2, &[]),
        true,
        budget(u64::MAX),
    );
    assert_eq!(b.oldest_to_port(40000), Some(10));
    assert_eq!(b.oldest_to_port(40001), None);
    b.pop().unwrap();
    assert_eq!(b.oldest_to_port(40000), Some(20));
    b.pop().unwrap();
    assert_eq!(b.oldest_to_port(40000), None);
}

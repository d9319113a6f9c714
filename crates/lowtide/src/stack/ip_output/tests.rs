//! Fragmentation's unit tests: where `ip_do_fragment` and `ip6_fragment` cut,
//! what the options become, the DF/`EMSGSIZE` rules of each `IP_PMTUDISC_*` mode,
//! the counters, the identifications, and a round trip through lowtide's own
//! reassembly.

use super::*;
use crate::stack::testutil::stack;
use crate::tcp::consts::{IP_PMTUDISC_INTERFACE, IP_PMTUDISC_OMIT};
use crate::{Mib, RxChecksum, SocketError, Stack};
use lowtide_wire::checksum;
use std::net::SocketAddr;

const T: Instant = Instant::ZERO;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// An IPv4 datagram of `payload` bytes (a counting pattern) with `options`.
fn v4_datagram(payload: usize, options: &[u8]) -> Vec<u8> {
    let hlen = 20 + options.len();
    let mut p = vec![0u8; hlen];
    p[0] = 0x40 | (hlen / 4) as u8;
    p[2..4].copy_from_slice(&((hlen + payload) as u16).to_be_bytes());
    p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..].copy_from_slice(options);
    p.extend((0..payload).map(|i| (i % 251) as u8));
    p
}

/// (`IP_MTU_DISCOVER` mode, bytes sent, the send's result, what left as [`v4_layout`]).
type Case = (
    u8,
    usize,
    Result<usize, SocketError>,
    &'static [(usize, usize, bool, bool)],
);

/// (total length, offset in bytes, MF, DF) of each IPv4 fragment, checking each
/// header checksum on the way.
fn v4_layout(frags: &[Vec<u8>]) -> Vec<(usize, usize, bool, bool)> {
    frags
        .iter()
        .map(|f| {
            let hlen = (f[0] & 0x0f) as usize * 4;
            assert_eq!(checksum::fold(checksum::sum(&f[..hlen], 0)), 0xffff);
            assert_eq!(be16(f, 2) as usize, f.len());
            let w = be16(f, 6);
            let off = (w & 0x1fff) as usize * 8;
            (f.len(), off, w & 0x2000 != 0, w & 0x4000 != 0)
        })
        .collect()
}

#[test]
fn ipv4_fragments_are_multiples_of_8_and_carry_the_offsets() {
    // A `ping -s 3000` reply: 3008 bytes of ICMP after a 20-byte header.
    let p = v4_datagram(3008, &[]);
    let frags = ip_do_fragment(&p, 1500);
    assert_eq!(
        v4_layout(&frags),
        [
            (1500, 0, true, false),
            (1500, 1480, true, false),
            (68, 2960, false, false)
        ]
    );
    let data: Vec<u8> = frags.iter().flat_map(|f| f[20..].to_vec()).collect();
    assert_eq!(data, p[20..]);
    // An MTU that is not 20 + a multiple of 8: 1006 - 20 = 986 rounds to 984.
    let sizes: Vec<usize> = v4_layout(&ip_do_fragment(&p, 1006))
        .iter()
        .map(|l| l.0 - 20)
        .collect();
    assert_eq!(sizes, [984, 984, 984, 56]);
    // Fragmenting a fragment keeps its offset and its MF on the last piece.
    let mut inner = v4_datagram(1600, &[]);
    inner[6..8].copy_from_slice(&(0x2000u16 | 100).to_be_bytes());
    let l = v4_layout(&ip_do_fragment(&inner, 1000));
    assert_eq!(l, [(996, 800, true, false), (644, 1776, true, false)]);
}

#[test]
fn only_copied_options_reach_the_later_fragments() {
    // Record route (not copied), a NOP, router alert (copied), then padding.
    let opts = [7, 7, 4, 0, 0, 0, 0, 1, 0x94, 4, 0, 0];
    let p = v4_datagram(2000, &opts);
    let frags = ip_do_fragment(&p, 1000);
    // 1000 - 32 = 968, a multiple of 8.
    assert_eq!(
        v4_layout(&frags),
        [
            (1000, 0, true, false),
            (1000, 968, true, false),
            (96, 1936, false, false)
        ]
    );
    assert_eq!(&frags[0][20..32], &opts);
    for f in &frags[1..] {
        assert_eq!(&f[20..32], &[1, 1, 1, 1, 1, 1, 1, 1, 0x94, 4, 0, 0]);
    }
    // ip_options_fragment stops at IPOPT_END and at a bad length.
    let mut h = v4_datagram(0, &[0, 7, 7, 4]);
    ip_options_fragment(&mut h);
    assert_eq!(&h[20..], &[0, 7, 7, 4]);
    let mut h = v4_datagram(0, &[7, 9, 4, 0]);
    ip_options_fragment(&mut h);
    assert_eq!(&h[20..], &[7, 9, 4, 0]);
}

/// An IPv6 datagram of `payload` bytes after `ext` (extension headers; `first`
/// is the fixed header's next header).
fn v6_datagram(payload: usize, first: u8, ext: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((ext.len() + payload) as u16).to_be_bytes());
    p[6] = first;
    p[7] = 64;
    p[8..24].copy_from_slice(&"fd00::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p[24..40].copy_from_slice(&"fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    p.extend_from_slice(ext);
    p.extend((0..payload).map(|i| (i % 249) as u8));
    p
}

/// (length, unfragmentable length, offset, MF, id, next header) of each IPv6
/// fragment.
fn v6_layout(frags: &[Vec<u8>]) -> Vec<(usize, usize, usize, bool, u32, u8)> {
    frags
        .iter()
        .map(|f| {
            assert_eq!(be16(f, 4) as usize, f.len() - 40);
            let (hlen, at) = ip6_find_1stfragopt(f).unwrap();
            assert_eq!(
                f[at], 44,
                "the fragment header follows the unfragmentable part"
            );
            let fh = &f[hlen..hlen + 8];
            let w = be16(fh, 2);
            let id = u32::from_be_bytes([fh[4], fh[5], fh[6], fh[7]]);
            (f.len(), hlen, (w & !7) as usize, w & 1 != 0, id, fh[0])
        })
        .collect()
}

#[test]
fn ipv6_fragments_carry_a_fragment_header_after_the_unfragmentable_part() {
    let p = v6_datagram(3008, 58, &[]);
    let frags = ip6_do_fragment(&p, 1500, 0xabcd).unwrap();
    // 1500 - 40 - 8 = 1452, rounded down to 1448.
    assert_eq!(
        v6_layout(&frags),
        [
            (1496, 40, 0, true, 0xabcd, 58),
            (1496, 40, 1448, true, 0xabcd, 58),
            (160, 40, 2896, false, 0xabcd, 58)
        ]
    );
    let data: Vec<u8> = frags.iter().flat_map(|f| f[48..].to_vec()).collect();
    assert_eq!(data, p[40..]);
    // A hop-by-hop header stays in front of every fragment, and so do destination
    // options before any routing header (ip6_find_1stfragopt starts the
    // fragmentable part at destination options only after a routing header).
    let hbh = [60, 0, 1, 4, 0, 0, 0, 0];
    let dst = [17, 0, 1, 4, 0, 0, 0, 0];
    let ext = [&hbh[..], &dst[..]].concat();
    let p = v6_datagram(2000, 0, &ext);
    let frags = ip6_do_fragment(&p, 1280, 7).unwrap();
    let l = v6_layout(&frags);
    assert!(l.iter().all(|f| f.1 == 56 && f.5 == 17), "{l:?}");
    assert_eq!(
        &frags[1][40..56],
        &[60, 0, 1, 4, 0, 0, 0, 0, 44, 0, 1, 4, 0, 0, 0, 0]
    );
    // Routing header, then destination options: those are fragmentable.
    let rt = [60, 0, 0, 0, 0, 0, 0, 0];
    let ext = [&rt[..], &dst[..]].concat();
    let p = v6_datagram(100, 43, &ext);
    assert_eq!(ip6_find_1stfragopt(&p), Some((48, 40)));
    // Too small an MTU for 8 bytes, and headers that run off the end.
    assert_eq!(ip6_do_fragment(&p, 48 + 8 + 7, 1), None);
    assert_eq!(ip6_find_1stfragopt(&v6_datagram(0, 0, &[])), None);
}

/// Sends `len` bytes on `s` (bound to `a`'s address) to `dst`, returning the
/// result and the packets that left.
fn send(
    a: &mut Stack,
    s: crate::UdpHandle,
    len: usize,
    dst: &str,
) -> (Result<usize, SocketError>, Vec<Vec<u8>>) {
    let r = a.udp_send_to(T, s, &vec![9; len], addr(dst));
    let out = std::iter::from_fn(|| a.poll_transmit(T))
        .map(|t| t.packet)
        .collect();
    (r, out)
}

#[test]
fn ipv4_pmtudisc_modes_set_df_and_say_emsgsize_as_linux() {
    let mut a = stack("10.0.0.1");
    let s = a.udp_bind(addr("10.0.0.1:1000")).unwrap();
    assert_eq!(a.udp_mtu_discover(s), Ok(IP_PMTUDISC_WANT));
    // A learned path MTU of 1400 that PROBE, INTERFACE and OMIT ignore.
    let dst = "10.0.0.2:9".parse::<SocketAddr>().unwrap().ip();
    a.routes.learn_pmtu(
        T,
        dst,
        1400,
        (std::time::Duration::from_secs(600), 552),
        1500,
    );
    // (mode, bytes, result, packets' (length, offset, MF, DF))
    let cases: [Case; 10] = [
        (IP_PMTUDISC_WANT, 1372, Ok(1372), &[(1400, 0, false, true)]),
        (
            IP_PMTUDISC_WANT,
            1373,
            Ok(1373),
            &[(1396, 0, true, false), (25, 1376, false, false)],
        ),
        (IP_PMTUDISC_DONT, 1372, Ok(1372), &[(1400, 0, false, false)]),
        (
            IP_PMTUDISC_DONT,
            1373,
            Ok(1373),
            &[(1396, 0, true, false), (25, 1376, false, false)],
        ),
        (IP_PMTUDISC_DO, 1372, Ok(1372), &[(1400, 0, false, true)]),
        (IP_PMTUDISC_DO, 1373, Err(SocketError::MessageTooLong), &[]),
        (IP_PMTUDISC_PROBE, 1472, Ok(1472), &[(1500, 0, false, true)]),
        (
            IP_PMTUDISC_INTERFACE,
            1473,
            Err(SocketError::MessageTooLong),
            &[],
        ),
        (
            IP_PMTUDISC_INTERFACE,
            1472,
            Ok(1472),
            &[(1500, 0, false, false)],
        ),
        (
            IP_PMTUDISC_OMIT,
            1473,
            Ok(1473),
            &[(1500, 0, true, false), (21, 1480, false, false)],
        ),
    ];
    for (mode, len, result, layout) in cases {
        a.udp_set_mtu_discover(s, mode).unwrap();
        let (r, out) = send(&mut a, s, len, "10.0.0.2:9");
        assert_eq!(
            (r, v4_layout(&out).as_slice()),
            (result, layout),
            "mode {mode}, {len} bytes"
        );
        // ip_select_ident: 0 only under a DF that may not be cleared (DO, PROBE).
        let ids: Vec<u16> = out.iter().map(|p| be16(p, 4)).collect();
        if matches!(mode, IP_PMTUDISC_DO | IP_PMTUDISC_PROBE) {
            assert!(ids.iter().all(|id| *id == 0), "{ids:?}");
        } else {
            assert!(
                ids.windows(2).all(|w| w[0] == w[1]),
                "fragments share the id"
            );
        }
    }
    assert_eq!(a.udp_set_mtu_discover(s, 6), Err(SocketError::InvalidInput));
    let c = a.counters();
    assert_eq!(
        [Mib::IpFragOKs, Mib::IpFragCreates, Mib::IpFragFails].map(|m| c.get(m)),
        [3, 6, 0]
    );
    assert_eq!(
        (c.get(Mib::IpOutRequests), c.get(Mib::IpOutTransmits)),
        (8, 11)
    );
    // 64 KB: the IPv4 total length bounds even a datagram that may fragment.
    a.udp_set_mtu_discover(s, IP_PMTUDISC_WANT).unwrap();
    assert_eq!(send(&mut a, s, 65_507, "10.0.0.2:9").1.len(), 48);
    assert_eq!(
        send(&mut a, s, 65_508, "10.0.0.2:9").0,
        Err(SocketError::MessageTooLong)
    );
    // net.ipv4.ip_no_pmtu_disc: new sockets start with IP_PMTUDISC_DONT.
    a.set_sysctl(T, "net.ipv4.ip_no_pmtu_disc", "1").unwrap();
    let s2 = a.udp_bind(addr("10.0.0.1:0")).unwrap();
    assert_eq!(a.udp_mtu_discover(s2), Ok(IP_PMTUDISC_DONT));
    assert_eq!(a.udp_set_dontfrag(s2, true), Err(SocketError::InvalidInput));
}

#[test]
fn ipv4_identifications_follow_ip_select_ident() {
    let mut a = stack("10.0.0.1");
    let conn = a.udp_bind(addr("10.0.0.1:1000")).unwrap();
    a.udp_connect(conn, addr("10.0.0.2:9")).unwrap();
    // A connected socket counts from its own random inet_id, DF or not.
    let ids: Vec<u16> = (0..3)
        .map(|_| be16(&send(&mut a, conn, 10, "10.0.0.2:9").1[0], 4))
        .collect();
    assert_eq!(
        [ids[1], ids[2]],
        [ids[0].wrapping_add(1), ids[0].wrapping_add(2)]
    );
    // Unconnected under WANT: ip_idents' counter, which jumps by a random amount
    // below the milliseconds since its bucket was last used.
    let s = a.udp_bind(addr("10.0.0.1:2000")).unwrap();
    let id_at = |a: &mut Stack, now: Instant| {
        a.udp_send_to(now, s, b"x", addr("10.0.0.2:9")).unwrap();
        be16(&a.poll_transmit(now).unwrap().packet, 4)
    };
    let first = id_at(&mut a, Instant::from_nanos(5_000_000));
    assert_eq!(
        id_at(&mut a, Instant::from_nanos(5_000_000)),
        first.wrapping_add(1)
    );
    let later = id_at(&mut a, Instant::from_nanos(9_000_000));
    assert!(
        (1..=4).contains(&later.wrapping_sub(first).wrapping_sub(1)),
        "{first} {later}"
    );
}

#[test]
fn ipv6_fragments_unless_dontfrag_or_pmtudisc_do() {
    let mut a = stack("fd00::1");
    let s = a.udp_bind(addr("[fd00::1]:1000")).unwrap();
    assert_eq!(a.udp_mtu_discover(s), Ok(IP_PMTUDISC_WANT));
    let (r, out) = send(&mut a, s, 1452, "[fd00::2]:9");
    assert_eq!((r, out.len(), out[0].len()), (Ok(1452), 1, 1500));
    let (r, out) = send(&mut a, s, 3000, "[fd00::2]:9");
    let l = v6_layout(&out);
    assert_eq!(r, Ok(3000));
    assert_eq!(
        l.iter().map(|f| (f.0, f.2, f.3, f.5)).collect::<Vec<_>>(),
        [
            (1496, 0, true, 17),
            (1496, 1448, true, 17),
            (160, 2896, false, 17)
        ]
    );
    assert!(l[0].4 == l[1].4 && l[1].4 == l[2].4 && l[0].4 != 0);
    // Each datagram takes the next identification of its bucket.
    let (_, again) = send(&mut a, s, 3000, "[fd00::2]:9");
    assert_eq!(v6_layout(&again)[0].4, l[0].4.wrapping_add(1));
    // IPV6_MTU cuts smaller fragments; under 1280 it is refused.
    assert_eq!(a.udp_set_ipv6_mtu(s, 1279), Err(SocketError::InvalidInput));
    a.udp_set_ipv6_mtu(s, 1280).unwrap();
    let (_, out) = send(&mut a, s, 3000, "[fd00::2]:9");
    assert_eq!(
        out.iter().map(Vec::len).collect::<Vec<_>>(),
        [1280, 1280, 592]
    );
    a.udp_set_ipv6_mtu(s, 0).unwrap();
    // IPV6_DONTFRAG and IPV6_PMTUDISC_DO: EMSGSIZE over the MTU.
    a.udp_set_dontfrag(s, true).unwrap();
    assert_eq!(
        send(&mut a, s, 1453, "[fd00::2]:9").0,
        Err(SocketError::MessageTooLong)
    );
    assert_eq!(send(&mut a, s, 1452, "[fd00::2]:9").1.len(), 1);
    a.udp_set_dontfrag(s, false).unwrap();
    a.udp_set_mtu_discover(s, IP_PMTUDISC_DO).unwrap();
    assert_eq!(
        send(&mut a, s, 1453, "[fd00::2]:9").0,
        Err(SocketError::MessageTooLong)
    );
    a.udp_set_mtu_discover(s, IP_PMTUDISC_OMIT).unwrap();
    assert_eq!(send(&mut a, s, 65_527, "[fd00::2]:9").1.len(), 46);
    assert_eq!(
        send(&mut a, s, 65_528, "[fd00::2]:9").0,
        Err(SocketError::MessageTooLong)
    );
    let c = a.counters();
    assert_eq!(
        [Mib::Ip6FragOKs, Mib::Ip6FragCreates, Mib::Ip6FragFails].map(|m| c.get(m)),
        [4, 55, 0]
    );
    assert_eq!(c.get(Mib::IpFragOKs), 0);
}

/// An echo request of `data` from `them` to `us` without DF, as the kernel's ping
/// sends one it fragments.
fn echo_request(them: &str, us: &str, data: &[u8]) -> Vec<u8> {
    let mut p = crate::stack::testutil::echo_request(them, us, data);
    lowtide_wire::ip::set_ipv4_tos_df(&mut p, 0, false);
    p
}

#[test]
fn a_ping_of_3000_bytes_is_answered_in_fragments() {
    for (us, them) in [("10.0.0.2", "10.0.0.1"), ("fd00::2", "fd00::1")] {
        let v4 = us.contains('.');
        let mut b = stack(us);
        let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let request = echo_request(them, us, &data);
        // The request arrives in fragments too, as the kernel's ping sends it.
        let frags = match v4 {
            true => ip_do_fragment(&request, 1500),
            false => ip6_do_fragment(&request, 1500, 99).unwrap(),
        };
        for f in frags.iter().rev() {
            b.handle_packet(T, f, RxChecksum::Verify);
        }
        let out: Vec<Vec<u8>> = std::iter::from_fn(|| b.poll_transmit(T))
            .map(|t| t.packet)
            .collect();
        let c = b.counters();
        let (hlen, reply) = match v4 {
            true => {
                assert_eq!(
                    v4_layout(&out),
                    [
                        (1500, 0, true, false),
                        (1500, 1480, true, false),
                        (68, 2960, false, false)
                    ]
                );
                assert!(out.iter().all(|p| be16(p, 4) == be16(&out[0], 4)));
                assert_eq!(
                    [
                        Mib::IpFragOKs,
                        Mib::IpFragCreates,
                        Mib::IpOutRequests,
                        Mib::IpOutTransmits
                    ]
                    .map(|m| c.get(m)),
                    [1, 3, 1, 3]
                );
                assert_eq!(c.get(Mib::IcmpOutEchoReps), 1);
                (20, 0)
            }
            false => {
                let l = v6_layout(&out);
                assert_eq!(
                    l.iter().map(|f| (f.0, f.2, f.3, f.5)).collect::<Vec<_>>(),
                    [
                        (1496, 0, true, 58),
                        (1496, 1448, true, 58),
                        (160, 2896, false, 58)
                    ]
                );
                assert_eq!(
                    [
                        Mib::Ip6FragOKs,
                        Mib::Ip6FragCreates,
                        Mib::Ip6OutRequests,
                        Mib::Ip6OutTransmits
                    ]
                    .map(|m| c.get(m)),
                    [1, 3, 1, 3]
                );
                assert_eq!(c.get(Mib::Icmp6OutEchoReplies), 1);
                (48, 129)
            }
        };
        // The pieces make the echo reply: same id, sequence and data.
        let msg: Vec<u8> = out.iter().flat_map(|f| f[hlen..].to_vec()).collect();
        assert_eq!(
            (msg.len(), msg[0], &msg[4..8]),
            (3008, reply, &[0x12, 0x34, 0, 7][..])
        );
        assert_eq!(&msg[8..], &data[..]);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Whatever the size and the device's MTU, a datagram fragmented by one stack
    /// comes out whole from the other's reassembly, in any order of arrival.
    #[test]
    fn fragmentation_round_trips_through_reassembly(
        v4 in proptest::bool::ANY,
        len in 0usize..20_000,
        mtu in 68u32..9000,
        seed in proptest::num::u64::ANY,
    ) {
        let (ours, theirs, dst) = match v4 {
            true => ("10.0.0.1", "10.0.0.2", "10.0.0.2:9"),
            false => ("fd00::1", "fd00::2", "[fd00::2]:9"),
        };
        let mtu = if v4 { mtu } else { mtu.max(1280) };
        let (mut a, mut b) = (stack(ours), stack(theirs));
        a.set_device_mtu(T, mtu).unwrap();
        let s = a.udp_bind(SocketAddr::new(ours.parse().unwrap(), 1000)).unwrap();
        let r = b.udp_bind(addr(dst)).unwrap();
        let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ seed) as u8).collect();
        proptest::prop_assert_eq!(a.udp_send_to(T, s, &data, addr(dst)), Ok(len));
        let mut out: Vec<Vec<u8>> = std::iter::from_fn(|| a.poll_transmit(T)).map(|t| t.packet).collect();
        proptest::prop_assert!(out.iter().all(|p| p.len() <= mtu as usize));
        let mut rng = crate::rng::Rng::new(seed);
        for i in (1..out.len()).rev() {
            out.swap(i, rng.range_u32(0, i as u32) as usize);
        }
        for p in &out {
            b.handle_packet(T, p, RxChecksum::Verify);
        }
        let got = b.udp_recv_from(r).map(|d| d.data);
        proptest::prop_assert_eq!(got, Ok(data));
    }
}

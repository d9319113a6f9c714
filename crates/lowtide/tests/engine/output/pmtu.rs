//! Path MTU discovery (RFC 1191, RFC 8201) as Linux does it: a router on the path
//! drops what is larger than its next hop's MTU and answers with an ICMP
//! "fragmentation needed" / ICMPv6 "packet too big"; the sender lowers its MSS
//! (`tcp_v4_mtu_reduced` -> `tcp_sync_mss`), resends what no longer fits
//! (`tcp_simple_retransmit`), and new connections to that destination start with
//! the learned path MTU for `net.ipv4.route.mtu_expires` (600 s). Without it a path
//! with a smaller MTU is a black hole: every full-sized segment is lost forever.

use crate::common::*;
use lowtide::{Config, Mib, SocketHandle};
use lowtide_wire::checksum;
use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

/// The router's address (on A's side of the path).
const ROUTER: &str = "10.0.0.254";
const ROUTER6: &str = "fd00::fe";

/// A's path to B has a hop of `mtu` bytes: the filter drops A->B packets above it
/// and keeps them for [`answer`] to quote.
fn narrow_path(p: &mut Pair, mtu: usize) -> Rc<RefCell<Vec<Vec<u8>>>> {
    let too_big = Rc::new(RefCell::new(Vec::new()));
    let seen = too_big.clone();
    p.filter = Some(Box::new(move |d, pkt| {
        if d == Dir::AtoB && pkt.len() > mtu {
            seen.borrow_mut().push(pkt.clone());
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
    too_big
}

/// An IPv4 packet from the router to A: ICMP type 3 code 4 with `mtu` as the next
/// hop's MTU, quoting `dropped`'s IP header and the first 8 bytes of its TCP header.
pub(crate) fn frag_needed(dropped: &[u8], mtu: u16) -> Vec<u8> {
    let quote = &dropped[..20 + 8];
    let mut icmp = vec![3, 4, 0, 0, 0, 0];
    icmp.extend_from_slice(&mtu.to_be_bytes());
    icmp.extend_from_slice(quote);
    let c = !checksum::fold(checksum::sum(&icmp, 0));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let router: std::net::Ipv4Addr = ROUTER.parse().unwrap();
    ip.extend_from_slice(&router.octets());
    ip.extend_from_slice(&dropped[12..16]);
    lowtide_wire::ip::fill_ipv4_checksum(&mut ip);
    ip.extend_from_slice(&icmp);
    ip
}

/// An IPv6 packet from the router to A: ICMPv6 "packet too big" with `mtu`,
/// quoting `dropped`'s IPv6 header and the first 8 bytes of TCP.
fn packet_too_big(dropped: &[u8], mtu: u32) -> Vec<u8> {
    let mut icmp = vec![2, 0, 0, 0];
    icmp.extend_from_slice(&mtu.to_be_bytes());
    icmp.extend_from_slice(&dropped[..40 + 8]);
    let router: IpAddr = ROUTER6.parse().unwrap();
    let dst = IpAddr::from(<[u8; 16]>::try_from(&dropped[8..24]).unwrap());
    let pseudo = checksum::pseudo_header(router, dst, 58, icmp.len() as u32);
    let c = !checksum::fold(checksum::sum(&icmp, pseudo));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(icmp.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[58, 64]);
    let IpAddr::V6(r) = router else { panic!() };
    ip.extend_from_slice(&r.octets());
    ip.extend_from_slice(&dropped[8..24]);
    ip.extend_from_slice(&icmp);
    ip
}

/// Sends `data` from A to B while the router answers every dropped packet with
/// `icmp(dropped)`; returns what B read after the `pending` bytes sent before.
fn transfer_after(
    p: &mut Pair,
    (c, s): (SocketHandle, SocketHandle),
    pending: usize,
    data: &[u8],
    dropped: &Rc<RefCell<Vec<Vec<u8>>>>,
    icmp: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let (mut sent, mut got) = (0, Vec::new());
    let end = p.now + Duration::from_secs(30);
    while got.len() < pending + data.len() {
        assert!(p.now < end, "stalled at {} of {}", got.len(), data.len());
        if let Ok(n) = p.a.send(p.now, c, &data[sent..]) {
            sent += n;
        }
        got.extend(drain(&mut p.b, p.now, s));
        let answers: Vec<_> = dropped.borrow_mut().drain(..).collect();
        for d in answers {
            p.inject(false, &icmp(&d));
        }
        if got.len() < pending + data.len() && !p.step() {
            panic!("idle at {} of {}", got.len(), data.len());
        }
    }
    got.split_off(pending)
}

/// [`transfer_after`] with nothing pending.
fn transfer(
    p: &mut Pair,
    c: SocketHandle,
    s: SocketHandle,
    data: &[u8],
    dropped: &Rc<RefCell<Vec<Vec<u8>>>>,
    icmp: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    transfer_after(p, (c, s), 0, data, dropped, icmp)
}

/// The largest A->B packet on the wire since `from`.
fn largest_sent(p: &Pair, from: usize) -> usize {
    p.wire[from..]
        .iter()
        .filter(|(_, d, _)| *d == Dir::AtoB)
        .map(|(_, _, pkt)| pkt.len())
        .max()
        .unwrap_or(0)
}

#[test]
fn frag_needed_lowers_the_mss_and_the_transfer_completes() {
    let (mut p, c, s) = establish(Config::default());
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1500);
    let dropped = narrow_path(&mut p, 1400);
    let data = pattern(500_000, 3);
    let start = p.now;
    let got = transfer(&mut p, c, s, &data, &dropped, |d| frag_needed(d, 1400));
    assert_eq!(got, data);
    // One RTT to learn the MTU, then the first flight again: far from an RTO backoff.
    let took = p.now.saturating_since(start);
    assert!(took < Duration::from_secs(1), "{took:?}");
    let i = p.a.info(p.now, c).unwrap();
    assert_eq!(i.pmtu, 1400, "tcpi_pmtu is the path's");
    // tcp_mtu_to_mss: 1400 - 20 (IP) - 20 (TCP) - 12 (timestamps).
    assert_eq!(i.snd_mss, 1348);
    assert_eq!(
        p.a.counters().get(Mib::TcpExtTCPTimeouts),
        0,
        "no RTO needed"
    );
    assert!(p.a.counters().get(Mib::IcmpInDestUnreachs) >= 1);
    // From the first answer on, nothing larger than the path allows is sent again.
    let n = p.wire.len();
    let more = pattern(200_000, 4);
    assert_eq!(
        transfer(&mut p, c, s, &more, &dropped, |d| frag_needed(d, 1400)),
        more
    );
    assert!(largest_sent(&p, n) <= 1400, "{}", largest_sent(&p, n));
}

#[test]
fn a_new_connection_starts_with_the_learned_path_mtu() {
    let (mut p, c, s) = establish(Config::default());
    let dropped = narrow_path(&mut p, 1300);
    let data = pattern(100_000, 5);
    assert_eq!(
        transfer(&mut p, c, s, &data, &dropped, |d| frag_needed(d, 1300)),
        data
    );
    // The route exception holds for the destination: a second connection's first
    // segments fit (`tcp_connect_init` -> `tcp_sync_mss(dst_mtu)`).
    let l = p.b.listen(addr(B, 81), 4).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
    p.drive_for(Duration::from_millis(50));
    let s2 = p.b.accept(l).unwrap();
    let i = p.a.info(p.now, c2).unwrap();
    assert_eq!((i.pmtu, i.snd_mss), (1300, 1248));
    let n = p.wire.len();
    let more = pattern(100_000, 6);
    assert_eq!(
        transfer(&mut p, c2, s2, &more, &dropped, |d| frag_needed(d, 1300)),
        more
    );
    assert!(largest_sent(&p, n) <= 1300);
    // After net.ipv4.route.mtu_expires (600 s) a new connection tries the device's.
    p.drive_for(Duration::from_secs(601));
    let c3 = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
    assert_eq!(p.a.info(p.now, c3).unwrap().pmtu, 1500);
}

#[test]
fn forged_or_useless_frag_needed_is_bounded() {
    let (mut p, c, s) = establish(Config::default());
    let data = pattern(30_000, 7);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    p.drive_for(Duration::from_millis(100));
    let last = p
        .wire
        .iter()
        .rev()
        .find(|(_, d, pkt)| *d == Dir::AtoB && pkt.len() > 100)
        .map(|(_, _, pkt)| pkt.clone())
        .unwrap();
    // Everything is acknowledged: the quoted sequence is no longer in flight
    // (RFC 5927 section 4.1), so the message changes nothing.
    p.inject(false, &frag_needed(&last, 600));
    assert_eq!(p.a.counters().get(Mib::TcpExtOutOfWindowIcmps), 1);
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1500);
    // In flight, an absurd MTU is raised to net.ipv4.route.min_pmtu (552), and a
    // larger one than the path's changes nothing.
    assert!(p.a.send(p.now, c, &pattern(20_000, 8)).is_ok());
    p.flush();
    let inflight = p.take_in_flight(true);
    p.inject(false, &frag_needed(&inflight[0], 1600));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1500);
    p.inject(false, &frag_needed(&inflight[0], 68));
    let i = p.a.info(p.now, c).unwrap();
    assert_eq!((i.pmtu, i.snd_mss), (552, 552 - 40 - 12));
    let more = pattern(50_000, 9);
    let none = Rc::new(RefCell::new(Vec::new()));
    let got = transfer_after(&mut p, (c, s), 20_000, &more, &none, |_| Vec::new());
    assert_eq!(got, more);
}

#[test]
fn packet_too_big_over_ipv6() {
    let mut pair = Pair::new(Config::default());
    pair.a.add_address(A6.parse::<IpAddr>().unwrap());
    pair.b.add_address(B6.parse::<IpAddr>().unwrap());
    let (mut p, c, s) = establish_with(pair, A6, B6);
    let dropped = narrow_path(&mut p, 1400);
    // The first answer says 1000, below IPV6_MIN_MTU (1280): ignored (tcp_v6_err),
    // else the 1400 of the later ones could not raise the path MTU again.
    let answers = std::cell::Cell::new(0);
    let icmp = |d: &[u8]| {
        answers.set(answers.get() + 1);
        packet_too_big(d, if answers.get() == 1 { 1000 } else { 1400 })
    };
    let data = pattern(300_000, 2);
    assert_eq!(transfer(&mut p, c, s, &data, &dropped, icmp), data);
    assert!(p.a.counters().get(Mib::Icmp6InPktTooBigs) >= 2);
    let i = p.a.info(p.now, c).unwrap();
    // 1400 - 40 (IPv6) - 20 (TCP) - 12 (timestamps).
    assert_eq!((i.pmtu, i.snd_mss), (1400, 1328));
}

/// Whether an IPv4 packet has DF set.
fn df(pkt: &[u8]) -> bool {
    pkt[6] & 0x40 != 0
}

/// The A->B packets carrying data since `from`.
fn data_sent(p: &Pair, from: usize) -> Vec<Vec<u8>> {
    p.wire[from..]
        .iter()
        .filter(|(_, d, pkt)| *d == Dir::AtoB && pkt.len() > 100)
        .map(|(_, _, pkt)| pkt.clone())
        .collect()
}

/// A connection with `pmtudisc` that has 20 kB in flight, and the first of them.
fn in_flight_with(pmtudisc: u8) -> (Pair, SocketHandle, SocketHandle, Vec<u8>) {
    let (mut p, c, s) = establish(Config::default());
    p.a.socket(c).set_pmtudisc(pmtudisc).unwrap();
    send_in_flight(
        p,
        c,
        s,
        pmtudisc != lowtide::posix::consts::IP_PMTUDISC_DONT as u8,
    )
}

/// `(p, c, s)` with 20 kB from c in flight, and the first of them (DF if `df_set`).
fn send_in_flight(
    mut p: Pair,
    c: SocketHandle,
    s: SocketHandle,
    df_set: bool,
) -> (Pair, SocketHandle, SocketHandle, Vec<u8>) {
    assert!(p.a.send(p.now, c, &pattern(20_000, 8)).is_ok());
    p.flush();
    let inflight = p.take_in_flight(true);
    assert_eq!(df(&inflight[0]), df_set);
    (p, c, s, inflight[0].clone())
}

#[test]
fn ip_no_pmtu_disc_decides_what_frag_needed_does() {
    let with = |mode: &str| {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.ip_no_pmtu_disc", mode).unwrap();
        let (p, c, s) = establish(cfg);
        // inet_create: IP_PMTUDISC_DONT under any non-zero mode, so no DF.
        send_in_flight(p, c, s, mode == "0")
    };
    // 1: every message is taken as an MTU of 0: the route's is min_pmtu, locked.
    // IP_PMTUDISC_DONT: no retransmission at once, the MSS follows at the next
    // tcp_current_mss (here the RTO's retransmission).
    let (mut p, c, _s, first) = with("1");
    p.inject(false, &frag_needed(&first, 1400));
    p.drive_for(Duration::from_secs(1));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 552);
    // 2: the message goes no further (counted as an unreachable all the same).
    let (mut p, c, _s, first) = with("2");
    p.inject(false, &frag_needed(&first, 1400));
    p.drive_for(Duration::from_secs(1));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1500);
    assert_eq!(p.a.counters().get(Mib::IcmpInDestUnreachs), 1);
    // 3: TCP validates ICMP tags strictly, so the MTU is taken as reported.
    let (mut p, c, _s, first) = with("3");
    p.inject(false, &frag_needed(&first, 1400));
    p.drive_for(Duration::from_secs(1));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1400);
}

#[test]
fn route_sysctls_set_min_pmtu_and_the_expiry() {
    let mut cfg = Config::default();
    cfg.set("net.ipv4.route.min_pmtu", "1000").unwrap();
    cfg.set("net.ipv4.route.mtu_expires", "30").unwrap();
    let (p, c, s) = establish(cfg);
    let (mut p, c, _s, first) = send_in_flight(p, c, s, true);
    p.inject(false, &frag_needed(&first, 800));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1000);
    p.drive_for(Duration::from_secs(31));
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    assert_eq!(
        p.a.info(p.now, c2).unwrap().pmtu,
        1500,
        "expired after 30 s"
    );
    assert!(Config::default()
        .set("net.ipv4.route.min_pmtu", "67")
        .is_err());
}

#[test]
fn a_path_mtu_under_min_pmtu_locks_the_route_and_want_sends_without_df() {
    // __ip_rt_update_pmtu: a reported MTU under ip_rt_min_pmtu is taken as 552
    // and locked (d52e5a7e7ca4), so ip_dont_fragment is false under
    // IP_PMTUDISC_WANT (the default): the path's routers may fragment.
    let (mut p, c, s, first) = in_flight_with(lowtide::posix::consts::IP_PMTUDISC_WANT as u8);
    p.inject(false, &frag_needed(&first, 500));
    let i = p.a.info(p.now, c).unwrap();
    assert_eq!((i.pmtu, i.snd_mss), (552, 552 - 40 - 12));
    let n = p.wire.len();
    let more = pattern(30_000, 9);
    let none = Rc::new(RefCell::new(Vec::new()));
    assert_eq!(
        transfer_after(&mut p, (c, s), 20_000, &more, &none, |_| Vec::new()),
        more
    );
    let sent = data_sent(&p, n);
    assert!(!sent.is_empty() && sent.iter().all(|pkt| !df(pkt)));
    // The route's MTU holds no DF-setting error to remember: SO_ERROR is clear.
    assert_eq!(p.a.socket_error(c).unwrap(), None);
    // ip_mtu_locked: a later report learns nothing while the lock holds.
    assert!(p.a.send(p.now, c, &pattern(5_000, 10)).is_ok());
    p.flush();
    let inflight = p.take_in_flight(true);
    p.inject(false, &frag_needed(&inflight[0], 1000));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 552);
    // A new connection to B takes the locked route: no DF either.
    let l = p.b.listen(addr(B, 81), 4).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
    p.drive_for(Duration::from_millis(50));
    let _ = p.b.accept(l).unwrap();
    let n = p.wire.len();
    assert!(p.a.send(p.now, c2, &pattern(3_000, 11)).is_ok());
    p.drive_for(Duration::from_millis(50));
    let sent = data_sent(&p, n);
    assert!(!sent.is_empty() && sent.iter().all(|pkt| !df(pkt)));
}

#[test]
fn pmtudisc_do_under_a_route_that_keeps_more_remembers_emsgsize() {
    // tcp_v4_mtu_reduced: "Something is about to be wrong... Remember soft error
    // for the case, if this connection will not able to recover": the reported
    // MTU is below the route's (raised to 552) and the socket sends with DF.
    let (mut p, c, _s, first) = in_flight_with(lowtide::posix::consts::IP_PMTUDISC_DO as u8);
    p.inject(false, &frag_needed(&first, 500));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 552);
    assert_eq!(
        p.a.socket_error(c).unwrap(),
        Some(lowtide::SocketError::MessageTooLong)
    );
    assert_eq!(p.a.socket_error(c).unwrap(), None, "read once");
    // A report the route takes as it is leaves no error.
    let (mut p, c, _s, first) = in_flight_with(lowtide::posix::consts::IP_PMTUDISC_DO as u8);
    p.inject(false, &frag_needed(&first, 1400));
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1400);
    assert_eq!(p.a.socket_error(c).unwrap(), None);
}

#[test]
fn every_connection_to_the_destination_follows_a_learned_path_mtu() {
    // update_or_create_fnhe marks the nexthop's cached routes stale: a second
    // connection to B that got no ICMP of its own takes the learned path MTU at its
    // next transmission's route check (ip_queue_xmit's __sk_dst_check), and its
    // MSS follows at the next tcp_current_mss. Its first burst still goes out at the
    // old size, as Linux's (tcp_current_mss reads the stale route); without the
    // route check every later segment would be lost too, a black hole.
    let (mut p, c, s) = establish(Config::default());
    let l = p.b.listen(addr(B, 81), 4).unwrap();
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
    p.drive_for(Duration::from_millis(50));
    let s2 = p.b.accept(l).unwrap();
    assert_eq!(p.a.info(p.now, c2).unwrap().pmtu, 1500);
    let dropped = narrow_path(&mut p, 1300);
    let data = pattern(50_000, 12);
    assert_eq!(
        transfer(&mut p, c, s, &data, &dropped, |d| frag_needed(d, 1300)),
        data
    );
    p.drive_for(Duration::from_millis(100));
    let n = p.wire.len();
    let more = pattern(50_000, 13);
    let none = Rc::new(RefCell::new(Vec::new()));
    assert_eq!(transfer(&mut p, c2, s2, &more, &none, |_| Vec::new()), more);
    assert_eq!(p.a.info(p.now, c2).unwrap().pmtu, 1300);
    let sent: Vec<_> = p.wire[n..]
        .iter()
        .filter(|(_, d, pkt)| *d == Dir::AtoB && pkt.len() > 100)
        .collect();
    let first = sent[0].0;
    assert!(sent
        .iter()
        .all(|(t, _, pkt)| pkt.len() <= 1300 || *t == first));
}

#[test]
fn a_live_connection_goes_back_up_when_its_learned_path_mtu_expires() {
    // ipv4_mtu: a learned path MTU counts until dst->expires; the next
    // tcp_current_mss after it finds the route's MTU again and syncs the MSS up.
    let mut cfg = Config::default();
    cfg.set("net.ipv4.route.mtu_expires", "5").unwrap();
    let (p, c, s) = establish(cfg);
    let (mut p, c, s, first) = send_in_flight(p, c, s, true);
    p.inject(false, &frag_needed(&first, 1300));
    let none = Rc::new(RefCell::new(Vec::new()));
    let more = pattern(10_000, 14);
    assert_eq!(
        transfer_after(&mut p, (c, s), 20_000, &more, &none, |_| Vec::new()),
        more
    );
    assert_eq!(p.a.info(p.now, c).unwrap().pmtu, 1300);
    p.drive_for(Duration::from_secs(5));
    let n = p.wire.len();
    let more = pattern(10_000, 15);
    assert_eq!(
        transfer_after(&mut p, (c, s), 0, &more, &none, |_| Vec::new()),
        more
    );
    let i = p.a.info(p.now, c).unwrap();
    assert_eq!((i.pmtu, i.snd_mss), (1500, 1448));
    assert_eq!(largest_sent(&p, n), 1500);
}

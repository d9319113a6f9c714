//! Route metrics (`ip route ... mtu lock N advmss N initcwnd N initrwnd N rto_min T
//! quickack 1 congctl [lock] NAME features ecn`) as Linux's TCP reads them from a
//! connection's route, and packetization-layer path MTU discovery (RFC 4821,
//! `net.ipv4.tcp_mtu_probing`): probes of the search's middle size, success and
//! failure, and black hole detection after `tcp_retries1` RTOs.

use crate::common::drill::{ms, Drill};
use crate::common::*;
use lowtide::route::{Metrics, Route, Rtax};
use lowtide::{Config, Mib, SocketError};
use lowtide_wire::tcp::TcpFlags;

/// A route to B with the given metrics, on A.
fn route_to_b(p: &mut Pair, set: impl FnOnce(&mut Metrics)) {
    let mut metrics = Metrics::default();
    set(&mut metrics);
    p.a.route_replace(Route {
        dst: B.parse().unwrap(),
        prefix_len: 32,
        metrics,
    });
}

/// A's SYN as B saw it.
fn a_syn(p: &Pair) -> Seg {
    p.wire
        .iter()
        .filter(|(_, d, _)| *d == Dir::AtoB)
        .map(|(_, _, pk)| Seg::parse(pk))
        .find(|s| s.has(TcpFlags::SYN))
        .expect("A sent a SYN")
}

fn no_timestamps() -> Config {
    Config {
        tcp_timestamps: false,
        ..Config::default()
    }
}

#[test]
fn advmss_initrwnd_mtu_and_initcwnd_shape_the_handshake_and_the_first_flight() {
    let mut p = Pair::new(no_timestamps());
    p.record = true;
    route_to_b(&mut p, |m| {
        m.set(Rtax::AdvMss, 600, false);
        m.set(Rtax::Mtu, 1040, true);
        m.set(Rtax::InitCwnd, 4, false);
        m.set(Rtax::InitRwnd, 3, false);
    });
    let (mut p, a, _b) = establish_with(p, A, B);
    let syn = a_syn(&p);
    // tcp_advertise_mss: the route's advmss, not the device's MTU less headers;
    // tcp_select_initial_window: initrwnd segments of that MSS.
    assert_eq!(syn.th.options.mss, Some(600));
    assert_eq!(syn.th.window, 3 * 600);
    let info = p.a.info(p.now, a).unwrap();
    // The MTU bounds what A sends (B offered 1460); initcwnd is the first window.
    assert_eq!((info.pmtu, info.snd_mss, info.snd_cwnd), (1040, 1000, 4));
    let from = p.wire.len();
    p.a.send(p.now, a, &vec![7; 20_000]).unwrap();
    p.flush();
    let flight: usize = p
        .sent_since(from, Dir::AtoB)
        .iter()
        .map(|s| s.payload.len())
        .sum();
    assert_eq!(flight, 4 * 1000);
}

#[test]
fn a_locked_route_mtu_learns_nothing_from_icmp() {
    let mut p = Pair::new(no_timestamps());
    route_to_b(&mut p, |m| m.set(Rtax::Mtu, 1200, true));
    let (mut p, a, _b) = establish_with(p, A, B);
    p.record = true;
    let from = p.wire.len();
    p.a.send(p.now, a, &[1; 1000]).unwrap();
    p.flush();
    let seg = p.wire[from..]
        .iter()
        .find(|(_, d, _)| *d == Dir::AtoB)
        .map(|(_, _, pk)| pk.clone())
        .unwrap();
    p.inject(false, &super::pmtu::frag_needed(&seg, 700));
    p.flush();
    // __ip_rt_update_pmtu returns at once for a locked MTU.
    assert_eq!(p.a.info(p.now, a).unwrap().pmtu, 1200);
    assert_eq!(p.a.routes().mtu(p.now, B.parse().unwrap(), 1500), 1200);
}

#[test]
fn rto_min_quickack_and_a_locked_congctl() {
    let mut p = Pair::new(no_timestamps());
    route_to_b(&mut p, |m| {
        m.set(Rtax::RtoMin, 50, true);
        m.set(Rtax::QuickAck, 1, false);
        m.set_congctl("reno", true);
    });
    let (mut p, a, b) = establish_with(p, A, B);
    let info = p.a.info(p.now, a).unwrap();
    // RTT 20 ms, RTTVAR 10 ms: RTO = 20 + max(4 * 10, 50) ms, not 20 + 200 ms.
    assert_eq!(info.rto, 70_000);
    assert_eq!(p.a.socket_ref(a).congestion(), Ok("reno"));
    assert_eq!(
        p.a.socket(a).set_congestion(p.now, "cubic"),
        Err(SocketError::PermissionDenied)
    );
    // B's route has no metrics: its choice stays its own.
    assert_eq!(p.b.socket(b).set_congestion(p.now, "reno"), Ok(()));
    // quickack: A acknowledges each of B's segments at once, never delaying.
    p.record = true;
    let from = p.wire.len();
    for _ in 0..3 {
        p.b.send(p.now, b, &[5; 100]).unwrap();
        p.flush();
        p.drive_for(ms(30));
    }
    let acks: Vec<_> = p
        .wire
        .iter()
        .skip(from)
        .filter(|(_, d, pk)| *d == Dir::AtoB && Seg::parse(pk).is_pure_ack())
        .map(|(at, _, _)| *at)
        .collect();
    assert_eq!(acks.len(), 3);
    let sent: Vec<_> = p
        .wire
        .iter()
        .skip(from)
        .filter(|(_, d, pk)| *d == Dir::BtoA && !Seg::parse(pk).payload.is_empty())
        .map(|(at, _, _)| *at + p.delay)
        .collect();
    assert_eq!(acks, sent, "each ACK leaves as its segment arrives");
}

/// The mtu_probe script's setup: B offers MSS 1460; A's route has advmss 600, a
/// locked MTU of 640 and initcwnd 11; MTU probing searches from `tcp_base_mss` 512.
fn probing_drill() -> Drill {
    let ca = Config {
        tcp_timestamps: false,
        tcp_mtu_probing: 2,
        tcp_base_mss: 512,
        tcp_congestion_control: "reno".into(),
        ..Config::default()
    };
    let cb = Config {
        tcp_timestamps: false,
        ..Config::default()
    };
    let mut p = Pair::with_configs(ca, cb);
    route_to_b(&mut p, |m| {
        m.set(Rtax::AdvMss, 600, false);
        m.set(Rtax::Mtu, 640, true);
        m.set(Rtax::InitCwnd, 11, false);
    });
    let mut d = Drill::with_pair(p, ms(100), None);
    d.set_win(50_000);
    d
}

/// The path's MTU rises to 1500 (`ip route change ... mtu lock 1500`).
fn raise_route_mtu(d: &mut Drill) {
    route_to_b(&mut d.p, |m| {
        m.set(Rtax::AdvMss, 1460, false);
        m.set(Rtax::Mtu, 1500, true);
    });
}

#[test]
fn a_probe_of_the_middle_size_goes_first_and_its_ack_raises_the_mss() {
    let mut d = probing_drill();
    raise_route_mtu(&mut d);
    d.write(4000);
    let sent = d.sent();
    let sizes: Vec<u32> = sent.iter().map(|s| s.end - s.start).collect();
    // (1500 + 552) / 2 = 1026 bytes of MTU: 986 of payload. The write's MSS (600)
    // came from the route the connection held; once the probe's transmission looked
    // the changed route up, the next tcp_current_mss syncs to its MTU 1500, which
    // MTU probing caps at what the search has shown to work (552: MSS 512).
    assert_eq!(sizes[0], 986, "{sizes:?}");
    assert!(sizes[1..].iter().all(|&n| n <= 600), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<u32>(), 4000);
    d.ack(ms(100), 4001);
    assert_eq!(d.p.a.counters().get(Mib::TcpExtTCPMTUPSuccess), 1);
    d.write(2000);
    let sizes: Vec<u32> = d.sent().iter().map(|s| s.end - s.start).collect();
    assert_eq!(sizes, [986, 986, 28]);
}

#[test]
fn a_lost_probe_lowers_the_search_and_resends_at_the_mss_that_works() {
    let mut d = probing_drill();
    raise_route_mtu(&mut d);
    d.write(4000);
    let _ = d.sent();
    let cwnd = d.cwnd();
    // Everything after the probe arrives; the probe does not (RACK marks it lost
    // once the reordering window passes).
    d.ack_sack(ms(100), 1, &[(987, 4001)]);
    d.wait(ms(100));
    assert_eq!(d.p.a.counters().get(Mib::TcpExtTCPMTUPFail), 1);
    let again: Vec<(u32, u32)> = d.sent().iter().map(|s| (s.start, s.end)).collect();
    // tcp_simple_retransmit at the MSS the search has shown to work (512).
    assert_eq!(again.first(), Some(&(1, 513)), "{again:?}");
    assert!(again.iter().all(|(s, e)| e - s <= 512));
    // "MTU probe failure: don't reduce cwnd": the probe's segment is given back.
    assert!(d.cwnd() >= cwnd, "{} < {cwnd}", d.cwnd());
}

#[test]
fn rtos_past_tcp_retries1_take_the_path_for_a_black_hole() {
    let ca = Config {
        tcp_timestamps: false,
        tcp_mtu_probing: 1,
        ..Config::default()
    };
    let mut d = Drill::with_pair(Pair::new(ca), ms(100), None);
    d.write(10 * 1460);
    assert!(d.sent().iter().all(|s| s.end - s.start == 1460));
    // No ACK comes. RTO 300 ms (RTT 100 ms): retransmissions 0.3, 0.6, 1.2, 2.4 and
    // 4.8 s after the flight. tcp_retries1 (3) backed-off RTOs from TCP_RTO_MIN
    // take 0.2 + 0.4 + 0.8 + 1.6 = 3 s from the first retransmission: the fifth
    // RTO (4.5 s after it) turns probing on, which caps the MSS at what
    // tcp_base_mss (1024) gives; the sixth halves the search's floor to 512. The
    // timer wheel runs each a little late (the 4.8 s one up to 512 ms).
    d.wait(ms(5_000));
    let sizes: Vec<u32> = d.sent().iter().map(|s| s.end - s.start).collect();
    assert_eq!(sizes, [1460, 1460, 1460, 1460, 1024]);
    d.wait(ms(6_000));
    let sizes: Vec<u32> = d.sent().iter().map(|s| s.end - s.start).collect();
    assert_eq!(sizes.last(), Some(&512), "{sizes:?}");
}

//! TCP Fast Open, client side (`tcp_send_syn_data`, `tcp_rcv_fastopen_synack`):
//! a cookie request, the cookie cached per destination, SYN data acknowledged or
//! not (then resent at once, `TCPFastOpenActiveFail`).

use crate::common::*;
use lowtide::tcp::sockopt::SockOptions;
use lowtide::{Config, Instant, Mib, SocketHandle, Stack, UserBytes};
use lowtide_wire::tcp::{FastOpenOption, TcpFlags, TcpOptions, TcpRepr};

fn me() -> std::net::SocketAddr {
    addr("192.168.0.1", 0)
}

fn peer() -> std::net::SocketAddr {
    addr("192.0.2.1", 8080)
}

fn open(st: &mut Stack, data: &[u8]) -> (SocketHandle, usize, TcpRepr, usize) {
    open_user(st, UserBytes::Bytes(data))
}

/// A Fast Open connect with the caller's `data`: the handle, the bytes the SYN
/// took, the SYN and its payload length.
fn open_user(st: &mut Stack, data: UserBytes<'_>) -> (SocketHandle, usize, TcpRepr, usize) {
    let (h, n) = st
        .connect_fastopen(
            Instant::ZERO,
            me(),
            peer(),
            &SockOptions::default(),
            Some(data),
            false,
        )
        .unwrap();
    let tx = st.poll_transmit(Instant::ZERO).expect("SYN");
    let (th, hl) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    (h, n, th, tx.packet.len() - 20 - hl)
}

/// A connection asks for a cookie and the server's SYN-ACK gives `[7; 8]`, which
/// the cache keeps for the next connect.
fn cache_cookie(st: &mut Stack) {
    let (h, _, syn, _) = open(st, b"");
    synack(st, h, &syn, 0, Some(&[7; 8]));
    while st.poll_transmit(Instant::ZERO).is_some() {}
}

/// The route to the peer gets `fastopen_no_cookie` (`RTAX_FASTOPEN_NO_COOKIE`).
fn no_cookie_route(st: &mut Stack) {
    let mut metrics = lowtide::route::Metrics::default();
    metrics.set(lowtide::route::Rtax::FastopenNoCookie, 1, false);
    st.route_replace(lowtide::route::Route {
        dst: peer().ip(),
        prefix_len: 32,
        metrics,
    });
}

/// The server's SYN-ACK to `syn`, acknowledging `acked` bytes of its data.
fn synack(st: &mut Stack, h: SocketHandle, syn: &TcpRepr, acked: u32, cookie: Option<&[u8]>) {
    let (local, _) = st.addresses(h).unwrap();
    let th = TcpRepr {
        seq: 5000,
        ack: syn.seq.wrapping_add(1 + acked),
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            fastopen: cookie.map(|c| FastOpenOption::cookie(false, c)),
            ..Default::default()
        },
        ..Default::default()
    };
    let pkt = build(peer(), local, &th, &[], 1);
    st.handle_packet(Instant::ZERO, &pkt, lowtide::RxChecksum::Verify);
}

#[test]
fn request_then_cookie_then_syn_data() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    let (h, n, syn, len) = open(&mut st, b"hello");
    assert_eq!((n, len), (0, 0), "no cookie yet: no data in the SYN");
    assert_eq!(syn.options.fastopen, Some(FastOpenOption::request(false)));
    synack(&mut st, h, &syn, 0, Some(&[7; 8]));
    while st.poll_transmit(Instant::ZERO).is_some() {}
    let (h2, n, syn, len) = open(&mut st, b"hello");
    assert_eq!(
        (n, len),
        (5, 5),
        "the cached cookie lets the data go in the SYN"
    );
    assert_eq!(
        syn.options.fastopen.map(|c| c.bytes().to_vec()),
        Some(vec![7; 8])
    );
    synack(&mut st, h2, &syn, 5, None);
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenActive), 1);
    assert_eq!(
        st.info(Instant::ZERO, h2).unwrap().options & 32,
        32,
        "TCPI_OPT_SYN_DATA"
    );
}

/// tcp_send_syn_data: data whose copy faults (copy_page_from_iter copies nothing)
/// sends a SYN with a cookie request in place of the cached cookie, no data, and
/// leaves `fastopen_client_fail` unset (the cookie check passed); without cookies
/// (a `fastopen_no_cookie` route) a SYN without any Fast Open option. A fault of
/// no bytes copies nothing and sends the cookie.
#[test]
fn a_faulting_copy_falls_back_to_a_cookie_request() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    cache_cookie(&mut st);
    let (h2, n, syn, len) = open_user(&mut st, UserBytes::Fault(100));
    assert_eq!((n, len), (0, 0));
    assert_eq!(syn.options.fastopen, Some(FastOpenOption::request(false)));
    let i = st.info(Instant::ZERO, h2).unwrap();
    assert_eq!((i.fastopen_client_fail, i.unacked), (0, 1), "the SYN alone");
    let (_, n, syn, len) = open_user(&mut st, UserBytes::Fault(0));
    assert_eq!((n, len), (0, 0));
    assert_eq!(
        syn.options.fastopen.map(|c| c.bytes().to_vec()),
        Some(vec![7; 8])
    );
    no_cookie_route(&mut st);
    let (_, n, syn, len) = open_user(&mut st, UserBytes::Fault(100));
    assert_eq!((n, len, syn.options.fastopen), (0, 0, None));
}

/// tcp_fastopen_no_cookie: a route with `fastopen_no_cookie` sends the data in
/// the SYN without a cookie or a request (`TFO_CLIENT_NO_COOKIE`'s behaviour).
#[test]
fn a_no_cookie_route_sends_syn_data_without_a_cookie() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    no_cookie_route(&mut st);
    let (h, n, syn, len) = open(&mut st, b"hello");
    assert_eq!((n, len, syn.options.fastopen), (5, 5, None));
    // __tcp_transmit_skb counts the SYN's data once in tcpi_bytes_sent.
    let info = st.info(Instant::ZERO, h).unwrap();
    assert_eq!((info.bytes_sent, info.data_segs_out), (5, 1));
    synack(&mut st, h, &syn, 5, None);
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenActive), 1);
    assert_eq!(st.info(Instant::ZERO, h).unwrap().bytes_sent, 5);
}

#[test]
fn data_the_synack_does_not_cover_is_sent_again_at_once() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    cache_cookie(&mut st);
    let (h2, n, syn, _) = open(&mut st, b"hello");
    assert_eq!(n, 5);
    synack(&mut st, h2, &syn, 0, None);
    let tx = st.poll_transmit(Instant::ZERO).expect("the data again");
    let (th, hl) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    assert_eq!(tx.packet.len() - 20 - hl, 5);
    assert_eq!(th.seq, syn.seq.wrapping_add(1));
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenActiveFail), 1);
    assert_eq!(
        st.info(Instant::ZERO, h2).unwrap().fastopen_client_fail,
        2,
        "TFO_DATA_NOT_ACKED"
    );
}

/// ICMP "fragmentation needed" for a SYN with data (tcp_v4_mtu_reduced in SYN-SENT:
/// tcp_sync_mss, then tcp_simple_retransmit with the Fast Open case): the MSS
/// follows the path at once (`tcpi_snd_mss` 748: MTU 800 less 40 bytes of headers
/// and the 12 of the timestamps the SYN offers, under the cookie's MSS), and the
/// SYN goes again at once, bare, advertising the route's MSS (tcp_advertise_mss).
#[test]
fn frag_needed_on_syn_data_resends_a_bare_syn_with_the_route_mss() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    cache_cookie(&mut st);
    let (h2, n) = st
        .connect_fastopen(
            Instant::ZERO,
            me(),
            peer(),
            &SockOptions::default(),
            Some(UserBytes::Bytes(&[1; 1000])),
            false,
        )
        .unwrap();
    assert_eq!(n, 1000);
    let syn_data = st
        .poll_transmit(Instant::ZERO)
        .expect("SYN with data")
        .packet;
    assert!(syn_data.len() > 1000);
    let icmp = crate::output::pmtu::frag_needed(&syn_data, 800);
    st.handle_packet(Instant::ZERO, &icmp, lowtide::RxChecksum::Verify);
    let tx = st
        .poll_transmit(Instant::ZERO)
        .expect("the SYN again, at once");
    let (th, hl) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    assert_eq!(th.flags, TcpFlags::SYN);
    assert_eq!(tx.packet.len(), 20 + hl, "no data");
    assert_eq!(th.options.mss, Some(760));
    assert_eq!(th.options.fastopen, None);
    assert_eq!(st.counters().get(Mib::TcpExtTCPSynRetrans), 1);
    assert_eq!(st.info(Instant::ZERO, h2).unwrap().snd_mss, 748);
}

/// The same ICMP for a bare SYN (no Fast Open data): tcp_sync_mss still takes the
/// MSS down in SYN-SENT (under `TCP_MSS_DEFAULT`'s clamp of 536 before the
/// handshake: 524 with the timestamps' room, 500 at the smallest path MTU a route
/// takes, `ip_rt_min_pmtu`'s 552), but tcp_simple_retransmit finds nothing longer
/// than it (the SYN has no payload): nothing is lost, nothing goes again. A report
/// above the connection's path MTU changes nothing (`icsk_pmtu_cookie > mtu`
/// fails).
#[test]
fn frag_needed_on_a_bare_syn_takes_the_mss_down_and_resends_nothing() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    // No cookie yet: the SYN asks for one and carries no data.
    let (h, _) = st
        .connect_fastopen(
            Instant::ZERO,
            me(),
            peer(),
            &SockOptions::default(),
            Some(UserBytes::Bytes(b"")),
            false,
        )
        .unwrap();
    let syn = st.poll_transmit(Instant::ZERO).expect("SYN").packet;
    assert_eq!(st.info(Instant::ZERO, h).unwrap().snd_mss, 524);
    let icmp = crate::output::pmtu::frag_needed(&syn, 552);
    st.handle_packet(Instant::ZERO, &icmp, lowtide::RxChecksum::Verify);
    assert!(st.poll_transmit(Instant::ZERO).is_none(), "nothing lost");
    let i = st.info(Instant::ZERO, h).unwrap();
    assert_eq!((i.snd_mss, i.lost, i.total_retrans), (500, 0, 0));
    let icmp = crate::output::pmtu::frag_needed(&syn, 1000);
    st.handle_packet(Instant::ZERO, &icmp, lowtide::RxChecksum::Verify);
    assert!(st.poll_transmit(Instant::ZERO).is_none());
    assert_eq!(st.info(Instant::ZERO, h).unwrap().snd_mss, 500);
}

/// `MSG_FASTOPEN | MSG_ZEROCOPY` on a `SO_ZEROCOPY` socket (tcp_sendmsg_locked's
/// zerocopy step, then tcp_send_syn_data's `skb_zcopy_set`): without a cookie the
/// SYN carries no data and the notification id is given back (nothing on the
/// error queue); with one, the SYN's data completes id 0, copied, once the SYN-ACK
/// acknowledges it.
#[test]
fn zerocopy_syn_data_completes_on_the_error_queue() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    let zc = SockOptions {
        zerocopy: true,
        ..SockOptions::default()
    };
    let data = Some(UserBytes::Bytes(&[1; 500]));
    let (h, n) = st
        .connect_fastopen(Instant::ZERO, me(), peer(), &zc, data, true)
        .unwrap();
    assert_eq!(n, 0);
    let tx = st.poll_transmit(Instant::ZERO).expect("SYN");
    let (syn, _) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    synack(&mut st, h, &syn, 0, Some(&[7; 8]));
    assert_eq!(
        st.socket(h).recv_errqueue().unwrap(),
        None,
        "the id was given back"
    );
    while st.poll_transmit(Instant::ZERO).is_some() {}
    let (h2, n) = st
        .connect_fastopen(Instant::ZERO, me(), peer(), &zc, data, true)
        .unwrap();
    assert_eq!(n, 500);
    let tx = st.poll_transmit(Instant::ZERO).expect("SYN with data");
    let (syn, _) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    assert_eq!(
        st.socket(h2).recv_errqueue().unwrap(),
        None,
        "not acknowledged yet"
    );
    synack(&mut st, h2, &syn, 500, None);
    let e = st
        .socket(h2)
        .recv_errqueue()
        .unwrap()
        .expect("the completion");
    let ee = e.ee;
    assert_eq!(
        (ee.origin, ee.code, ee.info, ee.data),
        (
            lowtide::tcp::errqueue::SO_EE_ORIGIN_ZEROCOPY,
            lowtide::tcp::errqueue::SO_EE_CODE_ZEROCOPY_COPIED,
            0,
            0
        )
    );
    assert_eq!(st.socket(h2).recv_errqueue().unwrap(), None);
}

/// tcp_send_syn_data queues the SYN and an skb for its data, an empty one when no
/// data goes with the cookie: two packets out, both delivered by the SYN-ACK;
/// tcp_rcv_fastopen_synack takes one back only for real SYN data.
#[test]
fn a_fast_open_syn_is_two_skbs_in_the_queue() {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    let (h, _, syn, _) = open(&mut st, b"");
    assert_eq!(
        st.info(Instant::ZERO, h).unwrap().unacked,
        1,
        "a cookie request"
    );
    synack(&mut st, h, &syn, 0, Some(&[7; 8]));
    while st.poll_transmit(Instant::ZERO).is_some() {}
    for (data, delivered) in [(&b"hello"[..], 1), (&b""[..], 2)] {
        let (h, _, syn, _) = open(&mut st, data);
        assert_eq!(st.info(Instant::ZERO, h).unwrap().unacked, 2);
        synack(&mut st, h, &syn, data.len() as u32, None);
        let info = st.info(Instant::ZERO, h).unwrap();
        assert_eq!((info.unacked, info.delivered), (0, delivered), "{data:?}");
        while st.poll_transmit(Instant::ZERO).is_some() {}
    }
}

/// tcp_connect runs tcp_ecn_send_syn on every SYN, a Fast Open one too
/// (tcp_send_syn_data copies the SYN's ECE|CWR): with tcp_ecn 1 the SYN with data
/// asks for ECN, and so does a cookie request; with tcp_ecn 2 (passive only) neither.
#[test]
fn a_fast_open_syn_asks_for_ecn_as_any_syn() {
    for (ecn, bits, want) in [("1", "5", true), ("1", "1", true), ("2", "5", false)] {
        let mut st = Stack::new(Config::default(), 3);
        st.add_address(me().ip());
        st.set_sysctl(Instant::ZERO, "net.ipv4.tcp_ecn", ecn)
            .unwrap();
        st.set_sysctl(Instant::ZERO, "net.ipv4.tcp_fastopen", bits)
            .unwrap();
        let (_, n, syn, _) = open(&mut st, b"hello");
        let asks = syn.flags.contains(TcpFlags::ECE | TcpFlags::CWR);
        assert_eq!(
            (asks, n > 0),
            (want, bits == "5"),
            "tcp_ecn {ecn}, tcp_fastopen {bits}"
        );
    }
}

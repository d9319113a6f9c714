//! TCP Fast Open, server side (RFC 7413, Linux's `tcp_try_fastopen`,
//! `tcp_fastopen_create_child`, `tcp_fastopen_synack_timer`): each branch of the
//! decision on a SYN, and a Fast Open child's life before its handshake completes.

use crate::common::*;
use lowtide::tcp::fastopen::{cookie_gen_cipher, FastOpenKeys};
use lowtide::tcp::sockopt::SockOptions;
use lowtide::{Config, Instant, Mib, SocketHandle, Stack, TcpState};
use lowtide_wire::tcp::{FastOpenOption, TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddr;

const KEY: &str = "a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4";
const ISN: u32 = 1000;

fn server() -> SocketAddr {
    addr("192.168.0.1", 8080)
}

fn client() -> SocketAddr {
    addr("192.0.2.1", 40000)
}

/// A stack with `tcp_fastopen` = `bits` and the test key, listening with
/// `TCP_FASTOPEN` = `qlen` (if any).
fn listening(bits: &str, qlen: Option<u32>) -> (Stack, SocketHandle) {
    let mut st = Stack::new(Config::default(), 1);
    st.add_address(server().ip());
    st.set_sysctl(Instant::ZERO, "net.ipv4.tcp_fastopen", bits)
        .unwrap();
    st.set_sysctl(Instant::ZERO, "net.ipv4.tcp_fastopen_key", KEY)
        .unwrap();
    let opts = SockOptions {
        fastopen_qlen: qlen,
        ..Default::default()
    };
    let l = st.listen_with(server(), 16, &opts).unwrap();
    (st, l)
}

fn the_cookie() -> FastOpenOption {
    let k = FastOpenKeys::parse(KEY).unwrap();
    cookie_gen_cipher(&k.keys[0], client().ip(), server().ip())
}

/// Sends a SYN from `from` with the Fast Open option and data; returns the reply.
fn syn(st: &mut Stack, from: SocketAddr, fo: Option<FastOpenOption>, data: &[u8]) -> TcpRepr {
    let th = TcpRepr {
        seq: ISN,
        flags: TcpFlags::SYN,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            fastopen: fo,
            ..Default::default()
        },
        ..Default::default()
    };
    st.handle_packet(
        Instant::ZERO,
        &build(from, server(), &th, data, 1),
        lowtide::RxChecksum::Verify,
    );
    reply(st, Instant::ZERO).expect("a SYN-ACK")
}

fn reply(st: &mut Stack, now: Instant) -> Option<TcpRepr> {
    let tx = st.poll_transmit(now)?;
    Some(TcpRepr::parse(&tx.packet[20..]).unwrap().0)
}

#[test]
fn a_cookie_request_gets_the_cookie_and_no_child() {
    let (mut st, l) = listening("0x2", Some(4));
    let sa = syn(
        &mut st,
        client(),
        Some(FastOpenOption::request(true)),
        b"early",
    );
    assert_eq!(sa.ack, ISN + 1, "the data waits for the handshake");
    let c = sa.options.fastopen.expect("cookie");
    assert!(c.exp, "answered in the request's format");
    assert_eq!(c.bytes(), the_cookie().bytes());
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenCookieReqd), 1);
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenPassive), 0);
    assert!(st.accept(l).is_err(), "no child before the handshake");
    // tcp_create_openreq_child has made no child yet: nothing counted.
    assert_eq!(st.counters().get(Mib::TcpPassiveOpens), 0);
}

#[test]
fn a_valid_cookie_opens_a_child_with_the_data_at_once() {
    let (mut st, l) = listening("0x2", Some(4));
    let sa = syn(&mut st, client(), Some(the_cookie()), b"hello");
    assert_eq!(sa.ack, ISN + 1 + 5, "the SYN-ACK acknowledges the data");
    assert_eq!(sa.options.fastopen, None, "a good cookie is not sent back");
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenPassive), 1);
    // tcp_fastopen_create_child made the child at its SYN, and counted it.
    assert_eq!(st.counters().get(Mib::TcpPassiveOpens), 1);
    let c = st
        .accept(l)
        .expect("child in the accept queue before the handshake");
    assert_eq!(st.state(c), Ok(TcpState::SynRecv));
    assert_eq!(
        st.info(Instant::ZERO, c).unwrap().options & (32 | 128),
        32 | 128,
        "TCPI_OPT_SYN_DATA and TCPI_OPT_TFO_CHILD"
    );
    let mut buf = [0u8; 16];
    assert_eq!(st.recv(Instant::ZERO, c, &mut buf), Ok(5));
    assert_eq!(
        st.send(Instant::ZERO, c, b"reply"),
        Ok(5),
        "sends before the handshake"
    );
    let d = reply(&mut st, Instant::ZERO).expect("data");
    assert_eq!((d.flags, d.ack), (TcpFlags::ACK | TcpFlags::PSH, ISN + 6));
}

/// A Fast Open child's `tcp_info` before its handshake completes, as Linux 6.18's:
/// `tcp_v4_syn_recv_sock` guesses `rcv_mss` from the request's window
/// (`tcp_initialize_rcv_mss`: `TCP_MSS_DEFAULT` at most), and its SYN-ACK, resent
/// by its timer (`tcp_rtx_synack`), is the request's: in `total_retrans`, not in
/// `segs_out`; its own data counts.
#[test]
fn a_child_in_syn_recv_counts_no_synack_and_guesses_its_rcv_mss() {
    let (mut st, l) = listening("0x2", Some(4));
    syn(&mut st, client(), Some(the_cookie()), b"hello");
    let c = st.accept(l).unwrap();
    let i = st.info(Instant::ZERO, c).unwrap();
    assert_eq!((i.rcv_mss, i.segs_out, i.total_retrans), (536, 0, 0));
    let at = st.poll_timeout().expect("the SYN-ACK timer");
    st.handle_timeout(at);
    let r = reply(&mut st, at).expect("the SYN-ACK again");
    assert!(r.flags.contains(TcpFlags::SYN | TcpFlags::ACK));
    let i = st.info(at, c).unwrap();
    assert_eq!((i.rcv_mss, i.segs_out, i.total_retrans), (536, 0, 1));
    assert_eq!(st.send(at, c, b"reply"), Ok(5));
    assert!(reply(&mut st, at).is_some_and(|d| d.flags.contains(TcpFlags::PSH)));
    let i = st.info(at, c).unwrap();
    assert_eq!((i.segs_out, i.data_segs_out), (1, 1));
}

#[test]
fn a_bad_cookie_falls_back_and_gets_the_right_one() {
    let (mut st, l) = listening("0x2", Some(4));
    let bad = FastOpenOption::cookie(false, &[0xaa; 8]);
    let sa = syn(&mut st, client(), Some(bad), b"hello");
    assert_eq!(sa.ack, ISN + 1);
    assert_eq!(sa.options.fastopen.map(|c| c.len), Some(8));
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenPassiveFail), 1);
    assert!(st.accept(l).is_err());
}

#[test]
fn the_backup_key_still_opens_and_renews_the_cookie() {
    let (mut st, _l) = listening("0x2", Some(4));
    let keys = format!("00000001-00000002-00000003-00000004,{KEY}");
    st.set_sysctl(Instant::ZERO, "net.ipv4.tcp_fastopen_key", &keys)
        .unwrap();
    let sa = syn(&mut st, client(), Some(the_cookie()), b"hello");
    assert_eq!(sa.ack, ISN + 6);
    let k = FastOpenKeys::parse(&keys).unwrap();
    let primary = cookie_gen_cipher(&k.keys[0], client().ip(), server().ip());
    assert_eq!(
        sa.options.fastopen.map(|c| c.bytes().to_vec()),
        Some(primary.bytes().to_vec())
    );
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenPassiveAltKey), 1);
}

/// `tcp_create_openreq_child` starts a child's `segs_in` at 1 (its SYN), which
/// `tcp_fastopen_add_skb` recounts only for a SYN with data (reset to 0, then
/// `tcp_segs_in`: once, and in `data_segs_in`): a valid cookie without data opens
/// a child with `tcpi_segs_in` 1 and `tcpi_data_segs_in` 0.
#[test]
fn a_fastopen_childs_syn_is_its_first_segment_in_with_or_without_data() {
    for (data, want) in [(&b""[..], (1, 0)), (&b"hello"[..], (1, 1))] {
        let (mut st, l) = listening("0x2", Some(4));
        syn(&mut st, client(), Some(the_cookie()), data);
        let c = st.accept(l).expect("a child");
        let i = st.info(Instant::ZERO, c).unwrap();
        assert_eq!((i.segs_in, i.data_segs_in), want, "{data:?}");
    }
}

#[test]
fn cookie_not_required_takes_data_without_a_cookie() {
    let (mut st, _l) = listening("0x202", Some(4));
    let sa = syn(&mut st, client(), None, b"hello");
    assert_eq!(sa.ack, ISN + 6);
    // Without TFO_SERVER_ENABLE nothing of it applies.
    let (mut st, _l) = listening("0x201", Some(4));
    let sa = syn(&mut st, client(), Some(the_cookie()), b"hello");
    assert_eq!((sa.ack, sa.options.fastopen), (ISN + 1, None));
}

/// tcp_fastopen_no_cookie: a route to the client with `fastopen_no_cookie` takes
/// data without a cookie as `TFO_SERVER_COOKIE_NOT_REQD` does; other clients still
/// need one.
#[test]
fn a_no_cookie_route_takes_data_without_a_cookie() {
    let (mut st, _l) = listening("0x2", Some(4));
    let mut metrics = lowtide::route::Metrics::default();
    metrics.set(lowtide::route::Rtax::FastopenNoCookie, 1, false);
    st.route_replace(lowtide::route::Route {
        dst: client().ip(),
        prefix_len: 32,
        metrics,
    });
    let sa = syn(&mut st, client(), None, b"hello");
    assert_eq!(sa.ack, ISN + 6);
    let sa = syn(&mut st, addr("192.0.2.2", 40000), None, b"hello");
    assert_eq!(sa.ack, ISN + 1, "no route: the data waits");
}

#[test]
fn listeners_need_tcp_fastopen_unless_wo_sockopt() {
    let (mut st, _l) = listening("0x2", None);
    assert_eq!(
        syn(&mut st, client(), Some(the_cookie()), b"x").ack,
        ISN + 1
    );
    let (mut st, _l) = listening("0x402", None);
    assert_eq!(
        syn(&mut st, client(), Some(the_cookie()), b"x").ack,
        ISN + 2
    );
}

#[test]
fn a_full_fastopen_queue_falls_back_and_counts() {
    let (mut st, _l) = listening("0x2", Some(1));
    assert_eq!(
        syn(&mut st, client(), Some(the_cookie()), b"x").ack,
        ISN + 2
    );
    let other = addr("192.0.2.1", 40001);
    let sa = syn(&mut st, other, Some(the_cookie()), b"x");
    assert_eq!(
        (sa.ack, sa.options.fastopen),
        (ISN + 1, None),
        "not even a cookie"
    );
    assert_eq!(st.counters().get(Mib::TcpExtTCPFastOpenListenOverflow), 1);
}

/// The SYN-ACK retransmission gaps (seconds) of a Fast Open child whose listener
/// has `syncnt` (`TCP_SYNCNT`, 0: unset) until the child gives up.
fn synack_gaps_until_timeout(syncnt: u8) -> Vec<u64> {
    let (mut st, l) = listening("0x2", Some(4));
    let opts = SockOptions {
        fastopen_qlen: Some(4),
        syn_retries: syncnt,
        ..Default::default()
    };
    st.socket(l).set_listener_options(&opts).unwrap();
    syn(&mut st, client(), Some(the_cookie()), b"x");
    let c = st.accept(l).unwrap();
    let mut t = Instant::ZERO;
    let mut gaps = Vec::new();
    while let Some(at) = st.poll_timeout() {
        st.handle_timeout(at);
        match reply(&mut st, at) {
            Some(r) => {
                assert!(r.flags.contains(TcpFlags::SYN | TcpFlags::ACK));
                assert_eq!(r.options.fastopen, None);
                gaps.push((at - t).as_secs());
                t = at;
                // tcp_update_rto_stats: each resend an RTO of one recovery.
                let i = st.info(at, c).unwrap();
                assert_eq!(i.total_rto, gaps.len() as u32);
                assert_eq!(i.total_rto_recoveries, 1);
            }
            None => break,
        }
    }
    // tcp_syn_ack_timeout: every expiry counts, the one that gives up too.
    let timeouts = st.counters().get(Mib::TcpExtTCPTimeouts);
    assert_eq!(timeouts, gaps.len() as u64 + 1);
    assert_eq!(st.state(c), Ok(TcpState::Closed));
    assert_eq!(st.socket_error(c), Ok(Some(lowtide::SocketError::TimedOut)));
    // tcp_write_err's tcp_done: an attempt that failed in SYN-RECV.
    assert_eq!(st.counters().get(Mib::TcpAttemptFails), 1);
    gaps
}

#[test]
fn the_synack_timer_resends_without_cookie_then_gives_up() {
    // tcp_synack_retries (5) + 1 retransmissions, 1 s doubling each time.
    assert_eq!(synack_gaps_until_timeout(0), [1, 2, 4, 8, 16, 32]);
    // tcp_fastopen_synack_timer: icsk_syn_retries (the listener's TCP_SYNCNT,
    // inherited by the child) ?: tcp_synack_retries + 1.
    assert_eq!(synack_gaps_until_timeout(2), [1, 2]);
}

/// tcp_rcv_state_process runs tcp_ack on the ACK that ends SYN-RECV before it sets
/// the child's window (tcp_init_wl): the child's snd_wl1 is still the peer's ISN,
/// so tcp_may_update_window takes the ACK (FLAG_WIN_UPDATE) and it is no duplicate
/// ACK, even with the child's data in flight and nothing of it acknowledged.
/// Without SACK a duplicate ACK would count a segment as SACKed
/// (tcp_add_reno_sack): delivered 2, sacked 1. With the same window as the SYN's
/// and with a window that differs.
#[test]
fn the_ack_of_the_synack_is_no_duplicate_ack_of_the_childs_data() {
    for window in [65535u16, 257] {
        let (mut st, l) = listening("0x2", Some(4));
        st.set_sysctl(Instant::ZERO, "net.ipv4.tcp_sack", "0")
            .unwrap();
        let sa = syn(&mut st, client(), Some(the_cookie()), b"hello");
        let c = st.accept(l).unwrap();
        assert_eq!(st.send(Instant::ZERO, c, &[7u8; 2000]), Ok(2000));
        while reply(&mut st, Instant::ZERO).is_some() {}
        let ack = TcpRepr {
            seq: ISN + 6,
            ack: sa.seq.wrapping_add(1),
            flags: TcpFlags::ACK,
            window,
            ..Default::default()
        };
        let at = Instant::from_nanos(100_000_000);
        st.handle_packet(
            at,
            &build(client(), server(), &ack, b"", 1),
            lowtide::RxChecksum::Verify,
        );
        assert_eq!(st.state(c), Ok(TcpState::Established));
        let i = st.info(at, c).unwrap();
        assert_eq!(
            (i.delivered, i.sacked, i.unacked),
            (1, 0, 2),
            "window {window}"
        );
    }
}

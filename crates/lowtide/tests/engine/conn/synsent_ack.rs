//! The ACK of the SYN-ACK (`tcp_rcv_synsent_state_process`'s last step): sent at
//! once, or saved for data about to be written when a writer waits on the
//! connection (`sk_write_pending`) or the socket is in pingpong mode
//! (`TCP_QUICKACK` 0); `TCP_QUICKACK` itself (`__tcp_sock_set_quickack`); the
//! SYN-ACK's PAWS test and a Fast Open SYN-ACK's FIN. Before it, the SYN itself
//! waits in the retransmit queue (`tcp_connect_queue_skb`) until the SYN-ACK frees
//! it.

use crate::common::*;
use lowtide::tcp::sockopt::SockOptions;
use lowtide::{Config, Instant, SocketHandle, Stack, UserBytes};
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use std::time::Duration;

fn me() -> std::net::SocketAddr {
    addr("192.168.0.1", 0)
}

fn peer() -> std::net::SocketAddr {
    addr("192.0.2.1", 8080)
}

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

/// A client whose SYN is out; returns it and the SYN's sequence number.
fn open(st: &mut Stack, opts: &SockOptions) -> (SocketHandle, u32) {
    let h = st.connect_with(Instant::ZERO, me(), peer(), opts).unwrap();
    let tx = st.poll_transmit(Instant::ZERO).expect("SYN");
    // The device sends it: its skb's fast clone is free for a retransmission.
    st.handle_tx_complete(Instant::ZERO, tx.token);
    let (th, _) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    (h, th.seq)
}

/// A segment from the peer (ISN 5000) acknowledging `ack` (relative to our ISN).
fn from_peer(st: &mut Stack, h: SocketHandle, now: Instant, th: TcpRepr, payload: &[u8]) {
    let (local, _) = st.addresses(h).unwrap();
    let pkt = build(peer(), local, &th, payload, 1);
    st.handle_packet(now, &pkt, lowtide::RxChecksum::Verify);
}

fn synack(st: &mut Stack, h: SocketHandle, isn: u32, now: Instant) {
    let th = TcpRepr {
        seq: 5000,
        ack: isn.wrapping_add(1),
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            ..Default::default()
        },
        ..Default::default()
    };
    from_peer(st, h, now, th, &[]);
}

/// 100 bytes of data from the peer, its first after the handshake.
fn peer_data(st: &mut Stack, h: SocketHandle, isn: u32, acked: u32, now: Instant) {
    let th = TcpRepr {
        seq: 5001,
        ack: isn.wrapping_add(1 + acked),
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 1000,
        ..Default::default()
    };
    from_peer(st, h, now, th, &[7; 100]);
}

/// What the stack sends at `now`: (sequence offset from `isn`, payload length, ack).
fn sent(st: &mut Stack, isn: u32, now: Instant) -> Vec<(u32, usize, u32)> {
    let mut out = Vec::new();
    while let Some(tx) = st.poll_transmit(now) {
        st.handle_tx_complete(now, tx.token);
        let (th, hl) = TcpRepr::parse(&tx.packet[20..]).unwrap();
        out.push((
            th.seq.wrapping_sub(isn),
            tx.packet.len() - 20 - hl,
            th.ack.wrapping_sub(5000),
        ));
    }
    out
}

fn stack() -> Stack {
    let mut st = Stack::new(Config::default(), 3);
    st.add_address(me().ip());
    st
}

#[test]
fn without_a_waiting_writer_the_ack_goes_at_once_and_data_is_quick_acked() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    synack(&mut st, h, isn, at(20));
    assert_eq!(sent(&mut st, isn, at(20)), vec![(1, 0, 1)]);
    st.send(at(20), h, &[1; 1000]).unwrap();
    assert_eq!(sent(&mut st, isn, at(20)), vec![(1, 1000, 1)]);
    // Not a reply within ato of a receipt (ato was 0): quick ACKs.
    peer_data(&mut st, h, isn, 1000, at(40));
    assert_eq!(sent(&mut st, isn, at(40)), vec![(1001, 0, 101)]);
}

#[test]
fn a_waiting_writer_saves_the_ack_for_its_data_and_enters_pingpong() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    st.socket(h).set_write_pending(true).unwrap();
    synack(&mut st, h, isn, at(20));
    assert_eq!(sent(&mut st, isn, at(20)), vec![], "the ACK is saved");
    // TCP_DELACK_MAX (200 ms) from 20 ms, on the timer wheel's level 1 (8 ms
    // buckets): 224 ms.
    assert_eq!(
        st.poll_timeout(),
        Some(at(224)),
        "the delayed-ACK timer runs for TCP_DELACK_MAX"
    );
    // The writer wakes and writes: its data carries the ACK.
    st.socket(h).set_write_pending(false).unwrap();
    st.send(at(20), h, &[1; 1000]).unwrap();
    assert_eq!(sent(&mut st, isn, at(20)), vec![(1, 1000, 1)]);
    // Data sent within ato (TCP_ATO_MIN after tcp_enter_quickack_mode) of the
    // SYN-ACK is a reply: pingpong mode, so the peer's data is not quick-ACKed.
    peer_data(&mut st, h, isn, 1000, at(40));
    assert_eq!(sent(&mut st, isn, at(40)), vec![]);
    let info = st.info(at(40), h).unwrap();
    assert_eq!(info.ato, 40_000, "ato is TCP_ATO_MIN");
}

#[test]
fn the_saved_ack_goes_when_the_timer_fires() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    st.socket(h).set_write_pending(true).unwrap();
    synack(&mut st, h, isn, at(20));
    assert_eq!(sent(&mut st, isn, at(20)), vec![]);
    st.handle_timeout(at(223));
    assert_eq!(
        sent(&mut st, isn, at(223)),
        vec![],
        "the wheel runs it at 224 ms"
    );
    st.handle_timeout(at(224));
    assert_eq!(sent(&mut st, isn, at(224)), vec![(1, 0, 1)]);
}

#[test]
fn quickack_zero_before_connect_saves_the_ack_too() {
    let mut st = stack();
    let opts = SockOptions {
        pingpong: true,
        ..SockOptions::default()
    };
    let (h, isn) = open(&mut st, &opts);
    assert!(!st.socket_ref(h).quickack().unwrap());
    synack(&mut st, h, isn, at(20));
    assert_eq!(sent(&mut st, isn, at(20)), vec![]);
    // tcp_enter_quickack_mode left pingpong mode.
    assert!(st.socket_ref(h).quickack().unwrap());
}

#[test]
fn quickack_on_sends_an_owed_ack_and_an_even_value_returns_to_pingpong() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    synack(&mut st, h, isn, at(20));
    sent(&mut st, isn, at(20));
    st.socket(h).set_quickack(at(20), 0).unwrap();
    assert!(!st.socket_ref(h).quickack().unwrap());
    peer_data(&mut st, h, isn, 0, at(40));
    assert_eq!(
        sent(&mut st, isn, at(40)),
        vec![],
        "pingpong: the ACK waits"
    );
    // A read of one pushed segment in pingpong mode leaves the ACK owed.
    let mut buf = [0; 200];
    assert_eq!(st.recv(at(41), h, &mut buf).unwrap(), 100);
    assert_eq!(sent(&mut st, isn, at(41)), vec![]);
    // tcp_cleanup_rbuf sends it only once the receive queue is empty
    // (sk_rmem_alloc 0), as it now is.
    st.socket(h).set_quickack(at(41), 2).unwrap();
    assert_eq!(sent(&mut st, isn, at(41)), vec![(1, 0, 101)]);
    assert!(
        !st.socket_ref(h).quickack().unwrap(),
        "2 is even: back in pingpong mode"
    );
    // Without an owed ACK nothing is sent, and 1 leaves pingpong mode for good.
    st.socket(h).set_quickack(at(42), 1).unwrap();
    assert_eq!(sent(&mut st, isn, at(42)), vec![]);
    assert!(st.socket_ref(h).quickack().unwrap());
}

/// tcp_rcv_synsent_state_process's PAWS test: a SYN-ACK whose TSecr echoes no time
/// since our first SYN draws a reset (TcpExtPAWSActive) and SYN-SENT goes on; a
/// later SYN-ACK echoing our SYN's TSval establishes the connection.
#[test]
fn synack_with_a_bad_tsecr_is_reset_and_a_good_one_connects() {
    let mut st = stack();
    let h = st
        .connect_with(Instant::ZERO, me(), peer(), &SockOptions::default())
        .unwrap();
    let tx = st.poll_transmit(Instant::ZERO).expect("SYN");
    let (syn, _) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    let (tsval, _) = syn.options.timestamp.expect("timestamps on by default");
    let synack_ts = |ecr: u32| TcpRepr {
        seq: 5000,
        ack: syn.seq.wrapping_add(1),
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            timestamp: Some((77, ecr)),
            ..Default::default()
        },
        ..Default::default()
    };
    from_peer(&mut st, h, at(10), synack_ts(tsval.wrapping_sub(5000)), &[]);
    let tx = st.poll_transmit(at(10)).expect("a reset");
    let (th, _) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    assert!(th.flags.contains(TcpFlags::RST));
    assert_eq!(st.counters().get(lowtide::Mib::TcpExtPAWSActive), 1);
    assert_eq!(st.state(h), Ok(lowtide::TcpState::SynSent));
    from_peer(&mut st, h, at(20), synack_ts(tsval), &[]);
    assert_eq!(st.state(h), Ok(lowtide::TcpState::Established));
}

/// tcp_fastopen_add_skb on the client: a FIN in a SYN-ACK is taken (tcp_fin):
/// CLOSE-WAIT, and the reader sees the end of the stream (after the data).
#[test]
fn fin_in_a_fast_open_synack_moves_to_close_wait() {
    let opts = SockOptions {
        fastopen_no_cookie: true,
        ..SockOptions::default()
    };
    let mut st2 = {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.tcp_fastopen", "5").unwrap();
        let mut s = Stack::new(cfg, 3);
        s.add_address(me().ip());
        s
    };
    let (h, n) = st2
        .connect_fastopen(
            Instant::ZERO,
            me(),
            peer(),
            &opts,
            Some(UserBytes::Bytes(&[1; 100])),
            false,
        )
        .unwrap();
    assert_eq!(n, 100);
    let tx = st2.poll_transmit(Instant::ZERO).expect("SYN with data");
    let (syn, _) = TcpRepr::parse(&tx.packet[20..]).unwrap();
    let th = TcpRepr {
        seq: 5000,
        ack: syn.seq.wrapping_add(101),
        flags: TcpFlags::SYN | TcpFlags::ACK | TcpFlags::FIN,
        window: 65535,
        options: TcpOptions {
            mss: Some(1460),
            ..Default::default()
        },
        ..Default::default()
    };
    from_peer(&mut st2, h, at(10), th, &[9; 50]);
    assert_eq!(st2.state(h), Ok(lowtide::TcpState::CloseWait));
    let mut buf = [0; 100];
    assert_eq!(st2.recv(at(10), h, &mut buf).unwrap(), 50);
    assert_eq!(st2.recv(at(10), h, &mut buf).unwrap(), 0, "end of stream");
}

/// tcp_connect_queue_skb: the SYN is one packet out, its skb in sk_wmem_queued,
/// until the SYN-ACK's tcp_clean_rtx_queue frees it (FLAG_SYN_ACKED): delivered,
/// counted in bytes_acked, and timed from its transmission.
#[test]
fn the_syn_is_in_flight_until_the_synack_frees_it() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    let info = st.info(at(10), h).unwrap();
    assert_eq!(
        (info.state, info.unacked, info.lost, info.retrans),
        ("SYN_SENT", 1, 0, 0)
    );
    assert!(info.wmem_queued > 0, "the SYN's skb is charged");
    synack(&mut st, h, isn, at(30));
    let info = st.info(at(30), h).unwrap();
    assert_eq!((info.unacked, info.wmem_queued), (0, 0));
    assert_eq!((info.delivered, info.bytes_acked), (1, 1));
    assert_eq!(info.rtt, 30_000, "the SYN's RTT");
}

/// A SYN timeout: tcp_enter_loss marks the queued SYN lost, tcp_retransmit_skb
/// counts it retransmitted; the SYN-ACK then frees it, with no RTT sample (Karn).
/// This SYN-ACK offers no SACK, so NewReno holds Loss through it.
#[test]
fn a_syn_timeout_marks_the_queued_syn_lost_and_retransmitted() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    // The 1 s SYN timeout, on the timer wheel's level 2 (64 ms buckets).
    st.handle_timeout(at(1024));
    assert_eq!(sent(&mut st, isn, at(1024)).len(), 1, "the SYN again");
    let info = st.info(at(1024), h).unwrap();
    assert_eq!(info.ca_state, "Loss");
    assert_eq!((info.unacked, info.lost, info.retrans), (1, 1, 1));
    assert_eq!((info.total_retrans, info.snd_cwnd), (1, 1));
    synack(&mut st, h, isn, at(1030));
    let info = st.info(at(1030), h).unwrap();
    assert_eq!(info.ca_state, "Loss");
    assert_eq!((info.unacked, info.lost, info.retrans), (0, 0, 0));
    assert_eq!((info.delivered, info.rtt), (1, 0));
}

/// The SYN-ACK takes tcp_ack to its end: tcp_newly_delivered counts the SYN in
/// TcpExtTCPDelivered, tcp_rate_gen ends tcp_init_sock's app-limited bubble
/// without a sample (tcp_info stays app-limited), and tcp_cong_control's
/// tcp_update_pacing_rate works from the SYN-SENT window, before
/// tcp_init_transfer sets its own. Two SYN timeouts leave that window at one
/// segment and no RTT sample (Karn): Linux then skips the division by srtt.
#[test]
fn the_synack_counts_the_syn_and_paces_from_the_syn_sent_window() {
    let mut st = stack();
    let (h, isn) = open(&mut st, &SockOptions::default());
    assert!(st.info(at(10), h).unwrap().delivery_rate_app_limited);
    // Each retransmission leaves the device before the next timeout (one still
    // queued would not be sent again: skb_still_in_host_queue).
    // Two 1 s SYN timeouts as the timer wheel runs them: 1.024 s, 2.048 s.
    st.handle_timeout(at(1024));
    let again = sent(&mut st, isn, at(1024)).len();
    st.handle_timeout(at(3000));
    let again = again + sent(&mut st, isn, at(3000)).len();
    assert_eq!(again, 2, "the SYN twice more");
    synack(&mut st, h, isn, at(3010));
    let info = st.info(at(3010), h).unwrap();
    assert_eq!(st.counters().get(lowtide::Mib::TcpExtTCPDelivered), 1);
    assert!(info.delivery_rate_app_limited);
    assert_eq!((info.snd_cwnd, info.rtt), (1, 0));
    // mss * 200 % (tcp_pacing_ss_ratio) * 1 segment * 8 * 10^4.
    assert_eq!(info.pacing_rate, info.snd_mss as u64 * 200 * 80_000);
}

/// `tcp_connect_init` before the SYN-ACK: the clamp `tcp_v4_connect` /
/// `tcp_v6_connect` leave (536 / 1220) or `TCP_MAXSEG`, less the timestamp our SYN
/// offers, is the MSS (`tcp_sync_mss`); `tcp_initialize_rcv_mss` runs with no
/// receive window yet (`TCP_MIN_MSS`); `rcvq_space` waits for the handshake. The
/// SYN-ACK's MSS and options then set them (here: no timestamps).
#[test]
fn syn_sent_mss_as_tcp_connect_init() {
    let mss = |cfg: Config, local: &str, remote: &str, user_mss: u32| {
        let mut st = Stack::new(cfg, 1);
        st.add_address(local.parse().unwrap());
        let opts = SockOptions {
            user_mss,
            ..Default::default()
        };
        let h = st
            .connect_with(Instant::ZERO, addr(local, 0), addr(remote, 80), &opts)
            .unwrap();
        let i = st.info(Instant::ZERO, h).unwrap();
        assert_eq!(st.socket_ref(h).maxseg(), Ok(i.snd_mss), "TCP_MAXSEG");
        (i.snd_mss, i.rcv_mss, i.rcv_space, i.advmss)
    };
    let cfg = Config::default;
    assert_eq!(
        mss(cfg(), "192.168.0.1", "192.0.2.1", 0),
        (524, 88, 0, 1460)
    );
    assert_eq!(mss(cfg(), "fd00::1", "fd00::2", 0), (1208, 88, 0, 1440));
    assert_eq!(
        mss(cfg(), "192.168.0.1", "192.0.2.1", 1000),
        (988, 88, 0, 1000)
    );
    let no_ts = Config {
        tcp_timestamps: false,
        ..cfg()
    };
    assert_eq!(
        mss(no_ts, "192.168.0.1", "192.0.2.1", 0),
        (536, 88, 0, 1460)
    );

    // The SYN-ACK without timestamps: the peer's MSS whole, the receive side sized.
    let mut st = Stack::new(Config::default(), 1);
    st.add_address(me().ip());
    let (h, iss) = open(&mut st, &SockOptions::default());
    let synack = TcpRepr {
        seq: 5000,
        ack: iss.wrapping_add(1),
        flags: TcpFlags::SYN | TcpFlags::ACK,
        window: 65535,
        options: TcpOptions {
            mss: Some(1000),
            ..Default::default()
        },
        ..Default::default()
    };
    from_peer(&mut st, h, at(10), synack, &[]);
    let i = st.info(at(10), h).unwrap();
    assert_eq!((i.snd_mss, i.rcv_mss), (1000, 536));
    assert!(i.rcv_space > 0);
}

//! Packet-exchange tests for the state machine, one section per state.

use crate::common::*;
use lowtide::{Config, EventKind, Shutdown, SocketError, SocketHandle, TcpState};
use lowtide_wire::tcp::TcpFlags;
use std::time::Duration;

fn connected() -> (Pair, SocketHandle, SocketHandle) {
    establish(Config::default())
}

mod listen_and_syn {
    use super::*;

    #[test]
    fn three_way_handshake_negotiates_options() {
        let (p, c, s) = connected();
        let ia = p.a.info(p.now, c).unwrap();
        let ib = p.b.info(p.now, s).unwrap();
        assert_eq!(ia.state, "ESTABLISHED");
        assert_eq!(ib.state, "ESTABLISHED");
        // 1500 MTU - 40 - 12 bytes of timestamps.
        assert_eq!(ia.snd_mss, 1448);
        assert!(ia.rtt >= 20_000 && ia.rtt < 21_000, "rtt {}", ia.rtt);
        assert_eq!(p.a.counters().get(lowtide::Mib::TcpActiveOpens), 1);
        assert_eq!(p.b.counters().get(lowtide::Mib::TcpPassiveOpens), 1);
    }

    #[test]
    fn data_times_start_when_the_connection_is_established() {
        // Linux sets lrcvtime and lsndtime in tcp_finish_connect (active side, at the
        // SYN-ACK) and tcp_create_openreq_child (passive side, at the final ACK), so
        // tcpi_last_data_recv/sent count from there (packetdrill
        // tcp_info/tcp-info-last_data_recv.pkt). One-way delay 10 ms: A gets the
        // SYN-ACK at 20 ms, B the ACK at 30 ms; establish() returns at 40 ms.
        let (p, c, s) = connected();
        assert_eq!(
            p.now.saturating_since(lowtide::Instant::ZERO),
            Duration::from_millis(40)
        );
        let ia = p.a.info(p.now, c).unwrap();
        let ib = p.b.info(p.now, s).unwrap();
        assert_eq!((ia.last_data_recv, ia.last_data_sent), (20, 20));
        assert_eq!((ib.last_data_recv, ib.last_data_sent), (10, 10));
        // tcp_ack sets rcv_tstamp on the SYN-ACK (A) and the final ACK (B).
        assert_eq!((ia.last_ack_recv, ib.last_ack_recv), (20, 10));
    }

    #[test]
    fn bytes_acked_and_received_count_syn_and_fin_as_linux() {
        // tcp_snd_una_update / tcp_rcv_nxt_update add sequence space: measured on
        // this machine's Linux over loopback, a client that sends 1000 bytes and
        // shuts down reads bytes_acked 1, 1001, 1002; its server bytes_acked 0 and
        // bytes_received 1001.
        let (mut p, c, s) = connected();
        assert_eq!(p.a.info(p.now, c).unwrap().bytes_acked, 1);
        let data = pattern(1000, 7);
        assert_eq!(send_all(&mut p, true, c, s, &data), data);
        p.drive_for(Duration::from_millis(100));
        assert_eq!(p.a.info(p.now, c).unwrap().bytes_acked, 1001);
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(Duration::from_millis(100));
        let (ia, ib) = (p.a.info(p.now, c).unwrap(), p.b.info(p.now, s).unwrap());
        assert_eq!((ia.bytes_acked, ia.bytes_received), (1002, 0));
        assert_eq!((ib.bytes_acked, ib.bytes_received), (0, 1001));
    }

    #[test]
    fn last_ack_recv_follows_acks_not_data() {
        // tcpi_last_ack_recv is now - rcv_tstamp (tcp_get_info), which tcp_ack
        // moves on every acceptable ACK; the sender of a one-way transfer gets
        // ACKs but no data, so its last_data_recv keeps growing.
        let (mut p, c, s) = connected();
        p.drive_for(Duration::from_millis(500));
        let data = pattern(10_000, 3);
        assert_eq!(send_all(&mut p, true, c, s, &data), data);
        p.drive_for(Duration::from_millis(100));
        let ia = p.a.info(p.now, c).unwrap();
        assert!(
            ia.last_data_recv >= 600,
            "last_data_recv {}",
            ia.last_data_recv
        );
        assert!(
            ia.last_ack_recv <= 130,
            "last_ack_recv {}",
            ia.last_ack_recv
        );
    }

    #[test]
    fn syn_to_closed_port_is_refused() {
        let mut p = Pair::new(Config::default());
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 81)).unwrap();
        p.drive_for(Duration::from_millis(100));
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert!(p
            .events_a
            .iter()
            .any(|e| e.kind == EventKind::Error(SocketError::ConnectionRefused)));
        assert_eq!(p.b.counters().get(lowtide::Mib::TcpOutRsts), 1);
    }

    #[test]
    fn syn_is_retransmitted_then_times_out() {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.tcp_syn_retries", "2").unwrap();
        let mut p = Pair::new(cfg);
        p.filter = Some(Box::new(|_, _| Verdict::Drop));
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_for(Duration::from_secs(3));
        assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
        p.drive_for(Duration::from_secs(10));
        // Linear 1 s timeouts (tcp_syn_linear_timeouts), then backoff: the time
        // tcp_model_timeout gives 2 retries from 1 s (7 s) ends it first.
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert!(p
            .events_a
            .iter()
            .any(|e| e.kind == EventKind::Error(SocketError::TimedOut)));
    }

    /// SYN retransmissions as Linux 6.18 times them: the first
    /// `tcp_syn_linear_timeouts` (4) timeouts keep the 1 s initial RTO, then it
    /// doubles; SYN-SENT gives up after `tcp_syn_retries` + 4 retransmissions or
    /// once `tcp_model_timeout(tcp_syn_retries, 1 s)` has passed (127 s for 6):
    /// 11 SYNs, the last at 67 s, `ETIMEDOUT` at 131 s.
    #[test]
    fn syn_timeouts_are_linear_first_then_back_off() {
        let syn_times = |cfg: Config, syncnt: Option<u8>, secs: u64| {
            let mut p = Pair::new(cfg);
            p.record = true;
            p.filter = Some(Box::new(|_, _| Verdict::Drop));
            let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
            if let Some(n) = syncnt {
                p.a.socket(c).set_syn_retries(n).unwrap();
            }
            let start = p.now;
            let mut failed_at = None;
            for step in 1..=secs * 10 {
                p.drive_for(Duration::from_millis(100));
                if failed_at.is_none() && p.a.state(c) == Ok(TcpState::Closed) {
                    failed_at = Some((step + 5) / 10);
                }
            }
            let times: Vec<u64> = p
                .dropped
                .iter()
                .filter(|(_, d, pk)| *d == Dir::AtoB && Seg::parse(pk).has(TcpFlags::SYN))
                .map(|(t, _, _)| t.saturating_since(start).as_millis() as u64)
                .collect();
            assert!(p
                .events_a
                .iter()
                .any(|e| e.kind == EventKind::Error(SocketError::TimedOut)));
            (times, failed_at, start)
        };
        // Each timeout as the timer wheel runs it (a little after its expiry), and
        // the last one's end seen on the 100 ms steps.
        let expect = |start, delays: &[u64]| {
            let mut chain = wheel_chain(start, delays);
            let end = chain.pop().unwrap();
            (chain, Some((end.div_ceil(100) + 5) / 10))
        };
        let (times, failed, start) = syn_times(Config::default(), None, 200);
        let delays = [1, 1, 1, 1, 1, 2, 4, 8, 16, 32, 64].map(|s| s * 1000);
        assert_eq!((times, failed), expect(start, &delays));
        // tcp_syn_linear_timeouts = 0: the classic 1, 2, 4 ... backoff.
        let mut cfg = Config::default();
        cfg.set("net.ipv4.tcp_syn_linear_timeouts", "0").unwrap();
        let (times, failed, start) = syn_times(cfg, None, 200);
        let delays = [1, 2, 4, 8, 16, 32, 64].map(|s| s * 1000);
        assert_eq!((times, failed), expect(start, &delays));
        // TCP_SYNCNT 1: tcp_model_timeout(1, 1 s) = 3 s ends it after two
        // retransmissions, however many linear timeouts remain.
        let (times, failed, start) = syn_times(Config::default(), Some(1), 10);
        assert_eq!(times, wheel_chain(start, &[1000, 1000]));
        assert_eq!(failed, Some(3));
    }

    /// The first SYN from A arrives 500 ms late (so B's SYN-ACK timer is not due
    /// when the retransmitted SYN arrives), and B's first SYN-ACK is lost.
    fn late_first_syn_lost_first_synack(p: &mut Pair) {
        let (mut syns, mut synacks) = (0, 0);
        p.extra_delay = Some(Box::new(move |_, d, pk| {
            let first_syn = d == Dir::AtoB && Seg::parse(pk).th.flags == TcpFlags::SYN && {
                syns += 1;
                syns == 1
            };
            Duration::from_millis(if first_syn { 500 } else { 0 })
        }));
        p.filter = Some(Box::new(move |d, pk| {
            let synack = d == Dir::BtoA && Seg::parse(pk).has(TcpFlags::SYN);
            synacks += synack as u32;
            match synack && synacks == 1 {
                true => Verdict::Drop,
                false => Verdict::Pass,
            }
        }));
    }

    /// A retransmitted SYN reaching a SYN-RECV socket whose SYN-ACK was lost is
    /// answered with the SYN-ACK (`tcp_check_req`'s `inet_rtx_syn_ack`), at once.
    /// lowtide sent the challenge ACK an out-of-window SYN draws, which the SYN-SENT
    /// client ignores, so the handshake waited for the server's own SYN-ACK timer
    /// (soak run 7954: 146 flows behind a 1-packet queue took an hour to connect).
    #[test]
    fn retransmitted_syn_gets_the_syn_ack_again() {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let _l = p.b.listen(addr(B, 80), 8).unwrap();
        late_first_syn_lost_first_synack(&mut p);
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        // SYN at 0 (arrives 510 ms), SYN-ACK lost; SYN again when the wheel runs
        // the 1 s timer (1.024 s), arrives 1.034 s.
        p.drive_for(Duration::from_millis(1060));
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        assert_eq!(p.b.counters().get(lowtide::Mib::TcpExtTCPSynRetrans), 1);
        // A third copy of the SYN within tcp_invalid_ratelimit draws nothing.
        let syn = p
            .wire
            .iter()
            .find(|(_, d, pk)| *d == Dir::AtoB && Seg::parse(pk).has(TcpFlags::SYN))
            .map(|(_, _, pk)| pk.clone())
            .unwrap();
        let mut q = Pair::new(Config::default());
        q.record = true;
        let _l = q.b.listen(addr(B, 80), 8).unwrap();
        q.inject(true, &syn);
        q.inject(true, &syn);
        q.inject(true, &syn);
        let synacks = q
            .sent_since(0, Dir::BtoA)
            .iter()
            .filter(|s| s.has(TcpFlags::SYN))
            .count();
        assert_eq!(synacks, 2, "the SYN-ACK, then one resent");
        assert_eq!(
            q.b.counters().get(lowtide::Mib::TcpExtTCPACKSkippedSynRecv),
            1
        );
    }

    /// `tcp_synack_rtt_meas` takes the handshake's RTT from the request's SYN-ACK
    /// only if it never went again (`req->num_retrans`), a resend for a
    /// retransmitted SYN included (no timeout: `num_timeout` stays 0); without
    /// timestamps the child then starts with no RTT sample (Linux 6.18,
    /// tests/packetdrill/synack-dup-syn-no-timeout-keeps-cwnd.pkt: tcpi_rtt 0).
    #[test]
    fn a_synack_resent_for_a_syn_again_gives_no_rtt_sample() {
        let cfg = Config {
            tcp_timestamps: false,
            ..Config::default()
        };
        let mut p = Pair::new(cfg);
        p.record = true;
        let l = p.b.listen(addr(B, 80), 8).unwrap();
        late_first_syn_lost_first_synack(&mut p);
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_for(Duration::from_millis(1060));
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        let s = p.b.accept(l).expect("the child");
        let i = p.b.info(p.now, s).unwrap();
        assert_eq!(
            (i.total_retrans, i.rtt),
            (1, 0),
            "a sample from the first SYN-ACK"
        );
    }

    /// `sk_acceptq_is_full` is `ack_backlog > backlog`: with backlog 1, two
    /// connections wait for accept and a third SYN is dropped.
    #[test]
    fn backlog_full_drops_syn() {
        let mut p = Pair::new(Config::default());
        let _l = p.b.listen(addr(B, 80), 1).unwrap();
        for _ in 0..2 {
            let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
            p.drive_for(Duration::from_millis(100));
            assert_eq!(p.a.state(c), Ok(TcpState::Established));
        }
        let c3 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_for(Duration::from_millis(100));
        assert_eq!(p.a.state(c3), Ok(TcpState::SynSent));
        assert!(p.b.counters().get(lowtide::Mib::TcpExtListenOverflows) >= 1);
    }
}

mod established {
    use super::*;

    #[test]
    fn bulk_both_directions() {
        let (mut p, c, s) = connected();
        let d = pattern(3_000_000, 1);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        let d2 = pattern(1_000_000, 2);
        assert_eq!(send_all(&mut p, false, s, c, &d2), d2);
        assert_eq!(p.a.counters().get(lowtide::Mib::TcpRetransSegs), 0);
    }

    #[test]
    fn survives_loss() {
        let (mut p, c, s) = connected();
        let mut n = 0u32;
        p.filter = Some(Box::new(move |dir, _| {
            n += 1;
            if dir == Dir::AtoB && n.is_multiple_of(37) {
                Verdict::Drop
            } else {
                Verdict::Pass
            }
        }));
        let d = pattern(2_000_000, 3);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        assert!(p.a.counters().get(lowtide::Mib::TcpRetransSegs) > 0);
    }

    #[test]
    fn rst_in_window_but_not_exact_gets_challenge_ack() {
        let (mut p, c, s) = connected();
        p.record = true;
        p.b.send(p.now, s, b"ping").unwrap();
        p.drive_for(Duration::from_millis(100));
        assert_eq!(p.a.recv(p.now, c, &mut [0u8; 8]), Ok(4));
        // Forge a RST from B with seq = rcv_nxt + 100.
        let info = p.a.info(p.now, c).unwrap();
        assert_eq!(info.state, "ESTABLISHED");
        let before = p.a.counters().get(lowtide::Mib::TcpExtTCPChallengeACK);
        let (la, lb) = p.a.addresses(c).unwrap();
        let pkt = forge(
            lb,
            la,
            rcv_nxt_of(&p, c).wrapping_add(100),
            0,
            lowtide_wire::tcp::TcpFlags::RST,
        );
        p.inject(false, &pkt);
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        assert_eq!(
            p.a.counters().get(lowtide::Mib::TcpExtTCPChallengeACK),
            before + 1
        );
        // Exact sequence: accepted.
        let pkt = forge(
            lb,
            la,
            rcv_nxt_of(&p, c),
            0,
            lowtide_wire::tcp::TcpFlags::RST,
        );
        p.inject(false, &pkt);
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert_eq!(
            p.a.recv(p.now, c, &mut [0u8; 4]),
            Err(SocketError::ConnectionReset)
        );
    }
}

/// The next sequence number A expects from B, from the last packet A sent.
fn rcv_nxt_of(p: &Pair, _c: SocketHandle) -> u32 {
    let (_, _, pkt) = p
        .wire
        .iter()
        .rev()
        .find(|(_, d, _)| *d == Dir::AtoB)
        .expect("A sent something");
    let ip = lowtide_wire::ip::IpRepr::parse(pkt, false).unwrap();
    let (th, _) = lowtide_wire::tcp::TcpRepr::parse(&pkt[ip.header_len..]).unwrap();
    th.ack
}

fn forge(
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    seq: u32,
    ack: u32,
    flags: lowtide_wire::tcp::TcpFlags,
) -> Vec<u8> {
    let th = lowtide_wire::tcp::TcpRepr {
        seq,
        ack,
        flags,
        window: 1000,
        ..Default::default()
    };
    tcp_packet(src, dst, &th, &[], 1, Csum::Full)
}

mod closing {
    use super::*;

    #[test]
    fn active_close_goes_through_time_wait() {
        let (mut p, c, s) = connected();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(Duration::from_millis(5));
        assert_eq!(p.a.state(c), Ok(TcpState::FinWait1));
        p.drive_for(Duration::from_millis(30));
        assert_eq!(p.a.state(c), Ok(TcpState::FinWait2));
        assert_eq!(p.b.state(s), Ok(TcpState::CloseWait));
        assert_eq!(p.b.recv(p.now, s, &mut [0u8; 8]), Ok(0));
        p.b.close(p.now, s).unwrap();
        p.drive_for(Duration::from_millis(30));
        // tcp_time_wait: the socket is done (CLOSED, as Linux's fd reads), a
        // timewait socket holds the 4-tuple for 60 s (its timer on the wheel's
        // level 4, 4.096 s buckets: up to 64.096 s).
        let (local, remote) = p.a.addresses(c).unwrap();
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert_eq!(p.a.timewait_state(local, remote), Some(TcpState::TimeWait));
        p.drive_for(Duration::from_millis(64_100));
        assert_eq!(p.a.timewait_state(local, remote), None);
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert_eq!(p.b.connection_count(), 0);
    }

    #[test]
    fn simultaneous_close_goes_through_closing() {
        let (mut p, c, s) = connected();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.b.shutdown(p.now, s, Shutdown::Write).unwrap();
        p.drive_for(Duration::from_millis(15));
        assert_eq!(p.a.state(c), Ok(TcpState::Closing));
        assert_eq!(p.b.state(s), Ok(TcpState::Closing));
        p.drive_for(Duration::from_millis(15));
        let (la, ra) = p.a.addresses(c).unwrap();
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert_eq!(p.b.state(s), Ok(TcpState::Closed));
        assert_eq!(p.a.timewait_state(la, ra), Some(TcpState::TimeWait));
        assert_eq!(p.b.timewait_state(ra, la), Some(TcpState::TimeWait));
    }

    #[test]
    fn close_with_unread_data_sends_rst() {
        let (mut p, c, s) = connected();
        p.a.send(p.now, c, b"hello").unwrap();
        p.drive_for(Duration::from_millis(30));
        p.b.close(p.now, s).unwrap();
        p.drive_for(Duration::from_millis(30));
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert_eq!(p.b.counters().get(lowtide::Mib::TcpExtTCPAbortOnClose), 1);
    }

    #[test]
    fn write_after_shutdown_is_epipe() {
        let (mut p, c, _s) = connected();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        assert_eq!(p.a.send(p.now, c, b"x"), Err(SocketError::BrokenPipe));
    }
}

/// `tcp_init_transfer`: a handshake whose SYN (or SYN-ACK) went more than twice
/// starts with a cwnd of 1; each retransmission counts in `tcpi_total_retrans` and
/// `TcpRetransSegs` (`tcp_retransmit_skb`, `tcp_rtx_synack`).
mod syn_retransmissions {
    use super::*;

    /// Drops the first `n` SYNs (or SYN-ACKs when `synack`), then connects. With
    /// `quiet_client` the client's SYN retransmissions are dropped too, so that every
    /// SYN-ACK retransmission is the server's timeout, not an answer to a repeated SYN.
    fn lose_syns(n: usize, synack: bool, quiet_client: bool) -> (Pair, SocketHandle, SocketHandle) {
        lose_syns_with(n, synack, quiet_client, Duration::ZERO)
    }

    /// [`lose_syns`] with each SYN from the client `syn_delay` late.
    fn lose_syns_with(
        n: usize,
        synack: bool,
        quiet_client: bool,
        syn_delay: Duration,
    ) -> (Pair, SocketHandle, SocketHandle) {
        let mut p = Pair::new(Config::default());
        p.extra_delay = Some(Box::new(move |_, d, pk| {
            let syn = d == Dir::AtoB && Seg::parse(pk).th.flags == TcpFlags::SYN;
            if syn {
                syn_delay
            } else {
                Duration::ZERO
            }
        }));
        let mut left = n;
        let mut syns = 0;
        p.filter = Some(Box::new(move |d, pkt| {
            let s = Seg::parse(pkt);
            let syn = d == Dir::AtoB && s.has(TcpFlags::SYN) && !s.has(TcpFlags::ACK);
            syns += syn as u32;
            if quiet_client && syn && syns > 1 {
                return Verdict::Drop;
            }
            let victim = match synack {
                false => syn,
                true => d == Dir::BtoA && s.has(TcpFlags::SYN) && s.has(TcpFlags::ACK),
            };
            if victim && left > 0 {
                left -= 1;
                return Verdict::Drop;
            }
            Verdict::Pass
        }));
        let l = p.b.listen(addr(B, 80), 4).unwrap();
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        let mut child = None;
        p.drive_until(Duration::from_secs(10), |p| {
            child = p.b.accept(l).ok();
            child.is_some()
        });
        let s = child.expect("B accepted");
        (p, c, s)
    }

    #[test]
    fn two_lost_syns_start_the_client_at_one_segment() {
        for (lost, cwnd) in [(1, 10), (2, 1)] {
            let (p, c, _) = lose_syns(lost, false, false);
            let i = p.a.info(p.now, c).unwrap();
            assert_eq!(
                (i.total_retrans, i.snd_cwnd),
                (lost as u32, cwnd),
                "{lost} lost"
            );
            assert_eq!(i.snd_ssthresh, 0x7fff_ffff, "no congestion response");
            let segs = p.a.counters().get(lowtide::Mib::TcpRetransSegs);
            assert_eq!(segs, lost as u64);
            // __tcp_transmit_skb: a retransmitted SYN is not in TcpOutSegs; the
            // first SYN and the ACK are.
            assert_eq!(
                p.a.counters().get(lowtide::Mib::TcpOutSegs),
                2,
                "{lost} lost"
            );
        }
    }

    /// Two SYN-ACK timeouts: the child starts at one segment
    /// (`tcp_create_openreq_child` sets `undo_marker` after `num_timeout`, and the
    /// ACK echoes the last SYN-ACK, so `tcp_try_undo_spurious_syn` keeps it).
    #[test]
    fn two_lost_synacks_start_the_child_at_one_segment() {
        let (p, _, s) = lose_syns(2, true, true);
        let i = p.b.info(p.now, s).unwrap();
        assert_eq!((i.total_retrans, i.snd_cwnd), (2, 1));
        // tcp_make_synack counts every SYN-ACK in TcpOutSegs, retransmitted or not.
        assert_eq!(p.b.counters().get(lowtide::Mib::TcpOutSegs), 3);
    }

    /// The same two lost SYN-ACKs, but each resent at once for the client's repeated
    /// SYN (`tcp_check_req` pushes the SYN-ACK timer back): no timeout, no
    /// `undo_marker`, the initial window ("packets are not lost but delayed").
    #[test]
    fn synacks_resent_for_repeated_syns_keep_the_initial_window() {
        // The SYNs take 30 ms more, so that each repeated SYN reaches the request
        // before its SYN-ACK timer runs: both timers are armed for 1 s, and the
        // wheel runs 1 s timers in 64 ms buckets, so with the path's 10 ms alone
        // the request's timer and the client's would share one.
        let (p, _, s) = lose_syns_with(2, true, false, Duration::from_millis(30));
        let i = p.b.info(p.now, s).unwrap();
        assert_eq!((i.total_retrans, i.snd_cwnd), (2, 10));
    }
}
